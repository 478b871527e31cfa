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

use crate::db::Db;
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
}

impl Projector {
    pub fn new(db: Db) -> Self {
        Self { db }
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
            let applied = fold_pending(&mut tx, session_id, postgres).await?;
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
    #[tracing::instrument(skip_all, err)]
    pub async fn append_and_project(
        &self,
        events: &[SerializedEvent],
    ) -> Result<(), PersistenceError> {
        let Some(first) = events.first() else {
            return Ok(());
        };
        let session_id = first.aggregate_id.clone();
        let postgres = self.db.is_postgres();
        on_db!(write(&self.db), |pool| {
            let mut tx = pool.begin().await.map_err(persistence_error)?;
            for e in events {
                sqlx::query(
                    "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, event_version, payload, metadata) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7)",
                )
                .bind(e.aggregate_type.clone())
                .bind(e.aggregate_id.clone())
                .bind(e.sequence as i64)
                .bind(e.event_type.clone())
                .bind(e.event_version.clone())
                .bind(e.payload.clone())
                .bind(e.metadata.clone())
                .execute(&mut *tx)
                .await
                .map_err(persistence_error)?;
            }
            fold_pending(&mut tx, &session_id, postgres)
                .await
                .map_err(|e| match e {
                    ProjectionError::Db(e) => persistence_error(e),
                    other => PersistenceError::UnknownError(Box::new(other)),
                })?;
            tx.commit().await.map_err(persistence_error)?;
            Ok(())
        })
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
async fn fold_pending<'c, DB>(
    tx: &mut sqlx::Transaction<'c, DB>,
    session_id: &str,
    postgres: bool,
) -> Result<u64, ProjectionError>
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
        return Ok(0);
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
    write_views(tx, session_id, &view, &rows).await?;
    if postgres {
        // Delivered at commit to every process listening on this database (their stream
        // subscribers then read the new events themselves): ids only, far below NOTIFY's 8 KB.
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(NOTIFY_CHANNEL)
            .bind(format!("{session_id} {}", view.last_seq))
            .execute(&mut **tx)
            .await?;
    }
    Ok(events.len() as u64)
}

/// Maps a store error the way cqrs-es expects: a duplicate key is a lost race; an unreachable
/// database is a connection error.
fn persistence_error(err: sqlx::Error) -> PersistenceError {
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
/// transaction. Generic over the backend: the SQL is the same text on both.
async fn write_views<'c, DB>(
    tx: &mut sqlx::Transaction<'c, DB>,
    session_id: &str,
    view: &SessionStateView,
    rows: &NewRows,
) -> Result<(), sqlx::Error>
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
    sqlx::query(
        "UPDATE session_state SET study_id = $2, status = $3, current_phase = $4, turn_count = $5, \
         preview = $6, participant_token_sha256 = $7, last_seq = $8, created_at = $9, updated_at = $10, \
         state = $11, idle_deadline = $12, needs_final_extraction = $13, participant_ref = $14 WHERE session_id = $1",
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
    .execute(&mut **tx)
    .await?;
    for t in &rows.transcript {
        sqlx::query(
            "INSERT INTO transcript (session_id, seq, turn_id, role, kind, content, interaction_id, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (session_id, seq) DO NOTHING",
        )
        .bind(session_id)
        .bind(t.seq as i64)
        .bind(t.turn_id.clone())
        .bind(t.role.clone())
        .bind(t.kind.clone())
        .bind(t.content.clone())
        .bind(t.interaction_id.clone())
        .bind(t.created_at)
        .execute(&mut **tx)
        .await?;
    }
    for d in &rows.decisions {
        sqlx::query(
            "INSERT INTO decision_log (session_id, seq, decision_id, turn_id, phase, selected_action, proposed_action, \
             rationale, model, prompt_version_id, latency_ms, token_usage, input_summary, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) ON CONFLICT (session_id, seq) DO NOTHING",
        )
        .bind(session_id)
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
        .bind(d.created_at)
        .execute(&mut **tx)
        .await?;
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
    Ok(())
}
