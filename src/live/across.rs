//! Across server processes on one PostgreSQL: what one process's streams learn from another.
//!
//! Commits: every commit NOTIFYs its session and last sequence (`NOTIFY_CHANNEL`, sent by the
//! commit itself); the listener here relays each into this process's hub as a `Committed`
//! note with ids only, and a stream reads the events from the log.
//!
//! Words: an utterance's words are never stored, so a stream held by another process than the
//! one that streams them would see the utterance only once it is complete — seconds of silence
//! with a model, then a block of text. So the words a process streams are relayed too: batched
//! for up to [`BATCH_WINDOW`] into NOTIFY payloads on [`WORDS_CHANNEL`] (`<origin> <json>`: the
//! relaying hub, then the session, the message and the pieces in order), and the listener of
//! every other process publishes them to its own subscribers. Only while another process is
//! alive (`crate::live::peers`): one server alone sends nothing. The relay is best effort
//! and never holds a run up for long: a statement gets [`SEND_WITHIN`], a flush
//! [`FLUSH_WITHIN`]; words that could not go are still in the completed message. A stream relays them in order because one
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

use crate::live::peers::{self, PEERS_CHANNEL};
use crate::live::stream_hub::{Live, StreamHub, WordsRelay};
use interview_projections::processes::Peers;

/// The NOTIFY channel of streamed words.
pub const WORDS_CHANNEL: &str = "interview_words";

/// How long the first piece of a batch waits for more.
const BATCH_WINDOW: Duration = Duration::from_millis(15);

/// How long one batch's statement may take, and a run may wait for its words to be sent.
const SEND_WITHIN: Duration = Duration::from_secs(1);
const FLUSH_WITHIN: Duration = Duration::from_millis(250);

/// A NOTIFY payload's limit is 8,000 bytes; pieces are packed below it.
const PAYLOAD_BYTES: usize = 7_000;

/// One NOTIFY payload's JSON, after its origin: pieces of one message, in order.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Words {
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
    pub fn start(pool: sqlx::PgPool, peers: Peers) -> Self {
        let origin = uuid::Uuid::new_v4().simple().to_string();
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(send_batches(pool, peers, origin.clone(), rx));
        Self { origin, tx }
    }
}

#[async_trait::async_trait]
impl WordsRelay for Relay {
    fn origin(&self) -> &str {
        &self.origin
    }

    fn send(&self, session_id: &str, message_id: &str, content: &str) {
        let _ = self.tx.send(Relayed::Piece {
            session_id: session_id.to_string(),
            message_id: message_id.to_string(),
            content: content.to_string(),
        });
    }

    /// Waits until every piece sent so far is NOTIFYed (or could not be), for
    /// [`FLUSH_WITHIN`] at most.
    async fn flush(&self) {
        let (ack, done) = oneshot::channel();
        if self.tx.send(Relayed::Flush(ack)).is_ok() {
            let _ = tokio::time::timeout(FLUSH_WITHIN, done).await;
        }
    }
}

/// The relay's task: a batch is what arrives within [`BATCH_WINDOW`] of its first piece (a
/// flush sends it at once, with whatever else is queued), sent in one statement when another
/// process is alive.
async fn send_batches(
    pool: sqlx::PgPool,
    peers: Peers,
    origin: String,
    mut rx: mpsc::UnboundedReceiver<Relayed>,
) {
    while let Some(first) = rx.recv().await {
        let deadline = tokio::time::Instant::now() + BATCH_WINDOW;
        let (mut batch, mut flushed) = (Vec::new(), Vec::new());
        let mut next = Some(first);
        while let Some(item) = next.take() {
            match item {
                Relayed::Piece {
                    session_id,
                    message_id,
                    content,
                } => batch.push((session_id, message_id, content)),
                Relayed::Flush(ack) => flushed.push(ack),
            }
            next = if flushed.is_empty() {
                tokio::time::timeout_at(deadline, rx.recv())
                    .await
                    .ok()
                    .flatten()
            } else {
                // Flushing: what is queued already goes in this batch, nothing waits for more.
                rx.try_recv().ok()
            };
        }
        if !batch.is_empty() && peers.may_listen() {
            let payloads = pack(&origin, batch);
            let sent = tokio::time::timeout(
                SEND_WITHIN,
                sqlx::query(include_str!("sql/notify_words.sql"))
                    .bind(WORDS_CHANNEL)
                    .bind(&payloads)
                    .execute(&pool),
            )
            .await;
            match sent {
                Ok(Ok(_)) => {}
                Ok(Err(error)) => {
                    tracing::warn!(%error, "streamed words could not be relayed to other processes")
                }
                Err(_) => tracing::warn!("relaying streamed words to other processes timed out"),
            }
        }
        for ack in flushed {
            let _ = ack.send(());
        }
    }
}

/// The pieces as payloads (`<origin> <json>`): consecutive pieces of one message together,
/// each payload under [`PAYLOAD_BYTES`] as serialized; a piece too long for one is cut, at
/// character boundaries, into several.
fn pack(origin: &str, batch: Vec<(String, String, String)>) -> Vec<String> {
    let mut payloads = Vec::new();
    let mut current: Option<(Words, usize)> = None;
    let finish = |words: Words, payloads: &mut Vec<String>| {
        let json = serde_json::to_string(&words).expect("serializes");
        payloads.push(format!("{origin} {json}"));
    };
    for (session_id, message_id, content) in batch {
        let room = PAYLOAD_BYTES - (64 + origin.len() + session_id.len() + message_id.len());
        for piece in fitting(content, room) {
            let size = json_len(&piece) + 1;
            let fits = current.as_ref().is_some_and(|(w, bytes)| {
                w.session_id == session_id && w.message_id == message_id && bytes + size <= room
            });
            if !fits {
                if let Some((words, _)) = current.take() {
                    finish(words, &mut payloads);
                }
                current = Some((
                    Words {
                        session_id: session_id.clone(),
                        message_id: message_id.clone(),
                        pieces: Vec::new(),
                    },
                    0,
                ));
            }
            let (words, bytes) = current.as_mut().expect("set above");
            *bytes += size;
            words.pieces.push(piece);
        }
    }
    if let Some((words, _)) = current {
        finish(words, &mut payloads);
    }
    payloads
}

/// A piece's length as a JSON string.
fn json_len(piece: &str) -> usize {
    serde_json::to_string(piece).expect("serializes").len()
}

/// `content` cut at character boundaries into pieces of at most `room` bytes as JSON strings.
fn fitting(content: String, room: usize) -> Vec<String> {
    if json_len(&content) <= room {
        return vec![content];
    }
    let mut pieces = Vec::new();
    let mut current = String::new();
    for c in content.chars() {
        current.push(c);
        if json_len(&current) > room {
            current.pop();
            pieces.push(std::mem::take(&mut current));
            current.push(c);
        }
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    pieces
}

/// Relays the commit notes and the streamed words of every process sharing the database into
/// this process's hub, so a stream held here sees what happens elsewhere; says hello once it
/// listens and every few seconds after, and hears the others' (`crate::live::peers`).
/// Reconnects on its own. The answer comes once it first listens and has said hello.
pub fn spawn_pg_listener(
    pool: sqlx::PgPool,
    hub: Arc<StreamHub>,
    peers: Peers,
) -> oneshot::Receiver<()> {
    let own = uuid::Uuid::new_v4().simple().to_string();
    peers::spawn_hellos(pool.clone(), own.clone(), peers.clone());
    let (ready, first) = oneshot::channel();
    let mut ready = Some(ready);
    tokio::spawn(async move {
        loop {
            let mut listener = match listen(&pool, &own).await {
                Ok(listener) => listener,
                // The process is stopping (the pool is closed last): nothing to relay any more.
                Err(_) if pool.is_closed() => return,
                Err(error) => {
                    tracing::warn!(%error, "cannot listen for other processes; retrying");
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    continue;
                }
            };
            peers.listening(true);
            if let Some(ready) = ready.take() {
                let _ = ready.send(());
            }
            loop {
                match listener.recv().await {
                    Ok(note) if note.channel() == WORDS_CHANNEL => {
                        relay_words(&hub, note.payload())
                    }
                    Ok(note) if note.channel() == PEERS_CHANNEL => {
                        peers::heard(&peers, note.payload(), &own)
                    }
                    Ok(note) => relay_commit(&hub, note.payload()),
                    Err(_) if pool.is_closed() => return,
                    Err(error) => {
                        tracing::warn!(%error, "notifications from other processes interrupted; reconnecting");
                        break;
                    }
                }
            }
            // Deaf until it listens again: announce meanwhile, as when nobody is known.
            peers.listening(false);
        }
    });
    first
}

/// A listener on every channel the processes share, once this one (`own`) has said hello.
async fn listen(pool: &sqlx::PgPool, own: &str) -> Result<sqlx::postgres::PgListener, sqlx::Error> {
    let mut listener = sqlx::postgres::PgListener::connect_with(pool).await?;
    let channels = [
        interview_projections::projector::NOTIFY_CHANNEL,
        WORDS_CHANNEL,
        PEERS_CHANNEL,
    ];
    listener.listen_all(channels).await?;
    peers::say_hello(pool, own).await?;
    Ok(listener)
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
    let Some((origin, json)) = payload.split_once(' ') else {
        return;
    };
    // Its own words, echoed back: passed over unread.
    if hub.relays_as(origin) {
        return;
    }
    let Ok(words) = serde_json::from_str::<Words>(json) else {
        return;
    };
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

    fn unpacked(payloads: &[String]) -> Vec<Words> {
        payloads
            .iter()
            .inspect(|p| assert!(p.len() < 8_000, "{}", p.len()))
            .map(|p| {
                let (origin, json) = p.split_once(' ').unwrap();
                assert_eq!(origin, "o");
                serde_json::from_str(json).unwrap()
            })
            .collect()
    }

    #[test]
    fn pieces_are_packed_by_message_in_order_under_the_payload_limit() {
        let piece = |s: &str, m: &str, c: &str| (s.to_string(), m.to_string(), c.to_string());
        let long = "x".repeat(1_000);
        let mut batch = vec![piece("s1", "m1", "one "), piece("s1", "m1", "two ")];
        batch.push(piece("s2", "m9", "other "));
        batch.extend((0..10).map(|_| piece("s1", "m1", &long)));
        let payloads = unpacked(&pack("o", batch));
        assert_eq!(payloads[0].pieces, ["one ", "two "]);
        assert_eq!(payloads[1].session_id, "s2");
        let rest: Vec<String> = payloads[2..]
            .iter()
            .flat_map(|w| w.pieces.clone())
            .collect();
        assert_eq!(rest.concat(), long.repeat(10));
        assert!(payloads.len() > 3, "split under the limit");
    }

    #[test]
    fn a_piece_too_long_for_one_payload_is_cut_and_escapes_are_counted() {
        // Control characters take six bytes each in JSON; CJK three in UTF-8.
        for text in ["\u{1}".repeat(3_000), "购物清单".repeat(2_000)] {
            let payloads = unpacked(&pack("o", vec![("s".into(), "m".into(), text.clone())]));
            assert!(payloads.len() > 1);
            let joined: String = payloads.iter().flat_map(|w| w.pieces.clone()).collect();
            assert_eq!(joined, text);
        }
    }
}
