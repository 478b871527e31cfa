//! Webhooks (`docs/webhooks.md`), on both stores, against a real receiver over HTTP
//! (`webhook_receiver.rs`, which checks every signature by hand): 50 completed interviews
//! arrive as 50 signed `session.completed`, in commit order; a receiver that fails three times
//! and recovers gets everything, in order, with each notice under one `webhook-id`; a
//! subscription that keeps failing is marked so and a redelivery resumes it; an erased
//! session's content is never sent again. Refused requests: `webhooks_api.rs`.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::both_stores;
use crate::helpers::{json_of, paths, Store, TestApp, RESEARCHER_TOKEN};
use crate::webhook_receiver::{signed_by, Receiver};

const WAIT: Duration = Duration::from_secs(60);

/// A server that may deliver to this machine, retrying fast.
pub(crate) async fn app(store: Store, retry_for_secs: u64) -> TestApp {
    TestApp::spawn_with(store, |s| {
        s.webhooks.allow_private_addresses = true;
        s.webhooks.retry_base = Duration::from_millis(100);
        s.webhooks.retry_for = Duration::from_secs(retry_for_secs);
    })
    .await
}

pub(crate) fn hooks(study: &str) -> String {
    format!("/api/studies/{study}/webhooks")
}

/// Subscribes `url` to `events`; the subscription as made (with its secret).
pub(crate) async fn subscribe(app: &TestApp, study: &str, url: &str, events: &[&str]) -> Value {
    let res = app
        .post(
            &hooks(study),
            Some(RESEARCHER_TOKEN),
            &json!({"url": url, "events": events}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    assert_eq!(res.headers()["cache-control"], "no-store");
    json_of(res).await
}

/// A demo interview taken to its end by the participant; its id.
async fn complete(app: &TestApp, words: &str) -> String {
    let (session, token) = app.create_session("demo").await;
    let s = app.run(&session).await;
    app.answer(&session, &token, &s, json!({"accepted": true}))
        .await;
    app.run(&session).await;
    app.post_message(&session, &token, words).await;
    app.run(&session).await;
    for _ in 0..2 {
        app.post(&paths::end(&session), Some(&token), &json!({}))
            .await;
        app.run(&session).await;
    }
    session
}

async fn pause_and_resume(app: &TestApp, study: &str, times: usize) {
    for _ in 0..times {
        for action in ["pause", "resume"] {
            let res = app
                .post(
                    &format!("/api/studies/{study}/{action}"),
                    Some(RESEARCHER_TOKEN),
                    &json!({}),
                )
                .await;
            assert_eq!(res.status(), StatusCode::OK);
        }
    }
}

fn position(r: &crate::webhook_receiver::Received) -> i64 {
    r.body["position"].as_i64().unwrap()
}

// Long by design: one story in order — 50 interviews completed ten at a time, their 50
// deliveries checked (signature, shape, one per session, commit order), then five of them erased
// and each session's two notices checked in order.
async fn fifty_completions_arrive_signed_in_commit_order(store: Store) {
    let app = app(store, 3600).await;
    let receiver = Receiver::start(0).await;
    let study = app.demo_study_id().await;
    let hook = subscribe(
        &app,
        &study,
        &receiver.url,
        &["session.completed", "participant.data.erased"],
    )
    .await;
    let secret = hook["secret"].as_str().unwrap();
    let mut sessions = Vec::new();
    for round in 0..5 {
        let words = |i: usize| {
            format!("Round {round} person {i}: we plan meals on Sunday with a shared list.")
        };
        let batch: Vec<_> = (0..10).map(words).collect();
        let done = futures_util::future::join_all(batch.iter().map(|w| complete(&app, w))).await;
        sessions.extend(done);
    }
    let got = receiver.until_accepted(50, WAIT).await;
    assert_eq!(got.len(), 50, "no more than one delivery per notice");
    let mut seen = HashSet::new();
    for r in &got {
        assert!(
            signed_by(secret, r),
            "a signature did not verify: {} {}",
            r.id,
            r.body
        );
        assert_eq!(r.body["type"], "session.completed");
        let data = &r.body["data"];
        assert_eq!(data["study_id"], study.as_str());
        assert!(data["fields"].is_object(), "{data}");
        assert!(seen.insert(data["session_id"].as_str().unwrap().to_string()));
    }
    let expected: HashSet<String> = sessions.iter().cloned().collect();
    assert_eq!(seen, expected);
    // Commit order: positions rise, one by one, with every id different.
    let positions: Vec<i64> = got.iter().map(position).collect();
    assert_eq!(positions, (1..=50).collect::<Vec<_>>());
    assert_eq!(got.iter().map(|r| &r.id).collect::<HashSet<_>>().len(), 50);

    // Per session, in order: five of them erased now arrive after their completion.
    for session in &sessions[..5] {
        let res = app
            .send(
                Method::DELETE,
                &format!("/api/sessions/{session}/participant-data"),
                Some(RESEARCHER_TOKEN),
                Some("{}".into()),
            )
            .await;
        assert_eq!(res.status(), StatusCode::OK);
    }
    let got = receiver.until_accepted(55, WAIT).await;
    let mut first_seen: HashMap<String, Vec<String>> = HashMap::new();
    for r in &got {
        assert!(signed_by(secret, r));
        first_seen
            .entry(r.body["data"]["session_id"].as_str().unwrap().into())
            .or_default()
            .push(r.body["type"].as_str().unwrap().into());
    }
    for session in &sessions[..5] {
        assert_eq!(
            first_seen[session],
            ["session.completed", "participant.data.erased"],
            "{session}"
        );
    }
    let erased = got
        .iter()
        .find(|r| r.body["type"] == "participant.data.erased")
        .unwrap();
    assert_eq!(erased.body["data"]["receipt"]["erased_by"], "researcher");
    receiver.stop().await;
}

// Long by design: one story in order — three failures then recovery, the seven deliveries in
// order, the failed attempts under the first notice's id, the attempts as listed, the
// subscription caught up, and the metrics that count it.
async fn a_receiver_that_fails_three_times_then_recovers_gets_everything_in_order(store: Store) {
    let app = app(store, 3600).await;
    let receiver = Receiver::start(3).await;
    let study = app.demo_study_id().await;
    let hook = subscribe(
        &app,
        &study,
        &receiver.url,
        &["study.paused", "study.resumed", "session.completed"],
    )
    .await;
    let hook_id = hook["hook_id"].as_str().unwrap();
    pause_and_resume(&app, &study, 3).await;
    let session = complete(&app, "We shop on Saturdays after writing a list together.").await;
    let got = receiver.until_accepted(7, WAIT).await;
    let kinds: Vec<&str> = got
        .iter()
        .map(|r| r.body["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "study.paused",
            "study.resumed",
            "study.paused",
            "study.resumed",
            "study.paused",
            "study.resumed",
            "session.completed"
        ]
    );
    assert_eq!(got[6].body["data"]["session_id"], session.as_str());
    assert_eq!(
        got.iter().map(position).collect::<Vec<_>>(),
        (1..=7).collect::<Vec<_>>()
    );
    // The three failures were attempts at the first notice, under its one id.
    let all = receiver.all();
    assert_eq!(all.len(), 10, "{all:?}");
    assert!(all[..4].iter().all(|r| r.id == got[0].id));
    assert!(all
        .iter()
        .all(|r| signed_by(hook["secret"].as_str().unwrap(), r)));

    let path = format!("{}/{hook_id}/deliveries", hooks(&study));
    let page = json_of(app.get(&path, Some(RESEARCHER_TOKEN)).await).await;
    let attempts = page["deliveries"].as_array().unwrap();
    assert_eq!(attempts.len(), 10);
    let failed: Vec<&Value> = attempts.iter().filter(|d| d["status"] == 500).collect();
    assert_eq!(failed.len(), 3);
    assert!(failed.iter().all(|d| d["message_id"] == got[0].id.as_str()
        && d["error"].as_str().unwrap().contains("500")
        && d["response_excerpt"] == "not now"));
    let now = json_of(
        app.get(
            &format!("{}/{hook_id}", hooks(&study)),
            Some(RESEARCHER_TOKEN),
        )
        .await,
    )
    .await;
    assert_eq!(now["delivered_through"], 7);
    assert_eq!(now["attempts"], 0);
    assert_eq!(now["failing"], false);
    assert!(now.get("secret").is_none());

    // Metrics (one recorder for every test in this process: at least ours).
    use crate::metrics::{scrape, total};
    let seen = scrape(&app).await;
    let deliveries = "interview_webhook_deliveries_total";
    assert!(total(&seen, deliveries, &[("outcome", "failed")]) >= 3.0);
    assert!(total(&seen, deliveries, &[("outcome", "delivered")]) >= 7.0);
    let lag = "interview_webhook_oldest_undelivered_seconds";
    let mut gauged = false;
    for _ in 0..80 {
        let seen = scrape(&app).await;
        if seen
            .samples
            .iter()
            .any(|s| s.metric == lag && s.labels.get("hook_id") == Some(hook_id))
        {
            gauged = true;
            assert_eq!(total(&seen, lag, &[("hook_id", hook_id)]), 0.0, "caught up");
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gauged, "{lag} is set for the subscription");
    receiver.stop().await;
}

// Long by design: one story in order — failing at the first failure, not retried, then three
// redeliveries (from the cursor, from the start, from a time past the end) and what each sends.
async fn a_subscription_that_keeps_failing_is_marked_and_a_redelivery_resumes_it(store: Store) {
    // Retried for no time at all: the first failure marks it failing.
    let app = app(store, 0).await;
    let receiver = Receiver::start(1).await;
    let study = app.demo_study_id().await;
    let hook = subscribe(
        &app,
        &study,
        &receiver.url,
        &["study.paused", "study.resumed"],
    )
    .await;
    let one = format!("{}/{}", hooks(&study), hook["hook_id"].as_str().unwrap());
    pause_and_resume(&app, &study, 1).await;
    let mut failing = Value::Null;
    for _ in 0..200 {
        failing = json_of(app.get(&one, Some(RESEARCHER_TOKEN)).await).await;
        if failing["failing"] == true {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(failing["failing"], true, "{failing}");
    assert!(failing["last_error"].as_str().unwrap().contains("500"));
    assert!(failing["oldest_undelivered_at"].is_string());
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        receiver.all().len(),
        1,
        "a failing subscription is not retried"
    );

    // From the first undelivered notice, then again from the start: the same ids again.
    let res = app
        .post(
            &format!("{one}/redeliver"),
            Some(RESEARCHER_TOKEN),
            &json!({}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let first = receiver.until_accepted(2, WAIT).await;
    let res = app
        .post(
            &format!("{one}/redeliver"),
            Some(RESEARCHER_TOKEN),
            &json!({"from": 1}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let again = receiver.until_accepted(4, WAIT).await;
    assert_eq!(again[2].id, first[0].id);
    assert_eq!(again[3].id, first[1].id);
    // From a time after every notice: nothing to send.
    let res = app
        .post(
            &format!("{one}/redeliver"),
            Some(RESEARCHER_TOKEN),
            &json!({"from": "2999-01-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(json_of(res).await["delivered_through"], 2);
    receiver.stop().await;
}

// Long by design: one story in order — the result sent with the participant's words, the
// session erased, and the same notice redelivered without them.
async fn an_erased_sessions_content_is_never_sent_again(store: Store) {
    let app = app(store, 3600).await;
    let receiver = Receiver::start(0).await;
    let study = app.demo_study_id().await;
    let hook = subscribe(&app, &study, &receiver.url, &["session.completed"]).await;
    let marker = "zanzibar-notebook-4411";
    let session = complete(&app, &format!("I keep the list in my {marker} every week.")).await;
    let first = receiver.until_accepted(1, WAIT).await;
    assert!(
        String::from_utf8_lossy(&first[0].raw).contains("zanzibar"),
        "the result carries the participant's words: {}",
        first[0].body
    );
    let res = app
        .send(
            Method::DELETE,
            &format!("/api/sessions/{session}/participant-data"),
            Some(RESEARCHER_TOKEN),
            Some("{}".into()),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let one = format!("{}/{}", hooks(&study), hook["hook_id"].as_str().unwrap());
    let res = app
        .post(
            &format!("{one}/redeliver"),
            Some(RESEARCHER_TOKEN),
            &json!({"from": 1}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let again = receiver.until_accepted(2, WAIT).await;
    assert_eq!(again[1].id, first[0].id);
    assert_eq!(again[1].body["data"]["erased"], true);
    assert!(again[1].body["data"].get("fields").is_none());
    assert!(!String::from_utf8_lossy(&again[1].raw).contains("zanzibar"));
    receiver.stop().await;
}

async fn an_abandoned_session_is_announced_with_its_reason_and_no_content(store: Store) {
    let app = app(store, 3600).await;
    let receiver = Receiver::start(0).await;
    let study = app.demo_study_id().await;
    let hook = subscribe(&app, &study, &receiver.url, &["session.abandoned"]).await;
    let (session, token) = app.create_session("demo").await;
    let s = app.run(&session).await;
    app.answer(&session, &token, &s, json!({"accepted": false}))
        .await;
    let got = receiver.until_accepted(1, WAIT).await;
    assert!(signed_by(hook["secret"].as_str().unwrap(), &got[0]));
    assert_eq!(got[0].body["type"], "session.abandoned");
    let data = &got[0].body["data"];
    assert_eq!(data["session_id"], session.as_str());
    assert_eq!(data["reason"], "consent_declined");
    let keys: Vec<&String> = data.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["abandoned_at", "reason", "session_id", "study_id"]);
    receiver.stop().await;
}

both_stores!(
    an_abandoned_session_is_announced_with_its_reason_and_no_content,
    fifty_completions_arrive_signed_in_commit_order,
    a_receiver_that_fails_three_times_then_recovers_gets_everything_in_order,
    a_subscription_that_keeps_failing_is_marked_and_a_redelivery_resumes_it,
    an_erased_sessions_content_is_never_sent_again,
);
