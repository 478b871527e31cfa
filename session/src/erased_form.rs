//! The erased form of each event (`docs/privacy.md`): what of it may be personal.
//!
//! An erased event keeps what an audit needs — its type, time, ids, statuses, phases, actions,
//! objective and field ids, counts, confidences, model, latency and tokens — and loses every
//! string or value a participant wrote or that may quote them: messages, widget answers and their
//! `client_context`, the panel id (`participant_ref`), the interviewer's utterances (they quote
//! the participant), summaries and additions, extracted values and quotes, decisions' input
//! summaries and rationales, screening answers and rationales, error messages, and a widget's
//! words and option ids when a model may have written them. Optional text keeps whether it was there (`Some("")`
//! rather than `None`), so the shape of what happened stays readable.

use serde_json::Value;

use crate::decision::{ExtractedField, FieldStatus};
use crate::events::EventBody;
use crate::interaction::{Choice, InteractionKind, InteractionToolCall};

fn blank(_: &str) -> String {
    String::new()
}

fn blank_some(text: &Option<String>) -> Option<String> {
    text.as_ref().map(|_| String::new())
}

fn blank_value(value: &Option<Value>) -> Option<Value> {
    value.as_ref().map(|_| Value::Null)
}

impl EventBody {
    /// The event with everything that may be personal blanked (see the module's list). Every
    /// event type is named, so a new one must say what of it is personal.
    /// Whether erasure would take anything from this event: such an event is salted
    /// (`SessionEvent::salt`) and stored encrypted. The erasure record never is: it holds no
    /// content, and is read on its own.
    pub fn holds_personal_data(&self) -> bool {
        !matches!(self, EventBody::ParticipantDataErased(_))
            && self.without_personal_data() != *self
    }

    // Long by design: one arm per event type, exhaustive, so a new event type must say here what of
    // it an erasure keeps before it compiles.
    pub fn without_personal_data(&self) -> EventBody {
        use EventBody as E;
        match self {
            E::SessionCreated {
                session_id,
                study,
                participant_token_sha256,
                preview,
                ..
            } => E::SessionCreated {
                session_id: *session_id,
                study: study.clone(),
                participant_ref: None,
                participant_token_sha256: participant_token_sha256.clone(),
                preview: *preview,
                chain_secret: None,
            },
            E::ScreeningEvaluated {
                eligible,
                answers,
                decided_by,
                rationale,
            } => E::ScreeningEvaluated {
                eligible: *eligible,
                rationale: blank(rationale),
                answers: answers.keys().map(|k| (k.clone(), None)).collect(),
                decided_by: decided_by.clone(),
            },
            E::DecisionRecorded { .. } => self.decision_without_personal_data(),
            E::SummaryProposed { summary } => E::SummaryProposed {
                summary: blank(summary),
            },
            E::SummaryConfirmed {
                confirmed,
                addition,
            } => E::SummaryConfirmed {
                confirmed: *confirmed,
                addition: blank_some(addition),
            },
            E::ExtractionCompleted {
                extraction_id,
                fields,
                is_final,
                decided_by,
            } => E::ExtractionCompleted {
                extraction_id: *extraction_id,
                fields: fields.iter().map(field_without_personal_data).collect(),
                is_final: *is_final,
                decided_by: decided_by.clone(),
            },
            E::ErrorRecorded {
                source,
                code,
                message,
            } => E::ErrorRecorded {
                source: source.clone(),
                code: code.clone(),
                message: blank(message),
            },
            E::ParticipantMessageCreated {
                turn_id,
                client_message_id,
                content,
            } => E::ParticipantMessageCreated {
                turn_id: *turn_id,
                client_message_id: blank_some(client_message_id),
                content: blank(content),
            },
            E::AgentMessageCompleted {
                message_id,
                content,
            } => E::AgentMessageCompleted {
                message_id: *message_id,
                content: blank(content),
            },
            E::ToolCallCreated {
                tool_call_id,
                tool_name,
                tool_input,
            } => E::ToolCallCreated {
                tool_call_id: tool_call_id.clone(),
                tool_name: tool_name.clone(),
                // A widget's input is the widget; anything else is dropped whole.
                tool_input: serde_json::from_value::<InteractionToolCall>(tool_input.clone())
                    .ok()
                    .and_then(|w| serde_json::to_value(widget_without_personal_data(&w)).ok())
                    .unwrap_or(Value::Null),
            },
            E::InteractionRendered { interaction } => E::InteractionRendered {
                interaction: Box::new(widget_without_personal_data(interaction)),
            },
            E::InteractionSubmitted {
                interaction_id,
                turn_id,
                status,
                value,
                client_context,
            } => E::InteractionSubmitted {
                interaction_id: interaction_id.clone(),
                turn_id: *turn_id,
                status: *status,
                value: blank_value(value),
                client_context: blank_value(client_context),
            },
            E::ToolCallCompleted {
                tool_call_id,
                tool_result,
            } => E::ToolCallCompleted {
                tool_call_id: tool_call_id.clone(),
                // The answer's status stays; its value goes.
                tool_result: serde_json::json!({ "status": tool_result.get("status"), "value": null }),
            },
            E::SessionCompleted {
                summary,
                summary_confirmed,
                reason,
            } => E::SessionCompleted {
                summary: blank(summary),
                summary_confirmed: *summary_confirmed,
                reason: *reason,
            },
            // Nothing personal in these.
            E::StatusChanged { .. }
            | E::PhaseChanged { .. }
            | E::ConsentRecorded { .. }
            | E::ExtractionStarted { .. }
            | E::AgentMessageStarted { .. }
            | E::SessionAbandoned { .. }
            | E::EndRequested {}
            | E::ParticipantDataErased(_) => self.clone(),
        }
    }

    fn decision_without_personal_data(&self) -> EventBody {
        let mut decision = self.clone();
        if let EventBody::DecisionRecorded {
            input_summary,
            rationale,
            refused_proposal,
            ..
        } = &mut decision
        {
            input_summary.clear();
            rationale.clear();
            // A refused proposal's rationale may quote the participant too.
            if let Some(refused) = refused_proposal {
                refused.rationale.clear();
            }
        }
        decision
    }
}

fn field_without_personal_data(field: &ExtractedField) -> ExtractedField {
    ExtractedField {
        field_id: field.field_id.clone(),
        value: Value::Null,
        confidence: field.confidence,
        evidence_turn_ids: field.evidence_turn_ids.clone(),
        quote: blank_some(&field.quote),
        // Whether they declined or did not know is theirs too.
        status: FieldStatus::Answered,
    }
}

/// A widget without the words a model may have written into it: its prompt, intent, option
/// labels and option ids (a model may word an id after what the participant said; they become
/// `option_1`, `option_2`… and the value schema follows). The runtime's consent panel is the
/// study's own text and stays.
fn widget_without_personal_data(widget: &InteractionToolCall) -> InteractionToolCall {
    let options = |options: &[Choice]| -> Vec<Choice> {
        (1..=options.len())
            .map(|i| Choice {
                id: format!("option_{i}"),
                label: String::new(),
            })
            .collect()
    };
    let kind = match &widget.kind {
        InteractionKind::Consent { .. } => return widget.clone(),
        InteractionKind::SingleChoice { options: o } => InteractionKind::SingleChoice {
            options: options(o),
        },
        InteractionKind::MultipleChoice {
            options: o,
            min_selections,
            max_selections,
        } => InteractionKind::MultipleChoice {
            options: options(o),
            min_selections: *min_selections,
            max_selections: *max_selections,
        },
        InteractionKind::Ranking { options: o } => InteractionKind::Ranking {
            options: options(o),
        },
        InteractionKind::Likert { scale, labels } => InteractionKind::Likert {
            scale: *scale,
            labels: labels.iter().map(|_| String::new()).collect(),
        },
        kind @ (InteractionKind::Rating { .. }
        | InteractionKind::YesNo {}
        | InteractionKind::FreeText { .. }) => kind.clone(),
    };
    InteractionToolCall {
        prompt: String::new(),
        research_intent: String::new(),
        value_schema: kind.value_schema(),
        kind,
        ..widget.clone()
    }
}
