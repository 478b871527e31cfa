//! Growth with the work: one interview each of 10, 20, 40 and 80 turns with realistic answers
//! (about 60 words), on the offline interviewer. Per turn: the time from the participant's
//! `POST …/messages` to the interviewer's next utterance being complete on the stream; per
//! interview: what it stores. Both should be flat per turn.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::Server;

/// The interview lengths measured.
pub const LENGTHS: [usize; 4] = [10, 20, 40, 80];

/// A study with one objective per turn, so the interview runs until `max_turn_count`.
fn study(turns: usize) -> Value {
    let mut study: Value =
        serde_json::from_str(include_str!("../../examples/demo-study.json")).unwrap();
    study["public_slug"] = json!(format!("growth-{turns}"));
    study["limits"]["max_turn_count"] = json!(turns);
    study["limits"]["max_duration_minutes"] = json!(1440);
    study["objectives"] = (0..turns)
        .map(|i| {
            json!({"id": format!("topic_{i}"), "title": format!("Topic {i}"), "priority": "must",
                   "opening_question": format!("Could you tell me about part {i} of how you plan and buy groceries?"),
                   "max_probe_count": 1})
        })
        .collect();
    study["output_schema"]["fields"] = (0..turns)
        .map(|i| {
            json!({"id": format!("topic_{i}_notes"), "type": "string", "required": true,
                   "objective_id": format!("topic_{i}"), "description": format!("What they said about part {i}")})
        })
        .collect();
    study
}

/// An answer of about 60 words, different each turn.
fn answer(turn: usize) -> String {
    format!(
        "On week {turn} we sat down on Sunday evening and looked at what was left in the fridge, \
         then my partner wrote a list on her phone while I checked the calendar for dinners out. \
         We usually buy fruit, bread and milk at the small shop near work and the rest online on \
         Monday, but when the kids have football we forget half of it and order pizza instead."
    )
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() as f64 * q).ceil() as usize).saturating_sub(1)]
}

/// Runs the interviews of every length and prints one line each.
// Long by design: one interview after another in one loop — publish its study, take its turns
// timed (the summary answered), then what it stored and its line with the first and last
// quarter; split, the latencies and the interview they belong to would travel between functions.
pub async fn run(label: &str, server: &Server, http: &reqwest::Client) {
    let base = server.base.as_str();
    for turns in LENGTHS {
        crate::publish(http, base, &study(turns).to_string()).await;
        let slug = format!("growth-{turns}");
        let mut live = crate::turns::fresh(http, base, base, &slug).await;
        let mut latencies = Vec::with_capacity(turns + 1);
        let mut asked = 0;
        loop {
            let state = crate::participant::read(http, base, &live.id, &live.token).await;
            let text = if state["current_phase"] == "SUMMARY_CONFIRMATION" {
                "Yes, that's right".to_string()
            } else {
                asked += 1;
                answer(asked)
            };
            let t0 = Instant::now();
            let res = http
                .post(format!("{base}/api/sessions/{}/messages", live.id))
                .bearer_auth(&live.token)
                .json(&json!({ "content": text }))
                .send()
                .await
                .unwrap();
            assert_eq!(
                res.status(),
                202,
                "{}",
                res.text().await.unwrap_or_default()
            );
            let (open, _) = live.settle(http, base).await;
            latencies.push(t0.elapsed());
            if !open {
                break;
            }
            assert!(
                asked <= turns + 5,
                "the {turns}-turn interview does not end"
            );
        }
        let state = crate::participant::read(http, base, &live.id, &live.token).await;
        assert_eq!(state["status"], "completed", "{state}");
        let (events, sizes) = crate::scale::stored_bytes(label, server, &live.id, false).await;
        let total: i64 = sizes.iter().map(|(_, b)| b).sum();
        // Within the interview: its first and its last quarter of turns (the summary's turn left
        // out), so what grows with the session shows apart from what grows with the study.
        let quarter = (latencies.len() - 1) / 4;
        let median = |part: &[Duration]| {
            let mut part = part.to_vec();
            part.sort();
            percentile(&part, 0.5).as_secs_f64() * 1e3
        };
        let (early, late) = (
            median(&latencies[..quarter.max(1)]),
            median(&latencies[latencies.len() - 1 - quarter.max(1)..latencies.len() - 1]),
        );
        latencies.sort();
        println!(
            "{label}: {turns}-turn interview ({} participant turns): per turn p50 {:.2} ms, p99 {:.2} ms \
             (first quarter p50 {early:.2} ms, last quarter {late:.2} ms); \
             {events}, {:.1} KB stored, {:.2} KB per turn",
            state["turn_count"],
            percentile(&latencies, 0.5).as_secs_f64() * 1e3,
            percentile(&latencies, 0.99).as_secs_f64() * 1e3,
            total as f64 / 1024.0,
            total as f64 / 1024.0 / turns as f64,
        );
    }
}
