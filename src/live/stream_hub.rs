//! Live fan-out to SSE subscribers, in process (and, through `crate::live::across`, from the
//! other processes on one PostgreSQL).
//!
//! After each commit a `Committed` note is broadcast on the session's channel (two, with the
//! utterance's deltas between them, when a rules step claimed and said it in one commit). A note from this
//! process carries the committed events themselves, so a subscriber that is exactly one commit
//! behind folds them without touching the database; otherwise (a note from another process
//! through PostgreSQL NOTIFY, which carries ids only, or a subscriber with a gap) the subscriber
//! reads the events after its last one from the database. So live delivery and resume after a
//! reconnect are one code path (events after my last id), and nothing is lost between a
//! subscriber's catch-up read and its first note. Utterance deltas, which are never stored, travel on the
//! same channel. Channels are bounded: a subscriber that falls behind is cut off (it reconnects
//! with `Last-Event-ID`); publishing never waits.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use cqrs_es::{EventEnvelope, Query};
use interview_session::{EventBody, Session, SessionEvent};
use tokio::sync::broadcast;

/// Notes per session a subscriber may fall behind before it is cut off.
const CHANNEL_CAPACITY: usize = 256;

/// Committed events with their sequence numbers, shared by every subscriber of the session.
pub type CommittedEvents = Arc<Vec<(u64, SessionEvent)>>;

#[derive(Debug, Clone)]
pub enum Live {
    /// Events up to `last` are committed; `events` are the ones this commit added (or the part
    /// of it up to a claim whose words follow), when the commit happened in this process.
    Committed {
        last: u64,
        events: Option<CommittedEvents>,
    },
    /// A piece of an utterance being streamed (not stored).
    Delta { message_id: String, content: String },
    /// This process's interviewer run on the session has ended (after its last commit's note):
    /// whoever waits for the turn to end can look now instead of polling.
    Idle,
}

pub struct StreamHub {
    channels: Mutex<HashMap<String, broadcast::Sender<Live>>>,
    /// The last sequence this process is committing or has committed, by session: NOTIFY
    /// echoes this process's commits back to it, often before the in-process note that carries
    /// their events; relayed, that echo would send every subscriber to the database for events
    /// the note brings a moment later.
    own: Mutex<hashlink::LruCache<String, u64>>,
    /// On PostgreSQL, what sends this process's streamed words to the other processes
    /// (`crate::live::across::Relay`).
    relay: std::sync::OnceLock<Box<dyn WordsRelay>>,
}

/// What sends the words this process streams to the other processes' hubs.
#[async_trait]
pub trait WordsRelay: Send + Sync {
    /// The name the relay sends under: its own words, echoed back, carry it.
    fn origin(&self) -> &str;
    /// A piece of `message_id`'s words, in order after the ones before.
    fn send(&self, session_id: &str, message_id: &str, content: &str);
    /// Waits (briefly) until every piece sent so far has gone out.
    async fn flush(&self);
}

/// Sessions whose own commits the hub remembers.
const OWN_SESSIONS: usize = 4096;

impl Default for StreamHub {
    fn default() -> Self {
        Self {
            channels: Mutex::default(),
            own: Mutex::new(hashlink::LruCache::new(OWN_SESSIONS)),
            relay: std::sync::OnceLock::new(),
        }
    }
}

/// A subscription; dropping the last one of a session frees its channel.
pub struct Subscription {
    pub receiver: broadcast::Receiver<Live>,
    hub: Arc<StreamHub>,
    session_id: String,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut channels = self.hub.channels.lock().expect("hub lock");
        // Our own receiver is still counted here.
        if channels
            .get(&self.session_id)
            .is_some_and(|tx| tx.receiver_count() <= 1)
        {
            channels.remove(&self.session_id);
        }
    }
}

impl StreamHub {
    pub fn subscribe(self: &Arc<Self>, session_id: &str) -> Subscription {
        let mut channels = self.channels.lock().expect("hub lock");
        let receiver = channels
            .entry(session_id.to_string())
            .or_insert_with(|| broadcast::channel(CHANNEL_CAPACITY).0)
            .subscribe();
        Subscription {
            receiver,
            hub: self.clone(),
            session_id: session_id.to_string(),
        }
    }

    /// Sends to the session's subscribers, if any; never waits.
    pub fn publish(&self, session_id: &str, item: Live) {
        self.publish_with(session_id, || item)
    }

    /// [`Self::publish`], building the item only when the session has subscribers.
    pub fn publish_with(&self, session_id: &str, item: impl FnOnce() -> Live) {
        if let Some(tx) = self.channels.lock().expect("hub lock").get(session_id) {
            let _ = tx.send(item());
        }
    }

    /// Relays the words this process streams to the other processes' streams (once, at
    /// start-up, on PostgreSQL).
    pub fn relay_words(&self, relay: impl WordsRelay + 'static) {
        let _ = self.relay.set(Box::new(relay));
    }

    /// Whether `origin` names this hub's relay (its own words, echoed back).
    pub(crate) fn relays_as(&self, origin: &str) -> bool {
        self.relay.get().is_some_and(|r| r.origin() == origin)
    }

    /// A piece of an utterance as it streams, to the session's subscribers here and in every
    /// other process.
    pub fn stream_delta(&self, session_id: &str, message_id: &str, content: String) {
        if let Some(relay) = self.relay.get() {
            relay.send(session_id, message_id, &content);
        }
        self.publish(
            session_id,
            Live::Delta {
                message_id: message_id.to_string(),
                content,
            },
        );
    }

    /// Streams an utterance's words to the session's subscribers here and in every other
    /// process, a few at a time (`pieces::chunks`).
    pub fn publish_words(&self, session_id: &str, message_id: &uuid::Uuid, text: &str) {
        let message_id = message_id.to_string();
        for content in super::pieces::chunks(text) {
            self.stream_delta(session_id, &message_id, content);
        }
    }

    /// Streams them to the session's subscribers in this process only: an utterance claimed
    /// and said in one commit, whose words the other processes' readers stream from the commit
    /// itself (`crate::live::feed`).
    fn publish_words_here(&self, session_id: &str, message_id: &uuid::Uuid, text: &str) {
        let message_id = message_id.to_string();
        for content in super::pieces::chunks(text) {
            self.publish(
                session_id,
                Live::Delta {
                    message_id: message_id.clone(),
                    content,
                },
            );
        }
    }

    /// Waits until the words streamed so far have reached the other processes: called before
    /// the commit that completes their utterance, so no process sees it complete first.
    pub async fn words_sent(&self) {
        if let Some(relay) = self.relay.get() {
            relay.flush().await;
        }
    }

    /// Whether the session has a subscriber in this process.
    pub fn has_subscribers(&self, session_id: &str) -> bool {
        self.channels
            .lock()
            .expect("hub lock")
            .contains_key(session_id)
    }

    /// This process is about to commit `session_id` up to `last`.
    pub fn mark_own(&self, session_id: &str, last: u64) {
        self.own
            .lock()
            .expect("hub lock")
            .insert(session_id.to_string(), last);
    }

    /// The commit marked with [`Self::mark_own`] failed: a commit of the same sequence by another
    /// process is relayed again.
    pub fn unmark_own(&self, session_id: &str, last: u64) {
        let mut own = self.own.lock().expect("hub lock");
        if own.peek(session_id) == Some(&last) {
            own.remove(session_id);
        }
    }

    /// Whether a NOTIFY for `session_id` up to `last` is this process's own commit (or one its
    /// own commit has since followed, whose note then shows the gap).
    pub(crate) fn is_own(&self, session_id: &str, last: u64) -> bool {
        self.own
            .lock()
            .expect("hub lock")
            .peek(session_id)
            .is_some_and(|own| *own >= last)
    }

    /// Sessions with at least one subscriber (for tests and metrics).
    pub fn open_channels(&self) -> usize {
        self.channels.lock().expect("hub lock").len()
    }
}

/// Registered after the projector with the cqrs framework: announces each commit.
pub struct StreamNotifier(pub Arc<StreamHub>);

#[async_trait]
impl Query<Session> for StreamNotifier {
    async fn dispatch(&self, aggregate_id: &str, events: &[EventEnvelope<Session>]) {
        // An utterance claimed and completed in one commit (a rules step, see
        // `src/interviewer/unclaimed.rs`) was not streamed before it: its words go out now, between
        // its claim and the rest of the commit, as a claimed utterance's would have.
        let said = said_whole(events).filter(|_| self.0.has_subscribers(aggregate_id));
        let Some((claim, message_id, text)) = said else {
            return self.announce(aggregate_id, events);
        };
        let (claimed, rest) = events.split_at(claim + 1);
        self.announce(aggregate_id, claimed);
        self.0.publish_words_here(aggregate_id, &message_id, text);
        self.announce(aggregate_id, rest);
    }
}

impl StreamNotifier {
    /// One note for `events` (committed in order), carrying them.
    fn announce(&self, session_id: &str, events: &[EventEnvelope<Session>]) {
        if let Some(last) = events.last() {
            // Copying the events is only worth it for a session someone is watching.
            self.0.publish_with(session_id, || Live::Committed {
                last: last.sequence as u64,
                events: Some(Arc::new(
                    events
                        .iter()
                        .map(|e| (e.sequence as u64, e.payload.clone()))
                        .collect(),
                )),
            });
        }
    }
}

/// The position of a claim (`agent.message.started`) whose utterance the same commit completes,
/// that utterance's id and its text.
fn said_whole(events: &[EventEnvelope<Session>]) -> Option<(usize, uuid::Uuid, &str)> {
    events.iter().enumerate().find_map(|(i, e)| {
        let EventBody::AgentMessageStarted { message_id, .. } = &e.payload.body else {
            return None;
        };
        events[i + 1..]
            .iter()
            .find_map(|later| match &later.payload.body {
                EventBody::AgentMessageCompleted {
                    message_id: said,
                    content,
                } if said == message_id => Some((i, *message_id, content.as_str())),
                _ => None,
            })
    })
}

#[cfg(test)]
mod tests {
    use super::{Live, StreamHub, StreamNotifier};
    use cqrs_es::{EventEnvelope, Query};
    use interview_session::events::{Phase, SessionStatus};
    use interview_session::{EventBody, Session, SessionEvent};
    use std::sync::Arc;
    use uuid::Uuid;

    fn commit(bodies: Vec<EventBody>) -> Vec<EventEnvelope<Session>> {
        let at = chrono::Utc::now();
        bodies
            .into_iter()
            .enumerate()
            .map(|(i, body)| EventEnvelope {
                aggregate_id: "s".into(),
                sequence: 11 + i,
                payload: SessionEvent::seal(body, at, interview_session::hash::GENESIS_HASH),
                metadata: Default::default(),
            })
            .collect()
    }

    /// What the subscriber of `s` receives: `C<last>` per note, `D` per delta (its text kept).
    fn received(sub: &mut super::Subscription) -> (Vec<String>, String) {
        let (mut notes, mut said) = (Vec::new(), String::new());
        while let Ok(note) = sub.receiver.try_recv() {
            notes.push(match note {
                Live::Committed { last, events } => {
                    format!("C{last}/{}", events.map_or(0, |e| e.len()))
                }
                Live::Delta { content, .. } => {
                    said.push_str(&content);
                    "D".into()
                }
                Live::Idle => "I".into(),
            });
        }
        notes.dedup();
        (notes, said)
    }

    #[tokio::test]
    async fn an_utterance_claimed_and_said_in_one_commit_streams_between_its_claim_and_the_rest() {
        let hub = Arc::new(StreamHub::default());
        let mut sub = hub.subscribe("s");
        let notifier = StreamNotifier(hub.clone());
        let (message_id, text) = (
            Uuid::from_u128(7),
            "Could you walk me through your last shop?",
        );
        let said = commit(vec![
            EventBody::AgentMessageStarted {
                message_id,
                run_id: Uuid::from_u128(8),
                process_id: None,
                takes_over: None,
            },
            EventBody::PhaseChanged {
                from: Phase::Opening,
                to: Phase::AskOrProbe,
            },
            EventBody::AgentMessageCompleted {
                message_id,
                content: text.into(),
            },
            EventBody::StatusChanged {
                from: SessionStatus::Active,
                to: SessionStatus::WaitingForUser,
            },
        ]);
        notifier.dispatch("s", &said).await;
        assert_eq!(
            received(&mut sub),
            (
                vec!["C11/1".into(), "D".into(), "C14/3".into()],
                text.into()
            )
        );
        // A claim alone (the claimed way: the run streams the words itself), or an utterance
        // completed under an earlier commit's claim, is announced as it is.
        notifier.dispatch("s", &said[..1]).await;
        notifier.dispatch("s", &said[1..]).await;
        assert_eq!(
            received(&mut sub),
            (vec!["C11/1".into(), "C14/3".into()], String::new())
        );
    }

    #[test]
    fn only_this_process_s_own_commits_are_held_back() {
        let hub = StreamHub::default();
        assert!(!hub.is_own("s", 3), "nothing marked: relayed");
        hub.mark_own("s", 5);
        assert!(hub.is_own("s", 5), "the echo of our commit");
        assert!(hub.is_own("s", 4), "one our commit has followed");
        assert!(!hub.is_own("s", 6), "a later commit, another process's");
        assert!(!hub.is_own("t", 5), "another session");
        // Our commit of 5 failed: another process's 5 is relayed again.
        hub.unmark_own("s", 5);
        assert!(!hub.is_own("s", 5));
        // A failure of an older mark leaves a newer one alone.
        hub.mark_own("s", 7);
        hub.unmark_own("s", 5);
        assert!(hub.is_own("s", 7));
    }
}
