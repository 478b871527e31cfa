//! Overload protection: creates rate-limited per address and per study (429 + Retry-After), a
//! session's inputs rate-limited (each may cost model calls), the open-stream cap, the in-flight cap, and an announced oversize body
//! refused before it is read. Each refusal is quick and writes nothing.

use std::time::Duration;

use futures_util::StreamExt;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::both_stores;
use crate::helpers::paths;
use crate::helpers::{assert_error, Store, TestApp};

async fn create(app: &TestApp, slug: &str) -> reqwest::Response {
    app.post(&paths::join(slug), None, &json!({})).await
}

async fn creates_are_rate_limited_per_address_and_per_study(store: Store) {
    let app = TestApp::spawn_with(store, |s| {
        s.create_rate_per_address = 3;
    })
    .await;
    for _ in 0..3 {
        let res = create(&app, "demo").await;
        assert_eq!(res.status(), StatusCode::CREATED);
        let body: Value = res.json().await.unwrap();
        app.run(body["session_id"].as_str().unwrap()).await;
    }
    let before = app.total_events().await;
    let res = create(&app, "demo").await;
    let retry: u64 = res.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=20).contains(&retry), "{retry}");
    let body = assert_error(res, StatusCode::TOO_MANY_REQUESTS, "rate_limited").await;
    assert_eq!(body["error"]["details"]["retry_after_secs"], retry);
    assert_eq!(
        app.total_events().await,
        before,
        "a refused create writes nothing"
    );

    let app = TestApp::spawn_with(store, |s| {
        s.create_rate_per_study = 2;
    })
    .await;
    let mut other: Value =
        serde_json::from_str(include_str!("../../examples/demo-study.json")).unwrap();
    other["public_slug"] = json!("other");
    app.publish_study(&other).await;
    for _ in 0..2 {
        assert_eq!(create(&app, "demo").await.status(), StatusCode::CREATED);
    }
    assert_error(
        create(&app, "demo").await,
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limited",
    )
    .await;
    assert_eq!(create(&app, "other").await.status(), StatusCode::CREATED);
}

async fn open_streams_are_capped(store: Store) {
    // Keep-alives every second: that is how a vanished client is noticed.
    let app = TestApp::spawn_with(store, |s| {
        s.max_streams = 2;
        s.sse_keepalive_secs = 1;
    })
    .await;
    let (session, token) = app.create_session("demo").await;
    let url = app.url(&paths::stream(&session));
    let open = || app.client.get(&url).bearer_auth(&token).send();
    let (a, b) = (open().await.unwrap(), open().await.unwrap());
    assert_eq!((a.status(), b.status()), (StatusCode::OK, StatusCode::OK));
    let third = open().await.unwrap();
    assert!(third.headers().contains_key("retry-after"));
    assert_error(third, StatusCode::SERVICE_UNAVAILABLE, "overloaded").await;
    drop(a);
    // The closed stream's slot comes back once its pump notices.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let res = open().await.unwrap();
        if res.status() == StatusCode::OK {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the slot never came back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(b);
}

// Long by design: three limits on one server with a single request slot, each with its checks after
// it: a trickling body holds no slot and then times out, a request in flight gets the next one
// refused (probes still answer) until it ends, and a body announced too big is refused before it is
// sent.
async fn requests_in_flight_are_capped_and_big_bodies_refused_unread(store: Store) {
    let app = TestApp::spawn_with(store, |s| {
        s.max_inflight_requests = 1;
        s.max_body_bytes = 64 * 1024;
        s.body_read_timeout_secs = 1;
    })
    .await;
    // A request whose body trickles in holds no slot: others are served meanwhile.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
    let slow = app
        .client
        .post(app.url("/api/studies"))
        .bearer_auth(crate::helpers::RESEARCHER_TOKEN)
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(tokio_stream_from(rx)))
        .send();
    let slow = tokio::spawn(slow);
    tx.send(Ok(b"{".to_vec())).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(app.get("/healthz", None).await.status(), StatusCode::OK);
    let studies = app
        .get("/api/studies", Some(crate::helpers::RESEARCHER_TOKEN))
        .await;
    assert_eq!(studies.status(), StatusCode::OK);
    // ... and once its time is up it is refused (or its connection closed under it).
    match slow.await.unwrap() {
        Ok(res) => {
            assert_error(res, StatusCode::REQUEST_TIMEOUT, "request_timeout").await;
        }
        Err(e) => assert!(!e.is_timeout(), "{e}"),
    }
    drop(tx);

    // A request in flight holds the only slot: the next is refused at once; probes answer.
    let slot = app.guards.inflight.try_open().expect("a free slot");
    let busy = app
        .get("/api/studies", Some(crate::helpers::RESEARCHER_TOKEN))
        .await;
    assert!(busy.headers().contains_key("retry-after"));
    assert_error(busy, StatusCode::SERVICE_UNAVAILABLE, "overloaded").await;
    assert_eq!(app.get("/healthz", None).await.status(), StatusCode::OK);
    assert_eq!(app.get("/readyz", None).await.status(), StatusCode::OK);
    drop(slot);
    assert_eq!(
        app.get("/api/studies", Some(crate::helpers::RESEARCHER_TOKEN))
            .await
            .status(),
        StatusCode::OK
    );

    // A body announced over the limit is refused before it is sent.
    let started = std::time::Instant::now();
    let (_tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
    let res = app
        .client
        .post(app.url("/api/studies"))
        .bearer_auth(crate::helpers::RESEARCHER_TOKEN)
        .header("content-type", "application/json")
        .header("content-length", (100 * 1024 * 1024).to_string())
        .body(reqwest::Body::wrap_stream(tokio_stream_from(rx)))
        .send()
        .await
        .unwrap();
    assert_error(res, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large").await;
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// A stream of body chunks fed through a channel.
fn tokio_stream_from(
    rx: tokio::sync::mpsc::Receiver<Result<Vec<u8>, std::io::Error>>,
) -> impl futures_util::Stream<Item = Result<Vec<u8>, std::io::Error>> {
    futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) })
        .boxed()
}

/// A session's inputs (messages, widget answers) per minute: past the limit, 429 with
/// `Retry-After`, and nothing written.
async fn a_session_s_inputs_are_rate_limited(store: Store) {
    let app = TestApp::spawn_with(store, |s| s.inputs_per_session_per_minute = 3).await;
    let (session, token) = app.create_session("demo").await;
    let s = app.run(&session).await;
    app.answer(&session, &token, &s, json!({"accepted": true}))
        .await;
    app.run(&session).await;
    for text in ["We keep a list.", "On Sundays."] {
        app.post_message(&session, &token, text).await;
        app.run(&session).await;
    }
    let before = app.total_events().await;
    let res = app
        .post_message(&session, &token, "And my partner helps.")
        .await;
    let body = assert_error(res, StatusCode::TOO_MANY_REQUESTS, "rate_limited").await;
    assert!(
        body["error"]["details"]["retry_after_secs"]
            .as_u64()
            .unwrap()
            >= 1
    );
    assert_eq!(app.total_events().await, before, "nothing written");
}

both_stores!(
    a_session_s_inputs_are_rate_limited,
    creates_are_rate_limited_per_address_and_per_study,
    open_streams_are_capped,
    requests_in_flight_are_capped_and_big_bodies_refused_unread,
);
