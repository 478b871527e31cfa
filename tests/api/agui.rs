//! The AG-UI endpoint: a run per participant input, the interviewer's turn as AG-UI events,
//! interactions as interrupts answered through `resume`, bad input refused, CORS.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::both_stores;
use crate::helpers::paths;
use crate::helpers::{assert_error, Store, TestApp};

/// Posts a RunAgentInput; returns the AG-UI events of the run.
async fn run(app: &TestApp, session: &str, token: &str, input: Value) -> Vec<Value> {
    let res = app
        .client
        .post(app.url(&paths::agui(session)))
        .bearer_auth(token)
        .header("accept", "text/event-stream")
        .json(&input)
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.status(),
        StatusCode::OK,
        "{}",
        res.text().await.unwrap()
    );
    assert_eq!(res.headers()["content-type"], "text/event-stream");
    let body = res.text().await.unwrap();
    body.split("\n\n")
        .filter_map(|block| block.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

fn text_of(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT")
        .map(|e| e["delta"].as_str().unwrap())
        .collect()
}

fn input(session: &str, messages: Value, resume: Option<Value>) -> Value {
    let mut i = json!({"threadId": session, "runId": uuid::Uuid::new_v4().to_string(),
                       "messages": messages, "tools": [], "context": [], "state": {}});
    if let Some(r) = resume {
        i["resume"] = r;
    }
    i
}

// Long by design: one session driven over AG-UI run by run: connect (consent as the interrupt),
// resolve it (the opening question streams), send a user message and retry it (nothing written),
// cancel a widget's interrupt (skipped); each run's assertions sit right after it.
async fn an_interview_runs_over_ag_ui(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.create_session("demo").await;
    // The first run only connects: consent is the interrupt.
    let events = run(&app, &session, &token, input(&session, json!([]), None)).await;
    let t = types(&events);
    assert_eq!(t.first(), Some(&"RUN_STARTED"));
    assert_eq!(t.last(), Some(&"RUN_FINISHED"));
    assert!(t.contains(&"TOOL_CALL_START") && t.contains(&"STATE_SNAPSHOT"));
    let finished = events.last().unwrap();
    let interrupt = &finished["outcome"]["interrupts"][0];
    assert_eq!(finished["outcome"]["type"], "interrupt");
    assert_eq!(interrupt["reason"], "consent");
    assert!(interrupt["responseSchema"].is_object());
    let consent = interrupt["id"].as_str().unwrap().to_string();

    // Resolving it gives consent; the opening question streams as a text message.
    let resume =
        json!([{"interruptId": consent, "status": "resolved", "payload": {"accepted": true}}]);
    let events = run(
        &app,
        &session,
        &token,
        input(&session, json!([]), Some(resume)),
    )
    .await;
    let t = types(&events);
    assert_eq!(
        &t[..2],
        ["RUN_STARTED", "TEXT_MESSAGE_START"],
        "{events:#?}"
    );
    assert!(text_of(&events).starts_with("To start, could you walk me through"));
    assert_eq!(events.last().unwrap()["outcome"]["type"], "success");
    let snapshot = events
        .iter()
        .find(|e| e["type"] == "STATE_SNAPSHOT")
        .unwrap();
    assert_eq!(snapshot["snapshot"]["status"], "waiting_for_user");

    // A user message is the participant's next turn; running it again writes nothing.
    let messages = json!([{"id": "u-1", "role": "user", "content": "I use a list"}]);
    let events = run(
        &app,
        &session,
        &token,
        input(&session, messages.clone(), None),
    )
    .await;
    assert!(!text_of(&events).is_empty());
    let before = app.total_events().await;
    run(&app, &session, &token, input(&session, messages, None)).await;
    assert_eq!(
        app.total_events().await,
        before,
        "a retried run writes nothing"
    );

    // Cancelling an interrupt skips the widget.
    let s = app.drive_to_widget(&session, &token, "likert").await;
    let id = s["pending_interaction"]["interaction_id"].clone();
    let resume = json!([{"interruptId": id, "status": "cancelled"}]);
    let events = run(
        &app,
        &session,
        &token,
        input(&session, json!([]), Some(resume)),
    )
    .await;
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
    let s = app.researcher_view(&session).await;
    assert!(s["interaction_events"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["interaction_id"] == id && e["status"] == "skipped"));
    app.assert_stream_follows_the_rules(&session).await;
}

async fn bad_run_input_is_refused_and_writes_nothing(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.interviewing("demo").await;
    let path = paths::agui(&session);
    let before = app.total_events().await;
    let cases = [
        ("not json", "{".to_string(), "invalid_json"),
        ("no threadId", json!({"runId": "r", "messages": []}).to_string(), "invalid_body"),
        ("messages not a list", json!({"threadId": session, "runId": "r", "messages": {}}).to_string(), "invalid_body"),
        ("another thread", json!({"threadId": uuid::Uuid::new_v4(), "runId": "r", "messages": []}).to_string(), "invalid_thread_id"),
        ("empty run id", json!({"threadId": session, "runId": "", "messages": []}).to_string(), "invalid_run_id"),
        ("two resumes", json!({"threadId": session, "runId": "r", "messages": [], "resume": [
            {"interruptId": "a", "status": "resolved"}, {"interruptId": "b", "status": "resolved"}]}).to_string(), "invalid_resume"),
        ("bad resume status", json!({"threadId": session, "runId": "r", "messages": [], "resume": [
            {"interruptId": "a", "status": "maybe"}]}).to_string(), "invalid_body"),
    ];
    for (name, body, code) in cases {
        let res = app
            .send(reqwest::Method::POST, &path, Some(&token), Some(body))
            .await;
        let status = res.status();
        let body: Value = res.json().await.unwrap();
        assert_eq!(status, StatusCode::BAD_REQUEST, "{name}: {body}");
        assert!(
            code == "invalid_body" || body["error"]["code"] == code,
            "{name}: {body}"
        );
    }
    // A message while a widget waits is a conflict, answered before any stream starts.
    let s = app.drive_to_widget(&session, &token, "likert").await;
    let before_widget = app.total_events().await;
    let res = app
        .post(
            &path,
            Some(&token),
            &input(
                &session,
                json!([{"id": "u-9", "role": "user", "content": "hi"}]),
                None,
            ),
        )
        .await;
    assert_error(res, StatusCode::CONFLICT, "interaction_pending").await;
    assert_eq!(app.total_events().await, before_widget);
    assert!(before <= before_widget);
    assert!(!s["pending_interaction"].is_null());
}

async fn cors_allows_only_the_configured_origins(store: Store) {
    let app = TestApp::spawn_with(store, |s| {
        s.cors_allowed_origins = vec!["https://survey.example".into()];
    })
    .await;
    let (session, _) = app.create_session("demo").await;
    for (origin, allowed) in [
        ("https://survey.example", true),
        ("https://evil.example", false),
    ] {
        let res = app
            .client
            .request(reqwest::Method::OPTIONS, app.url(&paths::agui(&session)))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization, content-type",
            )
            .send()
            .await
            .unwrap();
        let header = res
            .headers()
            .get("access-control-allow-origin")
            .map(|v| v.to_str().unwrap().to_string());
        if allowed {
            assert_eq!(header.as_deref(), Some(origin));
        } else {
            assert_eq!(header, None);
        }
    }
}

/// What `@assistant-ui/react-ag-ui` sends for "answer in my own words instead": the history so
/// far, a `resume` cancelling the pending widget, and a new trailing user message. The skip and
/// the message are both recorded, in that order, as one turn, and the interviewer answers once.
// Long by design: one run as the client sends it: the history rebuilt from the transcript, the
// widget cancelled and a new message added; then the order, the skip, the single turn and the
// answer checked, then the same run retried as a conflict that writes nothing.
async fn a_resume_and_a_new_message_in_one_run_apply_both_in_order(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.interviewing("demo").await;
    let s = app.drive_to_widget(&session, &token, "likert").await;
    let widget = s["pending_interaction"]["interaction_id"]
        .as_str()
        .unwrap()
        .to_string();
    let history: Vec<Value> = s["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| json!({"id": t["turn_id"], "role": t["role"], "content": t["content"]}))
        .collect();
    let mut messages = history.clone();
    let own_words = "Honestly it depends on the week: some weeks I plan well, most weeks I do not";
    messages.push(json!({"id": "own-words-1", "role": "user", "content": own_words}));
    let turns_before = s["turn_count"].as_u64().unwrap();
    let resume = json!([{"interruptId": widget, "status": "cancelled"}]);
    let events = run(
        &app,
        &session,
        &token,
        input(&session, json!(messages), Some(resume)),
    )
    .await;
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED", "{events:?}");
    let s = app.run(&session).await;
    let turns = s["transcript"].as_array().unwrap();
    let last_user: Vec<&Value> = turns.iter().filter(|t| t["role"] == "user").collect();
    let n = last_user.len();
    assert!(n >= 2);
    assert_eq!(last_user[n - 2]["kind"], "interaction", "{s}");
    assert_eq!(last_user[n - 1]["content"], own_words, "{s}");
    let resolved = &s["interaction_events"];
    assert!(resolved.to_string().contains("skipped"), "{resolved}");
    assert_ne!(s["status"], "active", "the interviewer answered: {s}");
    assert_eq!(
        s["turn_count"].as_u64().unwrap(),
        turns_before + 1,
        "one turn: {s}"
    );

    // The same run again (a retry) writes nothing more.
    let before = app.total_events().await;
    let messages2 = messages.clone();
    let res = app
        .client
        .post(app.url(&paths::agui(&session)))
        .bearer_auth(&token)
        .json(&input(
            &session,
            json!(messages2),
            Some(json!([{"interruptId": widget, "status": "cancelled"}])),
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CONFLICT);
    assert_eq!(app.total_events().await, before);
}

/// A message id reused with other text is refused, over REST and over AG-UI; the same id with
/// the same text answers the first answer and writes nothing.
async fn a_message_id_reused_with_other_text_is_a_conflict(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.interviewing("demo").await;
    let path = paths::messages(&session);
    let send = |content: &'static str| {
        let body = json!({"content": content, "client_message_id": "k"});
        let (app, path, token) = (&app, path.clone(), token.clone());
        async move { app.post(&path, Some(&token), &body).await }
    };
    let first = send("We plan on Sunday evenings with a list").await;
    assert_eq!(first.status(), StatusCode::ACCEPTED);
    let first: Value = first.json().await.unwrap();
    app.run(&session).await;
    let before = app.total_events().await;
    let again: Value = send("We plan on Sunday evenings with a list")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(again["turn_id"], first["turn_id"]);
    let other = send("Something else entirely").await;
    let body = assert_error(other, StatusCode::CONFLICT, "idempotency_key_reused").await;
    assert_eq!(body["error"]["details"]["client_message_id"], "k");
    assert_eq!(app.total_events().await, before, "nothing written");

    // Over AG-UI: the message id is the key.
    let s = app.run(&session).await;
    if s["status"] == "waiting_for_user" {
        let msg = |text: &str| json!([{"id": "agui-k", "role": "user", "content": text}]);
        run(
            &app,
            &session,
            &token,
            input(
                &session,
                msg("A long and concrete answer about our weekly shop"),
                None,
            ),
        )
        .await;
        app.run(&session).await;
        let before = app.total_events().await;
        let res = app
            .client
            .post(app.url(&paths::agui(&session)))
            .bearer_auth(&token)
            .json(&input(&session, msg("Not what I said before"), None))
            .send()
            .await
            .unwrap();
        assert_error(res, StatusCode::CONFLICT, "idempotency_key_reused").await;
        assert_eq!(app.total_events().await, before);
    } else {
        panic!("the interviewer did not wait for the participant: {s}");
    }
}

/// A whole interview over AG-UI alone: every run ends where the session then stands — with the
/// widget as its interrupt when one waits, even one the interviewer committed in one go right
/// after the participant's message (it can be over before the run first looks).
async fn every_run_ends_where_the_session_stands(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.create_session("demo").await;
    let mut next = input(&session, json!([]), None);
    let mut widgets = 0;
    for turn in 0..40 {
        let events = run(&app, &session, &token, next).await;
        let finished = events.last().unwrap();
        assert_eq!(finished["type"], "RUN_FINISHED", "{events:#?}");
        let s = app.researcher_view(&session).await;
        let pending = &s["pending_interaction"];
        if !pending.is_null() {
            assert_eq!(
                finished["outcome"]["type"], "interrupt",
                "{finished} but {s}"
            );
            let id = &finished["outcome"]["interrupts"][0]["id"];
            assert_eq!(id, &pending["interaction_id"]);
            widgets += 1;
            let value = crate::widget_values::typical_value(pending);
            let resume = json!([{"interruptId": id, "status": "resolved", "payload": value}]);
            next = input(&session, json!([]), Some(resume));
            continue;
        }
        assert_eq!(finished["outcome"]["type"], "success", "{finished}");
        assert_eq!(
            finished["result"]["status"], s["status"],
            "{finished} but {s}"
        );
        if s["status"] == "completed" {
            assert!(widgets >= 3, "{widgets} widgets");
            return;
        }
        let text = if s["current_phase"] == "SUMMARY_CONFIRMATION" {
            "yes"
        } else {
            "We plan on Sunday evenings with a list on the phone"
        };
        let message = json!([{"id": format!("m-{turn}"), "role": "user", "content": text}]);
        next = input(&session, message, None);
    }
    panic!("the interview did not end over AG-UI");
}

/// A client that reloads mid-interview (a run with no messages) first gets the session's
/// conversation as one MESSAGES_SNAPSHOT: every earlier message once, in order, each widget as a
/// tool call with its answer as the call's result, the waiting widget among them and not
/// announced again; a client that holds it all gets none.
// Long by design: one reload scenario in order — the snapshot read back against the transcript,
// a client holding everything, a reused id with other words, a reload that answers the widget —
// each run's checks right after it.
async fn a_reload_gets_the_conversation_once(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.interviewing("demo").await;
    let s = app.drive_to_widget(&session, &token, "likert").await;
    let transcript = s["transcript"].as_array().unwrap().clone();
    let events = run(&app, &session, &token, input(&session, json!([]), None)).await;
    let t = types(&events);
    assert_eq!(&t[..2], ["RUN_STARTED", "MESSAGES_SNAPSHOT"], "{events:#?}");
    assert_eq!(t.iter().filter(|e| **e == "MESSAGES_SNAPSHOT").count(), 1);
    // The waiting widget is announced by the run, once, so its interrupt has a message to
    // belong to; it is not in the snapshot.
    assert_eq!(
        t.iter().filter(|e| **e == "TOOL_CALL_START").count(),
        1,
        "{t:?}"
    );
    let messages = events[1]["messages"].as_array().unwrap().clone();
    let ids: Vec<&str> = messages.iter().map(|m| m["id"].as_str().unwrap()).collect();
    let once: std::collections::HashSet<&&str> = ids.iter().collect();
    assert_eq!(once.len(), ids.len(), "{ids:?}");
    // Every message of the transcript, in order, in its words.
    let said: Vec<(&Value, &Value)> = messages
        .iter()
        .filter(|m| m["role"] != "tool" && m["content"].is_string())
        .map(|m| (&m["role"], &m["content"]))
        .collect();
    let expected: Vec<(&Value, &Value)> = transcript
        .iter()
        .filter(|t| t["kind"] == "message")
        .map(|t| (&t["role"], &t["content"]))
        .collect();
    assert!(expected.len() >= 2, "{transcript:?}");
    assert_eq!(said, expected);
    // Each result follows the widget it answers; the waiting widget is the run's interrupt.
    let results: Vec<&Value> = messages.iter().filter(|m| m["role"] == "tool").collect();
    assert!(!results.is_empty(), "{messages:#?}");
    for r in results {
        let result: Value = serde_json::from_str(r["content"].as_str().unwrap()).unwrap();
        assert!(["submitted", "skipped"].contains(&result["status"].as_str().unwrap()));
        let at = ids
            .iter()
            .position(|id| *id == r["id"].as_str().unwrap())
            .unwrap();
        assert!(messages[..at]
            .iter()
            .any(|m| m["toolCalls"][0]["id"] == r["toolCallId"]));
    }
    let pending = &s["pending_interaction"]["tool_call_id"];
    assert!(!messages.iter().any(|m| &m["toolCalls"][0]["id"] == pending));
    let call = events
        .iter()
        .find(|e| e["type"] == "TOOL_CALL_START")
        .unwrap();
    assert_eq!(&call["toolCallId"], pending);
    let finished = events.last().unwrap();
    assert_eq!(&finished["outcome"]["interrupts"][0]["toolCallId"], pending);

    // A client that holds the whole conversation gets no snapshot.
    let events = run(
        &app,
        &session,
        &token,
        input(&session, json!(messages), None),
    )
    .await;
    assert!(
        !types(&events).contains(&"MESSAGES_SNAPSHOT"),
        "{events:#?}"
    );
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");

    // The same trailing message id with other words is a conflict, and writes nothing.
    let at = messages.iter().rposition(|m| m["role"] == "user").unwrap();
    let mut changed = messages[..=at].to_vec();
    changed[at]["content"] = json!("Something else entirely");
    let before = app.total_events().await;
    let res = app
        .client
        .post(app.url(&paths::agui(&session)))
        .bearer_auth(&token)
        .json(&input(&session, json!(changed), None))
        .send()
        .await
        .unwrap();
    assert_error(res, StatusCode::CONFLICT, "idempotency_key_reused").await;
    assert_eq!(app.total_events().await, before);

    // A reloaded client that answers the waiting widget in its first run gets the widget in
    // the snapshot: the run answers it, so it would announce it nowhere else.
    let interaction = &s["pending_interaction"]["interaction_id"];
    let resume = json!([{"interruptId": interaction, "status": "resolved", "payload": 4}]);
    let events = run(
        &app,
        &session,
        &token,
        input(&session, json!([]), Some(resume)),
    )
    .await;
    assert_eq!(events[1]["type"], "MESSAGES_SNAPSHOT", "{events:#?}");
    let snapshot = events[1]["messages"].as_array().unwrap();
    assert!(snapshot.iter().any(|m| &m["toolCalls"][0]["id"] == pending));
    // … and the run does not announce it again.
    assert!(events
        .iter()
        .all(|e| e["type"] != "TOOL_CALL_START" || &e["toolCallId"] != pending));
}

both_stores!(
    a_reload_gets_the_conversation_once,
    every_run_ends_where_the_session_stands,
    a_resume_and_a_new_message_in_one_run_apply_both_in_order,
    a_message_id_reused_with_other_text_is_a_conflict,
    an_interview_runs_over_ag_ui,
    bad_run_input_is_refused_and_writes_nothing,
    cors_allows_only_the_configured_origins,
);
