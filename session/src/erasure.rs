//! The record an erasure leaves in the log (`docs/privacy.md`): who asked, why, and what it
//! covers. What an erased event keeps is `erased_form`'s.

use serde::{Deserialize, Serialize};

/// Who asked for an erasure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(test, derive(strum::EnumIter))]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum ErasedBy {
    /// The participant withdrew, with their session token.
    Participant,
    /// A researcher, acting on a request (`DELETE …/participant-data`, a study's erasures).
    Researcher,
    /// The study's `limits.retention_days` ran out.
    Retention,
}

impl ErasedBy {
    /// The name as the events spell it.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What `participant.data.erased` records. It holds no content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Erasure {
    pub by: ErasedBy,
    /// Why, as the researcher gave it (at most [`MAX_REASON_CHARS`]; kept as long as the log, so
    /// it must not name anyone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Events 1 to this one are stored in their erased form.
    pub erased_events: u64,
    /// The SHA-256 of those events as stored after erasure ([`crate::codec::erased::FormDigest`]):
    /// what lets `replay verify` prove that nothing of them has changed since.
    pub erased_form_sha256: String,
    /// Whether the hash chain over the events' whole content verified just before they were
    /// erased (checked by the server that erased them).
    pub content_verified: bool,
}

/// The longest reason an erasure keeps.
pub const MAX_REASON_CHARS: usize = 500;

/// Whether an erasure may keep `reason` (at most [`MAX_REASON_CHARS`] characters). The
/// aggregate checks it, and so does a caller that erases several sessions, before the first.
pub fn check_reason(reason: Option<&str>) -> Result<(), crate::error::SessionError> {
    if reason.is_some_and(|r| r.chars().count() > MAX_REASON_CHARS) {
        return Err(crate::error::SessionError::InvalidValue {
            field: "reason".into(),
            message: format!("a reason has at most {MAX_REASON_CHARS} characters"),
        });
    }
    Ok(())
}
