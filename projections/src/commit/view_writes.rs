//! The statements that write folded views, each for many sessions at once: a batch of commands
//! writes its state rows in one guarded update, its transcript rows in one insert, the fields
//! it changed in one upsert, and announces its commits in one statement. Generic over the backend: the SQL text is
//! the same on both (numbered placeholders, `UPDATE … FROM (VALUES …)`, `RETURNING`).

use std::collections::HashSet;

use serde_json::Value;

use crate::read_side::columns::{
    bind_all, field_cells, result_cells, state_cells, transcript_cells, FIELD_COLUMNS,
    RESULT_COLUMNS, STATE_COLUMNS, TRANSCRIPT_COLUMNS,
};
use crate::store::statements::placeholders;

/// The PostgreSQL NOTIFY channel announcing `<session id> <last sequence>` after each projection.
pub const NOTIFY_CHANNEL: &str = "interview_session_events";
use crate::commit::batch::FoldedFromKept;
use crate::read_side::views::{NewRows, SessionStateView, TranscriptRow};
use crate::store::backend::{Backend, Statement};

/// Bound values per statement: SQLite takes at most 32,766, PostgreSQL 65,535.
const VALUES_PER_STATEMENT: usize = 30_000;

/// Rows of `columns` values that fit one statement.
fn rows_per_statement(columns: usize) -> usize {
    VALUES_PER_STATEMENT / columns
}

/// The guarded update of state rows from `values` (rows of every state column and then the
/// expected `last_seq`), returning `returning` for each row written.
pub(crate) fn update_states_sql(values: &str, returning: &str) -> String {
    // VALUES columns are named column1… on both backends; the last is the expected last_seq.
    let width = STATE_COLUMNS.len() + 1;
    let set: Vec<String> = STATE_COLUMNS
        .iter()
        .enumerate()
        .skip(1)
        .map(|(i, c)| format!("{c} = v.column{}", i + 1))
        .collect();
    format!(
        "UPDATE session_state SET {} FROM (VALUES {values}) AS v \
         WHERE session_state.session_id = v.column1 AND session_state.last_seq = v.column{width} \
         RETURNING {returning}",
        set.join(", ")
    )
}

/// Writes each view whose stored row is still at its expected `last_seq`; returns the ids of
/// the sessions written (the others are stale and left untouched).
pub(crate) async fn update_states<'c, DB: Backend>(
    tx: &mut sqlx::Transaction<'c, DB>,
    views: &[(i64, &SessionStateView)],
) -> Result<HashSet<String>, sqlx::Error> {
    use crate::store::backend::ReadColumn;
    let mut written = HashSet::new();
    let width = STATE_COLUMNS.len() + 1;
    for chunk in views.chunks(rows_per_statement(width)) {
        let sql = update_states_sql(
            &placeholders::<DB>(chunk.len(), width),
            "session_state.session_id",
        );
        let mut q = sqlx::query(&sql);
        for (expected, view) in chunk {
            q = bind_all(q, state_cells(view)).arg(*expected);
        }
        for row in q.fetch_all_in(tx).await? {
            written.insert(row.read::<String>(0)?);
        }
    }
    Ok(written)
}

/// Appends transcript rows from `values` (a row already there is left as it is).
pub(crate) fn insert_transcript_sql(values: &str) -> String {
    format!(
        "INSERT INTO transcript ({}) VALUES {values} ON CONFLICT (session_id, seq) DO NOTHING",
        TRANSCRIPT_COLUMNS.join(", ")
    )
}

/// Writes `results` rows from `values`, replacing what a session had.
pub(crate) fn upsert_results_sql(values: &str) -> String {
    format!(
        "INSERT INTO results ({}) VALUES {values} \
         ON CONFLICT (session_id) DO UPDATE SET end_reason = excluded.end_reason, summary = excluded.summary, \
         summary_confirmed = excluded.summary_confirmed, fields = excluded.fields, last_seq = excluded.last_seq",
        RESULT_COLUMNS.join(", ")
    )
}

/// Writes `session_fields` rows from `values`, replacing a field's earlier value.
pub(crate) fn upsert_fields_sql(values: &str) -> String {
    format!(
        "INSERT INTO session_fields ({}) VALUES {values} \
         ON CONFLICT (session_id, field_id) DO UPDATE SET value = excluded.value",
        FIELD_COLUMNS.join(", ")
    )
}

/// The `session_fields` rows `rows` (a fold's [`NewRows`]) writes for `session_id`.
pub(crate) fn changed_fields<'a>(
    session_id: &'a str,
    rows: &'a NewRows,
) -> impl Iterator<Item = (&'a str, &'a str, &'a Value)> {
    rows.fields
        .iter()
        .map(move |(field, value)| (session_id, field.as_str(), value))
}

/// Writes the fields `(session, field id, value)` (one row per session and field in a call).
pub(crate) async fn upsert_fields<'c, DB: Backend>(
    tx: &mut sqlx::Transaction<'c, DB>,
    rows: &[(&str, &str, &Value)],
) -> Result<(), sqlx::Error> {
    for chunk in rows.chunks(rows_per_statement(FIELD_COLUMNS.len())) {
        let sql = upsert_fields_sql(&placeholders::<DB>(chunk.len(), FIELD_COLUMNS.len()));
        let mut q = sqlx::query(&sql);
        for (session_id, field_id, value) in chunk {
            q = bind_all(q, field_cells(session_id, field_id, value));
        }
        q.execute_in(tx).await?;
    }
    Ok(())
}

/// The fields stored for `session_id`, in the caller's transaction (for a view loaded from its
/// stored row: the document does not hold them).
pub(crate) async fn stored_fields<'c, DB: Backend>(
    tx: &mut sqlx::Transaction<'c, DB>,
    session_id: &str,
) -> Result<serde_json::Map<String, Value>, sqlx::Error> {
    use crate::store::backend::ReadColumn;
    let rows = sqlx::query(include_str!("../read_side/sql/session_fields.sql"))
        .arg(session_id.to_string())
        .fetch_all_in(tx)
        .await?;
    rows.iter()
        .map(|row| Ok((row.read::<String>(0)?, row.read::<Value>(1)?)))
        .collect()
}

/// Appends transcript rows (a row already there is left as it is).
pub(crate) async fn insert_transcript<'c, DB: Backend>(
    tx: &mut sqlx::Transaction<'c, DB>,
    rows: &[(&str, &TranscriptRow)],
) -> Result<(), sqlx::Error> {
    for chunk in rows.chunks(rows_per_statement(TRANSCRIPT_COLUMNS.len())) {
        let sql = insert_transcript_sql(&placeholders::<DB>(chunk.len(), TRANSCRIPT_COLUMNS.len()));
        let mut q = sqlx::query(&sql);
        for (session_id, t) in chunk {
            q = bind_all(q, transcript_cells(session_id, t));
        }
        q.execute_in(tx).await?;
    }
    Ok(())
}

/// Writes the `results` rows of the completed sessions that are not previews (the others have
/// none).
pub(crate) async fn upsert_results<'c, 'v, DB: Backend>(
    tx: &mut sqlx::Transaction<'c, DB>,
    views: impl IntoIterator<Item = &'v SessionStateView>,
) -> Result<(), sqlx::Error> {
    let rows: Vec<_> = views.into_iter().filter_map(result_cells).collect();
    for chunk in rows.chunks(rows_per_statement(RESULT_COLUMNS.len())) {
        let sql = upsert_results_sql(&placeholders::<DB>(chunk.len(), RESULT_COLUMNS.len()));
        let mut q = sqlx::query(&sql);
        for cells in chunk {
            q = bind_all(q, cells.iter().cloned());
        }
        q.execute_in(tx).await?;
    }
    Ok(())
}

/// PostgreSQL: announces each `(session, last sequence)` to every listening process, delivered
/// at commit; ids only, far below NOTIFY's 8 KB (subscribers read the events themselves).
pub(crate) async fn notify<'c, DB: Backend>(
    tx: &mut sqlx::Transaction<'c, DB>,
    commits: &[(&str, u64)],
) -> Result<(), sqlx::Error> {
    for chunk in commits.chunks(rows_per_statement(1)) {
        let calls: Vec<String> = (0..chunk.len())
            .map(|i| format!("pg_notify($1, ${})", i + 2))
            .collect();
        let sql = format!("SELECT {}", calls.join(", "));
        let mut q = sqlx::query(&sql).arg(NOTIFY_CHANNEL.to_string());
        for (session_id, last_seq) in chunk {
            q = q.arg(format!("{session_id} {last_seq}"));
        }
        q.execute_in(tx).await?;
    }
    Ok(())
}

/// The rows the views folded from kept ones add beside their state rows: transcript, fields,
/// results; an erased session's are deleted.
pub(crate) async fn write_rows<DB: Backend>(
    tx: &mut sqlx::Transaction<'_, DB>,
    fast: &[FoldedFromKept<'_>],
) -> Result<(), crate::store::error::ProjectionError> {
    let transcript: Vec<_> = fast
        .iter()
        .flat_map(|f| f.rows.transcript.iter().map(move |t| (f.session_id, t)))
        .collect();
    insert_transcript(tx, &transcript).await?;
    let fields: Vec<_> = fast
        .iter()
        .flat_map(|f| changed_fields(f.session_id, &f.rows))
        .collect();
    upsert_fields(tx, &fields).await?;
    upsert_results(tx, fast.iter().map(|f| &f.view)).await?;
    for f in fast.iter().filter(|f| f.view.erasure.is_some()) {
        crate::commit::erasure::forget_views(tx, f.session_id).await?;
    }
    Ok(())
}
