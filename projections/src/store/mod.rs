//! The event store: the database and its pool on both backends (`db`), the event log's rows —
//! appended, read back and decoded through the one decode point (`log`), events in
//! clear written into the rows of their commands' other events (`shared_rows`) —, content encrypted at
//! rest and its keys (`encrypted`, `keys`), locks across processes (`locks`) and the registry of
//! running processes (`processes`). It knows nothing of the views.

pub mod backend;
pub mod db;
pub mod encrypted;
pub mod error;
pub mod keys;
pub mod locks;
pub mod log;
pub mod micros;
pub mod processes;
pub mod shared_rows;
pub(crate) mod statements;

pub use statements::INSERT_DOCUMENT;
