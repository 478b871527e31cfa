//! The post-session extraction in `llm` mode: one model call over the whole transcript (value,
//! confidence, evidence, quote per field), its call recorded; the rules copier only as the
//! recorded fallback. On both stores.

use serde_json::{json, Value};

use crate::helpers::paths;
use crate::helpers::{json_of, last_assistant, Store, RESEARCHER_TOKEN};
use crate::llm::{last_decision, Llm};
use crate::scripted_model::{Reply, ANSWERING_MODEL};
use interview_runtime::interviewer::reworded::WORDED_BY_RUNTIME;

/// The demo study cut to its first objective, so an interview completes in three replies.
async fn start(store: Store) -> Llm {
    Llm::start_custom(
        store,
        |s| s.sweep_interval_secs = 0,
        |study| {
            study["objectives"] = json!([study["objectives"][0].clone()]);
            let fields: Vec<Value> = study["output_schema"]["fields"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|f| f["objective_id"] == "planning_habits")
                .cloned()
                .collect();
            study["output_schema"]["fields"] = json!(fields);
        },
    )
    .await
}

/// A completed interview: one question, one answer, the summary confirmed.
async fn completed(llm: &Llm) -> String {
    let (session, token, _) = llm
        .consented(vec![Reply::Realistic(
            "ask_question",
            json!({"objective_id": "planning_habits", "message": "How do you decide what to buy?", "rationale": "open"}),
        )])
        .await;
    llm.say(&session, &token, "I keep a list on the fridge that my partner and I fill in.", vec![Reply::Realistic(
        "summarize_and_confirm",
        json!({"summary": "You plan with a shared list on the fridge.", "message": "Did I get that right?", "rationale": "covered"}),
    )])
    .await;
    let s = llm
        .say(&session, &token, "yes", vec![Reply::Realistic(
            "conclude",
            json!({"reason": "all_must_objectives_covered", "message": "Thank you!", "rationale": "confirmed"}),
        )])
        .await;
    assert_eq!(s["status"], "completed", "{s}");
    // No extraction was attempted where the guards take none (after the confirmed summary).
    assert_eq!(s["errors"], json!([]));
    session
}

async fn researcher_view(llm: &Llm, session: &str) -> Value {
    json_of(
        llm.app
            .get(&paths::session(session), Some(RESEARCHER_TOKEN))
            .await,
    )
    .await
}

async fn final_event(llm: &Llm, session: &str) -> Value {
    let events: Value = serde_json::from_str(&llm.app.event_log(session).await).unwrap();
    events["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event_type"] == "extraction.completed" && e["payload"]["final"] == true)
        .cloned()
        .unwrap_or_else(|| panic!("no final extraction in {events}"))
}

// Long by design: one final extraction followed through: the model's reply queued and the job run,
// the request it was sent, the value, confidence and evidence stored, the provenance on the event,
// a second run doing nothing, then the overview's model calls, tokens and confidence summed from
// the log.
async fn the_final_extraction_is_the_model_s_over_the_whole_transcript(store: Store) {
    let llm = start(store).await;
    let session = completed(&llm).await;
    // t1 is the question, t2 the participant's answer about the list.
    llm.model.push_extraction(Reply::Realistic(
        "extract_fields",
        json!({"fields": [
            {"field_id": "planning_method", "value": "a shared list on the fridge", "confidence": 0.85,
             "evidence_turn_ids": ["t2"], "quote": "a list on the fridge"},
            {"field_id": "household_involvement", "value": "partner", "confidence": 0.7,
             "evidence_turn_ids": ["t2"], "quote": "my partner and I"}],
            "rationale": "Both fields are stated in the answer."}),
    ));
    let done = interview_runtime::jobs::extraction::run_once(&llm.app.state, chrono::Utc::now())
        .await
        .unwrap();
    assert_eq!(done, 1);
    let request = llm.model.requests().pop().unwrap();
    assert_eq!(request["tool_choice"]["function"]["name"], "extract_fields");
    let prompt = request["messages"][1]["content"].as_str().unwrap();
    assert!(prompt.contains("The interview is over"), "{prompt}");
    assert!(prompt.contains("I keep a list on the fridge"), "{prompt}");

    let s = researcher_view(&llm, &session).await;
    let method = &s["extracted_fields"]["planning_method"];
    assert_eq!(method["value"], "a shared list on the fridge", "{s}");
    assert_eq!(
        method["confidence"], 0.85,
        "the model's confidence, not the copier's"
    );
    let answer_turn = s["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| {
            t["content"]
                .as_str()
                .unwrap_or_default()
                .contains("list on the fridge")
        })
        .unwrap()["turn_id"]
        .clone();
    assert_eq!(
        method["evidence_turn_ids"],
        json!([answer_turn]),
        "t2 resolved to its turn"
    );
    let e = final_event(&llm, &session).await;
    assert_eq!(e["payload"]["decided_by"]["model"], ANSWERING_MODEL);
    assert!(e["payload"]["decided_by"]["prompt_version_id"]
        .as_str()
        .unwrap()
        .starts_with("final-"));
    // Idempotent: nothing more to do.
    assert_eq!(
        interview_runtime::jobs::extraction::run_once(&llm.app.state, chrono::Utc::now())
            .await
            .unwrap(),
        0
    );
    // The study overview counts the model's calls and tokens from the events, the final call's
    // included, and the model's confidence.
    let events: Value = serde_json::from_str(&llm.app.event_log(&session).await).unwrap();
    let (mut calls, mut prompt, mut completion) = (0, 0, 0);
    for e in events["events"].as_array().unwrap() {
        let p = &e["payload"];
        let usage = match (&p["token_usage"], &p["decided_by"]["token_usage"]) {
            (Value::Null, Value::Null) => continue,
            (Value::Null, usage) | (usage, _) => usage,
        };
        calls += i64::from(p["model"] != "rules");
        prompt += usage["prompt_tokens"].as_i64().unwrap();
        completion += usage["completion_tokens"].as_i64().unwrap();
    }
    assert!(prompt > 0 && calls >= 4, "{events}");
    let study = s["study_id"].as_str().unwrap();
    let o = json_of(
        llm.app
            .get(&paths::overview(study), Some(RESEARCHER_TOKEN))
            .await,
    )
    .await;
    let m = &o["model"];
    assert_eq!(m["sessions"], 1, "{o}");
    assert_eq!(m["calls"], calls, "{o}");
    assert_eq!(m["prompt_tokens"], prompt, "{o}");
    assert_eq!(m["completion_tokens"], completion, "{o}");
    assert_eq!(m["per_interview"]["prompt_tokens"], json!(prompt as f64));
    let method = o["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["field_id"] == "planning_method")
        .unwrap();
    assert_eq!(method["mean_confidence"], 0.85, "{o}");
}

async fn a_failed_final_call_falls_back_to_the_copier_and_is_recorded(store: Store) {
    let llm = start(store).await;
    let session = completed(&llm).await;
    llm.model.push_extraction(Reply::Garbage);
    let done = interview_runtime::jobs::extraction::run_once(&llm.app.state, chrono::Utc::now())
        .await
        .unwrap();
    assert_eq!(done, 1);
    let s = researcher_view(&llm, &session).await;
    let errors = s["errors"].as_array().unwrap();
    let failure = errors
        .iter()
        .find(|e| e["source"] == "final_extraction")
        .unwrap_or_else(|| panic!("{errors:?}"));
    assert_eq!(failure["code"], "model_garbage");
    assert!(failure["message"]
        .as_str()
        .unwrap()
        .contains("the rules copier made the final extraction"));
    let e = final_event(&llm, &session).await;
    assert!(e["payload"].get("decided_by").is_none(), "{e}");
    assert!(s["extracted_fields"]["planning_method"]["value"]
        .as_str()
        .unwrap()
        .contains("list on the fridge"));
}

/// A final extraction that does not fit the schema — an unknown field id, a model echoing a
/// schema as a text value — goes to the rules copier at once, recorded: no retry pays for it
/// again, and no such value reaches the results.
async fn a_final_extraction_that_does_not_fit_goes_to_the_copier_at_once(store: Store) {
    let llm = start(store).await;
    for fields in [
        json!([{"field_id": "no_such_field", "value": "a list", "confidence": 0.9, "evidence_turn_ids": ["t2"], "quote": "a list"}]),
        json!([{"field_id": "planning_method", "value": {"confidence": {"type": "number"}}, "confidence": 0.9, "evidence_turn_ids": ["t2"], "quote": "a list"}]),
    ] {
        let session = completed(&llm).await;
        llm.model.push_extraction(Reply::Realistic(
            "extract_fields",
            json!({"fields": fields, "rationale": "final"}),
        ));
        let calls = llm.model.calls();
        let done =
            interview_runtime::jobs::extraction::run_once(&llm.app.state, chrono::Utc::now())
                .await
                .unwrap();
        assert_eq!(done, 1, "completed in one go, not left for a retry");
        assert_eq!(llm.model.calls(), calls + 1, "one call");
        let s = researcher_view(&llm, &session).await;
        let failure = s["errors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["source"] == "final_extraction")
            .cloned()
            .unwrap_or_else(|| panic!("{s}"));
        assert_eq!(failure["code"], "model_bad_arguments", "{failure}");
        let method = &s["extracted_fields"]["planning_method"]["value"];
        assert!(
            method.as_str().unwrap().contains("list on the fridge"),
            "{method}"
        );
        let results = llm
            .app
            .get(
                &format!(
                    "/api/studies/{}/results.csv",
                    s["study_id"].as_str().unwrap()
                ),
                Some(RESEARCHER_TOKEN),
            )
            .await
            .text()
            .await
            .unwrap();
        assert!(!results.contains("\"type\""), "{results}");
    }
}

/// A summary about something never said ("Maximum number of responses allowed is 10…", seen
/// from a 135M model) is not what the participant confirms: the model's decision to summarise
/// stands, in the runtime's summary of what they answered — and a value the model extracted in
/// words the participant never said is not in that summary either.
// Long by design: two sessions in turn, each with its checks after it: a summary of things never
// said replaced by the runtime's (the extracted value kept; the words, decision and error checked),
// then a true summary whose presenting words are replaced.
async fn a_summary_of_things_never_said_gives_way_to_what_was_answered(store: Store) {
    let llm = start(store).await;
    let (session, token, _) = llm
        .consented(vec![Reply::Realistic(
            "ask_question",
            json!({"objective_id": "planning_habits", "message": "How do you decide what to buy?", "rationale": "open"}),
        )])
        .await;
    llm.model.push_extraction(Reply::Realistic(
        "extract_fields",
        json!({"fields": [{"field_id": "planning_method", "value": "Responses allowed per session",
                           "confidence": 0.9, "quote": "a list"}], "rationale": "r"}),
    ));
    let s = llm
        .say(&session, &token, "I keep a list on the fridge that my partner and I fill in.", vec![Reply::Realistic(
            "summarize_and_confirm",
            json!({"summary": "Maximum number of responses allowed is 10 (2), max-turns-reached=3.",
                   "message": "Here is your summary.", "rationale": "covered"}),
        )])
        .await;
    assert_eq!(
        s["extracted_fields"]["planning_method"]["value"], "Responses allowed per session",
        "recorded as the model extracted it: {s}"
    );
    let said = last_assistant(&s);
    assert!(
        !said.contains("Maximum")
            && !said.contains("allowed")
            && said.contains("list on the fridge"),
        "{said}"
    );
    let d = last_decision(&s);
    assert_eq!(
        d["selected_action"]["action"], "summarize_and_confirm",
        "{d}"
    );
    assert!(
        d["rationale"]
            .as_str()
            .unwrap()
            .starts_with(WORDED_BY_RUNTIME),
        "{d}"
    );
    assert!(s["errors"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["code"] == "model_text_refused"));

    // A summary of what was said stands when only the words presenting it were about
    // something else: they are the runtime's then.
    let (session, token, _) = llm
        .consented(vec![Reply::Realistic(
            "ask_question",
            json!({"objective_id": "planning_habits", "message": "How do you decide what to buy?", "rationale": "open"}),
        )])
        .await;
    let summary = "You keep a list on the fridge that you fill in with your partner.";
    let s = llm
        .say(&session, &token, "I keep a list on the fridge that my partner and I fill in.", vec![Reply::Realistic(
            "summarize_and_confirm",
            json!({"summary": summary, "message": "The summary you requested is not available.", "rationale": "covered"}),
        )])
        .await;
    let said = last_assistant(&s);
    assert!(
        said.contains(summary) && !said.contains("not available"),
        "{said}"
    );
}

/// A final extraction's text value in words the participant never said (seen from a 135M
/// model: "your-best-friend's, daily grocery shopping plan … is a game of…", type-valid, citing
/// an answer) is not what the results hold: that field is the rules copier's, recorded; the
/// model's other fields stand.
async fn a_final_value_in_words_never_said_is_the_copier_s(store: Store) {
    let llm = start(store).await;
    let session = completed(&llm).await;
    llm.model.push_extraction(Reply::Realistic(
        "extract_fields",
        json!({"fields": [
            {"field_id": "planning_method", "value": "a game of trying to make the most out of every single thing you can do",
             "confidence": 0.9, "evidence_turn_ids": ["t2"], "quote": "a list"},
            {"field_id": "household_involvement", "value": "partner", "confidence": 0.7,
             "evidence_turn_ids": ["t2"], "quote": "my partner and I"}],
            "rationale": "final"}),
    ));
    let done = interview_runtime::jobs::extraction::run_once(&llm.app.state, chrono::Utc::now())
        .await
        .unwrap();
    assert_eq!(done, 1);
    let s = researcher_view(&llm, &session).await;
    let fields = &s["extracted_fields"];
    let method = fields["planning_method"]["value"].as_str().unwrap();
    assert!(method.contains("list on the fridge"), "{s}");
    assert_eq!(fields["household_involvement"]["value"], "partner", "{s}");
    assert!(s["errors"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["source"] == "final_extraction" && e["code"] == "model_unfounded_value"));
}

crate::both_stores!(
    a_final_value_in_words_never_said_is_the_copier_s,
    a_summary_of_things_never_said_gives_way_to_what_was_answered,
    a_final_extraction_that_does_not_fit_goes_to_the_copier_at_once,
    the_final_extraction_is_the_model_s_over_the_whole_transcript,
    a_failed_final_call_falls_back_to_the_copier_and_is_recorded,
);
