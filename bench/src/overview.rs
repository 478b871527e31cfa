//! The study overview (`GET /api/studies/{id}/overview`) on a study of 10,000 sessions: 9,984
//! sessions started over HTTP and 16 completed interviews, then the overview read 200 times;
//! then again with the study's duration histogram at its widest — 3,600 distinct whole seconds,
//! what a study of interviews up to an hour long can reach — written straight into its counts.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::Server;

const SESSIONS: usize = 10_000;
// 9,984 started (624 by each of 16 clients) and 16 completed.
const COMPLETED: usize = 16;
const READS: usize = 200;

// Long by design: one measurement read top to bottom: write 10,000 sessions (16 of them talked to
// the end), find the study, time the reads, then widen the duration histogram and time them again;
// each step needs the sessions or the study id from the one before.
pub async fn run(label: &str, server: &Server, http: &reqwest::Client) {
    let base = server.base.as_str();
    let mut study: Value =
        serde_json::from_str(include_str!("../../examples/demo-study.json")).unwrap();
    study["public_slug"] = json!("overview-bench");
    crate::publish(http, base, &study.to_string()).await;
    let started = Instant::now();
    crate::measure(16, SESSIONS - COMPLETED, |_, _| async {
        crate::participant::start(http, base, "overview-bench").await;
    })
    .await;
    for _ in 0..COMPLETED {
        let mut live = crate::turns::fresh(http, base, base, "overview-bench").await;
        loop {
            let state = crate::participant::read(http, base, &live.id, &live.token).await;
            let text = if state["current_phase"] == "SUMMARY_CONFIRMATION" {
                "Yes, that's right"
            } else {
                "I plan on Sundays with a shared list on the fridge, and my partner adds to it."
            };
            let res = http
                .post(format!("{base}/api/sessions/{}/messages", live.id))
                .bearer_auth(&live.token)
                .json(&json!({ "content": text }))
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 202);
            if !live.settle(http, base).await.0 {
                break;
            }
        }
    }
    println!(
        "{label}: overview study: {SESSIONS} sessions written in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let studies: Value = http
        .get(format!("{base}/api/studies"))
        .bearer_auth(crate::RESEARCHER)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = studies["studies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["public_slug"] == "overview-bench")
        .unwrap()["study_id"]
        .as_str()
        .unwrap()
        .to_string();
    let o = reads(label, "as written", http, base, &id).await;
    assert_eq!(o["funnel"]["created"], SESSIONS, "{o}");
    // The widest histogram (each bucket one session more): 3,600 more rows to read and sum.
    let db = &server.state.db;
    interview_projections::on_db!(write(db), |pool| {
        for chunk in (0..3600).collect::<Vec<i64>>().chunks(500) {
            let mut q = sqlx::QueryBuilder::new("INSERT INTO study_overview (study_id, name, n) ");
            q.push_values(chunk, |mut b, s| {
                b.push_bind(id.clone())
                    .push_bind(format!("duration_s:{}", s + 100_000))
                    .push_bind(1i64);
            });
            q.build().execute(pool).await.unwrap();
        }
    });
    reads(label, "with 3,600 duration buckets", http, base, &id).await;
}

/// Reads the overview [`READS`] times; prints p50 and p99; returns the last.
async fn reads(label: &str, what: &str, http: &reqwest::Client, base: &str, id: &str) -> Value {
    let mut times: Vec<Duration> = Vec::with_capacity(READS);
    let mut last = Value::Null;
    for _ in 0..READS {
        let t = Instant::now();
        let res = http
            .get(format!("{base}/api/studies/{id}/overview"))
            .bearer_auth(crate::RESEARCHER)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        last = res.json().await.unwrap();
        times.push(t.elapsed());
    }
    times.sort();
    let at = |q: f64| times[((times.len() as f64 * q).ceil() as usize).saturating_sub(1)];
    println!(
        "{label}: overview of {SESSIONS} sessions ({what}): p50 {:.2} ms, p99 {:.2} ms",
        at(0.5).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3
    );
    last
}
