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
use serde_json::value::RawValue;
use serde_json::Value;

use super::breaker::{Breaker, Outcome};
use super::chunks::Reading;
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
        crate::tls::use_ring();
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
    // Long by design: the steps of one model call in order: a place at the endpoint (before the
    // breaker, whose trial must then go out), the breaker, the unstreamed form where the endpoint
    // needs it, open, read, and one retry unstreamed after an empty answer; once the breaker lets
    // the call go out, every exit goes through the `finish` closure, which holds the place and the
    // breaker and records the outcome, so those exits stay in this function.
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
        let stream = match opened {
            Err(_) => return finish(turn, Err(ModelError::Timeout(timeout.as_secs()))),
            Ok(Err(e)) => return finish(turn, Err(ModelError::Http(self.upstream(e)))),
            Ok(Ok(stream)) => stream,
        };
        let mut reading = Reading::new(&request.body);
        let read = self
            .read_chunks(
                stream,
                &mut reading,
                &mut turn,
                (started, deadline, timeout),
                &mut on_progress,
            )
            .await;
        if let Err(e) = read {
            return finish(turn, Err(e));
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
        let result = reading.outcome(&turn);
        finish(turn, result)
    }

    /// Reads the stream to its end into `turn`, reporting progress after each chunk; a stall,
    /// the deadline, a transport or in-stream error, or a chunk [`Reading`] refuses ends it.
    /// `(started, deadline, timeout)`: when the call began, when it must end, and its length.
    async fn read_chunks(
        &self,
        mut stream: std::pin::Pin<
            Box<dyn futures_util::Stream<Item = Result<Chunk, OpenAIError>> + Send>,
        >,
        reading: &mut Reading,
        turn: &mut ModelTurn,
        (started, deadline, timeout): (Instant, tokio::time::Instant, Duration),
        on_progress: &mut impl FnMut(&str, &str),
    ) -> Result<(), ModelError> {
        loop {
            let idle = tokio::time::Instant::now() + self.idle_timeout;
            let next = tokio::time::timeout_at(idle.min(deadline), stream.next()).await;
            let chunk = match next {
                Err(_) if tokio::time::Instant::now() >= deadline => {
                    return Err(ModelError::Timeout(timeout.as_secs()))
                }
                Err(_) => return Err(ModelError::Stalled(self.idle_timeout.as_secs())),
                Ok(None) => return Ok(()),
                Ok(Some(Err(OpenAIError::JSONDeserialize(e, _)))) => {
                    return Err(ModelError::Garbage(self.upstream(e)))
                }
                Ok(Some(Err(other))) => return Err(ModelError::Http(self.upstream(other))),
                Ok(Some(Ok(chunk))) => chunk,
            };
            turn.first_chunk_ms
                .get_or_insert_with(|| started.elapsed().as_millis() as u64);
            if let Some(error) = &chunk.error {
                let message = error["message"]
                    .as_str()
                    .map_or_else(|| error.to_string(), String::from);
                return Err(ModelError::InStream(self.upstream(message)));
            }
            reading.take(turn, chunk)?;
            if let Some(name) = &turn.tool_name {
                on_progress(name, &turn.arguments);
            }
        }
    }
}

#[cfg(test)]
#[path = "gateway_tests.rs"]
mod tests;
