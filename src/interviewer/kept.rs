//! What the harness keeps of the sessions it ran lately, and how a run loads one: the folded
//! state and events of each (least recently used out first), and the commits of a run's own
//! commands, so that a run is driven by its commits and reads the log only for what it has not
//! seen.

use std::sync::Arc;

use cqrs_es::{Aggregate, AggregateError};
use interview_projections::read;
use interview_session::events::SessionEvent;
use interview_session::{Session, SessionCommand, SessionError};
use uuid::Uuid;

use super::{Interviewer, InterviewerError, Loaded};
use crate::command::store::Actor;
use interview_session::conversation::Conversation;

/// How many sessions' events the harness keeps between loads…
pub(super) const KEPT_SESSIONS: usize = 512;
/// …and how many bytes of them at most (estimated as their JSON, twice over: the events and the
/// state folded from them), so a few very long interviews cannot hold more memory than many
/// short ones (`crate::bounded`).
pub(super) const KEPT_BYTES: usize = 256 << 20;

pub(super) struct Kept {
    session: Session,
    events: Arc<Vec<SessionEvent>>,
    last_seq: u64,
    /// The run that folds `committed` — commits that followed the kept state with no gap (its
    /// own, an earlier run's, the participant's that triggered it) — at its next load, reading
    /// nothing.
    level_for: Option<Uuid>,
    committed: Vec<(u64, SessionEvent)>,
    /// The estimated size of `events` and `session` together.
    bytes: usize,
}

impl Interviewer {
    /// The session folded from its events, starting from what the last load of this session
    /// kept (the whole log when nothing is). Right after one of
    /// `run`'s own commands the kept state is the log's as that command found it, and nothing is
    /// read: a run is driven by its commits. Its first load, and any after a command whose
    /// events did not follow the kept ones, read the events after the kept state.
    pub(super) async fn load(
        &self,
        session_id: &str,
        run: Uuid,
    ) -> Result<Loaded, InterviewerError> {
        let kept = self
            .kept
            .lock()
            .expect("the harness cache is never poisoned")
            .remove(session_id);
        let Kept {
            mut session,
            mut events,
            mut last_seq,
            level_for,
            committed,
            mut bytes,
        } = kept.unwrap_or_else(|| Kept {
            session: Session::default(),
            events: Arc::default(),
            last_seq: 0,
            level_for: None,
            committed: Vec::new(),
            bytes: 0,
        });
        let newer = if level_for == Some(run) {
            committed
        } else {
            read::decoded_events_after(&self.db, session_id, last_seq).await?
        };
        // Unshared by now, unless the post-session extraction still holds a copy (then the list
        // is copied once): the previous load's copy was dropped with its step.
        if let Some((seq, added)) = fold_in(&mut session, &mut events, newer) {
            last_seq = seq;
            bytes += added;
        }
        let conversation = Conversation::from_events(&events);
        self.kept
            .lock()
            .expect("the harness cache is never poisoned")
            .insert(
                session_id.to_string(),
                Kept {
                    session: session.clone(),
                    events: events.clone(),
                    last_seq,
                    level_for: None,
                    committed: Vec::new(),
                    bytes,
                },
                bytes,
            );
        Ok(Loaded {
            session,
            conversation,
            events,
        })
    }

    /// The session as its log stands now, for work outside a run (the post-session
    /// extraction): what the last load kept plus the events after it, read from the log — the
    /// whole log only when nothing is kept (another process ran the interview, or it was
    /// evicted).
    pub(crate) async fn load_latest(&self, session_id: &str) -> Result<Loaded, InterviewerError> {
        // Looked at, not taken out nor put back: the run that completed the session may load
        // it once more, and a session nobody runs here does not push out one somebody does.
        let kept = self
            .kept
            .lock()
            .expect("the harness cache is never poisoned")
            .peek(session_id)
            .map(|k| {
                let committed = k.committed.clone();
                (k.session.clone(), k.events.clone(), k.last_seq, committed)
            });
        let (mut session, mut events, last_seq, mut newer) = kept.unwrap_or_default();
        // The commits kept after the state chain on from it; the log's tail follows them.
        let after = newer.last().map_or(last_seq, |(seq, _)| *seq);
        newer.extend(read::decoded_events_after(&self.db, session_id, after).await?);
        fold_in(&mut session, &mut events, newer);
        Ok(Loaded {
            conversation: Conversation::from_events(&events),
            session,
            events,
        })
    }

    pub(super) async fn execute(
        &self,
        session_id: &str,
        command: SessionCommand,
        run_id: Uuid,
    ) -> Result<(), AggregateError<SessionError>> {
        let done = self
            .store
            .execute_committed(session_id, command, Actor::Agent, &format!("run-{run_id}"))
            .await;
        // A refused or failed command may have met events this run has not seen: the next load
        // reads the log.
        match done {
            Ok(committed) => {
                self.keep_committed(session_id, committed, run_id);
                Ok(())
            }
            Err(e) => {
                self.keep_committed(session_id, Vec::new(), run_id);
                Err(e)
            }
        }
    }

    /// Keeps a command's committed events for `run`'s next load when they follow the kept state
    /// (and the commits kept after it) without a gap, so that load has nothing to read. They are
    /// folded there, once the step holding the kept events has let go of them. The commits kept
    /// after the state may be an earlier run's (its last, never loaded) or the participant's
    /// that triggered this run: each was appended at the sequence after the one before, so the
    /// chain has no gap whoever wrote it.
    pub(super) fn keep_committed(
        &self,
        session_id: &str,
        committed: Vec<(u64, SessionEvent)>,
        run: Uuid,
    ) {
        let mut kept = self
            .kept
            .lock()
            .expect("the harness cache is never poisoned");
        let Some(entry) = kept.get_mut(session_id) else {
            return;
        };
        let after = entry
            .committed
            .last()
            .map_or(entry.last_seq, |(seq, _)| *seq);
        if committed.first().map(|(seq, _)| *seq) != Some(after + 1) {
            entry.level_for = None;
            entry.committed.clear();
            return;
        }
        entry.committed.extend(committed);
        entry.level_for = Some(run);
    }
}

/// Folds `newer` (the events right after `events`, in order) into `session` and appends them;
/// the last one's sequence number, if there were any, and about how many bytes they add.
fn fold_in(
    session: &mut Session,
    events: &mut Arc<Vec<SessionEvent>>,
    newer: Vec<(u64, SessionEvent)>,
) -> Option<(u64, usize)> {
    let last = newer.last().map(|(seq, _)| *seq)?;
    let list = Arc::make_mut(events);
    let mut bytes = 0;
    for (_, event) in newer {
        // Their JSON's length, twice: once in the list, once folded into the state.
        bytes += 2 * serde_json::to_vec(&event).map_or(0, |json| json.len());
        session.apply(event.clone());
        list.push(event);
    }
    Some((last, bytes))
}
