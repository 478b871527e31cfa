//! The registry of server processes on this database and their heartbeats.
//!
//! A run's claim on a session's next utterance names its process. When that process stops
//! beating (killed, crashed, partitioned away), another process — or the same one restarted —
//! may take the claim over at once rather than wait for the claim to go stale.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::on_db;
use crate::store::db::Db;

/// Records (or refreshes) this process's heartbeat.
#[tracing::instrument(skip(db))]
pub async fn beat(db: &Db, process_id: Uuid, now: DateTime<Utc>) -> Result<(), sqlx::Error> {
    on_db!(write(db), |pool| {
        sqlx::query(include_str!("sql/process_heartbeat.sql"))
            .bind(process_id.to_string())
            .bind(now)
            .execute(pool)
            .await
            .map(|_| ())
    })
}

/// Whether `process_id` has beaten since `since`.
pub async fn is_alive(
    db: &Db,
    process_id: Uuid,
    since: DateTime<Utc>,
) -> Result<bool, sqlx::Error> {
    on_db!(read(db), |pool| {
        sqlx::query_scalar::<_, i64>(include_str!("sql/process_alive.sql"))
            .bind(process_id.to_string())
            .bind(since)
            .fetch_one(pool)
            .await
            .map(|n| n > 0)
    })
}

/// How many processes have beaten since `since` (this one among them).
pub async fn alive_since(db: &Db, since: DateTime<Utc>) -> Result<i64, sqlx::Error> {
    on_db!(read(db), |pool| {
        sqlx::query_scalar(include_str!("sql/processes_alive_since.sql"))
            .bind(since)
            .fetch_one(pool)
            .await
    })
}

/// Forgets processes silent since `before` (their claims are dead either way).
pub async fn forget_silent(db: &Db, before: DateTime<Utc>) -> Result<u64, sqlx::Error> {
    on_db!(write(db), |pool| {
        sqlx::query(include_str!("sql/forget_silent_processes.sql"))
            .bind(before)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
    })
}
