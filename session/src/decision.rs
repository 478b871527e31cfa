//! Interviewer decisions: the one action per decision, why it was taken, and the log FR-04-11
//! asks for. A decision is proposed by a policy (the rules interviewer or a model) and judged by
//! the aggregate, which may rewrite it (`proposed_action` keeps what was asked for).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::interaction::InteractionSpec;
use crate::status::Phase;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(strum::EnumIter))]
#[serde(rename_all = "snake_case")]
#[derive(strum::AsRefStr, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum ProbeTrigger {
    Vague,
    StrongEmotion,
    Contradiction,
    MissingField,
}

/// Why a session ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(test, derive(strum::EnumIter))]
#[serde(rename_all = "snake_case")]
#[derive(strum::AsRefStr, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum ConcludeReason {
    AllMustObjectivesCovered,
    /// Every must objective was asked, not all of them covered (answers below the threshold,
    /// widgets skipped): the interviewer had nothing left to ask.
    AllMustObjectivesAsked,
    ConfidenceThresholdMet,
    MaxTurnsReached,
    MaxDurationReached,
    ParticipantRequestedEnd,
    ParticipantFatigue,
    ScreeningFailed,
    SafetyTriggered,
    ConsentDeclined,
    Timeout,
    /// The participant withdrew (`POST …/withdraw`) while the interview ran; their data is
    /// erased next. Only the withdrawal ends a session with it: no interviewer may.
    Withdrawn,
    /// The participant consented when every place of the study was taken
    /// (`limits.max_sessions`, counted in consented sessions).
    StudyFull,
    /// The participant consented while their `participant_ref` held another open, consented
    /// session of the study (`one_active_session_per_participant`).
    DuplicateParticipant,
}

/// How an abandoned session stopped, as the study overview and panels tell them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// The participant did not consent.
    Declined,
    /// The screening found the participant not eligible.
    ScreenedOut,
    /// Nobody answered within the study's idle time.
    IdleExpired,
    /// Any other end of an interview that did not complete.
    Otherwise,
}

impl ConcludeReason {
    /// Reasons that end a session as `abandoned` rather than `completed`. Every reason is
    /// listed (here and in [`Self::stopped`]), so a new one is decided on, not defaulted.
    pub fn abandons(self) -> bool {
        match self {
            Self::ScreeningFailed
            | Self::SafetyTriggered
            | Self::ConsentDeclined
            | Self::Withdrawn
            | Self::StudyFull
            | Self::DuplicateParticipant => true,
            Self::AllMustObjectivesCovered
            | Self::AllMustObjectivesAsked
            | Self::ConfidenceThresholdMet
            | Self::MaxTurnsReached
            | Self::MaxDurationReached
            | Self::ParticipantRequestedEnd
            | Self::ParticipantFatigue
            | Self::Timeout => false,
        }
    }

    /// How a session abandoned for this reason stopped.
    pub fn stopped(self) -> Stopped {
        match self {
            Self::ConsentDeclined => Stopped::Declined,
            Self::ScreeningFailed => Stopped::ScreenedOut,
            Self::Timeout => Stopped::IdleExpired,
            Self::AllMustObjectivesCovered
            | Self::AllMustObjectivesAsked
            | Self::ConfidenceThresholdMet
            | Self::MaxTurnsReached
            | Self::MaxDurationReached
            | Self::ParticipantRequestedEnd
            | Self::ParticipantFatigue
            | Self::SafetyTriggered
            | Self::Withdrawn
            | Self::StudyFull
            | Self::DuplicateParticipant => Stopped::Otherwise,
        }
    }
}

/// The action of a decision: exactly one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum AgentAction {
    AskQuestion {
        objective_id: String,
    },
    Probe {
        objective_id: String,
        based_on_turn_id: Option<Uuid>,
        trigger: ProbeTrigger,
    },
    /// A widget: for an objective, or (no objective) the runtime's consent panel.
    RenderInteraction {
        objective_id: Option<String>,
    },
    ExtractFields,
    SummarizeAndConfirm,
    Conclude {
        reason: ConcludeReason,
    },
}

impl AgentAction {
    pub fn name(&self) -> &'static str {
        match self {
            Self::AskQuestion { .. } => "ask_question",
            Self::Probe { .. } => "probe",
            Self::RenderInteraction { .. } => "render_interaction",
            Self::ExtractFields => "extract_fields",
            Self::SummarizeAndConfirm => "summarize_and_confirm",
            Self::Conclude { .. } => "conclude",
        }
    }

    /// The action as a researcher reads it in a rationale: `ask_question(planning_habits)`,
    /// `conclude(max_turns_reached)`.
    pub fn label(&self) -> String {
        let detail = match self {
            Self::Conclude { reason } => Some(reason.as_ref().to_string()),
            other => other.objective_id().map(String::from),
        };
        match detail {
            Some(d) => format!("{}({d})", self.name()),
            None => self.name().to_string(),
        }
    }

    pub fn objective_id(&self) -> Option<&str> {
        match self {
            Self::AskQuestion { objective_id } | Self::Probe { objective_id, .. } => {
                Some(objective_id)
            }
            Self::RenderInteraction { objective_id } => objective_id.as_deref(),
            _ => None,
        }
    }

    /// The harness phase (FR-04-9) a decision with this action belongs to.
    pub fn phase(&self, first_question: bool) -> Phase {
        match self {
            Self::AskQuestion { .. } if first_question => Phase::Opening,
            Self::AskQuestion { .. } | Self::Probe { .. } => Phase::AskOrProbe,
            Self::RenderInteraction { objective_id: None } => Phase::ConsentOrScreening,
            Self::RenderInteraction { .. } => Phase::OptionalInteraction,
            Self::ExtractFields => Phase::Extract,
            Self::SummarizeAndConfirm => Phase::SummaryConfirmation,
            Self::Conclude { .. } => Phase::Conclude,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub total_tokens: u32,
}

impl TokenUsage {
    /// Nothing spent (a rules decision): stored payloads leave such a usage out.
    pub fn is_zero(&self) -> bool {
        *self == Self::default()
    }
}

/// What a field holds: an answer, or the participant's declining to answer or not knowing —
/// which a researcher must tell from no value at all (the field absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FieldStatus {
    #[default]
    Answered,
    /// The participant declined ("I'd rather not say"); the value is null.
    Refused,
    /// The participant said they do not know ("I don't know", "不知道"); the value is null.
    Unknown,
    /// The participant skipped the widget that asks for it (none of its options may have fit);
    /// the value is null.
    Skipped,
}

impl FieldStatus {
    pub fn is_answered(&self) -> bool {
        *self == FieldStatus::Answered
    }
}

/// One extracted output field, with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExtractedField {
    pub field_id: String,
    pub value: Value,
    pub confidence: f64,
    #[serde(default)]
    pub evidence_turn_ids: Vec<Uuid>,
    #[serde(default)]
    pub quote: Option<String>,
    /// Stored only when not `answered` (older logs have none).
    #[serde(default, skip_serializing_if = "FieldStatus::is_answered")]
    pub status: FieldStatus,
}

/// Who decided and at what cost: the provenance half of the decision log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// `rules` for the built-in interviewer, else the model name.
    pub model: String,
    pub prompt_version_id: String,
    pub latency_ms: u64,
    pub token_usage: TokenUsage,
}

/// A proposal the runtime refused, kept on the decision carried out in its place, so the
/// decision log loses none (FR-04-11): what was proposed, by which model under which prompt,
/// why, and why it was refused. The call's latency and tokens are on the decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RefusedProposal {
    pub proposed_action: AgentAction,
    pub rationale: String,
    pub model: String,
    pub prompt_version_id: String,
    /// The guard's reason ("SafetyTriggered does not hold for this session").
    pub reason: String,
}

/// What a policy proposes; the aggregate judges it.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    pub action: AgentAction,
    pub rationale: String,
    /// What the participant is told (ask, probe, summary, closing; optional with a widget).
    pub message: Option<String>,
    /// The widget to render with `render_interaction`.
    pub interaction: Option<InteractionSpec>,
    /// Fields extracted with `extract_fields`.
    pub fields: Vec<ExtractedField>,
    /// The summary proposed with `summarize_and_confirm`.
    pub summary: Option<String>,
    pub input_summary: String,
    pub provenance: Provenance,
    /// What the participant's latest input is, as the policy judged it.
    pub input_class: Option<crate::input_class::InputClass>,
    /// The policy's proposal the runtime refused, when this one replaces it.
    pub refused: Option<Box<RefusedProposal>>,
}
