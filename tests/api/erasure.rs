//! Withdrawal and erasure (`docs/privacy.md`), on both stores: a completed interview's words are
//! in every researcher view and export; after erasure they are in none of them, nor in the
//! stream, nor in the database's bytes (SQLite's files, PostgreSQL's `pg_dump`); the log still
//! verifies; the overview counts the session as withdrawn; retention erases by itself; bad
//! input changes nothing.

use chrono::Utc;
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::both_stores;
use crate::helpers::paths;
use crate::helpers::{assert_error, json_of, Store, TestApp, RESEARCHER_TOKEN};
use crate::research::interview_as;

/// Words only this participant says, and their panel id.
const WORDS: &str = "I plan meals in a zebra-striped notebook 7731, 斑马笔记本";
const MARKERS: [&str; 3] = ["zebra-striped", "斑马笔记本", "panel-ref-5521"];
const REF: &str = "panel-ref-5521";

async fn demo_study(app: &TestApp) -> String {
    json_of(app.get("/api/studies", Some(RESEARCHER_TOKEN)).await).await["studies"][0]["study_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Everything a researcher or the participant can read about the session and its study, as
/// one text.
async fn everything_readable(app: &TestApp, study: &str, session: &str, token: &str) -> String {
    let mut text = String::new();
    for path in [
        paths::session(session),
        format!("/api/sessions/{session}/transcript"),
        format!("/api/sessions/{session}/state"),
        format!("/api/sessions/{session}/decisions"),
        format!("/api/sessions/{session}/tool-calls"),
        format!("/api/sessions/{session}/interaction-events"),
        paths::events(session),
        paths::results(study),
        format!("/api/studies/{study}/results.csv"),
        format!("/api/studies/{study}/results.jsonl"),
        format!("/api/studies/{study}/sessions"),
        paths::overview(study),
    ] {
        let res = app.get(&path, Some(RESEARCHER_TOKEN)).await;
        assert_eq!(res.status(), StatusCode::OK, "{path}");
        text += &res.text().await.unwrap();
    }
    let own = app.get(&paths::session(session), Some(token)).await;
    text += &own.text().await.unwrap();
    text + &stream_replay(app, session, token).await
}

/// What the participant's event stream replays from the start (read for half a second).
async fn stream_replay(app: &TestApp, session: &str, token: &str) -> String {
    let mut res = app
        .client
        .get(app.url(&format!("/api/sessions/{session}/stream?token={token}")))
        .send()
        .await
        .unwrap();
    let mut text = String::new();
    while let Ok(Ok(Some(chunk))) =
        tokio::time::timeout(std::time::Duration::from_millis(500), res.chunk()).await
    {
        text += &String::from_utf8_lossy(&chunk);
    }
    text
}

/// The bytes of every file of the embedded store (database, WAL, shared memory), or a
/// `pg_dump` of the PostgreSQL database.
async fn database_bytes(app: &TestApp, store: Store) -> Vec<u8> {
    match store {
        Store::Sqlite => {
            let mut bytes = Vec::new();
            for entry in std::fs::read_dir(app.data_dir()).unwrap() {
                let path = entry.unwrap().path();
                if path.to_string_lossy().contains("interview.db") {
                    bytes.extend(std::fs::read(&path).unwrap());
                }
            }
            assert!(!bytes.is_empty(), "the SQLite files are read");
            bytes
        }
        Store::Postgres => {
            let url = app.state.settings.database_url.clone().unwrap();
            let pg_dump = std::fs::read_dir("/usr/lib/postgresql")
                .ok()
                .and_then(|dirs| dirs.flatten().map(|d| d.path().join("bin/pg_dump")).max())
                .filter(|p| p.exists())
                .unwrap_or_else(|| "pg_dump".into());
            let out = std::process::Command::new(pg_dump)
                .arg(&url)
                .output()
                .expect("pg_dump runs");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            out.stdout
        }
    }
}

fn holds_any(haystack: &[u8], needles: &[&str]) -> Vec<String> {
    needles
        .iter()
        .filter(|n| haystack.windows(n.len()).any(|w| w == n.as_bytes()))
        .map(|n| n.to_string())
        .collect()
}

// Long by design: one withdrawal followed everywhere the words lived: readable and in the database
// bytes before, the receipt, the same receipt again from either route with nothing written, nothing
// readable or stored after, results and overview updated, the erased chain verified to the
// receipt's head, the stream told, a later message refused, then the purge log.
async fn withdrawal_erases_every_copy_and_the_log_still_verifies(store: Store) {
    let app = TestApp::spawn(store).await;
    let study = demo_study(&app).await;
    let (session, token) = interview_as(&app, false, true, WORDS, REF).await;
    app.run(&session).await;
    let before = everything_readable(&app, &study, &session, &token).await;
    assert_eq!(
        holds_any(before.as_bytes(), &MARKERS),
        MARKERS,
        "the words are readable before"
    );

    assert_eq!(
        holds_any(&database_bytes(&app, store).await, &MARKERS),
        MARKERS,
        "the words are in the database's bytes before"
    );

    let res = app
        .post(&paths::withdraw(&session), Some(&token), &json!({}))
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let receipt = json_of(res).await;
    assert_eq!(receipt["session_id"], session.as_str());
    assert_eq!(receipt["erased_by"], "participant");
    assert_eq!(receipt["content_verified"], true);
    let erased = receipt["events_erased"].as_u64().unwrap();
    assert!(erased > 20, "{receipt}");
    assert_eq!(receipt["sequence"].as_u64().unwrap(), erased + 1);
    assert_eq!(receipt["head_hash"].as_str().unwrap().len(), 64);

    // Again: the same receipt, nothing written.
    let events = app.total_events().await;
    let again = app
        .post(&paths::withdraw(&session), Some(&token), &json!({}))
        .await;
    assert_eq!(json_of(again).await, receipt);
    let by_researcher = app
        .send(
            Method::DELETE,
            &format!("/api/sessions/{session}/participant-data"),
            Some(RESEARCHER_TOKEN),
            None,
        )
        .await;
    assert_eq!(json_of(by_researcher).await, receipt);
    assert_eq!(app.total_events().await, events);

    let after = everything_readable(&app, &study, &session, &token).await;
    assert_eq!(
        holds_any(after.as_bytes(), &MARKERS),
        Vec::<String>::new(),
        "nothing readable remains: {after}"
    );
    let bytes = database_bytes(&app, store).await;
    assert_eq!(
        holds_any(&bytes, &MARKERS),
        Vec::<String>::new(),
        "nor in the database's bytes"
    );

    // The session drops out of results and counts as withdrawn.
    let results = json_of(
        app.get(&paths::results(&study), Some(RESEARCHER_TOKEN))
            .await,
    )
    .await;
    assert_eq!(results["results"], json!([]));
    let overview = json_of(
        app.get(&paths::overview(&study), Some(RESEARCHER_TOKEN))
            .await,
    )
    .await;
    assert_eq!(overview["stopped"]["withdrawn"], 1);
    assert_eq!(overview["funnel"]["completed"], 0);
    assert_eq!(overview["funnel"]["created"], 1);

    // The stored chain verifies, and its head is the receipt's.
    let rows = interview_projections::log::all_rows(app.db(), &session)
        .await
        .unwrap();
    assert!(rows[..erased as usize]
        .iter()
        .all(|r| r.event_version == "erased"));
    let head = interview_session::chain::verify_chain(rows.iter().map(|r| r.chain()))
        .expect("the erased log verifies");
    assert_eq!(head, receipt["head_hash"].as_str().unwrap());

    // The page is told, and the participant can do nothing more.
    assert!(stream_replay(&app, &session, &token)
        .await
        .contains("event: session.erased"));
    let res = app.post_message(&session, &token, "hello again").await;
    assert_error(res, StatusCode::GONE, "participant_data_erased").await;

    // The purge log.
    let log = json_of(
        app.get(&paths::erasures(&study), Some(RESEARCHER_TOKEN))
            .await,
    )
    .await;
    assert_eq!(log["erasures"], json!([receipt]));
}

async fn a_running_interview_is_ended_and_erased(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.interviewing("demo").await;
    assert_eq!(
        app.post_message(&session, &token, WORDS).await.status(),
        StatusCode::ACCEPTED
    );
    app.run(&session).await;
    let res = app
        .post(&paths::withdraw(&session), Some(&token), &json!({}))
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let state = app.researcher_view(&session).await;
    assert_eq!(state["status"], "abandoned", "{state}");
    assert_eq!(state["end_reason"], "withdrawn", "{state}");
    assert!(!state.to_string().contains("zebra"));
    assert!(!app.event_log(&session).await.contains("zebra"));
    // The withdrawal and the record came in one commit, after the erased events; it verifies.
    let rows = interview_projections::log::all_rows(app.db(), &session)
        .await
        .unwrap();
    let types: Vec<&str> = rows
        .iter()
        .rev()
        .take(3)
        .map(|r| r.event_type.as_str())
        .collect();
    assert_eq!(
        types,
        [
            "participant.data.erased",
            "session.status_changed",
            "session.abandoned"
        ]
    );
    assert!(interview_session::chain::verify_chain(rows.iter().map(|r| r.chain())).is_ok());
}

// Long by design: a table of bad erasure requests, one row per case with its status and code (the
// wrong caller or no token, unknown and malformed sessions, a bad reason, a bad body, an unknown
// study, a forged form), then a check that nothing was written.
async fn erasure_refuses_bad_input_and_writes_nothing(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.interviewing("demo").await;
    let (other, other_token) = app.interviewing("demo").await;
    let events = app.total_events().await;
    let withdraw = |s: &str| paths::withdraw(s);
    let erase = |s: &str| format!("/api/sessions/{s}/participant-data");
    let unknown = uuid::Uuid::new_v4().to_string();

    let cases: Vec<(reqwest::Response, StatusCode, &str)> = vec![
        (
            app.post(&withdraw(&session), Some(&other_token), &json!({}))
                .await,
            StatusCode::FORBIDDEN,
            "forbidden",
        ),
        (
            app.post(&withdraw(&session), Some(RESEARCHER_TOKEN), &json!({}))
                .await,
            StatusCode::FORBIDDEN,
            "forbidden",
        ),
        (
            app.post(&withdraw(&session), None, &json!({})).await,
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        ),
        (
            app.send(Method::DELETE, &erase(&session), Some(&token), None)
                .await,
            StatusCode::FORBIDDEN,
            "forbidden",
        ),
        (
            app.send(
                Method::DELETE,
                &erase(&unknown),
                Some(RESEARCHER_TOKEN),
                None,
            )
            .await,
            StatusCode::NOT_FOUND,
            "session_not_found",
        ),
        (
            app.send(
                Method::DELETE,
                &erase("not-a-uuid"),
                Some(RESEARCHER_TOKEN),
                None,
            )
            .await,
            StatusCode::NOT_FOUND,
            "session_not_found",
        ),
        (
            app.send(
                Method::DELETE,
                &erase(&session),
                Some(RESEARCHER_TOKEN),
                Some(json!({"reason": "x".repeat(501)}).to_string()),
            )
            .await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_value",
        ),
        (
            app.send(
                Method::DELETE,
                &erase(&session),
                Some(RESEARCHER_TOKEN),
                Some(json!({"why": "typo"}).to_string()),
            )
            .await,
            StatusCode::BAD_REQUEST,
            "invalid_body",
        ),
        (
            app.post(
                &format!("/api/studies/{}/erasures", uuid::Uuid::new_v4()),
                Some(RESEARCHER_TOKEN),
                &json!({"participant_ref": REF}),
            )
            .await,
            StatusCode::NOT_FOUND,
            "study_not_found",
        ),
    ];
    // Another site's form, riding on the participant's cookie: not JSON, refused.
    let forged = app
        .client
        .post(app.url(&withdraw(&session)))
        .header("cookie", format!("participant_token={token}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("x=1")
        .send()
        .await
        .unwrap();
    let mut cases = cases;
    cases.push((
        forged,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    ));
    for (i, (res, status, code)) in cases.into_iter().enumerate() {
        assert_eq!(res.status(), status, "case {i}");
        assert_error(res, status, code).await;
    }
    // Nothing was written: both sessions run on, unerased.
    for s in [&session, &other] {
        assert_ne!(app.researcher_view(s).await["status"], "abandoned");
        assert!(erasure_free(&app, s).await);
    }
    assert_eq!(app.total_events().await, events);
}

async fn erasure_free(app: &TestApp, session: &str) -> bool {
    interview_projections::erasure::receipt(app.db(), session)
        .await
        .unwrap()
        .is_none()
}

async fn a_data_subject_request_erases_every_session_of_a_panel_id(store: Store) {
    let app = TestApp::spawn(store).await;
    let study = demo_study(&app).await;
    let (first, _) = interview_as(&app, false, true, WORDS, REF).await;
    let (second, _) = interview_as(&app, false, true, WORDS, REF).await;
    let (kept, _) = interview_as(
        &app,
        false,
        true,
        "I keep a list on the fridge",
        "someone-else",
    )
    .await;
    let res = app
        .post(
            &paths::erasures(&study),
            Some(RESEARCHER_TOKEN),
            &json!({"participant_ref": REF, "reason": "data-subject request 2026-12"}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let answer = json_of(res).await;
    let erased: Vec<&str> = answer["receipts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(erased, [first.as_str(), second.as_str()]);
    assert_eq!(answer["receipts"][0]["erased_by"], "researcher");
    assert_eq!(
        answer["receipts"][0]["reason"],
        "data-subject request 2026-12"
    );
    // The panel id went with them: a repeat finds nothing.
    let again = app
        .post(
            &paths::erasures(&study),
            Some(RESEARCHER_TOKEN),
            &json!({"participant_ref": REF}),
        )
        .await;
    assert_eq!(json_of(again).await["receipts"], json!([]));
    assert!(erasure_free(&app, &kept).await);
    let results = json_of(
        app.get(&paths::results(&study), Some(RESEARCHER_TOKEN))
            .await,
    )
    .await;
    assert_eq!(results["results"].as_array().unwrap().len(), 1);
    assert_eq!(results["results"][0]["session_id"], kept.as_str());
}

async fn retention_erases_ended_sessions_by_itself(store: Store) {
    let app = TestApp::spawn(store).await;
    let mut definition = crate::helpers::study_definition();
    definition["limits"]["retention_days"] = json!(1);
    let (study, slug, _) = app.publish_study(&definition).await;
    let (ended, token) = app.interviewing(&slug).await;
    let (open, _) = app.interviewing(&slug).await;
    // "End" once stops the questions; again at the summary, the session completes.
    for _ in 0..2 {
        let res = app
            .post(&paths::end(&ended), Some(&token), &json!({}))
            .await;
        assert_eq!(res.status(), StatusCode::OK);
        app.run(&ended).await;
    }
    let ended_state = app.researcher_view(&ended).await;
    assert!(
        ["completed", "abandoned"].contains(&ended_state["status"].as_str().unwrap()),
        "{ended_state}"
    );
    let retention = interview_runtime::jobs::retention::erase_expired;
    // Within the window nothing is erased.
    assert_eq!(retention(&app.state, Utc::now()).await.unwrap(), 0);
    // A day and a minute later the ended session is; the open one is not.
    let later = Utc::now() + chrono::Duration::minutes(24 * 60 + 1);
    assert_eq!(retention(&app.state, later).await.unwrap(), 1);
    assert_eq!(retention(&app.state, later).await.unwrap(), 0);
    assert!(erasure_free(&app, &open).await);
    let log = json_of(
        app.get(&paths::erasures(&study), Some(RESEARCHER_TOKEN))
            .await,
    )
    .await;
    let erasures = log["erasures"].as_array().unwrap();
    assert_eq!(erasures.len(), 1, "{log}");
    assert_eq!(erasures[0]["session_id"], ended.as_str());
    assert_eq!(erasures[0]["erased_by"], "retention");
}

async fn the_embedded_store_is_readable_by_its_owner_only(store: Store) {
    if store == Store::Postgres {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let app = TestApp::spawn(store).await;
    let (session, token) = app.interviewing("demo").await;
    app.post_message(&session, &token, "a few words").await;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(app.data_dir()), 0o700);
    for name in ["interview.db", "interview.db-wal"] {
        let path = app.data_dir().join(name);
        assert_eq!(mode(&path), 0o600, "{name}");
    }
}

both_stores!(
    withdrawal_erases_every_copy_and_the_log_still_verifies,
    a_running_interview_is_ended_and_erased,
    erasure_refuses_bad_input_and_writes_nothing,
    a_data_subject_request_erases_every_session_of_a_panel_id,
    retention_erases_ended_sessions_by_itself,
    the_embedded_store_is_readable_by_its_owner_only,
);
