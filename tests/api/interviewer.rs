//! The rules interviewer driving the demo study end to end, through HTTP and the stream.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::both_stores;
use crate::helpers::paths;
use crate::helpers::{assert_error, json_of, last_assistant, Store, TestApp};
use crate::sse::SseClient;

fn last_action(state: &Value) -> Value {
    state["decision_log"].as_array().unwrap().last().unwrap()["selected_action"].clone()
}

async fn say(app: &TestApp, session: &str, token: &str, text: &str) {
    assert_eq!(
        app.post_message(session, token, text).await.status(),
        StatusCode::ACCEPTED
    );
}

// Long by design: one demo interview end to end in the order a participant lives it: consent, the
// opening question, a vague answer probed, answers, a Likert and a choice, the summary confirmed,
// each step's assertions right after it; then the decision log, the stream, the claims and their
// commits, and a message refused after the end.
async fn the_rules_interviewer_runs_the_demo_to_completion(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.create_session("demo").await;
    let stream_url = app.url(&format!("/api/sessions/{session}/stream?token={token}"));
    let mut sse = SseClient::new(app.client.get(stream_url).send().await.unwrap());

    let s = app.run(&session).await;
    assert_eq!(s["status"], "waiting_for_tool");
    assert_eq!(s["current_phase"], "CONSENT_OR_SCREENING");
    assert_eq!(s["pending_interaction"]["type"], "consent");
    assert!(s["pending_interaction"]["consent_text"]
        .as_str()
        .unwrap()
        .contains("research interview"));
    app.answer(&session, &token, &s, json!({"accepted": true}))
        .await;

    let s = app.run(&session).await;
    assert_eq!(s["status"], "waiting_for_user");
    assert_eq!(s["current_phase"], "OPENING");
    assert!(last_assistant(&s).starts_with("To start, could you walk me through"));
    assert_eq!(
        last_action(&s),
        json!({"action": "ask_question", "objective_id": "planning_habits"})
    );

    say(&app, &session, &token, "I use a list").await;
    let s = app.run(&session).await;
    assert_eq!(last_action(&s)["action"], "probe");
    assert_eq!(last_action(&s)["trigger"], "vague");

    say(
        &app,
        &session,
        &token,
        "Last Sunday I wrote the list on my phone while my partner checked the fridge and pantry",
    )
    .await;
    let s = app.run(&session).await;
    assert_eq!(
        last_action(&s),
        json!({"action": "ask_question", "objective_id": "pain_points"})
    );
    assert!(
        s["extracted_fields"]["planning_method"]["confidence"]
            .as_f64()
            .unwrap()
            >= 0.7
    );

    say(
        &app,
        &session,
        &token,
        "Vegetables go bad before we eat them because we buy too much on impulse every single week",
    )
    .await;
    let s = app.run(&session).await;
    assert_eq!(s["status"], "waiting_for_tool");
    assert_eq!(s["pending_interaction"]["type"], "likert");
    app.answer(&session, &token, &s, json!(2)).await;

    let s = app.run(&session).await;
    assert_eq!(
        last_action(&s),
        json!({"action": "ask_question", "objective_id": "tool_preferences"})
    );
    assert_eq!(s["extracted_fields"]["planning_satisfaction"]["value"], 2);

    say(&app, &session, &token, "Honestly a shopping list that fills itself from the meals we plan would save me the most time").await;
    let s = app.run(&session).await;
    assert_eq!(s["pending_interaction"]["type"], "single_choice");
    app.answer(&session, &token, &s, json!("shopping_list"))
        .await;

    let s = app.run(&session).await;
    assert_eq!(s["status"], "waiting_for_user");
    assert_eq!(s["current_phase"], "SUMMARY_CONFIRMATION");
    assert!(last_assistant(&s).contains("Did I get that right?"));
    let turns = s["turn_count"].clone();

    say(&app, &session, &token, "Yes, that's right").await;
    let s = app.run(&session).await;
    assert_eq!(s["status"], "completed");
    assert_eq!(
        s["turn_count"], turns,
        "the confirmation reply is not a turn"
    );
    assert_eq!(s["end_reason"], "all_must_objectives_covered");
    assert_eq!(s["summary_confirmed"], true);
    assert!(s["summary"].as_str().unwrap().contains("shopping list"));

    // Every decision is logged with its rationale and provenance.
    for d in s["decision_log"].as_array().unwrap() {
        assert!(!d["rationale"].as_str().unwrap().trim().is_empty(), "{d}");
        assert_eq!(d["model"], "rules");
        assert!(
            d["latency_ms"].is_u64() && d["token_usage"].is_object() && d["phase"].is_string(),
            "{d}"
        );
    }
    // The participant saw the utterances stream in before each was completed.
    let frames = sse
        .until(Duration::from_secs(5), |f| f.event == "session.completed")
        .await;
    let first_delta = frames
        .iter()
        .position(|f| f.event == "message.delta")
        .expect("deltas were streamed");
    let first_assistant = frames
        .iter()
        .position(|f| f.event == "message.completed" && f.data["role"] == "assistant")
        .unwrap();
    assert!(first_delta < first_assistant);
    for f in &frames {
        let text = f.data.to_string().to_lowercase();
        if f.event.starts_with("message") {
            for internal in ["rationale", "langgraph", "harness"] {
                assert!(
                    !text.contains(internal),
                    "{internal} shown to the participant: {text}"
                );
            }
        }
    }
    // The stored stream passes every rule the aggregate checks.
    app.assert_stream_follows_the_rules(&session).await;
    // Only words are claimed: the widgets and extractions the rules decided were committed
    // without a claim before them — one claim per utterance, none for the rest.
    let log: Value = serde_json::from_str(&app.event_log(&session).await).unwrap();
    let count = |kind: &str| {
        log.as_array()
            .or_else(|| log["events"].as_array())
            .expect("an event list")
            .iter()
            .filter(|e| e["event_type"] == kind)
            .count()
    };
    assert_eq!(
        count("agent.message.started"),
        count("agent.message.completed")
    );
    assert!(count("agent.decision.recorded") > count("agent.message.started"));
    // And each utterance was claimed in the commit that says it: no commit begins between a
    // claim and its words.
    let heads = app.commit_heads(&session).await;
    let events = log
        .as_array()
        .or_else(|| log["events"].as_array())
        .expect("an event list");
    let seq_of = |kind: &str, message_id: &Value| {
        events
            .iter()
            .find(|e| e["event_type"] == kind && e["payload"]["message_id"] == *message_id)
            .and_then(|e| e["sequence"].as_u64())
            .expect("the event")
    };
    for said in events
        .iter()
        .filter(|e| e["event_type"] == "agent.message.completed")
    {
        let message_id = &said["payload"]["message_id"];
        let (claim, words) = (
            seq_of("agent.message.started", message_id),
            seq_of("agent.message.completed", message_id),
        );
        assert!(heads.contains(&claim), "the claim opens its commit: {said}");
        assert!(
            !heads.iter().any(|h| *h > claim && *h <= words),
            "claim {claim} and words {words} in one commit (commits begin at {heads:?})"
        );
    }
    // And the participant cannot go on.
    assert_error(
        app.post_message(&session, &token, "one more thing").await,
        StatusCode::GONE,
        "session_terminal",
    )
    .await;
}

async fn declining_consent_abandons_the_session_kindly(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.create_session("demo").await;
    let s = app.run(&session).await;
    app.answer(&session, &token, &s, json!({"accepted": false}))
        .await;
    let s = app.run(&session).await;
    assert_eq!(s["status"], "abandoned");
    assert_eq!(s["end_reason"], "consent_declined");
    assert!(last_assistant(&s).contains("thank you"));
    let participant = json_of(app.get(&paths::session(&session), Some(&token)).await).await;
    let transcript = participant["transcript"].as_array().unwrap();
    assert!(transcript
        .iter()
        .any(|t| t["content"] == "I do not agree to take part."));
    assert_error(
        app.post_message(&session, &token, "hello?").await,
        StatusCode::GONE,
        "session_terminal",
    )
    .await;
}

async fn saying_stop_goes_to_the_summary_and_ends_there(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.create_session("demo").await;
    let s = app.run(&session).await;
    app.answer(&session, &token, &s, json!({"accepted": true}))
        .await;
    app.run(&session).await;
    say(&app, &session, &token, "结束").await;
    let s = app.run(&session).await;
    assert_eq!(s["current_phase"], "SUMMARY_CONFIRMATION");
    assert_eq!(last_action(&s)["action"], "summarize_and_confirm");
    say(&app, &session, &token, "是的").await;
    let s = app.run(&session).await;
    assert_eq!(s["status"], "completed");
    assert_eq!(s["end_reason"], "participant_requested_end");
    let questions = s["decision_log"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| {
            matches!(
                d["selected_action"]["action"].as_str(),
                Some("ask_question" | "probe")
            )
        })
        .count();
    assert_eq!(questions, 1, "no question after the end request");
}

async fn a_second_run_on_the_same_turn_does_not_answer_twice(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, _) = app.create_session("demo").await;
    let (a, b) = tokio::join!(
        app.state.interviewer.run(&session),
        app.state.interviewer.run(&session)
    );
    a.unwrap();
    b.unwrap();
    // The server's own trigger raced these two as well.
    let s = app.run(&session).await;
    assert_eq!(s["decision_log"].as_array().unwrap().len(), 1, "{s}");
    assert_eq!(s["interaction_events"].as_array().unwrap().len(), 1);
}

both_stores!(
    the_rules_interviewer_runs_the_demo_to_completion,
    declining_consent_abandons_the_session_kindly,
    saying_stop_goes_to_the_summary_and_ends_there,
    a_second_run_on_the_same_turn_does_not_answer_twice,
);
