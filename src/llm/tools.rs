//! Turning the model's tool call into a [`Proposal`], completely or (while it streams) far
//! enough to check it against the guards before its `message` is shown.

use interview_session::decision::{
    AgentAction, ConcludeReason, ExtractedField, ProbeTrigger, Proposal, Provenance,
};
use interview_session::interaction::InteractionSpec;
use serde_json::Value;
use uuid::Uuid;

use super::partial::string_field;

fn text(args: &Value, key: &str) -> Option<String> {
    args.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
}

fn required(args: &Value, key: &str) -> Result<String, String> {
    text(args, key).ok_or_else(|| format!("missing argument {key:?}"))
}

fn parse_enum<T: serde::de::DeserializeOwned>(args: &Value, key: &str) -> Result<T, String> {
    let raw = args
        .get(key)
        .cloned()
        .ok_or_else(|| format!("missing argument {key:?}"))?;
    serde_json::from_value(raw).map_err(|_| format!("argument {key:?} has an unknown value"))
}

/// The complete tool call as a proposal, or why it cannot be one.
/// Some chat templates HTML-escape the prompt (`"` as `&#34;`) and a model copies the entities
/// back into what it writes: they are read as the characters they stand for, in every string
/// of the arguments.
fn unescape_entities(value: &mut Value) {
    const ENTITIES: [(&str, &str); 8] = [
        ("&#34;", "\""),
        ("&quot;", "\""),
        ("&#39;", "'"),
        ("&#x27;", "'"),
        ("&apos;", "'"),
        ("&lt;", "<"),
        ("&gt;", ">"),
        ("&amp;", "&"), // last: `&amp;lt;` is the text `&lt;`, not `<`
    ];
    match value {
        Value::String(s) if s.contains('&') => {
            for (entity, character) in ENTITIES {
                *s = s.replace(entity, character);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(unescape_entities),
        Value::Object(map) => map.values_mut().for_each(unescape_entities),
        _ => {}
    }
}

/// `text` with the control characters inside its JSON strings escaped, if it has any.
fn raw_controls_escaped(text: &str) -> Option<String> {
    let (mut out, mut in_string, mut escaped, mut changed) =
        (String::with_capacity(text.len() + 8), false, false, false);
    for c in text.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' if in_string => escaped = true,
            '"' => in_string = !in_string,
            c if in_string && (c as u32) < 0x20 => {
                changed = true;
                match c {
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    // PostgreSQL cannot store U+0000 (the gateway replaces the escaped form too).
                    '\0' => out.push_str("\\ufffd"),
                    other => out.push_str(&format!("\\u{:04x}", other as u32)),
                }
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    changed.then_some(out)
}

// Long by design: the arguments read (raw line breaks and HTML entities repaired), the fields every
// tool shares, then one arm per tool that tools.json defines, each taking the arguments that tool
// needs; an unknown tool is refused.
pub fn proposal_from_call(
    name: &str,
    arguments: &str,
    provenance: Provenance,
    input_summary: String,
    resolve: &dyn Fn(&str) -> Option<Uuid>,
) -> Result<Proposal, String> {
    let mut args: Value = serde_json::from_str(arguments)
        .or_else(|e| {
            // A small model writes a line break inside a string as it is, not as `\n`
            // (SmolLM2 behind llama-cpp-python, six steps in one interview): read it as meant.
            raw_controls_escaped(arguments)
                .and_then(|fixed| serde_json::from_str(&fixed).ok())
                .ok_or(e)
        })
        .map_err(|e| format!("arguments are not JSON: {e}"))?;
    unescape_entities(&mut args);
    if !args.is_object() {
        return Err("arguments are not an object".into());
    }
    let objective = || required(&args, "objective_id");
    let mut proposal = Proposal {
        action: AgentAction::ExtractFields,
        rationale: required(&args, "rationale")?,
        message: text(&args, "message"),
        interaction: None,
        fields: Vec::new(),
        summary: None,
        input_summary,
        provenance,
        // The model's judgement of the participant's latest input, when it gives one.
        input_class: text(&args, "participant_input")
            .and_then(|c| serde_json::from_value(Value::String(c)).ok()),
        refused: None,
    };
    proposal.action = match name {
        "ask_question" => AgentAction::AskQuestion {
            objective_id: objective()?,
        },
        "probe" => AgentAction::Probe {
            objective_id: objective()?,
            based_on_turn_id: text(&args, "based_on_turn_id").and_then(|t| resolve(&t)),
            trigger: parse_enum::<ProbeTrigger>(&args, "trigger")?,
        },
        "render_interaction" => {
            if let Some(spec) = args.get("interaction").filter(|v| v.is_object()) {
                let mut spec = spec.clone();
                if let (Some(intent), None) =
                    (text(&args, "research_intent"), spec.get("research_intent"))
                {
                    spec["research_intent"] = Value::String(intent);
                }
                proposal.interaction = Some(
                    serde_json::from_value::<InteractionSpec>(spec)
                        .map_err(|e| format!("the interaction is not valid: {e}"))?,
                );
            }
            AgentAction::RenderInteraction {
                objective_id: Some(objective()?),
            }
        }
        "extract_fields" => {
            let fields = args
                .get("fields")
                .and_then(Value::as_array)
                .ok_or("missing argument \"fields\"")?;
            proposal.fields = fields
                .iter()
                .map(|f| {
                    Ok(ExtractedField {
                        field_id: required(f, "field_id")?,
                        value: f.get("value").cloned().ok_or("a field without a value")?,
                        confidence: f
                            .get("confidence")
                            .and_then(Value::as_f64)
                            .ok_or("a field without a confidence")?,
                        evidence_turn_ids: f
                            .get("evidence_turn_ids")
                            .and_then(Value::as_array)
                            .map(|ids| {
                                ids.iter()
                                    .filter_map(|i| i.as_str().and_then(resolve))
                                    .collect()
                            })
                            .unwrap_or_default(),
                        quote: text(f, "quote"),
                        // "refused" / "unknown" when the participant declined or did not know.
                        status: text(f, "status")
                            .and_then(|st| serde_json::from_value(Value::String(st)).ok())
                            .unwrap_or_default(),
                    })
                })
                .collect::<Result<_, String>>()?;
            proposal.message = None;
            AgentAction::ExtractFields
        }
        "summarize_and_confirm" => {
            proposal.summary = Some(required(&args, "summary")?);
            AgentAction::SummarizeAndConfirm
        }
        "conclude" => AgentAction::Conclude {
            reason: parse_enum::<ConcludeReason>(&args, "reason")?,
        },
        other => return Err(format!("unknown tool {other:?}")),
    };
    Ok(proposal)
}

/// The action of a call still streaming, once enough of it has arrived to judge it; `None`
/// while it has not (or for tools whose output is never shown).
pub fn partial_action(name: &str, arguments: &str) -> Option<AgentAction> {
    let complete = |key: &str| {
        string_field(arguments, key)
            .filter(|(_, done)| *done)
            .map(|(v, _)| v)
    };
    match name {
        "ask_question" => Some(AgentAction::AskQuestion {
            objective_id: complete("objective_id")?,
        }),
        "probe" => Some(AgentAction::Probe {
            objective_id: complete("objective_id")?,
            based_on_turn_id: None,
            trigger: ProbeTrigger::Vague,
        }),
        "render_interaction" => Some(AgentAction::RenderInteraction {
            objective_id: Some(complete("objective_id")?),
        }),
        "summarize_and_confirm" => Some(AgentAction::SummarizeAndConfirm),
        "conclude" => serde_json::from_value(Value::String(complete("reason")?))
            .ok()
            .map(|reason| AgentAction::Conclude { reason }),
        _ => None,
    }
}

/// The `message` argument received so far, and whether it is complete.
pub fn partial_message(arguments: &str) -> Option<(String, bool)> {
    string_field(arguments, "message")
}

/// The action a call is taken to be when its words arrive before its target: a question opens
/// the first objective not asked yet (must before should before could, as the rules
/// interviewer goes); a probe or a widget follows the objective under discussion. A closing
/// message waits for its reason (`None`).
pub fn expected_action(name: &str, session: &interview_session::Session) -> Option<AgentAction> {
    let current = || session.current_objective().map(String::from);
    match name {
        "ask_question" => {
            let next = session
                .objectives_in_order()
                .into_iter()
                .find(|o| !session.objective(&o.id).asked)
                .map(|o| o.id.clone())
                .or_else(current)?;
            Some(AgentAction::AskQuestion { objective_id: next })
        }
        "probe" => Some(AgentAction::Probe {
            objective_id: current()?,
            based_on_turn_id: None,
            trigger: ProbeTrigger::Vague,
        }),
        "render_interaction" => Some(AgentAction::RenderInteraction {
            objective_id: Some(current()?),
        }),
        "summarize_and_confirm" => Some(AgentAction::SummarizeAndConfirm),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raw_line_break_inside_a_string_is_read_as_meant() {
        let raw = "{\"objective_id\": \"o1\", \"message\": \"Hello.\nHow do you plan?\", \"rationale\": \"a\tb \\\"q\\\"\"}";
        assert!(serde_json::from_str::<Value>(raw).is_err());
        let fixed: Value = serde_json::from_str(&raw_controls_escaped(raw).unwrap()).unwrap();
        assert_eq!(fixed["message"], "Hello.\nHow do you plan?");
        assert_eq!(fixed["rationale"], "a\tb \"q\"");
        // Between values a line break is whitespace, and nothing changes.
        assert_eq!(raw_controls_escaped("{\n\"a\": 1\n}"), None);
    }

    fn provenance() -> Provenance {
        Provenance {
            model: "m".into(),
            prompt_version_id: "p".into(),
            latency_ms: 1,
            token_usage: Default::default(),
        }
    }

    #[test]
    fn html_entities_a_template_put_in_come_back_as_characters() {
        let p = proposal_from_call(
            "ask_question",
            r#"{"objective_id": "o1", "message": "When you say &#34;list&#34;, what&#39;s on it &amp; who writes it? &amp;lt;", "rationale": "r"}"#,
            provenance(),
            String::new(),
            &|t| Uuid::try_parse(t).ok(),
        )
        .unwrap();
        assert_eq!(
            p.message.as_deref(),
            Some("When you say \"list\", what's on it & who writes it? &lt;")
        );
    }

    #[test]
    fn tool_calls_become_proposals() {
        let p = proposal_from_call(
            "probe",
            r#"{"objective_id": "o1", "trigger": "strong_emotion", "message": "Why?", "rationale": "angry answer"}"#,
            provenance(),
            String::new(),
            &|t| Uuid::try_parse(t).ok(),
        )
        .unwrap();
        assert_eq!(
            p.action,
            AgentAction::Probe {
                objective_id: "o1".into(),
                based_on_turn_id: None,
                trigger: ProbeTrigger::StrongEmotion
            }
        );
        for (name, args) in [
            (
                "probe",
                r#"{"objective_id": "o1", "trigger": "bored", "message": "?", "rationale": "r"}"#,
            ),
            ("ask_question", r#"{"objective_id": "o1", "message": "?"}"#),
            ("ask_question", r#"{"objective_id": "o1", "mess"#),
            ("dance", r#"{"rationale": "r"}"#),
        ] {
            assert!(
                proposal_from_call(name, args, provenance(), String::new(), &|_| None).is_err(),
                "{name} {args}"
            );
        }
    }

    #[test]
    fn a_streaming_call_is_judged_once_its_target_is_known() {
        assert_eq!(
            partial_action("ask_question", r#"{"objective_id": "o"#),
            None
        );
        assert_eq!(
            partial_action("ask_question", r#"{"objective_id": "o1", "mess"#),
            Some(AgentAction::AskQuestion {
                objective_id: "o1".into()
            })
        );
        assert_eq!(
            partial_message(r#"{"objective_id": "o1", "message": "How do yo"#),
            Some(("How do yo".to_string(), false))
        );
    }
}
