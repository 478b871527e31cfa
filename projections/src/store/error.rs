//! What can go wrong bringing views up to a session's events.

use interview_session::codec::DecodeError;

#[derive(Debug, thiserror::Error)]
pub enum ProjectionError {
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    #[error("event {sequence} of session {session_id} does not decode: {source}")]
    Decode {
        session_id: String,
        sequence: u64,
        source: DecodeError,
    },
    #[error("the events of session {session_id} are not the ones its erasure covers")]
    ErasureMismatch { session_id: String },
    #[error("data keys: {0}")]
    Keys(#[from] crate::store::keys::KeyError),
}
