//! A log written in event schema version 1, before version 2 existed, on both stores: it still
//! verifies, replays and rebuilds exactly the views the code of its time built, and a session
//! it left open continues in version 2 on the same chain.
//!
//! `tests/fixtures/v1/session.jsonl` is a completed 14-turn interview of the every-widget study
//! exported by `replay export` from a PostgreSQL log written by that code;
//! `tests/fixtures/v1/views.json` holds what its researcher routes answered then, with one
//! change since: the view format 2 words widget answers in the transcript as the results do
//! (`projections/src/view_format.rs`; three rows differ from what was answered then).

use interview_session::commands as cmd;
use interview_test_kit::app::{TestApp, RESEARCHER_TOKEN};
use interview_test_kit::replay;
use interview_test_kit::{both_stores, Store};

use interview_projections::Db;
use interview_runtime::settings::Secret;
use interview_runtime::{Application, Settings};
use serde_json::Value;

const BUNDLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/fixtures/v1/session.jsonl"
);
const VIEWS: &str = include_str!("../../tests/fixtures/v1/views.json");

/// The fixture's stored events, one JSON object per line.
fn fixture_events() -> Vec<Value> {
    std::fs::read_to_string(BUNDLE)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The fixture's session id and its stored events.
fn fixture() -> (String, Vec<Value>) {
    let events = fixture_events();
    let session = events[0]["payload"]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    (session, events)
}

/// Inserts stored events as they were written (no hash column: version 1).
async fn insert(db: &Db, session: &str, events: &[Value]) {
    interview_projections::on_db!(write(db), |pool| {
        for e in events {
            sqlx::query(
                "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, event_version, payload, metadata) \
                 VALUES ('Session', $1, $2, $3, $4, $5, $6)",
            )
            .bind(session)
            .bind(e["sequence"].as_i64().unwrap())
            .bind(e["event_type"].as_str().unwrap())
            .bind(e["event_version"].as_str().unwrap())
            .bind(&e["payload"])
            .bind(&e["metadata"])
            .execute(pool)
            .await
            .unwrap();
        }
    });
}

async fn get(server: &TestApp, path: &str) -> Value {
    reqwest::Client::new()
        .get(format!("{}{path}", server.address))
        .bearer_auth(RESEARCHER_TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn a_version_1_log_verifies_and_rebuilds_the_views_of_its_time(store: Store) {
    let server = TestApp::spawn_for_audit(store, |_| {}).await;
    let (session, events) = fixture();
    assert!(events.iter().all(|e| e["event_version"] == "1"));
    insert(server.db(), &session, &events).await;

    let (code, out, err) = replay!(&server.database_url(), &["rebuild", &session]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = replay!(&server.database_url(), &["verify", &session]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = replay!(&server.database_url(), &["verify", "--bundle", BUNDLE]);
    assert_eq!(code, 0, "{out}{err}");

    let expected: Value = serde_json::from_str(VIEWS).unwrap();
    for (key, path) in [
        ("session", ""),
        ("state", "/state"),
        ("transcript", "/transcript"),
        ("decisions", "/decisions"),
        ("tool_calls", "/tool-calls"),
        ("interaction_events", "/interaction-events"),
        ("events", "/events"),
    ] {
        let now = get(&server, &format!("/api/sessions/{session}{path}")).await;
        assert_eq!(now, expected[key], "GET /api/sessions/{{id}}{path} differs");
    }
    let study = expected["study"]["study_id"].as_str().unwrap();
    let results = interview_projections::read::results_page(server.db(), study, None, 10)
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(results).unwrap(),
        expected["results"]["results"]
    );

    // The export of the stored log is the fixture again.
    let out_path = std::env::temp_dir().join(format!("v1-{}.jsonl", uuid::Uuid::new_v4()));
    let (code, _, err) = replay!(
        &server.database_url(),
        &["export", &session, "-o", out_path.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    let exported: Vec<Value> = std::fs::read_to_string(&out_path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(exported, events);
}

async fn a_session_left_open_in_version_1_goes_on_in_version_2(store: Store) {
    let server = TestApp::spawn_for_audit(store, |_| {}).await;
    let (session, events) = fixture();
    // Up to an interviewer's question: waiting for the participant.
    let cut = events
        .iter()
        .position(|e| {
            e["event_type"] == "session.status_changed"
                && e["payload"]["to"] == "waiting_for_user"
                && e["sequence"].as_u64().unwrap() > 20
        })
        .unwrap();
    insert(server.db(), &session, &events[..=cut]).await;
    let (code, out, err) = replay!(&server.database_url(), &["rebuild", &session]);
    assert_eq!(code, 0, "{out}{err}");
    // Two days on, the sweeper's command expires it: new events on the old chain.
    let later = chrono::Utc::now() + chrono::Duration::days(2);
    server
        .state
        .store
        .execute(
            &session,
            interview_session::SessionCommand::Expire(cmd::Expire { at: later }),
            interview_runtime::command::store::Actor::System,
            "v1-test",
        )
        .await
        .unwrap();
    let view = get(&server, &format!("/api/sessions/{session}")).await;
    assert_eq!(view["status"], "abandoned", "{view}");
    let versions = interview_projections::read::event_versions(server.db(), &session)
        .await
        .unwrap();
    assert!(versions[..=cut].iter().all(|v| v == "1"));
    // Each command's first event whole (version 2), its later ones version 3.
    assert_eq!(versions[cut + 1], "2", "{versions:?}");
    assert!(
        versions[cut + 1..].iter().all(|v| v == "2" || v == "3"),
        "{versions:?}"
    );
    assert!(versions.len() > cut + 1);
    let (code, out, err) = replay!(&server.database_url(), &["verify", &session]);
    assert_eq!(code, 0, "{out}{err}");
    // The researcher's log reads alike across the two versions: each event names the one before.
    let log = get(&server, &format!("/api/sessions/{session}/events")).await;
    let log = log["events"].as_array().unwrap();
    for pair in log.windows(2) {
        assert_eq!(pair[1]["payload"]["prev_hash"], pair[0]["payload"]["hash"]);
        assert_eq!(pair[1]["payload"]["type"], pair[1]["event_type"]);
    }
}

/// The server goes on from the hash that is stored, not from one it recomputes from a payload:
/// an edited payload breaks the chain at that event only, even for events written after it by a
/// process that read the log cold.
// Long by design: one chain walked in order: a version 1 log inserted up to waiting_for_user, an
// expiry written on top, its payload edited, a second server started cold on the same database
// writing one more event, then verify naming only the edited event.
async fn an_edited_payload_breaks_the_chain_at_that_event_only(store: Store) {
    let first = TestApp::spawn_for_audit(store, |_| {}).await;
    let (session, events) = fixture();
    let cut = events
        .iter()
        .position(|e| {
            e["event_type"] == "session.status_changed" && e["payload"]["to"] == "waiting_for_user"
        })
        .unwrap();
    insert(first.db(), &session, &events[..=cut]).await;
    let later = chrono::Utc::now() + chrono::Duration::days(2);
    let system = |command| {
        let state = first.state.clone();
        let session = session.clone();
        async move {
            state
                .store
                .execute(
                    &session,
                    command,
                    interview_runtime::command::store::Actor::System,
                    "test",
                )
                .await
                .unwrap()
        }
    };
    system(interview_session::SessionCommand::Expire(cmd::Expire {
        at: later,
    }))
    .await;
    // An edit of a version 2 payload, under the session.
    let sql = match store {
        Store::Sqlite => format!("UPDATE events SET payload = json_set(payload, '$.reason', 'participant_requested_end') WHERE aggregate_id = '{session}' AND event_type = 'session.abandoned'"),
        Store::Postgres => format!("UPDATE events SET payload = jsonb_set(payload, '{{reason}}', '\"participant_requested_end\"') WHERE aggregate_id = '{session}' AND event_type = 'session.abandoned'"),
    };
    interview_projections::on_db!(write(first.db()), |pool| {
        sqlx::query(&sql).execute(pool).await.unwrap();
    });
    // Another process, cold, writes after it.
    let settings = Settings {
        bind: "127.0.0.1:0".into(),
        database_url: Some(first.database_url().clone()),
        data_dir: std::env::temp_dir().join(format!("replay-v1-{}", uuid::Uuid::new_v4().simple())),
        researcher_tokens: vec![Secret(RESEARCHER_TOKEN.into())],
        sweep_interval_secs: 0,
        demo_study: false,
        ..Settings::default()
    };
    let second = Application::build(settings).await.unwrap();
    second
        .state()
        .store
        .execute(
            &session,
            interview_session::SessionCommand::RecordError(cmd::RecordError {
                source: "test".into(),
                code: "after_the_edit".into(),
                message: "written by a cold process".into(),
                at: later,
            }),
            interview_runtime::command::store::Actor::System,
            "test",
        )
        .await
        .unwrap();
    let (code, out, _) = replay!(&first.database_url(), &["verify", &session]);
    assert_eq!(code, 1, "{out}");
    let broken: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("does not match"))
        .collect();
    assert_eq!(broken.len(), 1, "only the edited event: {out}");
}

/// A session written in version 1 (plaintext, its hashes inside its payloads) is erased like any
/// other: nothing of its content is left, its rows carry their hashes in the column, and it
/// verifies, linking to the head it had.
async fn a_version_1_session_is_erased_and_still_verifies(store: Store) {
    let server = TestApp::spawn_for_audit(store, |_| {}).await;
    let (session, events) = fixture();
    insert(server.db(), &session, &events).await;
    let (code, out, err) = replay!(&server.database_url(), &["rebuild", &session]);
    assert_eq!(code, 0, "{out}{err}");
    let old_head = events.last().unwrap()["payload"]["hash"].as_str().unwrap();
    let said = events
        .iter()
        .find(|e| e["event_type"] == "participant.message.created")
        .map(|e| e["payload"]["content"].as_str().unwrap().to_string())
        .unwrap();

    let receipt = interview_runtime::command::erasure::erase(
        server.state.erasing(),
        &session,
        interview_session::erasure::ErasedBy::Researcher,
        None,
        "test",
    )
    .await
    .unwrap();
    assert_eq!(receipt.events_erased, events.len() as u64);
    assert!(receipt.content_verified);

    let (code, out, err) = replay!(&server.database_url(), &["verify", &session]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("erased:"), "{out}");
    let (_, shown, _) = replay!(&server.database_url(), &["show", &session, "--json"]);
    assert!(!shown.contains(&said), "{shown}");
    let rows = interview_projections::log::all_rows(server.db(), &session)
        .await
        .unwrap();
    assert!(rows[..events.len()]
        .iter()
        .all(|r| r.event_version == "erased" && r.hash.is_some()));
    // The erasure record links to the head the version 1 log had.
    let link =
        interview_session::chain::verify_chain(rows[..events.len()].iter().map(|r| r.chain()));
    assert!(
        link.is_err(),
        "erased rows alone, without their record, do not verify"
    );
    let events_route = get(&server, &format!("/api/sessions/{session}/events")).await;
    let erasure_event = events_route["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event_type"] == "participant.data.erased")
        .cloned()
        .unwrap();
    assert_eq!(erasure_event["payload"]["prev_hash"], old_head);
}

both_stores!(
    a_version_1_log_verifies_and_rebuilds_the_views_of_its_time,
    a_session_left_open_in_version_1_goes_on_in_version_2,
    an_edited_payload_breaks_the_chain_at_that_event_only,
    a_version_1_session_is_erased_and_still_verifies,
);
