//! The conversation handed back to a client that lacks it.
//!
//! An AG-UI client keeps the thread's messages itself and sends them with every run. After a
//! reload it has none, and a stale copy misses the latest: a run whose `messages` lack any of
//! the session's messages starts, right after RUN_STARTED, with a MESSAGES_SNAPSHOT of the
//! session's conversation up to the run's start — the participant's and the interviewer's
//! messages, each widget as the interviewer's tool call, each answer or skip as that call's
//! result — followed by the client's own messages the session does not hold yet (the run's new
//! message). The client's thread is then the session's, each message once, under the ids the
//! live events gave it: a message's own id (a participant's AG-UI message id, else its turn),
//! a widget's tool call id for its call, `<tool call id>:result` for its result.

use std::collections::{HashMap, HashSet};

use interview_projections::{read, Db, TranscriptRow};
use interview_session::{EventBody, SessionEvent};
use serde_json::{json, Value};
use uuid::Uuid;

use super::events::RENDER_TOOL;
use super::input::RunAgentInput;
use crate::http::error::ApiError;

/// The messages a run starts with, and the widgets among them (announced already).
pub(super) struct Snapshot {
    pub(super) messages: Vec<Value>,
    pub(super) interactions: HashSet<String>,
}

/// The snapshot a run must start with, if its client lacks any of the session's messages up
/// to `last_seq` (the run's view).
pub(super) async fn for_run(
    db: &Db,
    session_id: Uuid,
    last_seq: u64,
    input: &RunAgentInput,
) -> Result<Option<Snapshot>, ApiError> {
    let id = session_id.to_string();
    let transcript = read::transcript(db, &id).await?;
    if !lacks_any(&transcript, last_seq, session_id, input) {
        return Ok(None);
    }
    let events = read::decoded_events_between(db, &id, 0, last_seq).await?;
    Ok(Some(conversation(&events, session_id, input)))
}

/// Whether the run's client lacks a message of the session's (up to `last_seq`): an
/// interviewer's message by its id, a participant's by its turn (an AG-UI message's turn is
/// named from its id). Widget answers are not looked for: a client never receives them live.
fn lacks_any(
    transcript: &[TranscriptRow],
    last_seq: u64,
    session_id: Uuid,
    input: &RunAgentInput,
) -> bool {
    let mut held: HashSet<String> = HashSet::new();
    for m in &input.messages {
        held.insert(m.id.clone());
        if m.role == "user" {
            held.insert(Uuid::new_v5(&session_id, m.id.as_bytes()).to_string());
        }
    }
    transcript
        .iter()
        .filter(|row| row.seq <= last_seq && row.kind == "message")
        .any(|row| !held.contains(&row.turn_id))
}

/// The session's conversation in AG-UI's message shapes, then the client's messages it does not
/// hold (a participant's message the client names by its AG-UI id or by its turn; a widget's
/// result the client wrote itself).
fn conversation(
    events: &[(u64, SessionEvent)],
    session_id: Uuid,
    input: &RunAgentInput,
) -> Snapshot {
    let mut c = Conversation::default();
    for (_, event) in events {
        c.add(&event.body);
    }
    c.held.extend(
        c.messages
            .iter()
            .filter_map(|m| m["id"].as_str().map(String::from)),
    );
    let answered: HashSet<&str> = c.calls.values().map(String::as_str).collect();
    let own = |m: &&super::input::Message| {
        let turn = Uuid::new_v5(&session_id, m.id.as_bytes()).to_string();
        let result_of_ours = m.role == "tool"
            && m.rest
                .get("toolCallId")
                .and_then(Value::as_str)
                .is_some_and(|call| answered.contains(call));
        !c.held.contains(&m.id) && !c.held.contains(&turn) && !result_of_ours
    };
    let extra: Vec<Value> = input
        .messages
        .iter()
        .filter(own)
        .map(|m| m.to_value())
        .collect();
    let mut messages = c.messages;
    messages.extend(extra);
    Snapshot {
        messages,
        interactions: c.interactions,
    }
}

/// The session's messages as its events give them.
#[derive(Default)]
struct Conversation {
    messages: Vec<Value>,
    /// The widgets among them.
    interactions: HashSet<String>,
    /// The session's ids for what a client may also hold: message ids, participants' turns.
    held: HashSet<String>,
    /// Each widget's tool call id, for the result that answers it.
    calls: HashMap<String, String>,
}

impl Conversation {
    fn add(&mut self, body: &EventBody) {
        match body {
            EventBody::ParticipantMessageCreated {
                turn_id,
                client_message_id,
                content,
            } => {
                let id = client_message_id
                    .clone()
                    .unwrap_or_else(|| turn_id.to_string());
                self.held.insert(turn_id.to_string());
                self.messages
                    .push(json!({ "id": id, "role": "user", "content": content }));
            }
            EventBody::AgentMessageCompleted {
                message_id,
                content,
            } => self.messages.push(json!({
                "id": message_id.to_string(), "role": "assistant", "content": content,
            })),
            EventBody::InteractionRendered { interaction } => {
                let call = interaction.tool_call_id.clone();
                let arguments = serde_json::to_string(interaction).expect("interactions serialize");
                self.messages.push(json!({
                    "id": call,
                    "role": "assistant",
                    "toolCalls": [{
                        "id": call,
                        "type": "function",
                        "function": { "name": RENDER_TOOL, "arguments": arguments },
                    }],
                }));
                self.calls.insert(interaction.interaction_id.clone(), call);
                self.interactions.insert(interaction.interaction_id.clone());
            }
            EventBody::InteractionSubmitted {
                interaction_id,
                status,
                value,
                ..
            } => {
                let Some(call) = self.calls.get(interaction_id) else {
                    return;
                };
                // The status as the events spell it (`submitted`, `skipped`).
                let result = json!({ "status": status, "value": value });
                self.messages.push(json!({
                    "id": format!("{call}:result"),
                    "role": "tool",
                    "toolCallId": call,
                    "content": result.to_string(),
                }));
            }
            _ => {}
        }
    }
}
