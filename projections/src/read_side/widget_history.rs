//! A session's tool calls and interaction events, folded from its log when a researcher asks.
//!
//! They are not a stored read model: every tool call and interaction is in the log already
//! (`tool.call.created` / `tool.call.completed`, `interaction.rendered` / `interaction.submitted`),
//! and keeping a second copy inside the `session_state` document made that document — rewritten
//! by every command — grow with each widget. The researcher routes read the session's events
//! through the one decode point anyway (for the objectives' coverage) and fold these from them.

use chrono::{DateTime, Utc};
use interview_session::events::{EventBody, SessionEvent, SubmitStatus};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool call and, once it finished, its result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    pub tool_call_id: String,
    pub tool_name: String,
    pub tool_input: Value,
    pub tool_result: Option<Value>,
    pub created_at: DateTime<Utc>,
    pub completed_at: Option<DateTime<Utc>>,
}

/// One rendered interaction and what happened to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InteractionEventRecord {
    pub interaction_id: String,
    #[serde(rename = "type")]
    pub interaction_type: String,
    pub status: String,
    pub value: Option<Value>,
    pub client_context: Option<Value>,
    pub rendered_at: DateTime<Utc>,
    pub submitted_at: Option<DateTime<Utc>>,
}

/// Every tool call and interaction of a session, in the order they happened.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WidgetHistory {
    pub tool_calls: Vec<ToolCallRecord>,
    pub interaction_events: Vec<InteractionEventRecord>,
}

impl WidgetHistory {
    /// The history of a session from its events, in sequence order.
    pub fn of<'a>(events: impl IntoIterator<Item = &'a SessionEvent>) -> Self {
        let mut history = Self::default();
        for event in events {
            history.apply(event);
        }
        history
    }

    /// Folds one event in; events that touch no tool call or interaction are ignored.
    // Long by design: one arm per tool-call and interaction event; every other event falls to the
    // last arm and is ignored.
    pub fn apply(&mut self, event: &SessionEvent) {
        let at = event.at;
        match &event.body {
            EventBody::ToolCallCreated {
                tool_call_id,
                tool_name,
                tool_input,
            } => self.tool_calls.push(ToolCallRecord {
                tool_call_id: tool_call_id.clone(),
                tool_name: tool_name.clone(),
                tool_input: tool_input.clone(),
                tool_result: None,
                created_at: at,
                completed_at: None,
            }),
            EventBody::ToolCallCompleted {
                tool_call_id,
                tool_result,
            } => {
                // The latest call of that id: ids are unique, but a log is not trusted to say so.
                if let Some(call) = self
                    .tool_calls
                    .iter_mut()
                    .rev()
                    .find(|c| &c.tool_call_id == tool_call_id)
                {
                    call.tool_result = Some(tool_result.clone());
                    call.completed_at = Some(at);
                }
            }
            EventBody::InteractionRendered { interaction } => {
                self.interaction_events.push(InteractionEventRecord {
                    interaction_id: interaction.interaction_id.clone(),
                    interaction_type: interaction.type_name().into(),
                    status: "pending".into(),
                    value: None,
                    client_context: None,
                    rendered_at: at,
                    submitted_at: None,
                })
            }
            EventBody::InteractionSubmitted {
                interaction_id,
                status,
                value,
                client_context,
                ..
            } => {
                if let Some(record) = self
                    .interaction_events
                    .iter_mut()
                    .rev()
                    .find(|r| &r.interaction_id == interaction_id)
                {
                    record.status = match status {
                        SubmitStatus::Submitted => "submitted",
                        SubmitStatus::Skipped => "skipped",
                    }
                    .into();
                    record.value = value.clone();
                    record.client_context = client_context.clone();
                    record.submitted_at = Some(at);
                }
            }
            _ => {}
        }
    }
}
