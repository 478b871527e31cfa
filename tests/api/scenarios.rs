//! Acceptance scenarios of the rules interviewer, each through HTTP with a live stream open, on
//! both stores: the probe cap (AC-04-8), the turn limit (AC-04-10), "结束" (AC-04-11), fatigue
//! (FR-04-15), the confidence threshold (FR-04-21), and a complete decision log (AC-04-13).

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::both_stores;
use crate::helpers::paths;
use crate::helpers::{typical_value, Store, TestApp};
use crate::sse::{Frame, SseClient};

/// A demo-like study under `slug`, changed by `mutate`.
async fn study(app: &TestApp, slug: &str, mutate: impl FnOnce(&mut Value)) {
    let mut study: Value =
        serde_json::from_str(include_str!("../../examples/demo-study.json")).unwrap();
    study["public_slug"] = json!(slug);
    mutate(&mut study);
    app.publish_study(&study).await;
}

/// A session with consent given and a stream open from its first event.
struct Interview<'a> {
    app: &'a TestApp,
    session: String,
    token: String,
    sse: SseClient,
    frames: Vec<Frame>,
}

impl<'a> Interview<'a> {
    async fn start(app: &'a TestApp, slug: &str) -> Self {
        let (session, token) = app.create_session(slug).await;
        let url = app.url(&format!("/api/sessions/{session}/stream?token={token}"));
        let sse = SseClient::new(app.client.get(url).send().await.unwrap());
        let s = app.run(&session).await;
        app.answer(&session, &token, &s, json!({"accepted": true}))
            .await;
        let mut me = Self {
            app,
            session,
            token,
            sse,
            frames: Vec::new(),
        };
        me.settle().await;
        me
    }

    /// Waits for the interviewer's turn to end; returns the researcher's view.
    async fn settle(&mut self) -> Value {
        let s = self.app.run(&self.session).await;
        self.frames
            .extend(self.sse.drain(Duration::from_millis(50)).await);
        s
    }

    /// Says `text` and waits for the answer.
    async fn say(&mut self, text: &str) -> Value {
        let res = self
            .app
            .post_message(&self.session, &self.token, text)
            .await;
        assert_eq!(res.status(), StatusCode::ACCEPTED);
        self.settle().await
    }

    /// Answers with `text`, or with a typical value when a widget is pending.
    async fn reply(&mut self, state: &Value, text: &str) -> Value {
        if state["pending_interaction"].is_null() {
            self.say(text).await
        } else {
            let value = typical_value(&state["pending_interaction"]);
            self.app
                .answer(&self.session, &self.token, state, value)
                .await;
            self.settle().await
        }
    }

    /// The assistant's utterances the participant saw on the stream, in order.
    fn questions_seen(&self) -> Vec<String> {
        self.frames
            .iter()
            .filter(|f| f.event == "message.completed" && f.data["role"] == "assistant")
            .map(|f| f.data["content"].as_str().unwrap().to_string())
            .collect()
    }
}

fn actions(s: &Value) -> Vec<Value> {
    s["decision_log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["selected_action"].clone())
        .collect()
}

/// AC-04-13: every decision is in the log with its rationale, phase and provenance.
fn assert_every_decision_logged(s: &Value) {
    let log = s["decision_log"].as_array().unwrap();
    assert!(!log.is_empty());
    for d in log {
        assert!(!d["rationale"].as_str().unwrap().trim().is_empty(), "{d}");
        for key in [
            "session_id",
            "turn_id",
            "phase",
            "input_summary",
            "selected_action",
            "model",
            "prompt_version_id",
            "latency_ms",
            "token_usage",
            "created_at",
        ] {
            assert!(d.get(key).is_some(), "{key} missing from {d}");
        }
    }
}

async fn probes_stop_at_the_cap_and_the_interview_moves_on(store: Store) {
    let app = TestApp::spawn(store).await;
    let mut i = Interview::start(&app, "demo").await;
    let mut s = Value::Null;
    for _ in 0..4 {
        s = i.say("I use a list").await;
    }
    let probes = actions(&s)
        .iter()
        .filter(|a| a["action"] == "probe" && a["objective_id"] == "planning_habits")
        .count();
    assert_eq!(probes, 3, "{:?}", actions(&s));
    assert_eq!(
        actions(&s).last().unwrap(),
        &json!({"action": "ask_question", "objective_id": "pain_points"})
    );
    assert_every_decision_logged(&s);
    app.assert_stream_follows_the_rules(&i.session).await;
}

async fn the_tenth_turn_ends_the_questions(store: Store) {
    let app = TestApp::spawn(store).await;
    study(&app, "ten-turns", |s| {
        s["limits"]["max_turn_count"] = json!(10);
    })
    .await;
    let mut i = Interview::start(&app, "ten-turns").await;
    let mut s = i.settle().await;
    while s["current_phase"] != "SUMMARY_CONFIRMATION" {
        assert!(s["turn_count"].as_u64().unwrap() < 10, "{s}");
        s = i.reply(&s, "I use a list").await;
    }
    assert_eq!(s["turn_count"], 10);
    let questions_at_limit = i.questions_seen().len();
    assert_eq!(
        actions(&s).last().unwrap()["action"],
        "summarize_and_confirm"
    );
    let s = i.say("Yes, that's right").await;
    assert_eq!(s["status"], "completed");
    assert_eq!(s["end_reason"], "max_turns_reached");
    assert_eq!(s["turn_count"], 10);
    // After the summary, only the closing words: no new question.
    assert_eq!(i.questions_seen().len(), questions_at_limit + 1);
    assert!(actions(&s)[actions(&s).len() - 2..]
        .iter()
        .all(|a| a["action"] != "ask_question" && a["action"] != "probe"));
    assert_every_decision_logged(&s);
}

async fn saying_jieshu_ends_with_the_summary_and_no_new_question(store: Store) {
    let app = TestApp::spawn(store).await;
    let mut i = Interview::start(&app, "demo").await;
    // "Stop" inside a sentence is not an end.
    let s = i.say("I can't stop buying snacks when I shop hungry").await;
    assert_eq!(s["status"], "waiting_for_user");
    assert_ne!(s["current_phase"], "SUMMARY_CONFIRMATION");
    let before = actions(&s).len();
    let s = i.say("结束").await;
    assert_eq!(s["current_phase"], "SUMMARY_CONFIRMATION");
    let s = i.say("对").await;
    assert_eq!(s["status"], "completed");
    assert_eq!(s["end_reason"], "participant_requested_end");
    assert_eq!(s["summary_confirmed"], true);
    let after: Vec<_> = actions(&s)[before..].to_vec();
    assert!(
        after
            .iter()
            .all(|a| a["action"] != "ask_question" && a["action"] != "probe"),
        "{after:?}"
    );
    let completed = i
        .frames
        .iter()
        .find(|f| f.event == "session.completed")
        .expect("the stream says the session completed");
    assert!(completed.data["summary"].is_string());
    assert_every_decision_logged(&s);
}

async fn three_one_word_answers_stop_the_probing(store: Store) {
    let app = TestApp::spawn(store).await;
    let mut i = Interview::start(&app, "demo").await;
    i.say("Lists").await;
    i.say("Phone").await;
    let s = i.say("Sunday").await;
    let before_third = actions(&s);
    assert_eq!(
        s["current_phase"], "SUMMARY_CONFIRMATION",
        "{before_third:?}"
    );
    assert_ne!(before_third.last().unwrap()["action"], "probe");
    let s = i.say("yes").await;
    assert_eq!(s["status"], "completed");
    assert_eq!(s["end_reason"], "participant_fatigue");
    assert_every_decision_logged(&s);
}

async fn required_fields_at_the_threshold_end_the_interview(store: Store) {
    let app = TestApp::spawn(store).await;
    study(&app, "confident", |s| {
        s["objectives"][2]["priority"] = json!("could");
    })
    .await;
    let mut i = Interview::start(&app, "confident").await;
    let mut s = i
        .say("Last Sunday I wrote the list on my phone while my partner checked the fridge and pantry")
        .await;
    s = i
        .reply(&s, "Vegetables go bad before we eat them because we buy too much on impulse every single week")
        .await;
    while s["current_phase"] != "SUMMARY_CONFIRMATION" {
        s = i
            .reply(
                &s,
                "We talk about it over dinner and agree on the week's meals",
            )
            .await;
    }
    // The `could` objective was never asked: the required fields were already known.
    assert!(!actions(&s)
        .iter()
        .any(|a| a["objective_id"] == "tool_preferences"));
    for field in [
        "planning_method",
        "main_frustration",
        "planning_satisfaction",
    ] {
        assert!(
            s["extracted_fields"][field]["confidence"].as_f64().unwrap() >= 0.7,
            "{field}: {}",
            s["extracted_fields"]
        );
    }
    let s = i.say("Yes").await;
    assert_eq!(s["status"], "completed");
    assert_eq!(s["end_reason"], "confidence_threshold_met");
    assert_every_decision_logged(&s);
}

impl Interview<'_> {
    async fn end(&mut self) -> reqwest::Response {
        self.app
            .post(
                &format!("/api/sessions/{}/end", self.session),
                Some(&self.token),
                &json!({}),
            )
            .await
    }
}

async fn the_end_button_confirms_the_summary_and_pressing_it_again_skips_that(store: Store) {
    let app = TestApp::spawn(store).await;
    let mut i = Interview::start(&app, "demo").await;
    i.say("Last Sunday I wrote the list on my phone while my partner checked the fridge")
        .await;
    let res = i.end().await;
    assert_eq!(res.status(), StatusCode::OK);
    let s = i.settle().await;
    assert_eq!(s["current_phase"], "SUMMARY_CONFIRMATION");
    assert_eq!(s["status"], "waiting_for_user");
    let res = i.end().await;
    assert_eq!(res.status(), StatusCode::OK);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["status"], "completed");
    let s = i.settle().await;
    assert_eq!(s["end_reason"], "participant_requested_end");
    assert_eq!(s["summary_confirmed"], false);
    let again = i.end().await;
    assert_eq!(again.status(), StatusCode::GONE);
    assert_every_decision_logged(&s);
    app.assert_stream_follows_the_rules(&i.session).await;
}

async fn ending_with_a_widget_open_skips_it_then_confirms(store: Store) {
    let app = TestApp::spawn(store).await;
    let mut i = Interview::start(&app, "demo").await;
    let s = app.drive_to_widget(&i.session, &i.token, "likert").await;
    let widget = s["pending_interaction"]["interaction_id"].clone();
    assert_eq!(i.end().await.status(), StatusCode::OK);
    let s = i.settle().await;
    assert_eq!(s["current_phase"], "SUMMARY_CONFIRMATION");
    assert_eq!(s["pending_interaction"], Value::Null);
    assert!(s["interaction_events"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["interaction_id"] == widget && e["status"] == "skipped"));
    let s = i.say("Yes, that's right").await;
    assert_eq!(s["status"], "completed");
    assert_eq!(s["summary_confirmed"], true);
    assert_eq!(s["end_reason"], "participant_requested_end");
}

/// The interview-flow issue's loop: skipping widgets (so a must objective's field is never
/// known), or a confidence threshold no answer reaches, then "yes" at the summary. A confirmed
/// summary concludes — once, with a reason — and never comes back.
async fn a_confirmed_summary_concludes_even_when_coverage_never_holds(store: Store) {
    let app = TestApp::spawn(store).await;
    study(&app, "strict", |s| {
        s["limits"]["confidence_threshold"] = json!(0.95)
    })
    .await;
    for slug in ["demo", "strict"] {
        let (session, token) = app.interviewing(slug).await;
        let mut summaries = 0;
        let mut s = app.run(&session).await;
        for _ in 0..30 {
            if s["status"] == "completed" || s["status"] == "abandoned" {
                break;
            }
            if s["status"] == "waiting_for_tool" {
                let id = s["pending_interaction"]["interaction_id"].as_str().unwrap();
                let res = app
                    .post(
                        &paths::submit(&session, id),
                        Some(&token),
                        &json!({"status": "skipped"}),
                    )
                    .await;
                assert_eq!(res.status(), StatusCode::OK);
            } else if s["current_phase"] == "SUMMARY_CONFIRMATION" {
                summaries += 1;
                assert_eq!(summaries, 1, "{slug}: the summary came back: {s}");
                app.post_message(&session, &token, "yes").await;
            } else {
                let answer = "Every Sunday evening we sit down together, check the fridge and write a list on my phone";
                app.post_message(&session, &token, answer).await;
            }
            s = app.run(&session).await;
        }
        assert_eq!(s["status"], "completed", "{slug}: {s}");
        assert_eq!(s["summary_confirmed"], true, "{slug}: {s}");
    }
}

/// Answers everything the demo asks (widgets with a typical value) until the summary is shown.
async fn to_the_summary(app: &TestApp) -> (String, String, Value) {
    let (session, token) = app.interviewing("demo").await;
    let mut s = app.run(&session).await;
    for _ in 0..30 {
        if s["current_phase"] == "SUMMARY_CONFIRMATION" && s["status"] == "waiting_for_user" {
            return (session, token, s);
        }
        if s["status"] == "waiting_for_tool" {
            let value = typical_value(&s["pending_interaction"]);
            app.answer(&session, &token, &s, value).await;
        } else {
            let answer = "Every Sunday evening we sit down together, check the fridge and write a list on my phone";
            app.post_message(&session, &token, answer).await;
        }
        s = app.run(&session).await;
    }
    panic!("no summary: {s}");
}

/// An addition at the summary is taken in: it is in the transcript, in the re-extracted field
/// (with the addition as its evidence), in the summary shown again, and in the results.
async fn an_addition_at_the_summary_reaches_the_results(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token, _) = to_the_summary(&app).await;
    app.post_message(&session, &token, "add: I also use a notebook")
        .await;
    let s = app.run(&session).await;
    assert_eq!(s["current_phase"], "SUMMARY_CONFIRMATION", "{s}");
    let shown = crate::helpers::last_assistant(&s);
    assert!(
        shown.contains("notebook"),
        "the summary shown again has the addition: {shown}"
    );
    let addition = s["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["content"] == "add: I also use a notebook")
        .expect("the addition is in the transcript")["turn_id"]
        .clone();
    let holder = s["extracted_fields"]
        .as_object()
        .unwrap()
        .values()
        .find(|f| f["value"].as_str().is_some_and(|v| v.contains("notebook")))
        .expect("a field holds the addition");
    assert!(
        holder["evidence_turn_ids"]
            .as_array()
            .unwrap()
            .contains(&addition),
        "{holder}"
    );
    app.post_message(&session, &token, "yes").await;
    let s = app.run(&session).await;
    assert_eq!(s["status"], "completed", "{s}");
    assert_eq!(s["summary_confirmed"], true);
    let study_id = s["study_id"].as_str().unwrap();
    let results = crate::helpers::json_of(
        app.get(
            &paths::results(study_id),
            Some(crate::helpers::RESEARCHER_TOKEN),
        )
        .await,
    )
    .await;
    assert!(results.to_string().contains("notebook"), "{results}");
}

/// 结束 (or "I'm done") at the summary ends the interview: completed, the summary unconfirmed,
/// no second summary.
async fn an_end_intent_at_the_summary_completes_unconfirmed(store: Store) {
    let app = TestApp::spawn(store).await;
    for reply in ["结束", "I'm done"] {
        let (session, token, _) = to_the_summary(&app).await;
        app.post_message(&session, &token, reply).await;
        let s = app.run(&session).await;
        assert_eq!(s["status"], "completed", "{reply}: {s}");
        assert_eq!(s["summary_confirmed"], false, "{reply}");
        assert_eq!(s["end_reason"], "participant_requested_end", "{reply}: {s}");
        let summaries = s["decision_log"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["selected_action"]["action"] == "summarize_and_confirm")
            .count();
        assert_eq!(summaries, 1, "{reply}");
    }
}

/// Every node of FR-04-9 the session passes through is a `session.phase_changed` event, in the
/// spec's order, the post-session extraction included; decisions record the switches.
// Long by design: one session confirmed at the summary, a wait for END in its event log, then the
// phases checked against the spec's order, the nodes that must appear, and the decisions' phases.
async fn every_phase_appears_in_order(store: Store) {
    let app = TestApp::spawn_with(store, |s| s.sweep_interval_secs = 1).await;
    let (session, token, _) = to_the_summary(&app).await;
    app.post_message(&session, &token, "yes").await;
    app.run(&session).await;
    let mut phases: Vec<String> = Vec::new();
    for _ in 0..100 {
        let events = crate::helpers::json_of(
            app.get(
                &paths::events(&session),
                Some(crate::helpers::RESEARCHER_TOKEN),
            )
            .await,
        )
        .await;
        phases = events["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["event_type"] == "session.phase_changed")
            .map(|e| e["payload"]["to"].as_str().unwrap().to_string())
            .collect();
        if phases.last().is_some_and(|p| p == "END") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let order = [
        "CONSENT_OR_SCREENING",
        "OPENING",
        "ASK_OR_PROBE",
        "OPTIONAL_INTERACTION",
        "EXTRACT",
        "EVALUATE_COVERAGE",
        "NEXT_TOPIC_OR_PROBE",
        "SUMMARY_CONFIRMATION",
        "CONCLUDE",
        "POST_SESSION_EXTRACTION",
        "END",
    ];
    let mut at = 0;
    for phase in &phases {
        if at < order.len() && phase == order[at] {
            at += 1;
        }
    }
    assert_eq!(at, order.len(), "not every phase in order: {phases:?}");
    for phase in [
        "EVALUATE_COVERAGE",
        "NEXT_TOPIC_OR_PROBE",
        "POST_SESSION_EXTRACTION",
    ] {
        assert!(phases.iter().any(|p| p == phase), "{phase}: {phases:?}");
    }
    let s = app.researcher_view(&session).await;
    let decided: Vec<&str> = s["decision_log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["phase"].as_str().unwrap())
        .collect();
    assert!(decided.contains(&"NEXT_TOPIC_OR_PROBE"), "{decided:?}");
    assert_eq!(s["current_phase"], "END");
}

/// The summary a participant confirms is written for them: their words, the options they chose
/// by their labels, widget answers as the question and the answer they saw — no field id, no
/// researcher-facing description, no internal term; a field's `participant_label` names it.
// Long by design: two summaries in turn: the demo's checked for each field id and description, each
// objective id, each internal term, the option's label, the question, the answer said once; then a
// study with a participant label driven to its summary and checked for it.
async fn the_summary_is_written_for_the_participant(store: Store) {
    let app = TestApp::spawn(store).await;
    let demo: Value = serde_json::from_str(include_str!("../../examples/demo-study.json")).unwrap();
    let (_, _, s) = to_the_summary(&app).await;
    // One answer fills the field it answers, not every field of its objective.
    let fields = s["extracted_fields"].as_object().unwrap();
    assert!(fields.contains_key("planning_method"), "{s}");
    assert!(
        !fields.contains_key("household_involvement"),
        "one answer, one field: {s}"
    );
    let summary = s["summary"].as_str().unwrap().to_string();
    for field in demo["output_schema"]["fields"].as_array().unwrap() {
        let id = field["id"].as_str().unwrap();
        let description = field["description"].as_str().unwrap();
        assert!(!summary.contains(id), "{id} in {summary:?}");
        assert!(
            !summary.contains(description),
            "{description:?} in {summary:?}"
        );
    }
    for objective in demo["objectives"].as_array().unwrap() {
        assert!(
            !summary.contains(objective["id"].as_str().unwrap()),
            "{summary:?}"
        );
    }
    for term in ["tool", "agent", "harness", "rationale", "{", "confidence"] {
        assert!(
            !summary.to_lowercase().contains(term),
            "{term} in {summary:?}"
        );
    }
    assert!(
        summary.contains("Meal ideas for the week"),
        "the option's label: {summary:?}"
    );
    assert!(
        summary.contains("How satisfied are you"),
        "the question as asked: {summary:?}"
    );
    // The answer once, condensed to what it says about the field and spoken back to the
    // participant, not pasted whole.
    assert_eq!(
        summary.matches("write a list on your phone").count(),
        1,
        "one answer once: {summary:?}"
    );
    assert!(
        !summary.contains("Every Sunday evening we sit down together, check the fridge"),
        "{summary:?}"
    );

    // A participant-facing label names its field.
    let answer =
        "Every Sunday evening we sit down together, check the fridge and write a list on my phone";
    study(&app, "labelled", |d| {
        d["output_schema"]["fields"][0]["participant_label"] = json!("How you plan");
    })
    .await;
    let (session, token) = app.interviewing("labelled").await;
    let mut s = app.run(&session).await;
    for _ in 0..30 {
        if s["current_phase"] == "SUMMARY_CONFIRMATION" {
            break;
        }
        if s["status"] == "waiting_for_tool" {
            let value = typical_value(&s["pending_interaction"]);
            app.answer(&session, &token, &s, value).await;
        } else {
            app.post_message(&session, &token, answer).await;
        }
        s = app.run(&session).await;
    }
    let summary = s["summary"].as_str().unwrap();
    assert!(
        summary.contains("How you plan: check the fridge and write a list on your phone"),
        "{summary:?}"
    );
}

/// The last decision's probe trigger, if it was a probe.
fn last_probe(s: &Value) -> Option<String> {
    let d = s["decision_log"].as_array().unwrap().last().unwrap();
    (d["selected_action"]["action"] == "probe").then(|| {
        d["selected_action"]["trigger"]
            .as_str()
            .unwrap()
            .to_string()
    })
}

/// The offline interviewer probes like a careful person: a strong feeling, a contradiction, a
/// vague answer, in English and Chinese; a concrete Chinese answer is not "vague"; the rationale
/// names the trigger and its cause; no probe is asked twice.
// Long by design: one short session per case, each with its checks after it: a strong feeling, a
// contradiction after a vague answer (no probe twice), then in Chinese a concrete answer, a strong
// feeling, a vague one, a short one and its contradiction, and a short English one.
async fn rules_probes_for_each_trigger_in_english_and_chinese(store: Store) {
    let app = TestApp::spawn(store).await;
    study(&app, "zh", |d| d["locale"] = json!("zh-CN")).await;
    let say = |session: String, token: String, text: &'static str| {
        let app = &app;
        async move {
            assert_eq!(
                app.post_message(&session, &token, text).await.status(),
                StatusCode::ACCEPTED
            );
            app.run(&session).await
        }
    };
    // English: a strong feeling.
    let (session, token) = app.interviewing("demo").await;
    let s = say(
        session,
        token,
        "I absolutely hate planning, the queues on Saturday drive me mad",
    )
    .await;
    assert_eq!(last_probe(&s).as_deref(), Some("strong_emotion"), "{s}");
    let rationale = s["decision_log"].as_array().unwrap().last().unwrap()["rationale"].to_string();
    assert!(
        rationale.contains("strong") && rationale.contains("hate"),
        "{rationale}"
    );
    // English: a contradiction of an earlier answer on the same objective.
    let (session, token) = app.interviewing("demo").await;
    let s = say(session.clone(), token.clone(), "I always use a list").await;
    assert_eq!(last_probe(&s).as_deref(), Some("vague"), "{s}");
    let first_probe = crate::helpers::last_assistant(&s);
    let s = say(
        session,
        token,
        "Well actually I never use a list, I just remember it all on Sunday",
    )
    .await;
    assert_eq!(last_probe(&s).as_deref(), Some("contradiction"), "{s}");
    assert_ne!(
        crate::helpers::last_assistant(&s),
        first_probe,
        "no probe twice"
    );
    // Chinese: a concrete answer is not vague; a strong feeling is probed, in Chinese.
    let (session, token) = app.interviewing("zh").await;
    let s = say(
        session,
        token,
        "每周日晚上和家人一起在手机上列购物清单然后去超市",
    )
    .await;
    assert_eq!(last_probe(&s), None, "a concrete Chinese answer: {s}");
    let (session, token) = app.interviewing("zh").await;
    let s = say(session, token, "周末去超市排队真让人受不了").await;
    assert_eq!(last_probe(&s).as_deref(), Some("strong_emotion"), "{s}");
    let asked = crate::helpers::last_assistant(&s);
    assert!(
        asked.chars().any(|c| (c as u32) >= 0x4E00),
        "a Chinese probe: {asked}"
    );
    let (session, token) = app.interviewing("zh").await;
    let s = say(session, token, "还行吧").await;
    assert_eq!(last_probe(&s).as_deref(), Some("vague"), "{s}");
    // A concrete but short answer leaves the required field under the threshold.
    let (session, token) = app.interviewing("zh").await;
    let s = say(session.clone(), token.clone(), "我用清单").await;
    assert_eq!(last_probe(&s).as_deref(), Some("missing_field"), "{s}");
    // …and taking it back is a contradiction.
    let s = say(session, token, "其实我不用清单，都记在脑子里，每周日去超市").await;
    assert_eq!(last_probe(&s).as_deref(), Some("contradiction"), "{s}");
    let (session, token) = app.interviewing("demo").await;
    let s = say(session, token, "On Sunday with a list").await;
    assert_eq!(last_probe(&s).as_deref(), Some("missing_field"), "{s}");
}

both_stores!(
    rules_probes_for_each_trigger_in_english_and_chinese,
    the_summary_is_written_for_the_participant,
    every_phase_appears_in_order,
    an_addition_at_the_summary_reaches_the_results,
    an_end_intent_at_the_summary_completes_unconfirmed,
    a_confirmed_summary_concludes_even_when_coverage_never_holds,
    concurrent_load_never_shows_two_pending_widgets,
    every_interaction_type_in_one_interview_with_a_skip_and_a_bad_value,
    a_participant_resumes_after_a_disconnect_at_a_question_and_at_a_widget,
    the_end_button_confirms_the_summary_and_pressing_it_again_skips_that,
    ending_with_a_widget_open_skips_it_then_confirms,
    probes_stop_at_the_cap_and_the_interview_moves_on,
    the_tenth_turn_ends_the_questions,
    saying_jieshu_ends_with_the_summary_and_no_new_question,
    three_one_word_answers_stop_the_probing,
    required_fields_at_the_threshold_end_the_interview,
);

/// A study with one objective per interaction type, each shown after its open question.
async fn every_type_study(app: &TestApp) {
    let study: Value =
        serde_json::from_str(include_str!("../../examples/every-type-study.json")).unwrap();
    app.publish_study(&study).await;
}

/// Texts a participant reads must not leak internals (FR-04-27).
fn assert_plain_language(text: &str, what: &str) {
    let lower = text.to_lowercase();
    for term in ["tool", "agent", "harness", "langgraph", "rationale"] {
        assert!(!lower.contains(term), "{what} says {term:?}: {text}");
    }
    let t = text.trim_start();
    assert!(
        !(t.starts_with('{') || t.starts_with('[')),
        "{what} is raw JSON: {text}"
    );
}

// Long by design: one interview through every widget type in the order a participant meets them,
// each refused a bad value (nothing written) before its real answer, the ranking skipped; then the
// widget order, the skip, the tool calls and the log, then every text the participant read checked
// for plain language.
async fn every_interaction_type_in_one_interview_with_a_skip_and_a_bad_value(store: Store) {
    let app = TestApp::spawn(store).await;
    every_type_study(&app).await;
    let mut i = Interview::start(&app, "every-type").await;
    let mut s = i.settle().await;
    let mut seen = Vec::new();
    while s["status"] != "completed" {
        let pending = s["pending_interaction"].clone();
        if pending.is_null() {
            s = i
                .say("Every Saturday morning I compare prices in two stores and then buy for the week")
                .await;
            continue;
        }
        let kind = pending["type"].as_str().unwrap().to_string();
        assert!(pending["value_schema"]["$schema"]
            .as_str()
            .unwrap()
            .contains("2020-12"));
        assert_plain_language(pending["prompt"].as_str().unwrap(), "a prompt");
        let id = pending["interaction_id"].as_str().unwrap().to_string();
        let submit = format!("/api/sessions/{}/interactions/{id}/submit", i.session);
        // One bad value per type: refused with 422, nothing written.
        let bad = match kind.as_str() {
            "single_choice" => json!("zzz"),
            "multiple_choice" => json!(["fruit", "bread", "milk"]),
            "likert" => json!(9),
            "rating" => json!(10.5),
            "ranking" => json!(["price", "price", "speed"]),
            "yes_no" => json!("yes"),
            _ => json!("x".repeat(61)),
        };
        let before = app.total_events().await;
        let res = app
            .post(
                &submit,
                Some(&i.token),
                &json!({"status": "submitted", "value": bad}),
            )
            .await;
        let body =
            crate::helpers::assert_error(res, StatusCode::UNPROCESSABLE_ENTITY, "invalid_value")
                .await;
        assert_eq!(body["error"]["details"]["field"], "value", "{kind}");
        assert_eq!(
            app.total_events().await,
            before,
            "{kind}: a refused value wrote nothing"
        );
        let answer = if kind == "ranking" {
            json!({"status": "skipped"})
        } else {
            json!({"status": "submitted", "value": typical_value(&pending)})
        };
        let res = app.post(&submit, Some(&i.token), &answer).await;
        assert_eq!(res.status(), StatusCode::OK, "{kind}");
        seen.push(kind);
        s = i.settle().await;
        if s["current_phase"] == "SUMMARY_CONFIRMATION" {
            s = i.say("Yes, that's right").await;
        }
    }
    assert_eq!(
        seen,
        [
            "consent",
            "single_choice",
            "multiple_choice",
            "likert",
            "rating",
            "ranking",
            "yes_no",
            "free_text"
        ][1..]
    );
    let events = s["interaction_events"].as_array().unwrap();
    assert_eq!(events.len(), 8, "consent and seven widgets");
    let skipped: Vec<_> = events.iter().filter(|e| e["status"] == "skipped").collect();
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0]["type"], "ranking");
    assert_eq!(s["tool_calls"].as_array().unwrap().len(), 8);
    assert_every_decision_logged(&s);
    app.assert_stream_follows_the_rules(&i.session).await;

    // Everything the participant read, on the stream and in their view, is plain language.
    for f in &i.frames {
        match f.event.as_str() {
            "message.completed" if f.data["role"] == "assistant" => {
                assert_plain_language(f.data["content"].as_str().unwrap(), "a message")
            }
            "message.delta" => {
                assert_plain_language(f.data["content"].as_str().unwrap(), "a delta")
            }
            "interaction.render" => {
                let it = &f.data["interaction"];
                assert_plain_language(it["prompt"].as_str().unwrap(), "a prompt");
                for o in it["options"].as_array().into_iter().flatten() {
                    assert_plain_language(o["label"].as_str().unwrap(), "an option");
                }
            }
            "session.completed" => {
                assert_plain_language(f.data["summary"].as_str().unwrap(), "the summary")
            }
            "error" => assert_plain_language(f.data["message"].as_str().unwrap(), "an error"),
            _ => {}
        }
    }
    let participant = crate::helpers::json_of(
        app.get(&format!("/api/sessions/{}", i.session), Some(&i.token))
            .await,
    )
    .await;
    for t in participant["transcript"].as_array().unwrap() {
        if t["role"] == "assistant" {
            assert_plain_language(t["content"].as_str().unwrap(), "the transcript");
        }
    }
}

/// A participant who loses the connection comes back with their token: the session shows
/// where they were, the stream resumes from the last id they saw, and they carry on.
// Long by design: one disconnect and resume, run twice (at a question, then at a widget): the
// stream dropped and reopened from the last id, the participant's view checked against where they
// were, the next input sent, and the resumed stream checked for no gap and no duplicate.
async fn a_participant_resumes_after_a_disconnect_at_a_question_and_at_a_widget(store: Store) {
    let app = TestApp::spawn(store).await;
    let mut i = Interview::start(&app, "demo").await;
    for widget_pending in [false, true] {
        let s = if widget_pending {
            app.drive_to_widget(&i.session, &i.token, "likert").await
        } else {
            i.settle().await
        };
        // The connection drops; the client remembers the last id it saw.
        i.frames
            .extend(i.sse.drain(Duration::from_millis(100)).await);
        let last_id = i.frames.iter().filter_map(|f| f.id).max().unwrap();
        let url = app.url(&format!("/api/sessions/{}/stream?token=x", i.session));
        drop(std::mem::replace(
            &mut i.sse,
            SseClient::new(
                app.client
                    .get(url.replace("token=x", &format!("token={}", i.token)))
                    .header("last-event-id", last_id.to_string())
                    .send()
                    .await
                    .unwrap(),
            ),
        ));
        let view = crate::helpers::json_of(
            app.get(&format!("/api/sessions/{}", i.session), Some(&i.token))
                .await,
        )
        .await;
        assert_eq!(view["status"], s["status"]);
        assert_eq!(view["transcript"], {
            // The participant's view is the researcher's transcript.
            s["transcript"].clone()
        });
        if widget_pending {
            assert_eq!(view["status"], "waiting_for_tool");
            assert_eq!(view["pending_interaction"], s["pending_interaction"]);
            let value = typical_value(&view["pending_interaction"]);
            app.answer(&i.session, &i.token, &view, value).await;
        } else {
            assert_eq!(view["status"], "waiting_for_user");
            assert_eq!(view["pending_interaction"], Value::Null);
            let res = app
                .post_message(
                    &i.session,
                    &i.token,
                    "We plan on Sundays with a shared list on our phones and a budget",
                )
                .await;
            assert_eq!(res.status(), StatusCode::ACCEPTED);
        }
        let after = i
            .sse
            .until(WAIT_LONG, |f| {
                f.event == "message.completed" && f.data["role"] == "assistant"
            })
            .await;
        let ids: Vec<u64> = after.iter().filter_map(|f| f.id).collect();
        assert!(
            ids.iter().all(|id| *id > last_id),
            "no duplicate: {ids:?} after {last_id}"
        );
        assert_eq!(ids.first().copied(), Some(last_id + 1), "no gap");
        i.frames.extend(after);
    }
}

const WAIT_LONG: Duration = Duration::from_secs(10);

/// AC-04-7 under load: many sessions through every widget type at once, each widget answered by
/// three racing submits and a racing message. One submit wins, the rest get 409; no session
/// ever holds two pending widgets (the stored streams are re-checked against the rules).
// Long by design: one participant's drive through the every-type study as a closure, each widget
// answered by three racing submits and a racing message, run for eight sessions at once; then each
// session's winning submits, conflicts, completion and stored stream checked.
async fn concurrent_load_never_shows_two_pending_widgets(store: Store) {
    // Racing duplicate submits on purpose: the per-session input rate is not what is tested.
    let app = TestApp::spawn_with(store, |s| s.inputs_per_session_per_minute = 0).await;
    every_type_study(&app).await;
    let app = &app;
    let drive = |n: usize| async move {
        let (session, token) = app.interviewing("every-type").await;
        let (mut ok, mut conflicts) = (0, 0);
        for _ in 0..60 {
            let s = app.run(&session).await;
            if s["status"] == "completed" {
                break;
            }
            if s["current_phase"] == "SUMMARY_CONFIRMATION" {
                app.post_message(&session, &token, "yes").await;
                continue;
            }
            let pending = &s["pending_interaction"];
            if pending.is_null() {
                let res = app
                    .post_message(
                        &session,
                        &token,
                        &format!(
                            "Participant {n} answers with a long concrete example from last week"
                        ),
                    )
                    .await;
                assert_eq!(res.status(), StatusCode::ACCEPTED);
                continue;
            }
            let id = pending["interaction_id"].as_str().unwrap();
            let submit = paths::submit(&session, id);
            let body = json!({"status": "submitted", "value": typical_value(pending)});
            let (a, b, c, m) = tokio::join!(
                app.post(&submit, Some(&token), &body),
                app.post(&submit, Some(&token), &body),
                app.post(&submit, Some(&token), &body),
                app.post_message(&session, &token, "hello?"),
            );
            // The message loses to the widget (409), unless the interviewer has already answered
            // the winning submit and waits for the participant again when it arrives — then it
            // is a valid answer (202). Either way the stored stream is checked below: no message
            // is ever accepted while a widget is pending.
            assert!(
                matches!(m.status(), StatusCode::CONFLICT | StatusCode::ACCEPTED),
                "{}",
                m.status()
            );
            for r in [a, b, c] {
                match r.status() {
                    StatusCode::OK => ok += 1,
                    StatusCode::CONFLICT => conflicts += 1,
                    other => panic!("unexpected {other}"),
                }
            }
        }
        (session, ok, conflicts)
    };
    let runs = futures_util::future::join_all((0..8).map(drive)).await;
    for (session, ok, conflicts) in runs {
        assert_eq!(ok, 7, "one winning submit per widget");
        assert_eq!(conflicts, 14);
        let s = app.researcher_view(&session).await;
        assert_eq!(s["status"], "completed");
        app.assert_stream_follows_the_rules(&session).await;
    }
}
