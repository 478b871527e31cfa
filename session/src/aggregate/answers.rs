//! What the folded session answers: its status, phase, study, pending widget, objectives,
//! fields, summary, screening — read by the guards, the harness and researchers' routes.

use super::*;

impl Session {
    /// The session folded from its events, in order.
    pub fn from_events(events: impl IntoIterator<Item = SessionEvent>) -> Self {
        let mut session = Self::default();
        for event in events {
            session.apply(event);
        }
        session
    }

    pub fn status(&self) -> SessionStatus {
        self.status
    }

    /// The participant's data was erased.
    pub fn is_erased(&self) -> bool {
        self.erased
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    pub fn turn_count(&self) -> u32 {
        self.turns.count()
    }

    pub fn study(&self) -> Option<&PinnedStudy> {
        self.study.as_deref()
    }

    /// A researcher's preview of their study, not a participant's interview.
    pub fn is_preview(&self) -> bool {
        self.preview
    }

    pub fn pending_interaction(&self) -> Option<&InteractionToolCall> {
        self.pending.as_deref()
    }

    pub fn consent(&self) -> Option<bool> {
        self.consent
    }

    pub fn objective(&self, id: &str) -> ObjectiveProgress {
        self.objectives.get(id).cloned().unwrap_or_default()
    }

    pub fn current_objective(&self) -> Option<&str> {
        self.current_objective.as_deref()
    }

    /// The open claim on the next utterance, if a run holds one.
    pub fn open_claim(&self) -> Option<&OpenClaim> {
        self.open_message.as_ref()
    }

    pub fn last_turn_id(&self) -> Option<Uuid> {
        self.last_turn_id
    }

    pub fn fields(&self) -> &BTreeMap<String, ExtractedField> {
        &self.fields
    }

    pub fn summary(&self) -> Option<&str> {
        self.summary.as_deref()
    }

    /// The participant's addition to the latest summary (an unconfirmed reply that is not an
    /// end intent).
    pub fn summary_addition(&self) -> Option<&str> {
        self.summary_addition.as_deref()
    }

    pub fn summary_confirmed(&self) -> Option<bool> {
        self.summary_confirmed
    }

    pub fn end_requested(&self) -> bool {
        self.end_requested
    }

    pub fn one_word_streak(&self) -> u32 {
        self.one_word_streak
    }

    pub fn screening_verdict(&self) -> Option<bool> {
        self.screening
    }

    pub fn screening_answers(&self) -> &BTreeMap<String, Option<serde_json::Value>> {
        &self.screening_answers
    }

    /// The next screening question to ask, once consent is given and until all are answered.
    pub fn next_screening_question(&self) -> Option<&crate::study::ScreeningQuestion> {
        let study = self.study.as_deref()?;
        study
            .study_config
            .screening
            .questions
            .iter()
            .find(|q| !self.screening_answers.contains_key(&q.id))
    }

    /// Screening questions exist, are all answered, and await their verdict.
    pub fn screening_awaits_verdict(&self) -> bool {
        let has_questions = self
            .study
            .as_deref()
            .is_some_and(|s| !s.study_config.screening.questions.is_empty());
        has_questions && self.screening.is_none() && self.next_screening_question().is_none()
    }

    pub fn safety_triggered(&self) -> bool {
        self.safety_triggered
    }

    /// Consent given, screening passed (or none), no safety stop: the interview proper.
    pub fn interviewing(&self) -> bool {
        self.consent == Some(true)
            && !self.safety_triggered
            && self.screening != Some(false)
            && self.next_screening_question().is_none()
            && !self.screening_awaits_verdict()
    }

    /// Whether the post-session extraction has completed.
    pub fn final_extraction_done(&self) -> bool {
        self.final_extraction.is_some_and(|(_, _, done)| done)
    }

    pub fn created_at(&self) -> Option<DateTime<Utc>> {
        self.created_at
    }

    /// Hash of the last applied event (the chain head).
    pub fn head_hash(&self) -> &str {
        self.last_hash.as_deref().unwrap_or(GENESIS_HASH)
    }

    /// The time an event is stamped with: the command's time to the microsecond (what both
    /// stores keep, so a stored row and the row rebuilt from the log agree), and never earlier
    /// than the session's last event — commands decided on a stale clock reading, or a slower
    /// process's clock, cannot make time run backwards within a session.
    pub fn event_time(&self, at: DateTime<Utc>) -> DateTime<Utc> {
        let at = micros(at);
        // Every applied event sets `last_activity_at`: it is the last event's time.
        match self.last_activity_at {
            Some(last) if last > at => last,
            _ => at,
        }
    }
}
