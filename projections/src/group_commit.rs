//! Group commit for the embedded store.
//!
//! SQLite has one writer, and every statement of a transaction is a trip to its thread, so the
//! number of trips bounds the commands per second. When several commands (of different
//! sessions) are waiting, one task commits them together: one `BEGIN`/`COMMIT`, all their
//! events in one insert, then each command's views. A command that loses an optimistic-lock
//! race inside a batch fails alone (SQLite undoes just the failed statement); any other error
//! fails the whole batch, which rolls back, and every command in it gets the error.
//!
//! An idle server sends each command through on its own, so a single client waits no longer.

use std::sync::Arc;

use cqrs_es::persist::{PersistenceError, SerializedEvent};
use sqlx::{Sqlite, SqlitePool, Transaction};
use tokio::sync::{mpsc, oneshot};

use crate::projector::{fold_in_hand, fold_pending, insert_events, RecentViews};
use crate::views::SessionStateView;
use crate::ProjectionError;

/// The most commands one transaction takes.
const MAX_BATCH: usize = 64;

pub(crate) struct Job {
    events: Vec<SerializedEvent>,
    reply: oneshot::Sender<Result<(), PersistenceError>>,
}

/// The sending side; the committing task ends when it is dropped.
#[derive(Clone, Debug)]
pub(crate) struct GroupCommit(mpsc::UnboundedSender<Job>);

impl GroupCommit {
    /// Starts the committing task on the current Tokio runtime.
    pub(crate) fn start(pool: SqlitePool, recent: Arc<RecentViews>) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(pool, recent, rx));
        GroupCommit(tx)
    }

    /// Commits `events` with whatever else is waiting; returns once they are committed (or not).
    pub(crate) async fn submit(&self, events: &[SerializedEvent]) -> Result<(), PersistenceError> {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            events: events.to_vec(),
            reply,
        };
        if self.0.send(job).is_err() {
            return Err(stopped());
        }
        answer.await.unwrap_or_else(|_| Err(stopped()))
    }
}

fn stopped() -> PersistenceError {
    PersistenceError::UnknownError("the database writer has stopped".into())
}

async fn run(pool: SqlitePool, recent: Arc<RecentViews>, mut rx: mpsc::UnboundedReceiver<Job>) {
    while let Some(first) = rx.recv().await {
        let mut jobs = vec![first];
        while jobs.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        let outcomes = commit(&pool, &recent, &jobs).await;
        for (job, outcome) in jobs.into_iter().zip(outcomes) {
            // A caller that went away no longer needs its answer.
            let _ = job.reply.send(outcome);
        }
    }
}

/// One transaction for the whole batch; an answer per job.
async fn commit(
    pool: &SqlitePool,
    recent: &RecentViews,
    jobs: &[Job],
) -> Vec<Result<(), PersistenceError>> {
    match try_commit(pool, recent, jobs).await {
        Ok(outcomes) => outcomes,
        // The transaction was dropped, so rolled back: nothing of the batch is written.
        Err(error) => {
            tracing::warn!(%error, commands = jobs.len(), "a batch of commands failed");
            let unavailable =
                matches!(&error, ProjectionError::Db(e) if crate::db::is_unavailable(e));
            jobs.iter()
                .map(|_| {
                    let message = error.to_string();
                    Err(if unavailable {
                        PersistenceError::ConnectionError(message.into())
                    } else {
                        PersistenceError::UnknownError(message.into())
                    })
                })
                .collect()
        }
    }
}

async fn try_commit(
    pool: &SqlitePool,
    recent: &RecentViews,
    jobs: &[Job],
) -> Result<Vec<Result<(), PersistenceError>>, ProjectionError> {
    let mut tx = pool.begin().await?;
    let mut outcomes: Vec<Result<(), PersistenceError>> = jobs.iter().map(|_| Ok(())).collect();
    let all: Vec<&SerializedEvent> = jobs.iter().flat_map(|j| j.events.iter()).collect();
    match insert_events(&mut tx, all.into_iter()).await {
        Ok(()) => {}
        // Someone's sequence is taken: find whose, one command at a time.
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
            for (job, outcome) in jobs.iter().zip(outcomes.iter_mut()) {
                match insert_events(&mut tx, job.events.iter()).await {
                    Ok(()) => {}
                    Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                        *outcome = Err(PersistenceError::OptimisticLockError)
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Err(e) => return Err(e.into()),
    }
    let mut folded: Vec<SessionStateView> = Vec::with_capacity(jobs.len());
    for (job, outcome) in jobs.iter().zip(outcomes.iter_mut()) {
        if outcome.is_err() {
            continue;
        }
        if let Some(view) = project(&mut tx, recent, &job.events).await? {
            folded.push(view);
        }
    }
    tx.commit().await?;
    for view in folded {
        recent.keep(view);
    }
    Ok(outcomes)
}

/// Folds one command's events into its views, from the kept view when it is the one just before.
async fn project(
    tx: &mut Transaction<'_, Sqlite>,
    recent: &RecentViews,
    events: &[SerializedEvent],
) -> Result<Option<SessionStateView>, ProjectionError> {
    let Some(first) = events.first() else {
        return Ok(None);
    };
    let kept = recent
        .take(&first.aggregate_id)
        .filter(|view| view.last_seq + 1 == first.sequence as u64);
    if let Some(view) = kept {
        if let Some(view) = fold_in_hand(tx, view, events, false).await? {
            return Ok(Some(view));
        }
    }
    Ok(fold_pending(tx, &first.aggregate_id, false).await?.1)
}
