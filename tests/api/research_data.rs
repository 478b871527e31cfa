//! What a research team takes home (issue 29), on both stores: every widget answer is in the
//! field of the objective it asks about — in the results and in `results.csv` — in the field's
//! type, with the answer as evidence.

use reqwest::StatusCode;
use std::collections::HashMap;

use serde_json::{json, Value};

use crate::both_stores;
use crate::helpers::paths;
use crate::helpers::{json_of, Store, TestApp, RESEARCHER_TOKEN};

/// The answer given to each widget of the every-type study, and what its field must then say.
fn answers() -> Vec<(&'static str, Value, &'static str, Value)> {
    vec![
        (
            "single_choice",
            json!("b"),
            "choice_answer",
            json!("Option B"),
        ),
        (
            "multiple_choice",
            json!(["fruit", "milk"]),
            "many_answer",
            json!("Option FRUIT, Option MILK"),
        ),
        ("likert", json!(4), "scale_answer", json!("Easy (4 of 5)")),
        (
            "rating",
            json!(7.5),
            "score_answer",
            json!("7.5 (on 0 to 10)"),
        ),
        (
            "ranking",
            json!(["speed", "price", "quality"]),
            "order_answer",
            json!("1. Option SPEED, 2. Option PRICE, 3. Option QUALITY"),
        ),
        ("yes_no", json!(false), "yesno_answer", json!("No")),
        (
            "free_text",
            json!("Only on weekends"),
            "words_answer",
            json!("Only on weekends"),
        ),
    ]
}

/// Walks the every-type study to its end, answering each widget as [`answers`] says; returns
/// the study, the session, and which widget each field's answer came from.
async fn every_type_interview(app: &TestApp) -> (String, String, HashMap<&'static str, Value>) {
    let study: Value =
        serde_json::from_str(include_str!("../../examples/every-type-study.json")).unwrap();
    let (study_id, _, _) = app.publish_study(&study).await;
    let (session, token) = app.create_session("every-type").await;
    let mut s = app.run(&session).await;
    app.answer(&session, &token, &s, json!({"accepted": true}))
        .await;
    s = app.run(&session).await;
    let answers = answers();
    let mut evidence = HashMap::new();
    let mut guard = 0;
    while s["status"] != "completed" {
        guard += 1;
        assert!(guard < 60, "the interview ends: {s}");
        let pending = &s["pending_interaction"];
        if pending.is_null() {
            let text = if s["current_phase"] == "SUMMARY_CONFIRMATION" {
                "Yes, that's right"
            } else {
                "Every Saturday morning I compare prices in two stores"
            };
            let res = app.post_message(&session, &token, text).await;
            assert_eq!(res.status(), StatusCode::ACCEPTED);
        } else {
            let kind = pending["type"].as_str().unwrap();
            let (_, value, field, _) = answers.iter().find(|a| a.0 == kind).unwrap();
            evidence.insert(*field, pending["interaction_id"].clone());
            app.answer(&session, &token, &s, value.clone()).await;
        }
        s = app.run(&session).await;
    }
    (study_id, session, evidence)
}

async fn widget_answers_fill_the_fields_of_their_objective(store: Store) {
    let app = TestApp::spawn(store).await;
    let (study_id, session, evidence) = every_type_interview(&app).await;
    let answers = answers();

    // The post-session extraction follows the completion.
    let mut row = Value::Null;
    for _ in 0..100 {
        let results = json_of(
            app.get(&paths::results(&study_id), Some(RESEARCHER_TOKEN))
                .await,
        )
        .await;
        row = results["results"][0].clone();
        if answers
            .iter()
            .all(|(_, _, field, expected)| &row["fields"][field]["value"] == expected)
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(row["session_id"], session.as_str(), "{row}");
    for (kind, _, field, expected) in &answers {
        let got = &row["fields"][field];
        assert_eq!(&got["value"], expected, "{kind}: {row}");
        assert_eq!(got["confidence"], 1.0, "{kind}");
        assert_eq!(
            got["evidence_turn_ids"].as_array().map(Vec::len),
            Some(1),
            "{kind}: the answer is the evidence"
        );
    }
    assert_eq!(evidence.len(), answers.len(), "every widget was shown");

    let csv = app
        .get(
            &format!("/api/studies/{study_id}/results.csv"),
            Some(RESEARCHER_TOKEN),
        )
        .await
        .text()
        .await
        .unwrap();
    for (kind, _, _, expected) in &answers {
        let expected = expected.as_str().unwrap();
        assert!(csv.contains(expected), "{kind}: {expected:?} in {csv}");
    }
    // The transcript words each answer as its text field does: one format.
    let said = interaction_rows(&app, &session).await;
    for (kind, _, _, expected) in &answers {
        assert!(said.contains(expected), "{kind}: {expected} in {said:?}");
    }
}

/// What the transcript says for each widget answer, in order.
async fn interaction_rows(app: &TestApp, session: &str) -> Vec<Value> {
    let view = app.researcher_view(session).await;
    view["transcript"]
        .as_array()
        .unwrap_or_else(|| panic!("a transcript: {view}"))
        .iter()
        .filter(|t| t["kind"] == "interaction" && t["role"] == "user")
        .map(|t| t["content"].clone())
        .collect()
}

/// A database whose views an older build wrote (its own answer format, no format recorded) gets
/// them rebuilt when a server of this build starts on it, before it serves; the new format is
/// recorded, and the next start leaves the views alone.
async fn views_of_an_older_format_are_rebuilt_at_start_up(store: Store) {
    let app = TestApp::spawn(store).await;
    let (_, session, _) = every_type_interview(&app).await;
    let current = interaction_rows(&app, &session).await;
    interview_projections::on_db!(write(app.db()), |pool| {
        sqlx::query(
            "UPDATE transcript SET content = 'as an older build wrote it' WHERE kind = 'interaction'",
        )
        .execute(pool)
        .await
        .unwrap();
        sqlx::query("DELETE FROM view_format")
            .execute(pool)
            .await
            .unwrap();
    });
    assert_ne!(interaction_rows(&app, &session).await, current);
    let upgraded = app.spawn_on_same_database().await;
    assert_eq!(interaction_rows(&upgraded, &session).await, current);
    let format = interview_projections::view_format::stored(upgraded.db())
        .await
        .unwrap();
    assert_eq!(format, interview_projections::view_format::VIEW_FORMAT);
    // Recorded: a row touched now stays as it is across the next start.
    interview_projections::on_db!(write(app.db()), |pool| {
        sqlx::query("UPDATE transcript SET content = 'touched' WHERE kind = 'interaction'")
            .execute(pool)
            .await
            .unwrap();
    });
    let again = upgraded.spawn_on_same_database().await;
    assert!(interaction_rows(&again, &session)
        .await
        .iter()
        .all(|c| c == "touched"));
}

/// Replies that are not answers: a participant who has nothing to add, asks back, or does not
/// know.
const NON_ANSWERS: [&str; 4] = [
    "Nothing more.",
    "What do you mean by that?",
    "I don't know",
    "没有了",
];

// Long by design: one interview driven to its end in a loop that answers each question and meets
// each probe with a non-answer; then the fields checked free of non-answers, each message's
// decision checked for its input class, and no non-answer followed by a probe.
async fn non_answers_feed_no_field_and_end_the_probing(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.create_session("demo").await;
    let mut s = app.run(&session).await;
    app.answer(&session, &token, &s, json!({"accepted": true}))
        .await;
    s = app.run(&session).await;
    let mut probes_before = 0;
    let mut n = 0;
    let mut guard = 0;
    while s["status"] != "completed" && s["status"] != "abandoned" {
        guard += 1;
        assert!(guard < 60, "the interview ends: {s}");
        if !s["pending_interaction"].is_null() {
            let value = crate::widget_values::typical_value(&s["pending_interaction"]);
            app.answer(&session, &token, &s, value).await;
        } else if s["current_phase"] == "SUMMARY_CONFIRMATION" {
            app.post_message(&session, &token, "Yes, that's right")
                .await;
        } else {
            let probes = s["decision_log"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["selected_action"]["action"] == "probe")
                .count();
            // A question gets a real answer; every probe after it gets a non-answer.
            let text = if probes > probes_before {
                n += 1;
                NON_ANSWERS[n % NON_ANSWERS.len()]
            } else {
                "With a list"
            };
            probes_before = probes;
            app.post_message(&session, &token, text).await;
        }
        s = app.run(&session).await;
    }
    assert!(n > 0, "some probe was answered with a non-answer");

    // No field holds a non-answer, and no probe follows one.
    let fields = s["extracted_fields"].to_string().to_lowercase();
    assert!(
        fields.contains("with a list"),
        "the answers are there: {fields}"
    );
    // The likert fills the satisfaction score, not the frustration "in the participant's words".
    assert!(!fields.contains(" of 5)"), "{fields}");
    for said in NON_ANSWERS {
        assert!(
            !fields.contains(&said.to_lowercase()),
            "{said:?} in {fields}"
        );
    }
    let transcript = s["transcript"].as_array().unwrap();
    // Every decision that follows a message records what the message was.
    let decisions = s["decision_log"].as_array().unwrap();
    for turn in transcript
        .iter()
        .filter(|t| t["role"] == "user" && t["kind"] == "message")
    {
        let said = turn["content"].as_str().unwrap_or_default();
        let expected = if said == "What do you mean by that?" {
            "question_back"
        } else if NON_ANSWERS.contains(&said) {
            "non_answer"
        } else if said == "With a list" {
            "answer"
        } else {
            continue;
        };
        let decision = decisions
            .iter()
            .find(|d| d["turn_id"] == turn["turn_id"])
            .unwrap_or_else(|| panic!("a decision follows {said:?}"));
        assert_eq!(decision["input_class"], expected, "{said:?}: {decision}");
    }
    for (i, turn) in transcript.iter().enumerate() {
        let said = turn["content"].as_str().unwrap_or_default();
        if turn["role"] == "user" && NON_ANSWERS.contains(&said) {
            let next = s["decision_log"]
                .as_array()
                .unwrap()
                .iter()
                .find(|d| {
                    d["based_on_turn_id"] == turn["turn_id"] || d["turn_id"] == turn["turn_id"]
                })
                .map(|d| d["selected_action"]["action"].clone());
            assert_ne!(next, Some(json!("probe")), "turn {i}: {said:?} was probed");
        }
    }
}

/// A participant who corrects the summary: the correction replaces what the field held, in the
/// summary they confirm, in the state and in the results after the post-session extraction.
// Long by design: one interview driven to its end in a loop (a planning answer, other answers,
// widgets, the summary corrected once and then confirmed), a wait for the post-session extraction,
// then the results' field and summary checked to hold the correction.
async fn a_correction_to_the_summary_wins(store: Store) {
    let app = TestApp::spawn(store).await;
    let study_id = json_of(app.get("/api/studies", Some(RESEARCHER_TOKEN)).await).await["studies"]
        [0]["study_id"]
        .as_str()
        .unwrap()
        .to_string();
    let (session, token) = app.create_session("demo").await;
    let mut s = app.run(&session).await;
    app.answer(&session, &token, &s, json!({"accepted": true}))
        .await;
    s = app.run(&session).await;
    let mut corrected = false;
    let mut answered = 0;
    let mut guard = 0;
    while s["status"] != "completed" {
        guard += 1;
        assert!(guard < 60, "the interview ends: {s}");
        if !s["pending_interaction"].is_null() {
            let value = crate::widget_values::typical_value(&s["pending_interaction"]);
            app.answer(&session, &token, &s, value).await;
        } else if s["current_phase"] == "SUMMARY_CONFIRMATION" {
            let text = if corrected {
                "Yes, that's right"
            } else {
                "Correction: I don't use my phone app, I plan with a paper notebook"
            };
            corrected = true;
            app.post_message(&session, &token, text).await;
        } else {
            // The first answer is about planning; the others about something else.
            let text = if answered == 0 {
                "I plan everything in an app on my phone every Sunday evening"
            } else {
                "Throwing away vegetables that went bad in the fridge"
            };
            answered += 1;
            app.post_message(&session, &token, text).await;
        }
        s = app.run(&session).await;
    }
    assert!(corrected, "the summary was shown");
    // The post-session extraction runs after the completion: it must not undo the correction.
    for _ in 0..200 {
        if app.researcher_view(&session).await["current_phase"] == "END" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(app.researcher_view(&session).await["current_phase"], "END");
    let results = json_of(
        app.get(&paths::results(&study_id), Some(RESEARCHER_TOKEN))
            .await,
    )
    .await;
    let row = results["results"][0].clone();
    let fields = row["fields"].to_string();
    let method = row["fields"]["planning_method"]["value"].to_string();
    assert!(method.contains("paper notebook"), "{fields}");
    assert!(
        !method.contains("app on my phone"),
        "the correction replaced it: {method}"
    );
    assert!(
        row["summary"].to_string().contains("paper notebook"),
        "the summary and the fields agree: {row}"
    );
}

/// A wish to stop in the participant's own words is honoured like an end phrase: the summary
/// comes next, no further question, and the words feed no field.
async fn an_end_wish_in_own_words_goes_to_the_summary(store: Store) {
    const WISH: &str = "Sorry, I'd rather not continue, can we wrap up now please?";
    let app = TestApp::spawn(store).await;
    let (session, token) = app.create_session("demo").await;
    let s = app.run(&session).await;
    app.answer(&session, &token, &s, json!({"accepted": true}))
        .await;
    app.run(&session).await;
    let text = "I plan everything in an app on my phone every Sunday evening";
    app.post_message(&session, &token, text).await;
    let s = app.run(&session).await;
    assert_eq!(s["current_phase"], "ASK_OR_PROBE", "{s}");
    let res = app.post_message(&session, &token, WISH).await;
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let s = app.run(&session).await;
    assert_eq!(s["current_phase"], "SUMMARY_CONFIRMATION", "{s}");
    assert!(s["pending_interaction"].is_null());
    assert!(
        !s["extracted_fields"].to_string().contains("wrap up"),
        "{}",
        s["extracted_fields"]
    );
}

/// A model proposal the guards refuse stays in the decision log (FR-04-11): on the decision
/// carried out instead, with its action, rationale, model, prompt version and the refusal's
/// reason, the call's tokens on the decision; the model's judgement of the input is recorded.
// Long by design: one refused proposal checked field by field: a conclusion the guards refuse and
// the interview going on, then the refused action, its reason, rationale, model, prompt version and
// why it was refused, then the tokens, rationale and input class of the decision carried out
// instead.
async fn a_refused_proposal_stays_in_the_decision_log(store: Store) {
    use crate::scripted_model::{Reply, ANSWERING_MODEL};
    let llm = crate::llm::Llm::start(store).await;
    let (session, token, _) = llm
        .consented(vec![Reply::Tool(
            "ask_question",
            json!({"objective_id": "planning_habits", "message": "How do you plan?", "rationale": "open"}),
        )])
        .await;
    let unsafe_claim = Reply::Tool(
        "conclude",
        json!({"reason": "safety_triggered", "message": "We have to stop here.", "participant_input": "answer", "rationale": "I felt unsure about this answer"}),
    );
    let s = llm
        .say(
            &session,
            &token,
            "Every Sunday with a list on my phone",
            vec![unsafe_claim],
        )
        .await;
    assert_eq!(
        s["status"], "waiting_for_user",
        "the interview goes on: {s}"
    );
    let log = s["decision_log"].as_array().unwrap();
    let decision = log
        .iter()
        .find(|d| !d["refused_proposal"].is_null())
        .unwrap_or_else(|| panic!("the refused proposal is in the log: {log:?}"));
    let refused = &decision["refused_proposal"];
    assert_eq!(
        refused["proposed_action"]["action"], "conclude",
        "{refused}"
    );
    assert_eq!(refused["proposed_action"]["reason"], "safety_triggered");
    assert_eq!(refused["rationale"], "I felt unsure about this answer");
    assert_eq!(refused["model"], ANSWERING_MODEL);
    assert!(refused["prompt_version_id"]
        .as_str()
        .unwrap()
        .starts_with("llm-"));
    assert!(
        refused["reason"]
            .as_str()
            .unwrap()
            .contains("does not hold"),
        "{refused}"
    );
    assert!(
        decision["token_usage"]["total_tokens"].as_u64().unwrap() > 0,
        "{decision}"
    );
    assert!(
        decision["rationale"]
            .as_str()
            .unwrap()
            .starts_with("The runtime refused"),
        "{decision}"
    );
    assert_eq!(decision["input_class"], "answer", "{decision}");
    // The call is counted in the session's spend.
    assert!(
        s["decision_log"].to_string().contains(ANSWERING_MODEL),
        "{}",
        s["decision_log"]
    );
}

/// A question the participant declines is recorded as `refused` — no value, the refusal as
/// evidence — in the state, the results and `results.csv` (`__status`), distinct from a field
/// nothing was said about; no probe follows the refusal.
// Long by design: one session in order: a declined first question checked as refused (no value, its
// evidence, no probe), the interview driven to its end in a loop, a wait for results.csv, then its
// status columns and the summary checked.
async fn a_declined_question_is_recorded_as_refused(store: Store) {
    let app = TestApp::spawn(store).await;
    let mut study: Value =
        serde_json::from_str(include_str!("../../examples/demo-study.json")).unwrap();
    study["public_slug"] = json!("declined");
    let (study_id, _, _) = app.publish_study(&study).await;
    let (session, token) = app.create_session("declined").await;
    let mut s = app.run(&session).await;
    app.answer(&session, &token, &s, json!({"accepted": true}))
        .await;
    s = app.run(&session).await;
    assert_eq!(crate::helpers::last_assistant(&s), crate::llm::OPENING);
    app.post_message(&session, &token, "I'd rather not say.")
        .await;
    s = app.run(&session).await;
    let field = &s["extracted_fields"]["planning_method"];
    assert_eq!(field["status"], "refused", "{s}");
    assert!(field["value"].is_null(), "{field}");
    assert_eq!(field["confidence"], 1.0);
    assert_eq!(field["evidence_turn_ids"].as_array().map(Vec::len), Some(1));
    let probed = s["decision_log"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d["selected_action"]["action"] == "probe");
    assert!(!probed, "no probe after a refusal");
    let mut guard = 0;
    while s["status"] != "completed" {
        guard += 1;
        assert!(guard < 40, "the interview ends: {s}");
        if !s["pending_interaction"].is_null() {
            let value = crate::widget_values::typical_value(&s["pending_interaction"]);
            app.answer(&session, &token, &s, value).await;
        } else if s["current_phase"] == "SUMMARY_CONFIRMATION" {
            app.post_message(&session, &token, "Yes, that's right")
                .await;
        } else {
            app.post_message(&session, &token, "Vegetables go off before I use them")
                .await;
        }
        s = app.run(&session).await;
    }
    let mut csv = String::new();
    for _ in 0..100 {
        csv = app
            .get(
                &format!("/api/studies/{study_id}/results.csv"),
                Some(RESEARCHER_TOKEN),
            )
            .await
            .text()
            .await
            .unwrap();
        if csv.lines().count() > 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let rows = crate::research::parse_csv(&csv);
    let col = |name: &str| rows[0].iter().position(|c| c == name).unwrap();
    assert_eq!(rows[1][col("planning_method__status")], "refused", "{csv}");
    assert_eq!(rows[1][col("planning_method")], "", "{csv}");
    assert_eq!(
        rows[1][col("main_frustration__status")],
        "answered",
        "{csv}"
    );
    // What was declined is not in the summary either.
    let summary = s["summary"].as_str().unwrap_or_default();
    assert!(!summary.contains("rather not"), "{summary}");
}

/// The model's judgement of an input applies to what is extracted from it alongside: a remark
/// the model calls off-topic gives no field a value, even when the model's extraction sent with
/// the step put it in one; the class is on the decision.
async fn what_the_model_calls_off_topic_feeds_no_field(store: Store) {
    use crate::scripted_model::Reply;
    let llm = crate::llm::Llm::start(store).await;
    let (session, token, _) = llm
        .consented(vec![Reply::Tool(
            "ask_question",
            json!({"objective_id": "planning_habits", "message": "How do you plan?", "rationale": "open"}),
        )])
        .await;
    const REMARK: &str = "The weather has been lovely lately, we went to the coast";
    llm.model.push_extraction(Reply::Tool(
        "extract_fields",
        json!({"fields": [{"field_id": "planning_method", "value": REMARK, "confidence": 0.8, "evidence_turn_ids": ["t2"], "quote": REMARK}], "rationale": "what was said"}),
    ));
    let back = Reply::Tool(
        "ask_question",
        json!({"objective_id": "planning_habits", "message": "Coming back to groceries: how do you decide what to buy?", "participant_input": "off_topic", "rationale": "steer back"}),
    );
    let s = llm.say(&session, &token, REMARK, vec![back]).await;
    assert!(
        !s["extracted_fields"].to_string().contains("weather"),
        "{}",
        s["extracted_fields"]
    );
    let step = s["decision_log"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|d| d["selected_action"]["action"] == "ask_question")
        .unwrap()
        .clone();
    assert_eq!(step["input_class"], "off_topic", "{step}");
}

both_stores!(
    what_the_model_calls_off_topic_feeds_no_field,
    a_declined_question_is_recorded_as_refused,
    a_refused_proposal_stays_in_the_decision_log,
    an_end_wish_in_own_words_goes_to_the_summary,
    widget_answers_fill_the_fields_of_their_objective,
    non_answers_feed_no_field_and_end_the_probing,
    a_correction_to_the_summary_wins,
    views_of_an_older_format_are_rebuilt_at_start_up,
);
