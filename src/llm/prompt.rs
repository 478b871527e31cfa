//! The `llm` contract: the tools offered to the model and the prompt that frames a decision.
//! Documented for humans in `docs/llm-contract.md`; `prompt_version_id` is a hash of the
//! template and the tool schemas, so every decision names exactly what the model was shown.

use std::sync::OnceLock;

use interview_session::decision::ConcludeReason;
use interview_session::hash::sha256_hex;
use interview_session::Session;
use serde_json::{json, Value};

use crate::harness::conversation::Conversation;

const SYSTEM_TEMPLATE: &str = "\
You are a warm, curious research interviewer running a one-to-one interview in natural conversation.
Every reply you give is exactly one call of one of the tools offered; `message` is what the
participant reads. Write it in the study's language ({locale}), plainly, one question at a time,
never mentioning tools, agents, rationales, JSON or any internal term.

Rules the runtime enforces (a call that breaks them is rewritten or refused):
- consent is handled by the runtime before you are asked;
- the first action on an objective is ask_question with its opening question (you may rephrase);
- probe an answer that is vague, emotional, contradictory or missing a required field, at most
  max_probe_count times per objective, saying why in `rationale`;
- show an objective's configured widget with render_interaction after its open answer;
- record what you learned with extract_fields: each value with a confidence in [0, 1], the turn
  ids that support it and a short quote;
- when the objectives are covered, or the participant wants to stop, or seems tired, or limits are
  reached: summarize_and_confirm, then conclude with the matching reason;
- `rationale` is always a short, honest reason a researcher can audit.

Study: {title}
{description}
Researcher's instructions: {instructions}

Objectives (in priority order):
{objectives}

Output fields:
{fields}

Session: {turns} of {max_turns} turns, phase {phase}{stop}.";

/// The tool schemas (JSON Schema), one per action.
pub fn tools() -> Value {
    let reason: Vec<Value> = [
        ConcludeReason::AllMustObjectivesCovered,
        ConcludeReason::ConfidenceThresholdMet,
        ConcludeReason::MaxTurnsReached,
        ConcludeReason::MaxDurationReached,
        ConcludeReason::ParticipantRequestedEnd,
        ConcludeReason::ParticipantFatigue,
        ConcludeReason::SafetyTriggered,
    ]
    .iter()
    .map(|r| serde_json::to_value(r).expect("reasons serialize"))
    .collect();
    let tool = |name: &str, description: &str, properties: Value, required: &[&str]| {
        json!({"type": "function", "function": {
            "name": name, "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required, "additionalProperties": false}
        }})
    };
    json!([
        tool(
            "ask_question",
            "Ask the opening (or next) question of an objective.",
            json!({"objective_id": {"type": "string"}, "message": {"type": "string"}, "rationale": {"type": "string"}}),
            &["objective_id", "message", "rationale"]
        ),
        tool(
            "probe",
            "Follow up on the participant's last answer.",
            json!({"objective_id": {"type": "string"}, "based_on_turn_id": {"type": "string"},
                   "trigger": {"type": "string", "enum": ["vague", "strong_emotion", "contradiction", "missing_field"]},
                   "message": {"type": "string"}, "rationale": {"type": "string"}}),
            &["objective_id", "trigger", "message", "rationale"]
        ),
        tool(
            "render_interaction",
            "Show the objective's structured question (a widget) inline.",
            json!({"objective_id": {"type": "string"}, "interaction": {"type": "object"}, "research_intent": {"type": "string"},
                   "message": {"type": "string"}, "rationale": {"type": "string"}}),
            &["objective_id", "rationale"]
        ),
        tool(
            "extract_fields",
            "Record output field values learned so far, with evidence.",
            json!({"fields": {"type": "array", "items": {"type": "object", "properties": {
                    "field_id": {"type": "string"}, "value": {}, "confidence": {"type": "number"},
                    "evidence_turn_ids": {"type": "array", "items": {"type": "string"}}, "quote": {"type": "string"}},
                    "required": ["field_id", "value", "confidence"]}},
                   "rationale": {"type": "string"}}),
            &["fields", "rationale"]
        ),
        tool(
            "summarize_and_confirm",
            "Show a short summary of what was learned and ask the participant to confirm it.",
            json!({"summary": {"type": "string"}, "message": {"type": "string"}, "rationale": {"type": "string"}}),
            &["summary", "message", "rationale"]
        ),
        tool(
            "conclude",
            "End the interview with a short closing message.",
            json!({"reason": {"type": "string", "enum": reason}, "message": {"type": "string"}, "rationale": {"type": "string"}}),
            &["reason", "message", "rationale"]
        ),
    ])
}

/// `llm-` and the first 16 hex digits of SHA-256 over the template and the tools.
pub fn prompt_version_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        let digest = sha256_hex(format!("{SYSTEM_TEMPLATE}\n{}", tools()).as_bytes());
        format!("llm-{}", &digest[..16])
    })
}

/// The system prompt for this session's next decision.
pub fn system_prompt(s: &Session, at: chrono::DateTime<chrono::Utc>) -> String {
    let Some(study) = s.study() else {
        return String::new();
    };
    let config = &study.study_config;
    let objectives = s
        .objectives_in_order()
        .iter()
        .map(|o| {
            let p = s.objective(&o.id);
            format!(
                "- {} [{:?}] \"{}\": {} Opening question: \"{}\". Probe hints: {}. max_probe_count {}; asked {}, answered {}, probes {}, covered {}{}",
                o.id,
                o.priority,
                o.title,
                o.description,
                o.opening_question,
                o.probe_hints.join("; "),
                o.max_probe_count,
                p.asked,
                p.answered,
                p.probes,
                s.objective_covered(&o.id),
                o.interaction
                    .as_ref()
                    .map(|i| format!("; widget {} (shown {})", i.kind.type_name(), p.interaction_rendered))
                    .unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    let fields = study
        .output_schema
        .fields
        .iter()
        .map(|f| {
            let have = s
                .fields()
                .get(&f.id)
                .map(|x| format!(" — have {} ({:.2})", x.value, x.confidence))
                .unwrap_or_default();
            format!(
                "- {} ({:?}, objective {}{}): {}{have}",
                f.id,
                f.field_type,
                f.objective_id,
                if f.required { ", required" } else { "" },
                f.description
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    let stop = s
        .stop_reason(at)
        .map(|r| {
            format!(
                "; questioning must stop: {}",
                serde_json::to_value(r).unwrap_or_default()
            )
        })
        .unwrap_or_default();
    SYSTEM_TEMPLATE
        .replace("{locale}", &config.locale)
        .replace("{title}", &config.title)
        .replace("{description}", &config.description)
        .replace("{instructions}", &study.agent_config.instructions)
        .replace("{objectives}", &objectives)
        .replace("{fields}", &fields)
        .replace("{turns}", &s.turn_count().to_string())
        .replace("{max_turns}", &config.limits.max_turn_count.to_string())
        .replace(
            "{phase}",
            &serde_json::to_value(s.phase())
                .unwrap_or_default()
                .to_string(),
        )
        .replace("{stop}", &stop)
}

/// The conversation so far, with turn ids the model can cite.
pub fn transcript(events_text: &[(String, String, String)], c: &Conversation) -> String {
    let mut out = String::from("Conversation so far (role, turn id, text):\n");
    for (role, id, text) in events_text {
        out.push_str(&format!("{role} [{id}]: {text}\n"));
    }
    if let Some(reply) = &c.unclassified_summary_reply {
        out.push_str(&format!(
            "(The participant's reply to the summary: {reply})\n"
        ));
    }
    out.push_str("\nDecide the next action: call exactly one tool.");
    out
}

/// The full request body (OpenAI chat-completions), streamed, one tool required.
pub fn request(
    model: &interview_session::study::ModelConfig,
    system: String,
    user: String,
) -> Value {
    json!({
        "model": model.model,
        "temperature": model.temperature,
        "max_completion_tokens": model.max_output_tokens,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        "tools": tools(),
        "tool_choice": "required",
        "parallel_tool_calls": false,
        "stream": true,
        "stream_options": {"include_usage": true},
    })
}

const SCREENING_TEMPLATE: &str = "\
You decide whether a participant is eligible for a research study, from their answers to the
screening questions and the study's criteria. Call judge_screening exactly once: `eligible`, and
a short `rationale` a researcher can audit. Do not write anything else.

Study: {title}
{description}

Screening questions and the participant's answers:
{answers}

The study's criteria:
{rules}";

/// The request for a screening verdict (`judge_screening`).
pub fn screening_request(s: &Session) -> Option<Value> {
    let study = s.study()?;
    let screening = &study.study_config.screening;
    let answers = screening
        .questions
        .iter()
        .map(|q| {
            let answer = s.screening_answers().get(&q.id).cloned().flatten();
            format!(
                "- {} \"{}\": {}",
                q.id,
                q.spec.prompt,
                answer.map_or("(skipped)".to_string(), |a| a.to_string())
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    let rules = screening
        .rules
        .iter()
        .map(|r| {
            if r.qualify_if.is_empty() {
                format!(
                    "- {}: not eligible if the answer is one of {}",
                    r.question_id,
                    json!(r.disqualify_if)
                )
            } else {
                format!(
                    "- {}: eligible only if the answer is one of {}",
                    r.question_id,
                    json!(r.qualify_if)
                )
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let system = SCREENING_TEMPLATE
        .replace("{title}", &study.study_config.title)
        .replace("{description}", &study.study_config.description)
        .replace("{answers}", &answers)
        .replace("{rules}", &rules);
    let model = &study.model_config;
    Some(json!({
        "model": model.model,
        "temperature": model.temperature,
        "max_completion_tokens": model.max_output_tokens,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": "Judge the screening now."}],
        "tools": [{"type": "function", "function": {
            "name": "judge_screening",
            "description": "The screening verdict.",
            "parameters": {"type": "object", "properties": {
                "eligible": {"type": "boolean"}, "rationale": {"type": "string"}},
                "required": ["eligible", "rationale"], "additionalProperties": false}
        }}],
        "tool_choice": "required",
        "parallel_tool_calls": false,
        "stream": true,
        "stream_options": {"include_usage": true},
    }))
}
