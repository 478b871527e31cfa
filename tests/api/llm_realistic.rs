//! The `llm` policy against the scripted model's realistic side: arguments in the schema's order
//! and in odd orders, token-sized fragments with a time to first token, internal talk, stalls
//! mid-message, and the quirks of the OpenAI-compatible servers people run. On both stores.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::{last_assistant, Store};
use crate::llm::{last_decision, Llm, OPENING};
use crate::scripted_model::{schema_order, Reply, Strictness, UsageReport, ANSWERING_MODEL};
use crate::sse::{Frame, SseClient};

const QUESTION: &str = "Thanks for joining! How do you usually work out what to buy each week?";

fn ask(message: &str) -> Value {
    json!({"objective_id": "planning_habits", "message": message, "rationale": "Open the first must objective."})
}

/// A session with its stream open, up to the pending consent.
async fn opened(llm: &Llm) -> (String, String, SseClient) {
    let (session, token) = llm.app.create_session("llm-demo").await;
    let url = llm
        .app
        .url(&format!("/api/sessions/{session}/stream?token={token}"));
    let sse = SseClient::new(llm.app.client.get(url).send().await.unwrap());
    (session, token, sse)
}

/// The frames up to the assistant's completed utterance.
async fn until_said(sse: &mut SseClient) -> Vec<Frame> {
    sse.until(Duration::from_secs(10), |f| {
        f.event == "message.completed" && f.data["role"] == "assistant"
    })
    .await
}

/// The latest request for a step (several tools offered; an extraction offers one).
fn last_step_request(llm: &Llm) -> Value {
    llm.model
        .requests()
        .into_iter()
        .rev()
        .find(|r| r["tools"].as_array().unwrap().len() > 1)
        .unwrap()
}

fn deltas(frames: &[Frame]) -> Vec<String> {
    frames
        .iter()
        .filter(|f| f.event == "message.delta")
        .map(|f| f.data["content"].as_str().unwrap().to_string())
        .collect()
}

/// Schema-order fragments at a hosted model's pace: the schemas list each tool's target before
/// its text, and the words reach the participant piece by piece as they are generated.
async fn words_stream_in_the_schema_s_order(store: Store) {
    let llm = Llm::start(store).await;
    llm.model
        .pace(Duration::from_millis(150), Duration::from_millis(15));
    let (session, token, mut sse) = opened(&llm).await;
    let s = llm
        .give_consent(
            &session,
            &token,
            vec![Reply::Realistic("ask_question", ask(QUESTION))],
        )
        .await;
    assert_eq!(last_assistant(&s), QUESTION);
    let raw = llm.model.raw_requests().pop().unwrap();
    assert_eq!(
        schema_order(&raw, "ask_question"),
        ["objective_id", "message", "participant_input", "rationale"]
    );
    // The opening step offers its question alone (`offered.rs`); the other tools' order is
    // checked on the schemas themselves (`src/llm/schemas.rs`).
    let frames = until_said(&mut sse).await;
    let pieces = deltas(&frames);
    // Token-sized pieces (1 to 6 characters, a few held back at most), not one late block.
    assert!(pieces.len() >= QUESTION.len() / 8, "{pieces:?}");
    assert_eq!(pieces.concat(), QUESTION);
    let d = last_decision(&s);
    assert_eq!(d["model"], ANSWERING_MODEL);
    assert_eq!(d["token_usage"]["total_tokens"], 150);
}

/// Words first, target after: they still stream, judged for the objective the session expects;
/// an objective named afterwards that the guard would refuse does not change what was said.
async fn words_stream_whatever_the_argument_order(store: Store) {
    let llm = Llm::start(store).await;
    let (session, token, mut sse) = opened(&llm).await;
    let s = llm
        .give_consent(
            &session,
            &token,
            vec![Reply::Ordered(
                "ask_question",
                vec![
                    ("rationale", json!("open")),
                    ("message", json!(QUESTION)),
                    ("objective_id", json!("planning_habits")),
                ],
            )],
        )
        .await;
    let pieces = deltas(&until_said(&mut sse).await);
    assert!(pieces.len() > 3, "{pieces:?}");
    assert_eq!(pieces.concat(), QUESTION);
    assert_eq!(
        last_decision(&s)["selected_action"],
        json!({"action": "ask_question", "objective_id": "planning_habits"})
    );

    // A probe whose words come before it names an objective never asked (which the guard would
    // turn into that objective's opening question): the words shown stand, recorded as a probe
    // of the objective under discussion.
    let probe = "What do you mean by winging it?";
    let s = llm
        .say(
            &session,
            &token,
            "I kind of wing it.",
            vec![Reply::Ordered(
                "probe",
                vec![
                    ("message", json!(probe)),
                    ("trigger", json!("vague")),
                    ("objective_id", json!("pain_points")),
                    ("rationale", json!("vague answer")),
                ],
            )],
        )
        .await;
    assert_eq!(last_assistant(&s), probe);
    let d = last_decision(&s);
    assert_eq!(d["selected_action"]["action"], "probe", "{d}");
    assert_eq!(
        d["selected_action"]["objective_id"], "planning_habits",
        "{d}"
    );
    assert!(d["rationale"]
        .as_str()
        .unwrap()
        .contains("before the model named its objective"));
    let pieces = deltas(&until_said(&mut sse).await);
    assert_eq!(pieces.concat(), probe);
}

/// A decision the model made whose words were refused, carried out in the runtime's words.
fn worded_by_the_runtime(decision: &Value) -> bool {
    decision["model"] != "rules"
        && decision["rationale"].as_str().is_some_and(|r| {
            r.starts_with(interview_runtime::interviewer::reworded::WORDED_BY_RUNTIME)
        })
}

/// "As an AI agent I will now call the ask_question tool: {…}" never shows; a bad turn later
/// in a message replaces the part shown; either way the participant reads a whole question.
// Long by design: one session through five kinds of bad model text in turn, each with its checks
// after it: talk about a tool in the first question, a tool name late in a probe, a text that
// starts as a path, reasoning before the call, and an asked objective asked again in refused words.
async fn internal_talk_never_reaches_the_participant(store: Store) {
    let llm = Llm::start(store).await;
    let (session, token, mut sse) = opened(&llm).await;
    let bad = r#"As an AI agent I will now call the ask_question tool: {"objective_id": "planning_habits"}"#;
    let s = llm
        .give_consent(
            &session,
            &token,
            vec![Reply::Realistic("ask_question", ask(bad))],
        )
        .await;
    let frames = until_said(&mut sse).await;
    // At most the harmless start of the sentence showed (or none of it: the runtime's own
    // instructions say "as an AI", so those words are held from the start and the replacement
    // streams instead); the whole of it is replaced.
    let shown = deltas(&frames).concat();
    assert!(
        (bad.starts_with(&shown) || shown == OPENING) && !shown.contains("AI"),
        "{shown:?}"
    );
    assert_eq!(frames.last().unwrap().data["content"], OPENING);
    assert_eq!(last_assistant(&s), OPENING);
    let error = &s["errors"][0];
    assert_eq!(
        (error["source"].as_str(), error["code"].as_str()),
        (Some("guard"), Some("model_text_refused"))
    );
    // The decision was a fair one (the first objective's question): it stands, in the runtime's
    // words, recorded as the model's with why its words were not said.
    let d = last_decision(&s);
    assert_eq!(
        d["selected_action"],
        json!({"action": "ask_question", "objective_id": "planning_habits"})
    );
    assert!(worded_by_the_runtime(&d), "{d}");

    let late = "Thanks, that helps. Next I will call extract_fields and then ask more.";
    let s = llm
        .say(&session, &token, "I use a list on my phone.", vec![Reply::Realistic(
            "probe",
            json!({"objective_id": "planning_habits", "trigger": "vague", "message": late, "rationale": "r"}),
        )])
        .await;
    let frames = until_said(&mut sse).await;
    let shown = deltas(&frames).concat();
    assert!(
        late.starts_with(&shown) && !shown.contains("extract_"),
        "{shown:?}"
    );
    let said = frames.last().unwrap().data["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(said, last_assistant(&s));
    assert!(
        !said.contains("extract_fields") && !said.is_empty(),
        "{said}"
    );

    // A text that begins as no sentence does ("./pickup.json: …", seen from a 135M model) is
    // held from its first character, not shown and then replaced.
    let path = "./pickup.json: What do you plan first?";
    let refusals = |s: &serde_json::Value| {
        s["errors"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["code"] == "model_text_refused")
            .count()
    };
    let before = refusals(&s);
    let s = llm
        .say(&session, &token, "Mostly on Sundays.", vec![Reply::Realistic(
            "probe",
            json!({"objective_id": "planning_habits", "trigger": "vague", "message": path, "rationale": "r"}),
        )])
        .await;
    let frames = until_said(&mut sse).await;
    assert!(!deltas(&frames).concat().contains("pickup"), "{frames:?}");
    assert!(!last_assistant(&s).contains("pickup"));
    assert_eq!(refusals(&s), before + 1);
    // The probe it decided on is asked, in the runtime's words for a vague answer.
    let d = last_decision(&s);
    assert_eq!(d["selected_action"]["action"], "probe", "{d}");
    assert_eq!(d["selected_action"]["trigger"], "vague", "{d}");
    assert!(worded_by_the_runtime(&d), "{d}");
    assert!(last_assistant(&s).ends_with('?'), "{s}");

    // Reasoning text before the call is never shown.
    let s = llm
        .say(&session, &token, "Mostly me.", vec![Reply::Thinking(
            "the participant is terse; probe",
            "probe",
            json!({"objective_id": "planning_habits", "trigger": "vague", "message": "Could you give me an example?", "rationale": "terse"}),
        )])
        .await;
    assert_eq!(last_assistant(&s), "Could you give me an example?");
    let frames = until_said(&mut sse).await;
    assert!(!deltas(&frames).concat().contains("think"));

    // Asking an objective already asked, in words that are refused, is no decision kept: the
    // rules' step is taken (a model that lost the thread asks its first question again).
    let s = llm
        .say(
            &session,
            &token,
            "That is all about it.",
            vec![Reply::Realistic(
                "ask_question",
                ask("./again: How do you usually plan your groceries?"),
            )],
        )
        .await;
    let d = last_decision(&s);
    assert_eq!(d["model"], "rules", "{d}");
    assert!(!last_assistant(&s).contains("again"));
}

/// A stall mid-message: the participant, who waited (2 s of silence here), is told in plain
/// words, and the broken-off words are replaced by a whole question; nothing truncated stays in
/// the transcript.
async fn a_stall_mid_message_is_repaired_and_explained(store: Store) {
    let llm = Llm::start_custom(store, |s| s.model_idle_timeout_secs = 2, |_| {}).await;
    let (session, token, mut sse) = opened(&llm).await;
    let message = "What is the most frustrating part of planning your groceries?";
    let args = ask(message);
    let cut =
        r#"{"objective_id": "planning_habits", "message": "What is the most frustrating part o"#
            .len();
    let s = llm
        .give_consent(
            &session,
            &token,
            vec![Reply::StallAfter("ask_question", args, cut)],
        )
        .await;
    let frames = until_said(&mut sse).await;
    let shown = deltas(&frames).concat();
    assert!(
        shown.starts_with("What is the most") && shown.len() < message.len(),
        "{shown:?}"
    );
    let error = frames
        .iter()
        .find(|f| f.event == "error")
        .expect("an error event");
    assert_eq!(
        error.data,
        json!({"type": "error", "message": "Sorry for the wait. Let's carry on."})
    );
    assert_eq!(frames.last().unwrap().data["content"], OPENING);
    assert_eq!(last_assistant(&s), OPENING);
    assert_eq!(s["errors"][0]["code"], "model_stalled");
    let transcript = s["transcript"].to_string();
    assert!(!transcript.contains("frustrating part o\""), "{transcript}");
}

/// vLLM, Ollama, LiteLLM and llama.cpp differ from OpenAI: each difference still gives a
/// decision, logged as it happened.
async fn the_quirks_of_real_endpoints_are_absorbed(store: Store) {
    // Whole arguments in one chunk; usage with the finish reason.
    let llm = Llm::start(store).await;
    llm.model.usage(UsageReport::WithFinish);
    let (_, _, s) = llm
        .consented(vec![Reply::Whole("ask_question", ask(QUESTION))])
        .await;
    assert_eq!(last_assistant(&s), QUESTION);
    assert_eq!(last_decision(&s)["token_usage"]["total_tokens"], 150);

    // No usage at all: tokens are estimated (four characters a token), never zero.
    llm.model.usage(UsageReport::Never);
    let (_, _, s) = llm
        .consented(vec![Reply::Realistic("ask_question", ask(QUESTION))])
        .await;
    let usage = &last_decision(&s)["token_usage"];
    // Over the whole request — system prompt, tools, everything sent — not the transcript only
    // (which undercounted five times over, so budgets let through five times their limit).
    let sent = llm.model.requests().last().unwrap().to_string().len() as u64;
    let estimated = usage["prompt_tokens"].as_u64().unwrap();
    assert!(
        estimated * 4 >= sent * 9 / 10,
        "{estimated} tokens for {sent} characters sent"
    );
    assert!(usage["completion_tokens"].as_u64().unwrap() > 10, "{usage}");

    for strictness in [
        Strictness::NoRequiredToolChoice,
        Strictness::UnknownParameters,
    ] {
        let llm = Llm::start(store).await;
        llm.model.strictness(strictness);
        let (_, _, s) = llm
            .consented(vec![Reply::Realistic("ask_question", ask(QUESTION))])
            .await;
        assert_eq!(last_assistant(&s), QUESTION, "{strictness:?}");
        assert_eq!(s["errors"], json!([]), "{strictness:?}");
        let (_, _, _) = llm
            .consented(vec![Reply::Realistic("ask_question", ask(QUESTION))])
            .await;
        // Every request the endpoint took is in the compatible form, with the instruction.
        let requests = llm.model.requests();
        assert_eq!(requests.len(), 2, "{strictness:?}");
        for r in requests {
            assert_eq!(r["tool_choice"], "auto");
            assert!(r.get("parallel_tool_calls").is_none() && r.get("stream_options").is_none());
            assert!(r["max_tokens"].is_u64());
            assert!(r["messages"][0]["content"]
                .as_str()
                .unwrap()
                .contains("calling exactly one of the tools"));
        }
        assert_eq!(llm.model.calls(), 3, "refused once, then compatible");
    }
}

/// A model that wants to call two tools although asked not to.
async fn parallel_calls_fall_back(store: Store) {
    let llm = Llm::start(store).await;
    let (_, _, s) = llm.consented(vec![Reply::TwoTools]).await;
    assert_eq!(last_assistant(&s), OPENING);
    assert_eq!(s["errors"][0]["code"], "model_several_tools");
    let res = llm.app.get("/healthz", None).await;
    assert_eq!(res.status(), StatusCode::OK);
}

/// After a participant's answer, its extraction and the next step are asked for at once: the two
/// requests overlap, so the participant waits on one model round trip; the extraction is still
/// its own decision, logged before the step it went alongside.
async fn one_model_round_trip_between_an_answer_and_the_next_question(store: Store) {
    let llm = Llm::start(store).await;
    llm.model
        .pace(Duration::from_millis(300), Duration::from_millis(5));
    let (session, token, _) = llm
        .consented(vec![Reply::Realistic("ask_question", ask(QUESTION))])
        .await;
    llm.model.push_extraction(Reply::Realistic(
        "extract_fields",
        json!({"fields": [{"field_id": "planning_method", "value": "a list on the fridge",
                "confidence": 0.8, "evidence_turn_ids": [], "quote": "a list on the fridge"}],
               "rationale": "They named their method."}),
    ));
    let probe = "Who else adds things to that list?";
    let s = llm
        .say(&session, &token, "I keep a list on the fridge.", vec![Reply::Realistic(
            "probe",
            json!({"objective_id": "planning_habits", "trigger": "missing_field", "message": probe, "rationale": "household"}),
        )])
        .await;
    assert_eq!(last_assistant(&s), probe);
    let calls = llm.model.timeline();
    let (a, b) = (calls[calls.len() - 2], calls[calls.len() - 1]);
    assert_ne!(a.extraction, b.extraction, "{calls:?}");
    let overlap = a.arrived < b.ended.unwrap() && b.arrived < a.ended.unwrap();
    assert!(
        overlap,
        "the two requests ran one after the other: {calls:?}"
    );
    let log = s["decision_log"].as_array().unwrap();
    let extraction = &log[log.len() - 2];
    assert_eq!(extraction["selected_action"]["action"], "extract_fields");
    assert_eq!(extraction["model"], ANSWERING_MODEL);
    assert_eq!(extraction["phase"], "EXTRACT");
    assert_eq!(log[log.len() - 1]["selected_action"]["action"], "probe");
    assert_eq!(log[log.len() - 1]["phase"], "NEXT_TOPIC_OR_PROBE");
    let fields = s["extracted_fields"].to_string();
    assert!(fields.contains("a list on the fridge"), "{fields}");
    // The step's request offered no extraction tool (it runs alongside).
    let step = last_step_request(&llm);
    assert!(!step["tools"].to_string().contains("extract_fields"));
}

/// What the model is shown: interviewing craft, the study's threshold, a widget's question and
/// the answer in words (not "Submitted 4"), its own last decision, turns and minutes used, short
/// turn aliases, what the runtime expects next; the fixed part first, what changes last.
// Long by design: one session driven to a Likert answer (two questions, the widget, its answer),
// then the next step's prompt read in order: craft, threshold and widget in the system message, the
// last decision quoted in the user message, and the order of what changes each turn.
async fn the_prompt_carries_what_an_interviewer_needs(store: Store) {
    let llm = Llm::start(store).await;
    let (session, token, _) = llm
        .consented(vec![Reply::Realistic("ask_question", ask(QUESTION))])
        .await;
    llm.say(&session, &token, "A list on the fridge.", vec![Reply::Realistic(
        "ask_question",
        json!({"objective_id": "pain_points", "message": "What frustrates you most?", "rationale": "next must objective"}),
    )])
    .await;
    let s = llm
        .say(
            &session,
            &token,
            "Food going off before we eat it.",
            vec![Reply::Realistic(
                "render_interaction",
                json!({"objective_id": "pain_points", "rationale": "baseline satisfaction"}),
            )],
        )
        .await;
    let widget = s["pending_interaction"].clone();
    assert_eq!(widget["type"], "likert", "{s}");
    llm.model.push(Reply::Realistic(
        "ask_question",
        json!({"objective_id": "tool_preferences", "message": "Which kind of help would you use first?", "rationale": "next"}),
    ));
    llm.app.answer(&session, &token, &s, json!(4)).await;
    llm.run(&session).await;
    let step = last_step_request(&llm);
    let system = step["messages"][0]["content"].as_str().unwrap();
    let user = step["messages"][1]["content"].as_str().unwrap();
    for craft in [
        "never lead",
        "own words",
        "concrete, recent examples",
        "different angle",
        "offer to skip",
    ] {
        assert!(system.contains(craft), "{craft}: {system}");
    }
    assert!(system.contains("confidence 0.70"), "{system}");
    assert!(
        system.contains(
            "Widget: likert \"How satisfied are you with the way you plan groceries today?\""
        ),
        "{system}"
    );
    // The last decision's rationale (a model may quote the participant in it) is quoted data
    // in the user message, never in the system message (issue 30).
    assert!(
        user.contains(
            "- your last decision: render_interaction(pain_points), rationale \"baseline satisfaction"
        ),
        "{user}"
    );
    assert!(!system.contains("baseline satisfaction\""), "{system}");
    // What changes every turn ends the user message (a prompt cache keeps the rest): the
    // conversation, then what is known, where the interview stands, and what comes next.
    assert!(!system.contains("minutes used"), "{system}");
    let at = |needle: &str| {
        user.find(needle)
            .unwrap_or_else(|| panic!("{needle}: {user}"))
    };
    assert!(at("t5 participant") < at("- your last decision"));
    assert!(at("- your last decision") < at("minutes used"));
    // The input is being extracted alongside, so no next step is named here (the rules would
    // name the extraction, which this step does not offer); the instruction is the last line.
    assert!(!user.contains("What the runtime expects next"), "{user}");
    assert!(at("minutes used") < at("Now call exactly one tool."));
    assert!(
        user.trim_end().ends_with("Now call exactly one tool."),
        "{user}"
    );
    assert!(
        user.contains(r#"t5 participant: "(widget \"How satisfied are you with the way you plan groceries today?\") Satisfied (4 of 5)""#),
        "{user}"
    );
    assert!(
        user.contains(r#"t2 participant: "A list on the fridge.""#),
        "{user}"
    );
    assert!(!user.contains(&session), "no long ids in the conversation");
}

crate::both_stores!(
    the_prompt_carries_what_an_interviewer_needs,
    one_model_round_trip_between_an_answer_and_the_next_question,
    words_stream_in_the_schema_s_order,
    words_stream_whatever_the_argument_order,
    internal_talk_never_reaches_the_participant,
    a_stall_mid_message_is_repaired_and_explained,
    the_quirks_of_real_endpoints_are_absorbed,
    parallel_calls_fall_back,
);
