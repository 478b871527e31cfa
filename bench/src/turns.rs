//! Interview turns over HTTP with a live stream open: the participant's `POST …/messages`
//! latency, and the time from that POST returning to the first `message.delta` of the answer
//! on the session's stream. Widgets the interviewer shows are answered (not timed); a session
//! that ends is replaced by a fresh one.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::sync::mpsc;

/// One frame of the session's stream, stamped when it arrived.
struct Frame {
    event: String,
    data: Value,
    at: Instant,
}

/// A consented session, its token and its stream.
pub struct Live {
    pub id: String,
    pub token: String,
    frames: mpsc::UnboundedReceiver<Frame>,
    /// The widget shown last (answered when the session waits for it).
    pending: Option<Value>,
    /// How long each widget submit took (its 200).
    submits: Vec<Duration>,
}

fn parse(block: &str) -> Option<(String, Value)> {
    let mut event = None;
    let mut data = String::new();
    for line in block.lines() {
        if let Some(v) = line.strip_prefix("event: ") {
            event = Some(v.to_string());
        } else if let Some(v) = line.strip_prefix("data: ") {
            data.push_str(v);
        }
    }
    Some((event?, serde_json::from_str(&data).ok()?))
}

async fn open_stream(
    http: &reqwest::Client,
    base: &str,
    id: &str,
    token: &str,
) -> mpsc::UnboundedReceiver<Frame> {
    let res = http
        .get(format!("{base}/api/sessions/{id}/stream"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut body = res.bytes_stream();
        let mut buffer = String::new();
        while let Some(Ok(chunk)) = body.next().await {
            let at = Instant::now();
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find("\n\n") {
                let block: String = buffer.drain(..end + 2).collect();
                if let Some((event, data)) = parse(&block) {
                    if tx.send(Frame { event, data, at }).is_err() {
                        return;
                    }
                }
            }
        }
    });
    rx
}

impl Live {
    /// Reads frames until the session waits for the participant (true) or has ended (false);
    /// answers widgets on the way. Returns when the first delta arrived, if one did.
    pub async fn settle(&mut self, http: &reqwest::Client, base: &str) -> (bool, Option<Instant>) {
        let mut first_delta = None;
        loop {
            let frame = tokio::time::timeout(Duration::from_secs(30), self.frames.recv())
                .await
                .expect("the interviewer answers within 30 s")
                .expect("the stream stays open");
            match frame.event.as_str() {
                "message.delta" => {
                    first_delta.get_or_insert(frame.at);
                }
                "interaction.render" => self.pending = Some(frame.data["interaction"].clone()),
                "session.status" => match frame.data["status"].as_str().unwrap_or_default() {
                    "waiting_for_user" => return (true, first_delta),
                    "waiting_for_tool" => {
                        let interaction = self.pending.take().expect("a widget was shown");
                        let id = interaction["interaction_id"].as_str().unwrap();
                        let t0 = Instant::now();
                        let res = http
                            .post(format!("{base}/api/sessions/{}/interactions/{id}/submit", self.id))
                            .bearer_auth(&self.token)
                            .json(&json!({"status": "submitted", "value": crate::widget_values::typical_value(&interaction)}))
                            .send()
                            .await
                            .unwrap();
                        assert_eq!(res.status(), 200);
                        self.submits.push(t0.elapsed());
                    }
                    "completed" | "abandoned" => return (false, first_delta),
                    _ => {}
                },
                _ => {}
            }
        }
    }
}

/// A fresh session on `slug`, consented, its first question asked; its stream read from
/// `stream_base` (another server on the same database, or `base`).
pub async fn fresh(http: &reqwest::Client, base: &str, stream_base: &str, slug: &str) -> Live {
    let (id, token) = crate::participant::start(http, base, slug).await;
    let frames = open_stream(http, stream_base, &id, &token).await;
    let mut live = Live {
        id,
        token,
        frames,
        pending: None,
        submits: Vec::new(),
    };
    assert!(live.settle(http, base).await.0, "the interview opens");
    live
}

/// Measured turns: (POST latencies, POST-returned → first delta).
pub struct Turns {
    pub post: Vec<Duration>,
    pub first_delta: Vec<Duration>,
    /// From sending the POST to the first delta (what the participant waits).
    pub first_from_post: Vec<Duration>,
    /// When each first delta arrived.
    pub first_delta_at: Vec<Instant>,
    /// Widget submits along the way (consent included).
    pub submits: Vec<Duration>,
    pub wall: Duration,
}

/// `total` turns over `clients` concurrent participants on `slug`.
pub async fn run(
    http: &reqwest::Client,
    base: &str,
    slug: &str,
    clients: usize,
    total: usize,
) -> Turns {
    run_split(http, base, base, slug, clients, total).await
}

/// The same, each session's stream read from `stream_base`: the server the messages go to
/// (`base`) or another one on the same database.
// Long by design: each concurrent client times its messages and first deltas in its own lists, then
// the lists are merged into one `Turns`; the per-client tuple and the merge must match, so they
// stay side by side.
pub async fn run_split(
    http: &reqwest::Client,
    base: &str,
    stream_base: &str,
    slug: &str,
    clients: usize,
    total: usize,
) -> Turns {
    let started = Instant::now();
    let per_client = total / clients;
    let runs = (0..clients).map(|c| async move {
        let mut post = Vec::with_capacity(per_client);
        let mut first = Vec::with_capacity(per_client);
        let mut from_post = Vec::with_capacity(per_client);
        let mut at = Vec::with_capacity(per_client);
        let mut submits = Vec::new();
        let mut live = fresh(http, base, stream_base, slug).await;
        for i in 0..per_client {
            let t0 = Instant::now();
            let res = http
                .post(format!("{base}/api/sessions/{}/messages", live.id))
                .bearer_auth(&live.token)
                .json(&json!({"content": format!("Client {c}, answer {i}: we plan on Sunday evenings with a list on the phone")}))
                .send()
                .await
                .unwrap();
            let returned = Instant::now();
            assert_eq!(res.status(), 202, "{}", res.text().await.unwrap_or_default());
            post.push(returned - t0);
            let (open, delta) = live.settle(http, base).await;
            // A delta that beat the HTTP response counts as zero.
            first.push(delta.map_or(Duration::MAX, |d| d.saturating_duration_since(returned)));
            from_post.push(delta.map_or(Duration::MAX, |d| d.saturating_duration_since(t0)));
            at.extend(delta);
            if !open {
                submits.append(&mut live.submits);
                live = fresh(http, base, stream_base, slug).await;
            }
        }
        submits.append(&mut live.submits);
        (post, first, from_post, at, submits)
    });
    let results = futures_util::future::join_all(runs).await;
    let mut out = Turns {
        post: Vec::new(),
        first_delta: Vec::new(),
        first_from_post: Vec::new(),
        first_delta_at: Vec::new(),
        submits: Vec::new(),
        wall: started.elapsed(),
    };
    for (post, first, from_post, at, submits) in results {
        out.first_delta_at.extend(at);
        out.post.extend(post);
        out.submits.extend(submits);
        out.first_from_post
            .extend(from_post.into_iter().filter(|d| *d != Duration::MAX));
        out.first_delta
            .extend(first.into_iter().filter(|d| *d != Duration::MAX));
    }
    out
}
