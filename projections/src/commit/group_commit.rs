//! Group commit: the commands waiting to be written share one transaction.
//!
//! Every statement is a round trip (on SQLite, to its single writer thread), and a command
//! needs several: its events, its state row, its transcript rows, the commit. When
//! several commands (of different sessions — one session's commands are serialized before they
//! get here) are waiting, one task writes them together with a fixed number of statements: one
//! `BEGIN`/`COMMIT`, all events in one insert, every state row in one guarded update, all
//! transcript rows in one insert, and on PostgreSQL one statement announcing
//! every commit. An idle server sends each command through on its own, so a single client waits
//! no longer.
//!
//! A command whose sequence numbers are taken (it lost an optimistic-lock race, e.g. to another
//! process) fails alone: its events are not inserted (`ON CONFLICT DO NOTHING`), or removed again
//! within the transaction when only some were. A view the projector kept that turns out stale
//! is folded from the stored row instead. Any other error rolls the batch back and it is committed
//! again in halves, down to single commands, so a command the database refuses fails alone.

use std::collections::HashSet;
use std::sync::Arc;

use cqrs_es::persist::PersistenceError;
use tokio::sync::{mpsc, oneshot};

use crate::commit::batch::{Appended, FoldedFromKept};
use crate::commit::batch_error::{batch_error, one_commands_fault};
use crate::commit::pending::fold_pending;
use crate::commit::recent::RecentViews;
use crate::read_side::overview::{self, NewContribution};
use crate::read_side::views::SessionStateView;
use crate::store::backend::{Backend, Statement};
use crate::store::db::KeptConnection;
use crate::store::log::NewEvent;
use crate::store::statements::placeholders;
use crate::{commit::view_writes, on_db, store::db::Db, store::error::ProjectionError};

/// The most commands one transaction takes.
const MAX_BATCH: usize = 64;

/// Batches in flight at once on PostgreSQL. One at a time leaves the database idle while each
/// commit waits for its WAL flush, and the next batch waits behind it. Measured side by side
/// (docs/benchmarks.md): two gave a quarter more commands/s at 64 sessions than one; four gave
/// no more, and smaller batches — more commits, more PostgreSQL CPU per turn. SQLite has one
/// writer: a second transaction would only wait for it.
const PG_COMMITTERS: usize = 2;

struct Job {
    events: Vec<NewEvent>,
    moved: Option<NewContribution>,
    reply: oneshot::Sender<Result<(), PersistenceError>>,
    /// When it was submitted (how long it waited for a committer is measured).
    queued: std::time::Instant,
}

/// The sending side; the committing task ends when it is dropped.
#[derive(Clone, Debug)]
pub(crate) struct GroupCommit(mpsc::UnboundedSender<Job>);

impl GroupCommit {
    /// Starts the committing task on the current Tokio runtime.
    pub(crate) fn start(db: Db, recent: Arc<RecentViews>, peers: crate::processes::Peers) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let committers = if db.is_postgres() { PG_COMMITTERS } else { 1 };
        let rx = Arc::new(tokio::sync::Mutex::new(rx));
        for _ in 0..committers {
            tokio::spawn(run(db.clone(), recent.clone(), peers.clone(), rx.clone()));
        }
        GroupCommit(tx)
    }

    /// Commits `events` with whatever else is waiting; returns once they are committed (or not).
    pub(crate) async fn submit(
        &self,
        events: &[NewEvent],
        moved: Option<NewContribution>,
    ) -> Result<(), PersistenceError> {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            events: events.to_vec(),
            moved,
            reply,
            queued: std::time::Instant::now(),
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

async fn run(
    db: Db,
    recent: Arc<RecentViews>,
    peers: crate::processes::Peers,
    rx: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Job>>>,
) {
    let mut held = KeptConnection::default();
    // A pool too small to spare a connection per committer and two more for everything else
    // (reads, the transaction path) lends the committers theirs for one batch at a time.
    let holds = match &db {
        Db::Postgres(pool) => pool.options().get_max_connections() as usize >= PG_COMMITTERS + 2,
        Db::Sqlite(_) => false,
    };
    loop {
        let gathered = gather(&rx);
        tokio::pin!(gathered);
        let jobs = match (&db, held.is_held()) {
            (Db::Postgres(pool), true) => tokio::select! {
                biased;
                // A clean stop closes the pool and waits for every connection to come back.
                () = pool.close_event() => {
                    held.release();
                    gathered.await
                }
                // Unused for a second: back to the pool, whose ping decides whether it is still
                // good when it is next handed out. A timer only while there is nothing to do.
                () = tokio::time::sleep(crate::store::db::PING_AFTER_IDLE) => {
                    held.release();
                    gathered.await
                }
                jobs = &mut gathered => jobs,
            },
            _ => gathered.await,
        };
        let Some(jobs) = jobs else {
            return;
        };
        for job in &jobs {
            metrics::histogram!("interview_turn_stage_seconds", "stage" => "commit_queue")
                .record(job.queued.elapsed().as_secs_f64());
        }
        let commands: Vec<Appended> = jobs
            .iter()
            .map(|j| (j.events.as_slice(), j.moved.as_ref()))
            .collect();
        let started = std::time::Instant::now();
        let outcomes = commit(&db, &recent, &commands, &mut held, peers.may_listen()).await;
        if !holds {
            held.release();
        }
        metrics::histogram!("interview_commit_batch_commands").record(commands.len() as f64);
        metrics::histogram!("interview_commit_seconds").record(started.elapsed().as_secs_f64());
        for (job, outcome) in jobs.into_iter().zip(outcomes) {
            // A caller that went away no longer needs its answer.
            let _ = job.reply.send(outcome);
        }
    }
}

/// The next batch: the first command to come and whatever is queued behind it; `None` once
/// every sender is gone. One committer gathers at a time; it lets go of the queue before it
/// commits, so the next batch gathers while this one is in flight.
async fn gather(rx: &tokio::sync::Mutex<mpsc::UnboundedReceiver<Job>>) -> Option<Vec<Job>> {
    let mut rx = rx.lock().await;
    let mut jobs = vec![rx.recv().await?];
    while jobs.len() < MAX_BATCH {
        match rx.try_recv() {
            Ok(job) => jobs.push(job),
            Err(_) => break,
        }
    }
    Some(jobs)
}

/// Appends each command's events and folds them into the views, all in one transaction; an
/// answer per command.
///
/// When the transaction fails for a reason that may belong to one command (a value the
/// database refuses, say), the batch is split in two and each half is committed on its own, and
/// so on down to single commands: the command at fault fails alone and the others are written.
/// Any other error (the database down or overloaded, a deadlock — a lost race, retried by the
/// callers) fails the whole batch at once: splitting would not help. `announce`: the commits
/// are NOTIFYed to other processes (PostgreSQL; `crate::processes::Peers`).
pub(crate) async fn commit(
    db: &Db,
    recent: &RecentViews,
    commands: &[Appended<'_>],
    held: &mut KeptConnection,
    announce: bool,
) -> Vec<Result<(), PersistenceError>> {
    if let Db::Postgres(pool) = db {
        if crate::commit::one_statement::fits(recent, commands) {
            let conn = match held.get(pool).await {
                Ok(conn) => conn,
                // No connection to be had (the database down, the pool closed): every command
                // hears it now, rather than after the transaction path waited for the pool again.
                Err(error) => {
                    let error = ProjectionError::Db(error);
                    return commands.iter().map(|_| Err(batch_error(&error))).collect();
                }
            };
            if let Some(outcomes) =
                crate::commit::one_statement::commit(conn, recent, commands, announce).await
            {
                if outcomes.iter().any(Result::is_err) {
                    // The connection may have broken with the batch: back to the pool, which
                    // tests it on release; the next batch takes another.
                    held.release();
                }
                metrics::counter!("interview_commits_total", "path" => "one_statement")
                    .increment(1);
                return outcomes;
            }
        }
        // The transaction path takes its connection from the pool: the held one goes back meanwhile,
        // so a committer never needs two.
        held.release();
    }
    metrics::counter!("interview_commits_total", "path" => "transaction").increment(1);
    let postgres = db.is_postgres();
    let result = on_db!(write(db), |pool| {
        try_commit(pool, recent, commands, postgres, announce).await
    });
    match result {
        Ok(outcomes) => outcomes,
        // The transaction was dropped, so rolled back: nothing of the batch is written.
        Err(error) if commands.len() > 1 && one_commands_fault(&error) => {
            tracing::warn!(%error, commands = commands.len(), "a batch of commands failed; committing its halves apart");
            let (left, right) = commands.split_at(commands.len() / 2);
            let mut outcomes = Box::pin(commit(db, recent, left, held, announce)).await;
            outcomes.extend(Box::pin(commit(db, recent, right, held, announce)).await);
            outcomes
        }
        Err(error) => {
            if commands.len() > 1 {
                tracing::warn!(%error, commands = commands.len(), "a batch of commands failed");
            }
            commands.iter().map(|_| Err(batch_error(&error))).collect()
        }
    }
}

/// The sequences of the rows a command writes.
fn row_sequences(command: &[NewEvent]) -> Vec<i64> {
    command
        .iter()
        .filter_map(|e| e.row_sequence)
        .map(|seq| seq as i64)
        .collect()
}

/// Deletes events a failed command inserted in this transaction.
async fn take_back<'c, DB: Backend>(
    tx: &mut sqlx::Transaction<'c, DB>,
    aggregate_id: &str,
    sequences: &[i64],
) -> Result<(), sqlx::Error> {
    for seq in sequences {
        sqlx::query(include_str!("sql/take_back_event.sql"))
            .arg(interview_session::AGGREGATE_TYPE)
            .arg(aggregate_id)
            .arg(*seq)
            .execute_in(tx)
            .await?;
    }
    Ok(())
}

/// Commits a batch of commands in one transaction: (1) every command's events, (2) the views
/// they change, (3) the study overview, (4) the notices they announce; then keeps the folded
/// views in memory. Answers each command's outcome (a command whose sequences were taken lost a
/// race; the others commit).
async fn try_commit<DB: Backend>(
    pool: &sqlx::Pool<DB>,
    recent: &RecentViews,
    commands: &[Appended<'_>],
    postgres: bool,
    announce: bool,
) -> Result<Vec<Result<(), PersistenceError>>, ProjectionError> {
    let mut tx = pool.begin().await?;
    let mut outcomes: Vec<Result<(), PersistenceError>> = commands.iter().map(|_| Ok(())).collect();
    insert_events(&mut tx, commands, &mut outcomes).await?;
    let folded =
        fold_and_write_views(&mut tx, recent, commands, &outcomes, postgres, announce).await?;
    // Stage 3: the study overview, for the commands that moved it (their sessions are distinct).
    let moved: Vec<NewContribution> = commands
        .iter()
        .zip(&outcomes)
        .filter(|(_, outcome)| outcome.is_ok())
        .filter_map(|((_, moved), _)| moved.cloned())
        .collect();
    overview::write(&mut tx, &moved).await?;
    // Stage 4: what the commands announce (`crate::notices`), last: its per-study locks are
    // taken after every other lock the transaction needs.
    let notices: Vec<_> = moved
        .iter()
        .flat_map(NewContribution::new_notices)
        .collect();
    crate::notices::append(&mut tx, &notices).await?;
    tx.commit().await?;
    for view in folded {
        recent.keep(view);
    }
    // Once an erasure is committed, its session's key may not stay in memory (a reader may have
    // kept it again while the transaction ran).
    for ((command, _), outcome) in commands.iter().zip(&outcomes) {
        if outcome.is_ok() && crate::commit::erasure::erasure_in(command).is_some() {
            crate::store::keys::erased(&command[0].aggregate_id);
        }
    }
    Ok(outcomes)
}

/// Stage 1: every command's events in one insert; a taken sequence is skipped, not an error: that
/// command's `outcome` becomes a lost race and the events it did get are taken back. An erasure
/// rewrites the events it covers here, in the transaction that records it.
async fn insert_events<DB: Backend>(
    tx: &mut sqlx::Transaction<'_, DB>,
    commands: &[Appended<'_>],
    outcomes: &mut [Result<(), PersistenceError>],
) -> Result<(), ProjectionError> {
    use crate::store::backend::ReadColumn;
    // In one order on every process, so two batches touching the same sessions lock alike.
    // Events held in another event's row have none of their own (`shared_rows.rs`).
    let mut all: Vec<&NewEvent> = commands
        .iter()
        .flat_map(|c| c.0.iter())
        .filter(|e| e.has_row())
        .collect();
    all.sort_by(|a, b| (&a.aggregate_id, a.sequence).cmp(&(&b.aggregate_id, b.sequence)));
    let mut inserted: HashSet<(String, i64)> = HashSet::new();
    for chunk in all.chunks(4_000) {
        let sql = format!(
            "INSERT INTO events ({}) VALUES {} ON CONFLICT DO NOTHING RETURNING aggregate_id, sequence",
            crate::store::log::EVENT_COLUMNS,
            placeholders::<DB>(chunk.len(), crate::store::log::EVENT_VALUES)
        );
        let mut q = sqlx::query(&sql);
        for e in chunk {
            q = e.bind_row(q);
        }
        for row in q.fetch_all_in(tx).await? {
            inserted.insert((row.read(0)?, row.read(1)?));
        }
    }
    for ((command, _), outcome) in commands.iter().zip(outcomes.iter_mut()) {
        let rows = row_sequences(command);
        let ours: Vec<i64> = rows
            .iter()
            .copied()
            .filter(|seq| inserted.contains(&(command[0].aggregate_id.clone(), *seq)))
            .collect();
        if ours.len() == rows.len() {
            continue;
        }
        *outcome = Err(PersistenceError::OptimisticLockError);
        // Only some of its sequences were free: take back the ones it got.
        take_back(tx, &command[0].aggregate_id, &ours).await?;
    }
    for ((command, _), outcome) in commands.iter().zip(outcomes.iter_mut()) {
        if let (Some(erasure), Ok(())) = (crate::commit::erasure::erasure_in(command), &outcome) {
            match crate::commit::erasure::rewrite(tx, &command[0].aggregate_id, erasure).await {
                Ok(()) => {}
                // The log moved under the erasure: that command alone fails, as a lost race,
                // and its events are taken back.
                Err(ProjectionError::ErasureMismatch { .. }) => {
                    *outcome = Err(PersistenceError::OptimisticLockError);
                    take_back(tx, &command[0].aggregate_id, &row_sequences(command)).await?;
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// Stage 2: the views of the commands that committed, folded in memory from a kept view where
/// there is one (written in batches), else from the stored rows (`fold_pending`). Answers the
/// folded views, to keep once the transaction commits.
async fn fold_and_write_views<DB: Backend>(
    tx: &mut sqlx::Transaction<'_, DB>,
    recent: &RecentViews,
    commands: &[Appended<'_>],
    outcomes: &[Result<(), PersistenceError>],
    postgres: bool,
    announce: bool,
) -> Result<Vec<SessionStateView>, ProjectionError> {
    let mut fast: Vec<FoldedFromKept> = Vec::new();
    let mut slow: Vec<usize> = Vec::new();
    for (i, (command, _)) in commands.iter().enumerate() {
        if command.is_empty() || outcomes[i].is_err() {
            continue;
        }
        match FoldedFromKept::fold(recent, i, command) {
            Some(f) => fast.push(f),
            None => slow.push(i),
        }
    }
    fast.sort_by(|a, b| a.session_id.cmp(b.session_id));
    let states: Vec<(i64, &SessionStateView)> =
        fast.iter().map(|f| (f.expected, &f.view)).collect();
    let written = view_writes::update_states(tx, &states).await?;
    let (fast, stale): (Vec<FoldedFromKept>, Vec<FoldedFromKept>) = fast
        .into_iter()
        .partition(|f| written.contains(f.session_id));
    slow.extend(stale.iter().map(|f| f.command));
    view_writes::write_rows(tx, &fast).await?;
    if postgres && announce && !fast.is_empty() {
        let commits: Vec<(&str, u64)> = fast
            .iter()
            .map(|f| (f.session_id, f.view.last_seq))
            .collect();
        view_writes::notify(tx, &commits).await?;
    }
    let mut folded: Vec<SessionStateView> = fast.into_iter().map(|f| f.view).collect();
    for i in slow {
        // A stale view may have missed events that moved the overview (written by another
        // process, or rolled back by a rebuild racing a command): folded again here, the session
        // is recomputed unless the command brings its own contribution.
        let (events, moved) = commands[i];
        if let Some(view) = fold_pending(
            tx,
            &events[0].aggregate_id,
            postgres,
            moved.is_none(),
            announce,
        )
        .await?
        .1
        {
            folded.push(view);
        }
    }
    Ok(folded)
}
