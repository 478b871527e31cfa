//! Erasing a participant's data (`docs/privacy.md`): the erasure is recorded on the session's
//! events so far — a running session is withdrawn in the same command, and the commit that
//! records it rewrites those events into their erased form and empties the views
//! (`interview_projections::erasure`) — and every copy this process keeps is dropped.
//!
//! Erasing an erased session answers its receipt again and changes nothing.

use chrono::Utc;
use cqrs_es::AggregateError;
use interview_projections::erasure::{self, Receipt};
use interview_session::commands as cmd;
use interview_session::erasure::{ErasedBy, Erasure};
use interview_session::{SessionCommand, SessionError};

use interview_projections::Db;

use super::error::CommandError;
use crate::command::store::{Actor, SessionStore};

/// What keeps a copy of sessions' content in memory outside the command side (the
/// interviewer's folded sessions and conversations): an erasure drops it.
pub trait KeepsSessionCopies: Send + Sync {
    fn forget(&self, session_id: &str);
}

/// What an erasure reaches: the log and views, the command side, and the other copies this
/// process keeps (`AppState::erasing`).
#[derive(Clone, Copy)]
pub struct Erasing<'a> {
    pub db: &'a Db,
    pub store: &'a SessionStore,
    pub copies: &'a dyn KeepsSessionCopies,
}

/// How many times an erasure is tried again when the session moved under it (the interviewer's
/// next step, the post-session extraction), waiting a little longer each time.
const ATTEMPTS: u32 = 10;

fn actor(by: ErasedBy) -> Actor {
    match by {
        ErasedBy::Participant => Actor::Participant,
        ErasedBy::Researcher => Actor::Researcher,
        ErasedBy::Retention => Actor::System,
    }
}

/// Erases the participant's data of `session_id` and answers the receipt; 404 when there is no
/// such session.
// Long by design: a retry loop around one command: prepare the erased form from the log as it is
// now, record it, then one arm per outcome (done: drop the copies and answer the receipt; erased by
// someone else meanwhile: their receipt; the session moved: wait and try again; no such session;
// any other error); split, the arms that end the loop and the one that repeats it would not sit
// together.
#[tracing::instrument(skip(state, reason))]
pub async fn erase(
    state: Erasing<'_>,
    session_id: &str,
    by: ErasedBy,
    reason: Option<String>,
    request_id: &str,
) -> Result<Receipt, CommandError> {
    interview_session::erasure::check_reason(reason.as_deref())?;
    // Erased already: the first erasure's receipt (its who and why stand).
    if let Some(receipt) = erasure::receipt(state.db, session_id).await? {
        return Ok(receipt);
    }
    for attempt in 0..ATTEMPTS {
        let prepared = erasure::prepare(state.db, session_id)
            .await?
            .ok_or_else(CommandError::session_not_found)?;
        let command = SessionCommand::RecordErasure(cmd::RecordErasure {
            erasure: Erasure {
                by,
                reason: reason.clone(),
                erased_events: prepared.erased_events,
                erased_form_sha256: prepared.erased_form_sha256.clone(),
                content_verified: prepared.content_verified,
            },
            head_hash: prepared.head_hash.clone(),
            at: Utc::now(),
        });
        match state
            .store
            .execute(session_id, command, actor(by), request_id)
            .await
        {
            Ok(()) => {
                if !prepared.content_verified {
                    tracing::warn!(
                        session_id,
                        "erased a session whose chain did not verify: replay verify reports it"
                    );
                }
                forget_copies(state, session_id).await;
                metrics::counter!("interview_erasures_total", "by" => by.as_str()).increment(1);
                tracing::info!(session_id, by = by.as_str(), "participant data erased");
                return erasure::receipt(state.db, session_id)
                    .await?
                    .ok_or_else(|| {
                        CommandError::Corrupt(
                            "an erasure committed but its record is not read back".into(),
                        )
                    });
            }
            // Someone else erased it meanwhile: theirs is the receipt.
            Err(AggregateError::UserError(SessionError::Erased)) => {
                return erasure::receipt(state.db, session_id)
                    .await?
                    .ok_or_else(|| {
                        CommandError::Corrupt("an erased session has no erasure record".into())
                    });
            }
            // An event came in between the read and the record: read again.
            Err(AggregateError::UserError(SessionError::ErasureOutdated))
            | Err(AggregateError::AggregateConflict) => {
                tokio::time::sleep(std::time::Duration::from_millis(25 * u64::from(attempt))).await;
            }
            Err(AggregateError::UserError(SessionError::NotCreated)) => {
                return Err(CommandError::session_not_found())
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(CommandError::Conflict {
        code: "erasure_outdated",
        message: "the session kept changing while its data was being erased; try again".into(),
        details: None,
    })
}

/// Drops what this process keeps of the session's content, and on SQLite empties the WAL that
/// still holds the pages the erasure overwrote.
async fn forget_copies(state: Erasing<'_>, session_id: &str) {
    state.store.forget(session_id);
    state.copies.forget(session_id);
    match state.db.truncate_wal().await {
        Ok(true) => {}
        // The next checkpoint overwrites them; said, not fatal.
        Ok(false) => tracing::warn!("readers kept the WAL from being emptied after an erasure"),
        Err(error) => tracing::warn!(%error, "the WAL could not be emptied after an erasure"),
    }
}

/// Erases every session of `study_id` created for `participant_ref`; the receipts, oldest
/// session first (none when the reference names no session — or only erased ones, which no
/// longer hold it).
pub async fn erase_participant(
    state: Erasing<'_>,
    study_id: &str,
    participant_ref: &str,
    reason: Option<String>,
    request_id: &str,
) -> Result<Vec<Receipt>, CommandError> {
    interview_session::erasure::check_reason(reason.as_deref())?;
    let mut receipts = Vec::new();
    for id in erasure::sessions_of_participant(state.db, study_id, participant_ref).await? {
        receipts.push(erase(state, &id, ErasedBy::Researcher, reason.clone(), request_id).await?);
    }
    Ok(receipts)
}
