//! The `interview-runtime` binary as an operator runs it: `--help`, start-up on the embedded
//! default with a generated researcher token, and a clean exit on SIGTERM.

use crate::helpers::paths;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Sends SIGTERM and waits (20 s at most) for the exit: its status, and stdout and stderr
/// together.
pub(crate) fn stop(mut child: std::process::Child) -> (std::process::ExitStatus, String) {
    assert!(Command::new("sh")
        .args(["-c", &format!("kill -TERM {}", child.id())])
        .status()
        .unwrap()
        .success());
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "no exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().unwrap();
    let logs = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status, logs)
}

/// Waits (30 s at most) until the server at `base` is ready.
pub(crate) async fn wait_ready(client: &reqwest::Client, base: &str) {
    let started = Instant::now();
    while !client
        .get(format!("{base}/readyz"))
        .send()
        .await
        .is_ok_and(|r| r.status() == 200)
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the server did not become ready"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn help_lists_every_setting() {
    let out = Command::new(env!("CARGO_BIN_EXE_interview-runtime"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for var in [
        "BIND",
        "DATABASE_URL",
        "RESEARCHER_TOKENS",
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "DEMO_STUDY",
        "MAX_MESSAGE_BYTES",
    ] {
        assert!(
            help.contains(&format!("env: {var}")),
            "{var} missing from --help"
        );
    }
}

#[test]
fn help_never_shows_a_secret_from_the_environment() {
    let out = Command::new(env!("CARGO_BIN_EXE_interview-runtime"))
        .arg("--help")
        .env(
            "DATABASE_URL",
            "postgres://app:hunter2-db-password@db.internal/interviews",
        )
        .env("RESEARCHER_TOKENS", "rt-help-secret")
        .env("OPENAI_API_KEY", "sk-help-secret")
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for secret in ["hunter2", "db.internal", "rt-help-secret", "sk-help-secret"] {
        assert!(!help.contains(secret), "--help shows {secret}");
    }
}

/// With `LOG_FORMAT=json`, a handled model failure is one JSON object per line with one
/// `message` key, and the key a provider echoed is not in it.
// Long by design: one real server process driven in order: started with JSON logs and a model that
// echoes the key, a model study created and published, a session consented until the failure is
// recorded, then the process stopped and every log line checked (JSON, one message key, no key).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_one_message_and_no_echoed_key() {
    use crate::scripted_model::{Reply, ScriptedModel};
    const KEY: &str = "sk-proc-0123456789abcdefECHOED";
    let model = ScriptedModel::start().await;
    model.always(Reply::EchoKey(401));
    let dir =
        std::env::temp_dir().join(format!("interview-json-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_interview-runtime"))
        .current_dir(&dir)
        .env("BIND", format!("127.0.0.1:{port}"))
        .env("LOG_FORMAT", "json")
        .env("OPENAI_BASE_URL", &model.url)
        .env("OPENAI_API_KEY", KEY)
        .env("RESEARCHER_TOKENS", "rt-json-test")
        .env_remove("DATABASE_URL")
        .env_remove("CONFIG_FILE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    wait_ready(&client, &base).await;
    let mut study: serde_json::Value =
        serde_json::from_str(include_str!("../../examples/demo-study.json")).unwrap();
    study["public_slug"] = serde_json::json!("llm-json");
    study["agent"]["mode"] = serde_json::json!("llm");
    let post = |path: String, token: Option<&str>, body: serde_json::Value| {
        let mut req = client.post(format!("{base}{path}")).json(&body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send()
    };
    let created: serde_json::Value = post("/api/studies".into(), Some("rt-json-test"), study)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["study_id"].as_str().unwrap();
    post(
        paths::publish(id),
        Some("rt-json-test"),
        serde_json::json!({}),
    )
    .await
    .unwrap();
    let session: serde_json::Value = post(
        "/api/public/studies/llm-json/sessions".into(),
        None,
        serde_json::json!({}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let (sid, token) = (
        session["session_id"].as_str().unwrap(),
        session["participant_token"].as_str().unwrap(),
    );
    // Consent, then the interviewer asks the model, which fails with the echo.
    let mut errors = 0;
    for _ in 0..100 {
        let s: serde_json::Value = client
            .get(format!("{base}/api/sessions/{sid}"))
            .bearer_auth("rt-json-test")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if let Some(widget) = s["pending_interaction"]["interaction_id"].as_str() {
            if s["pending_interaction"]["type"] == "consent" {
                post(
                    paths::submit(sid, widget),
                    Some(token),
                    serde_json::json!({"status": "submitted", "value": {"accepted": true}}),
                )
                .await
                .unwrap();
            }
        }
        errors = s["errors"].as_array().map_or(0, Vec::len);
        if errors > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(errors > 0, "the model's failure was recorded");
    let (_, logs) = stop(child);
    assert!(logs.contains("handled failure"), "{logs}");
    for line in logs.lines().filter(|l| !l.trim().is_empty()) {
        let parsed: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(parsed.is_object(), "{line}");
        assert_eq!(line.matches("\"message\":").count(), 1, "{line}");
    }
    assert!(
        !logs.contains(KEY) && !logs.contains("ECHOED"),
        "the echoed key is logged"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

// Long by design: one real server process from start to stop: started with no configuration, the
// embedded defaults checked, a session created and its stream opened, SIGTERM sent, then the exit,
// the stream's retry hint and prompt close, and the logs (no token, no key, no warning) checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_starts_on_the_embedded_default_and_stops_cleanly_on_sigterm() {
    let dir = std::env::temp_dir().join(format!(
        "interview-process-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_interview-runtime"))
        .current_dir(&dir)
        .env("BIND", format!("127.0.0.1:{port}"))
        .env("OPENAI_API_KEY", "sk-secret-never-logged")
        .env_remove("DATABASE_URL")
        .env_remove("RESEARCHER_TOKENS")
        .env_remove("CONFIG_FILE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    wait_ready(&client, &base).await;
    // The embedded default: ./data/interview.db, a generated researcher token, the demo study.
    let token = std::fs::read_to_string(dir.join("data/researcher-token")).unwrap();
    assert!(dir.join("data/interview.db").exists());
    let studies = client
        .get(format!("{base}/api/studies"))
        .bearer_auth(token.trim())
        .send()
        .await
        .unwrap();
    assert_eq!(studies.status(), 200);
    let created = client
        .post(format!("{base}/api/public/studies/demo/sessions"))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let created: serde_json::Value = created.json().await.unwrap();
    // An open event stream: on SIGTERM it closes at once with a retry hint, instead of holding
    // the process for SHUTDOWN_TIMEOUT_SECS (30 s) while the page looks connected.
    let stream = client
        .get(format!(
            "{base}/api/sessions/{}/stream",
            created["session_id"].as_str().unwrap()
        ))
        .bearer_auth(created["participant_token"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let read_stream = tokio::spawn(async move {
        use futures_util::StreamExt;
        let mut body = stream.bytes_stream();
        let mut text = String::new();
        while let Some(Ok(chunk)) = body.next().await {
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
        (text, Instant::now())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;

    let signalled = Instant::now();
    let sigterm = format!("kill -TERM {}", child.id());
    assert!(Command::new("sh")
        .args(["-c", &sigterm])
        .status()
        .unwrap()
        .success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "no exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    let exited = signalled.elapsed();
    let (text, closed) = tokio::time::timeout(Duration::from_secs(5), read_stream)
        .await
        .expect("the stream ended")
        .unwrap();
    assert!(
        text.contains("retry: 500"),
        "a retry hint before closing: {text}"
    );
    assert!(
        closed.duration_since(signalled) < Duration::from_secs(5),
        "the stream closed at once, not after the 30 s drain"
    );
    assert!(
        exited < Duration::from_secs(10),
        "exited {exited:?} after SIGTERM"
    );
    let output = child.wait_with_output().unwrap();
    let logs = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(logs.contains("stopped"), "{logs}");
    assert!(
        logs.contains("researcher-token"),
        "the token file's path is logged"
    );
    assert!(
        !logs.contains(token.trim()),
        "the researcher token is never logged"
    );
    assert!(
        !logs.contains("sk-secret-never-logged"),
        "the API key is never logged"
    );
    assert!(
        !logs.contains("WARN"),
        "a clean stop warns of nothing: {logs}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// On PostgreSQL too (the commit-notification listener holds a connection of its own): a
/// clean stop logs no warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_stop_on_postgres_warns_of_nothing() {
    let url = crate::helpers::fresh_postgres_database().await;
    let port = free_port();
    // A token long enough not to be warned about.
    let child = Command::new(env!("CARGO_BIN_EXE_interview-runtime"))
        .env("BIND", format!("127.0.0.1:{port}"))
        .env("DATABASE_URL", &url)
        .env("RESEARCHER_TOKENS", "r".repeat(40))
        .env_remove("CONFIG_FILE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    wait_ready(&client, &base).await;
    let created = client
        .post(format!("{base}/api/public/studies/demo/sessions"))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    // Time for the listener to be listening.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, logs) = stop(child);
    assert!(status.success(), "{status:?}");
    assert!(logs.contains("stopped"), "{logs}");
    assert!(
        !logs.contains("WARN"),
        "a clean stop warns of nothing: {logs}"
    );
}
