//! What one streamed decision's chunks add up to: the tool the model calls and its arguments as
//! they arrive, the usage and model name the endpoint reports, and whether the stream finished —
//! refusing a second tool call and a model that writes far past the request's limit.

use interview_session::decision::TokenUsage;
use serde_json::Value;

use super::turn::{ModelError, ModelTurn};
use super::wire::Chunk;

/// The running reading of one stream's chunks into its [`ModelTurn`].
pub(super) struct Reading {
    /// A choice said why it finished (a stream that ends without one was dropped).
    pub(super) finished: bool,
    call_id: Option<String>,
    /// Characters of content and arguments written so far.
    written: usize,
    /// What the request allows the model to write, in tokens.
    max_tokens: Option<u64>,
}

impl Reading {
    pub(super) fn new(body: &Value) -> Self {
        Self {
            finished: false,
            call_id: None,
            written: 0,
            max_tokens: ["max_completion_tokens", "max_tokens"]
                .iter()
                .find_map(|k| body[*k].as_u64()),
        }
    }

    /// Adds one chunk (its `error` already looked at) to `turn`.
    pub(super) fn take(&mut self, turn: &mut ModelTurn, chunk: Chunk) -> Result<(), ModelError> {
        if let Some(model) = chunk.model.filter(|m| !m.is_empty()) {
            turn.model = Some(model);
        }
        if let Some(usage) = &chunk.usage {
            turn.usage_reported = true;
            turn.usage = TokenUsage {
                prompt_tokens: usage.prompt_tokens,
                completion_tokens: usage.completion_tokens,
                total_tokens: usage.total_tokens,
            };
        }
        for choice in &chunk.choices {
            if choice.finish_reason.is_some() {
                self.finished = true;
            }
            self.written += choice
                .delta
                .content
                .as_ref()
                .and_then(Value::as_str)
                .map_or(0, str::len);
            for call in choice.delta.tool_calls.iter().flatten() {
                // A second call shows as index 1, or (servers that send no index) as a new id.
                let another_id = matches!((&self.call_id, &call.id), (Some(a), Some(b)) if a != b);
                if call.index.unwrap_or(0) > 0 || another_id {
                    return Err(ModelError::SeveralTools);
                }
                if self.call_id.is_none() {
                    self.call_id.clone_from(&call.id);
                }
                let Some(function) = &call.function else {
                    continue;
                };
                if let Some(name) = function.name.as_deref().filter(|n| !n.is_empty()) {
                    if turn.tool_name.as_deref().is_some_and(|n| n != name) {
                        return Err(ModelError::SeveralTools);
                    }
                    turn.tool_name = Some(name.to_string());
                }
                if let Some(args) = &function.arguments {
                    self.written += args.len();
                    turn.arguments.push_str(args);
                }
            }
        }
        // A server may ignore the limit and write until the timeout (3,000 characters of
        // `".152.089…` were seen). A token is about four characters; twice that leaves room for
        // escapes.
        match self.max_tokens {
            Some(max) if self.written as u64 > max * 8 => Err(ModelError::TooLong(max)),
            _ => Ok(()),
        }
    }

    /// What the stream came to once it ended.
    pub(super) fn outcome(&self, turn: &ModelTurn) -> Result<(), ModelError> {
        match (&turn.tool_name, self.finished) {
            (None, _) if turn.first_chunk_ms.is_none() => Err(ModelError::Empty),
            (None, _) => Err(ModelError::NoTool),
            (Some(_), false) => Err(ModelError::Dropped),
            (Some(_), true) => Ok(()),
        }
    }
}
