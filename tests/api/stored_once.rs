//! What is stored once: a session's tool calls and interaction events live in its log only (the
//! researcher routes fold them from it), a decision's empty fields are left out of its
//! stored payload, each extracted field is a row of its own that only the commit changing it
//! rewrites, and events in clear share the rows of their commands' other events —
//! while every route answers as before.

use serde_json::{json, Value};

use crate::both_stores;
use crate::helpers::{json_of, Store, TestApp, RESEARCHER_TOKEN};

async fn stored_state(app: &TestApp, session: &str) -> Value {
    interview_projections::on_db!(read(app.db()), |pool| {
        let text: String = sqlx::query_scalar(if app.db().is_postgres() {
            "SELECT state::text FROM session_state WHERE session_id = $1"
        } else {
            "SELECT state FROM session_state WHERE session_id = $1"
        })
        .bind(session)
        .fetch_one(pool)
        .await
        .unwrap();
        serde_json::from_str(&text).unwrap()
    })
}

/// The session's stored state once its post-session extraction, which follows the completion,
/// is done (so nothing writes after).
async fn completed_and_extracted(app: &TestApp, session: &str) -> Value {
    let mut state = stored_state(app, session).await;
    for _ in 0..500 {
        if state["final_extraction_done"] == true {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        state = stored_state(app, session).await;
    }
    state
}

async fn research(app: &TestApp, session: &str, path: &str) -> Value {
    json_of(
        app.get(
            &format!("/api/sessions/{session}{path}"),
            Some(RESEARCHER_TOKEN),
        )
        .await,
    )
    .await
}

// Long by design: three cases in turn: a pending consent widget shown by both routes, a completed
// session's widget history folded from its log and the same on every route, then a document stored
// with the old copies losing them to migration 0013.
async fn widgets_live_in_the_log_and_the_routes_fold_them(store: Store) {
    let app = TestApp::spawn(store).await;
    // The consent widget pending: shown as pending, with no result yet.
    let (session, _) = app.create_session("demo").await;
    app.run(&session).await;
    let calls = research(&app, &session, "/tool-calls").await["tool_calls"].clone();
    assert_eq!(calls.as_array().unwrap().len(), 1, "{calls}");
    assert_eq!(calls[0]["tool_input"]["type"], "consent");
    assert!(calls[0]["tool_result"].is_null());
    let shown = research(&app, &session, "/interaction-events").await;
    assert_eq!(
        shown["interaction_events"][0]["status"], "pending",
        "{shown}"
    );

    let session = crate::research::interview(&app, false, true).await;
    let state = completed_and_extracted(&app, &session).await;
    assert_eq!(state["final_extraction_done"], true, "{state}");
    for copy in ["tool_calls", "interaction_events"] {
        assert!(state.get(copy).is_none(), "{copy} is stored: {state}");
    }
    let events = research(&app, &session, "/events").await["events"].clone();
    let of_type = |t: &str| {
        events
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["event_type"] == t)
            .count()
    };
    let calls = research(&app, &session, "/tool-calls").await["tool_calls"].clone();
    let calls = calls.as_array().unwrap();
    assert_eq!(calls.len(), of_type("tool.call.created"));
    assert!(calls.len() >= 3, "{calls:?}");
    assert!(calls
        .iter()
        .all(|c| c["tool_result"]["status"] == "submitted" && c["completed_at"].is_string()));
    let shown = research(&app, &session, "/interaction-events").await["interaction_events"].clone();
    let shown = shown.as_array().unwrap();
    assert_eq!(shown.len(), of_type("interaction.rendered"));
    assert!(shown.iter().all(|i| i["status"] == "submitted"));
    // Every route that shows them shows the same.
    let view = research(&app, &session, "/state").await;
    let whole = research(&app, &session, "").await;
    for body in [&view, &whole] {
        assert_eq!(body["tool_calls"].as_array().unwrap(), calls);
        assert_eq!(body["interaction_events"].as_array().unwrap(), shown);
    }

    // A document written before migration 0013, with the copies, loses them to it and is again
    // the one the log gives.
    let (copy, migration) = if app.db().is_postgres() {
        (
            r#"UPDATE session_state SET state = state || '{"tool_calls": [{"x": 1}], "interaction_events": []}'::jsonb"#,
            include_str!("../../migrations/postgres/0013_widget_history_from_log.sql"),
        )
    } else {
        (
            r#"UPDATE session_state SET state = json_set(state, '$.tool_calls', json('[{"x": 1}]'), '$.interaction_events', json('[]'))"#,
            include_str!("../../migrations/sqlite/0013_widget_history_from_log.sql"),
        )
    };
    interview_projections::on_db!(write(app.db()), |pool| {
        sqlx::query(copy).execute(pool).await.unwrap();
    });
    assert!(stored_state(&app, &session)
        .await
        .get("tool_calls")
        .is_some());
    interview_projections::on_db!(write(app.db()), |pool| {
        sqlx::raw_sql(migration).execute(pool).await.unwrap();
    });
    assert_eq!(stored_state(&app, &session).await, state);
}

async fn empty_decision_fields_are_not_stored_but_read_as_empty(store: Store) {
    let app = TestApp::spawn(store).await;
    let session = crate::research::interview(&app, false, true).await;
    // As stored (an encrypted one opened into the version 2 payload it seals).
    let payloads: Vec<Value> = interview_projections::log::all_rows(app.db(), &session)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.event_type == "agent.decision.recorded")
        .map(|r| r.payload)
        .collect();
    assert!(payloads.len() > 3);
    for p in &payloads {
        for empty in ["token_usage", "latency_ms", "proposed_action"] {
            assert!(p.get(empty).is_none(), "{empty} stored: {p}");
        }
    }
    // The first decision answers no turn.
    assert!(payloads[0].get("turn_id").is_none(), "{}", payloads[0]);
    assert!(payloads.iter().any(|p| p["turn_id"].is_string()));
    let log = research(&app, &session, "/decisions").await["decisions"].clone();
    let log = log.as_array().unwrap();
    assert_eq!(log.len(), payloads.len());
    for d in log {
        assert_eq!(
            d["token_usage"],
            json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})
        );
        assert_eq!(d["latency_ms"], 0);
        assert!(d["proposed_action"].is_null());
    }
    assert!(log[0]["turn_id"].is_null());
    // The raw log shows each decision with every field, whatever is stored.
    let events = research(&app, &session, "/events").await["events"].clone();
    let shown: Vec<&Value> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event_type"] == "agent.decision.recorded")
        .collect();
    assert_eq!(shown.len(), payloads.len());
    for e in shown {
        for field in ["turn_id", "proposed_action", "latency_ms", "token_usage"] {
            assert!(e["payload"].get(field).is_some(), "{field}: {e}");
        }
    }
}

/// Each stored field: `(field id, value as stored, how many times its row was rewritten)` —
/// rewrites counted by PostgreSQL's row version (`xmin` changes with each update) or, on SQLite,
/// by a trigger the test installs.
async fn stored_fields(app: &TestApp, session: &str) -> Vec<(String, Value, String)> {
    interview_projections::on_db!(read(app.db()), |pool| {
        let sql = if app.db().is_postgres() {
            "SELECT field_id, value::text, xmin::text FROM session_fields WHERE session_id = $1 ORDER BY field_id"
        } else {
            "SELECT f.field_id, f.value, (SELECT COUNT(*) FROM field_rewrites r \
             WHERE r.session_id = f.session_id AND r.field_id = f.field_id) \
             FROM session_fields f WHERE f.session_id = $1 ORDER BY f.field_id"
        };
        use sqlx::Row;
        sqlx::query(sql)
            .bind(session)
            .fetch_all(pool)
            .await
            .unwrap()
            .iter()
            .map(|row| {
                let value: String = row.get(1);
                let version = row
                    .try_get::<String, _>(2)
                    .or_else(|_| row.try_get::<i64, _>(2).map(|n| n.to_string()))
                    .unwrap();
                (row.get(0), serde_json::from_str(&value).unwrap(), version)
            })
            .collect()
    })
}

/// The fields extracted so far are a view of their own, a row each: the state document holds
/// none of them, a commit writes only the fields it changes (so it does not grow with the
/// session), and researchers read them as before.
async fn each_field_is_a_row_and_a_commit_rewrites_only_its_own(store: Store) {
    let app = TestApp::spawn(store).await;
    if !app.db().is_postgres() {
        interview_projections::on_db!(write(app.db()), |pool| {
            for sql in [
                "CREATE TABLE field_rewrites (session_id TEXT, field_id TEXT)",
                "CREATE TRIGGER count_field_rewrites AFTER UPDATE ON session_fields \
                 BEGIN INSERT INTO field_rewrites VALUES (old.session_id, old.field_id); END",
            ] {
                sqlx::query(sql).execute(pool).await.unwrap();
            }
        });
    }
    let (session, token) = app.interviewing("demo").await;
    app.post_message(
        &session,
        &token,
        "Last Sunday I wrote the list on my phone while my partner checked the fridge and pantry",
    )
    .await;
    app.run(&session).await;
    let first = stored_fields(&app, &session).await;
    let ids: Vec<&str> = first.iter().map(|(id, _, _)| id.as_str()).collect();
    assert!(ids.contains(&"planning_method"), "{first:?}");

    app.post_message(
        &session,
        &token,
        "Vegetables go bad before we eat them because we buy too much on impulse every single week",
    )
    .await;
    let s = app.run(&session).await;
    assert_eq!(s["pending_interaction"]["type"], "likert", "{s}");
    app.answer(&session, &token, &s, json!(2)).await;
    let s = app.run(&session).await;
    let then = stored_fields(&app, &session).await;
    assert!(then.len() > first.len(), "a new field was stored: {then:?}");
    for (id, value, version) in &first {
        let now = then.iter().find(|(other, _, _)| other == id).unwrap();
        assert_eq!((&now.1, &now.2), (value, version), "{id} was rewritten");
    }
    // Researchers read the same fields; the state document holds none.
    let stored: serde_json::Map<String, Value> = then
        .iter()
        .map(|(id, value, _)| (id.clone(), value.clone()))
        .collect();
    assert_eq!(s["extracted_fields"], Value::Object(stored));
    let state = stored_state(&app, &session).await;
    assert!(state.get("extracted_fields").is_none(), "{state}");
    assert!(!state.to_string().contains("planning_method"), "{state}");
}

/// How many rows a session's events take.
async fn stored_rows(app: &TestApp, session: &str) -> usize {
    interview_projections::on_db!(read(app.db()), |pool| {
        sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM events WHERE aggregate_id = $1")
            .bind(session)
            .fetch_one(pool)
            .await
            .unwrap()
    }) as usize
}

/// The session's events as researchers read them, and the stored chain checked over them.
async fn events_and_chain(app: &TestApp, session: &str) -> (Vec<Value>, String) {
    let events = research(app, session, "/events").await["events"]
        .as_array()
        .unwrap()
        .clone();
    let sequences: Vec<u64> = events
        .iter()
        .map(|e| e["sequence"].as_u64().unwrap())
        .collect();
    assert_eq!(sequences, (1..=events.len() as u64).collect::<Vec<_>>());
    let rows = interview_projections::log::all_rows(app.db(), session)
        .await
        .unwrap();
    assert_eq!(rows.len(), events.len());
    let head = interview_session::chain::verify_chain(rows.iter().map(|r| r.chain()))
        .expect("the stored chain verifies");
    assert_eq!(events.last().unwrap()["payload"]["hash"], json!(head));
    (events, head)
}

// Long by design: one session followed through: completed (its events in clear share rows, every
// reader still sees each), then erased (every event on a row of its own again), checked the same
// way.
async fn events_in_clear_share_rows_yet_every_reader_sees_each_as_an_event(store: Store) {
    let app = TestApp::spawn(store).await;
    let session = crate::research::interview(&app, false, true).await;
    completed_and_extracted(&app, &session).await;
    let (events, _) = events_and_chain(&app, &session).await;
    let is_change = |e: &&Value| {
        matches!(
            e["event_type"].as_str(),
            Some("session.status_changed" | "session.phase_changed")
        )
    };
    let changes = events.iter().filter(is_change).count();
    assert!(changes > 10, "{events:?}");
    // Each change is there with its words, in clear, with the version its own row would have.
    for change in events.iter().filter(is_change) {
        assert!(change["payload"]["from"].is_string() && change["payload"]["to"].is_string());
        assert!(
            matches!(change["event_version"].as_str(), Some("2" | "3")),
            "{change}"
        );
    }
    // So is each claim, though none has a row of its own (each is held by the decision its
    // command records: the rules interviewer says an utterance whole).
    let claims = events
        .iter()
        .filter(|e| e["event_type"] == "agent.message.started")
        .count();
    assert!(claims > 3, "{events:?}");
    let claim_rows: i64 = interview_projections::on_db!(read(app.db()), |pool| {
        sqlx::query_scalar(
            "SELECT COUNT(*) FROM events WHERE aggregate_id = $1 AND event_type = 'agent.message.started'",
        )
        .bind(&session)
        .fetch_one(pool)
        .await
        .unwrap()
    });
    assert_eq!(claim_rows, 0);
    // Yet most events in clear take no row of their own.
    let in_clear = events
        .iter()
        .filter(|e| matches!(e["event_version"].as_str(), Some("2" | "3")))
        .count();
    let rows = stored_rows(&app, &session).await;
    assert!(
        events.len() - rows >= in_clear * 2 / 3,
        "{rows} rows for {} events, {in_clear} of them in clear",
        events.len()
    );
    // The researcher's copy and the stream agree with the log.
    app.assert_stream_follows_the_rules(&session).await;

    // An erasure gives every event its own row again, and the chain still verifies.
    let erased = app
        .send(
            reqwest::Method::DELETE,
            &format!("/api/sessions/{session}/participant-data"),
            Some(RESEARCHER_TOKEN),
            None,
        )
        .await;
    assert!(erased.status().is_success());
    let receipt = json_of(erased).await;
    let (after, head) = events_and_chain(&app, &session).await;
    assert_eq!(head, receipt["head_hash"].as_str().unwrap());
    assert_eq!(stored_rows(&app, &session).await, after.len());
    let types = |events: &[Value]| -> Vec<Value> {
        events.iter().map(|e| e["event_type"].clone()).collect()
    };
    assert_eq!(types(&after[..events.len()]), types(&events));
}

both_stores!(
    widgets_live_in_the_log_and_the_routes_fold_them,
    empty_decision_fields_are_not_stored_but_read_as_empty,
    each_field_is_a_row_and_a_commit_rewrites_only_its_own,
    events_in_clear_share_rows_yet_every_reader_sees_each_as_an_event,
);
