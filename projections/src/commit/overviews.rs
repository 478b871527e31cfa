//! The study overviews kept whole: a contribution written for each session that has none yet,
//! and every overview forgotten before a rebuild of every session writes them anew.

use crate::commit::projector::Projector;
use crate::on_db;
use crate::read_side::overview::{recompute, BACKFILL};
use crate::store::error::ProjectionError;

impl Projector {
    /// Writes the contribution of up to [`BACKFILL`] sessions that have none yet (sessions
    /// written before the overview existed); returns how many. Part of catch-up, so a database
    /// of many such sessions is filled a batch per catch-up rather than before the server
    /// starts; a session whose log does not fold is logged and left for `replay verify`.
    #[tracing::instrument(skip(self), err)]
    pub async fn backfill_overviews(&self) -> Result<u64, ProjectionError> {
        let ids: Vec<String> = on_db!(read(self.db()), |pool| {
            sqlx::query_scalar(&format!(
                "SELECT s.session_id FROM session_state s WHERE s.last_seq > 0 AND NOT EXISTS \
                 (SELECT 1 FROM session_overview o WHERE o.session_id = s.session_id) \
                 ORDER BY s.session_id LIMIT {BACKFILL}"
            ))
            .fetch_all(pool)
            .await?
        });
        // Locked like a command's fold, so a command on the session waits rather than have its
        // newer contribution overwritten by one read before it.
        let lock = if self.db().is_postgres() {
            "SELECT session_id FROM session_state WHERE session_id = $1 FOR UPDATE"
        } else {
            "SELECT session_id FROM session_state WHERE session_id = $1"
        };
        for id in &ids {
            let done: Result<(), ProjectionError> = on_db!(write(self.db()), |pool| {
                let mut tx = pool.begin().await?;
                sqlx::query(lock).bind(id).execute(&mut *tx).await?;
                recompute(&mut tx, id).await?;
                tx.commit().await?;
                Ok(())
            });
            if let Err(error @ ProjectionError::Decode { .. }) = done {
                tracing::warn!(session_id = %id, %error, "no study overview contribution: the log does not fold");
            } else {
                done?;
            }
        }
        if !ids.is_empty() {
            tracing::info!(sessions = ids.len(), "study overview contributions written");
        }
        Ok(ids.len() as u64)
    }

    /// Forgets every study's overview, for a rebuild of every session to write it anew.
    #[tracing::instrument(skip(self), err)]
    pub async fn forget_overviews(&self) -> Result<(), ProjectionError> {
        on_db!(write(self.db()), |pool| {
            let mut tx = pool.begin().await?;
            for table in ["study_overview", "session_overview"] {
                sqlx::query(&format!("DELETE FROM {table}"))
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
        });
        Ok(())
    }
}
