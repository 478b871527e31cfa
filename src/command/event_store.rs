//! The cqrs-es `EventStore` the server runs commands on: what cqrs-es's plain event store does
//! (load by folding the stream, commit by appending), plus the folded `Session` of recently used
//! sessions kept in memory. Events are read with `interview_projections::log` (the table has the
//! layout postgres-es and sqlite-es define, plus the `hash` column their reads do not return) and
//! decoded through the one decode point (`interview_session::codec`), so a session goes on from
//! the hash that is stored, never from one recomputed from a payload a store may have rewritten;
//! they are appended through the projector, typed and encoded side by side, with the views they
//! change.
//!
//! Without it every command decodes and folds its session's whole stream (a 20-turn interview
//! has ~180 events) only to append two or three. With it a command starts from the kept state
//! without reading the log at all. The kept state can only be behind the log when another
//! process (PostgreSQL scale-out) wrote to the session, and that is always caught:
//! - events decided on old state take sequence numbers that are already used, so the append
//!   fails as a lost race; the entry is dropped and the retry reads the log;
//! - a command *refused* on old state is judged again (the caller marks its kept copy as possibly stale),
//!   after reading the events after the kept ones.
//!
//! A command that succeeds on old state without writing anything is a no-op on the newer
//! state too: the state only ever gains facts.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use cqrs_es::persist::EventStoreAggregateContext;
use cqrs_es::{Aggregate, AggregateError, EventEnvelope, EventStore};
use hashlink::LruCache;
use interview_projections::log::{self, NewEvent};
use interview_projections::{Db, Projector};
use interview_session::hash::GENESIS_HASH;
use interview_session::{Session, SessionError};

/// How many sessions' folded state is kept. A miss costs one full read of the stream.
const KEPT_SESSIONS: usize = 1024;

/// The kept sessions, shared by the event store and the command side that may find one stale.
pub struct KeptSessions {
    /// Session id → its state and the sequence of the last event folded into it; the least
    /// recently used goes first.
    kept: Mutex<LruCache<String, (Session, usize)>>,
    /// Sessions whose next load must read the log after the kept state.
    maybe_stale: Mutex<HashSet<String>>,
    /// The events each session's last command in this process committed, with their sequence
    /// numbers: the interviewer goes on from them instead of reading them back
    /// ([`crate::command::store::SessionStore::execute_committed`]).
    commits: Mutex<LruCache<String, Vec<(u64, interview_session::SessionEvent)>>>,
}

impl Default for KeptSessions {
    fn default() -> Self {
        Self {
            kept: Mutex::new(LruCache::new(KEPT_SESSIONS)),
            maybe_stale: Mutex::default(),
            commits: Mutex::new(LruCache::new(KEPT_SESSIONS)),
        }
    }
}

impl KeptSessions {
    /// The next command on `id` reads the events after the kept state first.
    pub fn mark_maybe_stale(&self, id: &str) {
        self.maybe_stale
            .lock()
            .expect("the session cache is never poisoned")
            .insert(id.to_string());
    }

    /// The status of a kept session, as of the last command this process committed on it.
    pub fn status(&self, id: &str) -> Option<interview_session::SessionStatus> {
        self.kept
            .lock()
            .expect("the session cache is never poisoned")
            .peek(id)
            .map(|(session, _)| session.status())
    }

    /// The last sequence number of a kept session, as of the last command this process
    /// committed on it.
    pub fn version(&self, id: &str) -> Option<u64> {
        self.kept
            .lock()
            .expect("the session cache is never poisoned")
            .peek(id)
            .map(|(_, version)| *version as u64)
    }

    /// Takes what the last command committed on `id` (and forgets it).
    pub(crate) fn take_commit(
        &self,
        id: &str,
    ) -> Option<Vec<(u64, interview_session::SessionEvent)>> {
        self.commits
            .lock()
            .expect("the session cache is never poisoned")
            .remove(id)
    }

    /// Drops the session's kept state and last commit.
    pub fn forget(&self, id: &str) {
        self.kept
            .lock()
            .expect("the session cache is never poisoned")
            .remove(id);
        self.take_commit(id);
    }

    fn take_maybe_stale(&self, id: &str) -> bool {
        self.maybe_stale
            .lock()
            .expect("the session cache is never poisoned")
            .remove(id)
    }
}

pub struct CachingEventStore {
    /// Appends (with the views).
    projector: Arc<Projector>,
    /// Told of each commit before it is made, so the NOTIFY echo of it is not relayed.
    hub: Arc<crate::live::stream_hub::StreamHub>,
    /// Reads, and the pinned studies' documents.
    db: Db,
    sessions: Arc<KeptSessions>,
    /// Wraps the data key of each new session (`interview_projections::keys`).
    data_kek: Arc<interview_projections::keys::Kek>,
}

fn unexpected(e: impl std::error::Error + Send + Sync + 'static) -> AggregateError<SessionError> {
    AggregateError::UnexpectedError(Box::new(e))
}

/// A failed read of the log: the database's error, or an event that does not decode.
fn reading(e: interview_projections::ProjectionError) -> AggregateError<SessionError> {
    match e {
        interview_projections::ProjectionError::Db(e) => unexpected(e),
        interview_projections::ProjectionError::Keys(e) => unexpected(e),
        decode => AggregateError::DeserializationError(Box::new(decode)),
    }
}

impl CachingEventStore {
    pub fn new(
        projector: Arc<Projector>,
        db: Db,
        sessions: Arc<KeptSessions>,
        hub: Arc<crate::live::stream_hub::StreamHub>,
        data_kek: Arc<interview_projections::keys::Kek>,
    ) -> Self {
        Self {
            projector,
            hub,
            db,
            sessions,
            data_kek,
        }
    }

    fn kept(&self, id: &str) -> Option<(Session, usize)> {
        self.sessions
            .kept
            .lock()
            .expect("the session cache is never poisoned")
            .get(id)
            .cloned()
    }

    fn keep(&self, id: &str, entry: Option<(Session, usize)>) {
        let mut kept = self
            .sessions
            .kept
            .lock()
            .expect("the session cache is never poisoned");
        match entry {
            Some(entry) => {
                kept.insert(id.to_string(), entry);
            }
            None => {
                kept.remove(id);
            }
        }
    }
}

impl EventStore<Session> for CachingEventStore {
    type AC = EventStoreAggregateContext<Session>;

    async fn load_events(
        &self,
        aggregate_id: &str,
    ) -> Result<Vec<EventEnvelope<Session>>, AggregateError<SessionError>> {
        let rows = log::all_rows(&self.db, aggregate_id)
            .await
            .map_err(reading)?;
        let decoded = log::decode_read(&self.db, aggregate_id, &rows, GENESIS_HASH.into())
            .await
            .map_err(reading)?;
        rows.into_iter()
            .zip(decoded)
            .map(|(row, (sequence, payload))| {
                Ok(EventEnvelope {
                    aggregate_id: aggregate_id.to_string(),
                    sequence: sequence as usize,
                    payload,
                    // Metadata values are strings; anything else reads as none.
                    metadata: serde_json::from_value(row.metadata).unwrap_or_default(),
                })
            })
            .collect()
    }

    async fn load_aggregate(
        &self,
        aggregate_id: &str,
    ) -> Result<Self::AC, AggregateError<SessionError>> {
        let maybe_stale = self.sessions.take_maybe_stale(aggregate_id);
        // A copy (the kept one stays for the next command: this one may be refused), handed on
        // as it is when it is current.
        let (mut aggregate, mut sequence) = match self.kept(aggregate_id) {
            Some((aggregate, sequence)) if !maybe_stale => {
                return Ok(EventStoreAggregateContext {
                    aggregate_id: aggregate_id.to_string(),
                    aggregate,
                    current_sequence: sequence,
                    current_snapshot: None,
                });
            }
            kept => kept.unwrap_or_default(),
        };
        // `sequence > 0` is the whole stream.
        // `sequence` 0 is the whole stream.
        let newer = log::read_between(&self.db, aggregate_id, sequence as u64, u64::MAX)
            .await
            .map_err(reading)?;
        for (seq, event) in newer {
            aggregate.apply(event);
            sequence = seq as usize;
        }
        Ok(EventStoreAggregateContext {
            aggregate_id: aggregate_id.to_string(),
            aggregate,
            current_sequence: sequence,
            current_snapshot: None,
        })
    }

    // Long by design: the steps of one commit in order: number the events, put the command's
    // metadata on the first only, get the data key if any event holds personal data, encode each
    // event after the one before it, work out the overview contribution, mark the commit as this
    // process's own on the hub, append it with its views (unmarking it and dropping the kept state
    // on failure), then keep the new state and the events; split, the hub mark around the append
    // would not be seen in one place.
    async fn commit(
        &self,
        events: Vec<interview_session::SessionEvent>,
        context: Self::AC,
        metadata: HashMap<String, String>,
    ) -> Result<Vec<EventEnvelope<Session>>, AggregateError<SessionError>> {
        let EventStoreAggregateContext {
            aggregate_id,
            aggregate,
            current_sequence,
            ..
        } = context;
        let envelopes: Vec<EventEnvelope<Session>> = events
            .into_iter()
            .zip(current_sequence + 1..)
            .map(|(payload, sequence)| EventEnvelope {
                aggregate_id: aggregate_id.clone(),
                sequence,
                payload,
                metadata: metadata.clone(),
            })
            .collect();
        // The command's metadata (actor, request id) goes on its first event only: the events
        // after it without any are the same command's, and readers show them with it
        // (`read::events`, `replay show`). 18–25 bytes a row saved, most rows being a command's
        // second or later event.
        let first = serde_json::to_value(&metadata)?;
        let rest = serde_json::json!({});
        // Content is encrypted under the session's data key, made with its first such event.
        // Which events hold personal data is worked out once (it compares each with its erased
        // form).
        let personal: Vec<bool> = envelopes
            .iter()
            .map(|e| e.payload.body.holds_personal_data())
            .collect();
        let key = if personal.contains(&true) {
            let key =
                interview_projections::keys::for_writing(&self.db, &aggregate_id, &self.data_kek)
                    .await
                    .map_err(unexpected)?;
            Some(key)
        } else {
            None
        };
        let mut rows: Vec<NewEvent> = envelopes
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let metadata = if i == 0 { &first } else { &rest };
                // After the command's first event, each leaves out what the one before says.
                let before = i.checked_sub(1).map(|b| &envelopes[b].payload);
                NewEvent::new(
                    &aggregate_id,
                    e.sequence as u64,
                    e.payload.clone(),
                    before,
                    metadata.clone(),
                    key.as_ref().filter(|_| personal[i]),
                )
            })
            .collect();
        // Events in clear go into the rows of the command's other events (`shared_rows.rs`).
        interview_projections::shared_rows::share_rows(&mut rows);
        // The session's contribution to its study overview, when this command moved it (or
        // announced a notice to its study's webhooks, which travels with it).
        let notices = aggregate.notices(rows.iter().map(|r| (r.sequence, &r.event)));
        let moved = (!notices.is_empty()
            || aggregate.overview_may_move(envelopes.iter().map(|e| &e.payload.body)))
        .then(|| interview_projections::overview::NewContribution::of(&aggregate_id, &aggregate))
        .flatten()
        .map(|moved| moved.announcing(notices));
        let last = current_sequence as u64 + rows.len() as u64;
        if !rows.is_empty() {
            self.hub.mark_own(&aggregate_id, last);
        }
        if let Err(e) = self.projector.append_and_project(&rows, moved).await {
            self.hub.unmark_own(&aggregate_id, last);
            self.keep(&aggregate_id, None);
            return Err(e.into());
        }
        // The aggregate already holds the new events: cqrs-es's event sink applies each one as
        // the command handler writes it.
        let sequence = current_sequence + envelopes.len();
        self.keep(&aggregate_id, Some((aggregate, sequence)));
        let committed = rows.into_iter().map(|r| (r.sequence, r.event)).collect();
        self.sessions
            .commits
            .lock()
            .expect("the session cache is never poisoned")
            .insert(aggregate_id.clone(), committed);
        Ok(envelopes)
    }
}
