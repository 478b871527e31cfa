//! Retention: each ended session is erased once its study's `limits.retention_days` have passed
//! since it ended (the `retained_since` column), `erased_by: retention`, page by page
//! (`docs/privacy.md`). The study's published version
//! decides, for all its sessions: a data-protection officer who shortens it means it for the
//! data already held.

use chrono::{DateTime, Utc};
use interview_projections::erasure;
use interview_session::erasure::ErasedBy;

use crate::command::error::CommandError;
use crate::command::studies;
use crate::state::AppState;

/// Sessions read at a time, and tried per study and sweep at most (the next sweep takes the
/// rest, starting again from the oldest).
const PAGE: i64 = 100;
const PER_SWEEP: usize = 1_000;

/// Erases every session past its study's retention as of `now`; returns how many.
#[tracing::instrument(skip(state))]
pub async fn erase_expired(state: &AppState, now: DateTime<Utc>) -> Result<usize, CommandError> {
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
        erased += erase_study(state, &study.study_id, now - window).await?;
    }
    if erased > 0 {
        tracing::info!(erased, "sessions past their study's retention erased");
    }
    Ok(erased)
}

/// Erases a study's sessions that ended before `before`, page by page: one that cannot be erased
/// now is logged and passed over, so it holds up no other (the next sweep tries it again).
async fn erase_study(
    state: &AppState,
    study_id: &str,
    before: DateTime<Utc>,
) -> Result<usize, CommandError> {
    let (mut erased, mut tried) = (0, 0);
    let mut after = None;
    while tried < PER_SWEEP {
        let page =
            erasure::past_retention(&state.db, study_id, before, after.as_ref(), PAGE).await?;
        let Some(last) = page.last().cloned() else {
            break;
        };
        for (_, id) in &page {
            tried += 1;
            match crate::command::erasure::erase(
                state.erasing(),
                id,
                ErasedBy::Retention,
                None,
                "retention",
            )
            .await
            {
                Ok(_) => erased += 1,
                Err(error) => tracing::warn!(
                    session_id = id,
                    %error,
                    "retention could not erase a session; the next sweep tries again"
                ),
            }
        }
        after = Some(last);
    }
    Ok(erased)
}
