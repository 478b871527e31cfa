//! Streaming one decision from an OpenAI-compatible endpoint through async-openai.
//!
//! The whole call has a deadline (the study's `timeout_seconds`) and the stream an idle timeout
//! — a stalled stream is not an error to the client library, so we make it one. Tool-call
//! arguments are accumulated as they arrive and reported to the caller after every chunk, so it
//! can show the `message` argument while it streams.

use std::time::{Duration, Instant};

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::Client;
use futures_util::StreamExt;
use interview_session::decision::TokenUsage;
use serde_json::value::RawValue;
use serde_json::Value;

use super::breaker::{Breaker, Outcome};
use super::gate::{Gate, Priority};
use super::wire::{compatible, names_its_tool, Chunk, Wire};

pub use super::turn::{ModelError, ModelTurn};

/// A request: the chat-completions body, and its tool schemas as JSON text. The schemas travel
/// as written, so their properties reach the model in the contract's order (a `serde_json`
/// map would sort them).
pub struct ModelRequest {
    pub body: Value,
    pub tools: std::borrow::Cow<'static, str>,
    /// Whether a participant waits for the answer (it then goes first at a busy endpoint).
    pub priority: Priority,
}

impl ModelRequest {
    /// The characters the request sends — messages, tools, everything — for the token estimate
    /// when a server reports no usage (about four characters a token; `docs/llm-contract.md`).
    pub fn sent_chars(&self) -> usize {
        self.body.to_string().len() + self.tools.len()
    }
}

pub struct ModelGateway {
    client: Client<OpenAIConfig>,
    idle_timeout: Duration,
    /// Kept only to be cut out of error messages (a provider may echo it back).
    api_key: Option<String>,
    /// Set once the endpoint refused a request with the full parameter set (HTTP 400/422):
    /// from then on requests go in the compatible form (see [`compatible`]).
    compat: AtomicBool,
    /// Set once the endpoint answered a streamed "any tool" step with an empty stream: steps go
    /// unstreamed from then on (`super::unstreamed`).
    unstreamed: AtomicBool,
    /// Stops calls that keep failing (`super::breaker`), one breaker per model and request
    /// form: a server may serve a named tool and fail every "any tool" request
    /// (llama-cpp-python), and one study's misnamed model must not stop the others'.
    breakers: std::sync::Mutex<HashMap<(String, bool), Arc<Breaker>>>,
    /// How many requests go at once, participant-facing ones first (`super::gate`).
    gate: Gate,
}

/// A request that could not be sent is sent once more at once: a server that closes its
/// connection after an error (llama-cpp-python after a refused `tool_choice`) leaves a pooled
/// connection that the next request finds dead ("error sending request"). Nothing reached the
/// server, so nothing is asked twice.
async fn once_more<T, F, Fut>(send: F) -> Result<T, OpenAIError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, OpenAIError>>,
{
    match send().await {
        Err(OpenAIError::Reqwest(e)) if e.is_request() || e.is_connect() => {
            tracing::debug!(error = %e, "the model request could not be sent; sending it once more");
            send().await
        }
        other => other,
    }
}

/// A server's own error message, with what looks like a credential cut out.
fn redact_in_stream(error: ModelError, gateway: &ModelGateway) -> ModelError {
    match error {
        ModelError::InStream(message) => ModelError::InStream(gateway.upstream(message)),
        other => other,
    }
}

impl ModelGateway {
    /// `max_concurrent`: at most that many requests at once (`Some(0)`: no limit); `None` for
    /// no limit until the endpoint shows it serves one request at a time.
    pub fn new(
        base_url: &str,
        api_key: Option<&str>,
        idle_timeout: Duration,
        max_concurrent: Option<usize>,
    ) -> Self {
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
            compat: AtomicBool::new(false),
            unstreamed: AtomicBool::new(false),
            breakers: Default::default(),
            gate: match max_concurrent {
                None => Gate::default(),
                Some(limit) => Gate::new(limit),
            },
        }
    }

    /// An upstream error as it may be logged and stored: short, with the key and anything
    /// token-shaped cut out.
    fn upstream(&self, error: impl std::fmt::Display) -> String {
        crate::llm::redact::redact(&error.to_string(), self.api_key.as_deref())
    }

    /// The breaker of a model's steps (any tool) or of its named-tool calls (extractions,
    /// screening).
    fn breaker(&self, model: &str, named: bool) -> Arc<Breaker> {
        let mut breakers = self
            .breakers
            .lock()
            .expect("the breakers are never poisoned");
        breakers
            .entry((model.to_string(), named))
            .or_insert_with(|| {
                Arc::new(Breaker::new(if named {
                    "named_tool_calls"
                } else {
                    "steps"
                }))
            })
            .clone()
    }

    /// Where the endpoint stands, for `/readyz`: the request form it takes, and per model the
    /// breaker of steps and of named-tool calls (closed until a call says otherwise).
    pub fn status(&self) -> Value {
        let now = Instant::now();
        let mut models = serde_json::Map::new();
        for ((model, named), breaker) in self.breakers.lock().expect("never poisoned").iter() {
            let entry = models
                .entry(model.clone())
                .or_insert_with(|| serde_json::json!({}));
            let key = if *named { "named_tool_calls" } else { "steps" };
            entry[key] = breaker.status(now);
        }
        serde_json::json!({
            "form": if self.unstreamed.load(Ordering::Relaxed) {
                "unstreamed"
            } else if self.compatible_mode() {
                "compatible"
            } else {
                "standard"
            },
            "models": models,
            "max_concurrent_requests": match self.gate.limit() {
                0 => Value::Null,
                limit => limit.into(),
            },
        })
    }

    /// Whether the endpoint takes one request at a time (set, or learned).
    pub fn one_at_a_time(&self) -> bool {
        self.gate.limit() == 1
    }

    /// Whether requests now go in the compatible form.
    pub fn compatible_mode(&self) -> bool {
        self.compat.load(Ordering::Relaxed)
    }

    /// One step as a plain, unstreamed request (`super::unstreamed`).
    async fn complete(
        &self,
        request: &ModelRequest,
        deadline: tokio::time::Instant,
        timeout: Duration,
    ) -> Result<ModelTurn, (ModelError, ModelTurn)> {
        let tools: &RawValue =
            serde_json::from_str(&request.tools).expect("the tool schemas are valid JSON");
        let body = super::unstreamed::body(&request.body, self.compatible_mode());
        let wire = Wire { body: &body, tools };
        let chat = self.client.chat();
        let call = once_more(|| chat.create_byot::<_, super::unstreamed::Completion>(wire));
        match tokio::time::timeout_at(deadline, call).await {
            Err(_) => Err((ModelError::Timeout(timeout.as_secs()), ModelTurn::default())),
            Ok(Err(e)) => Err((ModelError::Http(self.upstream(e)), ModelTurn::default())),
            Ok(Ok(completion)) => super::unstreamed::into_turn(completion)
                .map_err(|(e, turn)| (redact_in_stream(e, self), turn)),
        }
    }

    /// Opens the stream; an endpoint that refuses the request's parameters (400/422) is asked
    /// once more in the compatible form, which is then used for every later request.
    async fn open(
        &self,
        request: &ModelRequest,
    ) -> Result<
        std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<Chunk, OpenAIError>> + Send>>,
        OpenAIError,
    > {
        let tools: &RawValue =
            serde_json::from_str(&request.tools).expect("the tool schemas are valid JSON");
        let chat = self.client.chat();
        if !self.compatible_mode() {
            let wire = Wire {
                body: &request.body,
                tools,
            };
            match once_more(|| chat.create_stream_byot(wire)).await {
                Err(OpenAIError::ApiError(e)) if matches!(e.status_code.as_u16(), 400 | 422) => {
                    tracing::warn!(
                        status = e.status_code.as_u16(),
                        "the model endpoint refused the full request; using tool_choice \"auto\" with an instruction from now on"
                    );
                    self.compat.store(true, Ordering::Relaxed);
                }
                other => return other,
            }
        }
        let body = compatible(&request.body);
        let wire = Wire { body: &body, tools };
        once_more(|| chat.create_stream_byot(wire)).await
    }

    /// Streams one decision. `on_progress(tool name, arguments so far)` runs after each chunk.
    /// A failure carries what arrived before it (the caller shows or records it); the turn is
    /// returned by value once per model call, so its size does not matter.
    #[allow(clippy::result_large_err)]
    #[tracing::instrument(name = "model_call", skip_all, fields(model = %request.body["model"]))]
    pub async fn stream(
        &self,
        request: ModelRequest,
        timeout: Duration,
        mut on_progress: impl FnMut(&str, &str),
    ) -> Result<ModelTurn, (ModelError, ModelTurn)> {
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + timeout;
        let mut turn = ModelTurn::default();
        let model = request.body["model"].as_str().unwrap_or_default();
        let breaker = self.breaker(model, names_its_tool(&request.body));
        // The wait for a place at a busy endpoint counts against the call's time. It comes
        // before the breaker: a trial the breaker hands out must then go out (a trial taken
        // and never recorded would keep the breaker open for good).
        let Ok(permit) = tokio::time::timeout_at(deadline, self.gate.enter(request.priority)).await
        else {
            turn.usage_reported = true;
            return Err((ModelError::Timeout(timeout.as_secs()), turn));
        };
        if let Err(retry_in) = breaker.allows(Instant::now()) {
            // No call went out: nothing to charge (usage "reported" as zero).
            turn.usage_reported = true;
            return Err((ModelError::CircuitOpen(retry_in), turn));
        }
        let gate = &self.gate;
        let finish = |mut turn: ModelTurn, result: Result<(), ModelError>| {
            // A stream cut short while another request was in flight: the server serves one
            // at a time (and interrupted this one for the other).
            if matches!(result, Err(ModelError::Empty | ModelError::Dropped))
                && (permit.shared || gate.others_in_flight())
            {
                gate.cut_short_beside_another();
            }
            drop(permit);
            turn.latency_ms = started.elapsed().as_millis() as u64;
            // U+0000 cannot be stored by PostgreSQL; a model that sends it gets U+FFFD instead.
            if turn.arguments.contains("\\u0000") {
                turn.arguments = turn.arguments.replace("\\u0000", "\\ufffd");
            }
            let outcome = match &result {
                Err(e) if e.at_the_endpoint() => Outcome::EndpointFailed,
                _ => Outcome::Answered,
            };
            breaker.record(outcome, Instant::now());
            match result {
                Ok(()) => Ok(turn),
                Err(e) => Err((e, turn)),
            }
        };
        let any_tool = !names_its_tool(&request.body);
        if any_tool && self.unstreamed.load(Ordering::Relaxed) {
            let result = self.complete(&request, deadline, timeout).await;
            let (turn, result) = match result {
                Ok(turn) => (turn, Ok(())),
                Err((e, turn)) => (turn, Err(e)),
            };
            return finish(turn, result);
        }
        let opened = tokio::time::timeout_at(deadline, self.open(&request)).await;
        let mut stream = match opened {
            Err(_) => return finish(turn, Err(ModelError::Timeout(timeout.as_secs()))),
            Ok(Err(e)) => return finish(turn, Err(ModelError::Http(self.upstream(e)))),
            Ok(Ok(stream)) => stream,
        };
        let mut finished = false;
        let mut call_id: Option<String> = None;
        // What the request allows the model to write, in characters (a server may ignore the
        // limit and write until the timeout: 3,000 characters of `".152.089…` were seen). A
        // token is about four characters; twice that leaves room for escapes.
        let max_tokens = ["max_completion_tokens", "max_tokens"]
            .iter()
            .find_map(|k| request.body[*k].as_u64());
        let mut written = 0usize;
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
                        OpenAIError::JSONDeserialize(e, _) => ModelError::Garbage(self.upstream(e)),
                        other => ModelError::Http(self.upstream(other)),
                    };
                    return finish(turn, Err(error));
                }
                Ok(Some(Ok(chunk))) => chunk,
            };
            turn.first_chunk_ms
                .get_or_insert_with(|| started.elapsed().as_millis() as u64);
            if let Some(error) = &chunk.error {
                let message = error["message"]
                    .as_str()
                    .map_or_else(|| error.to_string(), String::from);
                return finish(turn, Err(ModelError::InStream(self.upstream(message))));
            }
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
                    finished = true;
                }
                written += choice
                    .delta
                    .content
                    .as_ref()
                    .and_then(Value::as_str)
                    .map_or(0, str::len);
                written += choice
                    .delta
                    .tool_calls
                    .iter()
                    .flatten()
                    .filter_map(|c| c.function.as_ref()?.arguments.as_deref())
                    .map(str::len)
                    .sum::<usize>();
                for call in choice.delta.tool_calls.iter().flatten() {
                    // A second call shows as index 1, or (servers that send no index) as a new id.
                    let another_id = matches!((&call_id, &call.id), (Some(a), Some(b)) if a != b);
                    if call.index.unwrap_or(0) > 0 || another_id {
                        return finish(turn, Err(ModelError::SeveralTools));
                    }
                    if call_id.is_none() {
                        call_id.clone_from(&call.id);
                    }
                    if let Some(function) = &call.function {
                        if let Some(name) = function.name.as_deref().filter(|n| !n.is_empty()) {
                            if turn.tool_name.as_deref().is_some_and(|n| n != name) {
                                return finish(turn, Err(ModelError::SeveralTools));
                            }
                            turn.tool_name = Some(name.to_string());
                        }
                        if let Some(args) = &function.arguments {
                            turn.arguments.push_str(args);
                        }
                    }
                }
            }
            if let Some(max) = max_tokens.filter(|max| written as u64 > max * 8) {
                return finish(turn, Err(ModelError::TooLong(max)));
            }
            if let Some(name) = &turn.tool_name {
                on_progress(name, &turn.arguments);
            }
        }
        // An empty answer to a streamed "any tool" step: the endpoint may serve that form only
        // unstreamed. This step is asked again that way; if that works, steps go unstreamed
        // from now on (said once).
        if any_tool && turn.first_chunk_ms.is_none() {
            let result = self.complete(&request, deadline, timeout).await;
            if result.is_ok() && !self.unstreamed.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    "the model endpoint sent nothing for a streamed request that lets the model choose its tool, and answered it unstreamed; steps go unstreamed from now on"
                );
                metrics::counter!("interview_model_form_changes_total", "form" => "unstreamed")
                    .increment(1);
            }
            let (turn, result) = match result {
                Ok(turn) => (turn, Ok(())),
                Err((e, turn)) => (turn, Err(e)),
            };
            return finish(turn, result);
        }
        let result = match (&turn.tool_name, finished) {
            (None, _) if turn.first_chunk_ms.is_none() => Err(ModelError::Empty),
            (None, _) => Err(ModelError::NoTool),
            (Some(_), false) => Err(ModelError::Dropped),
            (Some(_), true) => Ok(()),
        };
        finish(turn, result)
    }
}

#[cfg(test)]
#[path = "gateway_tests.rs"]
mod tests;
