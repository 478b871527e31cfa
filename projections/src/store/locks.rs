//! Locks that hold across server processes sharing one database.
//!
//! A study's cap on sessions and its "one open session per participant reference" rule are a
//! check followed by a create; two processes doing both at once could each pass the check. On
//! PostgreSQL the check and the create's commit happen under a transaction-scoped advisory lock
//! per study, held by a transaction of its own and released once the create has committed, so
//! the next process's check sees it. The embedded store (SQLite) is one process's database, so
//! the in-process lock the caller already takes is enough there.

use crate::store::db::Db;

/// Held while a study's sessions are checked and created; [`StudyLock::release`] lets the next
/// one in. Dropped without release, its transaction is rolled back when the connection goes
/// back to the pool, which releases the lock too.
pub struct StudyLock(Option<sqlx::Transaction<'static, sqlx::Postgres>>);

impl StudyLock {
    pub async fn release(self) {
        if let Some(tx) = self.0 {
            let _ = tx.rollback().await;
        }
    }
}

/// Waits for the study's create lock (PostgreSQL; a no-op on SQLite).
#[tracing::instrument(skip(db))]
pub async fn lock_study_creates(db: &Db, study_id: &str) -> Result<StudyLock, sqlx::Error> {
    match db {
        Db::Postgres(pool) => {
            let mut tx = pool.begin().await?;
            // A holder that never lets go (a stuck process) must not block creates for good.
            sqlx::query(include_str!("sql/lock_timeout_10s.sql"))
                .execute(&mut *tx)
                .await?;
            sqlx::query(include_str!("sql/advisory_xact_lock.sql"))
                .bind(format!("session-create:{study_id}"))
                .execute(&mut *tx)
                .await?;
            Ok(StudyLock(Some(tx)))
        }
        Db::Sqlite(_) => Ok(StudyLock(None)),
    }
}
