//! The `replay` binary against a real log written by the real server (embedded store).

use std::path::{Path, PathBuf};
use std::process::Command;

use interview_runtime::settings::Secret;
use interview_runtime::{Application, Settings};
use serde_json::{json, Value};

/// A running server on a temp SQLite file.
struct Fixture {
    url: String,
    dir: PathBuf,
    base: String,
    harness: std::sync::Arc<interview_runtime::harness::Harness>,
    http: reqwest::Client,
}

fn replay(url: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_replay"))
        .args(args)
        .env("DATABASE_URL", url)
        .output()
        .expect("replay runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

impl Fixture {
    async fn start() -> Self {
        let dir =
            std::env::temp_dir().join(format!("replay-test-{}", uuid::Uuid::new_v4().simple()));
        let url = format!("sqlite://{}", dir.join("interview.db").display());
        let settings = Settings {
            bind: "127.0.0.1:0".into(),
            database_url: Some(url.clone()),
            data_dir: dir.clone(),
            researcher_tokens: vec![Secret("r".into())],
            ..Settings::default()
        };
        let app = Application::build(settings).await.unwrap();
        let base = format!("http://127.0.0.1:{}", app.port());
        let harness = app.state().harness.clone();
        tokio::spawn(app.run_until_stopped());
        Self {
            url,
            dir,
            base,
            harness,
            http: reqwest::Client::new(),
        }
    }

    /// A demo session past consent with one answered question; returns its id.
    async fn interviewed_session(&self) -> String {
        let (base, http) = (&self.base, &self.http);
        let created: Value = http
            .post(format!("{base}/api/public/studies/demo/sessions"))
            .json(&json!({}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let session = created["session_id"].as_str().unwrap().to_string();
        let token = created["participant_token"].as_str().unwrap().to_string();
        assert!(self
            .harness
            .wait_until_idle(&session, std::time::Duration::from_secs(20))
            .await
            .unwrap());
        let s: Value = http
            .get(format!("{base}/api/sessions/{session}"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let id = s["pending_interaction"]["interaction_id"]
            .as_str()
            .unwrap()
            .to_string();
        http.post(format!(
            "{base}/api/sessions/{session}/interactions/{id}/submit"
        ))
        .bearer_auth(&token)
        .json(&json!({"status": "submitted", "value": {"accepted": true}}))
        .send()
        .await
        .unwrap();
        assert!(self
            .harness
            .wait_until_idle(&session, std::time::Duration::from_secs(20))
            .await
            .unwrap());
        http.post(format!("{base}/api/sessions/{session}/messages"))
            .bearer_auth(&token)
            .json(
                &json!({"content": "We plan on Sunday evenings with a shared list on our phones."}),
            )
            .send()
            .await
            .unwrap();
        assert!(self
            .harness
            .wait_until_idle(&session, std::time::Duration::from_secs(20))
            .await
            .unwrap());
        session
    }
}

fn sqlite_exec(db: &Path, sql: &str) {
    let url = format!("sqlite://{}", db.display());
    tokio::task::block_in_place(|| {
        tokio::runtime::Handle::current().block_on(async {
            use sqlx::Connection;
            let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
            sqlx::query(sql).execute(&mut conn).await.unwrap();
        })
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_auditor_can_show_verify_export_rebuild_and_replay_a_session() {
    let f = Fixture::start().await;
    f.interviewed_session().await;
    let session = f.interviewed_session().await;
    let url = f.url.as_str();

    let (code, out, _) = replay(url, &["verify", "--all"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("2 session(s) checked, 0 failed"), "{out}");

    let (code, out, _) = replay(url, &["show", &session]);
    assert_eq!(code, 0);
    assert!(
        out.contains("session.created")
            && out.contains("agent.decision.recorded")
            && out.contains("Consent must be given"),
        "{out}"
    );
    let (_, json_out, _) = replay(url, &["show", &session, "--json"]);
    assert!(json_out
        .lines()
        .all(|l| serde_json::from_str::<Value>(l).is_ok()));

    let (code, out, _) = replay(url, &["at", &session, "--seq", "1"]);
    assert_eq!(code, 0);
    let at: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(at["session_state"]["status"], "created");

    let (code, out, _) = replay(url, &["stream", &session]);
    assert_eq!(code, 0);
    assert!(out.starts_with("event: session.status\nid: 1\n"), "{out}");
    assert!(out.contains("event: interaction.render") && out.contains("event: message.completed"));

    // A portable bundle verifies with no database, against its head.
    let bundle = f.dir.join("bundle.jsonl");
    let (code, head, _) = replay(url, &["export", &session, "-o", bundle.to_str().unwrap()]);
    assert_eq!(code, 0);
    let head = head.trim().to_string();
    let nowhere = "postgres://127.0.0.1:1/none";
    let (code, out, _) = replay(
        nowhere,
        &[
            "verify",
            "--bundle",
            bundle.to_str().unwrap(),
            "--expect-head",
            &head,
        ],
    );
    assert_eq!(code, 0, "{out}");
    let (code, _, _) = replay(
        nowhere,
        &[
            "verify",
            "--bundle",
            bundle.to_str().unwrap(),
            "--expect-head",
            "0000",
        ],
    );
    assert_eq!(code, 1);
    let (code, out, _) = replay(nowhere, &["show", "--bundle", bundle.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.contains("session.created"));
    let tampered = std::fs::read_to_string(&bundle)
        .unwrap()
        .replace("shared list", "paper list");
    let tampered_path = f.dir.join("tampered.jsonl");
    std::fs::write(&tampered_path, tampered).unwrap();
    let (code, out, _) = replay(
        nowhere,
        &["verify", "--bundle", tampered_path.to_str().unwrap()],
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("does not match the payload"), "{out}");

    // Read models that drift from the log are reported, and rebuilt.
    let db_path = f.dir.join("interview.db");
    sqlite_exec(&db_path, &format!("UPDATE session_state SET state = json_set(state, '$.turn_count', 99) WHERE session_id = '{session}'"));
    let (code, out, _) = replay(url, &["verify", &session]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("session_state.turn_count"), "{out}");
    let (code, out, _) = replay(url, &["rebuild", "--all"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("events/s"), "{out}");
    let (code, out, _) = replay(url, &["verify", &session]);
    assert_eq!(code, 0, "{out}");

    // A tampered log is caught.
    sqlite_exec(&db_path, &format!(
        "UPDATE events SET payload = json_set(payload, '$.content', 'We never plan.') WHERE aggregate_id = '{session}' AND event_type = 'participant.message.created'"
    ));
    let (code, out, _) = replay(url, &["verify", &session]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("does not match the payload"), "{out}");

    // So are a reordered log and a deleted event (in other sessions, each untouched before).
    let second = f.interviewed_session().await;
    let third = f.interviewed_session().await;
    for id in [&second, &third] {
        assert_eq!(replay(url, &["verify", id]).0, 0);
    }
    for (from, to) in [(2, 1000), (3, 2), (1000, 3)] {
        sqlite_exec(&db_path, &format!(
            "UPDATE events SET sequence = {to} WHERE aggregate_id = '{second}' AND sequence = {from}"
        ));
    }
    let (code, out, _) = replay(url, &["verify", &second]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("prev_hash"),
        "a reordered log breaks the chain: {out}"
    );
    sqlite_exec(
        &db_path,
        &format!("DELETE FROM events WHERE aggregate_id = '{third}' AND sequence = 3"),
    );
    let (code, out, _) = replay(url, &["verify", &third]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("expected sequence 3, found 4"),
        "a deleted event leaves a gap: {out}"
    );

    // Clear errors and distinct exit codes.
    let (code, _, err) = replay(url, &["show", "no-such-session"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("no session"));
    let (code, _, _) = replay(nowhere, &["show", &session]);
    assert_eq!(code, 4);
    let (code, _, _) = replay(url, &["verify", "--bundle", "/nonexistent/bundle.jsonl"]);
    assert_eq!(code, 5);
    let _ = std::fs::remove_dir_all(&f.dir);
}

/// `replay show … | head`: a reader that closes the pipe early ends replay quietly, without a
/// panic message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_pipe_ends_replay_quietly() {
    use std::io::Read;
    use std::process::Stdio;
    let f = Fixture::start().await;
    let session = f.interviewed_session().await;
    for args in [
        vec!["show", session.as_str()],
        vec!["stream", session.as_str()],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_replay"))
            .args(&args)
            .env("DATABASE_URL", &f.url)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Closed before replay writes a byte, so its first write finds no reader.
        drop(child.stdout.take());
        let status = child.wait().unwrap();
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(status.code(), Some(0), "{args:?}: {stderr}");
    }
}
