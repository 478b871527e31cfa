//! Background work: the idle sweeper (`sweeper`), the post-session extraction, driven by each
//! completion commit with the sweep as recovery (`extraction`), and the studies' retention,
//! run by the sweeper (`retention`). Projection catch-up runs from `startup`.

pub mod extraction;
pub mod retention;
pub mod sweeper;
