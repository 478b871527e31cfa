//! Reads of the views for the HTTP API.

use serde_json::Value;
use sqlx::Row;

use crate::on_db;
use crate::read_side::views::{SessionStateView, TranscriptRow};
use crate::store::backend::ReadColumn;
use crate::store::db::Db;

/// The session's state view, or `None` if no such session has been projected; its
/// `extracted_fields` are left empty ([`extracted_fields`] reads them).
pub async fn session_state(
    db: &Db,
    session_id: &str,
) -> Result<Option<SessionStateView>, sqlx::Error> {
    let row = on_db!(read(db), |pool| {
        sqlx::query(include_str!("sql/session_state.sql"))
            .bind(session_id)
            .fetch_optional(pool)
            .await?
            .map(|row| -> Result<(String, Value), sqlx::Error> {
                Ok((
                    row.try_get("participant_token_sha256")?,
                    row.try_get("state")?,
                ))
            })
            .transpose()?
    });
    Ok(row.and_then(|(token, state)| {
        let mut view: SessionStateView = serde_json::from_value(state).ok()?;
        view.participant_token_sha256 = token;
        Some(view)
    }))
}

/// The fields extracted so far in the session, by field id (the `session_fields` view; not in
/// what [`session_state`] reads).
pub async fn extracted_fields(
    db: &Db,
    session_id: &str,
) -> Result<serde_json::Map<String, Value>, sqlx::Error> {
    on_db!(read(db), |pool| {
        let rows = sqlx::query(include_str!("sql/session_fields.sql"))
            .bind(session_id)
            .fetch_all(pool)
            .await?;
        rows.iter()
            .map(|row| Ok((row.read::<String>(0)?, row.read::<Value>(1)?)))
            .collect()
    })
}

/// The session's transcript in event order.
pub async fn transcript(db: &Db, session_id: &str) -> Result<Vec<TranscriptRow>, sqlx::Error> {
    on_db!(read(db), |pool| {
        let rows = sqlx::query(include_str!("sql/transcript.sql"))
            .bind(session_id)
            .fetch_all(pool)
            .await?;
        rows.into_iter()
            .map(|r| {
                Ok(TranscriptRow {
                    seq: r.try_get::<i64, _>("seq")? as u64,
                    turn_id: r.try_get("turn_id")?,
                    role: r.try_get("role")?,
                    kind: r.try_get("kind")?,
                    content: r.try_get("content")?,
                    interaction_id: r.try_get("interaction_id")?,
                    created_at: r.try_get("created_at")?,
                })
            })
            .collect()
    })
}

/// Every event of a session as researchers read it: `(sequence, event_type, payload, metadata)`
/// in order. A version 1 payload is shown as stored; a later one decoded into the same form (its
/// `type`, fields, `at`, `prev_hash` and `hash`, the pinned study inline) and its metadata with
/// its command's actor and request id, so every session reads alike whatever schema it was
/// written in.
pub async fn events(
    db: &Db,
    session_id: &str,
) -> Result<Vec<(u64, String, Value, Value)>, crate::store::error::ProjectionError> {
    let rows = crate::store::log::all_rows(db, session_id).await?;
    // The rows already read, decoded (only needed when some are not shown as stored).
    let decoded = if rows.iter().all(|r| r.event_version == "1") {
        Vec::new()
    } else {
        let genesis = interview_session::hash::GENESIS_HASH.to_string();
        crate::store::log::decode_read(db, session_id, &rows, genesis).await?
    };
    // A version 2 command's request id is stored on its first event only, and since 2026-12-02
    // its actor too.
    let mut request_id = Value::Null;
    let mut actor = Value::Null;
    Ok(rows
        .into_iter()
        .enumerate()
        .map(|(i, row)| {
            let mut metadata = row.metadata;
            if let Some(id) = metadata.get("request_id") {
                request_id = id.clone();
            } else if row.event_version != "1" && !request_id.is_null() {
                metadata["request_id"] = request_id.clone();
            }
            if let Some(a) = metadata.get("actor") {
                actor = a.clone();
            } else if row.event_version != "1" && !actor.is_null() {
                metadata["actor"] = actor.clone();
            }
            let payload = match decoded.get(i) {
                Some((_, event)) if row.event_version != "1" => {
                    serde_json::to_value(event).expect("events serialize")
                }
                _ => row.payload,
            };
            (row.sequence, row.event_type, payload, metadata)
        })
        .collect())
}

/// Ids of every session in the log, oldest first.
/// Every session anything is stored for — in the log, or in any read model (a view row whose
/// log is gone is something an audit must see): for `replay verify --all`.
pub async fn audited_session_ids(db: &Db) -> Result<Vec<String>, sqlx::Error> {
    on_db!(read(db), |pool| {
        sqlx::query_scalar(include_str!("sql/audited_session_ids.sql"))
            .bind(interview_session::AGGREGATE_TYPE)
            .fetch_all(pool)
            .await
    })
}

pub async fn session_ids(db: &Db) -> Result<Vec<String>, sqlx::Error> {
    on_db!(read(db), |pool| {
        sqlx::query_scalar(include_str!("sql/session_ids.sql"))
            .bind(interview_session::AGGREGATE_TYPE)
            .fetch_all(pool)
            .await
    })
}

/// A session's decoded events after sequence `after`, in order.
pub async fn decoded_events_after(
    db: &Db,
    session_id: &str,
    after: u64,
) -> Result<Vec<(u64, interview_session::SessionEvent)>, crate::store::error::ProjectionError> {
    decoded_events_between(db, session_id, after, i64::MAX as u64).await
}

/// A session's decoded events with `after < sequence <= up_to`, in order.
pub async fn decoded_events_between(
    db: &Db,
    session_id: &str,
    after: u64,
    up_to: u64,
) -> Result<Vec<(u64, interview_session::SessionEvent)>, crate::store::error::ProjectionError> {
    crate::store::log::read_between(db, session_id, after, up_to).await
}

/// The stored `event_version` of each of a session's events, in sequence order (an event held
/// in another event's row: the version its own row would have, `shared_rows.rs`).
pub async fn event_versions(db: &Db, session_id: &str) -> Result<Vec<String>, sqlx::Error> {
    let rows = crate::store::log::stored_rows(db, session_id, 1, u64::MAX).await?;
    Ok(crate::store::shared_rows::expand(rows)
        .into_iter()
        .map(|r| r.event_version)
        .collect())
}

/// One line of a study's session list.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SessionSummary {
    pub session_id: String,
    pub status: String,
    pub current_phase: String,
    pub turn_count: i64,
    pub preview: bool,
    pub participant_ref: Option<String>,
    pub created_at: Option<chrono::DateTime<chrono::Utc>>,
    pub last_activity_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// Which sessions a list shows.
#[derive(Debug, Clone)]
pub struct SessionFilter {
    /// Only this status; `None` is the valid list (everything but abandoned).
    pub status: Option<String>,
    pub include_preview: bool,
    /// Start after this (created_at, session_id).
    pub after: Option<(chrono::DateTime<chrono::Utc>, String)>,
    pub limit: i64,
}

/// A page of a study's sessions, oldest first.
pub async fn study_sessions(
    db: &Db,
    study_id: &str,
    f: &SessionFilter,
) -> Result<Vec<SessionSummary>, sqlx::Error> {
    let mut sql = String::from(
        "SELECT session_id, status, current_phase, turn_count, preview, created_at, updated_at, state \
         FROM session_state WHERE study_id = $1 AND last_seq > 0",
    );
    sql.push_str(match f.status {
        Some(_) => " AND status = $2",
        None => " AND status <> 'abandoned' AND $2 = $2",
    });
    if !f.include_preview {
        sql.push_str(" AND preview = FALSE");
    }
    sql.push_str(" AND (created_at > $3 OR (created_at = $3 AND session_id > $4)) ORDER BY created_at, session_id LIMIT $5");
    let (after_at, after_id) = f
        .after
        .clone()
        .unwrap_or((chrono::DateTime::<chrono::Utc>::UNIX_EPOCH, String::new()));
    on_db!(read(db), |pool| {
        let rows = sqlx::query(&sql)
            .bind(study_id)
            .bind(f.status.clone().unwrap_or_default())
            .bind(after_at)
            .bind(after_id)
            .bind(f.limit)
            .fetch_all(pool)
            .await?;
        rows.into_iter()
            .map(|r| {
                let state: Value = r.try_get("state")?;
                Ok(SessionSummary {
                    session_id: r.try_get("session_id")?,
                    status: r.try_get("status")?,
                    current_phase: r.try_get("current_phase")?,
                    turn_count: r.try_get("turn_count")?,
                    preview: r.try_get("preview")?,
                    participant_ref: state["participant_ref"].as_str().map(String::from),
                    created_at: r.try_get("created_at")?,
                    last_activity_at: r.try_get("updated_at")?,
                })
            })
            .collect()
    })
}

/// One row of a study's results.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ResultRow {
    pub session_id: String,
    pub participant_ref: Option<String>,
    pub completed_at: chrono::DateTime<chrono::Utc>,
    pub end_reason: Option<String>,
    pub summary: Option<String>,
    pub summary_confirmed: Option<bool>,
    /// field id → {value, confidence, evidence_turn_ids, quote}
    pub fields: Value,
}

const RESULT_COLUMNS: &str =
    "session_id, participant_ref, completed_at, end_reason, summary, summary_confirmed, fields";

fn result_from_row<R: ReadColumn>(r: &R) -> Result<ResultRow, sqlx::Error> {
    Ok(ResultRow {
        session_id: r.read("session_id")?,
        participant_ref: r.read("participant_ref")?,
        completed_at: r.read("completed_at")?,
        end_reason: r.read("end_reason")?,
        summary: r.read("summary")?,
        summary_confirmed: r.read("summary_confirmed")?,
        fields: r.read("fields")?,
    })
}

/// A page of a study's results, in completion order, after `after`.
pub async fn results_page(
    db: &Db,
    study_id: &str,
    after: Option<(chrono::DateTime<chrono::Utc>, String)>,
    limit: i64,
) -> Result<Vec<ResultRow>, sqlx::Error> {
    let sql = format!(
        "SELECT {RESULT_COLUMNS} FROM results WHERE study_id = $1 \
         AND (completed_at > $2 OR (completed_at = $2 AND session_id > $3)) \
         ORDER BY completed_at, session_id LIMIT $4"
    );
    let (after_at, after_id) =
        after.unwrap_or((chrono::DateTime::<chrono::Utc>::UNIX_EPOCH, String::new()));
    on_db!(read(db), |pool| {
        let rows = sqlx::query(&sql)
            .bind(study_id)
            .bind(after_at)
            .bind(after_id)
            .bind(limit)
            .fetch_all(pool)
            .await?;
        rows.iter().map(result_from_row).collect()
    })
}

/// One session's result row, if it has one (a completed session that is not a preview and not
/// erased).
pub async fn result_of(db: &Db, session_id: &str) -> Result<Option<ResultRow>, sqlx::Error> {
    let sql = format!("SELECT {RESULT_COLUMNS} FROM results WHERE session_id = $1");
    on_db!(read(db), |pool| {
        let row = sqlx::query(&sql)
            .bind(session_id)
            .fetch_optional(pool)
            .await?;
        row.as_ref().map(result_from_row).transpose()
    })
}

/// Streams every result row of a study into `sink`, one row at a time, so a study with
/// 100,000 sessions is never held in memory. Stops early when the receiver goes away.
pub async fn stream_results(
    db: &Db,
    study_id: &str,
    sink: tokio::sync::mpsc::Sender<ResultRow>,
) -> Result<(), sqlx::Error> {
    use futures_util::TryStreamExt;
    let sql = format!("SELECT {RESULT_COLUMNS} FROM results WHERE study_id = $1 ORDER BY completed_at, session_id");
    on_db!(read(db), |pool| {
        let mut rows = sqlx::query(&sql).bind(study_id).fetch(pool);
        while let Some(row) = rows.try_next().await? {
            if sink.send(result_from_row(&row)?).await.is_err() {
                break;
            }
        }
        Ok(())
    })
}

/// Open sessions whose idle deadline has passed at `now` (at most `limit`).
pub async fn idle_sessions(
    db: &Db,
    now: chrono::DateTime<chrono::Utc>,
    limit: i64,
) -> Result<Vec<String>, sqlx::Error> {
    on_db!(read(db), |pool| {
        sqlx::query_scalar(include_str!("sql/idle_sessions.sql"))
            .bind(now)
            .bind(limit)
            .fetch_all(pool)
            .await
    })
}

/// Sessions where it is the interviewer's turn (created, or active with the participant's input
/// unanswered) and nothing happened since `idle_since`, oldest activity first (at most `limit`).
pub async fn sessions_awaiting_interviewer(
    db: &Db,
    idle_since: chrono::DateTime<chrono::Utc>,
    limit: i64,
) -> Result<Vec<String>, sqlx::Error> {
    on_db!(read(db), |pool| {
        sqlx::query_scalar(include_str!("sql/sessions_awaiting_interviewer.sql"))
            .bind(idle_since)
            .bind(limit)
            .fetch_all(pool)
            .await
    })
}

/// `state` holds the view's JSON (`jsonb` on PostgreSQL, text on SQLite): "the participant
/// consented", as each store spells it.
fn consented(db: &Db) -> &'static str {
    match db {
        Db::Postgres(_) => "state->'consent' = 'true'::jsonb",
        Db::Sqlite(_) => "json_extract(state, '$.consent') = 1",
    }
}

/// How many of a study's places are taken: sessions (previews aside) whose participant
/// consented and that were not abandoned — completed interviews and those under way. A session
/// never consented holds no place; one abandoned after consent (withdrawn, timed out, refused
/// a place) gives its place back (`docs/study-definition.md`, `limits.max_sessions`).
pub async fn count_places_taken(
    db: &Db,
    study_id: &str,
    except_session: &str,
) -> Result<i64, sqlx::Error> {
    let sql = format!(
        "SELECT COUNT(*) FROM session_state WHERE study_id = $1 AND preview = FALSE \
         AND last_seq > 0 AND status <> 'abandoned' AND session_id <> $2 AND {}",
        consented(db)
    );
    on_db!(read(db), |pool| {
        sqlx::query_scalar(&sql)
            .bind(study_id)
            .bind(except_session)
            .fetch_one(pool)
            .await
    })
}

/// Whether `participant_ref` holds an open session of `study_id`: one its participant consented
/// to and that has not ended. An unconsented session holds nothing, so a stranger who creates
/// sessions with someone else's reference locks nobody out.
pub async fn participant_holds_session(
    db: &Db,
    study_id: &str,
    participant_ref: &str,
    except_session: &str,
) -> Result<bool, sqlx::Error> {
    let sql = format!(
        "SELECT COUNT(*) FROM session_state WHERE study_id = $1 AND participant_ref = $2 \
         AND status NOT IN ('completed', 'abandoned') AND last_seq > 0 AND session_id <> $3 AND {}",
        consented(db)
    );
    on_db!(read(db), |pool| {
        let open: i64 = sqlx::query_scalar(&sql)
            .bind(study_id)
            .bind(participant_ref)
            .bind(except_session)
            .fetch_one(pool)
            .await?;
        Ok(open > 0)
    })
}

/// Completed sessions still waiting for their post-session extraction (at most `limit`).
pub async fn pending_final_extractions(db: &Db, limit: i64) -> Result<Vec<String>, sqlx::Error> {
    on_db!(read(db), |pool| {
        sqlx::query_scalar(include_str!("sql/pending_final_extractions.sql"))
            .bind(limit)
            .fetch_all(pool)
            .await
    })
}

/// The digest of a session's participant token, if the session exists (a small, indexed read
/// done on every authenticated participant request).
pub async fn session_token(db: &Db, session_id: &str) -> Result<Option<String>, sqlx::Error> {
    on_db!(read(db), |pool| {
        sqlx::query_scalar(include_str!("sql/session_token.sql"))
            .bind(session_id)
            .fetch_optional(pool)
            .await
    })
}

/// A session's status, if it exists.
pub async fn session_status(db: &Db, session_id: &str) -> Result<Option<String>, sqlx::Error> {
    on_db!(read(db), |pool| {
        sqlx::query_scalar(include_str!("sql/session_status.sql"))
            .bind(session_id)
            .fetch_optional(pool)
            .await
    })
}

/// The study a session belongs to, if the session exists.
pub async fn session_study(db: &Db, session_id: &str) -> Result<Option<String>, sqlx::Error> {
    on_db!(read(db), |pool| {
        sqlx::query_scalar(include_str!("sql/session_study.sql"))
            .bind(session_id)
            .fetch_optional(pool)
            .await
    })
}

/// How many sessions there are of each status and phase (previews included): `/metrics`.
pub async fn sessions_by_status_and_phase(
    db: &Db,
) -> Result<Vec<(String, String, i64)>, sqlx::Error> {
    on_db!(read(db), |pool| {
        sqlx::query_as(include_str!("sql/sessions_by_status_and_phase.sql"))
            .fetch_all(pool)
            .await
    })
}
