//! Per-session data keys (`docs/privacy.md`), on both stores: the log holds a participant's
//! words only encrypted, while every researcher view reads them; an erasure deletes the
//! session's key; a server refuses to start under a key-encryption key that did not wrap the
//! stored keys, and moves them under a new one when the old is named retired.

use reqwest::StatusCode;

use crate::both_stores;
use crate::helpers::paths;
use crate::helpers::{json_of, Store, TestApp, RESEARCHER_TOKEN};
use crate::research::interview_as;
use interview_runtime::settings::Secret;
use interview_runtime::Application;

// Markers no id, hash or timestamp can contain by chance (a hex digit run like "4412" could).
const WORDS: &str = "we keep a walrus-shaped pantry list by the quokka jar";
const MARKERS: [&str; 3] = ["walrus-shaped", "quokka", "ref-kiwi-88"];
const REF: &str = "ref-kiwi-88";

/// A session's rows as stored: `(event_version, payload as text and the sealed bytes)`, and how
/// many have sealed bytes.
async fn stored_rows(app: &TestApp, session: &str) -> (Vec<(String, String)>, usize) {
    let rows: Vec<(String, String, Option<Vec<u8>>)> =
        interview_projections::on_db!(read(app.db()), |pool| {
            sqlx::query_as(
                "SELECT event_version, CAST(payload AS TEXT), sealed FROM events \
                 WHERE aggregate_id = $1 ORDER BY sequence",
            )
            .bind(session)
            .fetch_all(pool)
            .await
            .unwrap()
        });
    let sealed = rows.iter().filter(|r| r.2.is_some()).count();
    let rows = rows
        .into_iter()
        .map(|(v, payload, sealed)| {
            let bytes = String::from_utf8_lossy(&sealed.unwrap_or_default()).into_owned();
            (v, payload + &bytes)
        })
        .collect();
    (rows, sealed)
}

async fn session_keys(app: &TestApp, session: &str) -> i64 {
    interview_projections::on_db!(read(app.db()), |pool| {
        sqlx::query_scalar("SELECT COUNT(*) FROM session_keys WHERE aggregate_id = $1")
            .bind(session)
            .fetch_one(pool)
            .await
            .unwrap()
    })
}

fn words_in(rows: &[(String, String)]) -> Vec<&str> {
    MARKERS
        .into_iter()
        .filter(|m| rows.iter().any(|(_, payload)| payload.contains(m)))
        .collect()
}

async fn the_log_holds_words_only_encrypted_and_erasure_deletes_the_key(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = interview_as(&app, false, true, WORDS, REF).await;
    let transcript = app
        .get(
            &format!("/api/sessions/{session}/transcript"),
            Some(RESEARCHER_TOKEN),
        )
        .await
        .text()
        .await
        .unwrap();
    assert!(transcript.contains(WORDS), "the researcher reads them");

    let (rows, sealed) = stored_rows(&app, &session).await;
    assert_eq!(words_in(&rows), Vec::<&str>::new(), "{rows:?}");
    let encrypted = rows
        .iter()
        .filter(|(v, _)| v.starts_with("encrypted"))
        .count();
    assert!(
        encrypted >= 3,
        "the messages, the panel id, the summary: {rows:?}"
    );
    assert_eq!(sealed, encrypted, "each encrypted row has its sealed bytes");
    assert!(
        rows.iter().any(|(v, _)| !v.starts_with("encrypted")),
        "events without personal data stay in clear"
    );
    assert_eq!(session_keys(&app, &session).await, 1);

    let res = app
        .send(
            reqwest::Method::POST,
            &paths::withdraw(&session),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(session_keys(&app, &session).await, 0, "the key is gone");
    let (rows, sealed) = stored_rows(&app, &session).await;
    assert!(
        rows.iter().all(|(v, _)| !v.starts_with("encrypted")),
        "every content event is rewritten in its erased form: {rows:?}"
    );
    assert_eq!(sealed, 0, "no sealed bytes are left");
    assert_eq!(words_in(&rows), Vec::<&str>::new());
}

/// The key-encryption key a server on the embedded store generated into its data directory.
fn generated_key(app: &TestApp) -> Secret {
    let path = app.data_dir().join("data.key");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the key file is its owner's only");
    Secret(std::fs::read_to_string(path).unwrap().trim().to_string())
}

// Long by design: one key rotation in order: on SQLite a server under another key alone is refused,
// naming the missing key; a server under a new key (the old one named retired, or kept in the
// database on PostgreSQL) takes every session over, keeps no key in the database and serves the
// words; then a server without the new key is refused, naming it.
async fn a_server_starts_only_under_the_key_that_wraps_its_sessions(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, _) = interview_as(&app, false, true, WORDS, REF).await;
    let new_key = Secret("ab".repeat(32));
    let mut settings = app.state.settings.clone();
    settings.demo_study = false;
    settings.database_url = Some(app.state.settings.effective_database_url());

    if store == Store::Sqlite {
        // Another key alone cannot read what the first wrapped: the server says which is missing.
        let mut other = settings.clone();
        other.data_key = Some(new_key.clone());
        let refused = Application::build(other).await.err().expect("refused");
        let said = refused.to_string();
        assert!(
            said.contains("not configured") && said.contains(app.state.data_kek.id()),
            "{said}"
        );
        settings.data_keys_retired = vec![generated_key(&app)];
    }
    // Named retired (or, on PostgreSQL, kept in the database), the old key hands its sessions
    // over to the new one.
    settings.data_key = Some(new_key.clone());
    let moved = Application::build(settings.clone())
        .await
        .expect("starts with the new key");
    let new_id = moved.state().data_kek.id().to_string();
    assert_ne!(new_id, app.state.data_kek.id());
    let under: Vec<String> = interview_projections::on_db!(read(app.db()), |pool| {
        sqlx::query_scalar("SELECT key_id FROM session_keys")
            .fetch_all(pool)
            .await
            .unwrap()
    });
    assert!(
        !under.is_empty() && under.iter().all(|id| *id == new_id),
        "{under:?}"
    );
    let kept: i64 = interview_projections::on_db!(read(app.db()), |pool| {
        sqlx::query_scalar("SELECT COUNT(*) FROM kept_key_encryption_keys")
            .fetch_one(pool)
            .await
            .unwrap()
    });
    assert_eq!(kept, 0, "no key-encryption key is left in the database");
    let state = moved.state();
    let address = format!("http://127.0.0.1:{}", moved.port());
    tokio::spawn(moved.run_until_stopped());
    let transcript = app
        .client
        .get(format!("{address}/api/sessions/{session}/transcript"))
        .bearer_auth(RESEARCHER_TOKEN)
        .send()
        .await
        .unwrap();
    assert!(json_of(transcript).await.to_string().contains(WORDS));
    drop(state);

    // The old key alone no longer does.
    let mut old = settings;
    old.data_key = None;
    old.data_keys_retired = Vec::new();
    if store == Store::Postgres {
        old.data_key = Some(Secret("cd".repeat(32)));
    }
    let refused = Application::build(old).await.err().expect("refused");
    assert!(refused.to_string().contains(&new_id), "{refused}");
}

both_stores!(
    the_log_holds_words_only_encrypted_and_erasure_deletes_the_key,
    a_server_starts_only_under_the_key_that_wraps_its_sessions,
);
