//! Where a session stands: its status (FR-04-3), the interviewer's phase (FR-04-9), and whether
//! a widget was answered or skipped. Small enums the events, decisions and errors all name.

use serde::{Deserialize, Serialize};

/// Session status (FR-04-3): `created → active → waiting_for_user | waiting_for_tool → active →
/// … → completed | abandoned`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(test, derive(strum::EnumIter))]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum SessionStatus {
    #[default]
    Created,
    Active,
    WaitingForUser,
    WaitingForTool,
    Completed,
    Abandoned,
}

impl SessionStatus {
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Abandoned)
    }

    /// The status machine (FR-04-3).
    pub fn can_become(self, to: SessionStatus) -> bool {
        use SessionStatus::*;
        match self {
            Created => matches!(to, Active | Abandoned),
            Active => matches!(to, WaitingForUser | WaitingForTool | Completed | Abandoned),
            WaitingForUser | WaitingForTool => matches!(to, Active | Completed | Abandoned),
            Completed | Abandoned => false,
        }
    }

    /// The name as the events and the API spell it.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl Phase {
    /// Participant input in this phase counts as a turn (not consent, screening or the summary
    /// confirmation reply).
    pub fn counts_turns(self) -> bool {
        !matches!(self, Phase::ConsentOrScreening | Phase::SummaryConfirmation)
    }
}

/// Interviewer phases (FR-04-9).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(test, derive(strum::EnumIter))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[derive(strum::AsRefStr, strum::IntoStaticStr)]
#[strum(serialize_all = "SCREAMING_SNAKE_CASE")]
pub enum Phase {
    #[default]
    LoadContext,
    ConsentOrScreening,
    Opening,
    AskOrProbe,
    OptionalInteraction,
    Extract,
    EvaluateCoverage,
    NextTopicOrProbe,
    SummaryConfirmation,
    Conclude,
    PostSessionExtraction,
    End,
}

/// A participant's answer to an interaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubmitStatus {
    Submitted,
    Skipped,
}
