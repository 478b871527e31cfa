//! Streaming one decision from an OpenAI-compatible endpoint through async-openai.
//!
//! The whole call has a deadline (the study's `timeout_seconds`) and the stream an idle timeout
//! — a stalled stream is not an error to the client library, so we make it one. Tool-call
//! arguments are accumulated as they arrive and reported to the caller after every chunk, so it
//! can show the `message` argument while it streams.

use std::time::{Duration, Instant};

use async_openai::config::OpenAIConfig;
use async_openai::types::chat::CreateChatCompletionRequest;
use async_openai::Client;
use futures_util::StreamExt;
use interview_session::decision::TokenUsage;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error("the model request failed: {0}")]
    Http(String),
    #[error("the model did not finish within {0} s")]
    Timeout(u64),
    #[error("the model stream stalled for {0} s")]
    Stalled(u64),
    #[error("the model stream ended before the answer was complete")]
    Dropped,
    #[error("the model answered without calling a tool")]
    NoTool,
    #[error("the model called more than one tool")]
    SeveralTools,
    #[error("the model sent something unreadable: {0}")]
    Garbage(String),
}

impl ModelError {
    pub fn code(&self) -> &'static str {
        match self {
            Self::Http(_) => "model_http_error",
            Self::Timeout(_) => "model_timeout",
            Self::Stalled(_) => "model_stalled",
            Self::Dropped => "model_stream_dropped",
            Self::NoTool => "model_no_tool",
            Self::SeveralTools => "model_several_tools",
            Self::Garbage(_) => "model_garbage",
        }
    }
}

/// What the model produced (completely, or as far as it got).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelTurn {
    pub tool_name: Option<String>,
    pub arguments: String,
    pub usage: TokenUsage,
    pub latency_ms: u64,
}

pub struct ModelGateway {
    client: Client<OpenAIConfig>,
    idle_timeout: Duration,
    /// Kept only to be cut out of error messages (a provider may echo it back).
    api_key: Option<String>,
}

impl ModelGateway {
    pub fn new(base_url: &str, api_key: Option<&str>, idle_timeout: Duration) -> Self {
        // reqwest is built without a bundled TLS provider; ring (as sqlx uses) serves HTTPS.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut config = OpenAIConfig::new().with_api_base(base_url.trim_end_matches('/'));
        if let Some(key) = api_key {
            config = config.with_api_key(key);
        }
        Self {
            client: Client::with_config(config),
            idle_timeout,
            api_key: api_key.map(String::from),
        }
    }

    /// An upstream error as it may be logged and stored: short, with the key and anything
    /// token-shaped cut out.
    fn upstream(&self, error: impl std::fmt::Display) -> String {
        crate::llm::redact::redact(&error.to_string(), self.api_key.as_deref())
    }

    /// Streams one decision. `on_progress(tool name, arguments so far)` runs after each chunk.
    #[tracing::instrument(skip_all, fields(model = %body["model"]))]
    pub async fn stream(
        &self,
        body: Value,
        timeout: Duration,
        mut on_progress: impl FnMut(&str, &str),
    ) -> Result<ModelTurn, (ModelError, ModelTurn)> {
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + timeout;
        let mut turn = ModelTurn::default();
        let finish = |mut turn: ModelTurn, result: Result<(), ModelError>| {
            turn.latency_ms = started.elapsed().as_millis() as u64;
            match result {
                Ok(()) => Ok(turn),
                Err(e) => Err((e, turn)),
            }
        };
        let request: CreateChatCompletionRequest = match serde_json::from_value(body) {
            Ok(r) => r,
            Err(e) => return finish(turn, Err(ModelError::Garbage(format!("bad request: {e}")))),
        };
        let chat = self.client.chat();
        let opened = tokio::time::timeout_at(deadline, chat.create_stream(request)).await;
        let mut stream = match opened {
            Err(_) => return finish(turn, Err(ModelError::Timeout(timeout.as_secs()))),
            Ok(Err(e)) => return finish(turn, Err(ModelError::Http(self.upstream(e)))),
            Ok(Ok(stream)) => stream,
        };
        let mut finished = false;
        loop {
            let idle = tokio::time::Instant::now() + self.idle_timeout;
            let next = tokio::time::timeout_at(idle.min(deadline), stream.next()).await;
            let chunk = match next {
                Err(_) if tokio::time::Instant::now() >= deadline => {
                    return finish(turn, Err(ModelError::Timeout(timeout.as_secs())))
                }
                Err(_) => {
                    return finish(turn, Err(ModelError::Stalled(self.idle_timeout.as_secs())))
                }
                Ok(None) => break,
                Ok(Some(Err(e))) => {
                    let error = match e {
                        async_openai::error::OpenAIError::JSONDeserialize(e, _) => {
                            ModelError::Garbage(self.upstream(e))
                        }
                        other => ModelError::Http(self.upstream(other)),
                    };
                    return finish(turn, Err(error));
                }
                Ok(Some(Ok(chunk))) => chunk,
            };
            if let Some(usage) = &chunk.usage {
                turn.usage = TokenUsage {
                    prompt_tokens: usage.prompt_tokens,
                    completion_tokens: usage.completion_tokens,
                    total_tokens: usage.total_tokens,
                };
            }
            for choice in &chunk.choices {
                if choice.finish_reason.is_some() {
                    finished = true;
                }
                for call in choice.delta.tool_calls.iter().flatten() {
                    if call.index > 0 {
                        return finish(turn, Err(ModelError::SeveralTools));
                    }
                    if let Some(function) = &call.function {
                        if let Some(name) = &function.name {
                            if turn.tool_name.as_ref().is_some_and(|n| n != name) {
                                return finish(turn, Err(ModelError::SeveralTools));
                            }
                            turn.tool_name = Some(name.clone());
                        }
                        if let Some(args) = &function.arguments {
                            turn.arguments.push_str(args);
                        }
                    }
                }
            }
            if let Some(name) = &turn.tool_name {
                on_progress(name, &turn.arguments);
            }
        }
        // U+0000 cannot be stored by PostgreSQL; a model that sends it gets U+FFFD instead.
        if turn.arguments.contains("\\u0000") {
            turn.arguments = turn.arguments.replace("\\u0000", "\\ufffd");
        }
        let result = match (&turn.tool_name, finished) {
            (None, _) => Err(ModelError::NoTool),
            (Some(_), false) => Err(ModelError::Dropped),
            (Some(_), true) => Ok(()),
        };
        finish(turn, result)
    }
}
