//! How each event folds into the session: the state every guard judges by. Pure: no I/O, no
//! clock, nothing but the event.

use super::*;

impl Session {
    /// Folds one event (cqrs-es's `apply`).
    // Long by design: one arm per event type, and the match is exhaustive, so the compiler lists
    // this fold for a new event type; split, the state an event changes would be spread out.
    pub(super) fn fold(&mut self, event: SessionEvent) {
        let answered = self.pending.as_deref().map(|p| &p.kind);
        let new_turn = self.turns.note(self.phase, &event.body, answered);
        self.outcome.note(self.phase, &event.body, event.at);
        match event.body {
            EventBody::SessionCreated {
                session_id,
                study,
                preview,
                chain_secret,
                ..
            } => {
                self.chain_secret = chain_secret;
                self.preview = preview;
                self.session_id = Some(session_id);
                self.study = Some(std::sync::Arc::from(study));
                self.created_at = Some(event.at);
            }
            EventBody::StatusChanged { to, .. } => {
                self.status = to;
                if to.is_terminal() {
                    self.pending = None;
                    self.open_message = None;
                }
            }
            EventBody::PhaseChanged { to, .. } => self.phase = to,
            EventBody::ParticipantMessageCreated {
                turn_id, content, ..
            } => {
                self.turn_ids
                    .insert(turn_id, Some(crate::hash::sha256_hex(content.as_bytes())));
                self.last_turn_id = Some(turn_id);
                if new_turn {
                    if let Some(objective) = &self.current_objective {
                        self.objectives
                            .entry(objective.clone())
                            .or_default()
                            .answered = true;
                    }
                    self.one_word_streak = if text::is_one_word(&content) {
                        self.one_word_streak + 1
                    } else {
                        0
                    };
                }
                let study = self.study.as_deref();
                // An end phrase as the whole message. A sentence that asks for the end is
                // recorded as its own `session.end_requested` when the message is taken
                // (`post_message`), so how a log folds never depends on today's phrase lists.
                if study
                    .is_some_and(|s| text::matches_phrase(&content, &s.agent_config.end_phrases))
                {
                    self.end_requested = true;
                }
                if study
                    .is_some_and(|s| text::matches_any(&content, &s.agent_config.safety_patterns))
                {
                    self.safety_triggered = true;
                }
            }
            EventBody::AgentMessageStarted {
                message_id,
                run_id,
                process_id,
                ..
            } => {
                self.open_message = Some(OpenClaim {
                    message_id,
                    run_id,
                    process_id,
                    at: event.at,
                })
            }
            EventBody::AgentMessageCompleted { .. } | EventBody::DecisionRecorded { .. } => {
                let mut keeps_claim = false;
                if let EventBody::DecisionRecorded {
                    selected_action,
                    alongside,
                    ..
                } = &event.body
                {
                    self.record_action(selected_action);
                    keeps_claim = alongside.is_some();
                }
                if !keeps_claim {
                    self.open_message = None;
                }
            }
            EventBody::InteractionRendered { interaction } => self.pending = Some(interaction),
            EventBody::InteractionSubmitted {
                interaction_id,
                turn_id,
                value,
                status,
                ..
            } => {
                let pending = self.pending.take();
                if let (SubmitStatus::Skipped, Some(objective)) = (
                    status,
                    pending.as_ref().and_then(|p| p.objective_id.clone()),
                ) {
                    self.objectives.entry(objective).or_default().skipped = true;
                }
                if let Some(question) = pending
                    .as_ref()
                    .and_then(|p| p.screening_question_id.clone())
                {
                    self.screening_answers.insert(question, value);
                }
                if new_turn {
                    self.turn_ids.insert(turn_id, None);
                    self.last_turn_id = Some(turn_id);
                    if let Some(objective) = pending.and_then(|p| p.objective_id) {
                        self.objectives.entry(objective).or_default().answered = true;
                    }
                }
                self.answered.insert(interaction_id);
            }
            EventBody::ConsentRecorded { accepted, .. } => self.consent = Some(accepted),
            EventBody::ScreeningEvaluated { eligible, .. } => self.screening = Some(eligible),
            EventBody::ExtractionStarted {
                extraction_id,
                is_final: true,
            } => {
                self.final_extraction = Some((extraction_id, event.at, false));
            }
            EventBody::ExtractionCompleted {
                fields, is_final, ..
            } => {
                if is_final {
                    if let Some(f) = self.final_extraction.as_mut() {
                        f.2 = true;
                    }
                } else if self.summary_confirmed.is_some() {
                    self.extracted_since_reply = true;
                }
                for field in fields {
                    self.fields.insert(field.field_id.clone(), field);
                }
            }
            EventBody::SummaryProposed { summary } => {
                self.stopped_because = self
                    .stopped_because
                    .or_else(|| self.questioning_may_stop(event.at));
                self.summaries_proposed += 1;
                self.summary = Some(summary);
                self.summary_confirmed = None;
            }
            EventBody::SummaryConfirmed {
                confirmed,
                addition,
            } => {
                self.summary_confirmed = Some(confirmed);
                self.summary_addition = addition;
                self.extracted_since_reply = false;
            }
            EventBody::ToolCallCreated { .. }
            | EventBody::ToolCallCompleted { .. }
            | EventBody::ExtractionStarted { .. }
            | EventBody::ErrorRecorded { .. }
            | EventBody::SessionCompleted { .. }
            | EventBody::SessionAbandoned { .. } => {}
            EventBody::EndRequested {} => self.end_requested = true,
            EventBody::ParticipantDataErased(_) => self.erased = true,
        }
        self.events += 1;
        self.last_activity_at = Some(event.at);
        self.last_hash = Some(event.hash);
    }
}
