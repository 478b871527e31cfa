//! Two server processes on one PostgreSQL database: live fan-out of commits across them
//! (LISTEN/NOTIFY), and one answer per turn whichever process runs the interviewer.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{Store, TestApp};
use crate::sse::SseClient;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_on_one_process_sees_commands_handled_by_another() {
    let a = TestApp::spawn(Store::Postgres).await;
    let b = a.spawn_sibling().await;
    let (session, token) = a.interviewing("demo").await;
    let url = a.url(&format!("/api/sessions/{session}/stream?token={token}"));
    let mut on_a = SseClient::new(a.client.get(url).send().await.unwrap());
    assert_eq!(on_a.next(Duration::from_secs(5)).await.unwrap().id, Some(1));
    on_a.drain(Duration::from_millis(300)).await;

    let res = b
        .post_message(&session, &token, "Sent through the other process")
        .await;
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let frames = on_a
        .until(Duration::from_secs(5), |f| f.event == "message.completed")
        .await;
    assert_eq!(
        frames.last().unwrap().data["content"],
        "Sent through the other process"
    );
    // Process B's interviewer answers; A's subscriber sees it live.
    let frames = on_a
        .until(Duration::from_secs(5), |f| {
            f.event == "message.completed" && f.data["role"] == "assistant"
        })
        .await;
    assert!(!frames.last().unwrap().data["content"]
        .as_str()
        .unwrap()
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_running_the_interviewer_answer_once() {
    let a = TestApp::spawn(Store::Postgres).await;
    let b = a.spawn_sibling().await;
    let (session, token) = a.create_session("demo").await;
    let (x, y) = tokio::join!(a.state.harness.run(&session), b.state.harness.run(&session));
    x.unwrap();
    y.unwrap();
    // A's own trigger (from the create request) raced these runs too.
    let s = a.run(&session).await;
    assert_eq!(s["decision_log"].as_array().unwrap().len(), 1, "{s}");
    a.answer(&session, &token, &s, json!({"accepted": true}))
        .await;
    let (x, y) = tokio::join!(a.state.harness.run(&session), b.state.harness.run(&session));
    x.unwrap();
    y.unwrap();
    a.run(&session).await;
    let s = b.researcher_view(&session).await;
    let questions = s["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["role"] == "assistant")
        .count();
    assert_eq!(questions, 1, "one opening question, not two: {s}");
}

/// A study's cap on sessions and "one open session per participant reference" hold across
/// processes: this test's server and a second server process (the real binary) on one database
/// race 50 creates each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn study_rules_on_new_sessions_hold_across_processes() {
    let a = TestApp::spawn_with(Store::Postgres, |s| {
        s.create_rate_per_address = 0;
        s.create_rate_per_study = 0;
    })
    .await;
    let url = a.state.settings.database_url.clone().unwrap();
    std::fs::create_dir_all(a.data_dir()).unwrap();
    let b =
        crate::restart::Server::start_on(a.data_dir(), "http://127.0.0.1:9/v1", Some(&url)).await;
    let mut capped: serde_json::Value =
        serde_json::from_str(include_str!("../../examples/demo-study.json")).unwrap();
    capped["public_slug"] = json!("capped");
    capped["limits"]["max_sessions"] = json!(30);
    a.publish_study(&capped).await;

    let race = |slug: &'static str, body: serde_json::Value| {
        let creates = (0..100).map(|i| {
            let base = if i % 2 == 0 {
                a.address.clone()
            } else {
                b.base.clone()
            };
            let (body, http) = (body.clone(), a.client.clone());
            async move {
                http.post(format!("{base}/api/public/studies/{slug}/sessions"))
                    .json(&body)
                    .send()
                    .await
                    .unwrap()
                    .status()
            }
        });
        futures_util::future::join_all(creates)
    };
    let count = |statuses: &[StatusCode], status: StatusCode| {
        statuses.iter().filter(|s| **s == status).count()
    };
    let statuses = race("capped", json!({})).await;
    assert_eq!(count(&statuses, StatusCode::CREATED), 30, "{statuses:?}");
    assert_eq!(count(&statuses, StatusCode::CONFLICT), 70, "{statuses:?}");

    let statuses = race("demo", json!({"participant_ref": "panel-42"})).await;
    assert_eq!(count(&statuses, StatusCode::CREATED), 1, "{statuses:?}");
    assert_eq!(count(&statuses, StatusCode::CONFLICT), 99, "{statuses:?}");
}
