//! The Session write model.
//!
//! Everything that decides what happens in an interview lives here and nowhere else: the pinned
//! study configuration a session runs under, the commands participants, the interviewer and the
//! system send, the events those commands produce (a permanent schema), and the `Session`
//! aggregate that checks every command against the session's state. The crate does no I/O, so the
//! server, the projections and the `replay` tool can all depend on it without a cycle.
#![forbid(unsafe_code)]

pub mod aggregate;
pub mod chain;
pub mod codec;
pub mod commands;
pub mod condense;
pub mod conversation;
pub mod decision;
pub mod erased_form;
pub mod erasure;
pub mod error;
pub mod events;
pub mod field_values;
pub mod hash;
pub mod input_class;
pub mod interaction;
pub mod notice;
pub mod phrases;
pub mod redirect;
pub mod status;
pub mod study;
pub mod text;
pub mod turns;
pub mod widget_answers;

pub use aggregate::Session;
pub use codec::EVENT_VERSION;
pub use commands::SessionCommand;
pub use error::{ErrorKind, SessionError};
pub use events::{ConcludeReason, EventBody, Phase, SessionEvent, SessionStatus, SubmitStatus};
pub use study::{PinnedStudy, StudyDefinition};

/// The cqrs-es aggregate type name; the `aggregate_type` column of every session event.
pub const AGGREGATE_TYPE: &str = "Session";

#[cfg(test)]
mod names_tests;
