//! Commands on a session. Who may send which is decided by the HTTP layer; whether it is allowed
//! now is decided by the aggregate. Every command carries its own time (`at`), because the
//! aggregate never reads a clock.

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use crate::events::{AbandonReason, SubmitStatus};
use crate::interaction::InteractionToolCall;
use crate::study::PinnedStudy;

#[derive(Debug, Clone, PartialEq)]
pub enum SessionCommand {
    /// A participant opens the public link (FR-04-1); pins the study (FR-04-2).
    Create {
        session_id: Uuid,
        study: Box<PinnedStudy>,
        participant_ref: Option<String>,
        participant_token_sha256: String,
        preview: bool,
        at: DateTime<Utc>,
    },
    /// The interviewer takes the session up: `created → active`.
    Start { at: DateTime<Utc> },
    /// A participant message (FR-04-6). `turn_id` is derived from `client_message_id` when one is
    /// given, so a retry is recognised and writes nothing.
    PostMessage {
        turn_id: Uuid,
        client_message_id: Option<String>,
        content: String,
        at: DateTime<Utc>,
    },
    /// The interviewer claims the next utterance; only one may be open at a time.
    StartAgentMessage {
        message_id: Uuid,
        run_id: Uuid,
        at: DateTime<Utc>,
    },
    /// The interviewer's utterance is complete; with `await_reply` the session waits for the
    /// participant.
    CompleteAgentMessage {
        message_id: Uuid,
        content: String,
        await_reply: bool,
        at: DateTime<Utc>,
    },
    /// Show a widget and wait for its answer (FR-04-16/17).
    RenderInteraction {
        interaction: Box<InteractionToolCall>,
        at: DateTime<Utc>,
    },
    /// A participant answers (or skips) the pending widget.
    SubmitInteraction {
        interaction_id: String,
        turn_id: Uuid,
        status: SubmitStatus,
        value: Option<Value>,
        client_context: Option<Value>,
        at: DateTime<Utc>,
    },
    /// The interview ends normally, after its summary was proposed.
    Complete {
        summary: String,
        summary_confirmed: bool,
        at: DateTime<Utc>,
    },
    /// The interview ends early.
    Abandon {
        reason: AbandonReason,
        at: DateTime<Utc>,
    },
}
