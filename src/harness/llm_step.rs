//! One decision from the model: stream it, show its `message` as it arrives once the guards
//! accept its action and the text check lets it through, and turn failures into a recorded
//! error and a replacement the participant can always make sense of.

use std::time::Duration;

use chrono::{DateTime, Utc};
use interview_session::decision::{AgentAction, Proposal, Provenance, TokenUsage};
use interview_session::events::{EventBody, SessionEvent};
use interview_session::Session;
use uuid::Uuid;

use super::conversation::Conversation;
use super::{rules, Harness};
use crate::llm::visible::{Refused, Visible};
use crate::llm::{prompt, tools, ModelGateway, ModelTurn};
use crate::stream_hub::Live;

/// Identifies the decision being made.
pub(super) struct Step<'a> {
    pub session_id: &'a str,
    pub run_id: Uuid,
    pub message_id: Uuid,
    pub now: DateTime<Utc>,
}

/// What the participant saw of a decision while it streamed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Shown {
    /// Nothing: the harness streams the decision's text itself.
    Nothing,
    /// This text, which is the decision's whole message.
    Streamed(String),
    /// Part of a message that will not stand; the committed utterance (another text) replaces
    /// it on the participant's screen (`message.completed` carries the full text).
    Replaced,
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

/// The streaming side of one call: what was shown, and what the check decided.
struct Progress<'a> {
    session: &'a Session,
    visible: &'a Visible,
    now: DateTime<Utc>,
    /// The action the shown text was judged for: `None` until known; `Some(None)` when the
    /// guards would rewrite it (nothing is shown).
    verdict: Option<Option<AgentAction>>,
    /// Set when the text was judged for the objective the session expected because the model
    /// sent its words before naming one.
    assumed: bool,
    shown: String,
    /// The message argument arrived whole and all of it was shown.
    complete: bool,
    refused: Option<Refused>,
}

impl Progress<'_> {
    /// The part of the message that may be shown now, beyond what already was.
    fn advance(&mut self, name: &str, args: &str) -> Option<String> {
        if self.refused.is_some() {
            return None;
        }
        let message = tools::partial_message(args);
        if self.verdict.is_none() {
            // The guard needs the tool and its target; a model that writes its words first gets
            // them judged for the objective the session expects (docs/llm-contract.md).
            let action = match tools::partial_action(name, args) {
                Some(action) => Some(action),
                None if message.is_some() => {
                    self.assumed = true;
                    tools::expected_action(name, self.session)
                }
                None => None,
            };
            if let Some(action) = action {
                let ok = accepted_as_is(self.session, action.clone(), self.now);
                self.verdict = Some(ok.then_some(action));
            }
        }
        let Some(Some(_)) = &self.verdict else {
            return None;
        };
        let (message, complete) = message?;
        match self.visible.check(&message, complete) {
            Err(refused) => {
                self.refused = Some(refused);
                None
            }
            Ok(ready) => {
                let ready = &message[..ready];
                self.complete = complete && ready.len() == message.len();
                let delta = ready
                    .strip_prefix(self.shown.as_str())
                    .filter(|d| !d.is_empty())?
                    .to_string();
                self.shown = ready.to_string();
                Some(delta)
            }
        }
    }
}

/// Tokens as the endpoint counted them, or an estimate (four characters a token) when it
/// reported none, so budgets hold against servers that do not count.
fn usage_of(turn: &ModelTurn, prompt_chars: usize) -> TokenUsage {
    if turn.usage_reported {
        return turn.usage;
    }
    let prompt_tokens = (prompt_chars / 4) as u32;
    let completion_tokens = (turn.arguments.len() / 4) as u32;
    TokenUsage {
        prompt_tokens,
        completion_tokens,
        total_tokens: prompt_tokens + completion_tokens,
    }
}

/// The text of a complete proposal that a participant would read, checked whole.
fn refused_text(visible: &Visible, p: &Proposal) -> Option<Refused> {
    let mut texts: Vec<&str> = p
        .message
        .iter()
        .chain(p.summary.iter())
        .map(String::as_str)
        .collect();
    if let Some(spec) = &p.interaction {
        texts.push(&spec.prompt);
    }
    texts.into_iter().find_map(|t| visible.refuses(t))
}

impl Harness {
    /// The screening verdict in llm mode. The study's rules decide whatever they cover: a
    /// rule that disqualifies is final, and when every question has a rule the model is not
    /// asked. Otherwise the model (`judge_screening`) judges the questions no rule covers; on any
    /// failure, recorded, the rules' verdict stands. The model call, when there is one, is
    /// returned for the log.
    pub(super) async fn llm_judge_screening(
        &self,
        gateway: &ModelGateway,
        step: &Step<'_>,
        session: &Session,
        events: &[SessionEvent],
    ) -> (bool, String, Option<Provenance>) {
        let study = session.study().expect("a running session has its study");
        let screening = &study.study_config.screening;
        let (eligible, rules_rationale) = screening.evaluate(session.screening_answers());
        if !eligible || screening.unruled_questions().is_empty() {
            return (
                eligible,
                format!("By the study's rules: {rules_rationale}"),
                None,
            );
        }
        if let Some(spent) =
            super::budget::check(events, &study.model_config, &self.daily, step.now, false)
        {
            let rationale = format!(
                "{}: by the study's rules, {rules_rationale}",
                spent.reason()
            );
            return (eligible, rationale, None);
        }
        let Some(request) = prompt::screening_request(session) else {
            return (eligible, rules_rationale, None);
        };
        let timeout = Duration::from_secs(u64::from(study.model_config.timeout_seconds));
        let (verdict, turn) = match gateway.stream(request, timeout, |_, _| {}).await {
            Ok(turn) if turn.tool_name.as_deref() == Some("judge_screening") => {
                let args: serde_json::Value =
                    serde_json::from_str(&turn.arguments).unwrap_or_default();
                let verdict = match (
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
                };
                (verdict, turn)
            }
            Ok(turn) => (
                Err((
                    "model_bad_arguments".to_string(),
                    format!("expected judge_screening, got {:?}", turn.tool_name),
                )),
                turn,
            ),
            Err((error, turn)) => (Err((error.code().to_string(), error.to_string())), turn),
        };
        let call = Provenance {
            model: turn
                .model
                .clone()
                .unwrap_or_else(|| study.model_config.model.clone()),
            prompt_version_id: prompt::screening_version_id().to_string(),
            latency_ms: turn.latency_ms,
            token_usage: usage_of(&turn, 0),
        };
        self.daily
            .spend(u64::from(call.token_usage.total_tokens), step.now);
        match verdict {
            Ok((eligible, rationale)) => (eligible, rationale, Some(call)),
            Err((code, message)) => {
                self.record_error(step.session_id, step.run_id, "model", &code, &message)
                    .await;
                (
                    eligible,
                    format!("Fallback after a model failure ({code}): {rules_rationale}"),
                    None,
                )
            }
        }
    }

    /// The extraction of the participant's last input, asked for alongside the next step (one
    /// round trip for the participant). A failure is recorded (source `extraction`: the
    /// participant did not wait on it) and the turn goes on without it.
    pub(super) async fn llm_extract(
        &self,
        gateway: &ModelGateway,
        step: &Step<'_>,
        session: &Session,
        conversation: &Conversation,
        events: &[SessionEvent],
    ) -> Option<Proposal> {
        let study = session.study()?;
        let transcript = prompt::transcript(&prompt::listing(events), conversation);
        let prompt_chars = transcript.len();
        let request = prompt::extraction_request(session, transcript)?;
        let timeout = Duration::from_secs(u64::from(study.model_config.timeout_seconds));
        let result = gateway.stream(request, timeout, |_, _| {}).await;
        let (turn, failure) = match result {
            Ok(turn) => (turn, None),
            Err((error, turn)) => (turn, Some((error.code().to_string(), error.to_string()))),
        };
        let provenance = Provenance {
            model: turn
                .model
                .clone()
                .unwrap_or_else(|| study.model_config.model.clone()),
            prompt_version_id: prompt::prompt_version_id().to_string(),
            latency_ms: turn.latency_ms,
            token_usage: usage_of(&turn, prompt_chars),
        };
        self.daily
            .spend(u64::from(provenance.token_usage.total_tokens), step.now);
        let parsed = match (failure, turn.tool_name.as_deref()) {
            (Some(f), _) => Err(f),
            (None, Some("extract_fields")) => tools::proposal_from_call(
                "extract_fields",
                &turn.arguments,
                provenance,
                format!(
                    "{} turns; extraction alongside the next step",
                    session.turn_count()
                ),
            )
            .map_err(|e| ("model_bad_arguments".to_string(), e)),
            (None, other) => Err((
                "model_bad_arguments".to_string(),
                format!("expected extract_fields, got {other:?}"),
            )),
        };
        match parsed {
            Ok(proposal) => Some(proposal),
            Err((code, message)) => {
                self.record_error(step.session_id, step.run_id, "extraction", &code, &message)
                    .await;
                None
            }
        }
    }

    /// One model decision, streamed. See `docs/llm-contract.md` for what is shown when.
    pub(super) async fn llm_propose(
        &self,
        gateway: &ModelGateway,
        step: &Step<'_>,
        session: &Session,
        conversation: &Conversation,
        events: &[SessionEvent],
        alongside: bool,
    ) -> (Proposal, Shown) {
        let study = session.study().expect("a running session has its study");
        let model = &study.model_config;
        let system = prompt::system_prompt(session, step.now);
        let mut user = prompt::transcript(&prompt::listing(events), conversation);
        let tools = if alongside {
            user.push_str(prompt::ALONGSIDE_NOTE);
            prompt::tools_without_extraction()
        } else {
            prompt::TOOLS
        };
        let prompt_chars = system.len() + user.len();
        let request = prompt::request(model, system, user, tools);
        let input_summary = format!(
            "{} turns; last participant input: {}",
            session.turn_count(),
            conversation
                .last_message
                .as_ref()
                .map(|(_, t)| t.chars().take(120).collect::<String>())
                .unwrap_or_default()
        );
        let visible = Visible::for_study(study);
        let mut progress = Progress {
            session,
            visible: &visible,
            now: step.now,
            verdict: None,
            assumed: false,
            shown: String::new(),
            complete: false,
            refused: None,
        };
        let message_id = step.message_id.to_string();
        let result = gateway
            .stream(
                request,
                Duration::from_secs(u64::from(model.timeout_seconds)),
                |name, args| {
                    if let Some(content) = progress.advance(name, args) {
                        self.hub.publish(
                            step.session_id,
                            Live::Delta {
                                message_id: message_id.clone(),
                                content,
                            },
                        );
                    }
                },
            )
            .await;
        let (turn, failure) = match result {
            Ok(turn) => (turn, None),
            Err((error, turn)) => (turn, Some((error.code().to_string(), error.to_string()))),
        };
        let provenance = Provenance {
            // The model that answered, as the endpoint names it; the configured one otherwise.
            model: turn.model.clone().unwrap_or_else(|| model.model.clone()),
            prompt_version_id: prompt::prompt_version_id().to_string(),
            latency_ms: turn.latency_ms,
            token_usage: usage_of(&turn, prompt_chars),
        };
        self.daily
            .spend(u64::from(provenance.token_usage.total_tokens), step.now);
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
        let shown = std::mem::take(&mut progress.shown);
        let refused = progress
            .refused
            .clone()
            .or_else(|| parsed.as_ref().ok().and_then(|p| refused_text(&visible, p)));
        if let Some(Refused(term)) = refused {
            self.record_error(
                step.session_id,
                step.run_id,
                "guard",
                "model_text_refused",
                &format!("the model's text contained {term:?}; it was not shown"),
            )
            .await;
            let why = format!("the model's text contained an internal term ({term:?})");
            return self.replacement(session, conversation, step, &why, provenance, &shown);
        }
        match parsed {
            Ok(mut proposal) => {
                if shown.is_empty() {
                    return (proposal, Shown::Nothing);
                }
                if progress.assumed {
                    self.keep_shown_target(session, step.now, &mut proposal, &progress.verdict);
                }
                (proposal, Shown::Streamed(shown))
            }
            Err((code, message)) => {
                self.record_error(step.session_id, step.run_id, "model", &code, &message)
                    .await;
                match &progress.verdict {
                    // The whole message was shown before the call broke: it stands.
                    Some(Some(action)) if progress.complete => {
                        let proposal = Proposal {
                            action: action.clone(),
                            rationale: format!("The model's call broke off ({code}) after its whole message was shown; the message stands."),
                            message: Some(shown.clone()),
                            interaction: None,
                            fields: Vec::new(),
                            summary: None,
                            input_summary,
                            provenance,
                        };
                        (proposal, Shown::Streamed(shown))
                    }
                    _ => {
                        let why = format!("a model failure ({code})");
                        self.replacement(session, conversation, step, &why, provenance, &shown)
                    }
                }
            }
        }
    }

    /// The rules interviewer's decision in place of the model's. Its text replaces whatever part
    /// of the model's was shown; the model call's latency and tokens stay on the decision.
    fn replacement(
        &self,
        session: &Session,
        conversation: &Conversation,
        step: &Step<'_>,
        why: &str,
        failed_call: Provenance,
        shown: &str,
    ) -> (Proposal, Shown) {
        let mut fallback = rules::propose(session, conversation, step.now);
        fallback.rationale = if shown.is_empty() {
            format!("Fallback after {why}: {}", fallback.rationale)
        } else {
            format!(
                "Fallback after {why}; the {} characters already shown were replaced: {}",
                shown.chars().count(),
                fallback.rationale
            )
        };
        fallback.provenance.latency_ms = failed_call.latency_ms;
        fallback.provenance.token_usage = failed_call.token_usage;
        let shown = if shown.is_empty() {
            Shown::Nothing
        } else {
            Shown::Replaced
        };
        (fallback, shown)
    }

    /// A model that named its objective only after its words were shown: when the objective it
    /// named would be rewritten, the decision is recorded for the one the words were judged for.
    fn keep_shown_target(
        &self,
        session: &Session,
        now: DateTime<Utc>,
        proposal: &mut Proposal,
        verdict: &Option<Option<AgentAction>>,
    ) {
        let Some(Some(judged_for)) = verdict else {
            return;
        };
        let rewritten = session
            .judge(proposal, Some(Uuid::nil().to_string()), now)
            .map_or(true, |j| j.proposed.is_some());
        if rewritten && proposal.action != *judged_for {
            proposal.rationale = format!(
                "{} (the words were shown before the model named its objective; recorded as {:?}, what they were checked for, instead of {:?})",
                proposal.rationale, judged_for, proposal.action
            );
            proposal.action = match (judged_for, &proposal.action) {
                // Keep the model's own trigger and turn.
                (
                    AgentAction::Probe { objective_id, .. },
                    AgentAction::Probe {
                        based_on_turn_id,
                        trigger,
                        ..
                    },
                ) => AgentAction::Probe {
                    objective_id: objective_id.clone(),
                    based_on_turn_id: *based_on_turn_id,
                    trigger: *trigger,
                },
                (judged_for, _) => judged_for.clone(),
            };
        }
    }
}

/// Whether the participant's last input (a message, or a widget answered during the interview)
/// has not been extracted yet: then the extraction runs alongside the next step.
pub(super) fn extraction_due(session: &Session, events: &[SessionEvent]) -> bool {
    let has_fields = session
        .study()
        .is_some_and(|s| !s.output_schema.fields.is_empty());
    if !has_fields || !session.interviewing() {
        return false;
    }
    // Widgets shown for an objective (consent and screening widgets have none).
    let objective_widgets: std::collections::HashSet<&str> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::InteractionRendered { interaction }
                if interaction.objective_id.is_some() =>
            {
                Some(interaction.interaction_id.as_str())
            }
            _ => None,
        })
        .collect();
    for e in events.iter().rev() {
        match &e.body {
            EventBody::ExtractionCompleted { .. } => return false,
            EventBody::ParticipantMessageCreated { .. } => return true,
            EventBody::InteractionSubmitted { interaction_id, .. } => {
                return objective_widgets.contains(interaction_id.as_str())
            }
            _ => {}
        }
    }
    false
}
