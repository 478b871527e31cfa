//! Whether another server process shares the database (PostgreSQL), so this one announces its
//! commits and relays its words only when somebody may listen (`interview_projections::
//! processes::Peers`): one server alone sends no NOTIFY at all.
//!
//! Two sources keep the answer: the heartbeats of the process registry, read every
//! [`LOOKED_UP_EVERY`], and a hello every process says on [`PEERS_CHANNEL`] once it listens —
//! so a process that starts is announced to at once, not after the next heartbeat read. A
//! commit sent unannounced in the few milliseconds before the hello arrives is found by the new
//! process's streams at their one-second recheck.

use std::time::Duration;

use interview_projections::processes::Peers;

/// The NOTIFY channel a listening process says hello on (its payload: the listener's id).
pub const PEERS_CHANNEL: &str = "interview_processes";

/// How often the heartbeats are read.
const LOOKED_UP_EVERY: Duration = Duration::from_secs(2);

/// A process whose heartbeat is older than this is not alive.
const ALIVE_WITHIN: Duration = Duration::from_secs(5);

/// How long one read of the heartbeats may take.
const READ_WITHIN: Duration = Duration::from_secs(1);

/// Reads the heartbeats of processes other than `own` every [`LOOKED_UP_EVERY`] until the pool
/// closes.
pub fn spawn_watch(pool: sqlx::PgPool, own: uuid::Uuid, peers: Peers) {
    tokio::spawn(async move {
        let db = interview_projections::Db::Postgres(pool.clone());
        while !pool.is_closed() {
            let since =
                chrono::Utc::now() - chrono::Duration::from_std(ALIVE_WITHIN).expect("small");
            let counted = tokio::time::timeout(
                READ_WITHIN,
                interview_projections::processes::others_alive_since(&db, own, since),
            )
            .await;
            // Unknown counts as another (announcing is the safe side).
            peers.seen_alive(!matches!(counted, Ok(Ok(0))));
            tokio::time::sleep(LOOKED_UP_EVERY).await;
        }
    });
}

/// Says hello to the other processes: this one (`listener_id`) now listens.
pub async fn say_hello(pool: &sqlx::PgPool, listener_id: &str) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(PEERS_CHANNEL)
        .bind(listener_id)
        .execute(pool)
        .await
        .map(|_| ())
}

/// A hello heard: another process than `own` listens now.
pub fn heard(peers: &Peers, payload: &str, own: &str) {
    if payload != own {
        peers.hello();
    }
}
