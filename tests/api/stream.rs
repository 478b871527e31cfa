//! The live SSE stream: contract frames, live delivery, resume without gap or duplicate, auth.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::both_stores;
use crate::helpers::{assert_error, Store, TestApp, RESEARCHER_TOKEN};
use crate::sse::{Frame, SseClient};

const WAIT: Duration = Duration::from_secs(5);

async fn open(app: &TestApp, session: &str, token: &str, last_event_id: Option<&str>) -> SseClient {
    let mut req = app
        .client
        .get(app.url(&format!("/api/sessions/{session}/stream")))
        .bearer_auth(token);
    if let Some(id) = last_event_id {
        req = req.header("last-event-id", id);
    }
    SseClient::new(req.send().await.unwrap())
}

fn ids(frames: &[Frame]) -> Vec<u64> {
    frames.iter().filter_map(|f| f.id).collect()
}

async fn the_stream_replays_the_log_then_goes_live(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.create_session("demo").await;
    let mut sse = open(&app, &session, &token, None).await;
    let first = sse.next(WAIT).await.expect("the created session");
    assert_eq!(first.event, "session.status");
    assert_eq!(first.id, Some(1));
    assert_eq!(
        first.data,
        json!({"type": "session.status", "status": "created", "phase": "LOAD_CONTEXT"})
    );

    let res = app
        .post_message(&session, &token, "We shop on Saturdays.")
        .await;
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let turn_id = crate::helpers::json_of(res).await["turn_id"].clone();
    let frames = sse.until(WAIT, |f| f.event == "session.status").await;
    assert_eq!(frames[0].event, "message.completed");
    assert_eq!(frames[0].id, Some(2));
    assert_eq!(frames[0].data["role"], "user");
    assert_eq!(frames[0].data["content"], "We shop on Saturdays.");
    assert_eq!(frames[0].data["turn_id"], turn_id);
    assert_eq!(frames[1].data["status"], "active");
    assert_eq!(ids(&frames), [2, 3]);
}

async fn a_reconnecting_client_resumes_without_gap_or_duplicate(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.create_session("demo").await;
    for text in ["one", "two", "three"] {
        app.post_message(&session, &token, text).await;
    }
    // events: 1 created, 2 "one", 3 active, 4 "two", 5 "three"
    let mut from_header = open(&app, &session, &token, Some("2")).await;
    let replayed = from_header.until(WAIT, |f| f.id == Some(5)).await;
    assert_eq!(ids(&replayed), [3, 4, 5]);
    // The query parameter works too (for EventSource), with the token in the query as well.
    let url = app.url(&format!(
        "/api/sessions/{session}/stream?last_event_id=4&token={token}"
    ));
    let mut from_query = SseClient::new(app.client.get(url).send().await.unwrap());
    // Live events continue the sequence with nothing skipped or repeated.
    app.post_message(&session, &token, "four").await;
    let live = from_query.until(WAIT, |f| f.id == Some(6)).await;
    assert_eq!(ids(&live), [5, 6]);
    assert_eq!(live[1].data["content"], "four");
    let more = from_header.until(WAIT, |f| f.id == Some(6)).await;
    assert_eq!(ids(&more), [6]);
}

async fn many_subscribers_each_get_every_event(store: Store) {
    let app = TestApp::spawn_with(store, |s| s.sse_keepalive_secs = 1).await;
    let (session, token) = app.create_session("demo").await;
    let mut clients = Vec::new();
    for _ in 0..5 {
        clients.push(open(&app, &session, &token, None).await);
    }
    clients.push(open(&app, &session, RESEARCHER_TOKEN, None).await);
    for i in 0..10 {
        app.post_message(&session, &token, &format!("m{i}")).await;
    }
    // 1 created, 2 first message, 3 active, then 9 more messages: ids 1..=12
    for client in &mut clients {
        let frames = client.until(WAIT, |f| f.id == Some(12)).await;
        assert_eq!(ids(&frames), (1..=12).collect::<Vec<_>>());
    }
    drop(clients);
    let deadline = tokio::time::Instant::now() + WAIT;
    while app.state.hub.open_channels() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        app.state.hub.open_channels(),
        0,
        "closed streams free their channel"
    );
}

async fn the_stream_checks_tokens_and_ids(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, _) = app.create_session("demo").await;
    let (_, other) = app.create_session("demo").await;
    let path = format!("/api/sessions/{session}/stream");
    assert_error(
        app.get(&path, None).await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    )
    .await;
    assert_error(
        app.get(&path, Some(&other)).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    let unknown = format!("/api/sessions/{}/stream", uuid::Uuid::new_v4());
    assert_error(
        app.get(&unknown, Some(RESEARCHER_TOKEN)).await,
        StatusCode::NOT_FOUND,
        "session_not_found",
    )
    .await;
    let bad_id = app
        .client
        .get(app.url(&path))
        .bearer_auth(RESEARCHER_TOKEN)
        .header("last-event-id", "abc")
        .send()
        .await
        .unwrap();
    assert_error(bad_id, StatusCode::BAD_REQUEST, "invalid_last_event_id").await;
}

both_stores!(
    the_stream_replays_the_log_then_goes_live,
    a_reconnecting_client_resumes_without_gap_or_duplicate,
    many_subscribers_each_get_every_event,
    the_stream_checks_tokens_and_ids,
);
