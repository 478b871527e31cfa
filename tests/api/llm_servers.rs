//! Servers as they are, not as the contract would have them (issue 32): llama-cpp-python's
//! `chatml-function-calling` answers a streamed step that lets the model choose its tool with an
//! empty stream, and serves only a named tool or an unstreamed request. The runtime notices
//! once, sends its steps unstreamed from then on, and the decisions stay the model's. On both
//! stores.

use serde_json::json;

use crate::helpers::{last_assistant, Store};
use crate::llm::{last_decision, Llm};
use crate::scripted_model::{Reply, Strictness};

async fn steps_go_unstreamed_to_a_server_that_streams_only_named_tools(store: Store) {
    let llm = Llm::start(store).await;
    llm.model.strictness(Strictness::StreamsOnlyNamedTools);
    let question = "How do you usually decide what to buy each week?";
    let (session, token, s) = llm
        .consented(vec![Reply::Realistic(
            "ask_question",
            json!({"objective_id": "planning_habits", "message": question, "rationale": "open"}),
        )])
        .await;
    // The first step found the form out and was asked again: the question is the model's, and
    // nothing failed as far as anyone waiting can tell.
    assert_eq!(last_assistant(&s), question);
    assert_ne!(last_decision(&s)["model"], "rules", "{s}");
    assert_eq!(s["errors"], json!([]), "{s}");
    let probe = "Who else adds things to that list?";
    let s = llm
        .say(&session, &token, "I keep a list on the fridge.", vec![Reply::Realistic(
            "probe",
            json!({"objective_id": "planning_habits", "trigger": "missing_field", "message": probe, "rationale": "household"}),
        )])
        .await;
    assert_eq!(last_assistant(&s), probe);
    assert_ne!(last_decision(&s)["model"], "rules", "{s}");
    assert_eq!(s["errors"], json!([]), "{s}");
    // Later steps went unstreamed at once; the extraction (a named tool) stayed streamed.
    let requests = llm.model.requests();
    let steps: Vec<_> = requests
        .iter()
        .filter(|r| !r["tool_choice"].is_object())
        .collect();
    assert_eq!(steps.last().unwrap()["stream"], false);
    assert!(requests
        .iter()
        .filter(|r| r["tool_choice"].is_object())
        .all(|r| r["stream"] == true));
    let ready: serde_json::Value = llm.app.get("/readyz", None).await.json().await.unwrap();
    assert_eq!(ready["model"]["form"], "unstreamed", "{ready}");
}

/// A server that serves one request at a time (`MODEL_MAX_CONCURRENT_REQUESTS=1`): no two
/// requests ever overlap, no extraction is sent alongside a step (it could only start once the
/// step is done, and would be dropped as late), the participant's steps stay the model's, and
/// the final extraction, which reads every input, fills the results. `/readyz` says so.
async fn one_request_at_a_time_to_a_single_slot_server(store: Store) {
    let llm = Llm::start_custom(store, |s| s.model_max_concurrent_requests = Some(1), |_| {}).await;
    llm.model.pace(
        std::time::Duration::from_millis(30),
        std::time::Duration::from_millis(1),
    );
    let question = "How do you usually decide what to buy each week?";
    let (session, token, _) = llm
        .consented(vec![Reply::Realistic(
            "ask_question",
            json!({"objective_id": "planning_habits", "message": question, "rationale": "open"}),
        )])
        .await;
    let probe = "Who else adds things to that list?";
    let s = llm
        .say(&session, &token, "I keep a list on the fridge.", vec![Reply::Realistic(
            "probe",
            json!({"objective_id": "planning_habits", "trigger": "missing_field", "message": probe, "rationale": "household"}),
        )])
        .await;
    assert_eq!(last_assistant(&s), probe);
    assert_ne!(last_decision(&s)["model"], "rules", "{s}");
    assert_eq!(s["errors"], json!([]), "{s}");
    let requests = llm.model.requests();
    assert!(
        requests.iter().all(|r| !r["tool_choice"].is_object()),
        "no extraction went alongside a step: {requests:?}"
    );
    // With no extraction alongside, the step is told the next step the rules would take.
    let user = requests.last().unwrap()["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        user.contains("\n\nWhat the runtime expects next: "),
        "{user}"
    );
    assert!(
        user.trim_end().ends_with("Now call exactly one tool."),
        "{user}"
    );
    let timeline = llm.model.timeline();
    for pair in timeline.windows(2) {
        let ended = pair[0].ended.expect("each call ended");
        assert!(
            ended <= pair[1].arrived,
            "two requests overlapped: {timeline:?}"
        );
    }
    let ready: serde_json::Value = llm.app.get("/readyz", None).await.json().await.unwrap();
    assert_eq!(ready["model"]["max_concurrent_requests"], 1, "{ready}");
}

/// When the model's extraction fails, the runtime copies the answer as said; the next step's
/// prompt marks that copy as a placeholder, not as a value known at 0.90 that the model would
/// trust and echo (issue 32; seen with SmolLM2-135M, which copied such values as its question).
async fn a_copied_answer_is_a_placeholder_in_the_prompt(store: Store) {
    // Concrete enough that the rules extract it rather than probe.
    const ANSWER: &str = "Every Sunday evening my partner and I pick the meals for the week and I write the list on my phone.";
    let llm = Llm::start_custom(store, |s| s.model_max_concurrent_requests = Some(1), |_| {}).await;
    let (session, token, _) = llm
        .consented(vec![Reply::Realistic(
            "ask_question",
            json!({"objective_id": "planning_habits", "message": "How do you plan your shopping?", "rationale": "open"}),
        )])
        .await;
    let probe = "Who else adds things to that list?";
    let s = llm
        .say(&session, &token, ANSWER, vec![
            Reply::Garbage,
            Reply::Realistic(
                "probe",
                json!({"objective_id": "planning_habits", "trigger": "missing_field", "message": probe, "rationale": "household"}),
            ),
        ])
        .await;
    assert_eq!(last_assistant(&s), probe, "{s}");
    let requests = llm.model.requests();
    let user = requests.last().unwrap()["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        user.contains(
            &format!("- planning_method = \"{ANSWER}\" (a placeholder: the answer as said, not extracted yet)")
        ),
        "{user}"
    );
}

crate::both_stores!(
    steps_go_unstreamed_to_a_server_that_streams_only_named_tools,
    one_request_at_a_time_to_a_single_slot_server,
    a_copied_answer_is_a_placeholder_in_the_prompt
);
