//! The decision being made: which session, in which run, for which message, at what time.

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// Identifies the decision being made.
pub(super) struct Step<'a> {
    pub session_id: &'a str,
    pub run_id: Uuid,
    pub message_id: Uuid,
    pub now: DateTime<Utc>,
}
