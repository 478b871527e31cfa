//! What counts as a participant turn: the one rule the aggregate's fold (the turn limit, the
//! objectives answered) and the `session_state` view (`turn_count`) both follow.
//!
//! In a phase that counts turns ([`Phase::counts_turns`]) a participant message is a turn, and
//! so is an answer to a widget other than consent. A message that follows a counted answer in
//! the same command (AG-UI's "answer in my own words") belongs to that answer's turn; only the
//! events a submission itself writes (its tool call's completion, a consent record, a status
//! change) keep that way open for it.

use serde::{Deserialize, Serialize};

use crate::events::{EventBody, Phase};
use crate::interaction::InteractionKind;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turns {
    /// Turns so far (the view stores it as `turn_count`).
    #[serde(rename = "turn_count")]
    count: u32,
    /// The last event was a counted widget answer: a message may follow it in the same turn.
    /// Lives only while one command's events are folded.
    #[serde(skip)]
    answer_open: bool,
}

impl Turns {
    pub fn count(&self) -> u32 {
        self.count
    }

    /// A message may follow the event just folded as part of its turn.
    pub fn message_may_follow(&self) -> bool {
        self.answer_open
    }

    /// Folds one event. `phase` is the session's phase before it; `answered` is the widget a
    /// submission answers (the pending one). True when the event began a new turn.
    pub fn note(
        &mut self,
        phase: Phase,
        body: &EventBody,
        answered: Option<&InteractionKind>,
    ) -> bool {
        let follows_answer = self.answer_open;
        if !matches!(
            body,
            EventBody::ToolCallCompleted { .. }
                | EventBody::ConsentRecorded { .. }
                | EventBody::StatusChanged { .. }
        ) {
            self.answer_open = false;
        }
        let new_turn = phase.counts_turns()
            && match body {
                EventBody::ParticipantMessageCreated { .. } => !follows_answer,
                EventBody::InteractionSubmitted { .. } => {
                    answered.is_some_and(|kind| !matches!(kind, InteractionKind::Consent { .. }))
                }
                _ => false,
            };
        if new_turn {
            self.count += 1;
            self.answer_open = matches!(body, EventBody::InteractionSubmitted { .. });
        }
        new_turn
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::SubmitStatus;
    use uuid::Uuid;

    fn message() -> EventBody {
        EventBody::ParticipantMessageCreated {
            turn_id: Uuid::new_v4(),
            client_message_id: None,
            content: "I shop on Saturdays".into(),
        }
    }

    fn answer() -> EventBody {
        EventBody::InteractionSubmitted {
            interaction_id: "i1".into(),
            turn_id: Uuid::new_v4(),
            status: SubmitStatus::Skipped,
            value: None,
            client_context: None,
        }
    }

    const YES_NO: InteractionKind = InteractionKind::YesNo {};

    #[test]
    fn a_message_or_a_widget_answer_is_a_turn_where_the_phase_counts_them() {
        let mut turns = Turns::default();
        assert!(turns.note(Phase::AskOrProbe, &message(), None));
        assert!(turns.note(Phase::OptionalInteraction, &answer(), Some(&YES_NO)));
        assert!(!turns.note(Phase::SummaryConfirmation, &message(), None));
        assert!(!turns.note(Phase::ConsentOrScreening, &answer(), Some(&YES_NO)));
        assert_eq!(turns.count(), 2);
    }

    #[test]
    fn consent_is_never_a_turn() {
        let consent = InteractionKind::Consent {
            consent_text: "Agree?".into(),
            consent_version: "1".into(),
        };
        let mut turns = Turns::default();
        assert!(!turns.note(Phase::AskOrProbe, &answer(), Some(&consent)));
        assert!(!turns.note(Phase::AskOrProbe, &answer(), None));
        assert!(!turns.message_may_follow());
        assert_eq!(turns.count(), 0);
    }

    #[test]
    fn a_message_right_after_an_answer_joins_its_turn_until_another_event_intervenes() {
        let mut turns = Turns::default();
        turns.note(Phase::AskOrProbe, &answer(), Some(&YES_NO));
        let completed = EventBody::ToolCallCompleted {
            tool_call_id: "i1".into(),
            tool_result: serde_json::Value::Null,
        };
        assert!(!turns.note(Phase::AskOrProbe, &completed, None));
        assert!(turns.message_may_follow());
        assert!(!turns.note(Phase::AskOrProbe, &message(), None));
        assert_eq!(turns.count(), 1);
        // The next message is a turn of its own.
        assert!(!turns.message_may_follow());
        assert!(turns.note(Phase::AskOrProbe, &message(), None));
        // An interviewer event closes the way.
        turns.note(Phase::AskOrProbe, &answer(), Some(&YES_NO));
        turns.note(Phase::AskOrProbe, &EventBody::EndRequested {}, None);
        assert!(turns.note(Phase::AskOrProbe, &message(), None));
        assert_eq!(turns.count(), 4);
    }
}
