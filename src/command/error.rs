//! The command side's error: what a study, erasure or background-job command refuses, and the
//! storage failures under it. The HTTP layer maps it into its error once
//! (`impl From<CommandError> for ApiError` in `crate::http::error`), so a command never speaks
//! HTTP and a route never re-words a command's refusal.

use cqrs_es::AggregateError;
use interview_session::SessionError;
use serde_json::Value;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// No such study or session (`code`: `study_not_found`, `session_not_found`).
    #[error("{message}")]
    NotFound { code: &'static str, message: String },
    /// The input does not hold: `field` names what is wrong.
    #[error("{message}")]
    Invalid {
        code: &'static str,
        field: String,
        message: String,
    },
    /// The command cannot be carried out in the state things are in.
    #[error("{message}")]
    Conflict {
        code: &'static str,
        message: String,
        details: Option<Value>,
    },
    /// The aggregate refused the command.
    #[error(transparent)]
    Domain(#[from] SessionError),
    /// The command on a session failed (refused, raced, or its store failed).
    #[error(transparent)]
    Session(#[from] AggregateError<SessionError>),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    #[error(transparent)]
    Storage(#[from] interview_projections::ProjectionError),
    /// What was stored does not read back as it was written.
    #[error("{0}")]
    Corrupt(BoxError),
}

impl CommandError {
    pub fn session_not_found() -> Self {
        Self::NotFound {
            code: "session_not_found",
            message: "no such session".into(),
        }
    }
}
