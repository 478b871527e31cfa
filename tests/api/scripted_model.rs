//! A scripted OpenAI-compatible server on loopback: a real HTTP server answering
//! `POST /v1/chat/completions` — streamed (SSE chunks with tool-call argument deltas) or not —
//! from a per-test script, recording every request. The `llm` policy talks to it through
//! async-openai exactly as it would to a real endpoint.

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
    /// An error with this status whose message echoes the request's key, as some providers do.
    EchoKey(u16),
}

#[derive(Clone, Default)]
struct Shared {
    script: Arc<Mutex<VecDeque<Reply>>>,
    requests: Arc<Mutex<Vec<Value>>>,
    /// Answers when the script is empty (otherwise a 500).
    fallback: Arc<Mutex<Option<Reply>>>,
    /// Keep a copy of every request (tests); benchmarks turn it off.
    record: Arc<std::sync::atomic::AtomicBool>,
}

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
    #[allow(dead_code)] // the bench binary includes this file and uses it
    pub fn always(&self, reply: Reply) {
        *self.shared.fallback.lock().unwrap() = Some(reply);
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
}

fn chunk(delta: Value, finish: Option<&str>) -> Bytes {
    let body = json!({
        "id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 1, "model": "scripted",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
    });
    Bytes::from(format!("data: {body}\n\n"))
}

fn usage() -> Bytes {
    let body = json!({
        "id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 1, "model": "scripted",
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

/// An SSE response of `frames`; with `stall`, the connection then stays open and silent.
fn sse(frames: Vec<Bytes>, stall: bool) -> HttpResponse {
    let body = stream::iter(frames.into_iter().map(Ok::<_, actix_web::Error>));
    let mut response = HttpResponse::Ok();
    response.content_type("text/event-stream");
    if stall {
        response.streaming(body.chain(stream::pending()))
    } else {
        response.streaming(body)
    }
}

async fn answer(
    shared: web::Data<Shared>,
    req: actix_web::HttpRequest,
    body: web::Json<Value>,
) -> HttpResponse {
    if shared.record.load(std::sync::atomic::Ordering::Relaxed) {
        shared.requests.lock().unwrap().push(body.into_inner());
    }
    let reply = shared
        .script
        .lock()
        .unwrap()
        .pop_front()
        .or_else(|| shared.fallback.lock().unwrap().clone());
    let done = Bytes::from_static(b"data: [DONE]\n\n");
    match reply {
        None => HttpResponse::InternalServerError().json(json!({"error": {"message": "script exhausted", "type": "server_error"}})),
        Some(Reply::Tool(name, args)) => {
            let mut frames = vec![tool_start(0, name)];
            frames.extend(args_pieces(&args.to_string()));
            frames.extend([chunk(json!({}), Some("tool_calls")), usage(), done]);
            sse(frames, false)
        }
        Some(Reply::RawArgs(name, raw)) => {
            let mut frames = vec![tool_start(0, name)];
            frames.extend(args_pieces(raw));
            frames.extend([chunk(json!({}), Some("tool_calls")), usage(), done]);
            sse(frames, false)
        }
        Some(Reply::TwoTools) => {
            let mut frames = vec![tool_start(0, "ask_question")];
            frames.extend(args_pieces(r#"{"objective_id": "habits", "message": "Hi?", "rationale": "r"}"#));
            frames.push(tool_start(1, "conclude"));
            frames.extend([chunk(json!({}), Some("tool_calls")), done]);
            sse(frames, false)
        }
        Some(Reply::NoTool(text)) => sse(
            vec![chunk(json!({"role": "assistant", "content": text}), None), chunk(json!({}), Some("stop")), done],
            false,
        ),
        Some(Reply::Status(code)) => HttpResponse::build(actix_web::http::StatusCode::from_u16(code).unwrap())
            .json(json!({"error": {"message": "scripted failure", "type": "server_error", "param": null, "code": null}})),
        Some(Reply::RateLimited) => HttpResponse::TooManyRequests()
            .insert_header(("retry-after", "1"))
            .json(json!({"error": {"message": "Rate limit reached", "type": "requests", "param": null, "code": "rate_limit_exceeded"}})),
        Some(Reply::Stall) => sse(vec![tool_start(0, "ask_question")], true),
        Some(Reply::Drop(name, raw, cut)) => {
            let mut frames = vec![tool_start(0, name)];
            frames.extend(args_pieces(&raw[..cut.min(raw.len())]));
            sse(frames, false)
        }
        Some(Reply::Garbage) => sse(vec![Bytes::from_static(b"data: {this is not json\n\n"), done], false),
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
