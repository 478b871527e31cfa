//! Against the database's own limit: commands per second end to end at 64 concurrent sessions
//! next to a raw baseline measured in the same run (single-row INSERT transactions into a table
//! shaped like `events`, through a pool like the server's); the storage one completed 20-turn
//! interview takes; and the memory of idle event streams on a separate server process.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use interview_projections::db::PoolSettings;
use interview_projections::{on_db, Db};
use serde_json::{json, Value};

use crate::{turns, Server};

/// Commands/s while 64 participants talk at once, then the raw INSERT rate, and their ratio.
// Long by design: one measurement read top to bottom: the commands rate while 64 participants talk,
// then the raw INSERT rate with 64 writers on the same pool size (table, typical event, 5 s run),
// then one line with their ratio, which needs both rates.
pub async fn commands_vs_raw(label: &str, server: &Server, http: &reqwest::Client, turns: usize) {
    let before = server.state.store.commands_committed();
    let t = turns::run(http, &server.base, "demo", 64, turns.max(640)).await;
    let commands = server.state.store.commands_committed() - before;
    let per_sec = commands as f64 / t.wall.as_secs_f64();

    let pool = PoolSettings {
        max_connections: server.state.settings.db_max_connections,
        ..PoolSettings::default()
    };
    let db = Db::connect(&server.url, &pool)
        .await
        .expect("the bench reaches the database");
    on_db!(write(&db), |pool| {
        let ddl = if db.is_postgres() {
            "CREATE TABLE IF NOT EXISTS bench_raw (LIKE events INCLUDING ALL)"
        } else {
            "CREATE TABLE IF NOT EXISTS bench_raw (aggregate_type TEXT NOT NULL, aggregate_id TEXT NOT NULL, \
             sequence BIGINT NOT NULL, event_type TEXT NOT NULL, event_version TEXT NOT NULL, payload JSON NOT NULL, \
             metadata JSON NOT NULL, PRIMARY KEY (aggregate_type, aggregate_id, sequence))"
        };
        sqlx::query(ddl).execute(pool).await.unwrap();
    });
    // A typical event: a participant message of a sentence, with its hash chain.
    let payload = json!({"type": "participant.message.created", "turn_id": uuid::Uuid::new_v4(),
        "client_message_id": "m-17", "content": "We plan on Sunday evenings with a shared list on our phones",
        "at": "2026-11-30T06:00:00Z", "prev_hash": "ab".repeat(32), "hash": "cd".repeat(32)});
    let metadata = json!({"actor": "participant", "request_id": uuid::Uuid::new_v4()});
    let stop = Arc::new(AtomicBool::new(false));
    let inserted = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let writers = (0..64).map(|w| {
        let (db, stop, inserted) = (db.clone(), stop.clone(), inserted.clone());
        let (payload, metadata) = (payload.clone(), metadata.clone());
        async move {
            let id = format!("raw-{w}-{}", uuid::Uuid::new_v4().simple());
            let mut seq = 0i64;
            while !stop.load(Ordering::Relaxed) {
                seq += 1;
                on_db!(write(&db), |pool| {
                    sqlx::query(
                        "INSERT INTO bench_raw (aggregate_type, aggregate_id, sequence, event_type, event_version, payload, metadata) \
                         VALUES ('Session', $1, $2, 'participant.message.created', '1', $3, $4)",
                    )
                    .bind(&id)
                    .bind(seq)
                    .bind(&payload)
                    .bind(&metadata)
                    .execute(pool)
                    .await
                    .unwrap();
                });
                inserted.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    let stopper = async {
        tokio::time::sleep(Duration::from_secs(5)).await;
        stop.store(true, Ordering::Relaxed);
    };
    tokio::join!(futures_util::future::join_all(writers), stopper);
    let raw = inserted.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    println!(
        "{label}: 64 sessions talking: {commands} commands in {:.1} s = {per_sec:.0} commands/s ({} participant turns, {:.0} a second); \
         raw single-row INSERT transactions, 64 writers, same pool size: {raw:.0}/s; ratio {:.0} %",
        t.wall.as_secs_f64(),
        t.post.len(),
        t.post.len() as f64 / t.wall.as_secs_f64(),
        100.0 * per_sec / raw
    );
    db.close().await;
}

/// Bytes one completed 20-turn interview takes: its events and its rows in every view.
pub async fn storage_per_interview(label: &str, server: &Server, http: &reqwest::Client) {
    let base = &server.base;
    let mut study: Value =
        serde_json::from_str(include_str!("../../examples/every-type-study.json")).unwrap();
    study["public_slug"] = json!("twenty-turns");
    study["limits"]["max_turn_count"] = json!(20);
    crate::publish(http, base, &study.to_string()).await;
    let (id, token) = crate::participant::start(http, base, "twenty-turns").await;
    let mut s = Value::Null;
    for _ in 0..100 {
        s = loop {
            let s = crate::participant::read(http, base, &id, &token).await;
            if !matches!(s["status"].as_str(), Some("created" | "active")) {
                break s;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        if s["status"] == "completed" {
            break;
        }
        let pending = &s["pending_interaction"];
        let res = if !pending.is_null() {
            http.post(format!(
                "{base}/api/sessions/{id}/interactions/{}/submit",
                pending["interaction_id"].as_str().unwrap()
            ))
            .bearer_auth(&token)
            .json(&json!({"status": "submitted", "value": crate::widget_values::typical_value(pending)}))
            .send()
            .await
        } else {
            let text = if s["current_phase"] == "SUMMARY_CONFIRMATION" {
                "Yes, that's right"
            } else {
                "Mostly on Saturdays, with a list"
            };
            http.post(format!("{base}/api/sessions/{id}/messages"))
                .bearer_auth(&token)
                .json(&json!({ "content": text }))
                .send()
                .await
        };
        assert!(res.unwrap().status().is_success());
    }
    assert_eq!(s["status"], "completed");
    let (events, sizes) = stored_bytes(label, server, &id, true).await;
    println!(
        "{label}: one completed {}-turn interview: {events}, {}",
        s["turn_count"],
        in_kilobytes(&sizes)
    );
    crate::sealing::cost(label, server, &id, s["turn_count"].as_u64().unwrap_or(1)).await;
    erase_and_measure(label, server, http, &id).await;
}

/// Erases the interview just measured (`DELETE …/participant-data`, docs/privacy.md): the time
/// the request takes, and what stays stored of the session.
async fn erase_and_measure(label: &str, server: &Server, http: &reqwest::Client, id: &str) {
    // The post-session extraction comes after the completion: erasing while it commits is
    // retried by the server, but the time is the erasure's alone once it is done.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = std::time::Instant::now();
    let res = http
        .delete(format!(
            "{}/api/sessions/{id}/participant-data",
            server.base
        ))
        .bearer_auth(crate::RESEARCHER)
        .send()
        .await
        .unwrap();
    let took = started.elapsed();
    assert!(res.status().is_success(), "{}", res.text().await.unwrap());
    let (events, sizes) = stored_bytes(label, server, id, false).await;
    println!(
        "{label}: the same interview erased in {} ms: {events}, {}",
        crate::ms(took),
        in_kilobytes(&sizes)
    );
}

/// `57.7 KB stored (events 47.9 KB, session_state 2.7 KB, …)`.
fn in_kilobytes(sizes: &[(&str, i64)]) -> String {
    let total: i64 = sizes.iter().map(|(_, b)| b).sum();
    let parts: Vec<String> = sizes
        .iter()
        .map(|(t, b)| format!("{t} {:.1} KB", *b as f64 / 1024.0))
        .collect();
    format!(
        "{:.1} KB stored ({})",
        total as f64 / 1024.0,
        parts.join(", ")
    )
}

/// The stored bytes of one session: its event count, and per table (`events` and each view)
/// the bytes of its rows (PostgreSQL: each row's stored size after TOAST compression; SQLite:
/// the bytes of every column; index entries are not counted). With `by_type`, prints what each
/// kind of event costs.
// Long by design: one session's sizes read in order on one connection: bytes per table, the event
// count, the cost of each event type, then (PostgreSQL) the share of heap-only updates; each query
// is written out for PostgreSQL and SQLite side by side.
pub async fn stored_bytes(
    label: &str,
    server: &Server,
    id: &str,
    print_types: bool,
) -> (Stored, Vec<(&'static str, i64)>) {
    let db = Db::connect(&server.url, &PoolSettings::default())
        .await
        .unwrap();
    let (events, sizes) = on_db!(read(&db), |pool| {
        let mut sizes = Vec::new();
        for (table, key) in [
            ("events", "aggregate_id"),
            ("session_state", "session_id"),
            ("transcript", "session_id"),
            ("session_fields", "session_id"),
            ("results", "session_id"),
            ("session_overview", "session_id"),
        ] {
            let sql = if db.is_postgres() {
                format!("SELECT COALESCE(SUM(pg_column_size(t.*)), 0)::BIGINT FROM {table} t WHERE {key} = $1")
            } else {
                let cols: Vec<String> = sqlx::query_scalar::<_, String>(&format!(
                    "SELECT name FROM pragma_table_info('{table}')"
                ))
                .fetch_all(pool)
                .await
                .unwrap();
                let sum = cols
                    .iter()
                    .map(|c| format!("COALESCE(LENGTH(CAST({c} AS BLOB)), 0)"))
                    .collect::<Vec<_>>()
                    .join(" + ");
                format!("SELECT COALESCE(SUM({sum}), 0) FROM {table} WHERE {key} = $1")
            };
            let bytes: i64 = sqlx::query_scalar(&sql)
                .bind(id)
                .fetch_one(pool)
                .await
                .unwrap();
            sizes.push((table, bytes));
        }
        // Rows, and the events they hold (a row may hold events in clear besides its
        // own event: `interview_projections::shared_rows`).
        let payload = if db.is_postgres() {
            "payload::text"
        } else {
            "payload"
        };
        let stored: Vec<(String, Option<Vec<u8>>, String, String)> = sqlx::query_as(&format!(
            "SELECT {payload}, hash, event_type, event_version FROM events WHERE aggregate_id = $1"
        ))
        .bind(id)
        .fetch_all(pool)
        .await
        .unwrap();
        let rows = stored.len() as i64;
        let events: i64 = stored
            .into_iter()
            .map(|(payload, mut hash, event_type, version)| {
                let mut payload: serde_json::Value = serde_json::from_str(&payload).unwrap();
                let carrier = (event_type.as_str(), version.as_str());
                interview_projections::shared_rows::take_shared(&mut payload, &mut hash, carrier)
                    .map_or(1, |held| 1 + held.leading.len() + held.trailing.len())
                    as i64
            })
            .sum();
        // What each kind of event costs over the interview.
        let row_size = if db.is_postgres() {
            "pg_column_size(e.*)"
        } else {
            "LENGTH(CAST(e.aggregate_type AS BLOB)) + LENGTH(CAST(e.aggregate_id AS BLOB)) + 8 \
             + LENGTH(CAST(e.event_type AS BLOB)) + LENGTH(CAST(e.event_version AS BLOB)) \
             + LENGTH(CAST(e.payload AS BLOB)) + LENGTH(CAST(e.metadata AS BLOB)) + COALESCE(LENGTH(e.hash), 0) \
             + COALESCE(LENGTH(e.sealed), 0)"
        };
        let by_type: Vec<(String, i64, i64)> = sqlx::query_as(&format!(
            "SELECT event_type, COUNT(*), CAST(SUM({row_size}) AS BIGINT) FROM events e \
             WHERE aggregate_id = $1 GROUP BY event_type ORDER BY 3 DESC"
        ))
        .bind(id)
        .fetch_all(pool)
        .await
        .unwrap();
        let by_type: Vec<String> = by_type
            .iter()
            .map(|(t, n, b)| format!("{t} {n} × {} B", b / n.max(&1)))
            .collect();
        if print_types {
            println!(
                "{label}: rows by the type of their own event (count × mean row bytes): {}",
                by_type.join(", ")
            );
        }
        if print_types && db.is_postgres() {
            // Every session of the run so far: how many of the view's updates were heap-only.
            let (updates, hot): (i64, i64) = sqlx::query_as(
                "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'session_state'",
            )
            .fetch_one(pool)
            .await
            .unwrap_or((0, 0));
            println!(
                "{label}: session_state updates in this run: {updates}, heap-only (HOT) {:.0} %",
                100.0 * hot as f64 / updates.max(1) as f64
            );
        }
        (Stored { rows, events }, sizes)
    });
    db.close().await;
    (events, sizes)
}

/// How many rows a session's events take, and how many events they hold.
pub struct Stored {
    pub rows: i64,
    pub events: i64,
}

impl std::fmt::Display for Stored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} events in {} rows", self.events, self.rows)
    }
}

fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// Memory per idle event stream: a release server process, 1,000 then 10,000 open streams.
// Long by design: one measurement read top to bottom: start a server process, open 100 sessions,
// open streams in batches up to 1,000 then 10,000 printing memory at each, then stop it; the child
// process and the open streams must stay alive across every step.
pub async fn idle_streams(binary: &str) {
    let dir = std::env::temp_dir().join(format!(
        "interview-streams-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // Resolved now: the child runs in its own directory.
    let binary = std::fs::canonicalize(binary).unwrap_or_else(|_| binary.into());
    let mut child = match std::process::Command::new(&binary)
        .current_dir(&dir)
        .env("BIND", format!("127.0.0.1:{port}"))
        .env("RESEARCHER_TOKENS", "bench")
        .env("CREATE_RATE_PER_ADDRESS", "0")
        .env("CREATE_RATE_PER_STUDY", "0")
        .env("SSE_KEEPALIVE_SECS", "600")
        // 10,000 streams over 100 sessions (the default cap is 8 a session).
        .env("MAX_STREAMS_PER_SESSION", "1000")
        .env_remove("DATABASE_URL")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            println!(
                "idle streams: cannot start {}: {e} (scripts/bench builds it)",
                binary.display()
            );
            return;
        }
    };
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    while http.get(format!("{base}/readyz")).send().await.is_err() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut sessions = Vec::new();
    for _ in 0..100 {
        sessions.push(crate::participant::start(&http, &base, "demo").await);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pid = child.id();
    let baseline = rss_kb(pid);
    let mut open = Vec::new();
    let mut measured = baseline;
    for target in [1_000usize, 10_000] {
        while open.len() < target {
            let batch: Vec<_> = (open.len()..target.min(open.len() + 200))
                .map(|i| {
                    let (id, token) = &sessions[i % sessions.len()];
                    // The stream's first frame (the replayed log) proves it is open.
                    let req = http
                        .get(format!(
                            "{base}/api/sessions/{id}/stream?last_event_id=100000"
                        ))
                        .bearer_auth(token)
                        .send();
                    async move {
                        let res = req.await.ok()?;
                        (res.status() == 200).then_some(res)
                    }
                })
                .collect();
            let opened: Vec<_> = futures_util::future::join_all(batch).await;
            let failed = opened.iter().filter(|r| r.is_none()).count();
            if failed > 0 {
                println!("idle streams: {failed} streams could not open at {} (file descriptors? `ulimit -n`)", open.len());
                let _ = child.kill();
                return;
            }
            open.extend(opened.into_iter().flatten());
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        measured = rss_kb(pid);
        println!(
            "idle streams: {target} open on one process: RSS {:.1} MB (from {:.1} MB with none): {:.1} KB per stream",
            measured as f64 / 1024.0,
            baseline as f64 / 1024.0,
            (measured - baseline) as f64 / target as f64
        );
    }
    let _ = measured;
    drop(open);
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
