//! What a model call comes to: the turn the model produced, or why it failed.

use interview_session::decision::TokenUsage;

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
    #[error("the model wrote past its output budget ({0} tokens) and was cut off")]
    TooLong(u64),
    #[error("the server reported an error inside its stream: {0}")]
    InStream(String),
    #[error("the server answered 200 and closed the stream with nothing in it")]
    Empty,
    #[error("the model endpoint failed too often in a row; no call for {0} s more")]
    CircuitOpen(u64),
}

impl ModelError {
    /// A failure of the endpoint itself (what the breaker counts), as against a model that
    /// answered badly.
    pub fn at_the_endpoint(&self) -> bool {
        match self {
            Self::Http(_)
            | Self::Timeout(_)
            | Self::Stalled(_)
            | Self::Dropped
            | Self::Empty
            | Self::InStream(_) => true,
            Self::NoTool
            | Self::SeveralTools
            | Self::Garbage(_)
            | Self::TooLong(_)
            | Self::CircuitOpen(_) => false,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            Self::Http(_) => "model_http_error",
            Self::Timeout(_) => "model_timeout",
            Self::Stalled(_) => "model_stalled",
            Self::Dropped => "model_stream_dropped",
            Self::NoTool => "model_no_tool",
            Self::SeveralTools => "model_several_tools",
            Self::Garbage(_) => "model_garbage",
            Self::TooLong(_) => "model_too_long",
            Self::InStream(_) => "model_stream_error",
            Self::Empty => "model_empty_stream",
            Self::CircuitOpen(_) => "model_circuit_open",
        }
    }
}

/// What the model produced (completely, or as far as it got).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelTurn {
    pub tool_name: Option<String>,
    pub arguments: String,
    pub usage: TokenUsage,
    /// Whether the endpoint reported usage; when it did not, `usage` is zero and budgets count
    /// an estimate instead.
    pub usage_reported: bool,
    /// The model that answered, as the endpoint names it (`model` in its chunks).
    pub model: Option<String>,
    pub latency_ms: u64,
    /// Milliseconds from the request to the first chunk.
    pub first_chunk_ms: Option<u64>,
}
