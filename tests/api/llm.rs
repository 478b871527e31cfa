//! The `llm` policy against the scripted OpenAI-compatible server: the request contract,
//! streaming, the guards rewriting bad decisions, and every way the model can fail.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::paths;
use crate::helpers::{json_of, last_assistant, Store, TestApp, RESEARCHER_TOKEN};
use crate::scripted_model::{Reply, ScriptedModel};
use crate::sse::SseClient;

pub(crate) const OPENING: &str = "To start, could you walk me through how you usually decide what groceries to buy for the week?";

pub(crate) struct Llm {
    pub app: TestApp,
    pub model: ScriptedModel,
}

impl Llm {
    pub(crate) async fn start(store: Store) -> Self {
        Self::start_with_key(store, None).await
    }

    pub(crate) async fn start_with_key(store: Store, key: Option<&str>) -> Self {
        let key = key.map(|k| interview_runtime::settings::Secret(k.to_string()));
        Self::start_custom(store, move |s| s.openai_api_key = key, |_| {}).await
    }

    /// The demo study in llm mode as `llm-demo`, with these changes to the settings and study.
    pub(crate) async fn start_custom(
        store: Store,
        settings: impl FnOnce(&mut interview_runtime::settings::Settings) + Send + 'static,
        edit_study: impl FnOnce(&mut Value),
    ) -> Self {
        let model = ScriptedModel::start().await;
        let url = model.url.clone();
        let app = TestApp::spawn_with(store, move |s| {
            s.openai_base_url = Some(url);
            s.model_idle_timeout_secs = 1;
            settings(s);
        })
        .await;
        let mut study: Value =
            serde_json::from_str(include_str!("../../examples/demo-study.json")).unwrap();
        study["public_slug"] = json!("llm-demo");
        study["agent"]["mode"] = json!("llm");
        study["model"]["timeout_seconds"] = json!(5);
        edit_study(&mut study);
        app.publish_study(&study).await;
        Self { app, model }
    }

    /// A session past consent; the model's `replies` are queued before consent is given (the
    /// interviewer then asks at once) and the first question's turn is settled.
    pub(crate) async fn consented(&self, replies: Vec<Reply>) -> (String, String, Value) {
        let (session, token) = self.app.create_session("llm-demo").await;
        let s = self.give_consent(&session, &token, replies).await;
        (session, token, s)
    }

    /// Accepts the pending consent with the model's `replies` queued; the turn is settled.
    pub(crate) async fn give_consent(
        &self,
        session: &str,
        token: &str,
        replies: Vec<Reply>,
    ) -> Value {
        let asked = self.model.requests().len();
        let s = self.run(session).await;
        let id = s["pending_interaction"]["interaction_id"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(
            self.model.requests().len(),
            asked,
            "consent is handled without the model"
        );
        for reply in replies {
            self.model.push(reply);
        }
        let res = self
            .app
            .post(
                &paths::submit(session, &id),
                Some(token),
                &json!({"status": "submitted", "value": {"accepted": true}}),
            )
            .await;
        assert_eq!(res.status(), StatusCode::OK);
        self.run(session).await
    }

    /// Waits for the interviewer's turn to end; the session as a researcher reads it.
    pub(crate) async fn run(&self, session: &str) -> Value {
        self.app.run(session).await
    }

    /// The participant says `text` with the model's `replies` queued; the turn is settled.
    pub(crate) async fn say(
        &self,
        session: &str,
        token: &str,
        text: &str,
        replies: Vec<Reply>,
    ) -> Value {
        for reply in replies {
            self.model.push(reply);
        }
        assert_eq!(
            self.app.post_message(session, token, text).await.status(),
            StatusCode::ACCEPTED
        );
        self.run(session).await
    }
}

pub(crate) fn last_decision(s: &Value) -> Value {
    s["decision_log"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone()
}

// Long by design: one model decision checked from every side in turn: what the participant is
// asked, the decision logged with its provenance, the request the model was sent (its settings,
// tools and prompt), then the stream that showed the message in pieces.
async fn a_model_decision_streams_and_is_logged_with_its_provenance(store: Store) {
    let llm = Llm::start(store).await;
    let message = "Hi, thanks for joining! How do you usually work out what to buy each week?";
    let (session, token) = llm.app.create_session("llm-demo").await;
    let url = llm
        .app
        .url(&format!("/api/sessions/{session}/stream?token={token}"));
    let mut sse = SseClient::new(llm.app.client.get(url).send().await.unwrap());
    let s = llm
        .give_consent(&session, &token, vec![Reply::RawArgs(
            "ask_question",
            r#"{"objective_id": "planning_habits", "message": "Hi, thanks for joining! How do you usually work out what to buy each week?", "rationale": "Open the first must objective."}"#,
        )])
        .await;
    assert_eq!(s["status"], "waiting_for_user");
    assert_eq!(last_assistant(&s), message);
    let d = last_decision(&s);
    assert_eq!(
        d["selected_action"],
        json!({"action": "ask_question", "objective_id": "planning_habits"})
    );
    assert_eq!(d["proposed_action"], Value::Null);
    assert_eq!(d["rationale"], "Open the first must objective.");
    // The model that answered, as the endpoint named it (not the configured name).
    assert_eq!(d["model"], crate::scripted_model::ANSWERING_MODEL);
    assert!(d["prompt_version_id"].as_str().unwrap().starts_with("llm-"));
    assert_eq!(d["token_usage"]["total_tokens"], 150);

    // The request follows the contract.
    let request = llm.model.requests().pop().unwrap();
    assert_eq!(request["tool_choice"], "required");
    assert_eq!(request["parallel_tool_calls"], false);
    assert_eq!(request["stream"], true);
    assert_eq!(request["model"], "gpt-4o-mini");
    let tools: Vec<&str> = request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    // Only what the guards would carry out as proposed: the first objective's question (nothing
    // is asked yet to probe, show a widget for, sum up or conclude; nothing said to extract).
    assert_eq!(tools, ["ask_question"]);
    assert!(request["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("planning_habits"));

    // The participant saw the message arrive in pieces, before it was completed.
    let frames = sse
        .until(Duration::from_secs(5), |f| {
            f.event == "message.completed" && f.data["content"] == message
        })
        .await;
    let deltas: Vec<&str> = frames
        .iter()
        .filter(|f| f.event == "message.delta")
        .map(|f| f.data["content"].as_str().unwrap())
        .collect();
    assert!(deltas.len() > 1, "{deltas:?}");
    assert_eq!(deltas.concat(), message);
}

async fn a_widget_opening_an_objective_is_rewritten_into_its_question(store: Store) {
    let llm = Llm::start(store).await;
    let (_, _, s) = llm
        .consented(vec![Reply::Tool(
            "render_interaction",
            json!({"objective_id": "pain_points", "rationale": "ask for satisfaction"}),
        )])
        .await;
    let d = last_decision(&s);
    assert_eq!(
        d["selected_action"],
        json!({"action": "ask_question", "objective_id": "pain_points"})
    );
    assert_eq!(d["proposed_action"]["action"], "render_interaction");
    // The log says who decided: the runtime rewrote, the model's reason is kept as its own.
    assert_eq!(
        d["rationale"],
        "The runtime's rules carried out ask_question(pain_points) instead of the proposed \
         render_interaction(pain_points). The proposal's rationale: ask for satisfaction"
    );
    assert_eq!(d["study_prompt_version"], "demo-v1");
    assert_eq!(
        last_assistant(&s),
        "What is the most frustrating part of planning or buying groceries for you?"
    );
    assert_eq!(s["pending_interaction"], Value::Null);
}

async fn a_fourth_probe_is_refused_by_the_cap(store: Store) {
    let llm = Llm::start(store).await;
    let (session, token, _) = llm
        .consented(vec![Reply::Tool("ask_question", json!({"objective_id": "planning_habits", "message": "How do you plan?", "rationale": "open"}))])
        .await;
    for i in 0..4 {
        let mut replies = vec![Reply::Tool(
            "probe",
            json!({"objective_id": "planning_habits", "trigger": "vague", "message": format!("Could you say more ({i})?"), "rationale": "vague"}),
        )];
        if i == 3 {
            // The capped probe becomes an extraction; the run goes on to the next decision.
            replies.push(Reply::Tool("ask_question", json!({"objective_id": "pain_points", "message": "What frustrates you?", "rationale": "next"})));
        }
        llm.say(&session, &token, "not sure", replies).await;
    }
    let s = json_of(
        llm.app
            .get(&paths::session(&session), Some(RESEARCHER_TOKEN))
            .await,
    )
    .await;
    let log = s["decision_log"].as_array().unwrap();
    let probes = log
        .iter()
        .filter(|d| d["selected_action"]["action"] == "probe")
        .count();
    assert_eq!(probes, 3);
    let capped = log
        .iter()
        .find(|d| d["proposed_action"]["action"] == "probe")
        .expect("the fourth probe was rewritten");
    assert_eq!(capped["selected_action"]["action"], "extract_fields");
    assert_eq!(last_assistant(&s), "What frustrates you?");
}

async fn every_model_failure_falls_back_and_is_recorded(store: Store) {
    let llm = Llm::start(store).await;
    let cases = [
        (
            Reply::RawArgs(
                "ask_question",
                r#"{"objective_id": planning_habits, "rationale": "r"}"#,
            ),
            "model_bad_arguments",
        ),
        (Reply::TwoTools, "model_several_tools"),
        (Reply::NoTool("Hello there!"), "model_no_tool"),
        (
            Reply::Tool("dance", json!({"rationale": "why not"})),
            "model_bad_arguments",
        ),
        (Reply::Status(500), "model_http_error"),
        (Reply::RateLimited, "model_http_error"),
        (Reply::Stall, "model_stalled"),
        (Reply::Garbage, "model_garbage"),
    ];
    for (reply, code) in cases {
        let (_, _, s) = llm.consented(vec![reply.clone()]).await;
        assert_eq!(s["status"], "waiting_for_user", "{reply:?}");
        assert_eq!(
            last_assistant(&s),
            OPENING,
            "{reply:?}: the participant gets a sensible next step"
        );
        let errors = s["errors"].as_array().unwrap();
        assert_eq!(errors.len(), 1, "{reply:?}: {errors:?}");
        assert_eq!(errors[0]["source"], "model");
        assert_eq!(errors[0]["code"], code, "{reply:?}");
        let d = last_decision(&s);
        assert!(
            d["rationale"]
                .as_str()
                .unwrap()
                .starts_with("Fallback after a model failure"),
            "{d}"
        );
        // The rules interviewer decided; the log says so.
        assert_eq!(d["model"], "rules", "{d}");
    }
}

/// A provider whose error echoes the key: what is recorded (and logged) is the status, the
/// error code and a short message with the key and anything token-shaped cut out.
async fn an_echoed_key_never_reaches_the_event_log(store: Store) {
    const KEY: &str = "sk-test-0123456789abcdefSECRETKEY";
    let llm = Llm::start_with_key(store, Some(KEY)).await;
    let (session, _, s) = llm.consented(vec![Reply::EchoKey(401)]).await;
    assert_eq!(s["status"], "waiting_for_user");
    assert_eq!(s["errors"][0]["code"], "model_http_error");
    let message = s["errors"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("invalid_api_key") || message.contains("Incorrect API key"),
        "{message}"
    );
    assert!(message.chars().count() <= 240, "{message}");
    let events = llm.app.event_log(&session).await;
    assert!(events.contains("error.recorded"));
    for part in [KEY, "0123456789abcdefSECRETKEY", "SECRETKEY"] {
        assert!(!events.contains(part), "{part} is in the event log");
    }
}

/// A call that drops after its whole message was shown: the message stands, once it passes
/// what any whole message must. One that drops mid-message: the broken-off words are replaced
/// by a whole question.
async fn a_dropped_call_never_leaves_a_broken_off_question(store: Store) {
    let llm = Llm::start(store).await;
    let raw = r#"{"objective_id": "planning_habits", "message": "Welcome! When did you last plan your groceries?", "rationale": "open"}"#;
    let whole = raw.find(", \"rationale\"").unwrap();
    let (_, _, s) = llm
        .consented(vec![Reply::Drop("ask_question", raw, whole + 3)])
        .await;
    assert_eq!(
        last_assistant(&s),
        "Welcome! When did you last plan your groceries?"
    );
    assert_eq!(s["errors"][0]["code"], "model_stream_dropped");
    assert!(last_decision(&s)["rationale"]
        .as_str()
        .unwrap()
        .contains("the message stands"));

    // Shown whole, but no question (a question ends with its mark): replaced after all.
    let statement = r#"{"objective_id": "planning_habits", "message": "Welcome! Tell me about the last time you planned your groceries.", "rationale": "open"}"#;
    let whole = statement.find(", \"rationale\"").unwrap();
    let (_, _, s) = llm
        .consented(vec![Reply::Drop("ask_question", statement, whole + 3)])
        .await;
    assert_eq!(last_assistant(&s), OPENING);
    assert!(last_decision(&s)["rationale"]
        .as_str()
        .unwrap()
        .contains("a refused text"));

    let (_, _, s) = llm
        .consented(vec![Reply::Drop("ask_question", raw, 70)])
        .await;
    assert_eq!(last_assistant(&s), OPENING, "re-asked whole");
    assert_eq!(s["errors"][0]["code"], "model_stream_dropped");
    let d = last_decision(&s);
    assert!(
        d["rationale"]
            .as_str()
            .unwrap()
            .contains("already shown were replaced"),
        "{d}"
    );
    assert_eq!(d["model"], "rules");
    assert_eq!(s["status"], "waiting_for_user");
}

/// Publishes an llm study screening on `shops` (yes/no, disqualified by `false`) and, when
/// `open`, on `household` (free text no rule covers).
async fn publish_screened(llm: &Llm, slug: &str, open: bool) {
    let mut study: Value =
        serde_json::from_str(include_str!("../../examples/demo-study.json")).unwrap();
    study["public_slug"] = json!(slug);
    study["agent"]["mode"] = json!("llm");
    study["model"]["timeout_seconds"] = json!(5);
    let mut questions = vec![
        json!({"id": "shops", "type": "yes_no", "prompt": "Do you buy the groceries at home?"}),
    ];
    if open {
        questions.push(
            json!({"id": "household", "type": "free_text", "prompt": "Who do you shop for?"}),
        );
    }
    study["screening"] = json!({
        "questions": questions,
        "rules": [{"question_id": "shops", "disqualify_if": [false]}]
    });
    llm.app.publish_study(&study).await;
}

/// A session of that study with consent given and the screening questions answered, the
/// model's `replies` queued before the last answer; the verdict's turn is settled.
async fn screened(llm: &Llm, slug: &str, answers: Vec<Value>, replies: Vec<Reply>) -> Value {
    let (session, token) = llm.app.create_session(slug).await;
    let s = llm.run(&session).await;
    llm.app
        .answer(&session, &token, &s, json!({"accepted": true}))
        .await;
    let mut s = llm.run(&session).await;
    let last = answers.len() - 1;
    for (i, answer) in answers.into_iter().enumerate() {
        if i == last {
            for reply in replies.clone() {
                llm.model.push(reply);
            }
        }
        llm.app.answer(&session, &token, &s, answer).await;
        s = llm.run(&session).await;
    }
    s
}

fn asked_to_screen(llm: &Llm) -> usize {
    llm.model
        .requests()
        .iter()
        .filter(|r| r["tools"][0]["function"]["name"] == "judge_screening")
        .count()
}

/// The study's rules decide what they cover; the model judges only what they leave open, and
/// its call is logged with the verdict.
// Long by design: four screening cases in turn, each with its checks after it: every question ruled
// (the model never asked), a rule that disqualifies, an open question the model judges (its
// provenance and prompt checked), and a failed model call where the rules' verdict stands.
async fn the_study_s_rules_decide_screening_and_the_model_only_what_they_leave_open(store: Store) {
    let llm = Llm::start(store).await;
    publish_screened(&llm, "llm-ruled", false).await;
    publish_screened(&llm, "llm-open", true).await;

    // Every question has a rule: the model is never asked.
    let s = screened(&llm, "llm-ruled", vec![json!(true)], vec![]).await;
    assert_eq!(s["screening"]["eligible"], true);
    assert_eq!(
        s["screening"]["rationale"],
        "By the study's rules: All 1 screening rules are met."
    );
    assert!(s["screening"].get("model").is_none());
    assert_eq!(asked_to_screen(&llm), 0);

    // A rule disqualifies: final, whatever a model would say.
    let s = screened(
        &llm,
        "llm-open",
        vec![json!(false), json!("my family")],
        vec![],
    )
    .await;
    assert_eq!(s["end_reason"], "screening_failed");
    assert!(s["screening"]["rationale"]
        .as_str()
        .unwrap()
        .contains("shops: false disqualifies"));
    assert_eq!(asked_to_screen(&llm), 0);

    // An open question: the model judges it.
    let verdict = Reply::Tool(
        "judge_screening",
        json!({"eligible": false, "rationale": "Buys groceries only for the office."}),
    );
    let s = screened(
        &llm,
        "llm-open",
        vec![json!(true), json!("the office")],
        vec![verdict],
    )
    .await;
    assert_eq!(s["status"], "abandoned");
    assert_eq!(s["end_reason"], "screening_failed");
    assert_eq!(
        s["screening"]["rationale"],
        "Buys groceries only for the office."
    );
    assert_eq!(
        s["screening"]["model"],
        crate::scripted_model::ANSWERING_MODEL
    );
    assert!(s["screening"]["prompt_version_id"]
        .as_str()
        .unwrap()
        .starts_with("screening-"));
    assert_eq!(s["screening"]["token_usage"]["total_tokens"], 150);
    let request = llm.model.requests().pop().unwrap();
    let prompt = request["messages"][0]["content"].as_str().unwrap();
    assert!(prompt.contains("Judge only: household"), "{prompt}");

    // A failed call: the rules' verdict stands, the failure is recorded.
    let s = screened(
        &llm,
        "llm-open",
        vec![json!(true), json!("my family")],
        vec![
            Reply::Tool("judge_screening", json!({"eligible": "maybe", "rationale": ""})),
            Reply::Tool("ask_question", json!({"objective_id": "planning_habits", "message": "How do you plan?", "rationale": "open"})),
        ],
    )
    .await;
    assert_eq!(s["screening"]["eligible"], true);
    assert!(s["screening"]["rationale"]
        .as_str()
        .unwrap()
        .starts_with("Fallback after a model failure"));
    assert_eq!(s["errors"][0]["code"], "model_bad_arguments");
    assert_eq!(last_assistant(&s), "How do you plan?");
}

async fn an_unreachable_model_endpoint_falls_back_and_is_recorded(store: Store) {
    // A port nothing listens on: the connection is refused.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let app = TestApp::spawn_with(store, move |s| {
        s.openai_base_url = Some(url);
        s.model_idle_timeout_secs = 1;
    })
    .await;
    let mut study: Value =
        serde_json::from_str(include_str!("../../examples/demo-study.json")).unwrap();
    study["public_slug"] = json!("llm-down");
    study["agent"]["mode"] = json!("llm");
    study["model"]["timeout_seconds"] = json!(5);
    app.publish_study(&study).await;
    let (session, token) = app.create_session("llm-down").await;
    let s = app.run(&session).await;
    app.answer(&session, &token, &s, json!({"accepted": true}))
        .await;
    let s = app.run(&session).await;
    assert_eq!(s["status"], "waiting_for_user");
    assert_eq!(last_assistant(&s), OPENING);
    assert_eq!(s["errors"][0]["source"], "model");
    assert_eq!(s["errors"][0]["code"], "model_http_error");
}

crate::both_stores!(
    a_model_decision_streams_and_is_logged_with_its_provenance,
    a_widget_opening_an_objective_is_rewritten_into_its_question,
    a_fourth_probe_is_refused_by_the_cap,
    every_model_failure_falls_back_and_is_recorded,
    an_unreachable_model_endpoint_falls_back_and_is_recorded,
    an_echoed_key_never_reaches_the_event_log,
    a_dropped_call_never_leaves_a_broken_off_question,
    the_study_s_rules_decide_screening_and_the_model_only_what_they_leave_open,
);
