//! The live SSE stream: contract frames, live delivery, resume without gap or duplicate, auth.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::both_stores;
use crate::helpers::paths;
use crate::helpers::{assert_error, Store, TestApp, RESEARCHER_TOKEN};
use crate::sse::{Frame, SseClient};

const WAIT: Duration = Duration::from_secs(5);

async fn open(app: &TestApp, session: &str, token: &str, last_event_id: Option<&str>) -> SseClient {
    let mut req = app
        .client
        .get(app.url(&paths::stream(session)))
        .bearer_auth(token);
    if let Some(id) = last_event_id {
        req = req.header("last-event-id", id);
    }
    SseClient::new(req.send().await.unwrap())
}

fn ids(frames: &[Frame]) -> Vec<u64> {
    frames.iter().filter_map(|f| f.id).collect()
}

// Long by design: one stream followed from its first frame in the order a participant sees it: the
// created status, the consent widget, the opening question streamed in deltas, their own message
// and the answer; then the frame ids checked and a fresh subscriber's replay compared with them.
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
    // The interviewer starts by itself and asks for consent.
    let mut frames = sse.until(WAIT, |f| f.event == "interaction.render").await;
    assert_eq!(
        frames.last().unwrap().data["interaction"]["type"],
        "consent"
    );
    let s = app.run(&session).await;
    app.answer(&session, &token, &s, json!({"accepted": true}))
        .await;
    let opening = sse
        .until(WAIT, |f| {
            f.event == "message.completed" && f.data["role"] == "assistant"
        })
        .await;
    assert!(opening
        .iter()
        .any(|f| f.event == "interaction.resolved" && f.data["status"] == "submitted"));
    let question = opening.last().unwrap().data.clone();
    let deltas: String = opening
        .iter()
        .filter(|f| f.event == "message.delta" && f.data["message_id"] == question["message_id"])
        .map(|f| f.data["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        deltas,
        question["content"].as_str().unwrap(),
        "streamed before it completed"
    );
    frames.extend(opening);

    app.run(&session).await;
    let res = app
        .post_message(&session, &token, "We shop on Saturdays.")
        .await;
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let turn_id = crate::helpers::json_of(res).await["turn_id"].clone();
    let answer = sse
        .until(WAIT, |f| {
            f.event == "message.completed" && f.data["role"] == "assistant"
        })
        .await;
    let mine = answer
        .iter()
        .find(|f| f.event == "message.completed" && f.data["role"] == "user")
        .expect("the participant's own message comes back on the stream");
    assert_eq!(mine.data["content"], "We shop on Saturdays.");
    assert_eq!(mine.data["turn_id"], turn_id);
    assert!(answer
        .iter()
        .any(|f| f.event == "session.status" && f.data["status"] == "active"));
    frames.extend(answer);
    frames.extend(sse.drain(Duration::from_millis(300)).await);
    // Persisted frames carry strictly increasing ids; deltas carry none.
    let persisted = ids(&frames);
    assert!(persisted.windows(2).all(|w| w[0] < w[1]), "{persisted:?}");
    assert!(frames
        .iter()
        .filter(|f| f.event == "message.delta")
        .all(|f| f.id.is_none()));
    // A fresh subscriber replays exactly the persisted frames seen live.
    let mut replay = open(&app, &session, &token, None).await;
    let all = replay.drain(Duration::from_millis(500)).await;
    assert_eq!(ids(&all), [vec![1], persisted].concat());
}

/// A settled session with a few turns; returns (session, token, every persisted frame id).
async fn conversation(app: &TestApp) -> (String, String, Vec<u64>) {
    let (session, token) = app.interviewing("demo").await;
    for text in [
        "We plan on Sunday evenings with a shared list on our phones.",
        "Mostly my partner and I, sometimes the kids add snacks to it.",
    ] {
        assert_eq!(
            app.post_message(&session, &token, text).await.status(),
            StatusCode::ACCEPTED
        );
        let s = app.run(&session).await;
        if !s["pending_interaction"].is_null() {
            let value = crate::helpers::typical_value(&s["pending_interaction"]);
            app.answer(&session, &token, &s, value).await;
            app.run(&session).await;
        }
    }
    let mut full = open(app, &session, &token, None).await;
    let all = ids(&full.drain(Duration::from_millis(500)).await);
    (session, token, all)
}

async fn a_reconnecting_client_resumes_without_gap_or_duplicate(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token, all) = conversation(&app).await;
    let n = all.len();
    assert!(n > 8, "{all:?}");
    let last = all[n - 1];
    let mut from_header = open(&app, &session, &token, Some(&all[n - 4].to_string())).await;
    let replayed = from_header.until(WAIT, |f| f.id == Some(last)).await;
    assert_eq!(ids(&replayed), all[n - 3..]);
    // The query parameter works too (for EventSource), with the token in the query as well.
    let url = app.url(&format!(
        "/api/sessions/{session}/stream?last_event_id={}&token={token}",
        all[n - 2]
    ));
    let mut from_query = SseClient::new(app.client.get(url).send().await.unwrap());
    // Live events continue the sequence with nothing skipped or repeated.
    assert_eq!(
        app.post_message(&session, &token, "That is about it for planning.")
            .await
            .status(),
        StatusCode::ACCEPTED
    );
    app.run(&session).await;
    let mut fresh = open(&app, &session, &token, None).await;
    let now = ids(&fresh.drain(Duration::from_millis(500)).await);
    let end = *now.last().unwrap();
    assert!(end > last);
    let live = from_query.until(WAIT, |f| f.id == Some(end)).await;
    assert_eq!(ids(&live), now[n - 1..]);
    let more = from_header.until(WAIT, |f| f.id == Some(end)).await;
    assert_eq!(ids(&more), now[n..]);
}

async fn many_subscribers_each_get_every_event(store: Store) {
    let app = TestApp::spawn_with(store, |s| s.sse_keepalive_secs = 1).await;
    let (session, token) = app.create_session("demo").await;
    let mut clients = Vec::new();
    for _ in 0..5 {
        clients.push(open(&app, &session, &token, None).await);
    }
    clients.push(open(&app, &session, RESEARCHER_TOKEN, None).await);
    let s = app.run(&session).await;
    app.answer(&session, &token, &s, json!({"accepted": true}))
        .await;
    app.run(&session).await;
    for i in 0..3 {
        app.post_message(
            &session,
            &token,
            &format!("Answer number {i} has several words in it"),
        )
        .await;
        let s = app.run(&session).await;
        if !s["pending_interaction"].is_null() {
            let value = crate::helpers::typical_value(&s["pending_interaction"]);
            app.answer(&session, &token, &s, value).await;
            app.run(&session).await;
        }
    }
    let mut fresh = open(&app, &session, &token, None).await;
    let all = ids(&fresh.drain(Duration::from_millis(500)).await);
    let last = *all.last().unwrap();
    for client in &mut clients {
        let frames = client.until(WAIT, |f| f.id == Some(last)).await;
        assert_eq!(ids(&frames), all);
    }
    drop(clients);
    drop(fresh);
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
    let path = paths::stream(&session);
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
