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
//!
//! Here: the loop (`Interviewer::run_steps`). Beside it: how a run loads the session from what it
//! kept (`kept.rs`), the step taken the claimed way (`claimed.rs`) or in one commit
//! (`unclaimed.rs`), the verdicts on a summary reply and on screening answers (`verdicts.rs`),
//! what a run records besides its steps (`records.rs`), when runs start (`schedule.rs`), and the
//! policies: the rules (`rules.rs`, `probing.rs`) and the model (`llm_step.rs`,
//! `llm_records.rs`, within `budget.rs`).

pub mod budget;
pub mod probing;
pub mod reworded;
pub mod rules;
pub mod rules_fields;
mod rules_proposal;
pub mod schedule;
mod step;

mod charged;
mod claimed;
mod founded;
mod kept;
mod llm_records;
mod llm_step;
mod offered;
mod records;
mod said;
mod step_prompt;
mod step_text;
mod streamed;
mod unclaimed;
mod verdicts;

use interview_session::commands as cmd;
use std::sync::{Arc, Mutex};

use chrono::Utc;
use cqrs_es::AggregateError;
use interview_projections::{Db, ProjectionError};
use interview_session::events::{SessionEvent, SessionStatus};
use interview_session::{Session, SessionCommand, SessionError};
use uuid::Uuid;

use crate::command::store::SessionStore;
use crate::live::stream_hub::StreamHub;
use crate::llm::ModelGateway;
use interview_session::conversation::Conversation;
use kept::{Kept, KEPT_BYTES, KEPT_SESSIONS};
use unclaimed::Unclaimed;

/// Decisions one run may take before it yields (a guard against a policy that never waits).
const MAX_STEPS: usize = 12;

#[derive(Debug, thiserror::Error)]
pub enum InterviewerError {
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

pub struct Interviewer {
    db: Db,
    store: Arc<SessionStore>,
    hub: Arc<StreamHub>,
    /// The model endpoint, when one is configured; studies in `llm` mode use it.
    gateway: Option<Arc<ModelGateway>>,
    /// This process's model spend against the operator's limits (`MODEL_TOKENS_PER_*`).
    budgets: budget::Budgets,
    /// This process, as named in its claims and heartbeats.
    process_id: Uuid,
    running: schedule::Running,
    /// Recently loaded sessions: a run's next load reads only the events after them (its own
    /// commands, or anything another process appended). Least recently used first out; a miss
    /// reads the whole stream.
    kept: Mutex<crate::bounded::BoundedLru<Kept>>,
}

/// A session as the harness sees it: state, conversation, and the events behind them.
pub(crate) struct Loaded {
    pub session: Session,
    pub conversation: Conversation,
    pub events: Arc<Vec<SessionEvent>>,
}

impl Interviewer {
    /// Where the model endpoint stands (its request form, its breaker), if there is one.
    pub fn model_status(&self) -> Option<serde_json::Value> {
        self.gateway.as_ref().map(|g| g.status())
    }

    /// Forgets what the harness keeps of a session (after its data was erased).
    pub fn forget(&self, session_id: &str) {
        self.kept
            .lock()
            .expect("the harness cache is never poisoned")
            .remove(session_id);
        // The network address its inputs came from is personal data too.
        self.budgets.forget_address(session_id);
    }

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
            budgets: budget::Budgets::default(),
            process_id: Uuid::new_v4(),
            running: schedule::Running::default(),
            kept: Mutex::new(crate::bounded::BoundedLru::new(KEPT_SESSIONS, KEPT_BYTES)),
        }
    }

    /// Limits this process's model spend (each 0 = none).
    pub fn with_model_limits(mut self, limits: budget::Limits) -> Self {
        self.budgets = budget::Budgets::new(limits);
        self
    }

    /// Remembers the client address a session's latest input came from: the model calls that
    /// input causes are charged to it.
    pub fn note_address(&self, session_id: &str, address: &str) {
        self.budgets.note_address(session_id, address);
    }
}

impl Interviewer {
    /// The decision loop proper; the caller holds the session's slot in this process.
    // Long by design: a priority list where the order is the behaviour: each pass loads the session
    // and does the first thing due (start a created session, stop unless it is active, classify a
    // reply to the summary, judge the screening, an unclaimed rules step, else a claimed step); the
    // outcome and whether the run still goes unclaimed are carried from pass to pass.
    async fn run_steps(
        &self,
        session_id: &str,
        run_id: Uuid,
    ) -> Result<RunOutcome, InterviewerError> {
        let mut outcome = RunOutcome::Idle;
        let mut unclaimed = true;
        for _ in 0..MAX_STEPS {
            let loaded = self.load(session_id, run_id).await?;
            let now = Utc::now();
            match loaded.session.status() {
                SessionStatus::Created => {
                    let start = SessionCommand::Start(cmd::Start { at: now });
                    self.execute_unless_done(session_id, start, run_id).await?;
                    continue;
                }
                SessionStatus::Active => {}
                _ => return Ok(outcome),
            }
            if let Some(reply) = &loaded.conversation.unclassified_summary_reply {
                self.classify_summary_reply(session_id, run_id, &loaded.session, reply, now)
                    .await?;
                continue;
            }
            if loaded.session.screening_awaits_verdict() {
                self.judge_screening(session_id, run_id, &loaded, now)
                    .await?;
                continue;
            }
            // A step the rules take needs no claim of its own: one commit fewer. Once one was
            // refused (the session moved), the run's later steps go the claimed way. The rules'
            // proposal, when it was worked out there, is the claimed step's too.
            let mut ruled = None;
            if unclaimed {
                match self
                    .unclaimed_step(
                        session_id,
                        run_id,
                        &loaded.session,
                        &loaded.conversation,
                        now,
                    )
                    .await?
                {
                    Unclaimed::Committed => {
                        outcome = RunOutcome::Yielded;
                        continue;
                    }
                    Unclaimed::SessionChanged => {
                        unclaimed = false;
                        continue;
                    }
                    Unclaimed::NotTaken(proposal) => ruled = proposal,
                }
            }
            outcome = self
                .claimed_step(session_id, run_id, loaded, ruled, now)
                .await?;
            if outcome == RunOutcome::LostClaim {
                return Ok(outcome);
            }
        }
        tracing::warn!(
            session_id,
            "the interviewer took {MAX_STEPS} decisions without waiting; yielding"
        );
        Ok(outcome)
    }
}

impl crate::command::erasure::KeepsSessionCopies for Interviewer {
    fn forget(&self, session_id: &str) {
        Interviewer::forget(self, session_id);
    }
}
