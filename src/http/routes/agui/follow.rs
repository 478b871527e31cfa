//! A run's answer stream: RUN_STARTED, then what the session's feed brings — the interviewer's
//! words as they stream and its committed events, folded into the run's view — until the
//! interviewer has had its turn, then the pending interaction, a STATE_SNAPSHOT and RUN_FINISHED
//! (or RUN_ERROR when the run times out, the process stops, or the log cannot be read).

use std::time::Duration;

use actix_web::web::{self, Bytes};
use interview_projections::{NewRows, SessionStateView};
use interview_session::{SessionEvent, SessionStatus};
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use super::events::{self, Translator};
use super::history::Snapshot;
use super::input::RunAgentInput;
use crate::live::feed::{Fed, FeedError, SessionFeed};
use crate::state::AppState;

/// How long a run may wait for the interviewer before it ends with RUN_ERROR.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a run ended early: the client went away, or the run ends with RUN_ERROR.
type Ended = &'static str;

/// The session's state view as of the run's start, with every event the run has seen folded
/// in by the projector's own fold: what `RUN_FINISHED` and its snapshot are made of.
pub(super) struct RunView {
    pub(super) view: SessionStateView,
}

impl RunView {
    fn fold(&mut self, seq: u64, event: &SessionEvent) {
        self.view.apply(seq, event, &mut NewRows::default());
    }

    /// The interviewer has had its turn: the session waits for the participant or has ended.
    fn turn_is_over(&self) -> bool {
        !matches!(
            self.view.status,
            SessionStatus::Created | SessionStatus::Active
        )
    }
}

/// Streams one run: the session's earlier messages when the client lacks them (`snapshot`),
/// then live deltas and committed events until the interviewer has had its turn.
pub(super) async fn pump(
    state: web::Data<AppState>,
    session_id: String,
    input: RunAgentInput,
    folded: RunView,
    feed: SessionFeed,
    tx: mpsc::Sender<Bytes>,
    snapshot: Option<Snapshot>,
) {
    let (thread, run_id) = (input.thread_id.as_str(), input.run_id.as_str());
    let mut opening = vec![events::run_started(thread, run_id)];
    let t = match snapshot {
        Some(snapshot) => {
            let (t, messages) = Translator::after_snapshot(snapshot);
            opening.push(messages);
            t
        }
        None => Translator::new(input.messages.iter().map(|m| m.to_value()).collect()),
    };
    if send_all(&tx, opening).await.is_err() {
        return;
    }
    let mut run = Follow {
        state: &state,
        session_id: &session_id,
        feed,
        folded,
        t,
        tx: &tx,
        deadline: tokio::time::Instant::now() + RUN_TIMEOUT,
        draining: state.draining.subscribe(),
    };
    let outcome = run.follow().await;
    let mut tail = run.t.close_open();
    match outcome {
        Ok(()) => {
            let view = &run.folded.view;
            if let Some(pending) = &view.pending_interaction {
                tail.extend(run.t.announce(pending));
            }
            tail.push(events::snapshot(view));
            tail.push(events::run_finished(thread, run_id, view));
        }
        Err("gone") => return,
        Err("restarting") => tail.push(events::run_error(
            "The interview service is restarting. Please try again in a moment.",
            "unavailable",
        )),
        Err("timeout") => tail.push(events::run_error(
            "The interviewer is taking longer than usual. Please try again in a moment.",
            "timeout",
        )),
        Err(_) => tail.push(events::run_error(
            "Something went wrong on our side. Please try again in a moment.",
            "unavailable",
        )),
    }
    let _ = send_all(&tx, tail).await;
}

/// One run following its session.
struct Follow<'a> {
    state: &'a AppState,
    session_id: &'a str,
    feed: SessionFeed,
    folded: RunView,
    t: Translator,
    tx: &'a mpsc::Sender<Bytes>,
    deadline: tokio::time::Instant,
    draining: watch::Receiver<bool>,
}

impl Follow<'_> {
    /// Follows the session until the interviewer has had its turn.
    ///
    /// The log is read only when a commit's events did not come with its note (another
    /// process's commit, a lagging subscriber: the feed reads those itself), or by the safety
    /// net of [`Follow::wait`]; the run ends when this process's interviewer says it is idle (or,
    /// for a run elsewhere, when a commit leaves the session waiting). Nothing is read at the
    /// start: the feed was subscribed before the view was read, so every commit the view does
    /// not hold comes as a note.
    async fn follow(&mut self) -> Result<(), Ended> {
        let mut read_log = false;
        loop {
            if read_log {
                self.read_log().await?;
            }
            // Idle: no run here, and the events folded leave the session waiting. Nothing is
            // read for it: this process's commits come with their notes, in order. The run is
            // asked first, then the notes already queued are taken: every commit a run made
            // before it went idle was announced before, so the view is not judged without them
            // (a step committed in one go, a widget with no words, can be over before the
            // first look — and the view still says the session waits, as it did before the
            // participant's own command).
            let running = self.state.interviewer.is_running(self.session_id);
            read_log = self.take_queued().await?;
            if read_log {
                continue;
            }
            if !running && self.folded.turn_is_over() {
                // On PostgreSQL a commit made by another process meanwhile may not have been
                // announced yet: the log's tail is read once more. The embedded store has one
                // process.
                if !self.state.db.is_postgres() || !self.read_log().await? {
                    return Ok(());
                }
                continue;
            }
            read_log = self.wait().await?;
        }
    }

    /// Reads the log past what the run has folded and forwards it; true when there was any.
    async fn read_log(&mut self) -> Result<bool, Ended> {
        // An utterance said whole in another process's commit comes with its words, queued
        // behind the events up to its claim (`take_queued` hands them on next).
        let (any, fed) = self.feed.read_new().await.map_err(|_| "read")?;
        self.forward(fed).await?;
        Ok(any)
    }

    /// Forwards the notes already queued; true when the feed lagged and the log must be read.
    async fn take_queued(&mut self) -> Result<bool, Ended> {
        loop {
            match self.feed.try_next().await {
                Ok(Some(fed)) => self.forward(fed).await?,
                Ok(None) => return Ok(false),
                Err(FeedError::Lagged) => return Ok(true),
                Err(FeedError::Read(_) | FeedError::Closed) => return Err("read"),
            }
        }
    }

    /// Waits for something that moves the turn on — events, or the interviewer going idle —
    /// forwarding deltas meanwhile; true when the log must be read (the feed lagged, or a
    /// second passed: a safety net only, notes are not lost within a process, but a NOTIFY
    /// from another process can be).
    async fn wait(&mut self) -> Result<bool, Ended> {
        let recheck = tokio::time::sleep(Duration::from_secs(1));
        tokio::pin!(recheck);
        loop {
            let note = tokio::select! {
                note = self.feed.next_note() => note,
                _ = &mut recheck => return Ok(true),
                _ = tokio::time::sleep_until(self.deadline) => return Err("timeout"),
                // The process is stopping: the run ends now so the client retries elsewhere.
                changed = self.draining.changed() => {
                    if changed.is_err() || *self.draining.borrow() {
                        return Err("restarting");
                    }
                    continue;
                }
            };
            // Events move the turn on, and the interviewer's idleness may end it: look again.
            // A delta, or a commit already folded, does neither.
            match self.feed.take(note).await {
                Ok(Fed::Events(events)) if events.is_empty() => {}
                Ok(fed @ (Fed::Events(_) | Fed::Idle)) => {
                    self.forward(fed).await?;
                    return Ok(false);
                }
                Ok(fed @ Fed::Delta { .. }) => self.forward(fed).await?,
                Err(FeedError::Lagged) => return Ok(true),
                Err(FeedError::Read(_) | FeedError::Closed) => return Err("read"),
            }
        }
    }

    /// Folds what the feed brought into the run's view and sends it as AG-UI events.
    async fn forward(&mut self, fed: Fed) -> Result<(), Ended> {
        match fed {
            Fed::Delta {
                message_id,
                content,
            } => send_all(self.tx, self.t.delta(&message_id, &content))
                .await
                .map_err(|_| "gone"),
            Fed::Events(events) => {
                for (seq, e) in &events {
                    self.folded.fold(*seq, e);
                    send_all(self.tx, self.t.event(e))
                        .await
                        .map_err(|_| "gone")?;
                }
                Ok(())
            }
            Fed::Idle => Ok(()),
        }
    }
}

async fn send_all(tx: &mpsc::Sender<Bytes>, events: Vec<Value>) -> Result<(), ()> {
    for e in events {
        tx.send(frame(&e)).await.map_err(|_| ())?;
    }
    Ok(())
}

fn frame(event: &Value) -> Bytes {
    Bytes::from(format!("data: {event}\n\n"))
}
