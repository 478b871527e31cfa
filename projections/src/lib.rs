//! The event store (`store`), the read models folded from it (`read_side`), and the commit that
//! appends events and writes the views they change together (`commit`).
//!
//! The [`Projector`] folds a session's events from the view's last applied sequence, in sequence
//! order, and writes every view in one transaction. The server appends a command's events
//! through it ([`Projector::append_and_project`]), so events and views commit together; the
//! same fold serves catch-up (views dropped or lagging for any reason) and rebuilds. [`log`]
//! reads the event rows back through the one decode point.
#![forbid(unsafe_code)]

// Three layers, each using only the ones below it: the commit (appends with their views) over
// the read side (the views' folds and reads) over the event store (the log, the pool, keys,
// locks). The public modules are re-exported under their old names, so
// `interview_projections::log` reads as before; inside the crate, paths name the layer.
pub mod commit;
pub mod read_side;
pub mod store;

pub mod access_log;
pub mod bulk;
pub mod notices;

pub mod view_format;

pub use commit::{erasure, group_commit, projector};
pub use read_side::{columns, decision_log, overview, read, stream, views, widget_history};
pub use store::{db, encrypted, keys, locks, log, micros, processes, shared_rows};

pub use db::{Db, DbError};
pub use decision_log::DecisionRow;
pub use projector::{ProjectionError, Projector};
pub use views::{NewRows, SessionStateView, TranscriptRow};
pub use widget_history::WidgetHistory;
