//! A step taken the claimed way: the run first commits its claim on the turn
//! (`agent.message.started`; only the run that wins the optimistic lock goes on, so two runs never
//! both answer), then asks its policy — the model in `llm` mode, streaming its words as they are
//! judged safe to show, or the rules — judges the proposal with the aggregate's own guard
//! (replacing a refused one by the fallback, so the participant always gets a next step), streams
//! what was not streamed yet, and submits the decision.

use chrono::{DateTime, Utc};
use cqrs_es::AggregateError;
use interview_session::commands as cmd;
use interview_session::decision::{AgentAction, Proposal, RefusedProposal};
use interview_session::events::SessionEvent;
use interview_session::study::AgentMode;
use interview_session::{Session, SessionCommand, SessionError};
use uuid::Uuid;

use super::{
    budget, llm_records, llm_step, rules, Interviewer, InterviewerError, Loaded, RunOutcome,
};
use interview_session::conversation::Conversation;

impl Interviewer {
    /// Claims the turn and takes the step: [`RunOutcome::LostClaim`] when another run holds
    /// it, [`RunOutcome::Yielded`] once the decision is committed.
    // Long by design: the steps of one claimed turn in order: claim the turn (taking over a dead
    // run's claim), stop if another run holds it, get the proposal, load again if an extraction was
    // committed beside it, judge it (recording a refusal and judging the fallback in its place),
    // stream the words not shown yet, then commit the decision; the order is the behaviour, nothing
    // being asked of the model before the claim is won.
    pub(super) async fn claimed_step(
        &self,
        session_id: &str,
        run_id: Uuid,
        loaded: Loaded,
        ruled: Option<Box<Proposal>>,
        now: DateTime<Utc>,
    ) -> Result<RunOutcome, InterviewerError> {
        let Loaded {
            session,
            conversation,
            events,
        } = loaded;
        // Claim the turn first: only the run that wins goes on to ask the model and stream.
        let message_id = Uuid::new_v4();
        // A claim left by a dead run (its process died mid-turn) is taken over at once.
        let takes_over = match session.open_claim() {
            Some(open) if self.claim_is_dead(open.process_id).await? => Some(open.run_id),
            _ => None,
        };
        let claim = SessionCommand::StartAgentMessage(cmd::StartAgentMessage {
            message_id,
            run_id,
            process_id: Some(self.process_id),
            takes_over,
            at: now,
        });
        match self.execute(session_id, claim, run_id).await {
            Ok(()) => {}
            Err(AggregateError::UserError(
                SessionError::InvalidState { .. } | SessionError::Terminal { .. },
            )) => return Ok(RunOutcome::LostClaim),
            Err(e) => return Err(e.into()),
        }
        let interaction_id = Uuid::new_v4().to_string();
        let step = llm_step::Step {
            session_id,
            run_id,
            message_id,
            now,
        };
        let (proposal, shown, reload) = self
            .propose_claimed(&step, &session, &conversation, &events, ruled)
            .await?;
        // An extraction committed alongside changed the state the decision is judged on.
        let (session, conversation) = if reload {
            let Loaded {
                session,
                conversation,
                ..
            } = self.load(session_id, run_id).await?;
            (session, conversation)
        } else {
            (session, conversation)
        };
        let mut proposal = proposal;
        // The model's judgement of the input when it gave one, the rules' otherwise.
        proposal.input_class = proposal
            .input_class
            .or_else(|| rules::input_class(&session, &conversation));
        let (proposal, judged) = match session.judge(&proposal, Some(interaction_id.clone()), now) {
            Ok(judged) => (proposal, judged),
            Err(refusal) => {
                self.record_refusal(session_id, run_id, &refusal).await;
                let fallback =
                    refused_into(proposal, &refusal, fallback(&session, &conversation, now));
                let judged = session
                    .judge(&fallback, Some(interaction_id.clone()), now)
                    .map_err(AggregateError::UserError)?;
                (fallback, judged)
            }
        };
        // Text already streamed stands; text that replaces a shown part reaches the
        // screen with `message.completed` (streaming it would append to the shown part).
        if shown == llm_step::Shown::Nothing {
            if let Some(text) = judged.message() {
                self.hub.publish_words(session_id, &message_id, text);
                self.hub.words_sent().await;
            }
        }
        let decide = SessionCommand::Decide(cmd::Decide {
            message_id,
            interaction_id: Some(interaction_id),
            proposal: Box::new(proposal),
            at: now,
        });
        self.execute(session_id, decide, run_id).await?;
        Ok(RunOutcome::Yielded)
    }

    /// The step and the extraction sent alongside it, both under way: the step's outcome, and
    /// the extraction if it is done by then or within [`EXTRACTION_GRACE`] after — the
    /// participant is never held longer for a background call (issue 32). One later than that
    /// is dropped (its request cut), recorded, and left to the final extraction, which reads
    /// every input.
    async fn step_first<S, E>(
        &self,
        step: &llm_step::Step<'_>,
        propose: S,
        extract: E,
    ) -> (S::Output, Option<Proposal>)
    where
        S: std::future::Future,
        E: std::future::Future<Output = Option<Proposal>>,
    {
        let (mut propose, mut extract) = (std::pin::pin!(propose), std::pin::pin!(extract));
        let mut extracted = None;
        let next = loop {
            tokio::select! {
                next = &mut propose => break next,
                done = &mut extract, if extracted.is_none() => extracted = Some(done),
            }
        };
        let extraction = match extracted {
            Some(done) => done,
            None => match tokio::time::timeout(EXTRACTION_GRACE, &mut extract).await {
                Ok(done) => done,
                Err(_) => {
                    let message = "the extraction alongside the step took longer than the step; the final extraction will read this input";
                    self.record_error(
                        step.session_id,
                        step.run_id,
                        "extraction",
                        "model_extraction_late",
                        message,
                    )
                    .await;
                    None
                }
            },
        };
        (next, extraction)
    }

    /// The policy's proposal for a claimed step, what of it was already shown, and whether an
    /// extraction was committed alongside it (the session must then be loaded again).
    // Long by design: one match on who proposes: the model during the interview proper within its
    // budgets, with the extraction sent alongside and committed when it is back in time; the rules
    // past a budget, saying which; the rules (or the proposal they already made) otherwise; split,
    // the reload flag the model arm sets would be returned through another layer.
    async fn propose_claimed(
        &self,
        step: &llm_step::Step<'_>,
        session: &Session,
        conversation: &Conversation,
        events: &[SessionEvent],
        ruled: Option<Box<Proposal>>,
    ) -> Result<(Proposal, llm_step::Shown, bool), InterviewerError> {
        let (session_id, run_id, message_id, now) =
            (step.session_id, step.run_id, step.message_id, step.now);
        let mut reload = false;
        let (proposal, shown) = match (&self.gateway, session.study().map(|s| s.agent_config.mode))
        {
            // Consent, screening and safety stops are the runtime's own: the model is asked
            // only during the interview proper.
            (Some(gateway), Some(AgentMode::Llm)) if session.interviewing() => {
                let study = session.study().expect("interviewing");
                match budget::check(events, study, &self.budgets, session_id, now, true) {
                    // An input not extracted yet has its extraction asked for at once
                    // with the next step, so the participant waits on one round trip — unless
                    // the endpoint serves one request at a time: the extraction would only
                    // start once the step is done and be dropped as late, so the final
                    // extraction, which reads every input, is left to do it.
                    None => {
                        let alongside = !gateway.one_at_a_time()
                            && llm_records::extraction_due(session, events);
                        let extract = async {
                            if alongside {
                                self.llm_extract(gateway, step, session, conversation, events)
                                    .await
                            } else {
                                None
                            }
                        };
                        let propose = self.llm_propose(
                            gateway,
                            step,
                            session,
                            conversation,
                            events,
                            alongside,
                        );
                        let (next, extraction) = self.step_first(step, propose, extract).await;
                        if let Some(mut extraction) = extraction {
                            not_from_a_non_answer(&mut extraction, &next.0, session);
                            self.record_extraction(session_id, message_id, extraction, run_id)
                                .await?;
                            reload = true;
                        }
                        next
                    }
                    // Past a limit the rules interviewer decides, and says why.
                    Some(spent) => {
                        let mut p = rules::propose(session, conversation, now);
                        p.rationale = format!("{}: {}", spent.reason(), p.rationale);
                        (p, llm_step::Shown::Nothing)
                    }
                }
            }
            _ => (
                ruled.map_or_else(|| rules::propose(session, conversation, now), |p| *p),
                llm_step::Shown::Nothing,
            ),
        };
        Ok((proposal, shown, reload))
    }
}

/// How long a decided step waits for the extraction sent alongside it.
const EXTRACTION_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// The model's own judgement of the participant's latest input applies to what is extracted from
/// it alongside: when the step says it was no answer (`participant_input`: a non-answer, a
/// question back, a refusal, off-topic, an end wish), no value rests on that input alone.
fn not_from_a_non_answer(extraction: &mut Proposal, step: &Proposal, session: &Session) {
    let (Some(class), Some(latest)) = (step.input_class, session.last_turn_id()) else {
        return;
    };
    if class.is_answer() {
        return;
    }
    extraction
        .fields
        .retain(|f| !f.status.is_answered() || f.evidence_turn_ids.iter().any(|t| *t != latest));
}

/// The fallback decision carrying the refused proposal (FR-04-11: no decision is lost): what
/// was proposed, its rationale, model and prompt, and the guard's reason; the call's latency and
/// tokens go on the decision carried out, which names the refusal first in its rationale.
fn refused_into(refused: Proposal, reason: &SessionError, mut fallback: Proposal) -> Proposal {
    fallback.rationale = format!(
        "The runtime refused the proposed {} ({reason}); instead: {}",
        refused.action.label(),
        fallback.rationale
    );
    fallback.input_class = refused.input_class.or(fallback.input_class);
    fallback.provenance.latency_ms = refused.provenance.latency_ms;
    fallback.provenance.token_usage = refused.provenance.token_usage;
    fallback.refused = Some(Box::new(RefusedProposal {
        proposed_action: refused.action,
        rationale: refused.rationale,
        model: refused.provenance.model,
        prompt_version_id: refused.provenance.prompt_version_id,
        reason: reason.to_string(),
    }));
    fallback
}

/// The fallback when a proposal is refused: the rules interviewer's choice, or, should even that
/// be refused, the summary (always possible once consent is settled).
fn fallback(
    session: &Session,
    conversation: &Conversation,
    now: chrono::DateTime<Utc>,
) -> Proposal {
    let rules = rules::propose(session, conversation, now);
    if session
        .judge(&rules, Some(Uuid::nil().to_string()), now)
        .is_ok()
    {
        return rules;
    }
    let mut p = rules;
    p.action = AgentAction::SummarizeAndConfirm;
    p.rationale = "Fallback after a refused decision: confirm what was learned so far.".into();
    p.message = None;
    p.summary = None;
    p
}
