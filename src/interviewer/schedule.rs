//! When the interviewer runs: after each accepted input, at start-up for turns a dead process
//! left unanswered, and periodically for any session stuck on the interviewer's turn.
//!
//! In one process a session has at most one run; a trigger that arrives while a run is going
//! asks it to go round once more instead of starting a second one (the run may have loaded the
//! session just before the new input landed). Across processes the claim on the next utterance
//! decides; this process's heartbeat lets the others tell a dead claim from a live one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use interview_projections::{processes, read, Db};
use tracing::Instrument;
use uuid::Uuid;

use super::{Interviewer, InterviewerError, RunOutcome};

/// How often a process records that it is alive.
pub const HEARTBEAT: Duration = Duration::from_secs(1);
/// A process silent for this long is dead, and its claims may be taken over.
pub const DEAD_AFTER: Duration = Duration::from_secs(4);
/// A session stuck on the interviewer's turn for this long is picked up by the recovery sweep.
const STUCK_AFTER: Duration = Duration::from_secs(5);

/// The sessions this process is running, each with "go round again" set when a trigger came in
/// during the run.
#[derive(Default)]
pub(crate) struct Running(Mutex<HashMap<String, bool>>);

impl Running {
    /// Takes the session's slot; if a run holds it, asks that run to go round again instead.
    fn enter(&self, session_id: &str) -> bool {
        let mut map = self.0.lock().expect("running map");
        match map.get_mut(session_id) {
            Some(again) => {
                *again = true;
                false
            }
            None => {
                map.insert(session_id.to_string(), false);
                true
            }
        }
    }

    /// Leaves the slot, unless a trigger asked for another round (then the flag is cleared and
    /// the caller runs again).
    fn leave_or_again(&self, session_id: &str) -> bool {
        let mut map = self.0.lock().expect("running map");
        match map.get_mut(session_id) {
            Some(again) if *again => {
                *again = false;
                true
            }
            _ => {
                map.remove(session_id);
                false
            }
        }
    }

    fn leave(&self, session_id: &str) {
        self.0.lock().expect("running map").remove(session_id);
    }

    pub(crate) fn contains(&self, session_id: &str) -> bool {
        self.0.lock().expect("running map").contains_key(session_id)
    }
}

impl Interviewer {
    /// Runs the interviewer on a session until it waits for the participant. At most one run per
    /// session in this process: a second caller only asks the running one to look again.
    #[tracing::instrument(name = "interviewer_run", skip(self))]
    pub async fn run(&self, session_id: &str) -> Result<RunOutcome, InterviewerError> {
        if !self.running.enter(session_id) {
            return Ok(RunOutcome::Queued);
        }
        self.drive(session_id, None).await
    }

    /// Runs while this process holds the session's slot, then gives the slot back.
    async fn drive(
        &self,
        session_id: &str,
        first: Option<Uuid>,
    ) -> Result<RunOutcome, InterviewerError> {
        let started = std::time::Instant::now();
        let outcome = self.drive_rounds(session_id, first).await;
        if let Ok(outcome) = &outcome {
            tracing::info!(
                outcome = ?outcome,
                latency_us = started.elapsed().as_micros() as u64,
                "interviewer run finished"
            );
        }
        outcome
    }

    /// `first`: the id of the first round's run, when the trigger kept events for it.
    async fn drive_rounds(
        &self,
        session_id: &str,
        mut first: Option<Uuid>,
    ) -> Result<RunOutcome, InterviewerError> {
        loop {
            let run = first.take().unwrap_or_else(Uuid::new_v4);
            let outcome = match self.run_steps(session_id, run).await {
                Ok(outcome) => outcome,
                Err(e) => {
                    self.running.leave(session_id);
                    self.hub
                        .publish(session_id, crate::live::stream_hub::Live::Idle);
                    return Err(e);
                }
            };
            if !self.running.leave_or_again(session_id) {
                // After the slot is free, so a waiter that looks finds the run gone.
                self.hub
                    .publish(session_id, crate::live::stream_hub::Live::Idle);
                return Ok(outcome);
            }
        }
    }

    /// Starts a run in the background; the slot is taken before this returns, so a caller that
    /// answered the participant can rely on the interviewer being on its way.
    pub fn trigger(self: &Arc<Self>, session_id: &str) {
        self.start(session_id, None);
    }

    /// [`Interviewer::trigger`] right after a participant's command committed `committed`: they
    /// are handed to the run, so its first look at the session reads nothing when they follow
    /// what this process last saw of it. Were anything committed after them (another process),
    /// the run's first command would meet it and the run read the log then.
    pub fn trigger_after(
        self: &Arc<Self>,
        session_id: &str,
        committed: Vec<(u64, interview_session::SessionEvent)>,
    ) {
        self.start(session_id, Some(committed));
    }

    fn start(
        self: &Arc<Self>,
        session_id: &str,
        committed: Option<Vec<(u64, interview_session::SessionEvent)>>,
    ) {
        if !self.running.enter(session_id) {
            // The running run looks again before it ends, and reads what it has not seen.
            return;
        }
        let first = committed.map(|committed| {
            let run = Uuid::new_v4();
            self.keep_committed(session_id, committed, run);
            run
        });
        let interviewer = self.clone();
        let id = session_id.to_string();
        // A child of the caller's span (the request that gave the interviewer its turn, with its
        // request id), so the run's commands, commits and model calls show under it.
        let span = tracing::info_span!("interviewer_run", session_id = %id);
        let triggered = std::time::Instant::now();
        let run = async move {
            let stage = |stage: &'static str, since: std::time::Instant| {
                metrics::histogram!("interview_turn_stage_seconds", "stage" => stage)
                    .record(since.elapsed().as_secs_f64());
            };
            stage("interviewer_start", triggered);
            let started = std::time::Instant::now();
            let outcome = interviewer.drive(&id, first).await;
            stage("interviewer_run", started);
            if let Err(error) = outcome {
                tracing::warn!(session_id = id, %error, "interviewer run failed; the recovery sweep will retry");
            }
        };
        tokio::spawn(run.instrument(span));
    }

    /// Whether a run on the session is going on in this process.
    pub fn is_running(&self, session_id: &str) -> bool {
        self.running.contains(session_id)
    }

    /// Whether the interviewer has had its turn: no run on the session in this process, and the
    /// session waits for the participant or has ended.
    pub async fn is_idle(&self, session_id: &str) -> Result<bool, InterviewerError> {
        if self.is_running(session_id) {
            return Ok(false);
        }
        let status = read::session_status(&self.db, session_id).await?;
        Ok(!matches!(status.as_deref(), Some("created" | "active")))
    }

    /// Waits (up to `timeout`) until the interviewer has had its turn: no run on the session in
    /// this process, and the session waits for the participant or has ended. False on timeout.
    pub async fn wait_until_idle(
        &self,
        session_id: &str,
        timeout: Duration,
    ) -> Result<bool, InterviewerError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.is_idle(session_id).await? {
                return Ok(true);
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The id this process's claims carry.
    pub fn process_id(&self) -> Uuid {
        self.process_id
    }

    /// Whether the run holding a claim is dead: its process is this one (which runs a session
    /// once at a time, and the caller is that run) or has stopped beating. Claims from before
    /// claims named their process are left to go stale.
    pub(crate) async fn claim_is_dead(
        &self,
        process_id: Option<Uuid>,
    ) -> Result<bool, InterviewerError> {
        match process_id {
            None => Ok(false),
            Some(p) if p == self.process_id => Ok(true),
            Some(p) => {
                let since = Utc::now() - chrono::Duration::from_std(DEAD_AFTER).expect("small");
                Ok(!processes::is_alive(&self.db, p, since).await?)
            }
        }
    }

    /// Triggers a run for every session on the interviewer's turn; with `only_stuck`, only those
    /// untouched for a while (a live run elsewhere keeps its session moving). Returns how many.
    #[tracing::instrument(skip(self))]
    pub async fn recover(self: &Arc<Self>, only_stuck: bool) -> Result<usize, InterviewerError> {
        let now = Utc::now();
        let idle_since = if only_stuck {
            now - chrono::Duration::from_std(STUCK_AFTER).expect("small")
        } else {
            now + chrono::Duration::days(1)
        };
        let ids = read::sessions_awaiting_interviewer(&self.db, idle_since, 1000).await?;
        let mut triggered = 0;
        for id in ids {
            if self.is_running(&id) {
                continue;
            }
            self.trigger(&id);
            triggered += 1;
        }
        Ok(triggered)
    }
}

/// Beats this process's heartbeat, sweeps for stuck sessions, and forgets long-dead processes.
pub fn spawn_background(interviewer: Arc<Interviewer>, db: Db) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(HEARTBEAT);
        let mut n: u64 = 0;
        loop {
            tick.tick().await;
            let now = Utc::now();
            if let Err(error) = processes::beat(&db, interviewer.process_id, now).await {
                tracing::warn!(%error, "cannot record this process's heartbeat");
                continue;
            }
            n += 1;
            if n % 5 == 0 {
                if let Err(error) = interviewer.recover(true).await {
                    tracing::warn!(%error, "recovery sweep failed; will retry");
                }
            }
            if n % 3600 == 0 {
                let _ = processes::forget_silent(&db, now - chrono::Duration::hours(1)).await;
            }
        }
    });
}
