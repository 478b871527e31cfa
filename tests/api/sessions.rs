//! The participant contract: create, message, submit, read; tokens; idempotency; the log.

use interview_session::commands as cmd;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::both_stores;
use crate::helpers::paths;
use crate::helpers::{assert_error, json_of, study_definition, Store, TestApp, RESEARCHER_TOKEN};
use interview_runtime::command::store::Actor;

/// Behind https (the public URL says so) the participant's cookie is sent over https only.
async fn the_participant_cookie_is_secure_behind_https(store: Store) {
    let app = TestApp::spawn_with(store, |s| {
        s.public_base_url = Some("https://interviews.example.org".into())
    })
    .await;
    let res = app
        .post("/api/public/studies/demo/sessions", None, &json!({}))
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let cookie = res.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(
        cookie.contains("Secure") && cookie.contains("HttpOnly"),
        "{cookie}"
    );
}

async fn creating_a_session_answers_the_contract(store: Store) {
    let app = TestApp::spawn(store).await;
    let (_, slug, published) = app.publish_study(&study_definition()).await;
    let res = app
        .post(
            &paths::join(&slug),
            None,
            &json!({"participant_ref": "panel-42"}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let cookie = res
        .headers()
        .get("set-cookie")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        cookie.starts_with("participant_token=") && cookie.contains("HttpOnly"),
        "{cookie}"
    );
    assert!(!cookie.contains("Secure"), "plain http: {cookie}");
    let body = json_of(res).await;
    assert_eq!(body["status"], "created");
    assert!(uuid::Uuid::parse_str(body["session_id"].as_str().unwrap()).is_ok());
    assert!(body["participant_token"].as_str().unwrap().len() >= 32);
    assert_eq!(body["config_versions"], published["config_versions"]);

    let session = body["session_id"].as_str().unwrap();
    let researcher = json_of(
        app.get(&paths::session(session), Some(RESEARCHER_TOKEN))
            .await,
    )
    .await;
    assert_eq!(researcher["participant_ref"], "panel-42");
}

async fn a_session_reads_back_with_every_contract_key(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.create_session("demo").await;
    app.run(&session).await;
    let body = json_of(app.get(&paths::session(&session), Some(&token)).await).await;
    for key in [
        "session_id",
        "status",
        "current_phase",
        "turn_count",
        "config_versions",
        "transcript",
        "pending_interaction",
    ] {
        assert!(body.get(key).is_some(), "missing {key}: {body}");
    }
    // The interviewer started on its own and asks for consent first.
    assert_eq!(body["pending_interaction"]["type"], "consent");
    assert_eq!(body["current_phase"], "CONSENT_OR_SCREENING");
    assert_eq!(body["status"], "waiting_for_tool");
    for researcher_only in [
        "tool_calls",
        "interaction_events",
        "extracted_fields",
        "decision_log",
    ] {
        assert!(
            body.get(researcher_only).is_none(),
            "participants must not see {researcher_only}"
        );
    }
    let full = json_of(
        app.get(&paths::session(&session), Some(RESEARCHER_TOKEN))
            .await,
    )
    .await;
    for key in [
        "tool_calls",
        "interaction_events",
        "extracted_fields",
        "decision_log",
    ] {
        assert!(full.get(key).is_some(), "researchers see {key}: {full}");
    }
}

async fn a_message_is_accepted_and_joins_the_transcript(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.interviewing("demo").await;
    let res = app
        .post_message(&session, &token, "I plan on Sundays with a paper list.")
        .await;
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let body = json_of(res).await;
    assert_eq!(body["status"], "active");
    let turn_id = body["turn_id"].as_str().unwrap().to_string();
    let read = app.run(&session).await;
    assert_eq!(read["turn_count"], 1);
    let transcript = read["transcript"].as_array().unwrap();
    let turn = transcript
        .iter()
        .find(|t| t["role"] == "user" && t["kind"] == "message")
        .unwrap();
    assert_eq!(turn["turn_id"], turn_id.as_str());
    assert_eq!(turn["role"], "user");
    assert_eq!(turn["content"], "I plan on Sundays with a paper list.");
}

async fn a_retried_message_answers_the_same_and_writes_once(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.interviewing("demo").await;
    let path = paths::messages(&session);
    let body = json!({"content": "hello", "client_message_id": "m-1"});
    let first = json_of(app.post(&path, Some(&token), &body).await).await;
    app.run(&session).await;
    let events = app.total_events().await;
    let second = app.post(&path, Some(&token), &body).await;
    assert_eq!(second.status(), StatusCode::ACCEPTED);
    assert_eq!(json_of(second).await["turn_id"], first["turn_id"]);
    assert_eq!(app.total_events().await, events);
    // Retries racing each other still write once.
    let retry = json!({"content": "again", "client_message_id": "m-2"});
    let racing = (0..8).map(|_| app.post(&path, Some(&token), &retry));
    let answers = futures_util::future::join_all(racing).await;
    let mut turn_ids = Vec::new();
    for res in answers {
        assert_eq!(res.status(), StatusCode::ACCEPTED);
        turn_ids.push(json_of(res).await["turn_id"].clone());
    }
    turn_ids.dedup();
    assert_eq!(turn_ids.len(), 1);
    let read = json_of(app.get(&paths::session(&session), Some(&token)).await).await;
    let messages = read["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["role"] == "user" && t["kind"] == "message")
        .count();
    assert_eq!(messages, 2);
}

async fn the_token_also_works_as_query_parameter_and_cookie(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.create_session("demo").await;
    let by_query = app
        .client
        .get(app.url(&format!("/api/sessions/{session}?token={token}")))
        .send()
        .await
        .unwrap();
    assert_eq!(by_query.status(), StatusCode::OK);
    let by_cookie = app
        .client
        .get(app.url(&paths::session(&session)))
        .header("cookie", format!("participant_token={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(by_cookie.status(), StatusCode::OK);
}

// Long by design: one widget's life in order: shown with its schema, a message refused while it
// waits, a bad value and an unknown widget refused with nothing written, the answer accepted, a
// second answer refused, then the tool call, interaction event and transcript turn it left checked.
async fn an_interaction_is_submitted_once_and_validated(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.interviewing("demo").await;
    let read = app.drive_to_widget(&session, &token, "single_choice").await;
    let id = read["pending_interaction"]["interaction_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(read["status"], "waiting_for_tool");
    let options = read["pending_interaction"]["options"].as_array().unwrap();
    let (first, second) = (options[0]["id"].clone(), options[1]["id"].clone());
    assert_eq!(
        read["pending_interaction"]["value_schema"]["enum"],
        json!(options.iter().map(|o| o["id"].clone()).collect::<Vec<_>>())
    );

    // A message while the widget is pending is refused and names it.
    let before = app.total_events().await;
    let body = assert_error(
        app.post_message(&session, &token, "hi").await,
        StatusCode::CONFLICT,
        "interaction_pending",
    )
    .await;
    assert_eq!(
        body["error"]["details"]["pending_interaction_id"],
        id.as_str()
    );

    let submit = paths::submit(&session, &id);
    let bad = app
        .post(
            &submit,
            Some(&token),
            &json!({"status": "submitted", "value": "zzz"}),
        )
        .await;
    let body = assert_error(bad, StatusCode::UNPROCESSABLE_ENTITY, "invalid_value").await;
    assert_eq!(body["error"]["details"]["field"], "value");
    let unknown = app
        .post(
            &format!("/api/sessions/{session}/interactions/nope/submit"),
            Some(&token),
            &json!({"status": "skipped"}),
        )
        .await;
    assert_error(unknown, StatusCode::NOT_FOUND, "interaction_not_found").await;
    assert_eq!(app.total_events().await, before);

    let ok = app
        .post(
            &submit,
            Some(&token),
            &json!({"status": "submitted", "value": second, "client_context": {"ms": 1200}}),
        )
        .await;
    assert_eq!(ok.status(), StatusCode::OK);
    assert_eq!(json_of(ok).await, json!({"ok": true, "status": "active"}));
    let again = app
        .post(
            &submit,
            Some(&token),
            &json!({"status": "submitted", "value": first}),
        )
        .await;
    assert_error(again, StatusCode::CONFLICT, "interaction_already_answered").await;

    let full = app.run(&session).await;
    let call = full["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["tool_input"]["interaction_id"] == id.as_str())
        .unwrap()
        .clone();
    assert_eq!(call["tool_name"], "render_interaction");
    assert_eq!(call["tool_result"]["value"], second);
    let event = full["interaction_events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["interaction_id"] == id.as_str() && e["status"] == "submitted");
    assert!(event.is_some(), "{full}");
    let answer = full["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["interaction_id"] == id.as_str() && t["role"] == "user")
        .unwrap()
        .clone();
    assert_eq!(answer["content"], options[1]["label"]);
    assert_eq!(answer["kind"], "interaction");
}

/// "None of these fit": the widget skipped and the participant's own words, in one request,
/// written in that order as one turn; a retry writes nothing more.
async fn a_widget_is_skipped_for_own_words_in_one_request(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.interviewing("demo").await;
    let read = app.drive_to_widget(&session, &token, "single_choice").await;
    let id = read["pending_interaction"]["interaction_id"]
        .as_str()
        .unwrap()
        .to_string();
    let words = "None of those: we shop at the Saturday market and decide there";
    let body = json!({"status": "skipped",
                      "message": {"content": words, "client_message_id": "own-words-1"}});
    let ok = app
        .post(&paths::submit(&session, &id), Some(&token), &body)
        .await;
    assert_eq!(ok.status(), StatusCode::OK);
    app.run(&session).await; // the interviewer has had its turn
    let after = app.total_events().await;
    let again = app
        .post(&paths::submit(&session, &id), Some(&token), &body)
        .await;
    assert_error(again, StatusCode::CONFLICT, "interaction_already_answered").await;
    assert_eq!(app.total_events().await, after, "a retry writes nothing");

    let full = app.run(&session).await;
    let skipped = full["interaction_events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["interaction_id"] == id.as_str() && e["status"] == "skipped");
    assert!(skipped.is_some(), "{full}");
    let turns = full["transcript"].as_array().unwrap();
    let skip_at = turns
        .iter()
        .position(|t| t["interaction_id"] == id.as_str() && t["role"] == "user")
        .unwrap();
    let said_at = turns.iter().position(|t| t["content"] == words).unwrap();
    assert_eq!(
        said_at,
        skip_at + 1,
        "the words follow the skip: {turns:#?}"
    );
    assert_eq!(turns[said_at]["kind"], "message");
}

async fn parallel_submits_of_one_interaction_succeed_once(store: Store) {
    // Many racing submits on purpose: the per-session input rate is not what is tested.
    let app = TestApp::spawn_with(store, |s| s.inputs_per_session_per_minute = 0).await;
    let (session, token) = app.interviewing("demo").await;
    let read = app.drive_to_widget(&session, &token, "single_choice").await;
    let id = read["pending_interaction"]["interaction_id"]
        .as_str()
        .unwrap();
    let submit = paths::submit(&session, id);
    let value = read["pending_interaction"]["options"][0]["id"].clone();
    let answer = json!({"status": "submitted", "value": value});
    let attempts = (0..50).map(|_| app.post(&submit, Some(&token), &answer));
    let statuses: Vec<StatusCode> = futures_util::future::join_all(attempts)
        .await
        .iter()
        .map(|r| r.status())
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == StatusCode::OK).count(),
        1,
        "{statuses:?}"
    );
    assert!(
        statuses
            .iter()
            .all(|s| *s == StatusCode::OK || *s == StatusCode::CONFLICT),
        "{statuses:?}"
    );
    let events = interview_projections::read::events(app.db(), &session)
        .await
        .unwrap();
    assert_eq!(
        events
            .iter()
            .filter(|e| e.1 == "interaction.submitted" && e.2["interaction_id"] == id)
            .count(),
        1
    );
}

async fn an_ended_session_refuses_messages_and_submits_with_410(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.create_session("demo").await;
    let s = app.run(&session).await;
    let consent = s["pending_interaction"]["interaction_id"]
        .as_str()
        .unwrap()
        .to_string();
    app.answer(&session, &token, &s, json!({"accepted": false}))
        .await;
    let s = app.run(&session).await;
    assert_eq!(s["end_reason"], "consent_declined");
    let before = app.total_events().await;
    let body = assert_error(
        app.post_message(&session, &token, "hello?").await,
        StatusCode::GONE,
        "session_terminal",
    )
    .await;
    assert_eq!(body["error"]["details"]["status"], "abandoned");
    let submit = app
        .post(
            &paths::submit(&session, &consent),
            Some(&token),
            &json!({"status": "skipped"}),
        )
        .await;
    assert_error(submit, StatusCode::GONE, "session_terminal").await;
    assert_eq!(app.total_events().await, before);
    let read = json_of(app.get(&paths::session(&session), Some(&token)).await).await;
    assert_eq!(read["status"], "abandoned");
    assert_eq!(read["pending_interaction"], Value::Null);
}

async fn concurrent_sessions_never_surface_a_database_error(store: Store) {
    let app = TestApp::spawn(store).await;
    let mut sessions = Vec::new();
    for _ in 0..6 {
        sessions.push(app.interviewing("demo").await);
    }
    // Each session takes one message per turn; every session's turn goes in parallel, and
    // each message is sent three times at once (a client retrying).
    for i in 0..3 {
        let posts = sessions
            .iter()
            .flat_map(|(s, t)| (0..3).map(move |_| (s.clone(), t.clone(), i)));
        let results = futures_util::future::join_all(posts.map(|(s, t, i)| {
        let app = &app;
        async move {
            app.post(
                &paths::messages(&s),
                Some(&t),
                &json!({"content": format!("We shop on day {i} with a long list and a plan"), "client_message_id": format!("c{i}")}),
            )
            .await
        }
    }))
    .await;
        for res in results {
            assert_eq!(res.status(), StatusCode::ACCEPTED);
        }
        // A widget may follow an answer: answer it so the next message is the participant's turn.
        for (s, t) in &sessions {
            let mut view = app.run(s).await;
            while !view["pending_interaction"].is_null() {
                let value = crate::helpers::typical_value(&view["pending_interaction"]);
                app.answer(s, t, &view, value).await;
                view = app.run(s).await;
            }
            assert_eq!(view["status"], "waiting_for_user", "{view}");
        }
    }
    for (s, t) in &sessions {
        let read = json_of(app.get(&paths::session(s), Some(t)).await).await;
        assert!(read["turn_count"].as_u64().unwrap() >= 3, "{read}");
        app.assert_stream_follows_the_rules(s).await;
    }
}

// Long by design: one message sent with a request id, then every stored event checked in turn: its
// type, time and actor, the request id on the message, each row's version, hash and metadata, the
// chain verified to the last hash, and no token stored.
async fn every_event_carries_time_actor_request_id_and_a_verified_chain(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.interviewing("demo").await;
    let res = app
        .client
        .post(app.url(&paths::messages(&session)))
        .bearer_auth(&token)
        .header("x-request-id", "req-abc-123")
        .json(&json!({"content": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers().get("x-request-id").unwrap(), "req-abc-123");
    app.run(&session).await;
    let events = interview_projections::read::events(app.db(), &session)
        .await
        .unwrap();
    for (_, event_type, payload, metadata) in &events {
        assert_eq!(payload["type"], event_type.as_str());
        assert!(payload["at"].as_str().is_some());
        let actor = metadata["actor"].as_str().unwrap();
        match event_type.as_str() {
            "participant.message.created" | "interaction.submitted" | "consent.recorded" => {
                assert_eq!(actor, "participant", "{event_type}")
            }
            "agent.message.started" | "agent.decision.recorded" | "interaction.rendered" => {
                assert_eq!(actor, "agent", "{event_type}")
            }
            _ => {}
        }
    }
    let message = events
        .iter()
        .find(|e| e.1 == "participant.message.created" && e.2["content"] == "hello")
        .unwrap();
    assert_eq!(message.3["request_id"], "req-abc-123");
    // The chain over the rows as stored (version 2: the hash in its own column).
    let rows = interview_projections::log::all_rows(app.db(), &session)
        .await
        .unwrap();
    // Version 2, or 3 for a command's later events (what the one before says left out).
    assert!(rows
        .iter()
        .all(|r| ["2", "3"].contains(&r.event_version.as_str())
            && r.payload.get("hash").is_none()
            && r.hash.as_ref().is_some_and(|h| h.len() == 32)));
    // A command's metadata is stored on its first event only; the researcher route above showed
    // every later event with its command's actor and request id.
    assert!(rows
        .iter()
        .all(|r| r.metadata.get("request_id").is_some() || r.metadata == json!({})));
    assert!(rows.iter().any(|r| r.metadata == json!({})));
    assert!(rows
        .iter()
        .any(|r| r.event_version == "3" && r.payload.get("at").is_none()));
    assert!(rows
        .iter()
        .all(|r| r.event_version != "3" || r.metadata == json!({})));
    let head = interview_session::chain::verify_chain(rows.iter().map(|r| r.chain())).unwrap();
    assert_eq!(head, events.last().unwrap().2["hash"].as_str().unwrap());
    assert!(
        !events[0].2.to_string().contains(&token),
        "the token itself is never stored"
    );
}

async fn views_catch_up_after_a_lost_projection(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.interviewing("demo").await;
    app.post_message(&session, &token, "one").await;
    let live = app.run(&session).await;
    // Simulate a crash between commit and projection: forget the views.
    interview_projections::on_db!(write(app.db()), |pool| {
        sqlx::query("DELETE FROM transcript")
            .execute(pool)
            .await
            .unwrap();
        sqlx::query("UPDATE session_state SET last_seq = 0, state = '{}'")
            .execute(pool)
            .await
            .unwrap();
    });
    let applied = app.state.projector.catch_up().await.unwrap();
    assert!(applied >= 3, "{applied}");
    let read = json_of(app.get(&paths::session(&session), Some(&token)).await).await;
    assert_eq!(read["turn_count"], 1);
    assert_eq!(read["transcript"], live["transcript"]);
    assert!(read["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["content"] == "one"));
}

/// A session whose views are gone altogether (no state row) is found by the catch-up too.
async fn a_session_without_views_is_caught_up(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.interviewing("demo").await;
    app.post_message(&session, &token, "one").await;
    let live = app.run(&session).await;
    interview_projections::on_db!(write(app.db()), |pool| {
        for table in ["transcript", "session_state"] {
            sqlx::query(&format!("DELETE FROM {table} WHERE session_id = $1"))
                .bind(&session)
                .execute(pool)
                .await
                .unwrap();
        }
    });
    let applied = app.state.projector.catch_up().await.unwrap();
    assert!(applied >= 3, "{applied}");
    let read = app.researcher_view(&session).await;
    assert_eq!(read["transcript"], live["transcript"]);
    assert_eq!(read["decision_log"], live["decision_log"]);
    assert_eq!(read["turn_count"], 1);
}

/// The projector keeps recently written views in memory and starts a command's fold from them;
/// when the stored views were reset behind its back, the next command must fold from the log.
async fn a_command_after_views_were_reset_folds_them_from_the_log(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.interviewing("demo").await;
    app.post_message(&session, &token, "one").await;
    app.run(&session).await;
    interview_projections::on_db!(write(app.db()), |pool| {
        sqlx::query("DELETE FROM transcript")
            .execute(pool)
            .await
            .unwrap();
        sqlx::query("UPDATE session_state SET last_seq = 0, state = '{}'")
            .execute(pool)
            .await
            .unwrap();
    });
    // Straight to the store: the HTTP route would refuse the token of a reset view.
    let command = interview_session::SessionCommand::PostMessage(cmd::PostMessage {
        turn_id: uuid::Uuid::new_v4(),
        client_message_id: None,
        content: "two".into(),
        at: chrono::Utc::now(),
    });
    app.state
        .store
        .execute(&session, command, Actor::Participant, "test")
        .await
        .unwrap();
    let live = json_of(app.get(&paths::session(&session), Some(&token)).await).await;
    let contents: Vec<&str> = live["transcript"]
        .as_array()
        .unwrap_or_else(|| panic!("{live}"))
        .iter()
        .filter(|t| t["role"] == "user" && t["kind"] == "message")
        .map(|t| t["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents, ["one", "two"]);
    assert_eq!(live["turn_count"], 2, "{live}");
}

/// Two command sides on one database (as two processes would be) write to one session at once,
/// while other sessions commit alongside (on SQLite, in the same group-commit batches): every
/// acknowledged command is in the log exactly once, nothing else is, and the views agree.
// Long by design: a second command side built on the same database, two writers racing on one
// session while four others commit alongside, then each session's log and view checked to hold
// exactly its acknowledged commands.
async fn racing_writers_lose_cleanly_and_views_agree(store: Store) {
    use interview_runtime::command::store::SessionStore;
    use std::sync::Arc;
    let app = TestApp::spawn(store).await;
    let (contested, _) = app.interviewing("demo").await;
    let mut others = Vec::new();
    for _ in 0..4 {
        others.push(app.interviewing("demo").await.0);
    }
    let projector = interview_projections::Projector::new(app.db().clone()).with_group_commit();
    let second = Arc::new(SessionStore::new(
        app.db(),
        Arc::new(projector),
        Arc::new(interview_runtime::live::stream_hub::StreamHub::default()),
        Vec::new(),
        app.state.data_kek.clone(),
    ));
    let record = |n: usize| {
        interview_session::SessionCommand::RecordError(cmd::RecordError {
            source: "test".into(),
            code: format!("c{n}"),
            message: "racing".into(),
            at: chrono::Utc::now(),
        })
    };
    let writers = (0..2).map(|w| {
        let store = if w == 0 {
            app.state.store.clone()
        } else {
            second.clone()
        };
        let contested = contested.clone();
        async move {
            let mut acknowledged = 0;
            for n in 0..8 {
                if store
                    .execute(&contested, record(n), Actor::System, "test")
                    .await
                    .is_ok()
                {
                    acknowledged += 1;
                }
            }
            acknowledged
        }
    });
    let bystanders = others.iter().map(|id| {
        let store = app.state.store.clone();
        async move {
            for n in 0..8 {
                store
                    .execute(id, record(n), Actor::System, "test")
                    .await
                    .expect("an uncontested command commits");
            }
        }
    });
    let (acknowledged, _) = tokio::join!(
        futures_util::future::join_all(writers),
        futures_util::future::join_all(bystanders)
    );
    let acknowledged: usize = acknowledged.into_iter().sum();
    assert!(acknowledged >= 8, "{acknowledged}");
    for (id, expected) in
        std::iter::once((&contested, acknowledged)).chain(others.iter().map(|o| (o, 8)))
    {
        let log = json_of(app.get(&paths::events(id), Some(RESEARCHER_TOKEN)).await).await;
        let recorded = log["events"]
            .as_array()
            .unwrap_or_else(|| panic!("{log}"))
            .iter()
            .filter(|e| e["event_type"] == "error.recorded" && e["payload"]["source"] == "test")
            .count();
        assert_eq!(recorded, expected, "session {id}");
        let view = app.researcher_view(id).await;
        let in_view = view["errors"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["source"] == "test")
            .count();
        assert_eq!(in_view, expected, "session {id}: {view}");
    }
}

/// The command side keeps folded sessions and does not read the log before a command. When
/// another process moved a session on, a command refused on the kept state must be judged
/// again on the log's: here a participant's message, refused on "the interviewer's turn" that
/// the other process has already answered.
async fn a_command_refused_on_kept_state_is_judged_again_on_the_log(store: Store) {
    use interview_runtime::command::store::SessionStore;
    use interview_runtime::interviewer::Interviewer;
    use interview_runtime::live::stream_hub::StreamHub;
    use std::sync::Arc;
    let app = TestApp::spawn(store).await;
    let (session, _) = app.interviewing("demo").await;
    let message = |text: &str| {
        interview_session::SessionCommand::PostMessage(cmd::PostMessage {
            turn_id: uuid::Uuid::new_v4(),
            client_message_id: None,
            content: text.into(),
            at: chrono::Utc::now(),
        })
    };
    // Straight to the store: no interviewer run is triggered here, so this process keeps the
    // session as "the interviewer's turn".
    app.state
        .store
        .execute(
            &session,
            message("We cook on Sundays"),
            Actor::Participant,
            "t1",
        )
        .await
        .unwrap();
    // Another process answers it.
    let hub = Arc::new(StreamHub::default());
    let projector = interview_projections::Projector::new(app.db().clone()).with_group_commit();
    let other_store = Arc::new(SessionStore::new(
        app.db(),
        Arc::new(projector),
        hub.clone(),
        Vec::new(),
        app.state.data_kek.clone(),
    ));
    let other = Interviewer::new(app.db().clone(), other_store, hub, None);
    other.run(&session).await.unwrap();
    assert_eq!(
        app.researcher_view(&session).await["status"],
        "waiting_for_user"
    );
    // This process takes the participant's next message.
    app.state
        .store
        .execute(&session, message("With a list"), Actor::Participant, "t2")
        .await
        .expect("judged on the log's state, the message is welcome");
    let view = app.researcher_view(&session).await;
    assert_eq!(view["turn_count"], 2, "{view}");
}

both_stores!(
    a_widget_is_skipped_for_own_words_in_one_request,
    the_participant_cookie_is_secure_behind_https,
    a_session_without_views_is_caught_up,
    a_command_refused_on_kept_state_is_judged_again_on_the_log,
    racing_writers_lose_cleanly_and_views_agree,
    a_command_after_views_were_reset_folds_them_from_the_log,
    creating_a_session_answers_the_contract,
    a_session_reads_back_with_every_contract_key,
    a_message_is_accepted_and_joins_the_transcript,
    a_retried_message_answers_the_same_and_writes_once,
    the_token_also_works_as_query_parameter_and_cookie,
    an_interaction_is_submitted_once_and_validated,
    parallel_submits_of_one_interaction_succeed_once,
    an_ended_session_refuses_messages_and_submits_with_410,
    concurrent_sessions_never_surface_a_database_error,
    every_event_carries_time_actor_request_id_and_a_verified_chain,
    views_catch_up_after_a_lost_projection,
);
