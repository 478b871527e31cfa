//! One decision from the model: stream it, show its `message` as it arrives once the guards
//! accept its action and the text check lets it through, and turn failures into a recorded
//! error and a replacement the participant can always make sense of.

use std::time::Duration;

use chrono::{DateTime, Utc};
use interview_session::decision::{AgentAction, Proposal, Provenance};
use interview_session::events::SessionEvent;
use interview_session::Session;
use uuid::Uuid;

use super::streamed::Progress;
use super::{rules, step_prompt, Interviewer};
use crate::llm::visible::{Refused, Visible};
use crate::llm::{prompt, tools, ModelGateway, ModelTurn};
use interview_session::conversation::Conversation;

pub(super) use super::step::Step;

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

/// What one step is decided on, for the checks of what the model sent.
struct Asked<'a> {
    step: &'a Step<'a>,
    session: &'a Session,
    conversation: &'a Conversation,
    events: &'a [SessionEvent],
    visible: Visible,
    /// What the rules interviewer would do at this step, worked out once: the prompt's expected
    /// next step, the fallback, and the yardstick for a model decision kept in the runtime's
    /// words.
    rules: Proposal,
}

impl Asked<'_> {
    /// The model's tool call as a proposal, its fields checked against the schema; a call of no
    /// tool or with arguments that do not fit is a recorded failure (code, message).
    fn parsed(
        &self,
        turn: &ModelTurn,
        provenance: Provenance,
    ) -> Result<Proposal, (String, String)> {
        let Some(name) = &turn.tool_name else {
            return Err(("model_no_tool".into(), "the model called no tool".into()));
        };
        let study = self
            .session
            .study()
            .expect("a running session has its study");
        let listing = prompt::Listing::from_events(self.events);
        let input_summary = step_prompt::input_summary(self.session, self.conversation);
        tools::proposal_from_call(name, &turn.arguments, provenance, input_summary, &|t| {
            listing.resolve(t)
        })
        .and_then(|mut p| {
            super::llm_records::cite_latest(&mut p.fields, self.session);
            interview_session::field_values::check_model_fields(&study.output_schema, &p.fields)
                .map(|()| p)
        })
        .map_err(|e| ("model_bad_arguments".to_string(), e))
    }

    /// What any complete proposal is refused for: its texts (`step_text`), words said before
    /// (`said`), a summary of things never said (`founded`).
    fn refuses(&self, p: &Proposal) -> Option<Refused> {
        super::step_text::refused_text(&self.visible, p)
            .or_else(|| super::said::said_before(p, self.events))
            .or_else(|| super::founded::unfounded_summary(p, self.session, self.events))
    }

    /// The model's summary, if it stands on its own when the words presenting it were refused.
    fn summary_standing(&self, p: &Proposal) -> Option<String> {
        let alone = Proposal {
            message: None,
            interaction: None,
            ..p.clone()
        };
        p.summary.clone().filter(|_| self.refuses(&alone).is_none())
    }
}

impl Interviewer {
    /// One model decision, streamed. See `docs/llm-contract.md` for what is shown when.
    // Long by design: the steps of one streamed decision in order: the rules' step and the request,
    // the stream showing words as they pass the checks, the charge, the parse and the refusal
    // check, then one arm per outcome (words refused, shown and kept, nothing shown, a failure)
    // deciding what the participant is left seeing; split, the streaming progress (the text shown,
    // the verdict, whether it was complete) written during the stream and read by the arms would
    // travel in arguments.
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
        let rules = rules::propose(session, conversation, step.now);
        let request =
            step_prompt::step_request(session, conversation, events, alongside, &rules, step.now);
        let prompt_chars = request.sent_chars();
        let asked = Asked {
            step,
            session,
            conversation,
            events,
            visible: Visible::for_study(study),
            rules,
        };
        let mut progress = Progress {
            session,
            visible: &asked.visible,
            now: step.now,
            verdict: None,
            assumed: false,
            shown: String::new(),
            complete: false,
            refused: None,
        };
        let message_id = step.message_id.to_string();
        let timeout = Duration::from_secs(u64::from(study.model_config.timeout_seconds));
        let result = gateway
            .stream(request, timeout, |name, args| {
                if let Some(content) = progress.advance(name, args) {
                    self.hub.stream_delta(step.session_id, &message_id, content);
                }
            })
            .await;
        // The words reach every process's streams before the utterance's completion does.
        self.hub.words_sent().await;
        let (turn, failure, provenance) = self.settle(
            result,
            step.session_id,
            study,
            prompt::prompt_version_id(),
            prompt_chars,
            step.now,
        );
        let parsed = match failure {
            None => asked.parsed(&turn, provenance.clone()),
            Some(f) => Err(f),
        };
        let shown = std::mem::take(&mut progress.shown);
        let refused = progress
            .refused
            .clone()
            .or_else(|| asked.refuses(parsed.as_ref().ok()?));
        let (mut proposal, shown) = match (refused, parsed) {
            (Some(Refused(term)), parsed) => {
                self.words_refused(&asked, parsed.ok(), &term, &shown, provenance)
                    .await
            }
            (None, Ok(mut proposal)) if !shown.is_empty() => {
                if progress.assumed {
                    self.keep_shown_target(session, step.now, &mut proposal, &progress.verdict);
                }
                (proposal, Shown::Streamed(shown))
            }
            (None, Ok(proposal)) => (proposal, Shown::Nothing),
            (None, Err((code, message))) => {
                self.record_error(step.session_id, step.run_id, "model", &code, &message)
                    .await;
                let verdict = progress.verdict.clone().flatten();
                let whole = verdict.filter(|_| progress.complete);
                self.broke_off(&asked, &code, whole, shown, provenance)
            }
        };
        // A summary step given no summary presents what was recorded, with what the answers say
        // where nothing was recorded yet.
        if proposal.action == AgentAction::SummarizeAndConfirm && proposal.summary.is_none() {
            proposal.summary = Some(super::founded::runtime_summary(session, conversation));
        }
        (proposal, shown)
    }

    /// A step whose words were refused (`term`): recorded, and the decision carried out in the
    /// runtime's words when the guards take it as proposed, else the rules' step.
    async fn words_refused(
        &self,
        asked: &Asked<'_>,
        parsed: Option<Proposal>,
        term: &str,
        shown: &str,
        provenance: Provenance,
    ) -> (Proposal, Shown) {
        let step = asked.step;
        let what = if shown.is_empty() {
            "it was not shown"
        } else {
            "what was shown of it was replaced"
        };
        let message = format!("the model's text contained {term:?}; {what}");
        self.record_error(
            step.session_id,
            step.run_id,
            "guard",
            "model_text_refused",
            &message,
        )
        .await;
        let (session, conversation) = (asked.session, asked.conversation);
        let kept = parsed.and_then(|p| {
            let visible = &asked.visible;
            let mut kept = super::reworded::in_runtime_words(
                session,
                conversation,
                visible,
                &asked.rules,
                &p,
                term,
                step.now,
            )?;
            // A summary that passes every check stands when only its presenting words failed.
            if let Some(summary) = asked.summary_standing(&p) {
                kept.summary = Some(summary);
            }
            Some(kept)
        });
        if let Some(mut proposal) = kept {
            if !shown.is_empty() {
                proposal.rationale = format!(
                    "{} (the {} characters of its own already shown were replaced)",
                    proposal.rationale,
                    shown.chars().count()
                );
            }
            return (proposal, Shown::replacing(shown));
        }
        let why = format!("the model's text contained an internal term ({term:?})");
        self.replacement(asked, &why, provenance, shown)
    }

    /// A call that failed (`code`, recorded). When the whole message streamed before the call
    /// broke (`whole`: the action it was judged for), it stands once it passes what any
    /// complete message must; otherwise the rules' step replaces what was shown.
    fn broke_off(
        &self,
        asked: &Asked<'_>,
        code: &str,
        whole: Option<AgentAction>,
        shown: String,
        provenance: Provenance,
    ) -> (Proposal, Shown) {
        let (session, conversation) = (asked.session, asked.conversation);
        let Some(action) = whole else {
            let why = format!("a model failure ({code})");
            return self.replacement(asked, &why, provenance, &shown);
        };
        let proposal = Proposal {
            action,
            rationale: format!("The model's call broke off ({code}) after its whole message was shown; the message stands."),
            message: Some(shown.clone()),
            interaction: None,
            fields: Vec::new(),
            summary: None,
            input_summary: step_prompt::input_summary(session, conversation),
            provenance,
            input_class: None,
            refused: None,
        };
        // Only once the whole text passes what any complete message must (its ending, words,
        // not said before): what streamed was checked as a start.
        if let Some(Refused(term)) = asked.refuses(&proposal) {
            let why = format!("a model failure ({code}) and a refused text ({term:?})");
            let provenance = proposal.provenance.clone();
            return self.replacement(asked, &why, provenance, &shown);
        }
        (proposal, Shown::Streamed(shown))
    }

    /// The rules interviewer's decision in place of the model's. Its text replaces whatever part
    /// of the model's was shown; the model call's latency and tokens stay on the decision.
    fn replacement(
        &self,
        asked: &Asked<'_>,
        why: &str,
        failed_call: Provenance,
        shown: &str,
    ) -> (Proposal, Shown) {
        let mut fallback = asked.rules.clone();
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
