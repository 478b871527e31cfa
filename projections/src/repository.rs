//! The event repository the server gives cqrs-es: reads go to the upstream repository
//! (postgres-es or sqlite-es); appends go through the projector, which inserts the events and
//! folds them into the views in the same transaction.

use std::sync::Arc;

use cqrs_es::persist::{
    PersistedEventRepository, PersistenceError, ReplayStream, SerializedEvent, SerializedSnapshot,
};
use cqrs_es::Aggregate;
use serde_json::Value;

use crate::Projector;

pub struct ProjectingRepository<R> {
    inner: R,
    projector: Arc<Projector>,
}

impl<R> ProjectingRepository<R> {
    pub fn new(inner: R, projector: Arc<Projector>) -> Self {
        Self { inner, projector }
    }
}

impl<R: PersistedEventRepository> PersistedEventRepository for ProjectingRepository<R> {
    async fn get_events<A: Aggregate>(
        &self,
        aggregate_id: &str,
    ) -> Result<Vec<SerializedEvent>, PersistenceError> {
        self.inner.get_events::<A>(aggregate_id).await
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
        self.projector.append_and_project(events).await
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
