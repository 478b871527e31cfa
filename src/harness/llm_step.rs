//! One decision from the model: stream it, show its `message` as it arrives once the guards
//! accept its action and the text check lets it through, and turn failures into a recorded
//! error and a replacement the participant can always make sense of.

use std::time::Duration;

use chrono::{DateTime, Utc};
use interview_session::decision::{AgentAction, Proposal, Provenance, TokenUsage};
use interview_session::events::SessionEvent;
use interview_session::Session;
use uuid::Uuid;

use super::conversation::Conversation;
use super::streamed::Progress;
use super::{rules, Harness};
use crate::live::stream_hub::Live;
use crate::llm::visible::{Refused, Visible};
use crate::llm::{prompt, tools, ModelGateway, ModelTurn};

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

impl Shown {
    /// What was shown of a text that another replaces: nothing, or a part to replace.
    fn replacing(shown: &str) -> Self {
        if shown.is_empty() {
            Self::Nothing
        } else {
            Self::Replaced
        }
    }
}

impl Harness {
    /// A model call's provenance — the model that answered, as the endpoint names it (the
    /// configured one otherwise), and its tokens — counted against the daily cap.
    pub(super) fn charge(
        &self,
        turn: &ModelTurn,
        session_id: &str,
        study: &interview_session::study::PinnedStudy,
        prompt_version_id: &str,
        prompt_chars: usize,
        now: DateTime<Utc>,
    ) -> Provenance {
        let provenance = Provenance {
            model: turn
                .model
                .clone()
                .unwrap_or_else(|| study.model_config.model.clone()),
            prompt_version_id: prompt_version_id.to_string(),
            latency_ms: turn.latency_ms,
            token_usage: usage_of(turn, prompt_chars),
        };
        let usage = &provenance.token_usage;
        let cost = study.model_config.price_per_million_tokens.map(|price| {
            price.micro_usd(
                u64::from(usage.prompt_tokens),
                u64::from(usage.completion_tokens),
            )
        });
        self.budgets.spend(
            session_id,
            &study.study_id,
            u64::from(usage.total_tokens),
            cost,
            now,
        );
        metrics::counter!("interview_model_tokens_total", "direction" => "prompt")
            .increment(u64::from(usage.prompt_tokens));
        metrics::counter!("interview_model_tokens_total", "direction" => "completion")
            .increment(u64::from(usage.completion_tokens));
        metrics::histogram!("interview_model_call_seconds").record(turn.latency_ms as f64 / 1e3);
        provenance
    }

    /// A finished call: what arrived, the failure's code and message if it failed, and its
    /// provenance (charged against the daily cap).
    #[allow(clippy::result_large_err)] // the gateway's own result, taken apart here
    pub(super) fn settle(
        &self,
        result: Result<ModelTurn, (crate::llm::ModelError, ModelTurn)>,
        session_id: &str,
        study: &interview_session::study::PinnedStudy,
        prompt_version_id: &str,
        prompt_chars: usize,
        now: DateTime<Utc>,
    ) -> (ModelTurn, Option<(String, String)>, Provenance) {
        let (turn, failure) = match result {
            Ok(turn) => (turn, None),
            Err((error, turn)) => (turn, Some((error.code().to_string(), error.to_string()))),
        };
        let outcome = failure
            .as_ref()
            .map_or("ok".to_string(), |(code, _)| code.clone());
        metrics::counter!("interview_model_calls_total", "outcome" => outcome).increment(1);
        let provenance = self.charge(
            &turn,
            session_id,
            study,
            prompt_version_id,
            prompt_chars,
            now,
        );
        (turn, failure, provenance)
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
        let system = prompt::system_prompt(session);
        let listing = prompt::Listing::from_events(events);
        let mut user = prompt::transcript(session, events, &listing, conversation);
        if alongside {
            user.push_str(prompt::ALONGSIDE_NOTE);
        }
        let stopping =
            session.stop_reason(step.now).is_some() || session.summary_confirmed().is_some();
        user.push_str(&prompt::progress_section(session, step.now));
        // Only what the guards would carry out as proposed (`offered.rs`); an extraction only of
        // an input not extracted yet (a model offered it after every extraction spent the turn's
        // three calls on it), and none while questioning stops or one runs alongside.
        let extraction =
            !stopping && !alongside && super::llm_records::extraction_due(session, events);
        let offers = super::offered::offered_now(session, step.now, extraction);
        let expected = super::rules::propose(session, conversation, step.now);
        let judged = session
            .judge(&expected, Some(Uuid::nil().to_string()), step.now)
            .ok();
        user.push_str(&prompt::expected_next(
            &expected.action,
            judged.as_ref(),
            offers.iter().any(|o| o.tool == "extract_fields"),
        ));
        let tools = crate::llm::schemas::for_step(&offers, study).into();
        let request = prompt::request(model, system, user, tools);
        let prompt_chars = request.sent_chars();
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
        let (turn, failure, provenance) = self.settle(
            result,
            step.session_id,
            study,
            prompt::prompt_version_id(),
            prompt_chars,
            step.now,
        );
        let parsed = match (&failure, &turn.tool_name) {
            (None, Some(name)) => tools::proposal_from_call(
                name,
                &turn.arguments,
                provenance.clone(),
                input_summary.clone(),
                &|t| listing.resolve(t),
            )
            .and_then(|mut p| {
                super::llm_records::cite_latest(&mut p.fields, session);
                interview_session::field_values::check_model_fields(&study.output_schema, &p.fields)
                    .map(|()| p)
            })
            .map_err(|e| ("model_bad_arguments".to_string(), e)),
            (Some(f), _) => Err(f.clone()),
            (None, None) => Err(("model_no_tool".into(), "the model called no tool".into())),
        };
        let shown = std::mem::take(&mut progress.shown);
        let refused = progress.refused.clone().or_else(|| {
            parsed.as_ref().ok().and_then(|p| {
                super::step_text::refused_text(&visible, p)
                    .or_else(|| super::said::said_before(p, events))
                    .or_else(|| super::founded::unfounded_summary(p, session, events))
            })
        });
        if let Some(Refused(term)) = refused {
            self.record_error(
                step.session_id,
                step.run_id,
                "guard",
                "model_text_refused",
                &if shown.is_empty() {
                    format!("the model's text contained {term:?}; it was not shown")
                } else {
                    format!(
                        "the model's text contained {term:?}; what was shown of it was replaced"
                    )
                },
            )
            .await;
            // The decision stands in the runtime's words when the guards take it as proposed.
            let kept = parsed.ok().and_then(|p| {
                super::reworded::in_runtime_words(
                    session,
                    conversation,
                    &visible,
                    &p,
                    &term,
                    step.now,
                )
            });
            if let Some(mut proposal) = kept {
                if !shown.is_empty() {
                    proposal.rationale = format!(
                        "{} (the {} characters of its own already shown were replaced)",
                        proposal.rationale,
                        shown.chars().count()
                    );
                }
                return (proposal, Shown::replacing(&shown));
            }
            let why = format!("the model's text contained an internal term ({term:?})");
            return self.replacement(session, conversation, step, &why, provenance, &shown);
        }
        match parsed {
            Ok(mut proposal) => {
                // A summary step the model gave no summary for presents what was recorded,
                // with what the answers say where nothing was recorded yet.
                if proposal.action == AgentAction::SummarizeAndConfirm && proposal.summary.is_none()
                {
                    proposal.summary = Some(super::rules::summary(session, conversation));
                }
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
                            input_class: None,
                            refused: None,
                        };
                        // Only once the whole text passes what any complete message must (its
                        // ending, words, not said before): what streamed was checked as a start.
                        let refused = super::step_text::refused_text(&visible, &proposal)
                            .or_else(|| super::said::said_before(&proposal, events));
                        if let Some(Refused(term)) = refused {
                            let why =
                                format!("a model failure ({code}) and a refused text ({term:?})");
                            let provenance = proposal.provenance.clone();
                            return self.replacement(
                                session,
                                conversation,
                                step,
                                &why,
                                provenance,
                                &shown,
                            );
                        }
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
        (fallback, Shown::replacing(shown))
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

/// Tokens as the endpoint counted them, or an estimate (four characters a token) when it
/// reported none, so budgets hold against servers that do not count.
pub(super) fn usage_of(turn: &ModelTurn, prompt_chars: usize) -> TokenUsage {
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
