//! A study's places and its participants' references (issue 30).
//!
//! What a researcher means by `limits.max_sessions` is interviews: a place is taken when a
//! participant consents, and kept while the interview runs and after it completes. A session
//! nobody consented to holds no place, so anonymous creates cannot fill a study; one abandoned
//! after consent (withdrawn, timed out) gives its place back. The same goes for a
//! `participant_ref` under `one_active_session_per_participant`: only a consented, open session
//! holds it, so a stranger who creates sessions with someone else's reference locks nobody out.
//!
//! Both are checked twice, under the study's lock ([`interview_projections::locks`]), so that
//! racing requests — in this process or another sharing the database — cannot both pass: when a
//! session is created (a full study says so at once) and when its participant consents (the
//! check that counts: many may have started, only so many may consent).

use interview_projections::{read, Db};
use interview_session::decision::ConcludeReason;
use interview_session::study::StudyConfig;

/// Why a participant cannot take a place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Every place is taken.
    StudyFull { max_sessions: u32 },
    /// The participant's reference already holds an open, consented session of this study.
    ParticipantHasSession,
}

impl Refusal {
    /// How a session refused at consent ends.
    pub fn end_reason(self) -> ConcludeReason {
        match self {
            Refusal::StudyFull { .. } => ConcludeReason::StudyFull,
            Refusal::ParticipantHasSession => ConcludeReason::DuplicateParticipant,
        }
    }
}

/// Whether a study's rules on places ask for a check at all (and so for its lock).
pub fn guarded(config: &StudyConfig, participant_ref: Option<&str>) -> bool {
    config.limits.max_sessions.is_some()
        || (participant_ref.is_some() && config.one_active_session_per_participant)
}

/// Checks the study's places and the participant's reference; the caller holds the study's
/// lock and has not yet committed the consent (or create) being checked. The session that is
/// consenting, if any, is left out of both counts.
#[tracing::instrument(skip(db, config))]
pub async fn check(
    db: &Db,
    study_id: &str,
    config: &StudyConfig,
    participant_ref: Option<&str>,
    consenting: Option<&str>,
) -> Result<Option<Refusal>, sqlx::Error> {
    let except = consenting.unwrap_or_default();
    if let Some(max_sessions) = config.limits.max_sessions {
        if read::count_places_taken(db, study_id, except).await? >= i64::from(max_sessions) {
            return Ok(Some(Refusal::StudyFull { max_sessions }));
        }
    }
    if let Some(r) = participant_ref.filter(|_| config.one_active_session_per_participant) {
        if read::participant_holds_session(db, study_id, r, except).await? {
            return Ok(Some(Refusal::ParticipantHasSession));
        }
    }
    Ok(None)
}
