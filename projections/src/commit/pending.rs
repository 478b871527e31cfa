//! Folding a session's events that its views do not hold yet, in the caller's transaction: the
//! projector's slow path, and the group commit's for a command whose view was not kept.

use interview_session::hash::GENESIS_HASH;
use serde_json::Value;

use crate::commit::view_writes;
use crate::read_side::views::{NewRows, SessionStateView};
use crate::store::backend::{Backend, ReadColumn, Statement};
use crate::store::error::ProjectionError;
use crate::store::log;

/// Folds the session's events after the view's `last_seq` into the views, in the caller's
/// transaction (locking the view row on PostgreSQL), and on PostgreSQL with `announce` announces
/// the commit (`crate::processes::Peers`).
/// With `overview`, a session whose new events move its study overview contribution is folded
/// whole once more for it (a command's own contribution comes with its events instead).
// Long by design: the steps of one fold in the caller's transaction, in order: make sure the view
// row exists and lock it, read from its last event (for the hash the next one links to), decode
// (from the stream's start if the view ends inside a commit), restore the stored view, fold, write
// it under its guard, announce, and recompute the overview if it moved; the view row read under the
// lock at the start is used by the later steps.
pub(crate) async fn fold_pending<'c, DB: Backend>(
    tx: &mut sqlx::Transaction<'c, DB>,
    session_id: &str,
    postgres: bool,
    overview: bool,
    announce: bool,
) -> Result<(u64, Option<SessionStateView>), ProjectionError> {
    let lock = if postgres { " FOR UPDATE" } else { "" };
    let select_view =
        format!("SELECT last_seq, participant_token_sha256, state FROM session_state WHERE session_id = $1{lock}");
    sqlx::query(include_str!("sql/ensure_state_row.sql"))
        .arg(session_id)
        .execute_in(tx)
        .await?;
    let row = sqlx::query(&select_view)
        .arg(session_id)
        .fetch_one_in(tx)
        .await?;
    let last_seq: i64 = row.read("last_seq")?;
    // From the view's last event, for the hash the first new one links to.
    let mut rows = log::rows_in(tx, session_id, last_seq.max(1)).await?;
    let prev = match rows.first() {
        Some(first) if last_seq > 0 && first.sequence == last_seq as u64 => {
            log::row_hash(&rows.remove(0))
        }
        _ => GENESIS_HASH.to_string(),
    };
    if rows.is_empty() {
        return Ok((0, None));
    }
    let events = if rows[0].event_version == interview_session::codec::compact::VERSION {
        // The view ends inside a commit (it never should): the first new event takes what it
        // leaves out from the ones before it, so the stream is decoded from its start.
        let all = log::rows_in(tx, session_id, 1).await?;
        let mut events =
            log::decode_rows(session_id, &all, GENESIS_HASH.into(), &log::KeptDocuments)?;
        events.retain(|(seq, _)| *seq > last_seq as u64);
        events
    } else {
        log::decode_rows(session_id, &rows, prev, &log::KeptDocuments)?
    };
    let mut view: SessionStateView = if last_seq == 0 {
        SessionStateView::default()
    } else {
        let state: Value = row.read("state")?;
        let mut view: SessionStateView =
            serde_json::from_value(state).map_err(|source| ProjectionError::Decode {
                session_id: session_id.into(),
                sequence: last_seq as u64,
                source: source.into(),
            })?;
        view.participant_token_sha256 = row.read("participant_token_sha256")?;
        view.extracted_fields = view_writes::stored_fields(tx, session_id).await?;
        view
    };
    let mut new_rows = NewRows::default();
    for (sequence, event) in &events {
        view.apply(*sequence, event, &mut new_rows);
    }
    // The row is locked (PostgreSQL) or the writer is ours (SQLite): the guard holds.
    write_views(tx, session_id, &view, &new_rows, last_seq).await?;
    if postgres && announce {
        view_writes::notify(tx, &[(session_id, view.last_seq)]).await?;
    }
    let moves = |(_, e): &(u64, interview_session::SessionEvent)| {
        interview_session::aggregate::moves_overview(&e.body)
    };
    if overview && (view.status.is_terminal() || events.iter().any(moves)) {
        crate::read_side::overview::recompute(tx, session_id).await?;
    }
    Ok((events.len() as u64, Some(view)))
}

/// Writes the folded `session_state` row, the new `transcript` rows, and —
/// for a completed session that is not a preview — its `results` row, in the caller's
/// transaction. Generic over the backend: the SQL is the same text on both. Writes nothing and
/// answers false when the stored row is not at `expected_last_seq`.
async fn write_views<'c, DB: Backend>(
    tx: &mut sqlx::Transaction<'c, DB>,
    session_id: &str,
    view: &SessionStateView,
    rows: &NewRows,
    expected_last_seq: i64,
) -> Result<bool, sqlx::Error> {
    if !view_writes::update_states(tx, &[(expected_last_seq, view)])
        .await?
        .contains(session_id)
    {
        return Ok(false);
    }
    let transcript: Vec<_> = rows.transcript.iter().map(|t| (session_id, t)).collect();
    view_writes::insert_transcript(tx, &transcript).await?;
    let fields: Vec<_> = view_writes::changed_fields(session_id, rows).collect();
    view_writes::upsert_fields(tx, &fields).await?;
    view_writes::upsert_results(tx, [view]).await?;
    if view.erasure.is_some() {
        crate::commit::erasure::forget_views(tx, session_id).await?;
    }
    Ok(true)
}
