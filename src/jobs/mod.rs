//! Background work: the idle sweeper (`sweeper`) and the post-session extraction, driven by each
//! completion commit with the sweep as recovery (`extraction`). Projection catch-up runs from
//! `startup`.

pub mod extraction;
pub mod sweeper;
