//! A scripted OpenAI-compatible server on loopback: a real HTTP server answering
//! `POST /v1/chat/completions` — streamed (SSE chunks with tool-call argument deltas) or not —
//! from a per-test script, recording every request. The `llm` policy talks to it through
//! async-openai exactly as it would to a real endpoint.
//!
//! Its *realistic* side behaves like hosted models and the servers people run, not like our
//! own assumptions: arguments written in the order of the tool schema it was sent (as read from
//! the request's bytes) or in any order a test gives, cut into token-sized fragments of uneven
//! length, a configurable time to the first token and between tokens, reasoning text before
//! the call, whole arguments in one chunk, usage reported late or never, and endpoints that
//! refuse `tool_choice: "required"` or parameters they do not know.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use actix_web::web::{self, Bytes};
use actix_web::{App, HttpResponse, HttpServer};
use futures_util::stream::{self, StreamExt};
use serde_json::{json, Value};

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A tool call whose arguments stream in small pieces.
    Tool(&'static str, Value),
    /// A tool call with these raw argument bytes (e.g. broken JSON).
    RawArgs(&'static str, &'static str),
    /// Two tool calls in one answer.
    TwoTools,
    /// Plain text, no tool call.
    NoTool(&'static str),
    /// An HTTP error status.
    Status(u16),
    /// 429 with `Retry-After`, as a rate-limited provider answers.
    RateLimited,
    /// The first chunk, then silence.
    Stall,
    /// These raw arguments cut after this many bytes, then the connection closes.
    Drop(&'static str, &'static str, usize),
    /// A chunk that is not JSON.
    Garbage,
    /// 200, then the stream closes with nothing in it (llama-cpp-python refusing a
    /// `tool_choice` it does not serve).
    EmptyStream,
    /// 200, then an error object as a `data:` line, and the stream closes.
    ErrorInStream(&'static str),
    /// An error with this status whose message echoes the request's key, as some providers do.
    EchoKey(u16),
    /// A tool call whose arguments come in the order the request's schema lists them (keys the
    /// schema lacks last), in token-sized fragments, paced.
    Realistic(&'static str, Value),
    /// A tool call whose arguments come in exactly this order, in token-sized fragments.
    Ordered(&'static str, Vec<(&'static str, Value)>),
    /// A tool call whose whole arguments arrive in one chunk (llama.cpp, some vLLM versions).
    Whole(&'static str, Value),
    /// Reasoning text (`<think>…</think>` as content) before a schema-order tool call.
    Thinking(&'static str, &'static str, Value),
    /// Schema-order arguments cut after this many bytes, then silence (a stall mid-message).
    StallAfter(&'static str, Value, usize),
}

/// How the endpoint reports token usage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UsageReport {
    /// In a final chunk without choices (OpenAI with `stream_options.include_usage`).
    #[default]
    FinalChunk,
    /// In the last chunk that also carries the finish reason (some vLLM/Ollama versions).
    WithFinish,
    /// Never.
    Never,
}

/// What an endpoint refuses with 400, as servers that do not implement all of OpenAI's API do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Strictness {
    #[default]
    Lenient,
    /// `tool_choice: "required"` is unsupported.
    NoRequiredToolChoice,
    /// Any parameter beyond the basic ones (`parallel_tool_calls`, `stream_options`,
    /// `max_completion_tokens`) is an error.
    UnknownParameters,
    /// llama-cpp-python 0.3.36 with `chatml-function-calling`: a streamed request that does
    /// not name its tool gets 200 and an empty stream (and uses up no scripted reply); a named
    /// tool, or any unstreamed request, is answered.
    StreamsOnlyNamedTools,
}

/// The pace of a streamed answer.
#[derive(Clone, Copy, Debug, Default)]
pub struct Pace {
    pub first_token: std::time::Duration,
    pub between_tokens: std::time::Duration,
}

#[derive(Clone, Default)]
struct Shared {
    script: Arc<Mutex<VecDeque<Reply>>>,
    /// Answers to extraction requests (those offering `extract_fields` alone), which run
    /// alongside the next step; when empty, an extraction that records nothing.
    extractions: Arc<Mutex<VecDeque<Reply>>>,
    requests: Arc<Mutex<Vec<Value>>>,
    /// The same requests as their bytes (key order intact).
    raw_requests: Arc<Mutex<Vec<Bytes>>>,
    /// Answers when the script is empty (otherwise a 500).
    fallback: Arc<Mutex<Option<Reply>>>,
    /// Requests naming this model are answered like a hosted model: paced, with this reply
    /// (extractions with the empty one), and usage counted from the request's size.
    simulated: Arc<Mutex<Option<Simulated>>>,
    /// Requests naming this model are answered by this function of the request (a model that
    /// reads what it is sent: the evaluation's interviewer).
    computed: Arc<Mutex<Option<(String, Answerer)>>>,
    /// Keep a copy of every request (tests); benchmarks turn it off.
    record: Arc<std::sync::atomic::AtomicBool>,
    behaviour: Arc<Mutex<Behaviour>>,
    /// When each answered request arrived and when its response ended, in arrival order, with
    /// whether it was an extraction request.
    timeline: Timeline,
}

type Timeline = Arc<Mutex<Vec<Call>>>;

/// A model's answer as a function of the request it was sent.
type Answerer = fn(&Value) -> Reply;

/// One answered request's span.
#[derive(Clone, Copy, Debug)]
pub struct Call {
    pub extraction: bool,
    pub arrived: std::time::Instant,
    pub ended: Option<std::time::Instant>,
    /// When the fragment carrying the first character of `message` was sent (realistic
    /// replies): what the participant could see at the earliest.
    pub first_message: Option<std::time::Instant>,
}

/// Which timeline entry a response ends.
#[derive(Clone)]
struct End {
    timeline: Timeline,
    slot: usize,
    /// The frame that carries the message's first character, if known.
    mark: Option<usize>,
}

/// Marks the response's end when its body is dropped (sent, or the client went away).
struct EndGuard(End);

impl Drop for EndGuard {
    fn drop(&mut self) {
        if let Some(call) = self.0.timeline.lock().unwrap().get_mut(self.0.slot) {
            call.ended = Some(std::time::Instant::now());
        }
    }
}

#[derive(Clone, Debug)]
struct Simulated {
    model: String,
    pace: Pace,
    reply: Reply,
}

#[derive(Clone, Copy, Debug, Default)]
struct Behaviour {
    pace: Pace,
    usage: UsageReport,
    strictness: Strictness,
    /// Requests answered.
    calls: u64,
}

#[derive(Clone)]
pub struct ScriptedModel {
    /// Base URL to give `OPENAI_BASE_URL` (ends in `/v1`).
    pub url: String,
    shared: Shared,
}

impl ScriptedModel {
    pub async fn start() -> Self {
        let shared = Shared::default();
        shared
            .record
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let data = web::Data::new(shared.clone());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .route("/v1/chat/completions", web::post().to(answer))
        })
        .workers(1)
        .disable_signals()
        .listen(listener)
        .unwrap()
        .run();
        tokio::spawn(server);
        Self {
            url: format!("http://127.0.0.1:{port}/v1"),
            shared,
        }
    }

    /// Answers with `reply` whenever the script is empty, and stops recording requests (a
    /// model that always answers at once, for benchmarks).
    pub fn always(&self, reply: Reply) {
        *self.shared.fallback.lock().unwrap() = Some(reply);
        self.shared
            .record
            .store(false, std::sync::atomic::Ordering::Relaxed);
    }

    /// Time to the first token and between tokens, for every streamed answer from now on.
    pub fn pace(&self, first_token: std::time::Duration, between_tokens: std::time::Duration) {
        self.shared.behaviour.lock().unwrap().pace = Pace {
            first_token,
            between_tokens,
        };
    }

    pub fn usage(&self, report: UsageReport) {
        self.shared.behaviour.lock().unwrap().usage = report;
    }

    pub fn strictness(&self, strictness: Strictness) {
        self.shared.behaviour.lock().unwrap().strictness = strictness;
    }

    /// The answered requests' spans, in arrival order.
    pub fn timeline(&self) -> Vec<Call> {
        self.shared.timeline.lock().unwrap().clone()
    }

    /// How many requests were answered.
    pub fn calls(&self) -> u64 {
        self.shared.behaviour.lock().unwrap().calls
    }

    /// Queues the answer to the next extraction request.
    pub fn push_extraction(&self, reply: Reply) {
        self.shared.extractions.lock().unwrap().push_back(reply);
    }

    /// Requests for `model` are answered as a hosted model would: `reply` (extraction requests
    /// with an empty extraction) at `pace`, usage counted from the request (four characters a
    /// token). Other requests are answered as before.
    pub fn simulate(&self, model: &str, pace: Pace, reply: Reply) {
        *self.shared.simulated.lock().unwrap() = Some(Simulated {
            model: model.into(),
            pace,
            reply,
        });
    }

    /// Requests for `model` are answered by `answer(request)`, at once, usage counted as usual;
    /// requests are no longer recorded.
    pub fn compute(&self, model: &str, answer: Answerer) {
        *self.shared.computed.lock().unwrap() = Some((model.into(), answer));
        self.shared
            .record
            .store(false, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn push(&self, reply: Reply) {
        self.shared.script.lock().unwrap().push_back(reply);
    }

    pub fn requests(&self) -> Vec<Value> {
        self.shared.requests.lock().unwrap().clone()
    }

    pub fn raw_requests(&self) -> Vec<Bytes> {
        self.shared.raw_requests.lock().unwrap().clone()
    }
}

/// The model name every chunk carries (what a decision log should record).
pub const ANSWERING_MODEL: &str = "scripted-2026-12";

fn chunk(delta: Value, finish: Option<&str>) -> Bytes {
    let body = json!({
        "id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 1, "model": ANSWERING_MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
    });
    Bytes::from(format!("data: {body}\n\n"))
}

/// A usage chunk with these counts.
fn usage_of(prompt_tokens: usize, completion_tokens: usize) -> Bytes {
    let body = json!({
        "id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 1, "model": ANSWERING_MODEL,
        "choices": [], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                                 "total_tokens": prompt_tokens + completion_tokens}
    });
    Bytes::from(format!("data: {body}\n\n"))
}

/// The finishing chunk with usage in it (the `WithFinish` report).
fn finish_with_usage() -> Bytes {
    let body = json!({
        "id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 1, "model": ANSWERING_MODEL,
        "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}
    });
    Bytes::from(format!("data: {body}\n\n"))
}

/// The end of a tool-call answer, usage as the endpoint reports it.
fn ending(report: UsageReport) -> Vec<Bytes> {
    let done = Bytes::from_static(b"data: [DONE]\n\n");
    match report {
        UsageReport::FinalChunk => vec![chunk(json!({}), Some("tool_calls")), usage(), done],
        UsageReport::WithFinish => vec![finish_with_usage(), done],
        UsageReport::Never => vec![chunk(json!({}), Some("tool_calls")), done],
    }
}

/// A JSON value read with its objects' keys in document order (serde_json's map sorts them).
enum Ordered {
    Object(Vec<(String, Ordered)>),
    Array(Vec<Ordered>),
    Str(String),
    Other,
}

impl<'de> serde::Deserialize<'de> for Ordered {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("JSON")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Ordered, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, Ordered>()? {
                    out.push((k, v));
                }
                Ok(Ordered::Object(out))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<Ordered, A::Error> {
                let mut out = Vec::new();
                while let Some(v) = a.next_element::<Ordered>()? {
                    out.push(v);
                }
                Ok(Ordered::Array(out))
            }
            fn visit_str<E>(self, v: &str) -> Result<Ordered, E> {
                Ok(Ordered::Str(v.into()))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Ordered, E> {
                Ok(Ordered::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Ordered, E> {
                Ok(Ordered::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Ordered, E> {
                Ok(Ordered::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Ordered, E> {
                Ok(Ordered::Other)
            }
            fn visit_unit<E>(self) -> Result<Ordered, E> {
                Ok(Ordered::Other)
            }
        }
        d.deserialize_any(V)
    }
}

impl Ordered {
    fn get(&self, key: &str) -> Option<&Ordered> {
        match self {
            Ordered::Object(pairs) => pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// The property order of `tool`'s schema in the request, as its bytes list them.
pub fn schema_order(raw: &[u8], tool: &str) -> Vec<String> {
    let Ok(request) = serde_json::from_slice::<Ordered>(raw) else {
        return Vec::new();
    };
    let Some(Ordered::Array(tools)) = request.get("tools") else {
        return Vec::new();
    };
    tools
        .iter()
        .filter_map(|t| t.get("function"))
        .find(|f| matches!(f.get("name"), Some(Ordered::Str(n)) if n == tool))
        .and_then(|f| f.get("parameters")?.get("properties"))
        .map(|p| match p {
            Ordered::Object(pairs) => pairs.iter().map(|(k, _)| k.clone()).collect(),
            _ => Vec::new(),
        })
        .unwrap_or_default()
}

/// `args` as JSON text with its keys in `order` (the rest after, as they come).
fn in_order(args: &Value, order: &[String]) -> String {
    let Some(map) = args.as_object() else {
        return args.to_string();
    };
    let mut keys: Vec<&String> = order.iter().filter(|k| map.contains_key(*k)).collect();
    keys.extend(map.keys().filter(|k| !order.contains(k)));
    let body: Vec<String> = keys
        .iter()
        .map(|k| format!("{}: {}", Value::String((*k).clone()), map[*k]))
        .collect();
    format!("{{{}}}", body.join(", "))
}

/// Token-sized pieces of uneven length (1 to 6 characters), the same for the same text.
fn token_pieces(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut state: u32 = 0x9e37_79b9 ^ chars.len() as u32;
    while i < chars.len() {
        state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let len = 1 + (state >> 16) as usize % 6;
        let end = (i + len).min(chars.len());
        out.push(chars[i..end].iter().collect());
        i = end;
    }
    out
}

/// The frame (after the tool's first frame) whose piece holds the message's first character.
fn message_frame(text: &str, pieces: &[String]) -> Option<usize> {
    let start = text.find("\"message\": \"")? + "\"message\": \"".len();
    let mut at = 0;
    for (i, p) in pieces.iter().enumerate() {
        at += p.len();
        if at > start {
            return Some(i + 1);
        }
    }
    None
}

fn arg_chunks(pieces: Vec<String>) -> Vec<Bytes> {
    pieces
        .into_iter()
        .map(|p| {
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}),
                None,
            )
        })
        .collect()
}

fn usage() -> Bytes {
    let body = json!({
        "id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 1, "model": ANSWERING_MODEL,
        "choices": [], "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}
    });
    Bytes::from(format!("data: {body}\n\n"))
}

fn tool_start(index: u32, name: &str) -> Bytes {
    chunk(
        json!({"role": "assistant", "tool_calls": [{"index": index, "id": format!("call_{index}"), "type": "function",
               "function": {"name": name, "arguments": ""}}]}),
        None,
    )
}

fn args_pieces(args: &str) -> Vec<Bytes> {
    let chars: Vec<char> = args.chars().collect();
    chars
        .chunks(7)
        .map(|piece| chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": piece.iter().collect::<String>()}}]}), None))
        .collect()
}

/// An SSE response of `frames`, paced; with `stall`, the connection then stays open and silent.
fn sse(frames: Vec<Bytes>, stall: bool, pace: Pace, end: End) -> HttpResponse {
    let (timeline, slot, mark) = (end.timeline.clone(), end.slot, end.mark);
    let guard = Arc::new(EndGuard(end));
    let body = stream::iter(frames.into_iter().enumerate()).then(move |(i, frame)| {
        let _held = guard.clone();
        let timeline = timeline.clone();
        async move {
            let wait = if i == 0 {
                pace.first_token
            } else {
                pace.between_tokens
            };
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            if mark == Some(i) {
                if let Some(call) = timeline.lock().unwrap().get_mut(slot) {
                    call.first_message = Some(std::time::Instant::now());
                }
            }
            drop(_held);
            Ok::<_, actix_web::Error>(frame)
        }
    });
    let mut response = HttpResponse::Ok();
    response.content_type("text/event-stream");
    if stall {
        response.streaming(body.chain(stream::pending()))
    } else {
        response.streaming(body)
    }
}

/// The 400 a strict endpoint answers, if this request asks for what it does not support.
fn refused(strictness: Strictness, request: &Value) -> Option<HttpResponse> {
    let (param, message) = match strictness {
        Strictness::Lenient => return None,
        Strictness::NoRequiredToolChoice if request["tool_choice"] == "required" => {
            ("tool_choice", "\"required\" tool_choice is not supported")
        }
        Strictness::UnknownParameters => {
            let unknown = [
                "parallel_tool_calls",
                "stream_options",
                "max_completion_tokens",
            ]
            .into_iter()
            .find(|p| request.get(*p).is_some())?;
            (unknown, "Unrecognized request argument supplied")
        }
        Strictness::NoRequiredToolChoice | Strictness::StreamsOnlyNamedTools => return None,
    };
    Some(HttpResponse::BadRequest().json(json!({"error": {"message": format!("{message}: {param}"), "type": "invalid_request_error", "param": param, "code": null}})))
}

// Long by design: one request handled in order: parse, refuse as a strict server would, pick the
// reply (computed, simulated, queued extraction or script), record the call, then one arm per kind
// of reply in an exhaustive match, so a new kind is listed here by the compiler; the arms share the
// pace, end marker and tool_call closure set up above.
async fn answer(
    shared: web::Data<Shared>,
    req: actix_web::HttpRequest,
    raw: Bytes,
) -> HttpResponse {
    let Ok(body) = serde_json::from_slice::<Value>(&raw) else {
        return HttpResponse::BadRequest().json(
            json!({"error": {"message": "the body is not JSON", "type": "invalid_request_error"}}),
        );
    };
    let behaviour = {
        let mut b = shared.behaviour.lock().unwrap();
        b.calls += 1;
        *b
    };
    if let Some(refusal) = refused(behaviour.strictness, &body) {
        return refusal;
    }
    if behaviour.strictness == Strictness::StreamsOnlyNamedTools
        && body["stream"] != false
        && !body["tool_choice"].is_object()
    {
        return HttpResponse::Ok()
            .content_type("text/event-stream")
            .body("");
    }
    let simulated = shared
        .simulated
        .lock()
        .unwrap()
        .clone()
        .filter(|s| body["model"] == s.model.as_str());
    let extraction = body["tool_choice"]["function"]["name"] == "extract_fields"
        || body["tools"]
            .as_array()
            .is_some_and(|t| t.len() == 1 && t[0]["function"]["name"] == "extract_fields");
    let computed = shared
        .computed
        .lock()
        .unwrap()
        .clone()
        .filter(|(model, _)| body["model"] == model.as_str());
    let reply = if let Some((_, answer)) = computed {
        Some(answer(&body))
    } else if let Some(s) = &simulated {
        Some(if extraction {
            Reply::Realistic(
                "extract_fields",
                json!({"fields": [], "rationale": "Nothing new to record."}),
            )
        } else {
            // Like a model that keeps to the tools it is offered: a summary when its usual
            // answer is not among them.
            let offered = |tool: &str| {
                body["tools"]
                    .as_array()
                    .is_some_and(|t| t.iter().any(|t| t["function"]["name"] == tool))
            };
            match &s.reply {
                Reply::Realistic(name, _) if !offered(name) && offered("summarize_and_confirm") => {
                    Reply::Realistic(
                        "summarize_and_confirm",
                        json!({"summary": "You plan on Sunday evenings with a shared list on your phone.",
                           "message": "Here is what I heard. Did I get that right?", "rationale": "questioning must stop"}),
                    )
                }
                Reply::Realistic(name, _) if !offered(name) => Reply::Realistic(
                    "conclude",
                    json!({"reason": "max_turns_reached", "message": "Thank you so much for your time!",
                           "rationale": "the summary was answered"}),
                ),
                // A hosted model does not say the same words every turn: `{call}` in its
                // message is the number of requests the endpoint has had.
                Reply::Realistic(name, args) => {
                    let mut args = args.clone();
                    if let Some(Value::String(message)) = args.get_mut("message") {
                        *message = message.replace("{call}", &behaviour.calls.to_string());
                    }
                    Reply::Realistic(name, args)
                }
                other => other.clone(),
            }
        })
    } else if extraction {
        let queued = shared.extractions.lock().unwrap().pop_front();
        Some(queued.unwrap_or_else(|| {
            Reply::Tool(
                "extract_fields",
                json!({"fields": [], "rationale": "Nothing new to record."}),
            )
        }))
    } else {
        shared
            .script
            .lock()
            .unwrap()
            .pop_front()
            .or_else(|| shared.fallback.lock().unwrap().clone())
    };
    let end = {
        let mut timeline = shared.timeline.lock().unwrap();
        timeline.push(Call {
            extraction,
            arrived: std::time::Instant::now(),
            ended: None,
            first_message: None,
        });
        End {
            timeline: shared.timeline.clone(),
            slot: timeline.len() - 1,
            mark: None,
        }
    };
    if shared.record.load(std::sync::atomic::Ordering::Relaxed) {
        shared.requests.lock().unwrap().push(body.clone());
        shared.raw_requests.lock().unwrap().push(raw.clone());
    }
    let pace = simulated.as_ref().map_or(behaviour.pace, |s| s.pace);
    let prompt_tokens = body["messages"].as_array().map_or(0, |m| {
        m.iter()
            .map(|m| m["content"].as_str().map_or(0, str::len))
            .sum::<usize>()
    }) / 4;
    let counted = simulated.is_some();
    let tool_call = |name: &str, pieces: Vec<String>| {
        let mut frames = vec![tool_start(0, name)];
        let completion_tokens = pieces.iter().map(String::len).sum::<usize>() / 4;
        frames.extend(arg_chunks(pieces));
        if counted {
            frames.extend([
                chunk(json!({}), Some("tool_calls")),
                usage_of(prompt_tokens, completion_tokens),
                Bytes::from_static(b"data: [DONE]\n\n"),
            ]);
        } else {
            frames.extend(ending(behaviour.usage));
        }
        frames
    };
    let done = Bytes::from_static(b"data: [DONE]\n\n");
    // An unstreamed request gets the whole completion at once.
    if body["stream"] == false {
        let call = match &reply {
            Some(Reply::Tool(name, args))
            | Some(Reply::Realistic(name, args))
            | Some(Reply::Whole(name, args)) => Some((*name, args.to_string())),
            Some(Reply::EmptyStream) => None,
            _ => return HttpResponse::InternalServerError().json(json!({"error": {"message": "no unstreamed form of this reply", "type": "server_error"}})),
        };
        drop(EndGuard(end));
        let choices = call.map_or_else(Vec::new, |(name, args)| {
            vec![json!({"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
                "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": name, "arguments": args}}]}})]
        });
        return HttpResponse::Ok().json(json!({"id": "c", "object": "chat.completion", "model": "scripted-2026-12", "choices": choices}));
    }
    match reply {
        None => HttpResponse::InternalServerError().json(json!({"error": {"message": "script exhausted", "type": "server_error"}})),
        Some(Reply::Tool(name, args)) => {
            let mut frames = vec![tool_start(0, name)];
            frames.extend(args_pieces(&args.to_string()));
            frames.extend([chunk(json!({}), Some("tool_calls")), usage(), done]);
            sse(frames, false, pace, end.clone())
        }
        Some(Reply::RawArgs(name, raw)) => {
            let mut frames = vec![tool_start(0, name)];
            frames.extend(args_pieces(raw));
            frames.extend([chunk(json!({}), Some("tool_calls")), usage(), done]);
            sse(frames, false, pace, end.clone())
        }
        Some(Reply::TwoTools) => {
            let mut frames = vec![tool_start(0, "ask_question")];
            frames.extend(args_pieces(r#"{"objective_id": "habits", "message": "Hi?", "rationale": "r"}"#));
            frames.push(tool_start(1, "conclude"));
            frames.extend([chunk(json!({}), Some("tool_calls")), done]);
            sse(frames, false, pace, end.clone())
        }
        Some(Reply::NoTool(text)) => sse(
            vec![chunk(json!({"role": "assistant", "content": text}), None), chunk(json!({}), Some("stop")), done],
            false,
            pace,
            end.clone(),
        ),
        Some(Reply::Status(code)) => HttpResponse::build(actix_web::http::StatusCode::from_u16(code).unwrap())
            .json(json!({"error": {"message": "scripted failure", "type": "server_error", "param": null, "code": null}})),
        Some(Reply::RateLimited) => HttpResponse::TooManyRequests()
            .insert_header(("retry-after", "1"))
            .json(json!({"error": {"message": "Rate limit reached", "type": "requests", "param": null, "code": "rate_limit_exceeded"}})),
        Some(Reply::Stall) => sse(vec![tool_start(0, "ask_question")], true, pace, end.clone()),
        Some(Reply::Drop(name, raw, cut)) => {
            let mut frames = vec![tool_start(0, name)];
            frames.extend(args_pieces(&raw[..cut.min(raw.len())]));
            sse(frames, false, pace, end.clone())
        }
        Some(Reply::Garbage) => sse(vec![Bytes::from_static(b"data: {this is not json\n\n"), done], false, pace, end.clone()),
        Some(Reply::EmptyStream) => sse(Vec::new(), false, pace, end.clone()),
        Some(Reply::ErrorInStream(message)) => {
            let line = format!("data: {}\n\n", json!({"error": {"message": message, "type": "server_error"}}));
            sse(vec![Bytes::from(line)], false, pace, end.clone())
        }
        Some(Reply::Realistic(name, args)) => {
            let text = in_order(&args, &schema_order(&raw, name));
            let pieces = token_pieces(&text);
            let mark = message_frame(&text, &pieces);
            sse(tool_call(name, pieces), false, pace, End { mark, ..end.clone() })
        }
        Some(Reply::Ordered(name, pairs)) => {
            let order: Vec<String> = pairs.iter().map(|(k, _)| k.to_string()).collect();
            let args: serde_json::Map<String, Value> =
                pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            let text = in_order(&Value::Object(args), &order);
            sse(tool_call(name, token_pieces(&text)), false, pace, end.clone())
        }
        Some(Reply::Whole(name, args)) => sse(tool_call(name, vec![args.to_string()]), false, pace, end.clone()),
        Some(Reply::Thinking(thought, name, args)) => {
            let mut frames: Vec<Bytes> = token_pieces(&format!("<think>{thought}</think>"))
                .into_iter()
                .map(|p| chunk(json!({"role": "assistant", "content": p}), None))
                .collect();
            let text = in_order(&args, &schema_order(&raw, name));
            frames.extend(tool_call(name, token_pieces(&text)));
            sse(frames, false, pace, end.clone())
        }
        Some(Reply::StallAfter(name, args, cut)) => {
            let text = in_order(&args, &schema_order(&raw, name));
            let mut cut = cut.min(text.len());
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            let mut frames = vec![tool_start(0, name)];
            frames.extend(arg_chunks(token_pieces(&text[..cut])));
            sse(frames, true, pace, end.clone())
        }
        Some(Reply::EchoKey(code)) => {
            let auth = req
                .headers()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            let key = auth.trim_start_matches("Bearer ");
            let message = format!("Incorrect API key provided: {key}. You sent Authorization: {auth}");
            HttpResponse::build(actix_web::http::StatusCode::from_u16(code).unwrap())
                .json(json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}))
        }
    }
}
