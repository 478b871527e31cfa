//! What a participant waits on in `llm` mode (issue 32): the step that decides what they are
//! told next, never a background call. An extraction sent alongside the step that is still
//! running a moment after the step is decided is dropped, recorded, and left to the final
//! extraction. On both stores.

use serde_json::json;

use crate::helpers::{last_assistant, Store};
use crate::llm::Llm;
use crate::scripted_model::Reply;

async fn a_late_extraction_never_holds_the_participant(store: Store) {
    // A stalled call is given up on after 5 s of silence: longer than anyone should wait.
    let llm = Llm::start_custom(store, |s| s.model_idle_timeout_secs = 5, |_| {}).await;
    let (session, token, _) = llm
        .consented(vec![Reply::Realistic(
            "ask_question",
            json!({"objective_id": "planning_habits", "message": "How do you plan your shopping?", "rationale": "open"}),
        )])
        .await;
    // The extraction stalls a few bytes in (a server busy with another request); the step
    // answers at once.
    llm.model.push_extraction(Reply::StallAfter(
        "extract_fields",
        json!({"fields": [{"field_id": "planning_method", "value": "a list", "confidence": 0.8,
                "evidence_turn_ids": [], "quote": "a list"}], "rationale": "named"}),
        12,
    ));
    let probe = "Who else adds things to that list?";
    let s = llm
        .say(&session, &token, "I keep a list on the fridge.", vec![Reply::Realistic(
            "probe",
            json!({"objective_id": "planning_habits", "trigger": "missing_field", "message": probe, "rationale": "household"}),
        )])
        .await;
    assert_eq!(last_assistant(&s), probe);
    assert_eq!(s["status"], "waiting_for_user");
    // Not waited out (that would be `model_stalled`, 5 s later): dropped a moment after the step.
    let codes: Vec<&str> = s["errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["code"].as_str())
        .collect();
    assert_eq!(codes, ["model_extraction_late"], "{s}");
}

/// A server that ignores the output limit and writes on (runaway JSON until the timeout) is cut
/// off once it has written well past the request's `max_completion_tokens`.
async fn a_runaway_answer_is_cut_off(store: Store) {
    let llm = Llm::start_custom(
        store,
        |_| {},
        |study| study["model"]["max_output_tokens"] = json!(100),
    )
    .await;
    let (session, token, _) = llm
        .consented(vec![Reply::Realistic(
            "ask_question",
            json!({"objective_id": "planning_habits", "message": "How do you plan your shopping?", "rationale": "open"}),
        )])
        .await;
    let runaway = ".152.089".repeat(400);
    llm.model.push_extraction(Reply::Realistic(
        "extract_fields",
        json!({"fields": [{"field_id": runaway, "value": "x", "confidence": 0.8,
                "evidence_turn_ids": [], "quote": "x"}], "rationale": "r"}),
    ));
    let s = llm
        .say(&session, &token, "I keep a list on the fridge.", vec![Reply::Realistic(
            "ask_question",
            json!({"objective_id": "pain_points", "message": "What frustrates you most?", "rationale": "next"}),
        )])
        .await;
    let errors = s["errors"].as_array().unwrap();
    let cut = errors
        .iter()
        .find(|e| e["code"] == "model_too_long")
        .unwrap_or_else(|| panic!("{errors:?}"));
    assert_eq!(cut["source"], "extraction");
    assert_eq!(s["status"], "waiting_for_user");
}

/// Failures inside a 200 stream are told apart, so an operator can see what the server did:
/// a stream closed with nothing in it (asked again unstreamed, `llm_servers.rs`, and empty
/// again), and an error object sent as a `data:` line.
async fn failures_inside_a_200_stream_are_named(store: Store) {
    for (replies, code) in [
        (
            vec![Reply::EmptyStream, Reply::EmptyStream],
            "model_empty_stream",
        ),
        (
            vec![Reply::ErrorInStream(
                "Automatic streaming tool choice is not supported",
            )],
            "model_stream_error",
        ),
    ] {
        let llm = Llm::start(store).await;
        let (_, _, s) = llm.consented(replies).await;
        let error = &s["errors"][0];
        assert_eq!(error["code"], code, "{s}");
        // The rules interviewer asked instead.
        assert_eq!(s["status"], "waiting_for_user", "{s}");
    }
}

/// An endpoint that keeps failing is not paid for call after call: after five failures in a
/// row no call goes out for a while, the rules interviewer answers, and `/readyz` says so.
async fn a_failing_endpoint_is_left_alone_for_a_while(store: Store) {
    let llm = Llm::start(store).await;
    llm.model.always(Reply::EmptyStream);
    let (session, token, _) = llm.consented(vec![]).await;
    let mut s = serde_json::Value::Null;
    for answer in [
        "A list.",
        "On the fridge.",
        "My partner too.",
        "Every Sunday.",
    ] {
        s = llm.say(&session, &token, answer, vec![]).await;
        assert_eq!(s["status"], "waiting_for_user", "{s}");
    }
    let steps = || {
        llm.model
            .timeline()
            .iter()
            .filter(|c| !c.extraction)
            .count()
    };
    let calls = steps();
    assert!(calls >= 5, "{calls}");
    for answer in ["Mostly vegetables.", "Sometimes fish."] {
        s = llm.say(&session, &token, answer, vec![]).await;
    }
    assert_eq!(steps(), calls, "no step call while the breaker is open");
    let codes: Vec<&str> = s["errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["code"].as_str())
        .collect();
    assert!(codes.contains(&"model_empty_stream"), "{codes:?}");
    assert_eq!(codes.last(), Some(&"model_circuit_open"), "{codes:?}");
    // No call went out, so the decision made instead is charged nothing.
    let last = crate::llm::last_decision(&s);
    assert_eq!(last["token_usage"]["total_tokens"], 0, "{last}");
    let ready: serde_json::Value = llm.app.get("/readyz", None).await.json().await.unwrap();
    let models = ready["model"]["models"].as_object().unwrap();
    assert_eq!(models.len(), 1, "{ready}");
    let model = models.values().next().unwrap();
    assert_eq!(model["steps"]["circuit"], "open", "{ready}");
    // The extractions alongside (a named tool) went on working: their breaker stayed closed.
    assert_eq!(model["named_tool_calls"]["circuit"], "closed", "{ready}");
    // Each empty stream was asked again unstreamed, and that failed too: the form stays.
    assert_eq!(ready["model"]["form"], "standard", "{ready}");
}

crate::both_stores!(
    a_failing_endpoint_is_left_alone_for_a_while,
    failures_inside_a_200_stream_are_named,
    a_late_extraction_never_holds_the_participant,
    a_runaway_answer_is_cut_off,
);
