//! The Session command side: a cqrs-es framework over the configured event store.
//!
//! Both stores are plain event stores (no snapshots: cqrs-es 0.5's snapshot stores apply
//! events twice) with recently folded sessions kept in memory (`event_store`). Appends go
//! through the projector (`Projector::append_and_project`): a command's events
//! and the views they change commit in one transaction, so a response reads its own writes and
//! views never lag the log. The only in-process query announces the commit to stream
//! subscribers.

use std::collections::HashMap;
use std::sync::Arc;

use cqrs_es::{AggregateError, CqrsFramework};
use interview_projections::{Db, Projector};
use interview_session::{Session, SessionCommand, SessionError};

use crate::command::event_store::{CachingEventStore, KeptSessions};
use crate::command::session_locks::SessionLocks;
use crate::live::stream_hub::{StreamHub, StreamNotifier};

type Cqrs = CqrsFramework<Session, CachingEventStore>;

/// Who sent a command; stored in each event's metadata as its snake-case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Actor {
    Participant,
    Agent,
    System,
    Researcher,
}

impl Actor {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

pub struct SessionStore {
    framework: Cqrs,
    /// The folded sessions the event store keeps (see `event_store`).
    kept: Arc<KeptSessions>,
    /// Commands on one session are serialized inside this process, so concurrent requests
    /// queue instead of losing optimistic-lock races and redoing work. Races with other
    /// processes are still settled by the optimistic lock.
    sessions: SessionLocks,
    /// Commands committed by this process (benchmarks read it).
    committed: std::sync::atomic::AtomicU64,
}

/// How many times a command is retried after losing an optimistic-lock race. A retry re-reads
/// the session, so the aggregate judges the command against the state that won.
const CONFLICT_RETRIES: usize = 3;

impl SessionStore {
    /// The projector runs first, so a client woken by the hub reads views that include the
    /// commit it was told about. `after_commit`: the queries that run after each commit beside
    /// the stream notifier — the background jobs' (`startup.rs` hands the post-session
    /// extraction's), so the command side names none of them.
    pub fn new(
        db: &Db,
        projector: Arc<Projector>,
        hub: Arc<StreamHub>,
        after_commit: Vec<Box<dyn cqrs_es::Query<Session>>>,
        data_kek: Arc<interview_projections::keys::Kek>,
    ) -> Self {
        let mut queries: Vec<Box<dyn cqrs_es::Query<Session>>> =
            vec![Box::new(StreamNotifier(hub.clone()))];
        queries.extend(after_commit);
        let kept = Arc::new(KeptSessions::default());
        let store = CachingEventStore::new(projector, db.clone(), kept.clone(), hub, data_kek);
        let framework = CqrsFramework::new(store, queries, ());
        SessionStore {
            framework,
            kept,
            sessions: SessionLocks::default(),
            committed: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// A session's status as this process last committed it, if it keeps the session.
    pub fn kept_status(&self, id: &str) -> Option<interview_session::SessionStatus> {
        self.kept.status(id)
    }

    /// The last sequence number of a kept session, as of the last command this process
    /// committed on it.
    pub fn kept_version(&self, id: &str) -> Option<u64> {
        self.kept.version(id)
    }

    /// Forgets everything this process keeps of a session (its folded state and last commit):
    /// after an erasure, no copy of its content may stay in memory.
    pub fn forget(&self, id: &str) {
        self.kept.forget(id);
    }

    /// Commands this process has committed (a command that writes nothing counts too).
    pub fn commands_committed(&self) -> u64 {
        self.committed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Executes `command` on session `id` in one transaction; retries lost races.
    pub async fn execute(
        &self,
        id: &str,
        command: SessionCommand,
        actor: Actor,
        request_id: &str,
    ) -> Result<(), AggregateError<SessionError>> {
        self.execute_committed(id, command, actor, request_id)
            .await
            .map(|_| ())
    }

    /// [`SessionStore::execute`], answering the events the command committed with their
    /// sequence numbers (none when it wrote nothing). They follow the log exactly as it was: the
    /// append took the sequence after the last one, so no event came in between.
    #[tracing::instrument(name = "command", skip(self, command), fields(command = command_name(&command)))]
    pub async fn execute_committed(
        &self,
        id: &str,
        command: SessionCommand,
        actor: Actor,
        request_id: &str,
    ) -> Result<Vec<(u64, interview_session::SessionEvent)>, AggregateError<SessionError>> {
        let metadata = HashMap::from([
            ("actor".to_string(), actor.as_str().to_string()),
            ("request_id".to_string(), request_id.to_string()),
        ]);
        let waited = std::time::Instant::now();
        let _serialized = self.sessions.lock(id).await;
        metrics::histogram!("interview_turn_stage_seconds", "stage" => "session_lock")
            .record(waited.elapsed().as_secs_f64());
        // What an earlier command left is not this one's.
        self.kept.take_commit(id);
        let mut attempt = 0;
        let mut judged_again = false;
        loop {
            let result = self
                .framework
                .execute_with_metadata(id, command.clone(), metadata.clone())
                .await;
            let outcome = match &result {
                Ok(()) => "accepted",
                Err(AggregateError::UserError(_)) => "refused",
                Err(AggregateError::AggregateConflict) => "lost_race",
                Err(_) => "error",
            };
            metrics::counter!("interview_commands_total", "command" => command_name(&command), "outcome" => outcome)
                .increment(1);
            match result {
                // An unclaimed decision is not judged again on a state its run did not see.
                Err(AggregateError::AggregateConflict)
                    if attempt < CONFLICT_RETRIES
                        && !matches!(command, SessionCommand::DecideUnclaimed(_)) =>
                {
                    attempt += 1
                }
                // The command may have been judged on kept state that another process has
                // moved past: judge it again on the log's.
                Err(AggregateError::UserError(_)) if !judged_again => {
                    judged_again = true;
                    self.kept.mark_maybe_stale(id);
                }
                Ok(()) => {
                    self.committed
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    return Ok(self.kept.take_commit(id).unwrap_or_default());
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// The command's name (`submit_interaction`), derived from its variant.
fn command_name(command: &SessionCommand) -> &'static str {
    command.into()
}
