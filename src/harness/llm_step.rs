//! One decision from the model: stream it, show its `message` as it arrives once the guards
//! accept its action, and turn failures into a recorded error and a fallback that never
//! contradicts what the participant already saw.

use std::time::Duration;

use chrono::{DateTime, Utc};
use interview_session::decision::{AgentAction, Proposal, Provenance};
use interview_session::events::{EventBody, SessionEvent};
use interview_session::Session;
use uuid::Uuid;

use super::conversation::Conversation;
use super::{rules, Harness};
use crate::llm::{prompt, tools, ModelGateway};
use crate::stream_hub::Live;

/// Identifies the decision being made.
pub(super) struct Step<'a> {
    pub session_id: &'a str,
    pub run_id: Uuid,
    pub message_id: Uuid,
    pub now: DateTime<Utc>,
}

/// The conversation as the model reads it: role, id to cite, text.
fn listing(events: &[SessionEvent]) -> Vec<(String, String, String)> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::ParticipantMessageCreated {
                turn_id, content, ..
            } => Some(("participant".into(), turn_id.to_string(), content.clone())),
            EventBody::AgentMessageCompleted {
                message_id,
                content,
            } => Some((
                "interviewer".into(),
                message_id.to_string(),
                content.clone(),
            )),
            EventBody::InteractionSubmitted {
                turn_id,
                status,
                value,
                ..
            } => Some((
                "participant".into(),
                turn_id.to_string(),
                format!(
                    "(answered the widget: {status:?} {})",
                    value.as_ref().map(|v| v.to_string()).unwrap_or_default()
                ),
            )),
            _ => None,
        })
        .collect()
}

/// Whether the guards would carry out `action` as is (so its text may be shown now).
fn accepted_as_is(session: &Session, action: AgentAction, now: DateTime<Utc>) -> bool {
    let stub = Proposal {
        action,
        rationale: "pre-check".into(),
        message: Some("pre-check".into()),
        interaction: None,
        fields: Vec::new(),
        summary: Some("pre-check".into()),
        input_summary: String::new(),
        provenance: Provenance {
            model: String::new(),
            prompt_version_id: String::new(),
            latency_ms: 0,
            token_usage: Default::default(),
        },
    };
    matches!(session.judge(&stub, Some(Uuid::nil().to_string()), now), Ok(j) if j.proposed.is_none())
}

impl Harness {
    /// The model's screening verdict (`judge_screening`); on any failure, recorded, the study's
    /// own rules decide.
    pub(super) async fn llm_judge_screening(
        &self,
        gateway: &ModelGateway,
        step: &Step<'_>,
        session: &Session,
    ) -> (bool, String) {
        let study = session.study().expect("a running session has its study");
        let rules = || {
            study
                .study_config
                .screening
                .evaluate(session.screening_answers())
        };
        let Some(body) = prompt::screening_request(session) else {
            return rules();
        };
        let timeout = Duration::from_secs(u64::from(study.model_config.timeout_seconds));
        let verdict = match gateway.stream(body, timeout, |_, _| {}).await {
            Ok(turn) if turn.tool_name.as_deref() == Some("judge_screening") => {
                let args: serde_json::Value =
                    serde_json::from_str(&turn.arguments).unwrap_or_default();
                match (
                    args["eligible"].as_bool(),
                    args["rationale"].as_str().map(str::trim),
                ) {
                    (Some(eligible), Some(rationale)) if !rationale.is_empty() => {
                        Ok((eligible, rationale.to_string()))
                    }
                    _ => Err((
                        "model_bad_arguments".to_string(),
                        format!("judge_screening arguments: {}", turn.arguments),
                    )),
                }
            }
            Ok(turn) => Err((
                "model_bad_arguments".to_string(),
                format!("expected judge_screening, got {:?}", turn.tool_name),
            )),
            Err((error, _)) => Err((error.code().to_string(), error.to_string())),
        };
        match verdict {
            Ok(verdict) => verdict,
            Err((code, message)) => {
                self.record_error(step.session_id, step.run_id, "model", &code, &message)
                    .await;
                let (eligible, rationale) = rules();
                (
                    eligible,
                    format!("Fallback after a model failure ({code}): {rationale}"),
                )
            }
        }
    }

    pub(super) async fn llm_propose(
        &self,
        gateway: &ModelGateway,
        step: &Step<'_>,
        session: &Session,
        conversation: &Conversation,
        events: &[SessionEvent],
    ) -> (Proposal, String) {
        let study = session.study().expect("a running session has its study");
        let model = &study.model_config;
        let body = prompt::request(
            model,
            prompt::system_prompt(session, step.now),
            prompt::transcript(&listing(events), conversation),
        );
        let input_summary = format!(
            "{} turns; last participant input: {}",
            session.turn_count(),
            conversation
                .last_message
                .as_ref()
                .map(|(_, t)| t.chars().take(120).collect::<String>())
                .unwrap_or_default()
        );
        let mut shown = String::new();
        let mut verdict: Option<bool> = None;
        let message_id = step.message_id.to_string();
        let result = gateway
            .stream(
                body,
                Duration::from_secs(u64::from(model.timeout_seconds)),
                |name, args| {
                    if verdict.is_none() {
                        verdict = tools::partial_action(name, args)
                            .map(|a| accepted_as_is(session, a, step.now));
                    }
                    if verdict != Some(true) {
                        return;
                    }
                    if let Some(message) = tools::partial_message(args) {
                        if message.len() > shown.len() && message.starts_with(shown.as_str()) {
                            let delta = message[shown.len()..].to_string();
                            self.hub.publish(
                                step.session_id,
                                Live::Delta {
                                    message_id: message_id.clone(),
                                    content: delta,
                                },
                            );
                            shown = message;
                        }
                    }
                },
            )
            .await;
        let (turn, failure) = match result {
            Ok(turn) => (turn, None),
            Err((error, turn)) => (turn, Some((error.code().to_string(), error.to_string()))),
        };
        let provenance = Provenance {
            model: model.model.clone(),
            prompt_version_id: prompt::prompt_version_id().to_string(),
            latency_ms: turn.latency_ms,
            token_usage: turn.usage,
        };
        let parsed = match (&failure, &turn.tool_name) {
            (None, Some(name)) => tools::proposal_from_call(
                name,
                &turn.arguments,
                provenance.clone(),
                input_summary.clone(),
            )
            .map_err(|e| ("model_bad_arguments".to_string(), e)),
            (Some(f), _) => Err(f.clone()),
            (None, None) => Err(("model_no_tool".into(), "the model called no tool".into())),
        };
        match parsed {
            Ok(proposal) => (proposal, shown),
            Err((code, message)) => {
                self.record_error(step.session_id, step.run_id, "model", &code, &message)
                    .await;
                let partial = turn
                    .tool_name
                    .as_deref()
                    .and_then(|n| tools::partial_action(n, &turn.arguments));
                match partial {
                    // What the participant already read stands as the utterance.
                    Some(action) if !shown.is_empty() => {
                        let proposal = Proposal {
                            action,
                            rationale: format!("The model's answer broke off ({code}); the part already shown stands."),
                            message: Some(shown.clone()),
                            interaction: None,
                            fields: Vec::new(),
                            summary: None,
                            input_summary,
                            provenance,
                        };
                        (proposal, shown)
                    }
                    _ => {
                        let mut fallback = rules::propose(session, conversation, step.now);
                        fallback.rationale = format!(
                            "Fallback after a model failure ({code}): {}",
                            fallback.rationale
                        );
                        fallback.provenance = provenance;
                        (fallback, String::new())
                    }
                }
            }
        }
    }
}
