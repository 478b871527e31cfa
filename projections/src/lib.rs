//! Read models folded from the Session event stream, and the database handle they live in.
//!
//! The [`Projector`] folds a session's events from the view's last applied sequence, in sequence
//! order, and writes every view in one transaction. The server appends a command's events
//! through it ([`Projector::append_and_project`]), so events and views commit together; the
//! same fold serves catch-up (views dropped or lagging for any reason) and rebuilds. [`log`]
//! reads the event rows back through the one decode point.
#![forbid(unsafe_code)]

mod batch;
mod batch_error;
pub mod bulk;
pub mod columns;
pub mod db;
pub mod decision_log;
pub mod encrypted;
pub mod erasure;
mod error;
pub mod group_commit;
pub mod keys;
pub mod locks;
pub mod log;
mod one_statement;
pub mod overview;
mod pending;
pub mod processes;
pub mod projector;
pub mod read;
mod recent;
mod statements;
pub mod stream;
pub mod view_format;
mod view_writes;
pub mod views;
pub mod widget_history;

pub use db::{Db, DbError};
pub use decision_log::DecisionRow;
pub use projector::{ProjectionError, Projector};
pub use views::{NewRows, SessionStateView, TranscriptRow};
pub use widget_history::WidgetHistory;
