//! Session events: a permanent schema.
//!
//! How an event is stored (its version 2 payload, its hash beside it) and read back (every
//! version, through one upcasting point) is `codec`'s. Event type strings are never renamed; a
//! changed shape gets a new `event_version` and an upcaster there.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

pub use crate::decision::ConcludeReason;
use crate::decision::{AgentAction, ExtractedField, TokenUsage};
use crate::interaction::InteractionToolCall;
use crate::study::PinnedStudy;

pub use crate::status::{Phase, SessionStatus, SubmitStatus};

/// The business content of an event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum EventBody {
    #[serde(rename = "session.created")]
    SessionCreated {
        session_id: Uuid,
        study: Box<PinnedStudy>,
        participant_ref: Option<String>,
        /// SHA-256 of the participant token; the token itself is never stored.
        participant_token_sha256: String,
        preview: bool,
        /// 256 random bits (hex) the salts of the session's events are derived from
        /// (`SessionEvent::salt`); erased with its content. Absent in sessions created before.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        chain_secret: Option<String>,
    },
    #[serde(rename = "session.status_changed")]
    StatusChanged {
        from: SessionStatus,
        to: SessionStatus,
    },
    #[serde(rename = "session.phase_changed")]
    PhaseChanged { from: Phase, to: Phase },
    #[serde(rename = "consent.recorded")]
    ConsentRecorded {
        accepted: bool,
        consent_version: String,
    },
    /// The screening verdict, with the answers it was made on.
    #[serde(rename = "screening.evaluated")]
    ScreeningEvaluated {
        eligible: bool,
        rationale: String,
        answers: std::collections::BTreeMap<String, Option<Value>>,
        /// The model call that judged (model, prompt, latency, tokens); absent when the study's
        /// rules decided, and in logs written before it was recorded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        decided_by: Option<crate::decision::Provenance>,
    },
    /// One interviewer decision with its full log (FR-04-11). `proposed_action` is set when a
    /// guard rewrote what the policy proposed.
    ///
    /// What is empty — no turn, no rewrite, no time or tokens spent (the rules) — is left out of
    /// the stored payload (`codec::payload`) and read back as empty; logs written before carry
    /// it as `null` / `0`. The event's own serde form (what researchers are shown) keeps it.
    #[serde(rename = "agent.decision.recorded")]
    DecisionRecorded {
        decision_id: Uuid,
        /// The participant turn the decision answers, if any.
        #[serde(default)]
        turn_id: Option<Uuid>,
        phase: Phase,
        input_summary: String,
        selected_action: AgentAction,
        #[serde(default)]
        proposed_action: Option<AgentAction>,
        rationale: String,
        model: String,
        prompt_version_id: String,
        #[serde(default)]
        latency_ms: u64,
        #[serde(default)]
        token_usage: TokenUsage,
        /// The study's `agent.prompt_version` (its instructions' label); absent in logs written
        /// before it was recorded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        study_prompt_version: Option<String>,
        /// For an extraction decided alongside an utterance: that utterance's message id (its
        /// claim stays open). Absent for every other decision.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        alongside: Option<Uuid>,
        /// What the participant's input the decision follows is (absent in older logs, and for
        /// decisions that follow none).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input_class: Option<crate::input_class::InputClass>,
        /// The proposal the runtime refused and this decision replaces (absent when none was).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        refused_proposal: Option<Box<crate::decision::RefusedProposal>>,
    },
    #[serde(rename = "summary.proposed")]
    SummaryProposed { summary: String },
    #[serde(rename = "summary.confirmed")]
    SummaryConfirmed {
        confirmed: bool,
        /// What the participant added instead of confirming.
        addition: Option<String>,
    },
    #[serde(rename = "extraction.started")]
    ExtractionStarted {
        extraction_id: Uuid,
        #[serde(rename = "final")]
        is_final: bool,
    },
    #[serde(rename = "extraction.completed")]
    ExtractionCompleted {
        extraction_id: Uuid,
        fields: Vec<ExtractedField>,
        #[serde(rename = "final")]
        is_final: bool,
        /// For the final extraction: the model call that made it (absent when the rules copier
        /// did, and in logs written before it was recorded). In-interview extractions have
        /// their decision for this.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        decided_by: Option<crate::decision::Provenance>,
    },
    /// Something went wrong and was handled (a refused decision, a model failure): kept for
    /// auditors, never shown to participants.
    #[serde(rename = "error.recorded")]
    ErrorRecorded {
        source: String,
        code: String,
        message: String,
    },
    #[serde(rename = "participant.message.created")]
    ParticipantMessageCreated {
        turn_id: Uuid,
        client_message_id: Option<String>,
        content: String,
    },
    /// A run claims the next utterance. `process_id` names the server process running it (so a
    /// restarted or surviving process can tell a dead claim from a live one); `takes_over` is
    /// the run whose claim this one replaced because its process had died. Both are absent
    /// from claims written before they existed.
    #[serde(rename = "agent.message.started")]
    AgentMessageStarted {
        message_id: Uuid,
        run_id: Uuid,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        process_id: Option<Uuid>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        takes_over: Option<Uuid>,
    },
    #[serde(rename = "agent.message.completed")]
    AgentMessageCompleted { message_id: Uuid, content: String },
    #[serde(rename = "tool.call.created")]
    ToolCallCreated {
        tool_call_id: String,
        tool_name: String,
        tool_input: Value,
    },
    #[serde(rename = "interaction.rendered")]
    InteractionRendered {
        interaction: Box<InteractionToolCall>,
    },
    #[serde(rename = "interaction.submitted")]
    InteractionSubmitted {
        interaction_id: String,
        turn_id: Uuid,
        status: SubmitStatus,
        value: Option<Value>,
        client_context: Option<Value>,
    },
    #[serde(rename = "tool.call.completed")]
    ToolCallCompleted {
        tool_call_id: String,
        tool_result: Value,
    },
    #[serde(rename = "session.completed")]
    SessionCompleted {
        summary: String,
        summary_confirmed: bool,
        reason: ConcludeReason,
    },
    #[serde(rename = "session.abandoned")]
    SessionAbandoned { reason: ConcludeReason },
    /// The participant pressed "end" (`POST …/end`): questioning stops and the summary is
    /// confirmed; pressed again at the confirmation, the session completes unconfirmed.
    #[serde(rename = "session.end_requested")]
    EndRequested {},
    /// The participant's data was erased (withdrawal, a researcher acting on a request, or the
    /// study's retention): every event before this one is stored in its erased form from now on
    /// (`codec/erased.rs`), and this event says what was erased and how to check it. It holds no
    /// content: who asked, when (`at`), why, and a digest of the erased events as stored.
    #[serde(rename = "participant.data.erased")]
    ParticipantDataErased(crate::erasure::Erasure),
}

/// What an event says a model call cost: the calls it stands for and their tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelUse {
    pub calls: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
}

impl EventBody {
    /// The model call an event records, if any: a decision a model made (a rules decision
    /// carries the tokens of a failed call it stands in for, if any, and counts no call), a
    /// model's screening verdict or final extraction, or a failed call (a model or extraction
    /// error, a model's text refused). The per-turn budget and the study overview count alike.
    pub fn model_use(&self) -> Option<ModelUse> {
        let usage = |u: &crate::decision::TokenUsage, calls| ModelUse {
            calls,
            prompt_tokens: u64::from(u.prompt_tokens),
            completion_tokens: u64::from(u.completion_tokens),
            total_tokens: u64::from(u.total_tokens),
        };
        match self {
            // A decision that replaces a refused model proposal carries that call.
            Self::DecisionRecorded {
                model,
                token_usage,
                refused_proposal,
                ..
            } => Some(usage(
                token_usage,
                u64::from(
                    model != "rules"
                        || refused_proposal
                            .as_ref()
                            .is_some_and(|r| r.model != "rules"),
                ),
            )),
            Self::ScreeningEvaluated {
                decided_by: Some(p),
                ..
            }
            | Self::ExtractionCompleted {
                decided_by: Some(p),
                ..
            } => Some(usage(&p.token_usage, 1)),
            // A call the breaker kept from going out was no call.
            Self::ErrorRecorded { source, code, .. }
                if (source == "model"
                    || source == "extraction"
                    || code == "model_text_refused")
                    && code != "model_circuit_open" =>
            {
                Some(ModelUse {
                    calls: 1,
                    ..ModelUse::default()
                })
            }
            _ => None,
        }
    }

    pub fn event_type(&self) -> &'static str {
        match self {
            Self::SessionCreated { .. } => "session.created",
            Self::StatusChanged { .. } => "session.status_changed",
            Self::PhaseChanged { .. } => "session.phase_changed",
            Self::ConsentRecorded { .. } => "consent.recorded",
            Self::ScreeningEvaluated { .. } => "screening.evaluated",
            Self::DecisionRecorded { .. } => "agent.decision.recorded",
            Self::SummaryProposed { .. } => "summary.proposed",
            Self::SummaryConfirmed { .. } => "summary.confirmed",
            Self::ExtractionStarted { .. } => "extraction.started",
            Self::ExtractionCompleted { .. } => "extraction.completed",
            Self::ErrorRecorded { .. } => "error.recorded",
            Self::ParticipantMessageCreated { .. } => "participant.message.created",
            Self::AgentMessageStarted { .. } => "agent.message.started",
            Self::AgentMessageCompleted { .. } => "agent.message.completed",
            Self::ToolCallCreated { .. } => "tool.call.created",
            Self::InteractionRendered { .. } => "interaction.rendered",
            Self::InteractionSubmitted { .. } => "interaction.submitted",
            Self::ToolCallCompleted { .. } => "tool.call.completed",
            Self::SessionCompleted { .. } => "session.completed",
            Self::SessionAbandoned { .. } => "session.abandoned",
            Self::EndRequested { .. } => "session.end_requested",
            Self::ParticipantDataErased(_) => "participant.data.erased",
        }
    }
}

/// One event: its body, when it happened, and its link in the hash chain. Its serde form is the
/// version 1 payload (what the researcher routes show for every version); the stored form is
/// `codec`'s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionEvent {
    #[serde(flatten)]
    pub body: EventBody,
    pub at: DateTime<Utc>,
    /// 128 bits under the hash of an event that holds personal data (since 2026-12-03), derived
    /// from the session's secret (`SessionCreated::chain_secret`) and erased with it: without
    /// them, the hash an erased event keeps would confirm a guess of what it held (a yes or a
    /// no, one of five options, a panel id from a list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub salt: Option<String>,
    pub prev_hash: String,
    pub hash: String,
}
