//! Traces as an operator reads them: the binary's JSON logs name, on the request's span, its
//! request id and session; the interviewer run a request started is a span under it, so its
//! lines carry both. With `--features otlp`, the same spans reach an OTLP/HTTP collector.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::Store;
use crate::process::{free_port, stop, wait_ready};

const RESEARCHER: &str = "rt-traces";

/// Starts the binary on `store` with JSON logs and `env`; returns it and its base URL.
async fn server(store: Store, env: &[(&str, String)]) -> (Child, String, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!(
        "interview-traces-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_interview-runtime"));
    command
        .current_dir(&dir)
        .env("BIND", format!("127.0.0.1:{port}"))
        .env("LOG_FORMAT", "json")
        .env("RESEARCHER_TOKENS", RESEARCHER)
        .env_remove("CONFIG_FILE")
        .env_remove("RUST_LOG")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match store {
        Store::Sqlite => command.env_remove("DATABASE_URL"),
        Store::Postgres => command.env(
            "DATABASE_URL",
            crate::helpers::fresh_postgres_database().await,
        ),
    };
    for (key, value) in env {
        command.env(key, value);
    }
    let child = command.spawn().unwrap();
    let base = format!("http://127.0.0.1:{port}");
    wait_ready(&reqwest::Client::new(), &base).await;
    (child, base, dir)
}

/// A demo session with its consent given under request id `consent_request`, once the
/// interviewer has asked its first question; returns the session id.
async fn consented(base: &str, consent_request: &str) -> String {
    let client = reqwest::Client::new();
    let created: Value = client
        .post(format!("{base}/api/public/studies/demo/sessions"))
        .header("X-Request-Id", "trace-create")
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let (id, token) = (
        created["session_id"].as_str().unwrap().to_string(),
        created["participant_token"].as_str().unwrap().to_string(),
    );
    for _ in 0..200 {
        let s: Value = client
            .get(format!("{base}/api/sessions/{id}"))
            .bearer_auth(RESEARCHER)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let pending = &s["pending_interaction"];
        if pending["type"] == "consent" {
            let widget = pending["interaction_id"].as_str().unwrap();
            let res = client
                .post(format!(
                    "{base}/api/sessions/{id}/interactions/{widget}/submit"
                ))
                .bearer_auth(&token)
                .header("X-Request-Id", consent_request)
                .json(&json!({"status": "submitted", "value": {"accepted": true}}))
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 200);
        } else if s["status"] == "waiting_for_user" && s["turn_count"] == 0 && s["consent"] == true
        {
            return id;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the interviewer did not ask its first question");
}

/// The log lines that are JSON objects.
fn lines(logs: &str) -> Vec<Value> {
    logs.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

/// The fields of the span named `name` among a line's spans.
fn span<'a>(line: &'a Value, name: &str) -> Option<&'a Value> {
    line["spans"].as_array()?.iter().find(|s| s["name"] == name)
}

async fn spans_carry_the_session_and_the_request_that_started_the_run(store: Store) {
    let (child, base, dir) = server(store, &[]).await;
    let session = consented(&base, "trace-consent-1").await;
    let (_, logs) = stop(child);
    let lines = lines(&logs);
    // The consent's request: its id and its session on the request span.
    let finished = lines
        .iter()
        .find(|l| {
            l["message"] == "request finished" && l["span"]["request_id"] == "trace-consent-1"
        })
        .unwrap_or_else(|| panic!("no line for the consent's request: {logs}"));
    assert_eq!(
        finished["span"]["session_id"],
        session.as_str(),
        "{finished}"
    );
    assert_eq!(finished["span"]["name"], "request");
    // The run it started is under it: the run's line carries the run's session and the
    // request's id.
    let run = lines
        .iter()
        .find(|l| {
            l["message"] == "interviewer run finished"
                && span(l, "request").is_some_and(|r| r["request_id"] == "trace-consent-1")
        })
        .unwrap_or_else(|| panic!("no interviewer run under the consent's request: {logs}"));
    assert_eq!(
        span(run, "interviewer_run").unwrap()["session_id"],
        session.as_str(),
        "{run}"
    );
    // The create's request names the session it made.
    assert!(
        lines.iter().any(|l| l["message"] == "request finished"
            && l["span"]["request_id"] == "trace-create"
            && l["span"]["session_id"] == session.as_str()),
        "{logs}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

crate::both_stores!(spans_carry_the_session_and_the_request_that_started_the_run);

/// An OTLP/HTTP collector that keeps every request body it is sent.
#[cfg(feature = "otlp")]
async fn collector() -> (String, std::sync::Arc<std::sync::Mutex<Vec<u8>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let received = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = received.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let kept = kept.clone();
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 8192];
                loop {
                    let Ok(n) = socket.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buffer.extend_from_slice(&chunk[..n]);
                    // One whole request (headers and a Content-Length body) at a time.
                    while let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buffer[..end]).to_lowercase();
                        let length: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse().ok())
                            .unwrap_or(0);
                        if buffer.len() < end + 4 + length {
                            break;
                        }
                        let body: Vec<u8> =
                            buffer.drain(..end + 4 + length).skip(end + 4).collect();
                        kept.lock().unwrap().extend_from_slice(&body);
                        let reply = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
                        if socket.write_all(reply.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (url, received)
}

#[cfg(feature = "otlp")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spans_reach_an_otlp_collector() {
    let (url, received) = collector().await;
    let (child, base, dir) = server(
        Store::Sqlite,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", url),
            ("OTEL_BSP_SCHEDULE_DELAY", "100".into()),
        ],
    )
    .await;
    let session = consented(&base, "trace-otlp-1").await;
    // Stopping flushes whatever is still buffered.
    let (status, logs) = stop(child);
    assert!(status.success(), "{logs}");
    let body = received.lock().unwrap().clone();
    // Protobuf keeps strings as they are: span names and attribute values show in the bytes.
    let has = |text: &str| body.windows(text.len()).any(|w| w == text.as_bytes());
    for text in [
        "interviewer_run",
        "request",
        "command",
        "commit",
        "trace-otlp-1",
        &session,
    ] {
        assert!(
            has(text),
            "{text:?} not in the {} bytes sent: {logs}",
            body.len()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
