//! The format of the stored views: which fold wrote them.
//!
//! The views are a cache of the log, so a change in how an event folds into them (a transcript
//! row worded anew, a column added) leaves older rows as an older fold wrote them, and
//! `replay verify` would report every such session. The format says which fold the stored
//! views follow. At start-up, when it is older than [`VIEW_FORMAT`], the server rebuilds every
//! session's views from the log (the bulk path, logging its progress) before it serves, then
//! records the new format.
//!
//! Raise [`VIEW_FORMAT`] with a line below whenever a fold's output changes for an existing log.
//! Like any upgrade that changes what is written (README, "Upgrading"), processes of the older
//! build are stopped first: one still serving would go on writing the older format.
//!
//! 1. The views before the format was recorded.
//! 2. Widget answers in the transcript in the one format of `widget_answers` ("Easy (4 of 5)",
//!    "1. Price, 2. Speed", "7 (on 0 to 10)"), where the transcript had its own; and the view's
//!    turns counted by the aggregate's rule (`interview_session::turns`), which never counts an
//!    answer to no pending widget (no log holds one).
//! 3. The fields extracted so far in a view of their own, `session_fields` (a row per session
//!    and field), no longer inside the `session_state` document: a commit writes only the fields
//!    it changes.

use crate::commit::projector::{ProjectionError, Projector};
use crate::store::db::Db;

/// The format this build's folds write.
pub const VIEW_FORMAT: i64 = 3;

/// The format the stored views were written in (1 when none was recorded).
#[tracing::instrument(skip(db), err)]
pub async fn stored(db: &Db) -> Result<i64, sqlx::Error> {
    let version: Option<i64> = crate::on_db!(read(db), |pool| {
        sqlx::query_scalar(include_str!("sql/view_format.sql"))
            .fetch_optional(pool)
            .await?
    });
    Ok(version.unwrap_or(1))
}

/// Records that every stored view now follows [`VIEW_FORMAT`] (after a rebuild of them all).
#[tracing::instrument(skip(db), err)]
pub async fn record_current(db: &Db) -> Result<(), sqlx::Error> {
    crate::on_db!(write(db), |pool| {
        sqlx::query(include_str!("sql/record_view_format.sql"))
            .bind(VIEW_FORMAT)
            .execute(pool)
            .await?;
    });
    Ok(())
}

/// What bringing the views to the current format did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reformatted {
    pub from: i64,
    pub sessions: usize,
    pub events: u64,
}

impl Projector {
    /// Rebuilds every session's views when they were written in an older format than this
    /// build's, and records the new format; `None` when they were current already. On
    /// PostgreSQL one process does it while the others starting at the same time wait for it
    /// (an advisory lock), then find the views current.
    #[tracing::instrument(skip(self, progress), err)]
    pub async fn bring_views_to_current_format(
        &self,
        progress: impl FnMut(usize, u64),
    ) -> Result<Option<Reformatted>, ProjectionError> {
        // Every start but the first of a new build finds the views current, and takes no lock.
        if stored(self.db()).await? >= VIEW_FORMAT {
            return Ok(None);
        }
        // The lock's transaction holds one connection while the rebuild uses others: this needs
        // a pool of two or more (the default is 16).
        let lock = match self.db() {
            Db::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                sqlx::query(include_str!("sql/view_format_lock.sql"))
                    .execute(&mut *tx)
                    .await?;
                Some(tx)
            }
            Db::Sqlite(_) => None,
        };
        // Another process may have rebuilt them while this one waited for the lock.
        let from = stored(self.db()).await?;
        if from >= VIEW_FORMAT {
            return Ok(None);
        }
        let ids = crate::read_side::read::session_ids(self.db()).await?;
        let events = self.rebuild_many(&ids, progress).await?;
        record_current(self.db()).await?;
        if let Some(tx) = lock {
            tx.commit().await?;
        }
        Ok(Some(Reformatted {
            from,
            sessions: ids.len(),
            events,
        }))
    }
}
