//! What is stored once: a session's tool calls and interaction events live in its log only (the
//! researcher routes fold them from it), and a decision's empty fields are left out of its
//! stored payload — while every route answers as before.

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
    // The post-session extraction follows the completion: wait for it, so nothing writes after.
    let mut state = stored_state(&app, &session).await;
    for _ in 0..500 {
        if state["final_extraction_done"] == true {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        state = stored_state(&app, &session).await;
    }
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

both_stores!(
    widgets_live_in_the_log_and_the_routes_fold_them,
    empty_decision_fields_are_not_stored_but_read_as_empty,
);
