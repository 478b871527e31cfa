//! The commit: a command's events appended and the views they change written in the same
//! transaction (`projector`), batched across sessions (`group_commit`; on PostgreSQL the common
//! batch in one statement, `one_statement`), from the views kept in memory (`recent`, `batch`)
//! or folded from the stored rows (`pending`), with the batched view writes (`view_writes`); and
//! erasure in storage, which rewrites a session's events
//! in the commit that records it (`erasure`).

pub(crate) mod batch;
pub(crate) mod batch_error;
pub mod erasure;
pub mod group_commit;
pub(crate) mod one_statement;
mod overviews;
pub(crate) mod pending;
pub mod projector;
pub(crate) mod recent;

pub(crate) mod view_writes;
