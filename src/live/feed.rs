//! One reader's view of a session as it happens: its committed events in order, each once,
//! and the interviewer's words as they stream. Both event streams — SSE (`routes::stream`) and
//! AG-UI (`routes::agui`) — read a session through it and only encode what it hands them.
//!
//! A commit's note from the hub carries its events when it was made in this process. When they
//! are exactly the next ones, they are handed on as they are; otherwise (another process's
//! commit, announced by NOTIFY with ids only; a note this reader had fallen behind) the events
//! are read from the log, up to the announced commit and no further: the words streamed after
//! that commit are still queued behind its note and must not be overtaken by their own
//! message's completion.
//!
//! An utterance whose claim and completion come to this reader together, with no word of it
//! streamed before — one the rules said whole in another process's commit, whose words are
//! streamed only in that process (`crate::live::across`) — is handed out as it would have
//! streamed: the events up to its claim, its words (`pieces::chunks`, as its own process cuts
//! them), then the rest.

use std::collections::{HashMap, HashSet, VecDeque};

use interview_projections::{read, Db, ProjectionError};
use interview_session::{EventBody, SessionEvent};
use tokio::sync::broadcast;

use crate::live::stream_hub::{Live, StreamHub, Subscription};

/// What the feed has for its reader next.
pub enum Fed {
    /// The next committed events, right after the last ones handed out (none when a note
    /// announced a commit already handed out).
    Events(Vec<(u64, SessionEvent)>),
    /// A piece of an utterance as it streams (not stored).
    Delta { message_id: String, content: String },
    /// This process's interviewer run on the session has ended, after its last commit's note.
    Idle,
}

#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    #[error("the session's log cannot be read: {0}")]
    Read(#[from] ProjectionError),
    /// Notes were dropped because this reader fell behind: read the log to catch up
    /// ([`SessionFeed::read_up_to`]) or let the client reconnect.
    #[error("the reader fell behind the live notes")]
    Lagged,
    #[error("the live notes have stopped")]
    Closed,
}

pub struct SessionFeed {
    db: Db,
    session_id: String,
    subscription: Subscription,
    /// The sequence of the last event handed out.
    position: u64,
    /// What a note brought beyond the first thing handed out for it (an utterance's words and
    /// the events after them), handed out before the next note.
    queued: VecDeque<Fed>,
    /// Messages whose words this reader has had streamed.
    streamed: HashSet<String>,
}

/// A note [`SessionFeed::next_note`] waited for, to hand to [`SessionFeed::take`].
pub struct Note(Option<Live>);

impl SessionFeed {
    /// Subscribes to the session's notes before anything is read, so nothing committed in
    /// between is missed; events after `position` are handed out.
    pub fn subscribe(
        hub: &std::sync::Arc<StreamHub>,
        db: &Db,
        session_id: &str,
        position: u64,
    ) -> Self {
        Self {
            db: db.clone(),
            session_id: session_id.to_string(),
            subscription: hub.subscribe(session_id),
            position,
            queued: VecDeque::new(),
            streamed: HashSet::new(),
        }
    }

    /// The reader holds every event up to `position` already (read after subscribing).
    pub fn skip_to(&mut self, position: u64) {
        self.position = position;
    }

    /// The events after the position up to `up_to` (`u64::MAX`: all), read from the log.
    #[tracing::instrument(skip(self), fields(session_id = %self.session_id, after = self.position))]
    pub async fn read_up_to(&mut self, up_to: u64) -> Result<Vec<(u64, SessionEvent)>, FeedError> {
        let events =
            read::decoded_events_between(&self.db, &self.session_id, self.position, up_to).await?;
        self.handed_out(&events);
        Ok(events)
    }

    /// Waits for the next note. Cancel-safe (a `select!` branch may drop it); what the note
    /// brings is [`SessionFeed::take`]n afterwards, in the branch's body, where a read of the
    /// log is not cut short.
    pub async fn next_note(&mut self) -> Result<Note, FeedError> {
        if !self.queued.is_empty() {
            return Ok(Note(None));
        }
        match self.subscription.receiver.recv().await {
            Ok(note) => Ok(Note(Some(note))),
            Err(broadcast::error::RecvError::Lagged(_)) => Err(FeedError::Lagged),
            Err(broadcast::error::RecvError::Closed) => Err(FeedError::Closed),
        }
    }

    /// What the next note already queued brings, if one is.
    pub async fn try_next(&mut self) -> Result<Option<Fed>, FeedError> {
        if let Some(fed) = self.queued.pop_front() {
            return Ok(Some(fed));
        }
        let note = match self.subscription.receiver.try_recv() {
            Ok(note) => Note(Some(note)),
            Err(broadcast::error::TryRecvError::Empty) => return Ok(None),
            Err(broadcast::error::TryRecvError::Lagged(_)) => return Err(FeedError::Lagged),
            Err(broadcast::error::TryRecvError::Closed) => return Err(FeedError::Closed),
        };
        self.take(Ok(note)).await.map(Some)
    }

    /// What the note [`SessionFeed::next_note`] waited for brings this reader: the next events
    /// (carried, or read from the log up to the commit it announces), a delta, or the
    /// interviewer's idleness.
    pub async fn take(&mut self, note: Result<Note, FeedError>) -> Result<Fed, FeedError> {
        let Note(note) = note?;
        let Some(note) = note else {
            return Ok(self.queued.pop_front().unwrap_or(Fed::Events(Vec::new())));
        };
        let events = match note {
            Live::Delta {
                message_id,
                content,
            } => {
                self.streamed.insert(message_id.clone());
                return Ok(Fed::Delta {
                    message_id,
                    content,
                });
            }
            Live::Idle => return Ok(Fed::Idle),
            Live::Committed { last, .. } if last <= self.position => Vec::new(),
            Live::Committed {
                events: Some(events),
                ..
            } if events
                .first()
                .is_some_and(|(seq, _)| *seq == self.position + 1) =>
            {
                let events = events.to_vec();
                self.handed_out(&events);
                events
            }
            Live::Committed { last, .. } => self.read_up_to(last).await?,
        };
        // Behind whatever an earlier note left queued.
        let parts = self.with_unstreamed_words(events);
        self.queued.extend(parts);
        Ok(self.queued.pop_front().unwrap_or(Fed::Events(Vec::new())))
    }

    /// The events committed since the last handed out, read from the log as they come (live,
    /// not a catch-up at connect): the first part, with an utterance's words and the rest queued
    /// as [`SessionFeed::take`] would; and whether there were any.
    pub async fn read_new(&mut self) -> Result<(bool, Fed), FeedError> {
        let events = self.read_up_to(u64::MAX).await?;
        let any = !events.is_empty();
        let parts = self.with_unstreamed_words(events);
        self.queued.extend(parts);
        Ok((
            any,
            self.queued.pop_front().unwrap_or(Fed::Events(Vec::new())),
        ))
    }

    /// `events` in the parts they are handed out in: whole, or — when they hold the claim and
    /// the completion of an utterance none of whose words this reader has had — the events up
    /// to the claim, its words, then the rest.
    fn with_unstreamed_words(&mut self, events: Vec<(u64, SessionEvent)>) -> Vec<Fed> {
        let completed: HashMap<uuid::Uuid, String> = events
            .iter()
            .filter_map(|(_, e)| match &e.body {
                EventBody::AgentMessageCompleted {
                    message_id,
                    content,
                } => Some((*message_id, content.clone())),
                _ => None,
            })
            .collect();
        let mut parts = Vec::new();
        let mut current = Vec::new();
        for (seq, event) in events {
            let said = match &event.body {
                EventBody::AgentMessageStarted { message_id, .. }
                    if !self.streamed.contains(&message_id.to_string()) =>
                {
                    completed
                        .get(message_id)
                        .map(|text| (message_id.to_string(), text))
                }
                // Complete: its words are no longer looked for.
                EventBody::AgentMessageCompleted { message_id, .. } => {
                    self.streamed.remove(&message_id.to_string());
                    None
                }
                _ => None,
            };
            current.push((seq, event));
            if let Some((message_id, text)) = said {
                parts.push(Fed::Events(std::mem::take(&mut current)));
                for content in crate::live::pieces::chunks(text) {
                    parts.push(Fed::Delta {
                        message_id: message_id.clone(),
                        content,
                    });
                }
            }
        }
        if !current.is_empty() || parts.is_empty() {
            parts.push(Fed::Events(current));
        }
        parts
    }

    fn handed_out(&mut self, events: &[(u64, SessionEvent)]) {
        if let Some((seq, _)) = events.last() {
            self.position = *seq;
        }
    }
}
