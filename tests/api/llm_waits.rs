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

crate::both_stores!(a_late_extraction_never_holds_the_participant);
