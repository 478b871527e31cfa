//! The registry of server processes on this database and their heartbeats.
//!
//! A run's claim on a session's next utterance names its process. When that process stops
//! beating (killed, crashed, partitioned away), another process — or the same one restarted —
//! may take the claim over at once rather than wait for the claim to go stale.

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
/// Every listening process says hello every few seconds (the server's `live::peers`); a hello
/// heard from another process keeps the answer "yes" for [`HELLO_HOLDS`]. Nothing depends on
/// clocks agreeing across machines: only this process's own monotonic clock is read. The answer
/// is also "yes" (the safe side: an unannounced commit reaches another process's streams only
/// with the session's next announced one) while this process's own listener is down — it could
/// not hear hellos then — and for [`FIRST_HELLOS`] after it comes up, until the others' next
/// hellos arrive.
#[derive(Clone, Debug, Default)]
pub struct Peers(Arc<std::sync::Mutex<PeersState>>);

#[derive(Debug, Default)]
struct PeersState {
    /// When this process's listener last came up (`None`: down, or not started).
    listening_since: Option<std::time::Instant>,
    /// When another process last said hello.
    hello_at: Option<std::time::Instant>,
}

/// How long a hello from another process counts (it says one every two seconds).
pub const HELLO_HOLDS: std::time::Duration = std::time::Duration::from_secs(10);

/// How long after this process's listener comes up before silence means nobody else listens.
pub const FIRST_HELLOS: std::time::Duration = std::time::Duration::from_secs(3);

impl Peers {
    /// Whether commit notes are to be sent.
    pub fn may_listen(&self) -> bool {
        let state = self.state();
        let within =
            |at: Option<std::time::Instant>, limit| at.is_some_and(|at| at.elapsed() < limit);
        state.listening_since.is_none()
            || within(state.listening_since, FIRST_HELLOS)
            || within(state.hello_at, HELLO_HOLDS)
    }

    /// Another process says it listens.
    pub fn hello(&self) {
        self.state().hello_at = Some(std::time::Instant::now());
    }

    /// This process's own listener came up (`true`) or went down.
    pub fn listening(&self, up: bool) {
        self.state().listening_since = up.then(std::time::Instant::now);
    }

    /// Whether this process's own listener is up (it says hello only then).
    pub fn is_listening(&self) -> bool {
        self.state().listening_since.is_some()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, PeersState> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::Peers;

    #[test]
    fn commits_are_announced_unless_this_listener_is_up_and_no_other_says_hello() {
        let peers = Peers::default();
        assert!(peers.may_listen(), "no listener yet: the safe side");
        peers.listening(true);
        assert!(peers.may_listen(), "the others' hellos are still to come");
        *peers.state() = super::PeersState {
            listening_since: Some(std::time::Instant::now() - super::FIRST_HELLOS),
            hello_at: None,
        };
        assert!(!peers.may_listen(), "up, and nobody said hello");
        peers.hello();
        assert!(peers.may_listen());
        peers.state().hello_at = Some(std::time::Instant::now() - super::HELLO_HOLDS);
        assert!(!peers.may_listen(), "the hello has run out");
        peers.listening(false);
        assert!(
            peers.may_listen(),
            "a listener down hears no hellos: the safe side"
        );
    }
}
