//! The harness: the interviewer's decision loop (`docs/architecture.md`, path 2).
//!
//! A run loads the session from its events, asks the policy for the next action, checks it with
//! the aggregate's own guard *before* a word is streamed, commits its claim on the turn
//! (`agent.message.started`: only the run that wins the optimistic lock goes on, so two runs
//! never both answer), streams the utterance as deltas to the session's subscribers, and submits
//! the decision as a command. A step the rules decide, taken as proposed, is one command instead
//! (`unclaimed.rs`): its claim, if it has words, is written in the same commit, and the hub
//! streams the words once it is committed. It loops while the interviewer holds the turn (extractions,
//! classifying a reply to the summary) and stops when the session waits for the participant or
//! has ended. A refused decision is recorded as `error.recorded` and replaced by the fallback,
//! so a session is never left without a next step.

pub mod budget;
pub mod conversation;
pub mod probing;
pub mod rules;
pub mod schedule;
mod unclaimed;

mod llm_records;
mod llm_step;

use hashlink::LruCache;
use std::sync::{Arc, Mutex};

use chrono::Utc;
use cqrs_es::{Aggregate, AggregateError};
use interview_projections::{read, Db, ProjectionError};
use interview_session::decision::{AgentAction, Proposal};
use interview_session::events::{Phase, SessionEvent, SessionStatus};
use interview_session::study::AgentMode;
use interview_session::{Session, SessionCommand, SessionError};
use uuid::Uuid;

use crate::command::store::{Actor, SessionStore};
use crate::live::stream_hub::StreamHub;
use crate::llm::ModelGateway;
use conversation::Conversation;
use unclaimed::Unclaimed;

/// Decisions one run may take before it yields (a guard against a policy that never waits).
const MAX_STEPS: usize = 12;

#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error("cannot read the session: {0}")]
    Read(#[from] ProjectionError),
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    #[error("a command was refused: {0}")]
    Command(#[from] AggregateError<SessionError>),
}

/// What a run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// The session now waits for the participant (or has ended).
    Yielded,
    /// Another run holds the turn; this one stopped without answering.
    LostClaim,
    /// Nothing to do: the session is not the interviewer's turn.
    Idle,
    /// A run on this session was already going in this process; it will look again.
    Queued,
}

pub struct Harness {
    db: Db,
    store: Arc<SessionStore>,
    hub: Arc<StreamHub>,
    /// The model endpoint, when one is configured; studies in `llm` mode use it.
    gateway: Option<Arc<ModelGateway>>,
    /// This process's model spend today, against `MODEL_TOKENS_PER_DAY`.
    daily: budget::DailyCap,
    /// This process, as named in its claims and heartbeats.
    process_id: Uuid,
    running: schedule::Running,
    /// Recently loaded sessions: a run's next load reads only the events after them (its own
    /// commands, or anything another process appended). Least recently used first out; a miss
    /// reads the whole stream.
    kept: Mutex<LruCache<String, Kept>>,
}

/// How many sessions' events the harness keeps between loads.
const KEPT_SESSIONS: usize = 512;

struct Kept {
    session: Session,
    events: Arc<Vec<SessionEvent>>,
    last_seq: u64,
    /// The run that folds `committed` — commits that followed the kept state with no gap (its
    /// own, an earlier run's, the participant's that triggered it) — at its next load, reading
    /// nothing.
    level_for: Option<Uuid>,
    committed: Vec<(u64, SessionEvent)>,
}

/// A session as the harness sees it: state, conversation, and the events behind them.
pub(crate) struct Loaded {
    pub session: Session,
    pub conversation: Conversation,
    pub events: Arc<Vec<SessionEvent>>,
}

impl Harness {
    pub fn new(
        db: Db,
        store: Arc<SessionStore>,
        hub: Arc<StreamHub>,
        gateway: Option<Arc<ModelGateway>>,
    ) -> Self {
        Self {
            db,
            store,
            hub,
            gateway,
            daily: budget::DailyCap::default(),
            process_id: Uuid::new_v4(),
            running: schedule::Running::default(),
            kept: Mutex::new(LruCache::new(KEPT_SESSIONS)),
        }
    }

    /// Caps this process's model spend per UTC day (0 = no cap).
    pub fn with_daily_model_cap(mut self, tokens: u64) -> Self {
        self.daily = budget::DailyCap::new(tokens);
        self
    }

    /// The session folded from its events, starting from what the last load of this session
    /// kept (the whole log when nothing is). Right after one of
    /// `run`'s own commands the kept state is the log's as that command found it, and nothing is
    /// read: a run is driven by its commits. Its first load, and any after a command whose
    /// events did not follow the kept ones, read the events after the kept state.
    async fn load(&self, session_id: &str, run: Uuid) -> Result<Loaded, HarnessError> {
        let kept = self
            .kept
            .lock()
            .expect("the harness cache is never poisoned")
            .remove(session_id);
        let Kept {
            mut session,
            mut events,
            mut last_seq,
            level_for,
            committed,
        } = kept.unwrap_or_else(|| Kept {
            session: Session::default(),
            events: Arc::default(),
            last_seq: 0,
            level_for: None,
            committed: Vec::new(),
        });
        let newer = if level_for == Some(run) {
            committed
        } else {
            read::decoded_events_after(&self.db, session_id, last_seq).await?
        };
        // Unshared by now, unless the post-session extraction still holds a copy (then the list
        // is copied once): the previous load's copy was dropped with its step.
        if let Some(seq) = fold_in(&mut session, &mut events, newer) {
            last_seq = seq;
        }
        let conversation = Conversation::from_events(&events);
        self.kept
            .lock()
            .expect("the harness cache is never poisoned")
            .insert(
                session_id.to_string(),
                Kept {
                    session: session.clone(),
                    events: events.clone(),
                    last_seq,
                    level_for: None,
                    committed: Vec::new(),
                },
            );
        Ok(Loaded {
            session,
            conversation,
            events,
        })
    }

    /// The session as its log stands now, for work outside a run (the post-session
    /// extraction): what the last load kept plus the events after it, read from the log — the
    /// whole log only when nothing is kept (another process ran the interview, or it was
    /// evicted).
    pub(crate) async fn load_latest(&self, session_id: &str) -> Result<Loaded, HarnessError> {
        // Looked at, not taken out nor put back: the run that completed the session may load
        // it once more, and a session nobody runs here does not push out one somebody does.
        let kept = self
            .kept
            .lock()
            .expect("the harness cache is never poisoned")
            .peek(session_id)
            .map(|k| {
                let committed = k.committed.clone();
                (k.session.clone(), k.events.clone(), k.last_seq, committed)
            });
        let (mut session, mut events, last_seq, mut newer) = kept.unwrap_or_default();
        // The commits kept after the state chain on from it; the log's tail follows them.
        let after = newer.last().map_or(last_seq, |(seq, _)| *seq);
        newer.extend(read::decoded_events_after(&self.db, session_id, after).await?);
        fold_in(&mut session, &mut events, newer);
        Ok(Loaded {
            conversation: Conversation::from_events(&events),
            session,
            events,
        })
    }
}

/// Folds `newer` (the events right after `events`, in order) into `session` and appends them;
/// the last one's sequence number, if there were any.
fn fold_in(
    session: &mut Session,
    events: &mut Arc<Vec<SessionEvent>>,
    newer: Vec<(u64, SessionEvent)>,
) -> Option<u64> {
    let last = newer.last().map(|(seq, _)| *seq)?;
    let list = Arc::make_mut(events);
    for (_, event) in newer {
        session.apply(event.clone());
        list.push(event);
    }
    Some(last)
}

impl Harness {
    async fn execute(
        &self,
        session_id: &str,
        command: SessionCommand,
        run_id: Uuid,
    ) -> Result<(), AggregateError<SessionError>> {
        let done = self
            .store
            .execute_committed(session_id, command, Actor::Agent, &format!("run-{run_id}"))
            .await;
        // A refused or failed command may have met events this run has not seen: the next load
        // reads the log.
        match done {
            Ok(committed) => {
                self.keep_committed(session_id, committed, run_id);
                Ok(())
            }
            Err(e) => {
                self.keep_committed(session_id, Vec::new(), run_id);
                Err(e)
            }
        }
    }

    /// Keeps a command's committed events for `run`'s next load when they follow the kept state
    /// (and the commits kept after it) without a gap, so that load has nothing to read. They are
    /// folded there, once the step holding the kept events has let go of them. The commits kept
    /// after the state may be an earlier run's (its last, never loaded) or the participant's
    /// that triggered this run: each was appended at the sequence after the one before, so the
    /// chain has no gap whoever wrote it.
    fn keep_committed(&self, session_id: &str, committed: Vec<(u64, SessionEvent)>, run: Uuid) {
        let mut kept = self
            .kept
            .lock()
            .expect("the harness cache is never poisoned");
        let Some(entry) = kept.get_mut(session_id) else {
            return;
        };
        let after = entry
            .committed
            .last()
            .map_or(entry.last_seq, |(seq, _)| *seq);
        if committed.first().map(|(seq, _)| *seq) != Some(after + 1) {
            entry.level_for = None;
            entry.committed.clear();
            return;
        }
        entry.committed.extend(committed);
        entry.level_for = Some(run);
    }

    /// The decision loop proper; the caller holds the session's slot in this process.
    async fn run_steps(&self, session_id: &str, run_id: Uuid) -> Result<RunOutcome, HarnessError> {
        let mut outcome = RunOutcome::Idle;
        let mut unclaimed = true;
        for _ in 0..MAX_STEPS {
            let Loaded {
                session,
                conversation,
                events,
            } = self.load(session_id, run_id).await?;
            let now = Utc::now();
            match session.status() {
                SessionStatus::Created => {
                    match self
                        .execute(session_id, SessionCommand::Start { at: now }, run_id)
                        .await
                    {
                        Ok(())
                        | Err(AggregateError::UserError(SessionError::InvalidState { .. })) => {
                            continue
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
                SessionStatus::Active => {}
                _ => return Ok(outcome),
            }
            if session.phase() == Phase::SummaryConfirmation
                || conversation.unclassified_summary_reply.is_some()
            {
                if let Some(reply) = &conversation.unclassified_summary_reply {
                    let phrases = session
                        .study()
                        .map(|s| s.agent_config.confirm_phrases.as_slice())
                        .unwrap_or_default();
                    let confirmed = interview_session::text::matches_phrase(reply, phrases);
                    // "结束" / "I'm done" at this step is no addition: the interview ends, its
                    // summary unconfirmed (as a second press of End would).
                    let ends = session.study().is_some_and(|s| {
                        interview_session::text::matches_phrase(reply, &s.agent_config.end_phrases)
                    });
                    let command = SessionCommand::ConfirmSummary {
                        confirmed,
                        addition: (!confirmed && !ends).then(|| reply.clone()),
                        at: now,
                    };
                    match self.execute(session_id, command, run_id).await {
                        // Another run classified this reply first.
                        Ok(())
                        | Err(AggregateError::UserError(SessionError::InvalidState { .. })) => {}
                        Err(e) => return Err(e.into()),
                    }
                    continue;
                }
            }
            if session.screening_awaits_verdict() {
                // The model judges in llm mode; the study's qualify/disqualify rules otherwise.
                let study = session.study().expect("a running session has its study");
                let (eligible, rationale, decided_by) =
                    match (&self.gateway, study.agent_config.mode) {
                        (Some(gateway), AgentMode::Llm) => {
                            let step = llm_step::Step {
                                session_id,
                                run_id,
                                message_id: Uuid::nil(),
                                now,
                            };
                            self.llm_judge_screening(gateway, &step, &session, &events)
                                .await
                        }
                        _ => {
                            let (eligible, rationale) = study
                                .study_config
                                .screening
                                .evaluate(session.screening_answers());
                            (eligible, rationale, None)
                        }
                    };
                let command = SessionCommand::EvaluateScreening {
                    eligible,
                    rationale,
                    decided_by,
                    at: now,
                };
                match self.execute(session_id, command, run_id).await {
                    // Another run recorded the verdict first.
                    Ok(()) | Err(AggregateError::UserError(SessionError::InvalidState { .. })) => {
                        continue
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            // A step the rules take needs no claim of its own: one commit fewer. Once one was
            // refused (the session moved), the run's later steps go the claimed way. The rules'
            // proposal, when it was worked out there, is the claimed step's too.
            let mut ruled = None;
            if unclaimed {
                match self
                    .unclaimed_step(session_id, run_id, &session, &conversation, now)
                    .await?
                {
                    Unclaimed::Committed => {
                        outcome = RunOutcome::Yielded;
                        continue;
                    }
                    Unclaimed::Moved => {
                        unclaimed = false;
                        continue;
                    }
                    Unclaimed::NotTaken(proposal) => ruled = proposal,
                }
            }
            // Claim the turn first: only the run that wins goes on to ask the model and stream.
            let message_id = Uuid::new_v4();
            // A claim left by a dead run (its process died mid-turn) is taken over at once.
            let takes_over = match session.open_claim() {
                Some(open) if self.claim_is_dead(open.process_id).await? => Some(open.run_id),
                _ => None,
            };
            let claim = SessionCommand::StartAgentMessage {
                message_id,
                run_id,
                process_id: Some(self.process_id),
                takes_over,
                at: now,
            };
            match self.execute(session_id, claim, run_id).await {
                Ok(()) => {}
                Err(AggregateError::UserError(
                    SessionError::InvalidState { .. } | SessionError::Terminal { .. },
                )) => return Ok(RunOutcome::LostClaim),
                Err(e) => return Err(e.into()),
            }
            let interaction_id = Uuid::new_v4().to_string();
            let mut reload = false;
            let step = llm_step::Step {
                session_id,
                run_id,
                message_id,
                now,
            };
            let (proposal, shown) =
                match (&self.gateway, session.study().map(|s| s.agent_config.mode)) {
                    // Consent, screening and safety stops are the runtime's own: the model is asked
                    // only during the interview proper.
                    (Some(gateway), Some(AgentMode::Llm)) if session.interviewing() => {
                        let model = &session.study().expect("interviewing").model_config;
                        match budget::check(&events, model, &self.daily, now, true) {
                            // An input not extracted yet has its extraction asked for at once
                            // with the next step, so the participant waits on one round trip.
                            None => {
                                let alongside = llm_records::extraction_due(&session, &events);
                                let extract = async {
                                    if alongside {
                                        self.llm_extract(
                                            gateway,
                                            &step,
                                            &session,
                                            &conversation,
                                            &events,
                                        )
                                        .await
                                    } else {
                                        None
                                    }
                                };
                                let (next, extraction) = tokio::join!(
                                    self.llm_propose(
                                        gateway,
                                        &step,
                                        &session,
                                        &conversation,
                                        &events,
                                        alongside
                                    ),
                                    extract,
                                );
                                if let Some(extraction) = extraction {
                                    self.record_extraction(
                                        session_id, message_id, extraction, run_id,
                                    )
                                    .await?;
                                    reload = true;
                                }
                                next
                            }
                            // Past a limit the rules interviewer decides, and says why.
                            Some(spent) => {
                                let mut p = rules::propose(&session, &conversation, now);
                                p.rationale = format!("{}: {}", spent.reason(), p.rationale);
                                (p, llm_step::Shown::Nothing)
                            }
                        }
                    }
                    _ => (
                        ruled.map_or_else(|| rules::propose(&session, &conversation, now), |p| *p),
                        llm_step::Shown::Nothing,
                    ),
                };
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
            let (proposal, judged) =
                match session.judge(&proposal, Some(interaction_id.clone()), now) {
                    Ok(judged) => (proposal, judged),
                    Err(refusal) => {
                        self.record_refusal(session_id, run_id, &refusal).await;
                        let fallback = fallback(&session, &conversation, now);
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
                }
            }
            let decide = SessionCommand::Decide {
                message_id,
                interaction_id: Some(interaction_id),
                proposal: Box::new(proposal),
                at: now,
            };
            self.execute(session_id, decide, run_id).await?;
            outcome = RunOutcome::Yielded;
        }
        tracing::warn!(
            session_id,
            "the interviewer took {MAX_STEPS} decisions without waiting; yielding"
        );
        Ok(outcome)
    }

    /// Commits an extraction decided alongside the utterance of claim `message_id`; one the
    /// aggregate refuses is recorded and the turn goes on without it.
    async fn record_extraction(
        &self,
        session_id: &str,
        message_id: Uuid,
        proposal: Proposal,
        run_id: Uuid,
    ) -> Result<(), HarnessError> {
        let command = SessionCommand::RecordExtraction {
            message_id,
            proposal: Box::new(proposal),
            at: Utc::now(),
        };
        match self.execute(session_id, command, run_id).await {
            Ok(()) => Ok(()),
            Err(AggregateError::UserError(refusal)) => {
                self.record_refusal(session_id, run_id, &refusal).await;
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Records a proposal the guards refused (source `guard`).
    async fn record_refusal(&self, session_id: &str, run_id: Uuid, refusal: &SessionError) {
        let message = refusal.to_string();
        self.record_error(session_id, run_id, "guard", refusal.code(), &message)
            .await;
    }

    /// Records a handled failure (`error.recorded`), for auditors; the run goes on.
    async fn record_error(
        &self,
        session_id: &str,
        run_id: Uuid,
        source: &str,
        code: &str,
        message: &str,
    ) {
        // The gateway already trims upstream text; this is the last line before the log.
        let message = &crate::llm::redact::redact(message, None);
        metrics::counter!("interview_fallbacks_total", "source" => source.to_string(), "code" => code.to_string())
            .increment(1);
        tracing::warn!(
            session_id,
            source,
            code,
            detail = message,
            "handled failure; falling back"
        );
        let command = SessionCommand::RecordError {
            source: source.into(),
            code: code.into(),
            message: message.into(),
            at: Utc::now(),
        };
        if let Err(e) = self.execute(session_id, command, run_id).await {
            tracing::error!(session_id, error = %e, "cannot record a harness error");
        }
    }
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

/// The most pieces one utterance is streamed in: well under the hub's per-session channel
/// (256 notes), so a long utterance (the summary of a long interview) never cuts a live stream
/// off as a subscriber that fell behind.
const MAX_PIECES: usize = 64;

/// Splits text into small pieces: three words at a time, or six characters of CJK text — more
/// per piece when that would make more than [`MAX_PIECES`].
pub fn chunks(text: &str) -> Vec<String> {
    if !text.contains(' ') {
        let chars: Vec<char> = text.chars().collect();
        let size = chars.len().div_ceil(MAX_PIECES).max(6);
        return chars.chunks(size).map(|c| c.iter().collect()).collect();
    }
    let words = text.split_inclusive(' ').count();
    let size = words.div_ceil(MAX_PIECES).max(3);
    let mut out = Vec::new();
    let mut current = String::new();
    for (i, piece) in text.split_inclusive(' ').enumerate() {
        current.push_str(piece);
        if i % size == size - 1 {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn chunks_rebuild_the_text() {
        for text in [
            "How do you usually plan your groceries for the week?",
            "你平时怎么计划每周买菜？",
            "Hi",
        ] {
            assert_eq!(super::chunks(text).concat(), text);
        }
    }

    #[test]
    fn a_long_utterance_streams_in_a_bounded_number_of_pieces() {
        let long = "word ".repeat(5_000);
        let pieces = super::chunks(&long);
        assert!(pieces.len() <= super::MAX_PIECES, "{}", pieces.len());
        assert_eq!(pieces.concat(), long);
        let cjk = "买菜".repeat(3_000);
        let pieces = super::chunks(&cjk);
        assert!(pieces.len() <= super::MAX_PIECES, "{}", pieces.len());
        assert_eq!(pieces.concat(), cjk);
        assert_eq!(super::chunks("one two three four").len(), 2);
    }
}
