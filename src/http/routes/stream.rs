//! `GET /api/sessions/{id}/stream`: the session's StreamEvents over Server-Sent Events.
//!
//! A subscriber first subscribes to the live hub, then reads the log after its last id
//! (`Last-Event-ID` header or `last_event_id` query parameter; from the start otherwise) and
//! keeps reading after each commit note: no gap, no duplicate. Persisted events carry `id:`
//! (their sequence); utterance deltas do not. A comment line every `SSE_KEEPALIVE_SECS` keeps
//! proxies from closing an idle stream, and is how a vanished client is noticed.

use std::collections::HashSet;
use std::time::Duration;

use actix_web::web::Bytes;
use actix_web::{get, web, HttpRequest, HttpResponse};

use interview_projections::stream::{StreamEvent, StreamFolder};
use tokio::sync::mpsc;

use crate::http::auth::SessionCaller;
use crate::http::error::ApiError;
use crate::live::feed::{Fed, FeedError, SessionFeed};
use crate::state::AppState;

/// Frames buffered for one client before its pump waits (only that client waits).
const CLIENT_BUFFER: usize = 64;

fn last_event_id(req: &HttpRequest) -> Result<u64, ApiError> {
    let from_header = req
        .headers()
        .get("last-event-id")
        .map(|v| v.to_str().unwrap_or("?").to_string());
    let from_query = || {
        req.query_string()
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(k, _)| *k == "last_event_id")
            .map(|(_, v)| v.to_string())
    };
    let field = if from_header.is_some() {
        "Last-Event-ID"
    } else {
        "last_event_id"
    };
    match from_header.or_else(from_query) {
        None => Ok(0),
        Some(raw) if raw.trim().is_empty() => Ok(0),
        Some(raw) => raw.trim().parse().map_err(|_| ApiError::BadRequest {
            code: "invalid_last_event_id",
            message: "Last-Event-ID must be an event id received from this stream".into(),
            details: Some(serde_json::json!({ "field": field })),
        }),
    }
}

/// Stream a session's events live (Server-Sent Events), resuming after `Last-Event-ID`.
#[utoipa::path(tag = "participant", security(("bearer" = [])),
    params(("session_id" = String, Path),
           ("last_event_id" = Option<u64>, Query, description = "resume after this id (or the Last-Event-ID header)"),
           ("token" = Option<String>, Query, description = "the participant token, for EventSource")),
    responses((status = 200, description = "text/event-stream of StreamEvents", content_type = "text/event-stream"),
              (status = 400), (status = 401), (status = 403), (status = 404)))]
#[get("/api/sessions/{session_id}/stream")]
pub async fn stream(
    state: web::Data<AppState>,
    guards: web::Data<crate::http::guards::Guards>,
    req: HttpRequest,
    SessionCaller {
        session_id,
        study_id,
        ..
    }: SessionCaller,
) -> Result<HttpResponse, ApiError> {
    let after = last_event_id(&req)?;
    let slot = guards
        .streams
        .try_open(&session_id.to_string())
        .map_err(|what| ApiError::Overloaded { what })?;
    let session_id = session_id.to_string();
    // Subscribed before the first read, so nothing committed in between is missed. The whole
    // log is read: the participant's stream is folded from the session's first event.
    let feed = SessionFeed::subscribe(&state.hub, &state.db, &session_id, 0);
    let (tx, rx) = mpsc::channel::<Bytes>(CLIENT_BUFFER);
    let watched = state.clone();
    let streaming = tokio::spawn(async move {
        pump(state.clone(), session_id, after, feed, tx).await;
        drop(slot);
    });
    // A researcher's stream ends within seconds of their token being revoked or expiring, or
    // their role on the study being taken away (participants' tokens do not change).
    if let (Some(study_id), Some(token)) = (study_id, crate::http::auth::header_token(&req)) {
        tokio::spawn(async move {
            while !streaming.is_finished() {
                tokio::time::sleep(RECHECK_EVERY).await;
                if !crate::http::auth::still_reads(&watched, &token, &study_id).await {
                    streaming.abort();
                }
            }
        });
    }
    Ok(event_stream(rx))
}

/// How often a researcher's open stream checks that its token still reads the study.
const RECHECK_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// A `text/event-stream` response of the frames sent on `rx`, never buffered by proxies; it
/// ends when the sending side is dropped.
pub(crate) fn event_stream(rx: mpsc::Receiver<Bytes>) -> HttpResponse {
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|frame| (Ok::<_, actix_web::Error>(frame), rx))
    });
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("cache-control", "no-cache"))
        .insert_header(("x-accel-buffering", "no"))
        .streaming(body)
}

/// Feeds one client until it goes away, falls behind, or the log cannot be read.
// Long by design: a catch-up read, then one select loop with one branch per thing that wakes it
// (the server draining, a commit note with one arm per feed outcome, the keep-alive tick, the
// client gone), each saying whether the stream goes on or ends; split, the returns that end the
// stream would be spread over helpers that must report them back.
async fn pump(
    state: web::Data<AppState>,
    session_id: String,
    after: u64,
    mut feed: SessionFeed,
    tx: mpsc::Sender<Bytes>,
) {
    let mut reader = Reader {
        folder: StreamFolder::default(),
        after,
        completed: HashSet::new(),
    };
    if tx
        .send(Bytes::from_static(b"retry: 2000\n\n"))
        .await
        .is_err()
    {
        return;
    }
    let Ok(events) = feed
        .read_up_to(u64::MAX)
        .await
        .map_err(|error| tracing::warn!(%error, session_id, "stream closed: cannot read the log"))
    else {
        return;
    };
    if reader.send(events, &tx).await.is_err() {
        return;
    }
    let every = Duration::from_secs(state.settings.sse_keepalive_secs.max(1));
    let mut keepalive = tokio::time::interval(every);
    keepalive.tick().await;
    let mut draining = state.draining.subscribe();
    loop {
        tokio::select! {
            // The process is stopping: the client should reconnect soon (to another process
            // behind the balancer, or to this one restarted), resuming with Last-Event-ID.
            changed = draining.changed() => {
                if changed.is_err() || *draining.borrow() {
                    let _ = tx.send(Bytes::from_static(b"retry: 500\n: the server is restarting\n\n")).await;
                    return;
                }
            }
            note = feed.next_note() => match feed.take(note).await {
                Ok(Fed::Events(events)) => {
                    if reader.send(events, &tx).await.is_err() {
                        return;
                    }
                }
                Ok(Fed::Idle) => {}
                // A delta of a message already completed (read at connect) is stale.
                Ok(Fed::Delta { message_id, .. }) if reader.completed.contains(&message_id) => {}
                Ok(Fed::Delta { message_id, content }) => {
                    let frame = StreamEvent::delta(&message_id, &content).to_sse(None);
                    if tx.send(Bytes::from(frame)).await.is_err() {
                        return;
                    }
                }
                Err(FeedError::Read(error)) => {
                    tracing::warn!(%error, session_id, "stream closed: cannot read the log");
                    return;
                }
                // Fell behind the live notes, or the hub went away: the client reconnects with
                // Last-Event-ID and resumes from the log.
                Err(FeedError::Lagged | FeedError::Closed) => return,
            },
            _ = keepalive.tick() => {
                if tx.send(Bytes::from_static(b": keep-alive\n\n")).await.is_err() {
                    return;
                }
            }
            _ = tx.closed() => return,
        }
    }
}

/// What the client has been sent: the participant stream's fold, and which messages completed.
struct Reader {
    folder: StreamFolder,
    /// Send only events after this id.
    after: u64,
    /// Messages whose completion was read: their late deltas are dropped.
    completed: HashSet<String>,
}

impl Reader {
    /// Folds `events` (the ones right after the last folded, in order) and sends what they show.
    async fn send(
        &mut self,
        events: impl IntoIterator<Item = (u64, interview_session::SessionEvent)>,
        tx: &mpsc::Sender<Bytes>,
    ) -> Result<(), ()> {
        for (seq, event) in events {
            if let interview_session::EventBody::AgentMessageCompleted { message_id, .. } =
                &event.body
            {
                self.completed.insert(message_id.to_string());
            }
            if let Some(stream_event) = self.folder.next(&event) {
                if seq > self.after {
                    tx.send(Bytes::from(stream_event.to_sse(Some(seq))))
                        .await
                        .map_err(|_| ())?;
                }
            }
        }
        Ok(())
    }
}
