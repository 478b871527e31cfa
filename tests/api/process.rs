//! The `interview-runtime` binary as an operator runs it: `--help`, start-up on the embedded
//! default with a generated researcher token, and a clean exit on SIGTERM.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
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
    let started = Instant::now();
    loop {
        if client
            .get(format!("{base}/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200)
        {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the server did not become ready"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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
    let _ = std::fs::remove_dir_all(&dir);
}
