//! The registry of server processes on this database and their heartbeats.
//!
//! A run's claim on a session's next utterance names its process. When that process stops
//! beating (killed, crashed, partitioned away), another process — or the same one restarted —
//! may take the claim over at once rather than wait for the claim to go stale.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

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

/// How many processes other than `own` have beaten since `since`.
pub async fn others_alive_since(
    db: &Db,
    own: Uuid,
    since: DateTime<Utc>,
) -> Result<i64, sqlx::Error> {
    on_db!(read(db), |pool| {
        sqlx::query_scalar(include_str!("sql/other_processes_alive_since.sql"))
            .bind(since)
            .bind(own.to_string())
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

/// Whether another server process may be listening for this one's commit notes (PostgreSQL
/// NOTIFY). A NOTIFY is not free: PostgreSQL serializes every notifying transaction on one
/// lock held until its commit is flushed, so two committers that both notify take turns at
/// the disk — the largest part of the commit tail at 16 clients (`docs/benchmarks.md`). One
/// server alone has no listener and sends none.
///
/// Starts as "may be" (the safe side: a commit not announced to a listening process leaves its
/// streams to their one-second recheck). The server keeps it true while the heartbeats show
/// another process, and sets it at once when another process says hello on starting to listen.
#[derive(Clone, Debug)]
pub struct Peers(Arc<PeersInner>);

#[derive(Debug)]
struct PeersInner {
    listening: AtomicBool,
    /// When another process last said hello: the heartbeats may not have shown it yet.
    hello_at: std::sync::Mutex<Option<std::time::Instant>>,
}

/// How long a hello keeps the answer at "yes" whatever the heartbeats say (a heartbeat read
/// begun just before the other process's first beat would not show it).
const HELLO_HOLDS: std::time::Duration = std::time::Duration::from_secs(10);

impl Default for Peers {
    fn default() -> Self {
        Peers(Arc::new(PeersInner {
            listening: AtomicBool::new(true),
            hello_at: std::sync::Mutex::new(None),
        }))
    }
}

impl Peers {
    /// Whether commit notes are to be sent.
    pub fn may_listen(&self) -> bool {
        self.0.listening.load(Ordering::Relaxed)
    }

    /// Another process started listening.
    pub fn hello(&self) {
        *self.hello_time() = Some(std::time::Instant::now());
        self.0.listening.store(true, Ordering::Relaxed);
    }

    /// What the heartbeats say: whether a process other than this one is alive.
    pub fn seen_alive(&self, others: bool) {
        let held = self
            .hello_time()
            .is_some_and(|at| at.elapsed() < HELLO_HOLDS);
        self.0.listening.store(others || held, Ordering::Relaxed);
    }

    fn hello_time(&self) -> std::sync::MutexGuard<'_, Option<std::time::Instant>> {
        self.0
            .hello_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::Peers;

    #[test]
    fn a_hello_holds_against_heartbeats_that_do_not_show_its_process_yet() {
        let peers = Peers::default();
        assert!(peers.may_listen(), "unknown is the safe side");
        peers.seen_alive(false);
        assert!(!peers.may_listen());
        peers.hello();
        assert!(peers.may_listen());
        peers.seen_alive(false);
        assert!(peers.may_listen(), "a fresh hello was overruled");
        peers.seen_alive(true);
        assert!(peers.may_listen());
    }
}
