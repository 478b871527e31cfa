//! A minimal Server-Sent Events reader for tests.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub event: String,
    pub id: Option<u64>,
    pub data: Value,
}

pub struct SseClient {
    stream: std::pin::Pin<
        Box<dyn futures_util::Stream<Item = reqwest::Result<actix_web::web::Bytes>> + Send>,
    >,
    buffer: String,
}

impl SseClient {
    pub fn new(response: reqwest::Response) -> Self {
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Self {
            stream: Box::pin(response.bytes_stream()),
            buffer: String::new(),
        }
    }

    /// The next event (comments and `retry:` skipped), or None if none comes within `wait`.
    pub async fn next(&mut self, wait: Duration) -> Option<Frame> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                if let Some(frame) = parse(&block) {
                    return Some(frame);
                }
            }
            let chunk = tokio::time::timeout_at(deadline, self.stream.next())
                .await
                .ok()??
                .ok()?;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// Every event until none comes for `quiet`.
    pub async fn drain(&mut self, quiet: Duration) -> Vec<Frame> {
        let mut frames = Vec::new();
        while let Some(frame) = self.next(quiet).await {
            frames.push(frame);
        }
        frames
    }

    /// Events until `pred` holds for one (inclusive), failing after `wait` overall.
    pub async fn until(&mut self, wait: Duration, pred: impl Fn(&Frame) -> bool) -> Vec<Frame> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut frames = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let frame = self
                .next(left)
                .await
                .unwrap_or_else(|| panic!("no matching event; got {frames:#?}"));
            let done = pred(&frame);
            frames.push(frame);
            if done {
                return frames;
            }
        }
    }
}

fn parse(block: &str) -> Option<Frame> {
    let mut event = None;
    let mut id = None;
    let mut data = String::new();
    for line in block.lines() {
        if let Some(v) = line.strip_prefix("event: ") {
            event = Some(v.to_string());
        } else if let Some(v) = line.strip_prefix("id: ") {
            id = Some(v.parse().expect("numeric ids"));
        } else if let Some(v) = line.strip_prefix("data: ") {
            data.push_str(v);
        }
    }
    let event = event?;
    let data: Value = serde_json::from_str(&data).expect("data is JSON");
    assert_eq!(data["type"], event.as_str(), "data carries its type");
    Some(Frame { event, id, data })
}
