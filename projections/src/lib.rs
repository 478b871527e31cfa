//! Read models folded from the Session event stream, and the database handle they live in.
//!
//! The in-process cqrs-es query is only a wake-up: the [`Projector`] reads a session's events
//! from the view's last applied sequence, in sequence order, and writes every view in one
//! transaction per batch. The same code serves live updates, catch-up after a crash and rebuilds.
#![forbid(unsafe_code)]

pub mod db;
pub mod projector;
pub mod read;
pub mod stream;
pub mod views;

pub use db::{Db, DbError};
pub use projector::{ProjectionError, Projector, ProjectorWakeUp};
pub use views::{DecisionRow, NewRows, SessionStateView, TranscriptRow};
