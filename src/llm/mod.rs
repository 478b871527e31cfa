//! The `llm` policy: a model behind any OpenAI-compatible endpoint proposes each decision as a
//! tool call, streamed; the aggregate still judges it.

pub mod breaker;
mod chunks;
pub mod gate;
pub mod gateway;
pub mod leaks;
pub mod partial;
pub mod prompt;
pub mod prompt_records;
pub mod quoted;
pub mod redact;
pub mod schemas;
mod templates;
pub mod tools;
mod turn;
pub mod unstreamed;
pub mod visible;
mod wire;

pub use gate::Priority;
pub use gateway::{ModelError, ModelGateway, ModelRequest, ModelTurn};
