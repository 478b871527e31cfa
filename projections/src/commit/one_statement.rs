//! PostgreSQL: the common batch written in one statement, with no `BEGIN` or `COMMIT`.
//!
//! Most batches are commands whose sessions' views the projector kept and that move no study
//! overview. Their writes do not depend on anything read back: the events, every state row
//! (guarded by its expected `last_seq`), the transcript and result rows and the
//! commit notes. One statement does all of it — data-modifying `WITH` clauses, each run to
//! completion, and a last `SELECT` that checks every event went in and every state row was still
//! where the fold started; if not, `interview_refuse_batch()` (migration 0012) raises, and the
//! statement — its own transaction — leaves nothing behind. The caller then commits the batch
//! the transaction path ([`crate::commit::group_commit`]), which sorts out the lost races and the stale views.
//!
//! Why: each statement is a round trip that wakes a backend, and a command alone made six or
//! seven (`BEGIN`, events, state, transcript, results, notify, `COMMIT`). Here it
//! is one, whatever the batch holds. SQLite has no data-modifying `WITH`, and its round trips
//! are to a thread in this process: it keeps the transaction path.

use cqrs_es::persist::PersistenceError;
use sqlx::PgConnection;

use crate::commit::batch::{Appended, FoldedFromKept};
use crate::commit::recent::RecentViews;
use crate::commit::view_writes;
use crate::commit::view_writes::NOTIFY_CHANNEL;
use crate::read_side::columns::{
    field_cells, result_cells, state_cells, transcript_cells, Cell, FIELD_COLUMNS, RESULT_COLUMNS,
    STATE_COLUMNS, TRANSCRIPT_COLUMNS,
};
use crate::store::log::NewEvent;

/// The most values one statement binds (PostgreSQL takes 65,535).
const MAX_VALUES: usize = 60_000;

use crate::store::log::{EVENT_COLUMNS, EVENT_VALUES};

/// Whether a batch is of the kind one statement commits: every command starts from a kept view,
/// none moves the overview, and the statement's values stay under PostgreSQL's limit.
pub(crate) fn fits(recent: &RecentViews, commands: &[Appended<'_>]) -> bool {
    let kept = commands.iter().all(|(events, moved)| {
        moved.is_none()
            && crate::commit::erasure::erasure_in(events).is_none()
            && events.first().is_some_and(|first| {
                recent
                    .kept_seq(&first.aggregate_id)
                    .is_some_and(|seq| seq + 1 == first.sequence)
            })
    });
    // At most: nine values an event, a transcript row an event, a state row (and its expected
    // sequence) and a results row a command, the channel and the notes.
    let events: usize = commands.iter().map(|(events, _)| events.len()).sum();
    let row = TRANSCRIPT_COLUMNS.len();
    let bound = events * (EVENT_VALUES + row)
        + commands.len() * (STATE_COLUMNS.len() + 1 + RESULT_COLUMNS.len())
        + 2;
    kept && bound <= MAX_VALUES
}

/// Commits `commands`, a batch that [`fits`] (the caller has checked), in one statement; `None`
/// when the statement refused it (nothing was written: the caller commits it through the transaction path; the
/// views it folded are dropped, so the transaction path folds them from the stored rows).
pub(crate) async fn commit(
    conn: &mut PgConnection,
    recent: &RecentViews,
    commands: &[Appended<'_>],
    announce: bool,
) -> Option<Vec<Result<(), PersistenceError>>> {
    let mut folded: Vec<FoldedFromKept> = Vec::with_capacity(commands.len());
    for (i, (events, _)) in commands.iter().enumerate() {
        // Evicted since `fits` looked: the transaction path folds them from their rows.
        folded.push(FoldedFromKept::fold(recent, i, events)?);
    }
    folded.sort_by(|a, b| a.session_id.cmp(b.session_id));
    // Events held in another event's row have none of their own (`shared_rows.rs`).
    let mut events: Vec<&NewEvent> = commands
        .iter()
        .flat_map(|c| c.0.iter())
        .filter(|e| e.has_row())
        .collect();
    // In one order on every process, so two batches touching the same sessions lock alike.
    events.sort_by(|a, b| (&a.aggregate_id, a.sequence).cmp(&(&b.aggregate_id, b.sequence)));
    let (sql, cells, notes) = statement(&events, &folded, announce)?;
    let mut q = sqlx::query::<sqlx::Postgres>(&sql);
    for e in &events {
        q = e.bind_row(q);
    }
    q = crate::read_side::columns::bind_all(q, cells);
    q = q.bind(NOTIFY_CHANNEL).bind(notes);
    match q.execute(conn).await {
        Ok(_) => {
            for f in folded {
                recent.keep(f.view);
            }
            Some(commands.iter().map(|_| Ok(())).collect())
        }
        // Refused by its own check, or for a value one command brought (the transaction path splits
        // the batch to find it): the statement wrote nothing, so the batch goes through the transaction path.
        Err(error) if refused(&error) => {
            tracing::debug!(
                commands = commands.len(),
                "the one-statement commit refused its batch"
            );
            None
        }
        Err(error) => {
            let error = crate::store::error::ProjectionError::Db(error);
            if crate::commit::batch_error::one_commands_fault(&error) {
                tracing::debug!(%error, "the one-statement commit failed on a value; the transaction path splits the batch");
                return None;
            }
            // The database down or overloaded, a deadlock, or the answer lost after the commit
            // was sent: writing the batch again could not help (and, were it committed, would
            // only collide with itself). Every command hears it, as from the transaction path.
            tracing::warn!(%error, commands = commands.len(), "a batch of commands failed");
            Some(
                commands
                    .iter()
                    .map(|_| Err(crate::commit::batch_error::batch_error(&error)))
                    .collect(),
            )
        }
    }
}

/// The statement's own check failed (`interview_refuse_batch()`, SQLSTATE `IR001`).
fn refused(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(e) if e.code().as_deref() == Some("IR001"))
}

/// The statement and the cells it binds after the events' nine values each (the notify
/// channel and the notes follow them), and the commit notes; `None` when they are more values
/// than one statement takes.
// Long by design: the statement's clauses built in the order their values are bound (events, state
// rows with their expected sequence, transcript rows, result rows, field rows, then the check and
// the notes),
// each numbering its placeholders from the count of cells pushed so far; split, that running count
// and the cells would be threaded through every helper and the binding order would not be visible
// in one place.
fn statement(
    events: &[&NewEvent],
    folded: &[FoldedFromKept],
    announce: bool,
) -> Option<(String, Vec<Cell>, Vec<String>)> {
    let mut cells: Vec<Cell> = Vec::new();
    let mut clauses: Vec<String> = Vec::new();
    let before = events.len() * EVENT_VALUES;
    let rows: Vec<String> = (1..=events.len())
        .map(|i| row(i * EVENT_VALUES, EVENT_VALUES))
        .collect();
    clauses.push(format!(
        "ev AS (INSERT INTO events ({EVENT_COLUMNS}) \
         VALUES {} ON CONFLICT DO NOTHING RETURNING 1)",
        rows.join(", ")
    ));

    // Every state row, guarded by the `last_seq` its fold started from.
    let width = STATE_COLUMNS.len() + 1;
    let rows: Vec<String> = folded
        .iter()
        .map(|f| {
            cells.extend(state_cells(&f.view));
            cells.push(Cell::Int(Some(f.expected)));
            row(before + cells.len(), width)
        })
        .collect();
    clauses.push(format!(
        "st AS ({})",
        view_writes::update_states_sql(&rows.join(", "), "1")
    ));

    let transcript: Vec<String> = folded
        .iter()
        .flat_map(|f| f.rows.transcript.iter().map(move |t| (f.session_id, t)))
        .map(|(id, t)| {
            cells.extend(transcript_cells(id, t));
            row(before + cells.len(), TRANSCRIPT_COLUMNS.len())
        })
        .collect();
    if !transcript.is_empty() {
        clauses.push(format!(
            "tr AS ({})",
            view_writes::insert_transcript_sql(&transcript.join(", "))
        ));
    }
    let results: Vec<String> = folded
        .iter()
        .filter_map(|f| result_cells(&f.view))
        .map(|r| {
            cells.extend(r);
            row(before + cells.len(), RESULT_COLUMNS.len())
        })
        .collect();
    if !results.is_empty() {
        clauses.push(format!(
            "rs AS ({})",
            view_writes::upsert_results_sql(&results.join(", "))
        ));
    }
    let fields: Vec<String> = folded
        .iter()
        .flat_map(|f| view_writes::changed_fields(f.session_id, &f.rows))
        .map(|(id, field, value)| {
            cells.extend(field_cells(id, field, value));
            row(before + cells.len(), FIELD_COLUMNS.len())
        })
        .collect();
    if !fields.is_empty() {
        clauses.push(format!(
            "fl AS ({})",
            view_writes::upsert_fields_sql(&fields.join(", "))
        ));
    }
    // The notes go out at commit, only when the checks pass (a refused statement sends none).
    let channel = before + cells.len() + 1;
    let sql = format!(
        "WITH {} SELECT CASE WHEN (SELECT count(*) FROM ev) = {} AND (SELECT count(*) FROM st) = {} \
         THEN (SELECT count(*) FROM (SELECT pg_notify(${channel}, note) FROM unnest(${}::text[]) AS note) AS sent) \
         ELSE interview_refuse_batch() END",
        clauses.join(", "),
        events.len(),
        folded.len(),
        channel + 1
    );
    // Without `announce`, no note and so no NOTIFY: the statement is the same, nothing to unnest.
    let notes = folded
        .iter()
        .filter(|_| announce)
        .map(|f| format!("{} {}", f.session_id, f.view.last_seq))
        .collect();
    // More fields than [`fits`] could know of before folding: the transaction path takes them.
    (before + cells.len() + 2 <= MAX_VALUES).then_some((sql, cells, notes))
}

/// `($n, …)` for the `width` values just pushed, `bound` being how many are bound so far.
fn row(bound: usize, width: usize) -> String {
    let first = bound - width + 1;
    let cells: Vec<String> = (first..=bound).map(|i| format!("${i}")).collect();
    format!("({})", cells.join(", "))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_row_numbers_the_values_just_pushed() {
        assert_eq!(super::row(3, 3), "($1, $2, $3)");
        assert_eq!(super::row(10, 2), "($9, $10)");
    }
}
