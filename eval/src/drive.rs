//! One interview of one persona over the public HTTP contract, and what a researcher then reads:
//! the session with its transcript and decision log, and the results row after the
//! post-session extraction.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::personas::{Kind, Persona, Script};
use crate::{study_definition, Server, RESEARCHER};

/// A message the persona sent: its words, what its author meant by them, and the objective
/// whose question it answered.
#[derive(Debug, Clone)]
pub struct Sent {
    pub text: String,
    pub kind: Kind,
    pub objective_id: Option<String>,
}

/// A widget the persona was shown: its objective, and its answer in the words the participant
/// saw (empty when skipped).
#[derive(Debug, Clone)]
pub struct WidgetAnswer {
    pub objective_id: Option<String>,
    pub interaction_id: String,
    pub kind: String,
    pub words: Vec<String>,
    pub skipped: bool,
}

/// Everything the properties judge.
pub struct Record {
    pub persona: Persona,
    pub mode: String,
    pub session_id: String,
    pub sent: Vec<Sent>,
    pub widgets: Vec<WidgetAnswer>,
    /// Each summary the interviewer proposed, as the participant read it.
    pub summaries: Vec<String>,
    /// The session as a researcher reads it (transcript, decisions, status).
    pub session: Value,
    /// Its results row (after the post-session extraction), if it completed.
    pub result: Value,
    /// The study's objectives in order: id and opening question.
    pub objectives: Vec<(String, String)>,
    /// The study's definition.
    pub definition: Value,
}

impl Record {
    /// The ids of an objective's text fields.
    pub fn text_fields_of(&self, objective_id: &str) -> Vec<String> {
        self.definition["output_schema"]["fields"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|f| f["objective_id"] == objective_id && f["type"] == "string")
            .filter_map(|f| f["id"].as_str().map(String::from))
            .collect()
    }

    pub fn describe(&self) -> String {
        let mut out = format!(
            "== {} ({}) {} — {}\n",
            self.persona.name, self.mode, self.session_id, self.session["status"]
        );
        for t in self.session["transcript"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "  {:>9}: {}\n",
                t["role"].as_str().unwrap_or_default(),
                t["content"]
                    .as_str()
                    .unwrap_or_default()
                    .replace('\n', " ⏎ ")
            ));
        }
        out.push_str(&format!("  fields: {}\n", self.result["fields"]));
        out
    }
}

async fn get(server: &Server, path: &str, token: &str) -> Value {
    server
        .http
        .get(format!("{}{path}", server.base))
        .bearer_auth(token)
        .send()
        .await
        .expect("the server is up")
        .json()
        .await
        .expect("a JSON body")
}

async fn post(server: &Server, path: &str, token: &str, body: Value) -> u16 {
    server
        .http
        .post(format!("{}{path}", server.base))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .expect("the server is up")
        .status()
        .as_u16()
}

/// The last assistant turn's id and words.
fn last_assistant(s: &Value) -> Option<(String, String)> {
    s["transcript"]
        .as_array()?
        .iter()
        .rev()
        .find(|t| t["role"] == "assistant" && t["kind"] == "message")
        .map(|t| {
            (
                t["turn_id"].as_str().unwrap_or_default().to_string(),
                t["content"].as_str().unwrap_or_default().to_string(),
            )
        })
}

/// Waits until the interviewer has acted since `seen` (its last utterance and widget when the
/// participant last acted), or the session ended.
async fn next_turn(
    server: &Server,
    id: &str,
    token: &str,
    seen: &(Option<String>, Value),
) -> Value {
    let started = Instant::now();
    loop {
        let s = get(server, &format!("/api/sessions/{id}"), token).await;
        let said = last_assistant(&s).map(|(turn, _)| turn);
        let ready = match s["status"].as_str() {
            Some("completed" | "abandoned") => true,
            Some("waiting_for_user") => said != seen.0,
            Some("waiting_for_tool") => s["pending_interaction"]["interaction_id"] != seen.1,
            _ => false,
        };
        if ready {
            return s;
        }
        let limit = patience(30);
        assert!(
            started.elapsed() < limit,
            "the interviewer answers within {limit:?}: {s}"
        );
        tokio::time::sleep(poll_every()).await;
    }
}

/// How long to wait for the interviewer: `seconds` with the scripted model; a real model on one
/// CPU thread may take a step's whole timeout (120 s), and its unstreamed retry another.
fn patience(seconds: u64) -> Duration {
    if crate::REAL_MODEL.get().copied().unwrap_or(false) {
        Duration::from_secs(300)
    } else {
        Duration::from_secs(seconds)
    }
}

/// How often to look: often with the scripted model (a turn takes milliseconds); seldom with a
/// real one on this machine's two cores, where polling would take CPU from the model.
fn poll_every() -> Duration {
    if crate::REAL_MODEL.get().copied().unwrap_or(false) {
        Duration::from_millis(250)
    } else {
        Duration::from_millis(5)
    }
}

/// What a widget's answer says, in the words its participant saw.
fn in_words(pending: &Value, value: &Value) -> Vec<String> {
    let label = |id: &Value| {
        pending["options"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|o| &o["id"] == id)
            .and_then(|o| o["label"].as_str())
            .map(String::from)
    };
    match pending["type"].as_str().unwrap_or_default() {
        "single_choice" => label(value).into_iter().collect(),
        "multiple_choice" | "ranking" => value
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(label)
            .collect(),
        "likert" => value
            .as_u64()
            .and_then(|i| pending["labels"].get((i as usize).checked_sub(1)?))
            .and_then(Value::as_str)
            .map_or_else(|| vec![value.to_string()], |l| vec![l.to_string()]),
        "yes_no" => vec![if value == &json!(true) { "yes" } else { "no" }.into()],
        "rating" => vec![value
            .as_f64()
            .map_or_else(|| value.to_string(), |x| x.to_string())],
        "free_text" => vec![value.as_str().unwrap_or_default().to_string()],
        _ => vec![value.to_string()],
    }
}

/// Interviews `persona` in `mode` and reads what a researcher gets.
// Long by design: one interview driven step by step, one arm for a pending widget and one for a
// question; the loop carries what was sent, the widgets, the summaries and the current objective
// into the record built at the end, and split, that state would be passed back and forth.
pub async fn interview(server: &Server, persona: &Persona, mode: &str) -> Record {
    let definition = study_definition(persona.study, mode);
    let slug = definition["public_slug"].as_str().unwrap().to_string();
    let objectives: Vec<(String, String)> = definition["objectives"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["id"].as_str().unwrap().to_string(),
                o["opening_question"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let (id, token) = crate::participant::start(&server.http, &server.base, &slug).await;
    let mut script = Script::default();
    let mut sent = Vec::new();
    let mut widgets = Vec::new();
    let mut summaries = Vec::new();
    let mut objective: Option<String> = None;
    let mut seen = (None, Value::Null);
    for n in 0.. {
        assert!(n < 80, "{} ends within 80 steps", persona.name);
        let s = next_turn(server, &id, &token, &seen).await;
        seen = (
            last_assistant(&s).map(|(t, _)| t),
            s["pending_interaction"]["interaction_id"].clone(),
        );
        match s["status"].as_str() {
            Some("waiting_for_tool") => {
                let pending = &s["pending_interaction"];
                let interaction_id = pending["interaction_id"].as_str().unwrap().to_string();
                let path = format!("/api/sessions/{id}/interactions/{interaction_id}/submit");
                if pending["type"] == "consent" {
                    post(
                        server,
                        &path,
                        &token,
                        json!({"status": "submitted", "value": {"accepted": true}}),
                    )
                    .await;
                    continue;
                }
                let value = crate::widget_values::typical_value(pending);
                let skipped = persona.skips_widgets;
                let body = if skipped {
                    json!({"status": "skipped"})
                } else {
                    json!({"status": "submitted", "value": value})
                };
                let status = post(server, &path, &token, body).await;
                assert!(status < 300, "submitting {pending}: {status}");
                widgets.push(WidgetAnswer {
                    objective_id: pending["objective_id"].as_str().map(String::from),
                    interaction_id,
                    kind: pending["type"].as_str().unwrap_or_default().to_string(),
                    words: if skipped {
                        Vec::new()
                    } else {
                        in_words(pending, &value)
                    },
                    skipped,
                });
            }
            Some("waiting_for_user") => {
                let (_, said) = last_assistant(&s).unwrap_or_default();
                let (text, kind) = if s["current_phase"] == "SUMMARY_CONFIRMATION" {
                    summaries.push(said);
                    persona.summary_reply(summaries.len() - 1)
                } else {
                    let opening = objectives.iter().position(|(_, q)| q.trim() == said.trim());
                    if let Some(i) = opening {
                        objective = Some(objectives[i].0.clone());
                    }
                    persona.reply(&mut script, opening)
                };
                sent.push(Sent {
                    text: text.into(),
                    kind,
                    objective_id: objective.clone(),
                });
                let status = post(
                    server,
                    &format!("/api/sessions/{id}/messages"),
                    &token,
                    json!({"content": text, "client_message_id": format!("{id}-{n}")}),
                )
                .await;
                assert!(status < 300, "sending {text:?}: {status}");
            }
            _ => break,
        }
    }
    let session = get(server, &format!("/api/sessions/{id}"), RESEARCHER).await;
    let result = final_result(server, &id, &definition).await;
    Record {
        persona: persona.clone(),
        mode: mode.into(),
        session_id: id,
        sent,
        widgets,
        summaries,
        session,
        result,
        objectives,
        definition,
    }
}

/// The session's results row once its final extraction is recorded (`Null` if it never
/// completed).
async fn final_result(server: &Server, id: &str, definition: &Value) -> Value {
    let started = Instant::now();
    loop {
        let events = get(server, &format!("/api/sessions/{id}/events"), RESEARCHER).await;
        let list: Vec<String> = events["events"]
            .as_array()
            .or_else(|| events.as_array())
            .into_iter()
            .flatten()
            .map(Value::to_string)
            .collect();
        let done = list
            .iter()
            .any(|e| e.contains("extraction.completed") && e.contains("\"final\":true"));
        let ended = list.iter().any(|e| e.contains("session.abandoned"));
        if done || ended || started.elapsed() > patience(20) {
            break;
        }
        tokio::time::sleep(poll_every() * 4).await;
    }
    let studies = get(server, "/api/studies", RESEARCHER).await;
    let slug = &definition["public_slug"];
    let study_id = studies["studies"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| &s["public_slug"] == slug)
        .and_then(|s| s["study_id"].as_str())
        .unwrap_or_default()
        .to_string();
    let results = get(
        server,
        &format!("/api/studies/{study_id}/results"),
        RESEARCHER,
    )
    .await;
    results["results"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["session_id"] == id)
        .cloned()
        .unwrap_or(Value::Null)
}
