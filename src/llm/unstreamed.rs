//! The unstreamed form of a step (issue 32): some servers serve a tool call only when the
//! request names the tool or is not streamed — llama-cpp-python answers a streamed request
//! whose `tool_choice` is `"required"` or `"auto"` with 200 and an empty stream. For such an
//! endpoint, steps go as one plain request (`stream: false`, `tool_choice: "auto"` with the
//! compatible form's instruction) and the answer comes whole: the model still decides, the
//! participant reads its words when they are complete instead of as they are written.

use serde_json::Value;

use super::turn::{ModelError, ModelTurn};
use interview_session::decision::TokenUsage;

/// The request body in the unstreamed form: `stream: false`, and `tool_choice: "auto"` with
/// the compatible form's instruction (what llama-cpp-python serves), and `max_tokens` beside
/// `max_completion_tokens`; the other parameters stay standard unless the endpoint already
/// asked for the compatible form.
pub fn body(standard: &Value, compatible_mode: bool) -> Value {
    let compatible = super::wire::compatible(standard);
    let mut body = if compatible_mode {
        compatible.clone()
    } else {
        standard.clone()
    };
    body["messages"] = compatible["messages"].clone();
    if let Some(map) = body.as_object_mut() {
        map.insert("stream".into(), Value::Bool(false));
        map.insert("tool_choice".into(), Value::String("auto".into()));
        map.remove("stream_options");
        // An unstreamed answer cannot be cut off as it is written, so the limit must reach the
        // server: llama-cpp-python reads only the older `max_tokens` (it generated until the
        // timeout — 120 s on one thread — without it). Both are sent; the form is used only
        // for servers that answered a streamed step with nothing.
        if let Some(max) = map.get("max_completion_tokens").cloned() {
            map.entry("max_tokens").or_insert(max);
        }
    }
    body
}

/// A whole chat completion, read leniently.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub struct Completion {
    model: Option<String>,
    choices: Vec<Choice>,
    usage: Option<Usage>,
    error: Option<Value>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct Choice {
    message: Message,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct Message {
    tool_calls: Vec<ToolCall>,
    /// The older form some servers still send beside (or instead of) `tool_calls`.
    function_call: Option<Function>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct ToolCall {
    function: Function,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct Function {
    name: String,
    arguments: String,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct Usage {
    prompt_tokens: u32,
    completion_tokens: u32,
    total_tokens: u32,
}

/// The turn a completion holds: its one tool call, or why there is none.
#[allow(clippy::result_large_err)] // the gateway's own result shape, returned once per call
pub fn into_turn(completion: Completion) -> Result<ModelTurn, (ModelError, ModelTurn)> {
    let mut turn = ModelTurn {
        model: completion.model.filter(|m| !m.is_empty()),
        ..ModelTurn::default()
    };
    if let Some(usage) = completion.usage {
        turn.usage_reported = true;
        turn.usage = TokenUsage {
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            total_tokens: usage.total_tokens,
        };
    }
    if let Some(error) = completion.error {
        let message = error["message"]
            .as_str()
            .map_or_else(|| error.to_string(), String::from);
        return Err((ModelError::InStream(message), turn));
    }
    let Some(choice) = completion.choices.into_iter().next() else {
        return Err((ModelError::Empty, turn));
    };
    let message = choice.message;
    let mut calls: Vec<Function> = message.tool_calls.into_iter().map(|c| c.function).collect();
    if calls.is_empty() {
        calls.extend(message.function_call);
    }
    match calls.len() {
        0 => Err((ModelError::NoTool, turn)),
        1 => {
            let call = calls.remove(0);
            // llama-cpp-python names the legacy `function_call` `"ask_question:"`.
            turn.tool_name = Some(call.name.trim_end_matches(':').to_string());
            turn.arguments = call.arguments;
            Ok(turn)
        }
        _ => Err((ModelError::SeveralTools, turn)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_output_limit_reaches_a_server_that_reads_only_max_tokens() {
        let standard = serde_json::json!({"model": "m", "max_completion_tokens": 600, "stream": true,
            "stream_options": {"include_usage": true}, "tool_choice": "required",
            "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]});
        let sent = body(&standard, false);
        assert_eq!(sent["max_tokens"], 600);
        assert_eq!(sent["stream"], false);
        assert_eq!(sent["tool_choice"], "auto");
        assert!(sent.get("stream_options").is_none());
    }

    #[test]
    fn a_whole_completion_becomes_a_turn() {
        // As llama-cpp-python 0.3.36 answers a non-streamed "auto" request.
        let body = r#"{"id":"c","object":"chat.completion","model":"x","choices":[{"index":0,"message":{"content":null,"tool_calls":[{"id":"call_0","type":"function","function":{"name":"conclude","arguments":"{\"reason\": \"x\"}"}}],"role":"assistant","function_call":{"name":"ask_question:","arguments":"{\"reason\": \"x\"}"}},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}"#;
        let turn = into_turn(serde_json::from_str(body).unwrap()).unwrap();
        assert_eq!(turn.tool_name.as_deref(), Some("conclude"));
        assert_eq!(turn.arguments, r#"{"reason": "x"}"#);
        assert_eq!(turn.usage.total_tokens, 15);
        let only_legacy =
            r#"{"choices":[{"message":{"function_call":{"name":"probe:","arguments":"{}"}}}]}"#;
        let turn = into_turn(serde_json::from_str(only_legacy).unwrap()).unwrap();
        assert_eq!(turn.tool_name.as_deref(), Some("probe"));
        let text = r#"{"choices":[{"message":{"content":"Hello"}}]}"#;
        assert_eq!(
            into_turn(serde_json::from_str(text).unwrap())
                .unwrap_err()
                .0,
            ModelError::NoTool
        );
    }
}
