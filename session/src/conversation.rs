//! What an interviewer needs to know besides the aggregate's state (the rules and the model's
//! prompt read it alike): the participant's answers, attributed to the objective they answer,
//! and any pending reply to a proposed summary. Folded from the same events, so it is as
//! deterministic as the aggregate.

use crate::decision::AgentAction;
use crate::events::{EventBody, SessionEvent, SubmitStatus};
use crate::interaction::InteractionKind;
use serde_json::Value;
use uuid::Uuid;

/// One participant answer during the interview phases.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub turn_id: Uuid,
    pub objective_id: Option<String>,
    /// The text, or for a widget the answer in words.
    pub content: String,
    /// A widget's submitted value.
    pub value: Option<Value>,
    /// The widget answered, for a widget's answer.
    pub widget: Option<InteractionKind>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Conversation {
    pub answers: Vec<Answer>,
    /// The participant's reply to the latest proposed summary, not yet classified.
    pub unclassified_summary_reply: Option<String>,
    /// How many summaries were proposed (a second one is the short re-confirmation).
    pub summaries_proposed: u32,
    /// The participant's last message, whatever the phase.
    pub last_message: Option<(Uuid, String)>,
    /// The probes already asked, by objective (their words), so none is asked twice.
    pub probes_asked: std::collections::HashMap<String, Vec<String>>,
}

impl Conversation {
    // Long by design: one pass over the events, one arm for each that changes what an interviewer
    // reads; split, the running state it keeps between events would travel in arguments.
    pub fn from_events(events: &[SessionEvent]) -> Self {
        let mut c = Conversation::default();
        let mut current: Option<String> = None;
        let mut awaiting_reply = false;
        let mut pending: Option<(Option<String>, InteractionKind)> = None;
        let mut probing: Option<String> = None;
        for event in events {
            match &event.body {
                EventBody::AgentMessageCompleted { content, .. } => {
                    if let Some(objective) = probing.take() {
                        c.probes_asked
                            .entry(objective)
                            .or_default()
                            .push(content.clone());
                    }
                }
                EventBody::DecisionRecorded {
                    selected_action, ..
                } => {
                    probing = match selected_action {
                        AgentAction::Probe { objective_id, .. } => Some(objective_id.clone()),
                        _ => None,
                    };
                    if let Some(o) = selected_action.objective_id() {
                        current = Some(o.to_string());
                    }
                    if matches!(selected_action, AgentAction::SummarizeAndConfirm) {
                        c.summaries_proposed += 1;
                        awaiting_reply = true;
                        c.unclassified_summary_reply = None;
                    }
                }
                EventBody::ParticipantMessageCreated {
                    turn_id, content, ..
                } => {
                    c.last_message = Some((*turn_id, content.clone()));
                    if awaiting_reply {
                        c.unclassified_summary_reply = Some(content.clone());
                        awaiting_reply = false;
                    } else {
                        c.answers.push(Answer {
                            turn_id: *turn_id,
                            objective_id: current.clone(),
                            content: content.clone(),
                            value: None,
                            widget: None,
                        });
                    }
                }
                EventBody::SummaryConfirmed { .. } => c.unclassified_summary_reply = None,
                EventBody::InteractionRendered { interaction } => {
                    pending = Some((interaction.objective_id.clone(), interaction.kind.clone()));
                }
                EventBody::InteractionSubmitted {
                    turn_id,
                    status,
                    value,
                    ..
                } => {
                    if let Some((Some(objective_id), kind)) = pending.take() {
                        let skipped = *status == SubmitStatus::Skipped;
                        c.answers.push(Answer {
                            turn_id: *turn_id,
                            objective_id: Some(objective_id),
                            content: if skipped {
                                String::new()
                            } else {
                                value.as_ref().map(Value::to_string).unwrap_or_default()
                            },
                            value: if skipped { None } else { value.clone() },
                            widget: Some(kind),
                        });
                    }
                }
                _ => {}
            }
        }
        c
    }

    /// The answers given to one objective, in order.
    pub fn answers_to<'a>(
        &'a self,
        objective_id: &'a str,
    ) -> impl Iterator<Item = &'a Answer> + 'a {
        self.answers
            .iter()
            .filter(move |a| a.objective_id.as_deref() == Some(objective_id))
    }
}
