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
//!
//! The widget still waiting for an answer is left out, unless this run answers it: the run
//! announces it with its own tool-call events, as it does live, so the client's interrupt
//! belongs to the run's assistant message. (`@assistant-ui/react-ag-ui` attaches a run's
//! interrupt to the message the run streamed into; a pending widget held only in the snapshot
//! would leave it nothing to attach to, and the widget could not be answered after a reload.)

use std::collections::{HashMap, HashSet};

use interview_projections::{read, Db, TranscriptRow};
use interview_session::interaction::InteractionToolCall;
use interview_session::{EventBody, SessionEvent};
use serde_json::{json, Value};
use uuid::Uuid;

use super::input::RunAgentInput;
use super::RENDER_TOOL;
use crate::http::error::ApiError;

/// The messages a run starts with, and the widgets among them (announced already).
pub(super) struct Snapshot {
    pub(super) messages: Vec<Value>,
    pub(super) interactions: HashSet<String>,
}

/// What the session held when the run began: its transcript up to the run's view.
pub(super) struct History {
    session_id: Uuid,
    last_seq: u64,
    transcript: Vec<TranscriptRow>,
}

impl History {
    /// The session's transcript up to `last_seq` (the run's view).
    pub(super) async fn read(db: &Db, session_id: Uuid, last_seq: u64) -> Result<Self, ApiError> {
        let transcript = read::transcript(db, &session_id.to_string()).await?;
        Ok(Self {
            session_id,
            last_seq,
            transcript,
        })
    }

    /// The words of the participant's message the session holds under the turn `id`: a message
    /// posted without a client id reaches an AG-UI client (in a snapshot) under its turn, and
    /// comes back as the last message of the client's next run without being new.
    pub(super) fn words_of_turn(&self, id: &str) -> Option<&str> {
        self.transcript
            .iter()
            .find(|row| row.kind == "message" && row.role == "user" && row.turn_id == id)
            .map(|row| row.content.as_str())
    }

    /// The snapshot a run must start with, if its client lacks any of the session's messages
    /// (`pending` is the widget waiting for an answer in the run's view).
    pub(super) async fn snapshot_for(
        &self,
        db: &Db,
        pending: Option<&InteractionToolCall>,
        input: &RunAgentInput,
    ) -> Result<Option<Snapshot>, ApiError> {
        if !lacks_any(&self.transcript, self.last_seq, self.session_id, input) {
            return Ok(None);
        }
        let id = self.session_id.to_string();
        let events = read::decoded_events_between(db, &id, 0, self.last_seq).await?;
        let mut snapshot = conversation(&events, self.session_id, input);
        if let Some(pending) = pending.filter(|p| !resumes(input, p)) {
            snapshot.leave_out(pending);
        }
        Ok(Some(snapshot))
    }
}

/// Whether the run answers (or skips) the pending widget.
fn resumes(input: &RunAgentInput, pending: &InteractionToolCall) -> bool {
    input
        .resume
        .iter()
        .flatten()
        .any(|entry| entry.interrupt_id == pending.interaction_id)
}

impl Snapshot {
    /// Leaves out a widget's tool call (one with no result yet), for the run to announce.
    fn leave_out(&mut self, pending: &InteractionToolCall) {
        self.messages
            .retain(|m| m["id"].as_str() != Some(pending.tool_call_id.as_str()));
        self.interactions.remove(&pending.interaction_id);
    }
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
