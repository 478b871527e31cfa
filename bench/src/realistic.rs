//! The `llm` path against a model that behaves like a hosted one: the scripted model answers
//! the study whose model is [`SIMULATED_MODEL`] after [`FIRST_TOKEN`], then one token-sized
//! fragment every [`BETWEEN_TOKENS`], arguments in the schema's order, usage counted from the
//! request. Measured: POST → first participant-visible delta (aim: ≤ time to first token +
//! 20 ms, i.e. one model round trip), and the model calls and prompt tokens of one completed
//! 20-turn interview.

use std::time::Duration;

use serde_json::{json, Value};

use crate::scripted_model::{Pace, Reply, ScriptedModel};
use crate::{publish, row, stats, turns, RESEARCHER};

pub const SIMULATED_MODEL: &str = "hosted-sim";
pub const FIRST_TOKEN: Duration = Duration::from_millis(300);
pub const BETWEEN_TOKENS: Duration = Duration::from_millis(25);
const SLUG: &str = "bench-llm-hosted";

/// Makes the scripted model answer [`SIMULATED_MODEL`] like a hosted model.
pub fn simulate(model: &ScriptedModel) {
    model.simulate(
        SIMULATED_MODEL,
        Pace {
            first_token: FIRST_TOKEN,
            between_tokens: BETWEEN_TOKENS,
        },
        Reply::Realistic(
            "ask_question",
            json!({"objective_id": "planning_habits", "message": "Thanks! Could you tell me a little more about how that works for you, in your own words ({call})?", "rationale": "hosted-model simulation"}),
        ),
    );
}

pub async fn publish_study(http: &reqwest::Client, base: &str) {
    let mut study: Value =
        serde_json::from_str(include_str!("../../examples/demo-study.json")).unwrap();
    study["public_slug"] = json!(SLUG);
    study["agent"]["mode"] = json!("llm");
    study["model"]["model"] = json!(SIMULATED_MODEL);
    publish(http, base, &study.to_string()).await;
}

pub async fn run(
    label: &str,
    http: &reqwest::Client,
    base: &str,
    model: &ScriptedModel,
    turns_at_one: usize,
) {
    for (clients, total) in [(1, turns_at_one), (16, turns_at_one * 4)] {
        let t = turns::run(http, base, SLUG, clients, total).await;
        let n = t.first_from_post.len();
        row(
            label,
            "POST→1st delta (hosted)",
            clients,
            n,
            &stats(t.first_from_post, t.wall),
        );
        if clients == 1 {
            // Each first delta against the moment the model sent the message's first token
            // (one turn at a time, so the latest such moment before the delta is its own).
            let marks: Vec<_> = model
                .timeline()
                .into_iter()
                .filter(|c| !c.extraction)
                .filter_map(|c| c.first_message)
                .collect();
            let overhead: Vec<Duration> = t
                .first_delta_at
                .iter()
                .filter_map(|at| marks.iter().filter(|m| *m <= at).max().map(|m| *at - *m))
                .collect();
            let n = overhead.len();
            row(
                label,
                "model token→delta (hosted)",
                clients,
                n,
                &stats(overhead, t.wall),
            );
        }
    }
    let (calls, prompt_tokens, turns) = one_interview(http, base).await;
    println!(
        "| {label:<10} | hosted-model interview  | {turns} turns to completion: {calls} model calls, {prompt_tokens} prompt tokens (first token {} ms, {} ms a token) |",
        FIRST_TOKEN.as_millis(),
        BETWEEN_TOKENS.as_millis()
    );
}

/// One interview to completion: model calls (decisions a model made, and failed calls) and
/// prompt tokens, from its decision log, and the participant turns it took.
// Long by design: one interview read top to bottom: start it, answer each widget or question until
// it ends, then count its model calls and prompt tokens from the decision log; the small closures
// at the top poll the session for the loop.
async fn one_interview(http: &reqwest::Client, base: &str) -> (usize, u64, usize) {
    let (id, token) = crate::participant::start(http, base, SLUG).await;
    let session = |http: reqwest::Client| {
        let url = format!("{base}/api/sessions/{id}");
        async move {
            http.get(url)
                .bearer_auth(RESEARCHER)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    let settled = |s: &Value| s["status"] != "active" && s["status"] != "created";
    let wait = || async {
        loop {
            let s = session(http.clone()).await;
            if settled(&s) {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let mut s = wait().await;
    let mut turns = 0;
    while s["status"] != "completed" && s["status"] != "abandoned" {
        if let Some(pending) = s["pending_interaction"].as_object() {
            let interaction = Value::Object(pending.clone());
            let iid = interaction["interaction_id"].as_str().unwrap().to_string();
            let value = crate::widget_values::typical_value(&interaction);
            http.post(format!(
                "{base}/api/sessions/{id}/interactions/{iid}/submit"
            ))
            .bearer_auth(&token)
            .json(&json!({"status": "submitted", "value": value}))
            .send()
            .await
            .unwrap();
        } else {
            let text = if s["current_phase"] == "SUMMARY_CONFIRMATION" {
                "yes".to_string()
            } else {
                format!("Answer {turns}: we plan on Sunday evenings with a shared list on the phone, and my partner adds what runs out.")
            };
            http.post(format!("{base}/api/sessions/{id}/messages"))
                .bearer_auth(&token)
                .json(&json!({ "content": text }))
                .send()
                .await
                .unwrap();
            turns += 1;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        s = wait().await;
    }
    let log = s["decision_log"].as_array().cloned().unwrap_or_default();
    let calls = log.iter().filter(|d| d["model"] != "rules").count()
        + s["errors"]
            .as_array()
            .map_or(0, |e| e.iter().filter(|e| e["source"] == "model").count());
    let prompt_tokens = log
        .iter()
        .map(|d| d["token_usage"]["prompt_tokens"].as_u64().unwrap_or(0))
        .sum();
    (calls, prompt_tokens, turns)
}
