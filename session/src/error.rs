//! Domain errors: why the aggregate refused a command.
//!
//! Each error has a stable machine `code` and a [`ErrorKind`] the HTTP layer maps to a status, so
//! the mapping lives in one place and no error falls through a catch-all.

use serde_json::{json, Value};

use crate::status::SessionStatus;

/// The class of a refusal, which decides the HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The thing named does not exist (404).
    NotFound,
    /// The command conflicts with the session's current state (409).
    Conflict,
    /// The session is over (410).
    Gone,
    /// A well-formed value breaks a rule (422).
    Invalid,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SessionError {
    #[error("the session does not exist")]
    NotCreated,
    #[error("the session already exists")]
    AlreadyCreated,
    #[error("the session has ended")]
    Terminal { status: SessionStatus },
    #[error("please answer the question shown first")]
    InteractionPending { interaction_id: String },
    #[error("this is not possible while the session is {}", .status.as_str())]
    InvalidState { status: SessionStatus },
    #[error("no such question in this session")]
    InteractionNotFound { interaction_id: String },
    #[error("this question was already answered")]
    InteractionAlreadyAnswered { interaction_id: String },
    #[error("{message}")]
    InvalidValue { field: String, message: String },
    #[error("this message id was already used for a different message")]
    IdempotencyKeyReused { client_message_id: Option<String> },
    #[error("the participant's data in this session was erased")]
    Erased,
    #[error("the session changed while its data was being erased; try again")]
    ErasureOutdated,
}

impl SessionError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::NotCreated | Self::InteractionNotFound { .. } => ErrorKind::NotFound,
            Self::AlreadyCreated
            | Self::InteractionPending { .. }
            | Self::InvalidState { .. }
            | Self::InteractionAlreadyAnswered { .. }
            | Self::IdempotencyKeyReused { .. }
            | Self::ErasureOutdated => ErrorKind::Conflict,
            Self::Terminal { .. } | Self::Erased => ErrorKind::Gone,
            Self::InvalidValue { .. } => ErrorKind::Invalid,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            Self::NotCreated => "session_not_found",
            Self::AlreadyCreated => "session_exists",
            Self::Terminal { .. } => "session_terminal",
            Self::InteractionPending { .. } => "interaction_pending",
            Self::InvalidState { .. } => "invalid_session_state",
            Self::InteractionNotFound { .. } => "interaction_not_found",
            Self::InteractionAlreadyAnswered { .. } => "interaction_already_answered",
            Self::InvalidValue { .. } => "invalid_value",
            Self::IdempotencyKeyReused { .. } => "idempotency_key_reused",
            Self::Erased => "participant_data_erased",
            Self::ErasureOutdated => "erasure_outdated",
        }
    }

    /// Machine-readable context for the error body's `details`.
    pub fn details(&self) -> Option<Value> {
        match self {
            Self::NotCreated | Self::AlreadyCreated | Self::Erased | Self::ErasureOutdated => None,
            Self::Terminal { status } | Self::InvalidState { status } => {
                Some(json!({ "status": status }))
            }
            Self::InteractionPending { interaction_id } => Some(json!({
                "status": SessionStatus::WaitingForTool,
                "pending_interaction_id": interaction_id,
            })),
            Self::InteractionNotFound { interaction_id }
            | Self::InteractionAlreadyAnswered { interaction_id } => {
                Some(json!({ "interaction_id": interaction_id }))
            }
            Self::InvalidValue { field, .. } => Some(json!({ "field": field })),
            Self::IdempotencyKeyReused { client_message_id } => {
                Some(json!({ "client_message_id": client_message_id }))
            }
        }
    }
}
