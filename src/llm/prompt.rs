//! The `llm` contract: the tools offered to the model and the prompt that frames a decision.
//! Documented for humans in `docs/llm-contract.md`; `prompt_version_id` is a hash of the
//! template and the tool schemas, so every decision names exactly what the model was shown.

use std::sync::OnceLock;

use interview_session::events::{EventBody, SessionEvent};
use interview_session::hash::sha256_hex;
use interview_session::Session;
use serde_json::{json, Value};

use crate::harness::conversation::Conversation;
use crate::llm::gateway::ModelRequest;

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

/// The tool schemas (JSON Schema), one per action, as sent: written by hand so each tool's
/// properties reach the model in the contract's order (its target before its text).
pub const TOOLS: &str = include_str!("tools.json");

/// The tools without `extract_fields`: offered for the next step when the extraction of the
/// participant's input runs alongside it (as written, like [`TOOLS`]).
pub fn tools_without_extraction() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        let all: Vec<&serde_json::value::RawValue> =
            serde_json::from_str(TOOLS).expect("tools.json is a list");
        let kept: Vec<&str> = all
            .iter()
            .map(|t| t.get())
            .filter(|t| !t.contains("\"name\": \"extract_fields\""))
            .collect();
        format!("[{}]", kept.join(",\n"))
    })
}

/// `extract_fields` alone, for the extraction request.
pub fn extraction_tool() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        let all: Vec<&serde_json::value::RawValue> =
            serde_json::from_str(TOOLS).expect("tools.json is a list");
        let extract = all
            .iter()
            .map(|t| t.get())
            .find(|t| t.contains("\"name\": \"extract_fields\""))
            .expect("tools.json has extract_fields");
        format!("[{extract}]")
    })
}

/// The tool schemas, parsed (for tests and readers; requests send [`TOOLS`] as written).
pub fn tools() -> Value {
    serde_json::from_str(TOOLS).expect("tools.json is valid JSON")
}

/// `llm-` and the first 16 hex digits of SHA-256 over the template and the tools.
pub fn prompt_version_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        let digest = sha256_hex(
            format!("{SYSTEM_TEMPLATE}\n{TOOLS}\n{EXTRACTION_TEMPLATE}\n{ALONGSIDE_NOTE}")
                .as_bytes(),
        );
        format!("llm-{}", &digest[..16])
    })
}

/// The output fields, with what is known so far.
fn fields_block(s: &Session) -> String {
    let Some(study) = s.study() else {
        return String::new();
    };
    study
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
        .join("\n")
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
    let fields = fields_block(s);
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

/// The conversation as the model reads it: role, id to cite, text.
pub fn listing(events: &[SessionEvent]) -> Vec<(String, String, String)> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::ParticipantMessageCreated {
                turn_id, content, ..
            } => Some(("participant".into(), turn_id.to_string(), content.clone())),
            EventBody::AgentMessageCompleted {
                message_id,
                content,
            } => Some((
                "interviewer".into(),
                message_id.to_string(),
                content.clone(),
            )),
            EventBody::InteractionSubmitted {
                turn_id,
                status,
                value,
                ..
            } => Some((
                "participant".into(),
                turn_id.to_string(),
                format!(
                    "(answered the widget: {status:?} {})",
                    value.as_ref().map(|v| v.to_string()).unwrap_or_default()
                ),
            )),
            _ => None,
        })
        .collect()
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

/// Added to the conversation when the participant's input is being extracted alongside.
pub const ALONGSIDE_NOTE: &str = "\n(What the participant just said is being recorded into the output fields separately; choose the next conversational step.)";

const EXTRACTION_TEMPLATE: &str = "\
You record what a participant said in a research interview into the study's output fields.
Call extract_fields exactly once. For each field the participant's words support, give its value,
a confidence in [0, 1], the turn ids that support it and a short quote in their own words. Leave
out fields nothing supports; keep values already known unless the participant changed them.
`rationale` says briefly what you recorded and why.

Study: {title}

Output fields (internal: never shown to the participant):
{fields}";

/// The request for the extraction that runs alongside the next step.
pub fn extraction_request(s: &Session, transcript: String) -> Option<ModelRequest> {
    let study = s.study()?;
    if study.output_schema.fields.is_empty() {
        return None;
    }
    let system = EXTRACTION_TEMPLATE
        .replace("{title}", &study.study_config.title)
        .replace("{fields}", &fields_block(s));
    let model = &study.model_config;
    let body = json!({
        "model": model.model,
        "temperature": model.temperature,
        "max_completion_tokens": model.max_output_tokens,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": transcript}],
        "tool_choice": {"type": "function", "function": {"name": "extract_fields"}},
        "parallel_tool_calls": false,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    Some(ModelRequest {
        body,
        tools: extraction_tool(),
    })
}

/// The full request body (OpenAI chat-completions), streamed, one tool required.
pub fn request(
    model: &interview_session::study::ModelConfig,
    system: String,
    user: String,
    tools: &'static str,
) -> ModelRequest {
    let body = json!({
        "model": model.model,
        "temperature": model.temperature,
        "max_completion_tokens": model.max_output_tokens,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        "tool_choice": "required",
        "parallel_tool_calls": false,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    ModelRequest { body, tools }
}

const SCREENING_TEMPLATE: &str = "\
You decide whether a participant is eligible for a research study, from their answers to the
screening questions the study's own rules do not cover. The answers the rules cover already meet
them: do not judge those again. Call judge_screening exactly once: `eligible`, and a short
`rationale` a researcher can audit. Do not write anything else.

Study: {title}
{description}

Screening questions and the participant's answers:
{answers}

Already met by the study's rules:
{rules}

Judge only: {open}";

/// `screening-` and the first 16 hex digits of SHA-256 over the screening template and tool.
pub fn screening_version_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        let digest = sha256_hex(format!("{SCREENING_TEMPLATE}\n{SCREENING_TOOLS}").as_bytes());
        format!("screening-{}", &digest[..16])
    })
}

/// The request for a screening verdict (`judge_screening`).
pub fn screening_request(s: &Session) -> Option<ModelRequest> {
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
        .replace("{rules}", if rules.is_empty() { "(none)" } else { &rules })
        .replace(
            "{open}",
            &screening
                .unruled_questions()
                .iter()
                .map(|q| q.id.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        );
    let model = &study.model_config;
    let body = json!({
        "model": model.model,
        "temperature": model.temperature,
        "max_completion_tokens": model.max_output_tokens,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": "Judge the screening now."}],
        "tool_choice": "required",
        "parallel_tool_calls": false,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    Some(ModelRequest {
        body,
        tools: SCREENING_TOOLS,
    })
}

/// The one tool of a screening request.
const SCREENING_TOOLS: &str = r#"[{"type": "function", "function": {
  "name": "judge_screening", "description": "The screening verdict.",
  "parameters": {"type": "object", "properties": {"eligible": {"type": "boolean"}, "rationale": {"type": "string"}},
    "required": ["eligible", "rationale"], "additionalProperties": false}}}]"#;

#[cfg(test)]
mod tests {
    use super::*;
    use interview_session::decision::ConcludeReason;

    /// Each tool's properties in the order they are written (the order the model reads).
    fn written_order(tool: &str) -> Vec<String> {
        let at = TOOLS.find(&format!("\"name\": \"{tool}\"")).unwrap();
        let props = at + TOOLS[at..].find("\"properties\": {").unwrap();
        let block = &TOOLS[props..props + TOOLS[props..].find("\"required\": [\"").unwrap()];
        let all = tools();
        let parsed = &all
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["function"]["name"] == tool)
            .unwrap()["function"]["parameters"]["properties"];
        let mut keys: Vec<(usize, String)> = parsed
            .as_object()
            .unwrap()
            .keys()
            .map(|k| (block.find(&format!("\"{k}\": {{")).unwrap(), k.clone()))
            .collect();
        keys.sort();
        keys.into_iter().map(|(_, k)| k).collect()
    }

    #[test]
    fn targets_come_before_text_and_rationale_last() {
        assert_eq!(
            written_order("ask_question"),
            ["objective_id", "message", "rationale"]
        );
        assert_eq!(
            written_order("probe"),
            [
                "objective_id",
                "trigger",
                "based_on_turn_id",
                "message",
                "rationale"
            ]
        );
        assert_eq!(
            written_order("render_interaction"),
            [
                "objective_id",
                "interaction",
                "research_intent",
                "message",
                "rationale"
            ]
        );
        assert_eq!(
            written_order("summarize_and_confirm"),
            ["summary", "message", "rationale"]
        );
        assert_eq!(
            written_order("conclude"),
            ["reason", "message", "rationale"]
        );
    }

    #[test]
    fn the_conclude_reasons_offered_are_the_aggregate_s() {
        let offered = &tools()[5]["function"]["parameters"]["properties"]["reason"]["enum"];
        for reason in offered.as_array().unwrap() {
            let parsed: ConcludeReason = serde_json::from_value(reason.clone()).unwrap();
            assert!(!matches!(
                parsed,
                ConcludeReason::ConsentDeclined | ConcludeReason::ScreeningFailed
            ));
        }
        assert_eq!(offered.as_array().unwrap().len(), 7);
    }
}
