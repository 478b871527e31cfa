//! `kill -9` between a participant's message and the interviewer's answer: after a restart on
//! the same database the answer comes, once, without waiting for the dead claim to go stale.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::participant::{self, Step, Words};
use crate::scripted_model::{Reply, ScriptedModel};

pub(crate) const RESEARCHER: &str = "restart-researcher";

use crate::process::free_port;

pub(crate) struct Server {
    child: Child,
    pub(crate) base: String,
}

impl Server {
    async fn start(dir: &std::path::Path, model_url: &str) -> Self {
        Self::start_on(dir, model_url, None).await
    }

    /// A server process on `database_url` (PostgreSQL), or on the embedded store in `dir`.
    pub(crate) async fn start_on(
        dir: &std::path::Path,
        model_url: &str,
        database_url: Option<&str>,
    ) -> Self {
        Self::start_with(dir, model_url, database_url, &[]).await
    }

    /// The same, with more settings in its environment.
    pub(crate) async fn start_with(
        dir: &std::path::Path,
        model_url: &str,
        database_url: Option<&str>,
        settings: &[(&str, &str)],
    ) -> Self {
        let port = free_port();
        let mut command = Command::new(env!("CARGO_BIN_EXE_interview-runtime"));
        command.envs(settings.iter().copied());
        match database_url {
            Some(url) => command.env("DATABASE_URL", url).env("DEMO_STUDY", "true"),
            None => command.env_remove("DATABASE_URL"),
        };
        let child = command
            .current_dir(dir)
            .env("BIND", format!("127.0.0.1:{port}"))
            .env("RESEARCHER_TOKENS", RESEARCHER)
            .env("OPENAI_BASE_URL", model_url)
            .env("MODEL_IDLE_TIMEOUT_SECS", "120")
            .env_remove("CONFIG_FILE")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        crate::process::wait_ready(&reqwest::Client::new(), &base).await;
        Self { child, base }
    }

    pub(crate) fn kill_9(mut self) {
        self.child.kill().unwrap(); // SIGKILL: no shutdown, no cleanup
        self.child.wait().unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls the session until `pred` holds (or fails after `wait`).
async fn until(
    http: &reqwest::Client,
    base: &str,
    id: &str,
    token: &str,
    wait: Duration,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + wait;
    loop {
        let s = participant::read(http, base, id, token).await;
        if pred(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "gave up waiting: {s}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn assistant_turns(s: &Value) -> usize {
    s["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["role"] == "assistant" && t["kind"] == "message")
        .count()
}

// Long by design: one crash in the order it happens: a model study published, consent and the
// opening question, a message whose model call stalls, the process killed there, a second process
// started, then the answer, the transcript and the one takeover in the log checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_turn_the_answer_comes_after_the_restart() {
    let dir =
        std::env::temp_dir().join(format!("interview-kill-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let model = ScriptedModel::start().await;
    let http = reqwest::Client::new();
    let first = Server::start(&dir, &model.url).await;
    let base = first.base.clone();

    let mut study: Value =
        serde_json::from_str(include_str!("../../examples/demo-study.json")).unwrap();
    study["public_slug"] = json!("kill");
    study["agent"]["mode"] = json!("llm");
    study["model"]["timeout_seconds"] = json!(120);
    participant::publish(&http, &base, RESEARCHER, &study).await;

    let (id, token) = participant::start(&http, &base, "kill").await;
    let s = until(&http, &base, &id, &token, Duration::from_secs(10), |s| {
        s["pending_interaction"]["type"] == "consent"
    })
    .await;
    // The opening question comes from the model; the answer to the next message stalls.
    model.push(Reply::Tool(
        "ask_question",
        json!({"objective_id": "planning_habits", "message": "How do you plan your groceries?", "rationale": "open"}),
    ));
    model.push(Reply::Stall);
    let consent = s["pending_interaction"]["interaction_id"].as_str().unwrap();
    let res = http
        .post(format!(
            "{base}/api/sessions/{id}/interactions/{consent}/submit"
        ))
        .bearer_auth(&token)
        .json(&json!({"status": "submitted", "value": {"accepted": true}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    until(&http, &base, &id, &token, Duration::from_secs(10), |s| {
        s["status"] == "waiting_for_user"
    })
    .await;
    let res = http
        .post(format!("{base}/api/sessions/{id}/messages"))
        .bearer_auth(&token)
        .json(&json!({"content": "We write a list on Sunday evenings."}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    // The interviewer has claimed the turn and is waiting on the model: kill it there. (An
    // extraction goes alongside the step and may arrive first: count the steps alone, or the
    // kill could come before the step took the stalled reply, leaving it for the restart.)
    let deadline = Instant::now() + Duration::from_secs(10);
    while model.timeline().iter().filter(|c| !c.extraction).count() < 2 {
        assert!(Instant::now() < deadline, "the model was not called");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.kill_9();

    model.push(Reply::Tool(
        "probe",
        json!({"objective_id": "planning_habits", "trigger": "vague", "message": "What goes on the list first?", "rationale": "more detail"}),
    ));
    let second = Server::start(&dir, &model.url).await;
    let s = until(
        &http,
        &second.base,
        &id,
        &token,
        Duration::from_secs(20),
        |s| s["status"] == "waiting_for_user" && assistant_turns(s) == 2,
    )
    .await;
    let transcript = s["transcript"].as_array().unwrap();
    assert_eq!(
        transcript.last().unwrap()["content"],
        "What goes on the list first?"
    );
    // The restarted process took the dead claim over, and said so in the log.
    let events: Value = http
        .get(format!("{}/api/sessions/{id}/events", second.base))
        .bearer_auth(RESEARCHER)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let takeovers = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["payload"]["type"] == "agent.message.started"
                && e["payload"]["takes_over"].is_string()
        })
        .count();
    assert_eq!(takeovers, 1, "{events}");
    drop(second);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Participants talking to the server until it is killed: every message that got a 2xx.
async fn talk_until_killed(
    http: reqwest::Client,
    base: String,
    id: String,
    token: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    acks: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) -> Vec<String> {
    // Never confirming the summary keeps the interview going until the kill.
    let words = Words {
        answer: "I use a list on my phone and my partner adds things",
        at_summary: "Actually one more thing: we also shop at the market",
    };
    let mut acknowledged = Vec::new();
    let mut n = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        n += 1;
        let Ok((step, _)) = participant::step(&http, &base, &id, &token, n, &words).await else {
            break;
        };
        match step {
            Step::Said {
                client_message_id,
                acknowledged: true,
            } => {
                acknowledged.push(client_message_id);
                acks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Step::Said { .. } | Step::Answered => {}
            Step::Ended => break,
            Step::Waiting => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
    acknowledged
}

/// `kill -9` in the middle of a concurrent load, then a restart: every acknowledged message is
/// in the log exactly once, every view has caught up, and every session that was waiting on the
/// interviewer gets its answer.
// Long by design: one crash under load in order: eight sessions talking until enough messages are
// acknowledged, the process killed, a second one started, then each session checked as answered,
// its log counted and its views caught up, and each acknowledged message found once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_under_load_nothing_acknowledged_is_lost() {
    let dir = std::env::temp_dir().join(format!(
        "interview-kill-load-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let model = ScriptedModel::start().await; // unused by the rules demo; the server wants a URL
    let http = reqwest::Client::new();
    let first = Server::start(&dir, &model.url).await;
    let base = first.base.clone();
    let mut sessions = Vec::new();
    for _ in 0..8 {
        sessions.push(participant::start(&http, &base, "demo").await);
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let acks = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let talkers: Vec<_> = sessions
        .iter()
        .map(|(id, token)| {
            tokio::spawn(talk_until_killed(
                http.clone(),
                base.clone(),
                id.clone(),
                token.clone(),
                stop.clone(),
                acks.clone(),
            ))
        })
        .collect();
    // Kill it in the thick of it: once the load is well under way (however fast this machine).
    let deadline = Instant::now() + Duration::from_secs(30);
    while acks.load(std::sync::atomic::Ordering::Relaxed) < 16 {
        assert!(Instant::now() < deadline, "the load did not get going");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.kill_9();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut acknowledged = Vec::new();
    for t in talkers {
        acknowledged.extend(t.await.unwrap());
    }
    assert!(
        acknowledged.len() >= 16,
        "the load ran: {}",
        acknowledged.len()
    );

    let second = Server::start(&dir, &model.url).await;
    let base = second.base.clone();
    let mut in_log = std::collections::HashMap::new();
    for (id, token) in &sessions {
        // Every session waiting on the interviewer is answered after the restart.
        let s = until(&http, &base, id, token, Duration::from_secs(20), |s| {
            !matches!(s["status"].as_str(), Some("created" | "active"))
        })
        .await;
        let events: Value = http
            .get(format!("{base}/api/sessions/{id}/events"))
            .bearer_auth(RESEARCHER)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let events = events["events"].as_array().unwrap().clone();
        for e in &events {
            if e["event_type"] == "participant.message.created" {
                if let Some(cmid) = e["payload"]["client_message_id"].as_str() {
                    *in_log.entry(cmid.to_string()).or_insert(0) += 1;
                }
            }
        }
        // The views have caught up with the log.
        let state: Value = http
            .get(format!("{base}/api/sessions/{id}/state"))
            .bearer_auth(RESEARCHER)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let last = events.last().unwrap()["sequence"].as_u64().unwrap();
        let view_seq = state["last_seq"]
            .as_u64()
            .unwrap_or_else(|| s["last_seq"].as_u64().unwrap());
        assert_eq!(view_seq, last, "{state}");
    }
    for cmid in &acknowledged {
        assert_eq!(
            in_log.get(cmid),
            Some(&1),
            "acknowledged message {cmid} is in the log once"
        );
    }
    drop(second);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two real server processes on one PostgreSQL database: a participant's stream held by one
/// sees, live, a message sent through the other and the interviewer's single answer to it.
// Long by design: one session across two processes in order: started on A, consent and a message
// sent through B while A holds the stream, then A's stream shows the message and the answer live,
// and A's state shows one answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_server_processes_share_one_database() {
    let url = crate::helpers::fresh_postgres_database().await;
    let dir = std::env::temp_dir().join(format!("interview-two-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let model = ScriptedModel::start().await;
    let a = Server::start_on(&dir, &model.url, Some(&url)).await;
    let b = Server::start_on(&dir, &model.url, Some(&url)).await;
    let http = reqwest::Client::new();
    let (id, token) = participant::start(&http, &a.base, "demo").await;
    let s = until(&http, &b.base, &id, &token, Duration::from_secs(10), |s| {
        s["pending_interaction"]["type"] == "consent"
    })
    .await;
    // The stream is held by A; everything else goes through B.
    let mut on_a = crate::sse::SseClient::new(
        http.get(format!("{}/api/sessions/{id}/stream?token={token}", a.base))
            .send()
            .await
            .unwrap(),
    );
    let consent = s["pending_interaction"]["interaction_id"].as_str().unwrap();
    let res = http
        .post(format!(
            "{}/api/sessions/{id}/interactions/{consent}/submit",
            b.base
        ))
        .bearer_auth(&token)
        .json(&json!({"status": "submitted", "value": {"accepted": true}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    until(&http, &b.base, &id, &token, Duration::from_secs(10), |s| {
        s["status"] == "waiting_for_user"
    })
    .await;
    let res = http
        .post(format!("{}/api/sessions/{id}/messages", b.base))
        .bearer_auth(&token)
        .json(&json!({"content": "Sent through process B, read on process A"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    let frames = on_a
        .until(Duration::from_secs(10), |f| {
            f.event == "message.completed"
                && f.data["role"] == "assistant"
                && f.data["content"] != "To start, could you walk me through how you usually decide what groceries to buy for the week?"
        })
        .await;
    assert!(frames
        .iter()
        .any(|f| f.data["content"] == "Sent through process B, read on process A"));
    let s = until(&http, &a.base, &id, &token, Duration::from_secs(10), |s| {
        s["status"] == "waiting_for_user"
    })
    .await;
    assert_eq!(assistant_turns(&s), 2, "one answer per turn: {s}");
    drop((a, b));
    let _ = std::fs::remove_dir_all(&dir);
}
