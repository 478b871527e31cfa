//! Erasure in storage (`docs/privacy.md`): what an erasure is worked out from, the rewriting of
//! a session's stored events into their erased form in the transaction that records the
//! erasure, the views it empties, and the purge log read back from the log.

use interview_session::chain::verify_chain;
use interview_session::codec::{self, erased, NoDocuments};
use interview_session::erasure::{ErasedBy, Erasure};
use interview_session::hash::GENESIS_HASH;
use interview_session::{EventBody, SessionEvent, AGGREGATE_TYPE};
use serde::Serialize;

use crate::store::backend::{Backend, Statement};
use crate::store::db::Db;
use crate::store::log::{self, Row, ROW_COLUMNS};
use crate::{on_db, store::error::ProjectionError};

/// The event type that records an erasure, as the partial index `events_erasures` (migration
/// 0015) names it: written into the SQL as a literal, so both planners see the index applies.
pub const ERASURE_EVENT: &str = "participant.data.erased";

/// What an erasure of a session's events so far covers: the command's inputs.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub erased_events: u64,
    /// The hash of the last event covered (the command is refused if another came since).
    pub head_hash: String,
    pub erased_form_sha256: String,
    /// The chain over the whole content verified before erasure.
    pub content_verified: bool,
}

/// Reads a session's whole log and works out what erasing it covers; `None` when the session
/// has no events.
#[tracing::instrument(skip(db), err)]
pub async fn prepare(db: &Db, session_id: &str) -> Result<Option<Prepared>, ProjectionError> {
    let rows = log::all_rows(db, session_id).await?;
    let Some(last) = rows.last() else {
        return Ok(None);
    };
    let head_hash = log::row_hash(last);
    let content_verified = verify_chain(rows.iter().map(|r| r.chain())).is_ok();
    let events = log::decode_read(db, session_id, &rows, GENESIS_HASH.into()).await?;
    let digest = erased::digest_of(events.iter().map(|(seq, e)| (*seq, e)));
    Ok(Some(Prepared {
        erased_events: digest.events(),
        head_hash,
        erased_form_sha256: digest.finish(),
        content_verified,
    }))
}

/// The erasures among a command's events (at most one).
pub(crate) fn erasure_in(events: &[crate::store::log::NewEvent]) -> Option<&Erasure> {
    events.iter().find_map(|e| match &e.event.body {
        EventBody::ParticipantDataErased(erasure) => Some(erasure),
        _ => None,
    })
}

/// Rewrites events 1 to `erasure.erased_events` of a session into their erased form, in the
/// transaction that appends the erasure record, after checking they are the events the record's
/// digest covers (else nothing is written: the command fails).
pub(crate) async fn rewrite<'c, DB: Backend>(
    tx: &mut sqlx::Transaction<'c, DB>,
    session_id: &str,
    erasure: &Erasure,
) -> Result<(), ProjectionError> {
    let mut rows = log::rows_in(tx, session_id, 1).await?;
    rows.retain(|r| r.sequence <= erasure.erased_events);
    store_inline_documents(tx, session_id, &rows).await?;
    let events = log::decode_rows(session_id, &rows, GENESIS_HASH.into(), &log::KeptDocuments)?;
    let digest = erased::digest_of(events.iter().map(|(seq, e)| (*seq, e)));
    if digest.events() != erasure.erased_events || digest.finish() != erasure.erased_form_sha256 {
        return Err(ProjectionError::ErasureMismatch {
            session_id: session_id.into(),
        });
    }
    // Each event on its own row again (a row that held events in clear is split back).
    let no_metadata = serde_json::json!({});
    for (sequence, event) in &events {
        let stored = erased::encode(event);
        // The hash goes into its column too: a version 1 row kept it inside its payload.
        sqlx::query(include_str!("sql/erase_event.sql"))
            .arg(AGGREGATE_TYPE)
            .arg(session_id)
            .arg(*sequence as i64)
            .arg(stored.event_type)
            .arg(stored.event_version)
            .arg(&stored.payload)
            .arg(&no_metadata)
            .arg(&stored.hash)
            .execute_in(tx)
            .await?;
    }
    // What was encrypted under the session's key, in whatever copy outlives these rows, is
    // unreadable once this commits.
    crate::store::keys::delete_in_transaction(tx, session_id).await?;
    Ok(())
}

/// Stores the study documents a version 1 `session.created` carried inline, so its erased form,
/// which names them by content id, decodes (they are the study's, not the participant's).
async fn store_inline_documents<'c, DB: Backend>(
    tx: &mut sqlx::Transaction<'c, DB>,
    session_id: &str,
    rows: &[Row],
) -> Result<(), ProjectionError> {
    for row in rows {
        let documents =
            codec::inline_documents(row.stored()).map_err(|source| ProjectionError::Decode {
                session_id: session_id.into(),
                sequence: row.sequence,
                source,
            })?;
        for (id, kind, document) in documents {
            sqlx::query(crate::store::statements::INSERT_DOCUMENT)
                .arg(&id)
                .arg(kind)
                .arg(&document)
                .arg(chrono::Utc::now())
                .execute_in(tx)
                .await?;
            log::keep_document(&id, &document);
        }
    }
    Ok(())
}

/// Deletes an erased session's transcript, fields and results rows (its state row is blanked by
/// the fold: `SessionStateView::erase`).
pub(crate) async fn forget_views<'c, DB: Backend>(
    tx: &mut sqlx::Transaction<'c, DB>,
    session_id: &str,
) -> Result<(), sqlx::Error> {
    for table in ["transcript", "session_fields", "results"] {
        sqlx::query(&format!("DELETE FROM {table} WHERE session_id = $1"))
            .arg(session_id)
            .execute_in(tx)
            .await?;
    }
    Ok(())
}

/// One erasure, as the purge log and its receipt show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Receipt {
    pub session_id: String,
    pub erased_at: chrono::DateTime<chrono::Utc>,
    pub erased_by: ErasedBy,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// How many events' content was erased (every event before the erasure's command).
    pub events_erased: u64,
    /// The chain's head once the erasure was recorded: the erasure record's own hash
    /// (`replay verify --expect-head` checks a bundle by it).
    pub head_hash: String,
    /// Its sequence number in the session's log.
    pub sequence: u64,
    /// Whether the chain over the content verified just before it was erased.
    pub content_verified: bool,
}

impl Receipt {
    fn of(session_id: &str, row: &Row) -> Result<Self, ProjectionError> {
        let event: SessionEvent =
            codec::decode(row.stored(), GENESIS_HASH, &NoDocuments).map_err(|source| {
                ProjectionError::Decode {
                    session_id: session_id.into(),
                    sequence: row.sequence,
                    source,
                }
            })?;
        let EventBody::ParticipantDataErased(erasure) = event.body else {
            unreachable!("the rows read are erasure records");
        };
        Ok(Receipt {
            session_id: session_id.into(),
            erased_at: event.at,
            erased_by: erasure.by,
            reason: erasure.reason,
            events_erased: erasure.erased_events,
            head_hash: event.hash,
            sequence: row.sequence,
            content_verified: erasure.content_verified,
        })
    }
}

/// The receipt of a session's erasure, if its data was erased.
#[tracing::instrument(skip(db), err)]
pub async fn receipt(db: &Db, session_id: &str) -> Result<Option<Receipt>, ProjectionError> {
    let rows: Vec<Row> = on_db!(read(db), |pool| {
        let rows = sqlx::query(&format!(
            "SELECT {ROW_COLUMNS} FROM events \
             WHERE aggregate_type = $1 AND aggregate_id = $2 AND event_type = '{ERASURE_EVENT}'"
        ))
        .bind(AGGREGATE_TYPE)
        .bind(session_id)
        .fetch_all(pool)
        .await?;
        rows.iter().map(Row::from_sql).collect::<Result<_, _>>()?
    });
    rows.first().map(|r| Receipt::of(session_id, r)).transpose()
}

/// Every erasure of a study's sessions, oldest first: the purge log.
#[tracing::instrument(skip(db), err)]
pub async fn study_log(db: &Db, study_id: &str) -> Result<Vec<Receipt>, ProjectionError> {
    let found: Vec<(String, Row)> = on_db!(read(db), |pool| {
        let rows = sqlx::query(&format!(
            "SELECT e.aggregate_id, e.sequence, e.event_type, e.event_version, e.payload, e.hash, e.metadata, e.sealed \
             FROM events e JOIN session_state s ON s.session_id = e.aggregate_id \
             WHERE e.aggregate_type = $1 AND e.event_type = '{ERASURE_EVENT}' AND s.study_id = $2",
        ))
        .bind(AGGREGATE_TYPE)
        .bind(study_id)
        .fetch_all(pool)
        .await?;
        let mut found = Vec::with_capacity(rows.len());
        for r in &rows {
            use sqlx::Row as _;
            found.push((r.try_get::<String, _>("aggregate_id")?, Row::from_sql(r)?));
        }
        found
    });
    let mut receipts = found
        .iter()
        .map(|(id, row)| Receipt::of(id, row))
        .collect::<Result<Vec<_>, _>>()?;
    receipts.sort_by(|a, b| (a.erased_at, &a.session_id).cmp(&(b.erased_at, &b.session_id)));
    Ok(receipts)
}

/// Ended sessions of `study_id` that ended before `before` and whose data is not erased, oldest
/// first, after the one `after` names (its `retained_since` and id; `None` from the start), at
/// most `limit`: what the study's retention erases, a page at a time, with each session's
/// `retained_since` to go on from.
pub async fn past_retention(
    db: &Db,
    study_id: &str,
    before: chrono::DateTime<chrono::Utc>,
    after: Option<&(chrono::DateTime<chrono::Utc>, String)>,
    limit: i64,
) -> Result<Vec<(chrono::DateTime<chrono::Utc>, String)>, sqlx::Error> {
    let (from, id) = match after {
        Some((at, id)) => (*at, id.as_str()),
        // Before any session (PostgreSQL refuses chrono's own minimum).
        None => (chrono::DateTime::<chrono::Utc>::UNIX_EPOCH, ""),
    };
    on_db!(read(db), |pool| {
        sqlx::query_as(include_str!("sql/past_retention.sql"))
            .bind(study_id)
            .bind(before)
            .bind(from)
            .bind(id)
            .bind(limit)
            .fetch_all(pool)
            .await
    })
}

/// The sessions of `study_id` created for the panel id `participant_ref` (a data-subject
/// request names a person by it), erased or not — once erased, a session no longer holds it.
pub async fn sessions_of_participant(
    db: &Db,
    study_id: &str,
    participant_ref: &str,
) -> Result<Vec<String>, sqlx::Error> {
    on_db!(read(db), |pool| {
        sqlx::query_scalar(include_str!("sql/sessions_of_participant.sql"))
            .bind(study_id)
            .bind(participant_ref)
            .fetch_all(pool)
            .await
    })
}
