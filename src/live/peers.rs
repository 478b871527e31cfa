//! Whether another server process shares the database (PostgreSQL), so this one announces its
//! commits and relays its words only when somebody may listen (`interview_projections::
//! processes::Peers`): one server alone sends no NOTIFY at all.
//!
//! Every process whose listener is up says hello on [`PEERS_CHANNEL`] when it starts listening
//! and every [`HELLO_EVERY`] after; a hello heard from another process keeps this one
//! announcing for `HELLO_HOLDS` (10 s). Only each process's own monotonic clock is read, so
//! clocks that disagree across machines change nothing. A server starts serving only once its
//! listener is up and its first hello sent (`startup`), so the others announce to it from then
//! on — but for the moment the hello takes to reach them.

use std::time::Duration;

use interview_projections::processes::Peers;

/// The NOTIFY channel a listening process says hello on (its payload: the listener's id).
pub const PEERS_CHANNEL: &str = "interview_processes";

/// How often a listening process says hello.
const HELLO_EVERY: Duration = Duration::from_secs(2);

/// Says hello every [`HELLO_EVERY`] while this process's listener is up, until the pool closes.
pub fn spawn_hellos(pool: sqlx::PgPool, listener_id: String, peers: Peers) {
    tokio::spawn(async move {
        while !pool.is_closed() {
            tokio::time::sleep(HELLO_EVERY).await;
            if peers.is_listening() {
                if let Err(error) = say_hello(&pool, &listener_id).await {
                    tracing::debug!(%error, "could not say hello to the other processes");
                }
            }
        }
    });
}

/// Says hello to the other processes: this one (`listener_id`) listens.
pub async fn say_hello(pool: &sqlx::PgPool, listener_id: &str) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(PEERS_CHANNEL)
        .bind(listener_id)
        .execute(pool)
        .await
        .map(|_| ())
}

/// A hello heard: another process than `own` listens.
pub fn heard(peers: &Peers, payload: &str, own: &str) {
    if payload != own {
        peers.hello();
    }
}
