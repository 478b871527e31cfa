//! The "wallet run" of issue 30, with the default settings: one client address, 4 concurrent
//! loops for 15 s, against an `llm` study whose model loops on `extract_fields` (answering
//! every request with one, its usage counted from the request like a hosted model's). Each
//! loop starts a session, consents and sends messages as fast as the server takes them,
//! starting anew when a session refuses more. Measured: the model calls made and their tokens —
//! bounded by the per-address hourly budget, not by how hard the client pushes.

use std::time::{Duration, Instant};

use interview_runtime::settings::Secret;
use interview_runtime::{Application, Settings};
use serde_json::{json, Value};

use crate::scripted_model::{Pace, Reply, ScriptedModel};
use crate::{participant, RESEARCHER};

const SLUG: &str = "bench-wallet";
const MODEL: &str = "wallet-sim";
const LOOPS: usize = 4;
const RUN_FOR: Duration = Duration::from_secs(15);

// Long by design: one measurement read top to bottom: a scripted model, a server with default
// settings, the study, then four loops sending input for 15 s, then the model calls and tokens
// counted and printed; the loops run against the model and server set up above.
pub async fn run(label: &str, database_url: Option<String>) {
    let model = ScriptedModel::start().await;
    // Answering at once, its usage counted from each request as a hosted model's is.
    model.simulate(
        MODEL,
        Pace {
            first_token: Duration::ZERO,
            between_tokens: Duration::ZERO,
        },
        Reply::Realistic(
            "extract_fields",
            json!({"fields": [{"field_id": "planning_method", "value": "a list", "confidence": 0.8,
                    "evidence_turn_ids": [], "quote": "a list"}], "rationale": "extract again"}),
        ),
    );
    // Everything as an operator who changed nothing gets it.
    let settings = Settings {
        bind: "127.0.0.1:0".into(),
        database_url,
        data_dir: std::env::temp_dir().join(format!(
            "interview-wallet-{}",
            uuid::Uuid::new_v4().simple()
        )),
        researcher_tokens: vec![Secret(RESEARCHER.into())],
        openai_base_url: Some(model.url.clone()),
        ..Settings::default()
    };
    let defaults = settings.model_tokens_per_address_per_hour;
    let app = Application::build(settings).await.expect("server starts");
    let base = format!("http://127.0.0.1:{}", app.port());
    tokio::spawn(app.run_until_stopped());
    let http = reqwest::Client::new();
    let mut study: Value =
        serde_json::from_str(include_str!("../../examples/demo-study.json")).unwrap();
    study["public_slug"] = json!(SLUG);
    study["agent"]["mode"] = json!("llm");
    study["model"]["model"] = json!(MODEL);
    participant::publish(&http, &base, RESEARCHER, &study).await;

    let before = model.calls();
    let started = Instant::now();
    let loops = (0..LOOPS).map(|_| {
        let (http, base) = (http.clone(), base.clone());
        async move {
            let mut sent = 0u64;
            while started.elapsed() < RUN_FOR {
                let Some((id, token)) = try_start(&http, &base).await else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                if !consent(&http, &base, &id, &token).await {
                    continue;
                }
                while started.elapsed() < RUN_FOR {
                    let status = http
                        .post(format!("{base}/api/sessions/{id}/messages"))
                        .bearer_auth(&token)
                        .json(&json!({"content": "Not sure."}))
                        .send()
                        .await
                        .map_or(0, |r| r.status().as_u16());
                    sent += 1;
                    if status != 202 {
                        break;
                    }
                }
            }
            sent
        }
    });
    let sent: u64 = futures_util::future::join_all(loops)
        .await
        .into_iter()
        .sum();
    let calls = model.calls() - before;
    let tokens: u64 = model
        .requests()
        .iter()
        .map(|r| {
            r["messages"].as_array().map_or(0, |m| {
                m.iter()
                    .map(|m| m["content"].as_str().map_or(0, str::len))
                    .sum::<usize>()
            }) as u64
                / 4
        })
        .sum();
    println!(
        "| {label:<10} | wallet run: {LOOPS} loops, {} s, one address, default settings: {sent} inputs sent, {calls} model calls, ~{tokens} prompt tokens (address cap {defaults} tokens/h) |",
        RUN_FOR.as_secs()
    );
}

/// A new session, unless the server refuses one now.
async fn try_start(http: &reqwest::Client, base: &str) -> Option<(String, String)> {
    let res = http
        .post(format!("{base}/api/public/studies/{SLUG}/sessions"))
        .json(&json!({}))
        .send()
        .await
        .ok()?;
    if res.status() != 201 {
        return None;
    }
    let body: Value = res.json().await.ok()?;
    Some((
        body["session_id"].as_str()?.to_string(),
        body["participant_token"].as_str()?.to_string(),
    ))
}

/// Accepts the session's consent once the interviewer shows it.
async fn consent(http: &reqwest::Client, base: &str, id: &str, token: &str) -> bool {
    for _ in 0..100 {
        let s = participant::read(http, base, id, token).await;
        if s["pending_interaction"]["type"] == "consent" {
            let interaction = s["pending_interaction"]["interaction_id"]
                .as_str()
                .unwrap_or_default();
            let res = http
                .post(format!(
                    "{base}/api/sessions/{id}/interactions/{interaction}/submit"
                ))
                .bearer_auth(token)
                .json(&json!({"status": "submitted", "value": {"accepted": true}}))
                .send()
                .await;
            return res.is_ok_and(|r| r.status().is_success());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}
