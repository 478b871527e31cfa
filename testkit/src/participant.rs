//! A participant (and a researcher publishing a study) over plain HTTP, for the tests that run
//! real server processes and for the benchmarks: start a session on a
//! study's public link, read it, and take one step — do what it waits for, a message or the
//! pending widget. A step returns transport errors rather than panicking: the fault tests kill
//! servers and databases while participants talk.

use reqwest::Client;
use serde_json::{json, Value};

/// Starts a session on the study's public link (201 expected); its id and participant token.
pub async fn start(http: &Client, base: &str, slug: &str) -> (String, String) {
    let res = http
        .post(format!("{base}/api/public/studies/{slug}/sessions"))
        .json(&json!({}))
        .send()
        .await
        .expect("the server is up");
    assert_eq!(res.status(), 201, "creating a session on {slug}");
    let body: Value = res.json().await.expect("a JSON body");
    (
        body["session_id"].as_str().unwrap().to_string(),
        body["participant_token"].as_str().unwrap().to_string(),
    )
}

/// The session as its participant reads it.
pub async fn read(http: &Client, base: &str, id: &str, token: &str) -> Value {
    http.get(format!("{base}/api/sessions/{id}"))
        .bearer_auth(token)
        .send()
        .await
        .expect("the server is up")
        .json()
        .await
        .expect("a JSON body")
}

/// Creates and publishes `study` as researcher `researcher`; its id.
pub async fn publish(http: &Client, base: &str, researcher: &str, study: &Value) -> String {
    let created: Value = http
        .post(format!("{base}/api/studies"))
        .bearer_auth(researcher)
        .json(study)
        .send()
        .await
        .expect("the server is up")
        .json()
        .await
        .expect("a JSON body");
    let id = created["study_id"]
        .as_str()
        .unwrap_or_else(|| panic!("study not created: {created}"))
        .to_string();
    let res = http
        .post(format!("{base}/api/studies/{id}/publish"))
        .bearer_auth(researcher)
        .json(&json!({}))
        .send()
        .await
        .expect("the server is up");
    assert_eq!(res.status(), 200, "publishing {id}");
    id
}

/// What a step did.
pub enum Step {
    /// A message went out; `acknowledged` when it was answered 2xx.
    Said {
        client_message_id: String,
        acknowledged: bool,
    },
    /// The pending widget was answered (or the attempt failed; see the statuses).
    Answered,
    /// The session has completed or been abandoned.
    Ended,
    /// Nothing to do yet (the interviewer's turn, or the server answered with an error).
    Waiting,
}

/// What to say: an answer during the interview, and the reply to a proposed summary.
pub struct Words<'a> {
    pub answer: &'a str,
    pub at_summary: &'a str,
}

/// One step as participant `token` of session `id` (message ids `<id>-<n>`); returns what it did
/// and the HTTP status of every request it made.
// Long by design: one match on the session's status, one arm per thing a participant does next
// (send a message, answer the widget, see the end, wait), the first two making their request and
// keeping its HTTP status.
pub async fn step(
    http: &Client,
    base: &str,
    id: &str,
    token: &str,
    n: usize,
    words: &Words<'_>,
) -> Result<(Step, Vec<u16>), reqwest::Error> {
    let res = http
        .get(format!("{base}/api/sessions/{id}"))
        .bearer_auth(token)
        .send()
        .await?;
    let mut statuses = vec![res.status().as_u16()];
    let s: Value = res.json().await?;
    let step = match s["status"].as_str() {
        Some("waiting_for_user") => {
            let client_message_id = format!("{id}-{n}");
            let text = if s["current_phase"] == "SUMMARY_CONFIRMATION" {
                words.at_summary
            } else {
                words.answer
            };
            let sent = http
                .post(format!("{base}/api/sessions/{id}/messages"))
                .bearer_auth(token)
                .json(&json!({"content": text, "client_message_id": client_message_id}))
                .send()
                .await;
            let acknowledged = match sent {
                Ok(res) => {
                    statuses.push(res.status().as_u16());
                    res.status().is_success()
                }
                Err(_) => false,
            };
            Step::Said {
                client_message_id,
                acknowledged,
            }
        }
        Some("waiting_for_tool") => {
            let pending = &s["pending_interaction"];
            let value = crate::widget_values::typical_value(pending);
            let sent = http
                .post(format!(
                    "{base}/api/sessions/{id}/interactions/{}/submit",
                    pending["interaction_id"].as_str().unwrap_or_default()
                ))
                .bearer_auth(token)
                .json(&json!({"status": "submitted", "value": value}))
                .send()
                .await;
            if let Ok(res) = sent {
                statuses.push(res.status().as_u16());
            }
            Step::Answered
        }
        Some("completed" | "abandoned") => Step::Ended,
        _ => Step::Waiting,
    };
    Ok((step, statuses))
}
