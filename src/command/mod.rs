//! The command side: commands run on the `Session` aggregate through cqrs-es (`store`) over the
//! event store that keeps recently used sessions folded (`event_store`), and studies — drafts,
//! publishing, their content-addressed versions (`studies`), and erasing a participant's data
//! (`erasure`).

pub mod erasure;
pub mod error;
pub mod event_store;
pub mod participant_links;
pub mod places;
mod session_locks;
pub mod store;
pub mod studies;
