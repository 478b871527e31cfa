//! The tool schemas offered to the model, exactly as sent: written by hand in `tools.json` so
//! each tool's properties reach the model in the contract's order (a `serde_json` map would
//! sort them), with the subsets a request may offer.

use std::sync::OnceLock;

use serde_json::Value;

/// The tool schemas (JSON Schema), one per action, as sent: written by hand so each tool's
/// properties reach the model in the contract's order (its target before its text).
pub const TOOLS: &str = include_str!("tools.json");

/// The tools as one study's requests send them: `objective_id` and `field_id` limited to the
/// study's own ids (an `enum`), so a server that constrains decoding to the schema (llama.cpp,
/// vLLM, Ollama) cannot write an id the guards would refuse (`"1"`, `"}],"` and
/// `"./data.json"` were seen from a small model). Done on the text, so the properties keep
/// the contract's order.
pub fn for_study(tools: &str, study: &interview_session::study::PinnedStudy) -> String {
    let ids = |ids: Vec<&str>| serde_json::to_string(&ids).expect("strings serialize");
    let objectives = ids(study
        .study_config
        .objectives
        .iter()
        .map(|o| o.id.as_str())
        .collect());
    // An empty `enum` is no valid schema (a study may have no output fields).
    let limit = |text: String, property: &str, ids: &str| match ids {
        "[]" => text,
        _ => text.replace(
            &format!(r#""{property}": {{"type": "string"}}"#),
            &format!(r#""{property}": {{"type": "string", "enum": {ids}}}"#),
        ),
    };
    typed_fields(
        limit(tools.to_string(), "objective_id", &objectives),
        &study.output_schema,
    )
}

/// One tool a step offers, and the objectives it may name (empty for a tool that names none):
/// `interviewer::offered` works them out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    pub tool: &'static str,
    pub objectives: Vec<String>,
}

/// The tools one step offers, as the study's requests send them, each tool's `objective_id`
/// limited to the objectives it may name now (a per-step `enum`, on top of [`for_study`]'s).
pub fn for_step(offers: &[Offer], study: &interview_session::study::PinnedStudy) -> String {
    let all: Vec<&serde_json::value::RawValue> =
        serde_json::from_str(TOOLS).expect("tools.json is a list");
    let kept: Vec<String> = offers
        .iter()
        .filter_map(|offer| {
            let text = all
                .iter()
                .map(|t| t.get())
                .find(|t| t.contains(&format!("\"name\": \"{}\"", offer.tool)))?;
            let text = match offer.objectives.as_slice() {
                [] => text.to_string(),
                ids => text.replace(
                    r#""objective_id": {"type": "string"}"#,
                    &format!(
                        r#""objective_id": {{"type": "string", "enum": {}}}"#,
                        serde_json::to_string(ids).expect("strings serialize")
                    ),
                ),
            };
            Some(for_study(&text, study))
        })
        .collect();
    format!("[{}]", kept.join(",\n"))
}

/// The item `extract_fields` takes, as written in `tools.json`.
const ANY_FIELD_ITEM: &str = r#"{"type": "object", "properties": {
        "field_id": {"type": "string"},
        "value": {},"#;

/// `extract_fields`' items as two choices per output field — an answer with a value of its type,
/// or a non-answer with none and its kind —: a server that constrains decoding
/// to the schema then cannot write a number into a text field or a schema into a value — what a
/// small model did 5 times in 11 steps with an untyped `value`.
fn typed_fields(tools: String, schema: &interview_session::study::OutputSchema) -> String {
    // A study with no output fields keeps the untyped item (an empty `anyOf` is no schema).
    let Some(start) = tools
        .find(ANY_FIELD_ITEM)
        .filter(|_| !schema.fields.is_empty())
    else {
        return tools;
    };
    let end_marker = r#"}, "required": ["field_id", "value", "confidence"]}"#;
    let end = start + tools[start..].find(end_marker).expect("the item ends") + end_marker.len();
    let items: Vec<String> = schema
        .fields
        .iter()
        .flat_map(|field| {
            let id = serde_json::to_string(&field.id).expect("strings serialize");
            // An answer: a value of the field's type, with its evidence. A non-answer: no value,
            // and what kind it is (a declined field holding a value is refused by the guards).
            [
                format!(
                    r#"{{"type": "object", "properties": {{
        "field_id": {{"type": "string", "enum": [{id}]}},
        "value": {value},
        "confidence": {CONFIDENCE},
        "evidence_turn_ids": {{"type": "array", "items": {{"type": "string", "pattern": "^t[1-9][0-9]{{0,3}}$"}}, "maxItems": 8}},
        "quote": {{"type": "string", "maxLength": 300}}
      }}, "required": ["field_id", "value", "confidence"], "additionalProperties": false}}"#,
                    value = value_schema(field)
                ),
                format!(
                    r#"{{"type": "object", "properties": {{
        "field_id": {{"type": "string", "enum": [{id}]}},
        "value": {{"type": "null"}},
        "status": {{"type": "string", "enum": ["refused", "unknown", "skipped"]}},
        "confidence": {CONFIDENCE}
      }}, "required": ["field_id", "value", "status", "confidence"], "additionalProperties": false}}"#
                ),
            ]
        })
        .collect();
    // Each field once at most: the list is as bounded as its items.
    let before = tools[..start].replace(
        r#""fields": {"type": "array", "items":"#,
        &format!(
            r#""fields": {{"type": "array", "maxItems": {}, "items":"#,
            schema.fields.len()
        ),
    );
    format!(
        "{before}{{\"anyOf\": [{}]}}{}",
        items.join(", "),
        &tools[end..]
    )
}

/// The confidences a study's extraction may give, as an `enum`: a server that constrains
/// decoding cannot write one outside [0, 1] (a 135M model wrote 2.5 and 5, refused whole), and
/// steps of 0.05 near the threshold are as fine as a reading of one message can be.
const CONFIDENCE: &str = r#"{"type": "number", "enum": [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1]}"#;

/// The JSON Schema of a value `field` takes (what `field_values::check_value` accepts).
fn value_schema(field: &interview_session::study::OutputField) -> String {
    use interview_session::study::FieldType;
    match field.field_type {
        // Bounded, as every text the model writes: a server that ignores `max_tokens` for tool
        // arguments (llama-cpp-python's `chatml-function-calling`) otherwise generates until the
        // client gives up — and, one slot, keeps the next steps waiting behind it (seen: 7,080
        // tokens over 453 s).
        FieldType::String => r#"{"type": "string", "maxLength": 1000}"#.into(),
        FieldType::Number => r#"{"type": "number"}"#.into(),
        FieldType::Integer => r#"{"type": "integer"}"#.into(),
        FieldType::Boolean => r#"{"type": "boolean"}"#.into(),
        FieldType::StringList => {
            r#"{"type": "array", "items": {"type": "string", "maxLength": 300}, "maxItems": 20}"#
                .into()
        }
        FieldType::Enum => format!(
            r#"{{"type": "string", "enum": {}}}"#,
            serde_json::to_string(&field.options).expect("strings serialize")
        ),
    }
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
            ["objective_id", "message", "participant_input", "rationale"]
        );
        assert_eq!(
            written_order("probe"),
            [
                "objective_id",
                "trigger",
                "based_on_turn_id",
                "message",
                "participant_input",
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
                "participant_input",
                "rationale"
            ]
        );
        assert_eq!(
            written_order("summarize_and_confirm"),
            ["message", "summary", "participant_input", "rationale"]
        );
        assert_eq!(
            written_order("conclude"),
            ["reason", "message", "participant_input", "rationale"]
        );
    }

    /// Every `maxLength` in the tools as a study sends them.
    fn length_bounds(v: &Value, out: &mut Vec<u64>) {
        match v {
            Value::Object(map) => {
                out.extend(map.get("maxLength").and_then(Value::as_u64));
                map.values().for_each(|v| length_bounds(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| length_bounds(v, out)),
            _ => {}
        }
    }

    /// Whether every string and array in `v` has a bound (an `enum`, a `pattern`, `maxLength`,
    /// `maxItems`), naming the first that has none.
    fn unbounded(v: &Value, at: &str) -> Option<String> {
        match v {
            Value::Object(map) => {
                let bounded = ["enum", "pattern", "maxLength", "maxItems"]
                    .iter()
                    .any(|k| map.contains_key(*k));
                let kind = map.get("type").and_then(Value::as_str);
                if matches!(kind, Some("string" | "array")) && !bounded {
                    return Some(at.to_string());
                }
                map.iter()
                    .find_map(|(k, v)| unbounded(v, &format!("{at}.{k}")))
            }
            Value::Array(items) => items
                .iter()
                .enumerate()
                .find_map(|(i, v)| unbounded(v, &format!("{at}[{i}]"))),
            _ => None,
        }
    }

    #[test]
    fn every_text_and_list_the_model_writes_is_bounded() {
        // llama-cpp-python's `chatml-function-calling` generates tool arguments with no token
        // limit: an unbounded value ran for 7,080 tokens (453 s) and held its one slot.
        let study = crate::demo::definition()
            .versioned_documents()
            .pin("s", "demo");
        let tools: Value = serde_json::from_str(&for_study(TOOLS, &study)).unwrap();
        assert_eq!(unbounded(&tools, "tools"), None);
        let fields = tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["function"]["name"] == "extract_fields")
            .unwrap()["function"]["parameters"]["properties"]["fields"]
            .clone();
        assert_eq!(fields["maxItems"], study.output_schema.fields.len());
    }

    #[test]
    fn length_bounds_stay_within_what_a_grammar_server_parses() {
        // llama.cpp's grammar parser (llama-cpp-python 0.3.36) refuses a string bound near 2000
        // characters ("exceeds sane defaults") and the server then dies: 1200 beside the other
        // bounds crashed it, 1000 did not. The bounds exist to end a runaway generation in a
        // server that ignores `max_tokens` for tool arguments.
        let study = crate::demo::definition()
            .versioned_documents()
            .pin("s", "demo");
        let tools: Value = serde_json::from_str(&for_study(TOOLS, &study)).unwrap();
        let mut bounds = Vec::new();
        length_bounds(&tools, &mut bounds);
        assert!(bounds.len() >= 14, "{bounds:?}");
        assert!(bounds.iter().all(|b| *b <= 1000), "{bounds:?}");
        for tool in tools.as_array().unwrap() {
            let message = &tool["function"]["parameters"]["properties"]["message"];
            if !message.is_null() {
                assert_eq!(message["maxLength"], 500, "{tool}");
            }
        }
    }

    #[test]
    fn a_step_offers_its_tools_each_limited_to_its_objectives() {
        let study = crate::demo::definition()
            .versioned_documents()
            .pin("s", "demo");
        let offers = [
            Offer {
                tool: "probe",
                objectives: vec!["planning_habits".into()],
            },
            Offer {
                tool: "summarize_and_confirm",
                objectives: Vec::new(),
            },
        ];
        let tools: Value = serde_json::from_str(&for_step(&offers, &study)).unwrap();
        let names: Vec<&str> = tools
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["probe", "summarize_and_confirm"]);
        assert_eq!(
            tools[0]["function"]["parameters"]["properties"]["objective_id"]["enum"],
            serde_json::json!(["planning_habits"])
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

    // Long by design: the demo study's tool schemas checked in order: the objective ids a question
    // may name, then the choices of extract_fields (an answer and a non-answer per field), each
    // answer's id and value type checked against an example value, then no open id or value left.
    #[test]
    fn a_study_s_ids_are_the_only_ones_its_requests_allow() {
        let study = crate::demo::definition()
            .versioned_documents()
            .pin("s", "demo");
        let tools = for_study(TOOLS, &study);
        let parsed: serde_json::Value = serde_json::from_str(&tools).expect("still JSON");
        let ask = &parsed[0]["function"]["parameters"]["properties"]["objective_id"];
        assert_eq!(
            ask["enum"],
            serde_json::json!(["planning_habits", "pain_points", "tool_preferences"])
        );
        // One choice per output field, its id and its value's type.
        let extract = parsed
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["function"]["name"] == "extract_fields")
            .unwrap();
        let items = &extract["function"]["parameters"]["properties"]["fields"]["items"]["anyOf"];
        let choices: Vec<(&str, &Value)> = items
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                let p = &i["properties"];
                (p["field_id"]["enum"][0].as_str().unwrap(), &p["value"])
            })
            .step_by(2)
            .collect();
        assert_eq!(
            items.as_array().unwrap().len(),
            2 * study.output_schema.fields.len()
        );
        assert_eq!(choices.len(), study.output_schema.fields.len());
        for non_answer in items.as_array().unwrap().iter().skip(1).step_by(2) {
            assert_eq!(non_answer["properties"]["value"]["type"], "null");
            assert!(non_answer["properties"]["status"]["enum"]
                .as_array()
                .unwrap()
                .iter()
                .all(|s| s != "answered"));
        }
        for (field, (id, value)) in study.output_schema.fields.iter().zip(&choices) {
            assert_eq!(field.id, *id);
            let example = match field.field_type {
                interview_session::study::FieldType::Integer => serde_json::json!(4),
                interview_session::study::FieldType::Enum => serde_json::json!(field.options[0]),
                _ => serde_json::json!("words"),
            };
            assert!(interview_session::field_values::check_value(field, &example).is_ok());
            let typed = match value["type"].as_str().unwrap() {
                "integer" => example.is_i64(),
                "string" => {
                    example.is_string()
                        && value["enum"]
                            .as_array()
                            .is_none_or(|o| o.contains(&example))
                }
                other => panic!("{other} is not among the demo's types"),
            };
            assert!(typed, "{id}: {value}");
        }
        assert!(!tools.contains(r#""field_id": {"type": "string"}"#));
        assert!(!tools.contains(r#""value": {}"#));
        assert!(!tools.contains(r#""objective_id": {"type": "string"}"#));
    }
}
