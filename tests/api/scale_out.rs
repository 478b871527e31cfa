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
    let b = a.spawn_on_same_database().await;
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
    let b = a.spawn_on_same_database().await;
    let (session, token) = a.create_session("demo").await;
    let (x, y) = tokio::join!(
        a.state.interviewer.run(&session),
        b.state.interviewer.run(&session)
    );
    x.unwrap();
    y.unwrap();
    // A's own trigger (from the create request) raced these runs too.
    let s = a.run(&session).await;
    assert_eq!(s["decision_log"].as_array().unwrap().len(), 1, "{s}");
    a.answer(&session, &token, &s, json!({"accepted": true}))
        .await;
    let (x, y) = tokio::join!(
        a.state.interviewer.run(&session),
        b.state.interviewer.run(&session)
    );
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
