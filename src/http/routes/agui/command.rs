//! The command a run carries: its `resume` entry answers (or skips) the pending interaction, its
//! new user message is the participant's message, and both together are one turn — the same
//! commands the REST routes send.

use chrono::Utc;
use interview_session::commands as cmd;
use interview_session::events::SubmitStatus;
use interview_session::{SessionCommand, SessionError};
use uuid::Uuid;

use super::input::{ResumeStatus, RunAgentInput};
use crate::http::error::ApiError;

/// The run's command, `None` for a run that only follows the session; the new message is
/// checked (not empty, at most `max_message_bytes`) before anything is written. A last user
/// message whose id is a turn the session holds (`held` gives that turn's words) is not new
/// with the same words, and a 409 `idempotency_key_reused` with others.
pub(super) fn of_run(
    input: &RunAgentInput,
    session_id: Uuid,
    max_message_bytes: usize,
    held: impl Fn(&str) -> Option<String>,
) -> Result<Option<SessionCommand>, ApiError> {
    let new = match input.new_user_message() {
        Some((id, text)) => match held(id) {
            None => Some((id, text)),
            Some(words) if words == text => None,
            Some(_) => {
                return Err(ApiError::Domain(SessionError::IdempotencyKeyReused {
                    client_message_id: Some(id.to_string()),
                }))
            }
        },
        None => None,
    };
    let message = match new {
        Some((message_id, text)) => Some(message(session_id, message_id, text, max_message_bytes)?),
        None => None,
    };
    let Some(entry) = input.resume.as_ref().and_then(|r| r.first()) else {
        return Ok(message.map(SessionCommand::PostMessage));
    };
    // A resume and a new message (the adapter's "answer in my own words instead"): the answer
    // or skip, then the message, as one turn — both written, or neither.
    let (status, value) = match entry.status {
        ResumeStatus::Resolved => (SubmitStatus::Submitted, entry.payload.clone()),
        ResumeStatus::Cancelled => (SubmitStatus::Skipped, None),
    };
    let turn_id = Uuid::new_v5(
        &session_id,
        format!("interaction:{}", entry.interrupt_id).as_bytes(),
    );
    let answer = cmd::SubmitInteraction {
        interaction_id: entry.interrupt_id.clone(),
        turn_id,
        status,
        value,
        client_context: Some(serde_json::json!({ "via": "ag-ui", "run_id": input.run_id })),
        at: Utc::now(),
    };
    Ok(Some(match message {
        Some(message) => {
            SessionCommand::SubmitThenPostMessage(cmd::SubmitThenPostMessage { answer, message })
        }
        None => SessionCommand::SubmitInteraction(answer),
    }))
}

/// The participant's new message (its id is the `client_message_id`, so a retried run writes
/// nothing twice).
fn message(
    session_id: Uuid,
    message_id: &str,
    text: String,
    max_message_bytes: usize,
) -> Result<cmd::PostMessage, ApiError> {
    if text.trim().is_empty() {
        return Err(ApiError::BadRequest {
            code: "empty_content",
            message: "the message is empty".into(),
            details: Some(serde_json::json!({ "field": "messages" })),
        });
    }
    if text.len() > max_message_bytes {
        return Err(ApiError::PayloadTooLarge {
            what: "message",
            limit: max_message_bytes,
        });
    }
    Ok(cmd::PostMessage {
        turn_id: Uuid::new_v5(&session_id, message_id.as_bytes()),
        client_message_id: Some(message_id.to_string()),
        content: text,
        at: Utc::now(),
    })
}
