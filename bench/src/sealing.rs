//! What encryption at rest costs the interview `--commands-only` stores, measured in the same
//! run that stored it (the server has no switch to store in clear, and should not have one):
//! its encrypted rows are opened with the session's data key, and
//! - bytes: the columns as stored (the `encrypted` version, the payload left in clear — its
//!   time —, the sealed bytes) against the same rows in clear (the version they seal, the whole
//!   payload as JSON text);
//! - time: sealing each row again and opening it, as a command and a reader do, repeated, per
//!   event and per participant turn (the CPU a turn spends on it; the session's data key is
//!   unwrapped once per process and kept).

use std::time::Instant;

use interview_projections::db::PoolSettings;
use interview_projections::{encrypted, keys, on_db, shared_rows, Db};
use interview_session::codec::Encoded;

use crate::Server;

/// Times each row is sealed and opened again for the timing.
const ROUNDS: u32 = 200;

type Row = (i64, String, String, String, Vec<u8>, Option<Vec<u8>>);

pub async fn cost(label: &str, server: &Server, session_id: &str, turns: u64) {
    let db = Db::connect(&server.url, &PoolSettings::default())
        .await
        .unwrap();
    let key = keys::for_reading(&db, session_id)
        .await
        .unwrap()
        .expect("the session has its data key");
    let rows: Vec<Row> = on_db!(read(&db), |pool| {
        let payload = if db.is_postgres() {
            "payload::text"
        } else {
            "payload"
        };
        sqlx::query_as(&format!(
            "SELECT sequence, event_type, event_version, {payload}, hash, sealed FROM events \
             WHERE aggregate_id = $1 ORDER BY sequence"
        ))
        .bind(session_id)
        .fetch_all(pool)
        .await
        .unwrap()
    });
    db.close().await;
    let opened = open_all(&rows, &key, session_id);
    let events = rows.len() + opened.held;
    let per_event = seal_and_open(&opened.rows, &key, session_id);
    let per_turn = per_event * opened.rows.len() as u32 / turns.max(1) as u32;
    println!(
        "{label}: encryption at rest, the same interview: {} of {} events sealed; their columns \
         {:.1} KB as stored, {:.1} KB in clear (+{:.0} %); sealing and opening again {:.1} µs an \
         event, {:.0} µs a turn ({turns} turns)",
        opened.rows.len(),
        events,
        opened.stored as f64 / 1024.0,
        opened.clear as f64 / 1024.0,
        100.0 * (opened.stored as f64 / opened.clear.max(1) as f64 - 1.0),
        per_event.as_secs_f64() * 1e6,
        per_turn.as_secs_f64() * 1e6,
    );
}

/// The sealed rows opened: their bytes as stored and in clear, and each as the row in clear;
/// and how many events in clear the rows hold besides their own
/// (`interview_projections::shared_rows`).
struct Opened {
    stored: usize,
    clear: usize,
    rows: Vec<(u64, Encoded)>,
    held: usize,
}

fn open_all(rows: &[Row], key: &keys::DataKey, session_id: &str) -> Opened {
    let mut opened = Opened {
        stored: 0,
        clear: 0,
        rows: Vec::new(),
        held: 0,
    };
    for (sequence, event_type, version, payload, hash, sealed) in rows {
        // A row holding events in clear: its own event comes after those before it, and what is
        // sealed is that event's payload alone.
        let mut payload: serde_json::Value = serde_json::from_str(payload).unwrap();
        let mut hash = Some(hash.clone());
        let mut sequence = *sequence as u64;
        if let Some(shared) =
            shared_rows::take_shared(&mut payload, &mut hash, (event_type, version))
        {
            sequence += shared.leading.len() as u64;
            opened.held += shared.leading.len() + shared.trailing.len();
        }
        let Some(sealed) = sealed else { continue };
        let at = (session_id, sequence, event_type.as_str());
        let inner = encrypted::open(version, &payload, sealed, key, at).expect("the row opens");
        let payload = payload.to_string();
        let in_clear = encrypted::sealed_version(version).expect("an encrypted row");
        opened.stored += version.len() + payload.len() + sealed.len();
        opened.clear += in_clear.len() + serde_json::to_string(&inner).unwrap().len();
        let event_type: &'static str = Box::leak(event_type.clone().into_boxed_str());
        let row = Encoded {
            event_type,
            event_version: in_clear,
            payload: inner,
            hash: hash.unwrap_or_default(),
        };
        opened.rows.push((sequence, row));
    }
    opened
}

/// The time to seal a row and open it again, per row, over [`ROUNDS`] rounds of `rows`.
fn seal_and_open(
    rows: &[(u64, Encoded)],
    key: &keys::DataKey,
    session_id: &str,
) -> std::time::Duration {
    let started = Instant::now();
    for _ in 0..ROUNDS {
        for (sequence, row) in rows {
            let (sealed_row, sealed) = encrypted::encrypt(row.clone(), key, session_id, *sequence);
            let at = (session_id, *sequence, sealed_row.event_type);
            let opened = encrypted::open(
                sealed_row.event_version,
                &sealed_row.payload,
                &sealed,
                key,
                at,
            );
            std::hint::black_box(opened.unwrap());
        }
    }
    started.elapsed() / (ROUNDS * rows.len().max(1) as u32)
}
