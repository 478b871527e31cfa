//! Generated whole sessions, on both stores: a seeded participant (answers of every length and
//! language, skips, one-word streaks, end intents, `/end` and withdrawal at any step (and
//! withdrawal after the end), racing duplicate submits
//! and messages, reconnects) against a seeded model (good tool calls and every fault kind the
//! scripted model has), through the real server. For every session: it ends (`completed` or
//! `abandoned`) within `max_turn_count` + [`EXTRA_STEPS`] participant steps, no step waits for the
//! interviewer longer than the model's timeout allows, and `replay verify --all` passes.
//!
//! `GEN_SESSIONS` (per store, default 120) and `GEN_SEED` (default fixed) set the run; a failure
//! names the seed of its session and of its run. `GEN_SEED=<seed> GEN_SESSIONS=1` replays that
//! session's participant and model script alone; in the run, sessions eight at a time drew their
//! model replies from one shared queue, so a failure that depends on that interleaving needs the
//! run's seed and size again.
//! The longer run (thousands) is `GEN_SESSIONS=2000 cargo test -p interview-replay --test
//! generated --release` (docs/audit.md).

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use interview_runtime::settings::Secret;
use interview_runtime::{Application, Settings};
use interview_test_kit::scripted_model::{Reply, ScriptedModel};
use interview_test_kit::widget_values;
use serde_json::{json, Value};

/// Participant steps allowed beyond the study's `max_turn_count`.
const EXTRA_STEPS: usize = 12;
/// The llm study's `model.timeout_seconds`.
const MODEL_TIMEOUT_SECS: u64 = 3;
/// The server's `MODEL_IDLE_TIMEOUT_SECS` (a stalled stream counts as failed after it).
const IDLE_SECS: u64 = 1;
const TOKEN: &str = "gen-researcher";
const MAX_TURNS: usize = 12;

/// splitmix64: small, seedable, good enough to pick behaviours.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const ANSWERS: &[&str] = &[
    "We plan on Sunday evenings: my partner checks the fridge and I write the list on my phone, then we order online.",
    "我们每周日晚上一起计划，先看冰箱里还有什么，然后在手机上列清单。",
    "list",
    "ok",
    "no idea",
    "Vegetables go bad before we eat them because we buy too much on impulse every single week, it is frustrating 😩",
    "Honestly a shopping list that fills itself from the meals we plan would save me the most time.",
    "Prices. Always prices. And the queues on Saturday morning, which is the only time I have.",
    "Mostly from memory, sometimes a paper list on the fridge door",
    "I don't know, it depends on the week really",
];
const END_INTENTS: &[&str] = &["I'm done", "结束", "I want to stop now", "stop"];
const CONFIRMATIONS: &[&str] = &["yes", "Yes, that's right", "对", "correct"];
const ADDITIONS: &[&str] = &[
    "add: I also use a notebook",
    "Also, my kids help choose the snacks.",
];

/// A model reply: mostly sensible tool calls, sometimes every kind of failure.
fn model_reply(rng: &mut Rng) -> Reply {
    let objective = *rng.pick(&["planning_habits", "pain_points", "tool_preferences"]);
    match rng.below(15) {
        0 => Reply::Status(500),
        1 => Reply::RateLimited,
        2 => Reply::Garbage,
        3 => Reply::NoTool("As an AI agent I will now call the ask_question tool"),
        4 => Reply::TwoTools,
        5 => Reply::RawArgs("ask_question", r#"{"objective_id": planning_habits"#),
        6 => Reply::Tool("dance", json!({"rationale": "why not"})),
        7 => Reply::Drop(
            "ask_question",
            r#"{"objective_id": "planning_habits", "message": "Could you tell me about the last time you planned your shopping?", "rationale": "open"}"#,
            70,
        ),
        8 if rng.chance(30) => Reply::Stall,
        9 => Reply::Tool(
            "probe",
            json!({"objective_id": objective, "trigger": "vague", "message": "Could you give me a concrete example?", "rationale": "vague"}),
        ),
        10 => Reply::Tool(
            "summarize_and_confirm",
            json!({"summary": "You plan on Sundays with a list.", "message": "Here is what I heard. Did I get that right?", "rationale": "enough"}),
        ),
        11 => Reply::Tool(
            "conclude",
            json!({"reason": "all_must_objectives_covered", "rationale": "done"}),
        ),
        _ => Reply::Tool(
            "ask_question",
            json!({"objective_id": objective, "message": "What is the hardest part of that for you?", "rationale": "next"}),
        ),
    }
}

struct Server {
    base: String,
    url: String,
    http: reqwest::Client,
    interviewer: Arc<interview_runtime::interviewer::Interviewer>,
    model: ScriptedModel,
    _dir: std::path::PathBuf,
}

impl Server {
    // Long by design: one test server set up in order: a fresh PostgreSQL or SQLite database, the
    // scripted model, settings with the rate caps off, the app spawned, then the rules and the
    // model study created and published.
    async fn start(postgres: bool) -> Self {
        let dir = std::env::temp_dir().join(format!("gen-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let url = if postgres {
            interview_test_kit::fresh_postgres_database().await
        } else {
            format!("sqlite://{}", dir.join("interview.db").display())
        };
        let model = ScriptedModel::start().await;
        let settings = Settings {
            bind: "127.0.0.1:0".into(),
            database_url: Some(url.clone()),
            data_dir: dir.clone(),
            researcher_tokens: vec![Secret(TOKEN.into())],
            openai_base_url: Some(model.url.clone()),
            model_idle_timeout_secs: IDLE_SECS,
            sweep_interval_secs: 1,
            create_rate_per_address: 0,
            // The load generator and scripted participants come from one address, as fast as
            // they can: the per-session input rate and the shared model caps are off here.
            inputs_per_session_per_minute: 0,
            create_rate_per_study: 0,
            ..Settings::default()
        };
        let app = Application::build(settings).await.unwrap();
        let base = format!("http://127.0.0.1:{}", app.port());
        let interviewer = app.state().interviewer.clone();
        tokio::spawn(app.run_until_stopped());
        let server = Self {
            base,
            url,
            // Idle connections are dropped before the server's 5-second keep-alive closes them:
            // a request sent on one the server is closing fails as an incomplete message.
            http: reqwest::Client::builder()
                .pool_idle_timeout(Duration::from_secs(2))
                .build()
                .unwrap(),
            interviewer,
            model,
            _dir: dir,
        };
        for (slug, mode) in [("gen-rules", "rules"), ("gen-llm", "llm")] {
            let mut study: Value =
                serde_json::from_str(include_str!("../../examples/demo-study.json")).unwrap();
            study["public_slug"] = json!(slug);
            study["agent"]["mode"] = json!(mode);
            study["model"]["timeout_seconds"] = json!(MODEL_TIMEOUT_SECS);
            study["limits"]["max_turn_count"] = json!(MAX_TURNS);
            let created: Value = server
                .post("/api/studies", Some(TOKEN), json!(study))
                .await
                .json()
                .await
                .unwrap();
            let id = created["study_id"].as_str().unwrap().to_string();
            let published = server
                .post(
                    &format!("/api/studies/{id}/publish"),
                    Some(TOKEN),
                    json!({}),
                )
                .await;
            assert!(published.status().is_success());
        }
        server
    }

    async fn post(&self, path: &str, token: Option<&str>, body: Value) -> reqwest::Response {
        let mut req = self.http.post(format!("{}{path}", self.base)).json(&body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send().await.unwrap()
    }

    async fn state(&self, session: &str) -> Value {
        self.http
            .get(format!("{}/api/sessions/{session}", self.base))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Waits for the interviewer's turn to end; how long it took.
    async fn settle(&self, session: &str) -> Duration {
        let started = Instant::now();
        let limit = Duration::from_secs(MODEL_TIMEOUT_SECS * 4 + 10);
        let idle = self
            .interviewer
            .wait_until_idle(session, limit)
            .await
            .unwrap();
        assert!(idle, "the interviewer never finished its turn");
        started.elapsed()
    }
}

/// One generated session, start to end; its step log on failure.
// Long by design: one generated session as a loop: created on a study the seed picks, then each
// step queues model replies, waits for the interviewer within a bound, stops at the end (sometimes
// withdrawing after it) or acts and logs what it did; the step log is kept for the failure message.
async fn one_session(server: &Server, seed: u64) -> Result<(), String> {
    let mut rng = Rng(seed);
    let mut log = vec![format!("seed {seed}")];
    let llm = rng.chance(40);
    let slug = if llm { "gen-llm" } else { "gen-rules" };
    let res = server
        .post(
            &format!("/api/public/studies/{slug}/sessions"),
            None,
            json!({}),
        )
        .await;
    let status = res.status();
    let body = res
        .bytes()
        .await
        .map_err(|e| format!("create ({status}): {e:?}"))?;
    let created: Value = serde_json::from_slice(&body).map_err(|e| {
        format!(
            "create ({status}): {e}: {:?}",
            String::from_utf8_lossy(&body)
        )
    })?;
    let session = created["session_id"]
        .as_str()
        .ok_or("no session id")?
        .to_string();
    let token = created["participant_token"].as_str().unwrap().to_string();
    log.push(format!("{slug} session {session}"));
    // Each model call of this session takes the next scripted reply; the script is shared by
    // the sessions running at once, which only mixes the faults further.
    let worst_wait = Duration::from_secs(MODEL_TIMEOUT_SECS + 2 * IDLE_SECS + 3);
    let mut step = 0;
    loop {
        if llm {
            for _ in 0..3 {
                server.model.push(model_reply(&mut rng));
            }
        }
        let waited = server.settle(&session).await;
        if waited > worst_wait {
            return Err(fail(
                &log,
                &format!("the interviewer took {waited:?} (> {worst_wait:?})"),
            ));
        }
        let s = server.state(&session).await;
        let status = s["status"].as_str().unwrap_or_default().to_string();
        if status == "completed" || status == "abandoned" {
            log.push(format!("ended {status} after {step} steps"));
            // Some withdraw after the end, while the post-session extraction may be running.
            if rng.chance(10) {
                let did = withdraw(server, &session, &token).await;
                log.push(did.clone());
                if !did.ends_with("200 OK") {
                    return Err(fail(&log, "a withdrawal after the end was refused"));
                }
            }
            return Ok(());
        }
        step += 1;
        if step > MAX_TURNS + EXTRA_STEPS {
            return Err(fail(
                &log,
                &format!("no end after {step} steps: {}", brief(&s)),
            ));
        }
        let did = act(server, &session, &token, &s, &mut rng).await;
        log.push(format!(
            "step {step} [{status}/{}]: {did}",
            s["current_phase"]
        ));
        if did.starts_with("POST /withdraw") && !did.ends_with("200 OK") {
            return Err(fail(&log, "a withdrawal was refused"));
        }
    }
}

/// The participant withdraws (docs/privacy.md); what happened.
async fn withdraw(server: &Server, session: &str, token: &str) -> String {
    let res = server
        .post(
            &format!("/api/sessions/{session}/withdraw"),
            Some(token),
            json!({}),
        )
        .await;
    format!("POST /withdraw: {}", res.status())
}

/// The session as a failure reports it: status, phase, turns, and the last decisions.
fn brief(s: &Value) -> String {
    let decisions: Vec<String> = s["decision_log"]
        .as_array()
        .map(|d| {
            d.iter()
                .rev()
                .take(6)
                .map(|d| format!("{} / {}", d["selected_action"], d["rationale"]))
                .collect()
        })
        .unwrap_or_default();
    format!(
        "status {} phase {} turns {}; last decisions (newest first):\n    {}",
        s["status"],
        s["current_phase"],
        s["turn_count"],
        decisions.join("\n    ")
    )
}

fn fail(log: &[String], why: &str) -> String {
    format!("{why}\n  {}", log.join("\n  "))
}

/// One participant step, chosen by the seed; what was done.
async fn act(server: &Server, session: &str, token: &str, s: &Value, rng: &mut Rng) -> String {
    let base = format!("/api/sessions/{session}");
    if rng.chance(2) {
        return withdraw(server, session, token).await;
    }
    if rng.chance(5) {
        server
            .post(&format!("{base}/end"), Some(token), json!({}))
            .await;
        return "POST /end".into();
    }
    if rng.chance(5) {
        // A reconnect: the stream from the start, read briefly, dropped.
        let res = server
            .http
            .get(format!(
                "{}{base}/stream?token={token}&last_event_id=0",
                server.base
            ))
            .send()
            .await
            .unwrap();
        let _ = tokio::time::timeout(Duration::from_millis(50), res.bytes()).await;
    }
    if let Some(widget) = s["pending_interaction"].as_object() {
        let id = widget["interaction_id"].as_str().unwrap();
        let path = format!("{base}/interactions/{id}/submit");
        let consent = widget["type"] == "consent";
        let body = if consent {
            json!({"status": "submitted", "value": {"accepted": !rng.chance(8)}})
        } else if rng.chance(25) {
            json!({"status": "skipped"})
        } else {
            json!({"status": "submitted", "value": widget_values::typical_value(&s["pending_interaction"])})
        };
        let copies = if rng.chance(20) { 3 } else { 1 };
        let sends = (0..copies).map(|_| server.post(&path, Some(token), body.clone()));
        futures_util::future::join_all(sends).await;
        return format!("{copies} × submit {body}");
    }
    let text = if s["current_phase"] == "SUMMARY_CONFIRMATION" {
        match rng.below(10) {
            0..=5 => *rng.pick(CONFIRMATIONS),
            6 | 7 => *rng.pick(ADDITIONS),
            _ => *rng.pick(END_INTENTS),
        }
    } else if rng.chance(7) {
        *rng.pick(END_INTENTS)
    } else {
        *rng.pick(ANSWERS)
    };
    let key = format!("m{}", rng.next());
    let copies = if rng.chance(15) { 2 } else { 1 };
    let body = json!({"content": text, "client_message_id": key});
    let path = format!("{base}/messages");
    let sends = (0..copies).map(|_| server.post(&path, Some(token), body.clone()));
    futures_util::future::join_all(sends).await;
    format!("{copies} × say {text:?}")
}

async fn generated_sessions_end_and_verify(postgres: bool) {
    let sessions: u64 = std::env::var("GEN_SESSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(120);
    let base_seed: u64 = std::env::var("GEN_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5EED_2026_1201);
    let server = Arc::new(Server::start(postgres).await);
    let mut failures = Vec::new();
    // Eight at a time: the interviewer's turns of different sessions overlap, as in the field.
    let seeds: Vec<u64> = (0..sessions).map(|i| base_seed.wrapping_add(i)).collect();
    for batch in seeds.chunks(8) {
        let runs = batch.iter().map(|seed| {
            let server = server.clone();
            let seed = *seed;
            tokio::spawn(async move { (seed, one_session(&server, seed).await) })
        });
        for outcome in futures_util::future::join_all(runs).await {
            if let (seed, Err(why)) = outcome.unwrap() {
                failures.push(format!(
                    "GEN_SEED={seed} GEN_SESSIONS=1 (in the run GEN_SEED={base_seed} GEN_SESSIONS={sessions}): {why}"
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {sessions} sessions failed:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    // Let the post-session extractions finish, then the audit.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let out = Command::new(env!("CARGO_BIN_EXE_replay"))
        .args(["verify", "--all"])
        .env("DATABASE_URL", &server.url)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "replay verify --all failed:\n{stdout}"
    );
    assert!(
        stdout.contains(&format!("{} session(s) checked, 0 failed", sessions)),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_sessions_end_and_verify_on_sqlite() {
    generated_sessions_end_and_verify(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_sessions_end_and_verify_on_postgres() {
    generated_sessions_end_and_verify(true).await;
}
