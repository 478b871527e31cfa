//! Tests of `gateway.rs`: the wire form of requests, the compatible form.
use super::*;
use serde_json::json;

#[test]
fn the_wire_keeps_the_schemas_as_written() {
    let body = json!({"model": "m", "stream": true});
    let tools: &RawValue = serde_json::from_str(r#"[{"b": 1, "a": 2}]"#).unwrap();
    let text = serde_json::to_string(&Wire { body: &body, tools }).unwrap();
    assert!(text.contains(r#""tools":[{"b": 1, "a": 2}]"#), "{text}");
}

#[test]
fn the_compatible_form_asks_for_a_tool_in_words() {
    let body = json!({"model": "m", "tool_choice": "required", "parallel_tool_calls": false,
        "stream_options": {"include_usage": true}, "max_completion_tokens": 9,
        "messages": [{"role": "system", "content": "S"}]});
    let c = compatible(&body);
    assert_eq!(c["tool_choice"], "auto");
    assert_eq!(c["max_tokens"], 9);
    assert!(c.get("parallel_tool_calls").is_none() && c.get("stream_options").is_none());
    assert!(c["messages"][0]["content"]
        .as_str()
        .unwrap()
        .ends_with("never with plain text."));
}
