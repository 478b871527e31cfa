//! The interview flow's rules the guards judge by (`docs/interview-flow.md`): objective
//! coverage, when questioning may or must stop, which end reason holds, the summary the
//! participant confirms; and carrying out a judged decision (the judging itself is
//! [`super::judge`]).

use chrono::{DateTime, Utc};
use cqrs_es::event_sink::EventSink;
use uuid::Uuid;

use super::judge::{invalid, Carried, Judged};
use super::Session;
use crate::decision::{AgentAction, ConcludeReason, Proposal};
use crate::error::SessionError;
use crate::events::{EventBody, Phase, SessionStatus};
use crate::study::{Objective, Priority};

/// One-word answers in a row that mean the participant is tired (FR-04-15).
pub const FATIGUE_STREAK: u32 = 3;

impl Session {
    pub(super) fn find_objective(&self, id: &str) -> Option<&Objective> {
        self.study
            .as_deref()?
            .study_config
            .objectives
            .iter()
            .find(|o| o.id == id)
    }

    /// Objectives in the order they are covered: must, then should, then could.
    pub fn objectives_in_order(&self) -> Vec<&Objective> {
        let Some(study) = self.study.as_deref() else {
            return Vec::new();
        };
        let mut all: Vec<&Objective> = study.study_config.objectives.iter().collect();
        all.sort_by_key(|o| match o.priority {
            Priority::Must => 0,
            Priority::Should => 1,
            Priority::Could => 2,
        });
        all
    }

    /// Covered (FR-04-20): answered, and either every required field of the objective has reached the
    /// confidence threshold or its probes reached the cap.
    pub fn objective_covered(&self, id: &str) -> bool {
        let (Some(study), Some(objective)) = (self.study.as_deref(), self.find_objective(id))
        else {
            return false;
        };
        let progress = self.objective(id);
        if !progress.answered {
            return false;
        }
        let threshold = study.study_config.limits.confidence_threshold;
        let fields_met = study
            .output_schema
            .fields
            .iter()
            .filter(|f| f.required && f.objective_id == id)
            .all(|f| self.field_known(&f.id, threshold));
        fields_met || progress.probes >= objective.max_probe_count
    }

    pub fn all_must_covered(&self) -> bool {
        self.objectives_in_order()
            .iter()
            .filter(|o| o.priority == Priority::Must)
            .all(|o| self.objective_covered(&o.id))
    }

    /// Every required output field has reached the confidence threshold (FR-04-21).
    pub fn required_fields_met(&self) -> bool {
        let Some(study) = self.study.as_deref() else {
            return false;
        };
        let threshold = study.study_config.limits.confidence_threshold;
        let mut required = study
            .output_schema
            .fields
            .iter()
            .filter(|f| f.required)
            .peekable();
        required.peek().is_some() && required.all(|f| self.field_known(&f.id, threshold))
    }

    /// A field answered at the threshold or above. One the participant declined or did not
    /// know is not known: it covers nothing (the objective's probes or the end do).
    fn field_known(&self, id: &str, threshold: f64) -> bool {
        self.fields
            .get(id)
            .is_some_and(|x| x.status.is_answered() && x.confidence >= threshold)
    }

    /// Why questioning must stop now, if it must: end intent, limits, fatigue.
    pub fn stop_reason(&self, at: DateTime<Utc>) -> Option<ConcludeReason> {
        let limits = &self.study.as_deref()?.study_config.limits;
        if self.end_requested {
            return Some(ConcludeReason::ParticipantRequestedEnd);
        }
        if self.turns.count() >= limits.max_turn_count {
            return Some(ConcludeReason::MaxTurnsReached);
        }
        let elapsed = self
            .created_at
            .map(|c| (at - c).num_seconds())
            .unwrap_or_default();
        if elapsed >= i64::from(limits.max_duration_minutes) * 60 {
            return Some(ConcludeReason::MaxDurationReached);
        }
        if self.one_word_streak >= FATIGUE_STREAK {
            return Some(ConcludeReason::ParticipantFatigue);
        }
        None
    }

    /// Whether questioning may stop now, and why — the first that holds of: a stop reason (end
    /// intent, limits, fatigue), every must objective covered, every required field at the
    /// threshold, every must objective asked (the interviewer has nothing left to ask: what was
    /// answered, or skipped, is what the study gets). `None` while a must objective has not been
    /// asked.
    pub fn questioning_may_stop(&self, at: DateTime<Utc>) -> Option<ConcludeReason> {
        if let Some(reason) = self.stop_reason(at) {
            return Some(reason);
        }
        if self.all_must_covered() {
            return Some(ConcludeReason::AllMustObjectivesCovered);
        }
        if self.required_fields_met() {
            return Some(ConcludeReason::ConfidenceThresholdMet);
        }
        let all_asked = self
            .objectives_in_order()
            .iter()
            .filter(|o| o.priority == Priority::Must)
            .all(|o| self.objective(&o.id).asked);
        all_asked.then_some(ConcludeReason::AllMustObjectivesAsked)
    }

    fn all_must_asked(&self) -> bool {
        self.objectives_in_order()
            .iter()
            .filter(|o| o.priority == Priority::Must)
            .all(|o| self.objective(&o.id).asked)
    }

    /// The reason a completed interview ends with once its summary has been answered: the one
    /// proposed if it holds; else the one recorded when questioning stopped, if it still holds;
    /// else a stop reason that holds now; else coverage, then the confidence threshold; and
    /// failing all of those, the reason recorded when questioning stopped (it held then). Said
    /// in docs/interview-flow.md.
    pub(super) fn completion_reason(
        &self,
        proposed: Option<ConcludeReason>,
        at: DateTime<Utc>,
    ) -> Option<ConcludeReason> {
        let holds = |r: &ConcludeReason| self.reason_holds(*r, at);
        proposed
            .filter(|r| !r.abandons() && holds(r))
            .or(self.stopped_because.filter(holds))
            .or_else(|| self.stop_reason(at))
            .or_else(|| {
                [
                    ConcludeReason::AllMustObjectivesCovered,
                    ConcludeReason::ConfidenceThresholdMet,
                ]
                .into_iter()
                .find(holds)
            })
            .or(self.stopped_because)
            // Sessions whose summary came before these rules recorded no reason.
            .or_else(|| self.questioning_may_stop(at))
            .or(Some(ConcludeReason::AllMustObjectivesAsked))
    }

    pub(super) fn reason_holds(&self, reason: ConcludeReason, at: DateTime<Utc>) -> bool {
        use ConcludeReason::*;
        match reason {
            AllMustObjectivesCovered => self.all_must_covered(),
            AllMustObjectivesAsked => self.all_must_asked(),
            ConfidenceThresholdMet => self.required_fields_met(),
            ConsentDeclined => self.consent == Some(false),
            ScreeningFailed => self.screening == Some(false),
            // The study's safety patterns decide: a model's own safety stop must be confirmed by
            // them, else it is refused (recorded) and the interview goes on.
            SafetyTriggered => self.safety_triggered,
            // Only the sweeper, a withdrawal and the study's places (checked at consent) end a
            // session so, never an interviewer.
            Timeout | Withdrawn | StudyFull | DuplicateParticipant => false,
            MaxTurnsReached | MaxDurationReached | ParticipantRequestedEnd | ParticipantFatigue => {
                self.stop_reason(at) == Some(reason)
                    || (reason == ParticipantRequestedEnd && self.end_requested)
                    || (reason == ParticipantFatigue && self.one_word_streak >= FATIGUE_STREAK)
            }
        }
    }

    /// An extraction decided alongside the utterance of the open claim: judged like any
    /// decision, but carried out only as the extraction it proposes (a guard that would turn it
    /// into something else refuses it), and the claim stays open.
    pub(super) async fn record_extraction(
        &mut self,
        sink: &EventSink<Self>,
        message_id: Uuid,
        proposal: Proposal,
        at: DateTime<Utc>,
    ) -> Result<(), SessionError> {
        if proposal.action != AgentAction::ExtractFields {
            return Err(invalid(
                "action",
                "only an extraction goes alongside an utterance",
            ));
        }
        let judged = self.judge(&proposal, None, at)?;
        if judged.action != AgentAction::ExtractFields {
            return Err(invalid("action", "no extraction is allowed here now"));
        }
        self.change_phase(sink, Phase::Extract, at).await;
        let decision = self.decision_event(
            Uuid::new_v5(&message_id, b"extraction-decision"),
            Phase::Extract,
            proposal,
            &judged,
            Some(message_id),
        );
        self.emit(sink, decision, at).await;
        let body = EventBody::ExtractionCompleted {
            extraction_id: Uuid::new_v5(&message_id, b"extraction-alongside"),
            fields: match judged.carried {
                Carried::Extract { fields } => fields,
                _ => Vec::new(),
            },
            is_final: false,
            decided_by: None,
        };
        self.emit(sink, body, at).await;
        self.change_phase(sink, Phase::EvaluateCoverage, at).await;
        Ok(())
    }

    /// The decision-log event for a judged proposal.
    fn decision_event(
        &self,
        decision_id: Uuid,
        phase: Phase,
        proposal: Proposal,
        judged: &Judged,
        alongside: Option<Uuid>,
    ) -> EventBody {
        // A rewritten decision is the runtime's, not the policy's: its rationale says so first
        // and keeps the policy's reason for what it proposed.
        let rationale = match &judged.proposed {
            Some(proposed) => format!(
                "The runtime's rules carried out {} instead of the proposed {}. The proposal's rationale: {}",
                judged.action.label(),
                proposed.label(),
                proposal.rationale
            ),
            None => proposal.rationale,
        };
        EventBody::DecisionRecorded {
            decision_id,
            turn_id: self.last_turn_id,
            phase,
            input_summary: proposal.input_summary,
            selected_action: judged.action.clone(),
            proposed_action: judged.proposed.clone(),
            rationale,
            model: proposal.provenance.model,
            prompt_version_id: proposal.provenance.prompt_version_id,
            latency_ms: proposal.provenance.latency_ms,
            token_usage: proposal.provenance.token_usage,
            study_prompt_version: self
                .study
                .as_deref()
                .map(|s| s.agent_config.prompt_version.clone()),
            alongside,
            input_class: proposal.input_class,
            refused_proposal: proposal.refused,
        }
    }

    /// Writes a judged decision's events.
    // Long by design: the events of one decision written in the order they are stored: the phase
    // change, the decision, the routed node, then one arm per kind of carried content in an
    // exhaustive match; split, the order of the writes would not be visible in one place.
    pub(super) async fn carry_out(
        &mut self,
        sink: &EventSink<Self>,
        message_id: Uuid,
        proposal: Proposal,
        judged: Judged,
        at: DateTime<Utc>,
    ) -> Result<(), SessionError> {
        let first_question = !self.objectives.values().any(|o| o.asked);
        let node = judged.action.phase(first_question);
        // After an extraction the coverage is evaluated; the decision taken then is the switch
        // to the next topic or a probe (FR-04-9), and the question itself is asked in its node.
        let routing = self.phase == Phase::EvaluateCoverage
            && matches!(node, Phase::AskOrProbe | Phase::OptionalInteraction);
        let phase = if routing {
            Phase::NextTopicOrProbe
        } else {
            node
        };
        self.change_phase(sink, phase, at).await;
        let decision = self.decision_event(
            Uuid::new_v5(&message_id, b"decision"),
            phase,
            proposal,
            &judged,
            None,
        );
        self.emit(sink, decision, at).await;
        if routing {
            self.change_phase(sink, node, at).await;
        }
        let say = |content: String| EventBody::AgentMessageCompleted {
            message_id,
            content,
        };
        match judged.carried {
            Carried::Say { message } => {
                self.emit(sink, say(message), at).await;
                self.change_status(sink, SessionStatus::WaitingForUser, at)
                    .await;
            }
            Carried::Widget {
                message,
                interaction,
            } => {
                if let Some(message) = message {
                    self.emit(sink, say(message), at).await;
                }
                self.render(sink, interaction, at).await?;
            }
            Carried::Extract { fields } => {
                let extraction_id = Uuid::new_v5(&message_id, b"extraction");
                let body = EventBody::ExtractionCompleted {
                    extraction_id,
                    fields,
                    is_final: false,
                    decided_by: None,
                };
                self.emit(sink, body, at).await;
                self.change_phase(sink, Phase::EvaluateCoverage, at).await;
            }
            Carried::Summary { summary, message } => {
                self.emit(sink, EventBody::SummaryProposed { summary }, at)
                    .await;
                self.emit(sink, say(message), at).await;
                self.change_status(sink, SessionStatus::WaitingForUser, at)
                    .await;
            }
            Carried::Close { message } => {
                let AgentAction::Conclude { reason } = judged.action else {
                    unreachable!("only a conclusion carries closing words")
                };
                self.emit(sink, say(message), at).await;
                self.end(sink, reason, at).await;
            }
        }
        Ok(())
    }
}
