//! The `session_state` and `transcript` views and how each event folds into them.
//!
//! Folding is pure: the projector loads a view, folds new events in memory and writes the result
//! once, which is also how a bulk rebuild works.

use chrono::{DateTime, Utc};
use interview_session::events::{
    ConcludeReason, EventBody, Phase, SessionEvent, SessionStatus, SubmitStatus,
};
use interview_session::interaction::{InteractionKind, InteractionToolCall};
use interview_session::study::ConfigVersions;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The `session_state` view: everything about a session but its transcript.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionStateView {
    pub session_id: String,
    pub study_id: String,
    pub public_slug: String,
    pub status: SessionStatus,
    pub current_phase: Phase,
    /// `turn_count` in the stored document, by the session's own rule.
    #[serde(flatten)]
    pub turns: interview_session::turns::Turns,
    pub preview: bool,
    pub participant_ref: Option<String>,
    pub config_versions: Option<ConfigVersions>,
    pub pending_interaction: Option<InteractionToolCall>,
    /// Every field extracted so far, by field id. Not in the stored document: the
    /// `session_fields` view keeps a row per field, so a commit writes only the fields it
    /// changes ([`NewRows::fields`]) rather than the whole document growing with each. The
    /// commit side fills it when it loads a stored view; [`crate::read::session_state`] does
    /// not (`crate::read::extracted_fields` reads them).
    #[serde(skip)]
    pub extracted_fields: Map<String, Value>,
    /// Handled failures (refused decisions, model errors), for researchers.
    pub errors: Vec<Value>,
    pub consent: Option<bool>,
    /// The screening verdict and its rationale.
    pub screening: Option<Value>,
    pub summary: Option<String>,
    pub summary_confirmed: Option<bool>,
    pub end_reason: Option<ConcludeReason>,
    pub created_at: Option<DateTime<Utc>>,
    pub last_activity_at: Option<DateTime<Utc>>,
    pub ended_at: Option<DateTime<Utc>>,
    /// The post-session extraction has completed.
    pub final_extraction_done: bool,
    /// The pinned study's idle TTL.
    pub idle_ttl_minutes: u32,
    /// The pinned study's `completion_redirect_url` template.
    #[serde(default)]
    pub completion_redirect_url: Option<String>,
    /// The participant's data was erased: who asked, when, why, and how many events it covers.
    /// What was said, answered or extracted is gone from this view (see [`Self::erase`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub erasure: Option<Value>,
    /// Sequence of the last event folded in.
    pub last_seq: u64,
    /// Kept in its own column, never in the JSON document.
    #[serde(skip)]
    pub participant_token_sha256: String,
}

/// The rows a batch of events adds to the append-only views, and the fields it changes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewRows {
    pub transcript: Vec<TranscriptRow>,
    /// The `session_fields` rows to write: each field the events set, with its last value.
    pub fields: std::collections::BTreeMap<String, Value>,
}

/// One row of the `transcript` view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TranscriptRow {
    pub seq: u64,
    pub turn_id: String,
    /// `user` or `assistant`, as the API's transcript turns name them.
    pub role: String,
    /// `message` or `interaction`.
    pub kind: String,
    pub content: String,
    pub interaction_id: Option<String>,
    pub created_at: DateTime<Utc>,
}

impl SessionStateView {
    /// When the session counts as idle, if it is still open: its last activity plus its study's
    /// TTL, rounded up to the next whole minute. Rounded, the stored deadline moves at most once
    /// a minute, so most updates of the row leave its indexes alone (HOT on PostgreSQL); the
    /// sweeper closes a session at most a minute later than the exact deadline, and the
    /// aggregate, which checks the exact one, always agrees by then.
    pub fn idle_deadline(&self) -> Option<DateTime<Utc>> {
        if self.status.is_terminal() {
            return None;
        }
        let ttl = chrono::Duration::minutes(i64::from(self.idle_ttl_minutes));
        let exact = self.last_activity_at? + ttl;
        const MINUTE: i64 = 60_000_000;
        let micros = exact.timestamp_micros();
        DateTime::from_timestamp_micros(
            micros.div_euclid(MINUTE) * MINUTE + MINUTE * i64::from(micros.rem_euclid(MINUTE) != 0),
        )
    }

    /// When the session's data began to be kept for the study's retention: its end, while its
    /// data is not erased (the `retained_since` column the retention sweep reads).
    pub fn retained_since(&self) -> Option<DateTime<Utc>> {
        if !self.status.is_terminal() || self.erasure.is_some() {
            return None;
        }
        self.ended_at
    }

    /// Where an ended session sends a panel participant (the study's template, filled in).
    pub fn redirect_url(&self) -> Option<String> {
        // An erased session names no panel id any more: nowhere to send it.
        if self.erasure.is_some() {
            return None;
        }
        interview_session::redirect::redirect_url(
            self.completion_redirect_url.as_deref(),
            self.participant_ref.as_deref(),
            self.status,
            self.end_reason,
        )
    }

    /// Forgets everything the session's content gave the view. Whole collections are dropped
    /// rather than blanked, so the view is the same whether it was folded from the events before
    /// or after they were erased. The stored transcript and results rows go with it
    /// (`erasure::forget_views`).
    pub fn erase(&mut self) {
        self.participant_ref = None;
        self.pending_interaction = None;
        self.extracted_fields.clear();
        self.errors.clear();
        self.screening = None;
        self.summary = None;
    }

    /// Folds one event (stored at `seq`) into the view, appending any transcript rows it makes.
    // Long by design: one arm per event type, exhaustive, so a new event type is listed here by
    // the compiler; each arm is the view's whole change for that event.
    pub fn apply(&mut self, seq: u64, event: &SessionEvent, rows: &mut NewRows) {
        let NewRows {
            transcript,
            fields: changed_fields,
        } = rows;
        let at = event.at;
        let answered = self.pending_interaction.as_ref().map(|p| &p.kind);
        self.turns.note(self.current_phase, &event.body, answered);
        match &event.body {
            EventBody::SessionCreated {
                session_id,
                study,
                participant_ref,
                participant_token_sha256,
                preview,
                ..
            } => {
                self.session_id = session_id.to_string();
                self.study_id = study.study_id.clone();
                self.public_slug = study.public_slug.clone();
                self.config_versions = Some(study.config_versions.clone());
                self.participant_ref = participant_ref.clone();
                self.participant_token_sha256 = participant_token_sha256.clone();
                self.preview = *preview;
                self.created_at = Some(at);
                self.idle_ttl_minutes = study.study_config.limits.idle_ttl_minutes;
                self.completion_redirect_url = study.study_config.completion_redirect_url.clone();
            }
            EventBody::StatusChanged { to, .. } => {
                self.status = *to;
                if to.is_terminal() {
                    self.pending_interaction = None;
                    self.ended_at = Some(at);
                }
            }
            EventBody::ParticipantMessageCreated {
                turn_id, content, ..
            } => {
                transcript.push(TranscriptRow {
                    seq,
                    turn_id: turn_id.to_string(),
                    role: "user".into(),
                    kind: "message".into(),
                    content: content.clone(),
                    interaction_id: None,
                    created_at: at,
                });
            }
            EventBody::AgentMessageStarted { .. } => {}
            EventBody::AgentMessageCompleted {
                message_id,
                content,
            } => transcript.push(TranscriptRow {
                seq,
                turn_id: message_id.to_string(),
                role: "assistant".into(),
                kind: "message".into(),
                content: content.clone(),
                interaction_id: None,
                created_at: at,
            }),
            // Tool calls and interaction events are not kept here: they are in the log once
            // already, and the researcher routes fold them from it (`widget_history`).
            EventBody::ToolCallCreated { .. } | EventBody::ToolCallCompleted { .. } => {}
            EventBody::InteractionRendered { interaction } => {
                self.pending_interaction = Some((**interaction).clone());
            }
            EventBody::InteractionSubmitted {
                interaction_id,
                turn_id,
                status,
                value,
                ..
            } => {
                let pending = self.pending_interaction.take();
                let kind = pending.as_ref().map(|p| &p.kind);
                transcript.push(TranscriptRow {
                    seq,
                    turn_id: turn_id.to_string(),
                    role: "user".into(),
                    kind: "interaction".into(),
                    content: describe_answer(kind, *status, value.as_ref()),
                    interaction_id: Some(interaction_id.clone()),
                    created_at: at,
                });
            }
            EventBody::SessionCompleted {
                summary,
                summary_confirmed,
                reason,
            } => {
                self.summary = Some(summary.clone());
                self.summary_confirmed = Some(*summary_confirmed);
                self.end_reason = Some(*reason);
            }
            EventBody::PhaseChanged { to, .. } => self.current_phase = *to,
            EventBody::ConsentRecorded { accepted, .. } => self.consent = Some(*accepted),
            EventBody::ScreeningEvaluated {
                eligible,
                rationale,
                decided_by,
                ..
            } => {
                let mut verdict = serde_json::json!({ "eligible": eligible, "rationale": rationale });
                // A model call that judged is named with what it cost; without one the study's
                // rules decided (and views of older logs stay as they were).
                if let Some(p) = decided_by {
                    verdict["model"] = p.model.clone().into();
                    verdict["prompt_version_id"] = p.prompt_version_id.clone().into();
                    verdict["latency_ms"] = p.latency_ms.into();
                    verdict["token_usage"] =
                        serde_json::to_value(p.token_usage).unwrap_or_default();
                }
                self.screening = Some(verdict);
            }
            // Decisions are not kept here: the log has them once, and readers fold the
            // decision log from it (`decision_log`).
            EventBody::DecisionRecorded { .. } => {}
            EventBody::SummaryProposed { summary } => {
                self.summary = Some(summary.clone());
                self.summary_confirmed = None;
            }
            EventBody::SummaryConfirmed { confirmed, .. } => self.summary_confirmed = Some(*confirmed),
            EventBody::ExtractionCompleted { fields, is_final, .. } => {
                self.final_extraction_done |= *is_final;
                for f in fields {
                    let value = serde_json::to_value(f).expect("fields serialize");
                    // A field extracted again as it stood is not written again.
                    if self.extracted_fields.get(&f.field_id) != Some(&value) {
                        changed_fields.insert(f.field_id.clone(), value.clone());
                        self.extracted_fields.insert(f.field_id.clone(), value);
                    }
                }
            }
            EventBody::ExtractionStarted { .. } | EventBody::EndRequested {} => {}
            EventBody::ErrorRecorded { source, code, message } => self.errors.push(serde_json::json!({
                "source": source, "code": code, "message": message, "created_at": at, "sequence": seq,
            })),
            EventBody::SessionAbandoned { reason } => self.end_reason = Some(*reason),
            EventBody::ParticipantDataErased(erasure) => {
                self.erase();
                transcript.clear();
                changed_fields.clear();
                self.erasure = Some(serde_json::json!({
                    "erased_at": at,
                    "erased_by": erasure.by,
                    "reason": erasure.reason,
                    "erased_events": erasure.erased_events,
                }));
            }
        }
        self.last_activity_at = Some(at);
        self.last_seq = seq;
    }
}

/// The participant's answer in words, for the transcript (never raw JSON).
pub fn describe_answer(
    kind: Option<&InteractionKind>,
    status: SubmitStatus,
    value: Option<&Value>,
) -> String {
    if status == SubmitStatus::Skipped {
        return "(skipped)".into();
    }
    let Some(value) = value else {
        return String::new();
    };
    interview_session::widget_answers::in_words(kind, value)
}
