//! The projector: brings a session's views up to its event stream.
//!
//! For one session it locks the view row, reads the events after the view's `last_seq` in
//! sequence order, folds them in memory and writes `session_state`, `transcript` and `results`
//! in the same transaction — the transaction that appended the
//! events, when a command goes through [`Projector::append_and_project`]. Running it twice, or
//! concurrently, or after views were dropped, gives the same views.

use cqrs_es::persist::PersistenceError;
use interview_session::AGGREGATE_TYPE;
use std::sync::Arc;

use crate::commit::group_commit::{self, GroupCommit};
use crate::commit::pending::fold_pending;
use crate::commit::recent::RecentViews;
use crate::on_db;
use crate::read_side::overview::NewContribution;
use crate::store::db::Db;
use crate::store::log::NewEvent;

pub use crate::commit::view_writes::NOTIFY_CHANNEL;
pub use crate::store::error::ProjectionError;

#[derive(Clone, Debug)]
pub struct Projector {
    db: Db,
    recent: Arc<RecentViews>,
    /// Commands committed together (the server, on both stores); `None`: each on its own.
    group: Option<GroupCommit>,
    /// Whether commits are announced to other processes (PostgreSQL).
    peers: crate::processes::Peers,
}

impl Projector {
    pub fn new(db: Db) -> Self {
        Self {
            db,
            recent: Arc::default(),
            group: None,
            peers: crate::processes::Peers::default(),
        }
    }

    /// Whether another process may listen for this one's commit notes: the server keeps it
    /// (`crate::processes::Peers`); every commit reads it.
    pub fn peers(&self) -> &crate::processes::Peers {
        &self.peers
    }

    /// Commits concurrent commands together (see [`crate::commit::group_commit`]). Starts a task on
    /// the current Tokio runtime, which must outlive every command.
    pub fn with_group_commit(mut self) -> Self {
        self.group = Some(GroupCommit::start(
            self.db.clone(),
            self.recent.clone(),
            self.peers.clone(),
        ));
        self
    }

    pub(crate) fn db(&self) -> &Db {
        &self.db
    }

    /// Applies every event of `session_id` the views have not seen; returns how many.
    #[tracing::instrument(skip(self), err)]
    pub async fn project(&self, session_id: &str) -> Result<u64, ProjectionError> {
        let postgres = self.db.is_postgres();
        let announce = self.peers.may_listen();
        on_db!(write(&self.db), |pool| {
            let mut tx = pool.begin().await?;
            let (applied, _) = fold_pending(&mut tx, session_id, postgres, true, announce).await?;
            if applied == 0 {
                tx.rollback().await?;
            } else {
                tx.commit().await?;
            }
            Ok(applied)
        })
    }

    /// Appends a command's events and folds them into the views in one transaction: views can
    /// never lag the log they are built from. A duplicate `(aggregate, sequence)` is a lost
    /// optimistic-lock race. With group commit on, the transaction is shared with whatever other
    /// commands are waiting ([`crate::commit::group_commit`]).
    ///
    /// `moved` is the session's new contribution to its study's overview, when the command
    /// wrote an event that moves it ([`interview_session::aggregate::moves_overview`]).
    #[tracing::instrument(name = "commit", skip_all, fields(events = events.len()), err)]
    pub async fn append_and_project(
        &self,
        events: &[NewEvent],
        moved: Option<NewContribution>,
    ) -> Result<(), PersistenceError> {
        if events.is_empty() {
            return Ok(());
        }
        match &self.group {
            Some(group) => group.submit(events, moved).await,
            None => {
                let mut held = crate::store::db::KeptConnection::default();
                group_commit::commit(
                    &self.db,
                    &self.recent,
                    &[(events, moved.as_ref())],
                    &mut held,
                    self.peers.may_listen(),
                )
                .await
                .remove(0)
            }
        }
    }

    /// Drops a session's views and folds them again from its whole stream.
    #[tracing::instrument(skip(self), err)]
    pub async fn rebuild(&self, session_id: &str) -> Result<u64, ProjectionError> {
        on_db!(write(&self.db), |pool| {
            let mut tx = pool.begin().await?;
            for table in ["transcript", "session_fields", "results"] {
                sqlx::query(&format!("DELETE FROM {table} WHERE session_id = $1"))
                    .bind(session_id)
                    .execute(&mut *tx)
                    .await?;
            }
            sqlx::query(include_str!("sql/delete_state_row.sql"))
                .bind(session_id)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
        });
        self.project(session_id).await
    }

    /// Projects every session whose views lag its event stream (start-up and periodic catch-up).
    #[tracing::instrument(skip(self), err)]
    pub async fn catch_up(&self) -> Result<u64, ProjectionError> {
        // Both queries visit each session once through an index (the events' primary key, and
        // the stream heads), rather than grouping every event of the log.
        let lagging: Vec<String> = on_db!(read(&self.db), |pool| {
            let mut ids: Vec<String> = sqlx::query_scalar(include_str!("sql/views_behind_log.sql"))
                .bind(AGGREGATE_TYPE)
                .fetch_all(pool)
                .await?;
            let without_views: Vec<String> =
                sqlx::query_scalar(include_str!("sql/sessions_without_views.sql"))
                    .bind(AGGREGATE_TYPE)
                    .fetch_all(pool)
                    .await?;
            ids.extend(without_views);
            ids
        });
        let mut applied = 0;
        for session_id in &lagging {
            applied += self.project(session_id).await?;
        }
        self.backfill_overviews().await?;
        metrics::counter!("interview_projection_caught_up_events_total").increment(applied);
        metrics::gauge!("interview_projection_lag_events").set(applied as f64);
        if applied > 0 {
            tracing::info!(
                sessions = lagging.len(),
                events = applied,
                "projections caught up"
            );
        }
        Ok(applied)
    }
}
