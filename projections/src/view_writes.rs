//! The statements that write folded views, each for many sessions at once: a batch of commands
//! writes its state rows in one guarded update, its transcript and decision rows in one insert
//! each, and announces its commits in one statement. Generic over the backend: the SQL text is
//! the same on both (numbered placeholders, `UPDATE … FROM (VALUES …)`, `RETURNING`).

use std::collections::HashSet;

use serde_json::Value;

use crate::projector::{end_reason_text, placeholders, NOTIFY_CHANNEL};
use crate::views::{DecisionRow, SessionStateView, TranscriptRow};
use interview_session::SessionStatus;

/// Bound values per statement: SQLite takes at most 32,766, PostgreSQL 65,535.
const VALUES_PER_STATEMENT: usize = 30_000;

/// Rows of `columns` values that fit one statement.
fn rows_per_statement(columns: usize) -> usize {
    VALUES_PER_STATEMENT / columns
}

/// Writes each view whose stored row is still at its expected `last_seq`; returns the ids of
/// the sessions written (the others are stale and left untouched).
pub(crate) async fn update_states<'c, DB>(
    tx: &mut sqlx::Transaction<'c, DB>,
    views: &[(i64, &SessionStateView)],
) -> Result<HashSet<String>, sqlx::Error>
where
    DB: sqlx::Database,
    for<'e> &'e mut <DB as sqlx::Database>::Connection: sqlx::Executor<'e, Database = DB>,
    for<'q> <DB as sqlx::Database>::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'q> String: sqlx::Encode<'q, DB> + sqlx::Type<DB> + sqlx::Decode<'q, DB>,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> bool: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Value: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<String>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<chrono::DateTime<chrono::Utc>>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    usize: sqlx::ColumnIndex<<DB as sqlx::Database>::Row>,
{
    use sqlx::Row;
    let mut written = HashSet::new();
    for chunk in views.chunks(rows_per_statement(15)) {
        // VALUES columns are named column1… on both backends.
        let sql = format!(
            "UPDATE session_state SET study_id = v.column2, status = v.column3, current_phase = v.column4, \
             turn_count = v.column5, preview = v.column6, participant_token_sha256 = v.column7, \
             last_seq = v.column8, created_at = v.column9, updated_at = v.column10, state = v.column11, \
             idle_deadline = v.column12, needs_final_extraction = v.column13, participant_ref = v.column14 \
             FROM (VALUES {}) AS v \
             WHERE session_state.session_id = v.column1 AND session_state.last_seq = v.column15 \
             RETURNING session_state.session_id",
            placeholders::<DB>(chunk.len(), 15)
        );
        let mut q = sqlx::query(&sql);
        for (expected, view) in chunk {
            let state = serde_json::to_value(view).expect("views serialize");
            q = q
                .bind(view.session_id.clone())
                .bind(view.study_id.clone())
                .bind(view.status.as_str().to_string())
                .bind(
                    state["current_phase"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                )
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
                .bind(*expected);
        }
        for row in q.fetch_all(&mut **tx).await? {
            written.insert(row.try_get::<String, _>(0)?);
        }
    }
    Ok(written)
}

/// Appends transcript rows (a row already there is left as it is).
pub(crate) async fn insert_transcript<'c, DB>(
    tx: &mut sqlx::Transaction<'c, DB>,
    rows: &[(&str, &TranscriptRow)],
) -> Result<(), sqlx::Error>
where
    DB: sqlx::Database,
    for<'e> &'e mut <DB as sqlx::Database>::Connection: sqlx::Executor<'e, Database = DB>,
    for<'q> <DB as sqlx::Database>::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'q> String: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<String>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> chrono::DateTime<chrono::Utc>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    for chunk in rows.chunks(rows_per_statement(8)) {
        let sql = format!(
            "INSERT INTO transcript (session_id, seq, turn_id, role, kind, content, interaction_id, created_at) \
             VALUES {} ON CONFLICT (session_id, seq) DO NOTHING",
            placeholders::<DB>(chunk.len(), 8)
        );
        let mut q = sqlx::query(&sql);
        for (session_id, t) in chunk {
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
    Ok(())
}

/// Appends decision-log rows (a row already there is left as it is).
pub(crate) async fn insert_decisions<'c, DB>(
    tx: &mut sqlx::Transaction<'c, DB>,
    rows: &[(&str, &DecisionRow)],
) -> Result<(), sqlx::Error>
where
    DB: sqlx::Database,
    for<'e> &'e mut <DB as sqlx::Database>::Connection: sqlx::Executor<'e, Database = DB>,
    for<'q> <DB as sqlx::Database>::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'q> String: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Value: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<String>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<Value>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> chrono::DateTime<chrono::Utc>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    for chunk in rows.chunks(rows_per_statement(14)) {
        let sql = format!(
            "INSERT INTO decision_log (session_id, seq, decision_id, turn_id, phase, selected_action, proposed_action, \
             rationale, model, prompt_version_id, latency_ms, token_usage, input_summary, created_at) \
             VALUES {} ON CONFLICT (session_id, seq) DO NOTHING",
            placeholders::<DB>(chunk.len(), 14)
        );
        let mut q = sqlx::query(&sql);
        for (session_id, d) in chunk {
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
    Ok(())
}

/// Writes the `results` rows of the completed sessions that are not previews (the others have
/// none).
pub(crate) async fn upsert_results<'c, 'v, DB>(
    tx: &mut sqlx::Transaction<'c, DB>,
    views: impl IntoIterator<Item = &'v SessionStateView>,
) -> Result<(), sqlx::Error>
where
    DB: sqlx::Database,
    for<'e> &'e mut <DB as sqlx::Database>::Connection: sqlx::Executor<'e, Database = DB>,
    for<'q> <DB as sqlx::Database>::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'q> String: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Value: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<String>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<bool>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> chrono::DateTime<chrono::Utc>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    let completed: Vec<&SessionStateView> = views
        .into_iter()
        .filter(|v| v.status == SessionStatus::Completed && !v.preview)
        .collect();
    for chunk in completed.chunks(rows_per_statement(9)) {
        let sql = format!(
            "INSERT INTO results (session_id, study_id, participant_ref, completed_at, end_reason, summary, \
             summary_confirmed, fields, last_seq) VALUES {} \
             ON CONFLICT (session_id) DO UPDATE SET end_reason = excluded.end_reason, summary = excluded.summary, \
             summary_confirmed = excluded.summary_confirmed, fields = excluded.fields, last_seq = excluded.last_seq",
            placeholders::<DB>(chunk.len(), 9)
        );
        let mut q = sqlx::query(&sql);
        for view in chunk {
            q = q
                .bind(view.session_id.clone())
                .bind(view.study_id.clone())
                .bind(view.participant_ref.clone())
                .bind(view.ended_at.unwrap_or_default())
                .bind(end_reason_text(view))
                .bind(view.summary.clone())
                .bind(view.summary_confirmed)
                .bind(Value::Object(view.extracted_fields.clone()))
                .bind(view.last_seq as i64);
        }
        q.execute(&mut **tx).await?;
    }
    Ok(())
}

/// PostgreSQL: announces each `(session, last sequence)` to every listening process, delivered
/// at commit; ids only, far below NOTIFY's 8 KB (subscribers read the events themselves).
pub(crate) async fn notify<'c, DB>(
    tx: &mut sqlx::Transaction<'c, DB>,
    commits: &[(&str, u64)],
) -> Result<(), sqlx::Error>
where
    DB: sqlx::Database,
    for<'e> &'e mut <DB as sqlx::Database>::Connection: sqlx::Executor<'e, Database = DB>,
    for<'q> <DB as sqlx::Database>::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'q> String: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    for chunk in commits.chunks(rows_per_statement(1)) {
        let calls: Vec<String> = (0..chunk.len())
            .map(|i| format!("pg_notify($1, ${})", i + 2))
            .collect();
        let sql = format!("SELECT {}", calls.join(", "));
        let mut q = sqlx::query(&sql).bind(NOTIFY_CHANNEL.to_string());
        for (session_id, last_seq) in chunk {
            q = q.bind(format!("{session_id} {last_seq}"));
        }
        q.execute(&mut **tx).await?;
    }
    Ok(())
}
