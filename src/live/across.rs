//! Across server processes on one PostgreSQL: what one process's streams learn from another.
//!
//! Commits: every commit NOTIFYs its session and last sequence (`NOTIFY_CHANNEL`, sent by the
//! commit itself); the listener here relays each into this process's hub as a `Committed`
//! note with ids only, and a stream reads the events from the log.
//!
//! Words: an utterance's words are never stored, so a stream held by another process than the
//! one that streams them would see the utterance only once it is complete — seconds of silence
//! with a model, then a block of text. So the words a process streams are relayed too: batched
//! for up to [`BATCH_WINDOW`] into NOTIFY payloads on [`WORDS_CHANNEL`] (each naming its
//! origin, the session and the message, the pieces in order), and the listener of every other
//! process publishes them to its own subscribers. A stream relays them in order because one
//! task sends them all, in order, and PostgreSQL delivers one session's notifications in the
//! order they were sent; before the run commits the utterance's completion it waits for its
//! words to be sent ([`Relay::flush`]), so no process sees the completion before the words.
//! An utterance the rules say whole in one commit is not relayed: its claim and completion
//! arrive together, and the reader's feed streams the words between them
//! (`crate::live::feed`).

use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

use crate::live::stream_hub::{Live, StreamHub};

/// The NOTIFY channel of streamed words.
pub const WORDS_CHANNEL: &str = "interview_words";

/// How long the first piece of a batch waits for more.
const BATCH_WINDOW: Duration = Duration::from_millis(5);

/// A NOTIFY payload's limit is 8,000 bytes; pieces are packed below it.
const PAYLOAD_BYTES: usize = 7_000;

/// One NOTIFY payload: pieces of one message, in order.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Words {
    /// The relaying hub, whose own listener passes over its echo.
    origin: String,
    session_id: String,
    message_id: String,
    pieces: Vec<String>,
}

enum Relayed {
    Piece {
        session_id: String,
        message_id: String,
        content: String,
    },
    /// Answered once every piece sent before it is NOTIFYed.
    Flush(oneshot::Sender<()>),
}

/// Sends this process's streamed words to the other processes' streams.
pub struct Relay {
    origin: String,
    tx: mpsc::UnboundedSender<Relayed>,
}

impl Relay {
    /// Starts the task that batches and sends the words.
    pub fn start(pool: sqlx::PgPool) -> Self {
        let origin = uuid::Uuid::new_v4().simple().to_string();
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(send_batches(pool, origin.clone(), rx));
        Self { origin, tx }
    }

    pub(crate) fn origin(&self) -> &str {
        &self.origin
    }

    pub(crate) fn send(&self, session_id: &str, message_id: &str, content: &str) {
        let _ = self.tx.send(Relayed::Piece {
            session_id: session_id.to_string(),
            message_id: message_id.to_string(),
            content: content.to_string(),
        });
    }

    /// Waits until every piece sent so far is NOTIFYed (or could not be).
    pub(crate) async fn flush(&self) {
        let (ack, done) = oneshot::channel();
        if self.tx.send(Relayed::Flush(ack)).is_ok() {
            let _ = done.await;
        }
    }
}

/// The relay's task: a batch is what arrives within [`BATCH_WINDOW`] of its first piece (or
/// before a flush), sent in one statement.
async fn send_batches(
    pool: sqlx::PgPool,
    origin: String,
    mut rx: mpsc::UnboundedReceiver<Relayed>,
) {
    while let Some(first) = rx.recv().await {
        let deadline = tokio::time::Instant::now() + BATCH_WINDOW;
        let mut batch = Vec::new();
        let mut flushed = Vec::new();
        let mut next = Some(first);
        while let Some(item) = next.take() {
            match item {
                Relayed::Piece {
                    session_id,
                    message_id,
                    content,
                } => batch.push((session_id, message_id, content)),
                Relayed::Flush(ack) => {
                    flushed.push(ack);
                    break;
                }
            }
            next = tokio::time::timeout_at(deadline, rx.recv())
                .await
                .ok()
                .flatten();
        }
        let payloads = pack(&origin, batch);
        if !payloads.is_empty() {
            let sent = sqlx::query(include_str!("sql/notify_words.sql"))
                .bind(WORDS_CHANNEL)
                .bind(&payloads)
                .execute(&pool)
                .await;
            if let Err(error) = sent {
                tracing::warn!(%error, "streamed words could not be relayed to other processes");
            }
        }
        for ack in flushed {
            let _ = ack.send(());
        }
    }
}

/// The pieces as payloads: consecutive pieces of one message together, each payload under
/// [`PAYLOAD_BYTES`].
fn pack(origin: &str, batch: Vec<(String, String, String)>) -> Vec<String> {
    let mut payloads = Vec::new();
    let mut current: Option<(Words, usize)> = None;
    for (session_id, message_id, content) in batch {
        let fits = current.as_ref().is_some_and(|(w, bytes)| {
            w.session_id == session_id
                && w.message_id == message_id
                && bytes + content.len() * 2 + 8 < PAYLOAD_BYTES
        });
        if !fits {
            if let Some((words, _)) = current.take() {
                payloads.push(serde_json::to_string(&words).expect("serializes"));
            }
            let bytes = 128 + session_id.len() + message_id.len();
            current = Some((
                Words {
                    origin: origin.to_string(),
                    session_id,
                    message_id,
                    pieces: Vec::new(),
                },
                bytes,
            ));
        }
        let (words, bytes) = current.as_mut().expect("set above");
        // JSON may double a piece's bytes (escapes); counted so.
        *bytes += content.len() * 2 + 8;
        words.pieces.push(content);
    }
    if let Some((words, _)) = current {
        payloads.push(serde_json::to_string(&words).expect("serializes"));
    }
    payloads
}

/// Relays the commit notes and the streamed words of every process sharing the database into
/// this process's hub, so a stream held here sees what happens elsewhere. Reconnects on its own.
pub fn spawn_pg_listener(pool: sqlx::PgPool, hub: Arc<StreamHub>) {
    tokio::spawn(async move {
        loop {
            let mut listener = match sqlx::postgres::PgListener::connect_with(&pool).await {
                Ok(l) => l,
                // The process is stopping (the pool is closed last): nothing to relay any more.
                Err(_) if pool.is_closed() => return,
                Err(error) => {
                    tracing::warn!(%error, "cannot listen for other processes; retrying");
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    continue;
                }
            };
            let channels = [
                interview_projections::projector::NOTIFY_CHANNEL,
                WORDS_CHANNEL,
            ];
            if let Err(error) = listener.listen_all(channels).await {
                if pool.is_closed() {
                    return;
                }
                tracing::warn!(%error, "cannot listen for other processes; retrying");
                tokio::time::sleep(Duration::from_secs(2)).await;
                continue;
            }
            loop {
                match listener.recv().await {
                    Ok(note) if note.channel() == WORDS_CHANNEL => {
                        relay_words(&hub, note.payload())
                    }
                    Ok(note) => relay_commit(&hub, note.payload()),
                    Err(_) if pool.is_closed() => return,
                    Err(error) => {
                        tracing::warn!(%error, "notifications from other processes interrupted; reconnecting");
                        break;
                    }
                }
            }
        }
    });
}

/// `<session_id> <last sequence>`: another process committed the session up to there.
fn relay_commit(hub: &StreamHub, payload: &str) {
    let Some((session_id, seq)) = payload.split_once(' ') else {
        return;
    };
    let Ok(seq) = seq.parse() else {
        return;
    };
    if hub.is_own(session_id, seq) {
        return;
    }
    hub.publish(
        session_id,
        Live::Committed {
            last: seq,
            events: None,
        },
    );
}

fn relay_words(hub: &StreamHub, payload: &str) {
    let Ok(words) = serde_json::from_str::<Words>(payload) else {
        return;
    };
    if hub.relays_as(&words.origin) || !hub.has_subscribers(&words.session_id) {
        return;
    }
    for content in words.pieces {
        hub.publish(
            &words.session_id,
            Live::Delta {
                message_id: words.message_id.clone(),
                content,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_packed_by_message_in_order_under_the_payload_limit() {
        let piece = |s: &str, m: &str, c: &str| (s.to_string(), m.to_string(), c.to_string());
        let long = "x".repeat(1_000);
        let mut batch = vec![piece("s1", "m1", "one "), piece("s1", "m1", "two ")];
        batch.push(piece("s2", "m9", "other "));
        batch.extend((0..10).map(|_| piece("s1", "m1", &long)));
        let payloads: Vec<Words> = pack("o", batch)
            .iter()
            .inspect(|p| assert!(p.len() < 8_000, "{}", p.len()))
            .map(|p| serde_json::from_str(p).unwrap())
            .collect();
        assert_eq!(payloads[0].pieces, ["one ", "two "]);
        assert_eq!(payloads[1].session_id, "s2");
        let rest: usize = payloads[2..].iter().map(|w| w.pieces.len()).sum();
        assert_eq!(rest, 10);
        assert!(payloads.len() > 3, "split under the limit");
    }
}
