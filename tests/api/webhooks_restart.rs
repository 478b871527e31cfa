//! Webhooks across real server processes: `kill -9` while a delivery is in flight loses nothing
//! (the notice goes again after the restart, under the same `webhook-id`, and everything after
//! it follows in order), on both stores; two processes on one PostgreSQL deliver each notice
//! once between them.

use std::collections::HashSet;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::both_stores;
use crate::helpers::Store;
use crate::restart::{Server, RESEARCHER};
use crate::webhook_receiver::{signed_by, Received, Receiver};

const SETTINGS: [(&str, &str); 2] = [
    ("WEBHOOK_ALLOW_PRIVATE_ADDRESSES", "true"),
    ("WEBHOOK_RETRY_BASE_MS", "100"),
];

/// No model is called: the demo study runs on the rules interviewer.
const NO_MODEL: &str = "http://127.0.0.1:9";

fn scratch_dir() -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("interview-hooks-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn database(store: Store) -> Option<String> {
    match store {
        Store::Postgres => Some(crate::helpers::fresh_postgres_database().await),
        Store::Sqlite => None,
    }
}

/// A researcher's request, answered in JSON.
async fn as_researcher(request: reqwest::RequestBuilder) -> Value {
    let res = request.bearer_auth(RESEARCHER).send().await.unwrap();
    res.json().await.unwrap()
}

async fn demo_study(http: &reqwest::Client, base: &str) -> String {
    let studies = as_researcher(http.get(format!("{base}/api/studies"))).await;
    studies["studies"][0]["study_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Subscribes the receiver to pauses and resumes; the subscription's secret.
async fn subscribe(http: &reqwest::Client, base: &str, study: &str, url: &str) -> String {
    let made = as_researcher(
        http.post(format!("{base}/api/studies/{study}/webhooks"))
            .json(&json!({"url": url, "events": ["study.paused", "study.resumed"]})),
    )
    .await;
    made["secret"].as_str().unwrap().to_string()
}

/// Pauses and resumes the study `times` times: two notices each.
async fn pause_and_resume(http: &reqwest::Client, base: &str, study: &str, times: usize) {
    for _ in 0..times {
        for action in ["pause", "resume"] {
            let res = http
                .post(format!("{base}/api/studies/{study}/{action}"))
                .bearer_auth(RESEARCHER)
                .json(&json!({}))
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), StatusCode::OK);
        }
    }
}

/// The positions of the distinct notices accepted, in the order each was first accepted.
fn first_arrivals(accepted: &[Received]) -> Vec<i64> {
    let mut seen = HashSet::new();
    accepted
        .iter()
        .filter(|r| seen.insert(r.id.clone()))
        .map(|r| r.body["position"].as_i64().unwrap())
        .collect()
}

async fn killed_mid_delivery_nothing_is_lost(store: Store) {
    let (dir, url) = (scratch_dir(), database(store).await);
    let http = reqwest::Client::new();
    // The first delivery is held until the server that sent it is dead.
    let receiver = Receiver::holding_first(0, Duration::from_secs(3)).await;
    let a = Server::start_with(&dir, NO_MODEL, url.as_deref(), &SETTINGS).await;
    let study = demo_study(&http, &a.base).await;
    let secret = subscribe(&http, &a.base, &study, &receiver.url).await;
    pause_and_resume(&http, &a.base, &study, 5).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while receiver.all().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no delivery started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    a.kill_9();
    let b = Server::start_with(&dir, NO_MODEL, url.as_deref(), &SETTINGS).await;
    let accepted = receiver
        .until(Duration::from_secs(90), |a| first_arrivals(a).len() >= 10)
        .await;
    assert_eq!(first_arrivals(&accepted), (1..=10).collect::<Vec<_>>());
    let first = &accepted[0];
    assert!(
        accepted.iter().filter(|r| r.id == first.id).count() >= 2,
        "the notice in flight went again after the restart, under its id"
    );
    assert!(accepted.iter().all(|r| signed_by(&secret, r)));
    drop(b);
    receiver.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_deliver_each_notice_once_between_them() {
    let (dir, url) = (scratch_dir(), database(Store::Postgres).await);
    let http = reqwest::Client::new();
    let receiver = Receiver::start(0).await;
    let a = Server::start_with(&dir, NO_MODEL, url.as_deref(), &SETTINGS).await;
    let b = Server::start_with(&dir, NO_MODEL, url.as_deref(), &SETTINGS).await;
    let study = demo_study(&http, &a.base).await;
    subscribe(&http, &b.base, &study, &receiver.url).await;
    // Notices committed through both processes.
    for _ in 0..5 {
        pause_and_resume(&http, &a.base, &study, 1).await;
        pause_and_resume(&http, &b.base, &study, 1).await;
    }
    let accepted = receiver.until_accepted(20, Duration::from_secs(60)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(receiver.all().len(), 20, "each notice once");
    assert_eq!(first_arrivals(&accepted), (1..=20).collect::<Vec<_>>());
    drop((a, b));
    receiver.stop().await;
}

both_stores!(killed_mid_delivery_nothing_is_lost);
