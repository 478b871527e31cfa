//! `GET /metrics` as Prometheus reads it (`prometheus-parse`): who may read it, every family the
//! README lists, and each counter moving when its thing happens. The recorder is one per test
//! process, shared by every server the tests start, so values are compared before and after,
//! never exactly. On both stores.

use prometheus_parse::{Sample, Scrape, Value as Metric};
use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::paths;
use crate::helpers::{assert_error, Store, RESEARCHER_TOKEN};
use crate::llm::Llm;
use crate::scripted_model::Reply;

pub(crate) async fn scrape(app: &crate::helpers::TestApp) -> Scrape {
    let res = app.get("/metrics", Some(RESEARCHER_TOKEN)).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let body = res.text().await.unwrap();
    Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).expect("Prometheus text format")
}

/// The sum of a family's samples whose labels include `labels`.
pub(crate) fn total(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s: &&Sample| s.metric == name)
        .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match &s.value {
            Metric::Counter(v) | Metric::Gauge(v) | Metric::Untyped(v) => *v,
            Metric::Histogram(buckets) => buckets.last().map_or(0.0, |b| b.count),
            Metric::Summary(_) => 0.0,
        })
        .sum()
}

fn families(scrape: &Scrape) -> Vec<String> {
    let mut names: Vec<String> = scrape
        .samples
        .iter()
        .map(|s| s.metric.trim_end_matches("_count").to_string())
        .collect();
    names.sort();
    names.dedup();
    names
}

// Long by design: who may read the metrics, then one scrape before and one after a run that moves
// every counter (a failed model call, a message, an open stream, creates over the limit, a sweep, a
// final extraction), then the list of every metric family and a check per counter that it moved.
async fn metrics_are_prometheus_text_and_each_counter_moves(store: Store) {
    // A model that fails once (a fallback) and then answers; create sessions limited per address.
    let llm = Llm::start_custom(store, |s| s.create_rate_per_address = 2, |_| {}).await;
    let app = &llm.app;
    // Who may read it.
    assert_error(
        app.get("/metrics", None).await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    )
    .await;
    let (_, participant) = app.create_session("demo").await;
    assert_error(
        app.get("/metrics", Some(&participant)).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    let before = scrape(app).await;

    // The llm path: one failed call (the rules take over), then good ones.
    let (session, token, _) = llm
        .consented(vec![
            Reply::Status(500),
            Reply::Tool(
                "ask_question",
                json!({"objective_id": "planning_habits", "message": "How do you plan?", "rationale": "open"}),
            ),
        ])
        .await;
    llm.say(&session, &token, "I keep a list on the fridge.", vec![])
        .await;
    // A stream open while scraping.
    let stream = app
        .client
        .get(app.url(&paths::stream(&session)))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    // Refused: the third create from one address within the limit's window.
    for _ in 0..3 {
        app.post("/api/public/studies/demo/sessions", None, &json!({}))
            .await;
    }
    // The sweeper closes an idle session (a day on).
    let later = chrono::Utc::now() + chrono::Duration::days(2);
    interview_runtime::jobs::sweeper::sweep_once(&app.state, later)
        .await
        .unwrap();
    interview_runtime::jobs::extraction::run_once(&app.state, later)
        .await
        .unwrap();
    let after = scrape(app).await;

    let names = families(&after);
    for family in [
        "interview_commands_total",
        "interview_commit_batch_commands",
        "interview_commit_seconds",
        "interview_commits_total",
        "interview_sessions",
        "interview_streams_open",
        "interview_requests_in_flight",
        "interview_model_calls_total",
        "interview_model_call_seconds",
        "interview_model_tokens_total",
        "interview_fallbacks_total",
        "interview_refusals_total",
        "interview_sweeper_closed_sessions_total",
        "interview_final_extractions_total",
        "interview_erasures_total",
        "interview_webhook_deliveries_total",
        "interview_projection_caught_up_events_total",
        "interview_projection_lag_events",
    ] {
        assert!(
            names.iter().any(|n| n == family),
            "{family} missing: {names:?}"
        );
    }
    let moved = |name: &str, labels: &[(&str, &str)]| {
        total(&after, name, labels) - total(&before, name, labels)
    };
    assert!(
        moved(
            "interview_commands_total",
            &[("command", "post_message"), ("outcome", "accepted")]
        ) >= 1.0
    );
    assert!(moved("interview_commit_batch_commands", &[]) >= 1.0);
    // On PostgreSQL the common batch is one statement; SQLite always takes a transaction.
    let path = if app.db().is_postgres() {
        "one_statement"
    } else {
        "transaction"
    };
    assert!(moved("interview_commits_total", &[("path", path)]) >= 1.0);
    assert!(moved("interview_model_calls_total", &[("outcome", "ok")]) >= 1.0);
    assert!(moved("interview_model_tokens_total", &[("direction", "prompt")]) > 0.0);
    assert!(moved("interview_fallbacks_total", &[("source", "model")]) >= 1.0);
    assert!(moved("interview_refusals_total", &[("code", "rate_limited")]) >= 1.0);
    assert!(moved("interview_sweeper_closed_sessions_total", &[]) >= 1.0);
    assert!(total(&after, "interview_streams_open", &[]) >= 1.0);
    assert!(total(&after, "interview_sessions", &[("status", "abandoned")]) >= 1.0);
    drop(stream);
}

crate::both_stores!(metrics_are_prometheus_text_and_each_counter_moves);
