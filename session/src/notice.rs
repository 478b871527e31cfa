//! What a study tells systems outside the runtime (its webhooks, `docs/webhooks.md`): the facts a
//! research team's warehouse, chat or panel provider acts on, named as receivers see them. The
//! rule of which committed event announces which fact lives here, once; the commit writes the
//! notices in the transaction that writes the events, and the delivery reads what it sends when
//! it sends it (a notice holds no content, so an erasure reaches every later delivery).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::events::{EventBody, SessionEvent};
use crate::Session;

/// A fact a study announces. `study.paused` / `study.resumed` come from the study's own change
/// (not a session's log); the others from a session's events.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::EnumIter,
)]
pub enum NoticeKind {
    /// The session completed and its final extraction is recorded: the results row is whole.
    #[serde(rename = "session.completed")]
    #[strum(serialize = "session.completed")]
    SessionCompleted,
    #[serde(rename = "session.abandoned")]
    #[strum(serialize = "session.abandoned")]
    SessionAbandoned,
    #[serde(rename = "participant.data.erased")]
    #[strum(serialize = "participant.data.erased")]
    ParticipantDataErased,
    #[serde(rename = "study.paused")]
    #[strum(serialize = "study.paused")]
    StudyPaused,
    #[serde(rename = "study.resumed")]
    #[strum(serialize = "study.resumed")]
    StudyResumed,
}

impl NoticeKind {
    /// The name receivers see (`type` in a delivery's body).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Every kind, in the order the docs list them.
    pub fn all() -> impl Iterator<Item = Self> {
        <Self as strum::IntoEnumIterator>::iter()
    }
}

/// A session event that announces a fact: its kind, the event's sequence in the session's log
/// and when it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionNotice {
    pub kind: NoticeKind,
    pub sequence: u64,
    pub at: DateTime<Utc>,
}

/// The kind `body` announces, if any. Exhaustive, so a new event names its notice here.
fn announced_by(body: &EventBody) -> Option<NoticeKind> {
    match body {
        // Only once the final extraction is in is the result whole.
        EventBody::ExtractionCompleted { is_final, .. } => {
            is_final.then_some(NoticeKind::SessionCompleted)
        }
        EventBody::SessionAbandoned { .. } => Some(NoticeKind::SessionAbandoned),
        EventBody::ParticipantDataErased(_) => Some(NoticeKind::ParticipantDataErased),
        EventBody::SessionCreated { .. }
        | EventBody::StatusChanged { .. }
        | EventBody::PhaseChanged { .. }
        | EventBody::ConsentRecorded { .. }
        | EventBody::ScreeningEvaluated { .. }
        | EventBody::DecisionRecorded { .. }
        | EventBody::SummaryProposed { .. }
        | EventBody::SummaryConfirmed { .. }
        | EventBody::ExtractionStarted { .. }
        | EventBody::ErrorRecorded { .. }
        | EventBody::ParticipantMessageCreated { .. }
        | EventBody::AgentMessageStarted { .. }
        | EventBody::AgentMessageCompleted { .. }
        | EventBody::ToolCallCreated { .. }
        | EventBody::InteractionRendered { .. }
        | EventBody::InteractionSubmitted { .. }
        | EventBody::ToolCallCompleted { .. }
        | EventBody::SessionCompleted { .. }
        | EventBody::EndRequested {} => None,
    }
}

impl Session {
    /// The notices `events` (just committed, folded into `self`) announce, in log order. A
    /// researcher's preview announces nothing: it is not research data.
    pub fn notices<'a>(
        &self,
        events: impl IntoIterator<Item = (u64, &'a SessionEvent)>,
    ) -> Vec<SessionNotice> {
        if self.is_preview() {
            return Vec::new();
        }
        events
            .into_iter()
            .filter_map(|(sequence, event)| {
                announced_by(&event.body).map(|kind| SessionNotice {
                    kind,
                    sequence,
                    at: event.at,
                })
            })
            .collect()
    }
}
