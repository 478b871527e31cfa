//! The event repository the server gives cqrs-es: reads go to the upstream repository
//! (postgres-es or sqlite-es); appends go through the projector, which inserts the events and
//! folds them into the views in the same transaction.
//!
//! Loading a session for a command would read its whole stream every time. Instead the events
//! this process has seen are kept, and a load reads only the tail after them (`sequence > n`:
//! usually no row) — so events appended by another process are still picked up, and a lost
//! race or a failed append just drops the entry.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cqrs_es::persist::{
    PersistedEventRepository, PersistenceError, ReplayStream, SerializedEvent, SerializedSnapshot,
};
use cqrs_es::Aggregate;
use serde_json::Value;

use crate::Projector;

/// Sessions whose streams are kept; past it the cache starts over (open sessions refill it).
const CACHED_SESSIONS: usize = 1_000;

pub struct ProjectingRepository<R> {
    inner: R,
    projector: Arc<Projector>,
    seen: Mutex<HashMap<String, Arc<Vec<SerializedEvent>>>>,
}

impl<R> ProjectingRepository<R> {
    pub fn new(inner: R, projector: Arc<Projector>) -> Self {
        Self {
            inner,
            projector,
            seen: Mutex::new(HashMap::new()),
        }
    }

    fn cached(&self, aggregate_id: &str) -> Option<Arc<Vec<SerializedEvent>>> {
        self.seen.lock().expect("cache lock").get(aggregate_id).cloned()
    }

    fn keep(&self, aggregate_id: &str, events: Vec<SerializedEvent>) {
        let mut seen = self.seen.lock().expect("cache lock");
        if seen.len() >= CACHED_SESSIONS {
            seen.clear();
        }
        seen.insert(aggregate_id.to_string(), Arc::new(events));
    }

    fn forget(&self, aggregate_id: &str) {
        self.seen.lock().expect("cache lock").remove(aggregate_id);
    }
}

impl<R: PersistedEventRepository> PersistedEventRepository for ProjectingRepository<R> {
    async fn get_events<A: Aggregate>(
        &self,
        aggregate_id: &str,
    ) -> Result<Vec<SerializedEvent>, PersistenceError> {
        let events = match self.cached(aggregate_id) {
            Some(known) => {
                let last = known.last().map_or(0, |e| e.sequence);
                let tail = self.inner.get_last_events::<A>(aggregate_id, last).await?;
                let mut events = Vec::with_capacity(known.len() + tail.len());
                events.extend(known.iter().cloned());
                events.extend(tail);
                events
            }
            None => self.inner.get_events::<A>(aggregate_id).await?,
        };
        if !events.is_empty() {
            self.keep(aggregate_id, events.clone());
        }
        Ok(events)
    }

    async fn get_last_events<A: Aggregate>(
        &self,
        aggregate_id: &str,
        last_sequence: usize,
    ) -> Result<Vec<SerializedEvent>, PersistenceError> {
        self.inner
            .get_last_events::<A>(aggregate_id, last_sequence)
            .await
    }

    async fn get_snapshot<A: Aggregate>(
        &self,
        aggregate_id: &str,
    ) -> Result<Option<SerializedSnapshot>, PersistenceError> {
        self.inner.get_snapshot::<A>(aggregate_id).await
    }

    async fn persist<A: Aggregate>(
        &self,
        events: &[SerializedEvent],
        snapshot_update: Option<(String, Value, usize)>,
    ) -> Result<(), PersistenceError> {
        // The server uses a plain event store: there are never snapshots to write.
        debug_assert!(snapshot_update.is_none());
        let Some(first) = events.first() else {
            return Ok(());
        };
        let id = first.aggregate_id.clone();
        let result = self.projector.append_and_project(events).await;
        match (&result, self.cached(&id)) {
            (Ok(()), Some(known))
                if known.last().map_or(0, |e| e.sequence) + 1 == first.sequence =>
            {
                let mut all = Vec::with_capacity(known.len() + events.len());
                all.extend(known.iter().cloned());
                all.extend(events.iter().cloned());
                self.keep(&id, all);
            }
            _ => self.forget(&id),
        }
        result
    }

    async fn stream_events<A: Aggregate>(
        &self,
        aggregate_id: &str,
    ) -> Result<ReplayStream, PersistenceError> {
        self.inner.stream_events::<A>(aggregate_id).await
    }

    async fn stream_all_events<A: Aggregate>(&self) -> Result<ReplayStream, PersistenceError> {
        self.inner.stream_all_events::<A>().await
    }
}
