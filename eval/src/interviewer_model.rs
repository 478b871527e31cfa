//! The model behind the `llm` interviewer in the eval: an OpenAI-compatible endpoint (the
//! scripted model's HTTP server) answering each request from what the request says — the
//! objectives and their progress in the system prompt, the conversation in the user message,
//! the tools offered — the way a plain hosted model does, not the way the runtime would like:
//!
//! - it asks each objective's opening question, probes each answer once, shows the widget;
//! - it hears an end wish in the participant's own words and proposes
//!   `conclude(participant_requested_end)` straight away;
//! - it extracts naively: the latest participant line into each text field of the objective in
//!   progress, whatever that line was ("Nothing more." included) — the runtime must keep
//!   non-answers out of the data;
//! - its final extraction ignores the summary's corrections and widget answers (the runtime must
//!   keep both);
//! - it writes its summary from what it extracted;
//! - quoting the participant's word "list", it breaks its JSON with unescaped quotes inside the
//!   message (the runtime must never leave "When you say " standing as the question).
//!
//! Arguments stream in the schema's order in token-sized pieces (the scripted model's realistic
//! side).

use serde_json::{json, Value};

use crate::scripted_model::{Reply, ScriptedModel};

/// The model name the eval's `llm` studies use.
pub const MODEL: &str = "eval-interviewer";

pub fn install(model: &ScriptedModel) {
    model.compute(MODEL, answer);
}

/// One objective's progress line: `- id: asked true, answered false, probes 0/3, covered …`.
struct Progress {
    id: String,
    asked: bool,
    answered: bool,
    probes: u32,
    widget_pending: bool,
}

fn progress(system: &str) -> Vec<Progress> {
    system
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("- ")?;
            let (id, facts) = rest.split_once(": asked ")?;
            let flag = |name: &str| facts.contains(&format!("{name} true"));
            let probes = facts
                .split("probes ")
                .nth(1)?
                .split('/')
                .next()?
                .parse()
                .ok()?;
            Some(Progress {
                id: id.to_string(),
                asked: facts.starts_with("true"),
                answered: flag("answered"),
                probes,
                widget_pending: facts.contains("widget shown false"),
            })
        })
        .collect()
}

/// The conversation's lines: (alias, role, text).
fn lines(user: &str) -> Vec<(String, String, String)> {
    user.lines()
        .filter_map(|l| {
            let (alias, rest) = l.split_once(' ')?;
            if !alias.starts_with('t') || alias[1..].parse::<u32>().is_err() {
                return None;
            }
            let (role, quoted) = rest.split_once(": ")?;
            let text: String = serde_json::from_str(quoted.trim_end_matches(" …")).ok()?;
            Some((alias.to_string(), role.to_string(), text))
        })
        .collect()
}

/// The output fields: (id, type, objective).
fn fields(system: &str) -> Vec<(String, String, String)> {
    system
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("- ")?;
            let (id, rest) = rest.split_once(" (")?;
            let (kind, rest) = rest.split_once("; objective ")?;
            // An enum lists its values after its type: `enum: one of "a", "b"`.
            let kind = kind.split(':').next()?;
            let objective = rest.split([',', ')']).next()?;
            Some((id.to_string(), kind.to_string(), objective.to_string()))
        })
        .collect()
}

/// The opening question of objective `id`, as the prompt lists it.
fn opening(system: &str, id: &str) -> String {
    system
        .lines()
        .find(|l| l.starts_with(&format!("- {id} [")))
        .and_then(|l| l.split("Opening question: \"").nth(1))
        .and_then(|q| q.split("\". Probe hints").next())
        .unwrap_or("Could you tell me more?")
        .to_string()
}

/// What a plain model hears as a wish to stop.
fn wants_to_stop(text: &str) -> bool {
    let t = text.to_lowercase();
    [
        "wrap up",
        "not continue",
        "stop now",
        "不想继续",
        "说完了",
        "结束",
    ]
    .iter()
    .any(|w| t.contains(w))
}

fn zh(system: &str) -> bool {
    system.contains("language (zh")
}

// Long by design: the scripted interviewer's rules in priority order, the first that fits answers
// (extraction, reply to the summary, a wish to stop, a probe, a widget, the next question, the
// summary); the order is the behaviour, so it stays on one page.
fn answer(request: &Value) -> Reply {
    let system = request["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    let user = request["messages"][1]["content"]
        .as_str()
        .unwrap_or_default();
    let offered: Vec<&str> = request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    // Where the interview stands ends the step's user message.
    let progress = progress(&format!("{system}\n{user}"));
    let said = lines(user);
    let last_participant = said.iter().rev().find(|(_, role, _)| role == "participant");
    let current = progress.iter().rev().find(|p| p.asked);
    if offered == ["extract_fields"] {
        return extraction(system, &said, current.map(|p| p.id.as_str()));
    }
    let zh = zh(system);
    if system.contains("phase \"SUMMARY_CONFIRMATION\"") || user.contains("reply to the summary") {
        return Reply::Realistic(
            "conclude",
            json!({"reason": "all_must_objectives_covered", "message": if zh { "谢谢你的时间！" } else { "Thank you so much for your time!" }, "rationale": "The summary was answered."}),
        );
    }
    if let Some((_, _, text)) = last_participant {
        if wants_to_stop(text) {
            return Reply::Realistic(
                "conclude",
                json!({"reason": "participant_requested_end", "message": if zh { "好的，谢谢你！" } else { "Of course, thank you for your time." }, "rationale": "The participant asked to stop."}),
            );
        }
    }
    if let Some(p) = current.filter(|p| p.answered) {
        let said_list = last_participant.is_some_and(|(_, _, t)| t.contains(" list"));
        if p.probes == 0 && offered.contains(&"probe") && p.id == "planning_habits" && said_list {
            // Quoting the participant's word without escaping the quotes: JSON that breaks
            // inside the message, as small models write it.
            return Reply::RawArgs(
                "probe",
                r#"{"objective_id": "planning_habits", "trigger": "vague", "message": "When you say "list", what does that look like?", "rationale": "Ask about the list."}"#,
            );
        }
        if p.probes == 0 && offered.contains(&"probe") {
            let message = if zh {
                "能举一个最近的具体例子吗？"
            } else {
                "Could you give me a recent, concrete example?"
            };
            return Reply::Realistic(
                "probe",
                json!({"objective_id": p.id, "trigger": "vague", "message": message, "rationale": "The answer could be more concrete."}),
            );
        }
        if p.widget_pending && offered.contains(&"render_interaction") {
            return Reply::Realistic(
                "render_interaction",
                json!({"objective_id": p.id, "rationale": "The open answer is in; its widget follows."}),
            );
        }
    }
    if let Some(next) = progress.iter().find(|p| !p.asked) {
        return Reply::Realistic(
            "ask_question",
            json!({"objective_id": next.id, "message": opening(system, &next.id), "rationale": "The next objective opens with its question."}),
        );
    }
    let summary = last_participant.map_or("", |(_, _, t)| t.as_str());
    Reply::Realistic(
        "summarize_and_confirm",
        json!({"summary": summary, "message": if zh { "我总结一下，对吗？" } else { "Here is what I heard. Did I get that right?" }, "rationale": "Every objective was asked."}),
    )
}

/// A naive extraction: the latest participant line into each text field of the objective in
/// progress (or of every objective, for the final extraction), whatever that line was.
fn extraction(system: &str, said: &[(String, String, String)], current: Option<&str>) -> Reply {
    let Some((alias, _, text)) = said
        .iter()
        .rev()
        .find(|(_, role, text)| role == "participant" && !text.starts_with("(widget"))
    else {
        return Reply::Realistic(
            "extract_fields",
            json!({"fields": [], "rationale": "Nothing said yet."}),
        );
    };
    let fields: Vec<Value> = fields(system)
        .into_iter()
        .filter(|(_, kind, objective)| kind == "string" && current.is_none_or(|c| c == objective))
        .map(|(id, _, _)| {
            json!({"field_id": id, "value": text, "confidence": 0.8, "evidence_turn_ids": [alias], "quote": text})
        })
        .collect();
    Reply::Realistic(
        "extract_fields",
        json!({"fields": fields, "rationale": "What the participant said last."}),
    )
}
