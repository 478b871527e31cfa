//! AG-UI events (`@ag-ui/core` 1.0) built from the session's events and live deltas.
//!
//! The interviewer's utterances become TEXT_MESSAGE_START / CONTENT / END (content as it
//! streams), a rendered interaction becomes TOOL_CALL_START / ARGS / END whose arguments are the
//! InteractionToolCall, and the run ends with a STATE_SNAPSHOT of what the participant may see
//! and RUN_FINISHED — an `interrupt` outcome naming the pending interaction, or `success`.

use std::collections::{HashMap, HashSet};

use interview_projections::SessionStateView;
use interview_session::interaction::InteractionToolCall;
use interview_session::{EventBody, SessionEvent};
use serde_json::{json, Value};

use super::RENDER_TOOL;

/// Turns the session's events and deltas into AG-UI events for one run.
#[derive(Default)]
pub struct Translator {
    /// Messages started in this run, with the text sent so far.
    open: HashMap<String, String>,
    /// Messages completed (late deltas for them are dropped).
    done: HashSet<String>,
    /// Interactions announced in this run.
    announced: HashSet<String>,
    /// The client's messages as its run input carried them, then this run's utterances: what a
    /// MESSAGES_SNAPSHOT hands back when a shown utterance must be replaced.
    history: Vec<Value>,
}

fn event(kind: &str, mut body: Value) -> Value {
    body["type"] = Value::String(kind.into());
    body
}

impl Translator {
    /// A translator for a run whose client holds these messages.
    pub fn new(history: Vec<Value>) -> Self {
        Self {
            history,
            ..Self::default()
        }
    }

    /// A translator for a run that starts by handing its client `snapshot` (the session's
    /// conversation): the run's MESSAGES_SNAPSHOT, and its widgets count as announced.
    pub fn after_snapshot(snapshot: super::history::Snapshot) -> (Self, Value) {
        let first = event(
            "MESSAGES_SNAPSHOT",
            json!({ "messages": snapshot.messages }),
        );
        let t = Self {
            history: snapshot.messages,
            announced: snapshot.interactions,
            ..Self::default()
        };
        (t, first)
    }

    /// A live piece of an utterance.
    pub fn delta(&mut self, message_id: &str, content: &str) -> Vec<Value> {
        if self.done.contains(message_id) || content.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        let sent = self.open.entry(message_id.to_string()).or_insert_with(|| {
            out.push(event(
                "TEXT_MESSAGE_START",
                json!({ "messageId": message_id, "role": "assistant" }),
            ));
            String::new()
        });
        sent.push_str(content);
        out.push(event(
            "TEXT_MESSAGE_CONTENT",
            json!({ "messageId": message_id, "delta": content }),
        ));
        out
    }

    /// A committed event.
    pub fn event(&mut self, e: &SessionEvent) -> Vec<Value> {
        match &e.body {
            EventBody::AgentMessageCompleted {
                message_id,
                content,
            } => {
                let id = message_id.to_string();
                let mut out = Vec::new();
                if self.done.insert(id.clone()) {
                    let sent = match self.open.remove(&id) {
                        Some(sent) => sent,
                        None => {
                            out.push(event(
                                "TEXT_MESSAGE_START",
                                json!({ "messageId": id, "role": "assistant" }),
                            ));
                            String::new()
                        }
                    };
                    self.history
                        .push(json!({ "id": id, "role": "assistant", "content": content }));
                    match content.strip_prefix(sent.as_str()) {
                        // Whatever the live deltas did not carry (a late subscriber, a lagged one).
                        Some(rest) => {
                            if !rest.is_empty() {
                                out.push(event(
                                    "TEXT_MESSAGE_CONTENT",
                                    json!({ "messageId": id, "delta": rest }),
                                ));
                            }
                            out.push(event("TEXT_MESSAGE_END", json!({ "messageId": id })));
                        }
                        // The streamed words were replaced (a check refused them, or the model
                        // broke off): deltas only append, so the client gets its messages
                        // back whole, this one as committed.
                        None => {
                            out.push(event("TEXT_MESSAGE_END", json!({ "messageId": id })));
                            out.push(event(
                                "MESSAGES_SNAPSHOT",
                                json!({ "messages": self.history }),
                            ));
                        }
                    }
                }
                out
            }
            EventBody::InteractionRendered { interaction } => self.announce(interaction),
            _ => Vec::new(),
        }
    }

    /// TOOL_CALL_START / ARGS / END for an interaction, once per run.
    pub fn announce(&mut self, interaction: &InteractionToolCall) -> Vec<Value> {
        if !self.announced.insert(interaction.interaction_id.clone()) {
            return Vec::new();
        }
        let id = interaction.tool_call_id.clone();
        let args = serde_json::to_string(interaction).expect("interactions serialize");
        vec![
            event(
                "TOOL_CALL_START",
                json!({ "toolCallId": id, "toolCallName": RENDER_TOOL }),
            ),
            event("TOOL_CALL_ARGS", json!({ "toolCallId": id, "delta": args })),
            event("TOOL_CALL_END", json!({ "toolCallId": id })),
        ]
    }

    /// Ends messages left open (their utterance was never completed): the protocol wants every
    /// started message closed before the run ends.
    pub fn close_open(&mut self) -> Vec<Value> {
        let open: Vec<String> = self.open.drain().map(|(id, _)| id).collect();
        open.into_iter()
            .map(|id| event("TEXT_MESSAGE_END", json!({ "messageId": id })))
            .collect()
    }
}

pub fn run_started(thread_id: &str, run_id: &str) -> Value {
    event(
        "RUN_STARTED",
        json!({ "threadId": thread_id, "runId": run_id }),
    )
}

pub fn run_error(message: &str, code: &str) -> Value {
    event("RUN_ERROR", json!({ "message": message, "code": code }))
}

/// What the participant may see of the session (no internal fields).
pub fn snapshot(view: &SessionStateView) -> Value {
    event(
        "STATE_SNAPSHOT",
        json!({ "snapshot": {
            "session_id": view.session_id,
            "status": view.status,
            "phase": view.current_phase,
            "turn_count": view.turns.count(),
            "pending_interaction": view.pending_interaction,
            "summary": view.summary,
            "redirect_url": view.redirect_url(),
        }}),
    )
}

/// RUN_FINISHED: an interrupt for the pending interaction, or success.
pub fn run_finished(thread_id: &str, run_id: &str, view: &SessionStateView) -> Value {
    let outcome = match &view.pending_interaction {
        Some(p) => json!({
            "type": "interrupt",
            "interrupts": [{
                "id": p.interaction_id,
                "reason": p.type_name(),
                "message": p.prompt,
                "toolCallId": p.tool_call_id,
                "responseSchema": p.value_schema,
            }],
        }),
        None => json!({ "type": "success" }),
    };
    let mut body = json!({ "threadId": thread_id, "runId": run_id, "outcome": outcome });
    if view.pending_interaction.is_none() {
        body["result"] = json!({
            "status": view.status,
            "summary": view.summary,
            "redirect_url": view.redirect_url(),
        });
    }
    event("RUN_FINISHED", body)
}
