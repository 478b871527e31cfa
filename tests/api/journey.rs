//! Screening and safety through the harness and HTTP.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::both_stores;
use crate::helpers::paths;
use crate::helpers::{assert_error, last_assistant, Store, TestApp};

async fn screened_study(app: &TestApp) -> String {
    let mut study: Value =
        serde_json::from_str(include_str!("../../examples/demo-study.json")).unwrap();
    study["public_slug"] = json!("screened");
    study["screening"] = json!({
        "questions": [
            {"id": "shops", "type": "yes_no", "prompt": "Do you do the grocery shopping for your household?"},
            {"id": "often", "type": "single_choice", "prompt": "How often do you shop?",
             "options": [{"id": "weekly", "label": "Every week"}, {"id": "rarely", "label": "Rarely"}]}
        ],
        "rules": [
            {"question_id": "shops", "disqualify_if": [false]},
            {"question_id": "often", "qualify_if": ["weekly"]}
        ]
    });
    study["agent"]["safety_patterns"] = json!(["hurt myself", "my bank password"]);
    study["completion_redirect_url"] =
        json!("https://panel.example/return?pid={participant_ref}&status={outcome}");
    let (_, slug, _) = app.publish_study(&study).await;
    slug
}

/// Consent, then the two screening answers.
async fn screen(app: &TestApp, slug: &str, shops: bool, often: &str) -> (String, String, Value) {
    let (session, token) = app.create_session(slug).await;
    let s = app.run(&session).await;
    app.answer(&session, &token, &s, json!({"accepted": true}))
        .await;
    let s = app.run(&session).await;
    assert_eq!(s["pending_interaction"]["screening_question_id"], "shops");
    assert_eq!(s["current_phase"], "CONSENT_OR_SCREENING");
    app.answer(&session, &token, &s, json!(shops)).await;
    let s = app.run(&session).await;
    assert_eq!(s["pending_interaction"]["screening_question_id"], "often");
    app.answer(&session, &token, &s, json!(often)).await;
    let s = app.run(&session).await;
    (session, token, s)
}

async fn failing_screening_ends_the_session_kindly(store: Store) {
    let app = TestApp::spawn(store).await;
    let slug = screened_study(&app).await;
    let (session, token, s) = screen(&app, &slug, true, "rarely").await;
    assert_eq!(s["status"], "abandoned");
    assert_eq!(s["end_reason"], "screening_failed");
    assert_eq!(s["screening"]["eligible"], false);
    assert!(s["screening"]["rationale"]
        .as_str()
        .unwrap()
        .contains("often"));
    assert!(last_assistant(&s).contains("Thank you for your answers"));
    assert_eq!(s["turn_count"], 0, "screening answers are not turns");
    assert_error(
        app.post_message(&session, &token, "hello?").await,
        StatusCode::GONE,
        "session_terminal",
    )
    .await;
}

async fn passing_screening_opens_the_interview(store: Store) {
    let app = TestApp::spawn(store).await;
    let slug = screened_study(&app).await;
    let (_, _, s) = screen(&app, &slug, true, "weekly").await;
    assert_eq!(s["status"], "waiting_for_user");
    assert_eq!(s["current_phase"], "OPENING");
    assert_eq!(s["screening"]["eligible"], true);
    assert!(last_assistant(&s).starts_with("To start"));
}

async fn a_safety_trigger_abandons_with_a_supportive_message(store: Store) {
    let app = TestApp::spawn(store).await;
    let slug = screened_study(&app).await;
    let (session, token, _) = screen(&app, &slug, true, "weekly").await;
    assert_eq!(
        app.post_message(
            &session,
            &token,
            "Honestly some weeks I just want to hurt myself"
        )
        .await
        .status(),
        StatusCode::ACCEPTED
    );
    let s = app.run(&session).await;
    assert_eq!(s["status"], "abandoned");
    assert_eq!(s["end_reason"], "safety_triggered");
    assert!(last_assistant(&s).contains("support"));
}

async fn an_ended_session_sends_a_panel_participant_back_with_the_outcome(store: Store) {
    let app = TestApp::spawn(store).await;
    let slug = screened_study(&app).await;
    let res = app
        .post(
            &paths::join(&slug),
            None,
            &json!({"participant_ref": "panel 42"}),
        )
        .await;
    let body = crate::helpers::json_of(res).await;
    let (session, token) = (
        body["session_id"].as_str().unwrap().to_string(),
        body["participant_token"].as_str().unwrap().to_string(),
    );
    let url = app.url(&format!("/api/sessions/{session}/stream?token={token}"));
    let mut sse = crate::sse::SseClient::new(app.client.get(url).send().await.unwrap());
    let s = app.run(&session).await;
    assert_eq!(s["redirect_url"], Value::Null, "not while it runs");
    app.answer(&session, &token, &s, json!({"accepted": true}))
        .await;
    let s = app.run(&session).await;
    app.answer(&session, &token, &s, json!(false)).await;
    let s = app.run(&session).await;
    app.answer(&session, &token, &s, json!("weekly")).await;
    app.run(&session).await;
    let expected = "https://panel.example/return?pid=panel%2042&status=screened_out";
    let participant =
        crate::helpers::json_of(app.get(&paths::session(&session), Some(&token)).await).await;
    assert_eq!(participant["status"], "abandoned");
    assert_eq!(participant["redirect_url"], expected);
    let frames = sse
        .until(std::time::Duration::from_secs(5), |f| {
            f.event == "session.status" && f.data["status"] == "abandoned"
        })
        .await;
    assert_eq!(frames.last().unwrap().data["redirect_url"], expected);
}

both_stores!(
    an_ended_session_sends_a_panel_participant_back_with_the_outcome,
    failing_screening_ends_the_session_kindly,
    passing_screening_opens_the_interview,
    a_safety_trigger_abandons_with_a_supportive_message,
);
