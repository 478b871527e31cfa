//! The projector: brings a session's views up to its event stream.
//!
//! For one session it locks the view row, reads the events after the view's `last_seq` in
//! sequence order, folds them in memory and writes `session_state`, `transcript`,
//! `decision_log` and `results` in the same transaction — the transaction that appended the
//! events, when a command goes through [`Projector::append_and_project`]. Running it twice, or
//! concurrently, or after views were dropped, gives the same views.

use cqrs_es::persist::{PersistenceError, SerializedEvent};
use interview_session::{SessionEvent, AGGREGATE_TYPE};
use serde_json::Value;
use sqlx::Row;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::db::Db;
use crate::group_commit::GroupCommit;
use crate::on_db;
use crate::views::{NewRows, SessionStateView};
use interview_session::SessionStatus;

/// The PostgreSQL NOTIFY channel announcing `<session id> <last sequence>` after each projection.
pub const NOTIFY_CHANNEL: &str = "interview_session_events";

#[derive(Debug, thiserror::Error)]
pub enum ProjectionError {
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    #[error("event {sequence} of session {session_id} does not decode: {source}")]
    Decode {
        session_id: String,
        sequence: u64,
        source: serde_json::Error,
    },
}

#[derive(Clone, Debug)]
pub struct Projector {
    db: Db,
    recent: Arc<RecentViews>,
    /// Commands committed together (SQLite, in the server); `None`: each on its own.
    group: Option<GroupCommit>,
}

/// The `session_state` view of recently written sessions, as committed. A command's fold
/// starts from it instead of reading and decoding the row; the write is guarded by the view's
/// `last_seq`, so a stale entry (views rebuilt, another process) only costs the slow path.
/// Bounded: entries are dropped when it fills.
#[derive(Debug, Default)]
pub(crate) struct RecentViews(Mutex<HashMap<String, SessionStateView>>);

/// How many sessions' views the projector keeps in memory.
const RECENT_VIEWS: usize = 2048;

impl RecentViews {
    pub(crate) fn take(&self, session_id: &str) -> Option<SessionStateView> {
        self.0
            .lock()
            .expect("the view cache is never poisoned")
            .remove(session_id)
    }

    pub(crate) fn keep(&self, view: SessionStateView) {
        let mut recent = self.0.lock().expect("the view cache is never poisoned");
        if recent.len() >= RECENT_VIEWS {
            // Any entry will do: a miss costs one read of the row.
            if let Some(key) = recent.keys().next().cloned() {
                recent.remove(&key);
            }
        }
        recent.insert(view.session_id.clone(), view);
    }
}

impl Projector {
    pub fn new(db: Db) -> Self {
        Self {
            db,
            recent: Arc::default(),
            group: None,
        }
    }

    /// On SQLite, commits concurrent commands together (see [`crate::group_commit`]); a no-op
    /// on PostgreSQL, whose connections commit in parallel. Starts a task on the current Tokio
    /// runtime, which must outlive every command.
    pub fn with_group_commit(mut self) -> Self {
        if let Db::Sqlite(sqlite) = &self.db {
            self.group = Some(GroupCommit::start(
                sqlite.write.clone(),
                self.recent.clone(),
            ));
        }
        self
    }

    pub(crate) fn db(&self) -> &Db {
        &self.db
    }

    /// Applies every event of `session_id` the views have not seen; returns how many.
    #[tracing::instrument(skip(self), err)]
    pub async fn project(&self, session_id: &str) -> Result<u64, ProjectionError> {
        let postgres = self.db.is_postgres();
        on_db!(write(&self.db), |pool| {
            let mut tx = pool.begin().await?;
            let (applied, _) = fold_pending(&mut tx, session_id, postgres).await?;
            if applied == 0 {
                tx.rollback().await?;
            } else {
                tx.commit().await?;
            }
            Ok(applied)
        })
    }

    /// Appends a command's events and folds them into the views in one transaction: a command
    /// costs one database transaction, and views can never lag the log they are built from.
    /// A duplicate `(aggregate, sequence)` is a lost optimistic-lock race.
    ///
    /// The usual case takes four statements: the events (one insert), the state row (one
    /// update, guarded by the `last_seq` the in-memory view was folded to), and the new
    /// transcript and decision rows. On SQLite every statement is a trip to the single writer,
    /// so their number bounds the commands per second.
    #[tracing::instrument(skip_all, err)]
    pub async fn append_and_project(
        &self,
        events: &[SerializedEvent],
    ) -> Result<(), PersistenceError> {
        let Some(first) = events.first() else {
            return Ok(());
        };
        if let Some(group) = &self.group {
            return group.submit(events).await;
        }
        let session_id = first.aggregate_id.clone();
        let postgres = self.db.is_postgres();
        let recent = self
            .recent
            .take(&session_id)
            .filter(|view| view.last_seq + 1 == first.sequence as u64);
        let view = on_db!(write(&self.db), |pool| {
            let mut tx = pool.begin().await.map_err(persistence_error)?;
            insert_events(&mut tx, events.iter())
                .await
                .map_err(persistence_error)?;
            let folded = match recent {
                Some(view) => fold_in_hand(&mut tx, view, events, postgres).await,
                None => Ok(None),
            };
            let folded = match folded {
                Ok(Some(view)) => Ok(Some(view)),
                Ok(None) => fold_pending(&mut tx, &session_id, postgres)
                    .await
                    .map(|(_, view)| view),
                Err(e) => Err(e),
            }
            .map_err(to_persistence_error)?;
            tx.commit().await.map_err(persistence_error)?;
            folded
        });
        if let Some(view) = view {
            self.recent.keep(view);
        }
        Ok(())
    }

    /// Drops a session's views and folds them again from its whole stream.
    #[tracing::instrument(skip(self), err)]
    pub async fn rebuild(&self, session_id: &str) -> Result<u64, ProjectionError> {
        on_db!(write(&self.db), |pool| {
            let mut tx = pool.begin().await?;
            for table in ["transcript", "decision_log", "results"] {
                sqlx::query(&format!("DELETE FROM {table} WHERE session_id = $1"))
                    .bind(session_id)
                    .execute(&mut *tx)
                    .await?;
            }
            sqlx::query("DELETE FROM session_state WHERE session_id = $1")
                .bind(session_id)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
        });
        self.project(session_id).await
    }

    /// Projects every session whose views lag its event stream (start-up and periodic catch-up).
    #[tracing::instrument(skip(self), err)]
    pub async fn catch_up(&self) -> Result<u64, ProjectionError> {
        let lagging: Vec<String> = on_db!(read(&self.db), |pool| {
            sqlx::query_scalar(
                "SELECT e.aggregate_id FROM events e \
                 LEFT JOIN session_state s ON s.session_id = e.aggregate_id \
                 WHERE e.aggregate_type = $1 \
                 GROUP BY e.aggregate_id, s.last_seq \
                 HAVING MAX(e.sequence) > COALESCE(s.last_seq, 0)",
            )
            .bind(AGGREGATE_TYPE)
            .fetch_all(pool)
            .await?
        });
        let mut applied = 0;
        for session_id in &lagging {
            applied += self.project(session_id).await?;
        }
        if applied > 0 {
            tracing::info!(
                sessions = lagging.len(),
                events = applied,
                "projections caught up"
            );
        }
        Ok(applied)
    }
}

/// The `results.end_reason` column of a view.
pub(crate) fn end_reason_text(view: &SessionStateView) -> Option<String> {
    view.end_reason.map(|r| {
        serde_json::to_value(r)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default()
    })
}

/// Decodes a stored payload read as text (the bulk path), like [`decode_event`]: an upcaster
/// added there must be added here too.
pub fn decode_event_text(
    session_id: &str,
    sequence: u64,
    payload: &str,
) -> Result<SessionEvent, ProjectionError> {
    serde_json::from_str(payload).map_err(|source| ProjectionError::Decode {
        session_id: session_id.into(),
        sequence,
        source,
    })
}

/// Decodes a stored payload (upcasters go here when an event version changes).
pub fn decode_event(
    session_id: &str,
    sequence: u64,
    payload: Value,
) -> Result<SessionEvent, ProjectionError> {
    serde_json::from_value(payload).map_err(|source| ProjectionError::Decode {
        session_id: session_id.into(),
        sequence,
        source,
    })
}

/// Folds the session's events after the view's `last_seq` into the views, in the caller's
/// transaction (locking the view row on PostgreSQL), and on PostgreSQL announces the commit.
pub(crate) async fn fold_pending<'c, DB>(
    tx: &mut sqlx::Transaction<'c, DB>,
    session_id: &str,
    postgres: bool,
) -> Result<(u64, Option<SessionStateView>), ProjectionError>
where
    DB: sqlx::Database,
    for<'e> &'e mut <DB as sqlx::Database>::Connection: sqlx::Executor<'e, Database = DB>,
    for<'q> <DB as sqlx::Database>::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'q> String: sqlx::Encode<'q, DB> + sqlx::Type<DB> + sqlx::Decode<'q, DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Type<DB> + sqlx::Decode<'q, DB>,
    for<'q> bool: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Value: sqlx::Encode<'q, DB> + sqlx::Type<DB> + sqlx::Decode<'q, DB>,
    for<'q> Option<String>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<Value>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<bool>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> chrono::DateTime<chrono::Utc>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<chrono::DateTime<chrono::Utc>>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'a> &'a str: sqlx::ColumnIndex<<DB as sqlx::Database>::Row>,
{
    let lock = if postgres { " FOR UPDATE" } else { "" };
    let select_view =
        format!("SELECT last_seq, participant_token_sha256, state FROM session_state WHERE session_id = $1{lock}");
    sqlx::query(
        "INSERT INTO session_state (session_id) VALUES ($1) ON CONFLICT (session_id) DO NOTHING",
    )
    .bind(session_id)
    .execute(&mut **tx)
    .await?;
    let row = sqlx::query(&select_view)
        .bind(session_id)
        .fetch_one(&mut **tx)
        .await?;
    let last_seq: i64 = row.try_get("last_seq")?;
    let events = sqlx::query(
        "SELECT sequence, payload FROM events \
         WHERE aggregate_type = $1 AND aggregate_id = $2 AND sequence > $3 ORDER BY sequence",
    )
    .bind(AGGREGATE_TYPE)
    .bind(session_id)
    .bind(last_seq)
    .fetch_all(&mut **tx)
    .await?;
    if events.is_empty() {
        return Ok((0, None));
    }
    let mut view: SessionStateView = if last_seq == 0 {
        SessionStateView::default()
    } else {
        let state: Value = row.try_get("state")?;
        let mut view: SessionStateView =
            serde_json::from_value(state).map_err(|source| ProjectionError::Decode {
                session_id: session_id.into(),
                sequence: last_seq as u64,
                source,
            })?;
        view.participant_token_sha256 = row.try_get("participant_token_sha256")?;
        view
    };
    let mut rows = NewRows::default();
    for event_row in &events {
        let sequence: i64 = event_row.try_get("sequence")?;
        let payload: Value = event_row.try_get("payload")?;
        let event = decode_event(session_id, sequence as u64, payload)?;
        view.apply(sequence as u64, &event, &mut rows);
    }
    // The row is locked (PostgreSQL) or the writer is ours (SQLite): the guard holds.
    write_views(tx, session_id, &view, &rows, last_seq).await?;
    if postgres {
        notify(tx, session_id, view.last_seq).await?;
    }
    Ok((events.len() as u64, Some(view)))
}

/// The fast path of [`Projector::append_and_project`]: folds the command's own events into the
/// view the projector kept, and writes it if the stored row is still at the view's `last_seq`.
/// `None` when it is not (views rebuilt or dropped, another writer): the caller folds from the
/// stored row instead.
pub(crate) async fn fold_in_hand<'c, DB>(
    tx: &mut sqlx::Transaction<'c, DB>,
    mut view: SessionStateView,
    events: &[SerializedEvent],
    postgres: bool,
) -> Result<Option<SessionStateView>, ProjectionError>
where
    DB: sqlx::Database,
    for<'e> &'e mut <DB as sqlx::Database>::Connection: sqlx::Executor<'e, Database = DB>,
    for<'q> <DB as sqlx::Database>::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'q> String: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> bool: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Value: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<String>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<Value>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<bool>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> chrono::DateTime<chrono::Utc>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<chrono::DateTime<chrono::Utc>>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    let session_id = view.session_id.clone();
    let expected = view.last_seq as i64;
    let mut rows = NewRows::default();
    for e in events {
        let event = decode_event(&session_id, e.sequence as u64, e.payload.clone())?;
        view.apply(e.sequence as u64, &event, &mut rows);
    }
    if !write_views(tx, &session_id, &view, &rows, expected).await? {
        return Ok(None);
    }
    if postgres {
        notify(tx, &session_id, view.last_seq).await?;
    }
    Ok(Some(view))
}

/// Delivered at commit to every process listening on this database (their stream subscribers
/// then read the new events themselves): ids only, far below NOTIFY's 8 KB.
async fn notify<'c, DB>(
    tx: &mut sqlx::Transaction<'c, DB>,
    session_id: &str,
    last_seq: u64,
) -> Result<(), sqlx::Error>
where
    DB: sqlx::Database,
    for<'e> &'e mut <DB as sqlx::Database>::Connection: sqlx::Executor<'e, Database = DB>,
    for<'q> <DB as sqlx::Database>::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'q> String: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(NOTIFY_CHANNEL)
        .bind(format!("{session_id} {last_seq}"))
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// A projection failure as cqrs-es sees it.
pub(crate) fn to_persistence_error(e: ProjectionError) -> PersistenceError {
    match e {
        ProjectionError::Db(e) => persistence_error(e),
        other => PersistenceError::UnknownError(Box::new(other)),
    }
}

/// Maps a store error the way cqrs-es expects: a duplicate key is a lost race; an unreachable
/// database is a connection error.
pub(crate) fn persistence_error(err: sqlx::Error) -> PersistenceError {
    match &err {
        sqlx::Error::Database(e) if e.is_unique_violation() => {
            PersistenceError::OptimisticLockError
        }
        e if crate::db::is_unavailable(e) => PersistenceError::ConnectionError(Box::new(err)),
        _ => PersistenceError::UnknownError(Box::new(err)),
    }
}

/// Writes the folded `session_state` row, the new `transcript` and `decision_log` rows, and —
/// for a completed session that is not a preview — its `results` row, in the caller's
/// transaction. Generic over the backend: the SQL is the same text on both. Writes nothing and
/// answers false when the stored row is not at `expected_last_seq`.
async fn write_views<'c, DB>(
    tx: &mut sqlx::Transaction<'c, DB>,
    session_id: &str,
    view: &SessionStateView,
    rows: &NewRows,
    expected_last_seq: i64,
) -> Result<bool, sqlx::Error>
where
    DB: sqlx::Database,
    for<'e> &'e mut <DB as sqlx::Database>::Connection: sqlx::Executor<'e, Database = DB>,
    for<'q> <DB as sqlx::Database>::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'q> String: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> bool: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Value: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<String>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<Value>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<bool>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> chrono::DateTime<chrono::Utc>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<chrono::DateTime<chrono::Utc>>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    let state = serde_json::to_value(view).expect("views serialize");
    let updated = sqlx::query(
        "UPDATE session_state SET study_id = $2, status = $3, current_phase = $4, turn_count = $5, \
         preview = $6, participant_token_sha256 = $7, last_seq = $8, created_at = $9, updated_at = $10, \
         state = $11, idle_deadline = $12, needs_final_extraction = $13, participant_ref = $14 \
         WHERE session_id = $1 AND last_seq = $15 RETURNING last_seq",
    )
    .bind(session_id)
    .bind(view.study_id.clone())
    .bind(view.status.as_str())
    .bind(state["current_phase"].as_str().unwrap_or_default().to_string())
    .bind(i64::from(view.turn_count))
    .bind(view.preview)
    .bind(view.participant_token_sha256.clone())
    .bind(view.last_seq as i64)
    .bind(view.created_at)
    .bind(view.last_activity_at)
    .bind(state)
    .bind(view.idle_deadline())
    .bind(view.status == SessionStatus::Completed && !view.final_extraction_done)
    .bind(view.participant_ref.clone())
    .bind(expected_last_seq)
    .fetch_optional(&mut **tx)
    .await?;
    if updated.is_none() {
        return Ok(false);
    }
    if !rows.transcript.is_empty() {
        let sql = format!(
            "INSERT INTO transcript (session_id, seq, turn_id, role, kind, content, interaction_id, created_at) \
             VALUES {} ON CONFLICT (session_id, seq) DO NOTHING",
            placeholders(rows.transcript.len(), 8)
        );
        let mut q = sqlx::query(&sql);
        for t in &rows.transcript {
            q = q
                .bind(session_id.to_string())
                .bind(t.seq as i64)
                .bind(t.turn_id.clone())
                .bind(t.role.clone())
                .bind(t.kind.clone())
                .bind(t.content.clone())
                .bind(t.interaction_id.clone())
                .bind(t.created_at);
        }
        q.execute(&mut **tx).await?;
    }
    if !rows.decisions.is_empty() {
        let sql = format!(
            "INSERT INTO decision_log (session_id, seq, decision_id, turn_id, phase, selected_action, proposed_action, \
             rationale, model, prompt_version_id, latency_ms, token_usage, input_summary, created_at) \
             VALUES {} ON CONFLICT (session_id, seq) DO NOTHING",
            placeholders(rows.decisions.len(), 14)
        );
        let mut q = sqlx::query(&sql);
        for d in &rows.decisions {
            q = q
                .bind(session_id.to_string())
                .bind(d.seq as i64)
                .bind(d.decision_id.clone())
                .bind(d.turn_id.clone())
                .bind(d.phase.clone())
                .bind(d.selected_action.clone())
                .bind(d.proposed_action.clone())
                .bind(d.rationale.clone())
                .bind(d.model.clone())
                .bind(d.prompt_version_id.clone())
                .bind(d.latency_ms as i64)
                .bind(d.token_usage.clone())
                .bind(d.input_summary.clone())
                .bind(d.created_at);
        }
        q.execute(&mut **tx).await?;
    }
    if view.status == SessionStatus::Completed && !view.preview {
        sqlx::query(
            "INSERT INTO results (session_id, study_id, participant_ref, completed_at, end_reason, summary, \
             summary_confirmed, fields, last_seq) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
             ON CONFLICT (session_id) DO UPDATE SET end_reason = $5, summary = $6, summary_confirmed = $7, \
             fields = $8, last_seq = $9",
        )
        .bind(session_id)
        .bind(view.study_id.clone())
        .bind(view.participant_ref.clone())
        .bind(view.ended_at.unwrap_or_default())
        .bind(end_reason_text(view))
        .bind(view.summary.clone())
        .bind(view.summary_confirmed)
        .bind(Value::Object(view.extracted_fields.clone()))
        .bind(view.last_seq as i64)
        .execute(&mut **tx)
        .await?;
    }
    Ok(true)
}

/// Appends events in as few statements as the backend allows (one, for a command's events).
pub(crate) async fn insert_events<'c, 'e, DB>(
    tx: &mut sqlx::Transaction<'c, DB>,
    events: impl ExactSizeIterator<Item = &'e SerializedEvent>,
) -> Result<(), sqlx::Error>
where
    DB: sqlx::Database,
    for<'x> &'x mut <DB as sqlx::Database>::Connection: sqlx::Executor<'x, Database = DB>,
    for<'q> <DB as sqlx::Database>::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'q> String: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Value: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    // SQLite takes at most 32,766 bound values in a statement; seven per event.
    const PER_STATEMENT: usize = 4_000;
    let events: Vec<&SerializedEvent> = events.collect();
    for chunk in events.chunks(PER_STATEMENT) {
        let sql = format!(
            "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, event_version, payload, metadata) \
             VALUES {}",
            placeholders(chunk.len(), 7)
        );
        let mut q = sqlx::query(&sql);
        for e in chunk {
            q = q
                .bind(e.aggregate_type.clone())
                .bind(e.aggregate_id.clone())
                .bind(e.sequence as i64)
                .bind(e.event_type.clone())
                .bind(e.event_version.clone())
                .bind(e.payload.clone())
                .bind(e.metadata.clone());
        }
        q.execute(&mut **tx).await?;
    }
    Ok(())
}

/// `($1, $2), ($3, $4)` for `rows` rows of `columns` values: the numbered placeholders both
/// backends accept, for a multi-row insert in one statement.
fn placeholders(rows: usize, columns: usize) -> String {
    (0..rows)
        .map(|r| {
            let row: Vec<String> = (1..=columns)
                .map(|c| format!("${}", r * columns + c))
                .collect();
            format!("({})", row.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn placeholders_number_every_value_once() {
        assert_eq!(super::placeholders(1, 2), "($1, $2)");
        assert_eq!(super::placeholders(2, 3), "($1, $2, $3), ($4, $5, $6)");
    }
}
