//! The tool schemas offered to the model, exactly as sent: written by hand in `tools.json` so
//! each tool's properties reach the model in the contract's order (a `serde_json` map would
//! sort them), with the subsets a request may offer.

use std::sync::OnceLock;

use serde_json::Value;

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

/// Only the tools named, as written.
pub fn only(names: &[&str]) -> String {
    let all: Vec<&serde_json::value::RawValue> =
        serde_json::from_str(TOOLS).expect("tools.json is a list");
    let kept: Vec<&str> = all
        .iter()
        .map(|t| t.get())
        .filter(|t| {
            names
                .iter()
                .any(|n| t.contains(&format!("\"name\": \"{n}\"")))
        })
        .collect();
    format!("[{}]", kept.join(",\n"))
}

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
    let fields = ids(study
        .output_schema
        .fields
        .iter()
        .map(|f| f.id.as_str())
        .collect());
    // An empty `enum` is no valid schema (a study may have no output fields).
    let limit = |text: String, property: &str, ids: &str| match ids {
        "[]" => text,
        _ => text.replace(
            &format!(r#""{property}": {{"type": "string"}}"#),
            &format!(r#""{property}": {{"type": "string", "enum": {ids}}}"#),
        ),
    };
    let tools = limit(tools.to_string(), "objective_id", &objectives);
    limit(tools, "field_id", &fields)
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
        assert_eq!(
            tools
                .matches(r#""field_id": {"type": "string", "enum": ["#)
                .count(),
            1
        );
        assert!(!tools.contains(r#""objective_id": {"type": "string"}"#));
    }
}
