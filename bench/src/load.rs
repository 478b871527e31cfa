//! The concurrent-load run (AC-04-7): many sessions at once through a study with every widget
//! type, each widget answered by three racing duplicate submits and a racing message. Reports
//! sessions × widgets, the conflicts the losers got, and — re-checking every stored stream
//! against the aggregate's rules — how many sessions ever held two pending widgets (must be 0).

use std::time::Instant;

use serde_json::{json, Value};

struct Outcome {
    widgets: usize,
    conflicts: usize,
}

/// Polls until the interviewer has answered (the session waits for the participant or ended).
async fn settled(http: &reqwest::Client, base: &str, id: &str, token: &str) -> Value {
    loop {
        let s = crate::participant::read(http, base, id, token).await;
        if !matches!(s["status"].as_str(), Some("created" | "active")) {
            return s;
        }
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
}

async fn one_session(http: &reqwest::Client, base: &str, n: usize) -> (String, Outcome) {
    let (id, token) = crate::participant::start(http, base, "every-type").await;
    let mut out = Outcome {
        widgets: 0,
        conflicts: 0,
    };
    for _ in 0..80 {
        let s = settled(http, base, &id, &token).await;
        if s["status"] == "completed" || s["status"] == "abandoned" {
            break;
        }
        let pending = &s["pending_interaction"];
        if pending.is_null() {
            let text = if s["current_phase"] == "SUMMARY_CONFIRMATION" {
                "yes".to_string()
            } else {
                format!("Participant {n}: last Saturday I compared prices in two stores first")
            };
            let res = http
                .post(format!("{base}/api/sessions/{id}/messages"))
                .bearer_auth(&token)
                .json(&json!({ "content": text }))
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 202);
            continue;
        }
        let url = format!(
            "{base}/api/sessions/{id}/interactions/{}/submit",
            pending["interaction_id"].as_str().unwrap()
        );
        let body =
            json!({"status": "submitted", "value": crate::widget_values::typical_value(pending)});
        let submit = || http.post(&url).bearer_auth(&token).json(&body).send();
        let message = http
            .post(format!("{base}/api/sessions/{id}/messages"))
            .bearer_auth(&token)
            .json(&json!({"content": "hello?"}))
            .send();
        let (a, b, c, m) = tokio::join!(submit(), submit(), submit(), message);
        // Refused while the widget is open; taken when the winning submit's next question was
        // already out (the interviewer can be that quick): the re-check of every stored stream
        // after the run judges that it was.
        let m = m.unwrap().status().as_u16();
        assert!(m == 409 || m == 202, "the racing message: {m}");
        let statuses = [a, b, c].map(|r| r.unwrap().status().as_u16());
        assert_eq!(
            statuses.iter().filter(|s| **s == 200).count(),
            1,
            "{statuses:?}"
        );
        out.widgets += 1;
        out.conflicts += statuses.iter().filter(|s| **s == 409).count() + usize::from(m == 409);
    }
    (id, out)
}

pub async fn run(
    label: &str,
    database_url: &str,
    http: &reqwest::Client,
    base: &str,
    sessions: usize,
) {
    let started = Instant::now();
    let results =
        futures_util::future::join_all((0..sessions).map(|n| one_session(http, base, n))).await;
    let secs = started.elapsed().as_secs_f64();
    let db = interview_projections::Db::connect(
        database_url,
        &interview_projections::db::PoolSettings::default(),
    )
    .await
    .expect("the bench reaches the server's database");
    let mut double_pending = 0;
    let (mut widgets, mut conflicts) = (0, 0);
    for (id, outcome) in &results {
        widgets += outcome.widgets;
        conflicts += outcome.conflicts;
        let events: Vec<_> = interview_projections::read::decoded_events_after(&db, id, 0)
            .await
            .unwrap()
            .into_iter()
            .map(|(_, e)| e)
            .collect();
        if !interview_session::aggregate::check_stream(&events).is_empty() {
            double_pending += 1;
        }
    }
    println!(
        "{label}: concurrent load: {sessions} sessions × {} widgets in {secs:.1} s; {conflicts} conflicts (409) answered to racing submits and messages; sessions breaking a rule (two pending widgets, …): {double_pending}",
        widgets / sessions.max(1)
    );
}
