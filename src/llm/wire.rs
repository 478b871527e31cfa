//! What goes over the wire to an OpenAI-compatible server and what comes back in a stream:
//! the request as sent (tools as written), the chunks read leniently, and the compatible form.

use serde_json::value::RawValue;
use serde_json::Value;

#[derive(serde::Serialize, Clone, Copy)]
pub(super) struct Wire<'a> {
    #[serde(flatten)]
    pub(super) body: &'a Value,
    pub(super) tools: &'a RawValue,
}

/// One streamed chunk, read leniently: OpenAI-compatible servers differ in which fields they
/// send (`created`, `object`, `index` …), and only these matter here.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(super) struct Chunk {
    pub(super) model: Option<String>,
    pub(super) choices: Vec<Choice>,
    pub(super) usage: Option<Usage>,
    /// An error object sent as a `data:` line after a 200 (llama-cpp-python, vLLM and LiteLLM
    /// do this when generation fails after the stream has started).
    pub(super) error: Option<Value>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(super) struct Choice {
    pub(super) delta: Delta,
    pub(super) finish_reason: Option<String>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(super) struct Delta {
    /// Text outside a tool call (reasoning, a chat answer): never shown, but counted against
    /// the output budget.
    pub(super) content: Option<Value>,
    pub(super) tool_calls: Option<Vec<ToolCallChunk>>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(super) struct ToolCallChunk {
    pub(super) index: Option<u32>,
    pub(super) id: Option<String>,
    pub(super) function: Option<FunctionChunk>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(super) struct FunctionChunk {
    pub(super) name: Option<String>,
    pub(super) arguments: Option<String>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(super) struct Usage {
    pub(super) prompt_tokens: u32,
    pub(super) completion_tokens: u32,
    pub(super) total_tokens: u32,
}

/// The line added to the system message when the endpoint cannot be told to require a tool.
pub(crate) const COMPAT_INSTRUCTION: &str =
    "\n\nAlways answer by calling exactly one of the tools offered, never with plain text.";

/// Whether a request names the one tool to call (`tool_choice: {"type": "function", …}`).
pub(super) fn names_its_tool(body: &Value) -> bool {
    body["tool_choice"].is_object()
}

/// The request in the form every OpenAI-compatible server takes: `tool_choice: "auto"` with
/// an instruction instead of `"required"`, `max_tokens` instead of `max_completion_tokens`, and
/// no `parallel_tool_calls` or `stream_options`.
pub(super) fn compatible(body: &Value) -> Value {
    let mut body = body.clone();
    if let Some(map) = body.as_object_mut() {
        map.remove("parallel_tool_calls");
        map.remove("stream_options");
        if let Some(max) = map.remove("max_completion_tokens") {
            map.insert("max_tokens".into(), max);
        }
        map.insert("tool_choice".into(), Value::String("auto".into()));
    }
    if let Some(system) = body["messages"][0]["content"].as_str() {
        body["messages"][0]["content"] = Value::String(format!("{system}{COMPAT_INSTRUCTION}"));
    }
    body
}
