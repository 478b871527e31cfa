//! Reads of the views for the HTTP API.

use serde_json::Value;
use sqlx::Row;

use crate::db::Db;
use crate::on_db;
use crate::views::{SessionStateView, TranscriptRow};

/// The session's state view, or `None` if no such session has been projected.
pub async fn session_state(
    db: &Db,
    session_id: &str,
) -> Result<Option<SessionStateView>, sqlx::Error> {
    let row = on_db!(read(db), |pool| {
        sqlx::query("SELECT participant_token_sha256, state FROM session_state WHERE session_id = $1 AND last_seq > 0")
            .bind(session_id)
            .fetch_optional(pool)
            .await?
            .map(|row| -> Result<(String, Value), sqlx::Error> {
                Ok((row.try_get("participant_token_sha256")?, row.try_get("state")?))
            })
            .transpose()?
    });
    Ok(row.and_then(|(token, state)| {
        let mut view: SessionStateView = serde_json::from_value(state).ok()?;
        view.participant_token_sha256 = token;
        Some(view)
    }))
}

/// The session's transcript in event order.
pub async fn transcript(db: &Db, session_id: &str) -> Result<Vec<TranscriptRow>, sqlx::Error> {
    on_db!(read(db), |pool| {
        let rows = sqlx::query(
            "SELECT seq, turn_id, role, kind, content, interaction_id, created_at FROM transcript \
             WHERE session_id = $1 ORDER BY seq",
        )
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

/// Number of events stored for a session (0 if unknown).
pub async fn event_count(db: &Db, session_id: &str) -> Result<i64, sqlx::Error> {
    on_db!(read(db), |pool| {
        sqlx::query_scalar("SELECT COUNT(*) FROM events WHERE aggregate_id = $1")
            .bind(session_id)
            .fetch_one(pool)
            .await
    })
}

/// Every stored event of a session: `(sequence, event_type, payload, metadata)` in order.
pub async fn events(
    db: &Db,
    session_id: &str,
) -> Result<Vec<(u64, String, Value, Value)>, sqlx::Error> {
    on_db!(read(db), |pool| {
        let rows = sqlx::query(
            "SELECT sequence, event_type, payload, metadata FROM events \
             WHERE aggregate_type = $1 AND aggregate_id = $2 ORDER BY sequence",
        )
        .bind(interview_session::AGGREGATE_TYPE)
        .bind(session_id)
        .fetch_all(pool)
        .await?;
        rows.into_iter()
            .map(|r| {
                Ok((
                    r.try_get::<i64, _>("sequence")? as u64,
                    r.try_get("event_type")?,
                    r.try_get("payload")?,
                    r.try_get("metadata")?,
                ))
            })
            .collect()
    })
}

/// Ids of every session in the log, oldest first.
pub async fn session_ids(db: &Db) -> Result<Vec<String>, sqlx::Error> {
    on_db!(read(db), |pool| {
        sqlx::query_scalar(
            "SELECT aggregate_id FROM events WHERE aggregate_type = $1 AND sequence = 1 ORDER BY payload->>'at', aggregate_id",
        )
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
) -> Result<Vec<(u64, interview_session::SessionEvent)>, crate::ProjectionError> {
    decoded_events_between(db, session_id, after, i64::MAX as u64).await
}

/// A session's decoded events with `after < sequence <= up_to`, in order.
pub async fn decoded_events_between(
    db: &Db,
    session_id: &str,
    after: u64,
    up_to: u64,
) -> Result<Vec<(u64, interview_session::SessionEvent)>, crate::ProjectionError> {
    let rows: Vec<(i64, Value)> = on_db!(read(db), |pool| {
        sqlx::query_as(
            "SELECT sequence, payload FROM events \
             WHERE aggregate_type = $1 AND aggregate_id = $2 AND sequence > $3 AND sequence <= $4 ORDER BY sequence",
        )
        .bind(interview_session::AGGREGATE_TYPE)
        .bind(session_id)
        .bind(after as i64)
        .bind(up_to.min(i64::MAX as u64) as i64)
        .fetch_all(pool)
        .await?
    });
    rows.into_iter()
        .map(|(seq, payload)| {
            Ok((
                seq as u64,
                crate::projector::decode_event(session_id, seq as u64, payload)?,
            ))
        })
        .collect()
}

/// The `event_version` of each of a session's events, in sequence order.
pub async fn event_versions(db: &Db, session_id: &str) -> Result<Vec<String>, sqlx::Error> {
    on_db!(read(db), |pool| {
        sqlx::query_scalar(
            "SELECT event_version FROM events WHERE aggregate_type = $1 AND aggregate_id = $2 ORDER BY sequence",
        )
        .bind(interview_session::AGGREGATE_TYPE)
        .bind(session_id)
        .fetch_all(pool)
        .await
    })
}

/// The session's decision log in event order.
pub async fn decisions(db: &Db, session_id: &str) -> Result<Vec<crate::DecisionRow>, sqlx::Error> {
    on_db!(read(db), |pool| {
        let rows = sqlx::query(
            "SELECT seq, decision_id, turn_id, phase, selected_action, proposed_action, rationale, model, \
             prompt_version_id, latency_ms, token_usage, input_summary, created_at FROM decision_log \
             WHERE session_id = $1 ORDER BY seq",
        )
        .bind(session_id)
        .fetch_all(pool)
        .await?;
        rows.into_iter()
            .map(|r| {
                Ok(crate::DecisionRow {
                    seq: r.try_get::<i64, _>("seq")? as u64,
                    session_id: session_id.to_string(),
                    decision_id: r.try_get("decision_id")?,
                    turn_id: r.try_get("turn_id")?,
                    phase: r.try_get("phase")?,
                    selected_action: r.try_get("selected_action")?,
                    proposed_action: r.try_get("proposed_action")?,
                    rationale: r.try_get("rationale")?,
                    model: r.try_get("model")?,
                    prompt_version_id: r.try_get("prompt_version_id")?,
                    latency_ms: r.try_get::<i64, _>("latency_ms")? as u64,
                    token_usage: r.try_get("token_usage")?,
                    input_summary: r.try_get("input_summary")?,
                    created_at: r.try_get("created_at")?,
                })
            })
            .collect()
    })
}
