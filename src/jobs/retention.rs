//! Retention: each ended session is erased once its study's `limits.retention_days` have passed
//! since it ended (the `retained_since` column), reason `retention`, a batch per study and sweep
//! (`docs/privacy.md`). The study's published version
//! decides, for all its sessions: a data-protection officer who shortens it means it for the
//! data already held.

use chrono::{DateTime, Utc};
use interview_projections::erasure;
use interview_session::erasure::ErasedBy;

use crate::command::studies;
use crate::http::error::ApiError;
use crate::state::AppState;

/// Sessions erased per study and sweep at most (the next sweep takes the rest).
const BATCH: i64 = 100;

/// Erases every session past its study's retention as of `now`; returns how many.
#[tracing::instrument(skip(state))]
pub async fn erase_expired(state: &AppState, now: DateTime<Utc>) -> Result<usize, ApiError> {
    let mut erased = 0;
    for study in studies::list(&state.db).await? {
        let Some(days) = study
            .published
            .as_ref()
            .and_then(|p| p.study_config.limits.retention_days)
        else {
            continue;
        };
        let window = chrono::Duration::milliseconds((days * 86_400_000.0).round() as i64);
        let before = now - window;
        for id in erasure::past_retention(&state.db, &study.study_id, before, BATCH).await? {
            // One session that cannot be erased now must not hold up the others.
            match crate::command::erasure::erase(state, &id, ErasedBy::Retention, None, "retention")
                .await
            {
                Ok(_) => erased += 1,
                Err(error) => {
                    tracing::warn!(session_id = id, %error, "retention could not erase a session; the next sweep tries again")
                }
            }
        }
    }
    if erased > 0 {
        tracing::info!(erased, "sessions past their study's retention erased");
    }
    Ok(erased)
}
