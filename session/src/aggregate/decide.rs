//! Judging and carrying out interviewer decisions: the guards of the interview flow (`docs/interview-flow.md`).
//!
//! [`Session::judge`] is pure: the harness calls it on its loaded state before it streams a
//! word (so nothing shown is later contradicted), and the aggregate calls it again at commit.
//! A decision that breaks a rule is either rewritten deterministically (the original kept as
//! `proposed_action`) or refused with the reason, and the harness falls back.

use chrono::{DateTime, Utc};
use cqrs_es::event_sink::EventSink;
use uuid::Uuid;

use super::Session;
use crate::decision::{AgentAction, ConcludeReason, ExtractedField, Proposal};
use crate::error::SessionError;
use crate::events::{EventBody, Phase, SessionStatus};
use crate::interaction::{InteractionKind, InteractionSpec, InteractionToolCall};
use crate::phrases;
use crate::study::{Objective, Priority};

/// One-word answers in a row that mean the participant is tired (FR-04-15).
pub const FATIGUE_STREAK: u32 = 3;

/// A decision as the aggregate will carry it out.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    pub action: AgentAction,
    /// What the policy proposed, when a guard rewrote it.
    pub proposed: Option<AgentAction>,
    pub message: Option<String>,
    pub interaction: Option<Box<InteractionToolCall>>,
    pub summary: Option<String>,
    pub fields: Vec<ExtractedField>,
}

fn invalid(field: &str, message: impl Into<String>) -> SessionError {
    SessionError::InvalidValue {
        field: field.into(),
        message: message.into(),
    }
}

fn non_empty(text: &Option<String>) -> Option<String> {
    text.as_ref()
        .map(|t| t.trim())
        .filter(|t| !t.is_empty())
        .map(String::from)
}

impl Session {
    fn find_objective(&self, id: &str) -> Option<&Objective> {
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
            .all(|f| {
                self.fields
                    .get(&f.id)
                    .is_some_and(|x| x.confidence >= threshold)
            });
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
        required.peek().is_some()
            && required.all(|f| {
                self.fields
                    .get(&f.id)
                    .is_some_and(|x| x.confidence >= threshold)
            })
    }

    /// Why questioning must stop now, if it must: end intent, limits, fatigue.
    pub fn stop_reason(&self, at: DateTime<Utc>) -> Option<ConcludeReason> {
        let limits = &self.study.as_deref()?.study_config.limits;
        if self.end_requested {
            return Some(ConcludeReason::ParticipantRequestedEnd);
        }
        if self.turn_count >= limits.max_turn_count {
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
    fn completion_reason(
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

    fn reason_holds(&self, reason: ConcludeReason, at: DateTime<Utc>) -> bool {
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
            Timeout => false,
            MaxTurnsReached | MaxDurationReached | ParticipantRequestedEnd | ParticipantFatigue => {
                self.stop_reason(at) == Some(reason)
                    || (reason == ParticipantRequestedEnd && self.end_requested)
                    || (reason == ParticipantFatigue && self.one_word_streak >= FATIGUE_STREAK)
            }
        }
    }

    /// A summary written from what was extracted, for when the policy gave none — for the
    /// participant: what they said, in their words, the options they chose by their labels and
    /// widget answers as the question and the answer shown to them; a field's
    /// `participant_label` names it when the study gives one; never a field's id or its
    /// researcher-facing description, and one answer that fills several fields once.
    pub fn default_summary(&self) -> String {
        let Some(study) = self.study.as_deref() else {
            return String::new();
        };
        let locale = &study.study_config.locale;
        let mut lines: Vec<String> = Vec::new();
        for f in &study.output_schema.fields {
            let Some(v) = self.fields.get(&f.id) else {
                continue;
            };
            let Some(shown) = self.shown_value(f, &v.value, locale) else {
                continue;
            };
            let line = match &f.participant_label {
                Some(label) if !label.trim().is_empty() => format!("- {}: {shown}", label.trim()),
                _ => format!("- {shown}"),
            };
            if !lines.contains(&line) && !lines.iter().any(|l| l.ends_with(&shown)) {
                lines.push(line);
            }
        }
        if lines.is_empty() {
            phrases::nothing_to_summarize(locale).to_string()
        } else {
            lines.join("\n")
        }
    }

    /// A field's value as the participant would recognise it (see [`Session::default_summary`]).
    fn shown_value(
        &self,
        f: &crate::study::OutputField,
        value: &serde_json::Value,
        locale: &str,
    ) -> Option<String> {
        use crate::interaction::InteractionKind as K;
        use serde_json::Value;
        let widget = self
            .find_objective(&f.objective_id)
            .and_then(|o| o.interaction.as_ref());
        let label_of = |id: &str| -> String {
            let options = match widget.map(|w| &w.kind) {
                Some(
                    K::SingleChoice { options }
                    | K::MultipleChoice { options, .. }
                    | K::Ranking { options },
                ) => options.as_slice(),
                _ => &[],
            };
            options
                .iter()
                .find(|o| o.id == id)
                .map(|o| o.label.clone())
                .unwrap_or_else(|| id.replace('_', " "))
        };
        let shown = match value {
            Value::Null => return None,
            Value::String(s)
                if f.options.contains(s)
                    || widget.is_some_and(|_| f.field_type == crate::study::FieldType::Enum) =>
            {
                label_of(s)
            }
            Value::String(s) => s.trim().to_string(),
            Value::Array(items) => items
                .iter()
                .map(|i| i.as_str().map_or_else(|| i.to_string(), label_of))
                .collect::<Vec<_>>()
                .join(", "),
            Value::Bool(b) => phrases::yes_no(locale, *b).to_string(),
            Value::Number(n) => {
                // A widget's answer: the question as it was put, and the answer as it was shown.
                let answer = match widget.map(|w| &w.kind) {
                    Some(K::Likert { labels, .. }) => n
                        .as_u64()
                        .and_then(|i| labels.get((i as usize).checked_sub(1)?))
                        .cloned()
                        .unwrap_or_else(|| n.to_string()),
                    _ => n.to_string(),
                };
                match widget {
                    Some(w) if f.participant_label.is_none() => {
                        format!("{} {answer}", w.prompt.trim())
                    }
                    _ => answer,
                }
            }
            other => other.to_string(),
        };
        (!shown.is_empty()).then_some(shown)
    }

    /// Judges a proposal: returns what will be carried out, or why it cannot be.
    pub fn judge(
        &self,
        p: &Proposal,
        interaction_id: Option<String>,
        at: DateTime<Utc>,
    ) -> Result<Judged, SessionError> {
        if p.rationale.trim().is_empty() {
            return Err(invalid("rationale", "every decision needs a rationale"));
        }
        let study = self.study.as_deref().ok_or(SessionError::NotCreated)?;
        let locale = study.study_config.locale.as_str();
        let mut action = p.action.clone();

        // Consent comes before everything; a declined consent only ends the session.
        match self.consent {
            None if !matches!(
                action,
                AgentAction::RenderInteraction { objective_id: None }
            ) =>
            {
                action = AgentAction::RenderInteraction { objective_id: None };
            }
            Some(false) => {
                action = AgentAction::Conclude {
                    reason: ConcludeReason::ConsentDeclined,
                }
            }
            _ => {}
        }
        if self.consent == Some(true) {
            let runtime_widget = AgentAction::RenderInteraction { objective_id: None };
            if self.safety_triggered {
                // A safety or privacy trigger ends the session, whatever was proposed.
                action = AgentAction::Conclude {
                    reason: ConcludeReason::SafetyTriggered,
                };
            } else if self.screening == Some(false) {
                action = AgentAction::Conclude {
                    reason: ConcludeReason::ScreeningFailed,
                };
            } else if self.next_screening_question().is_some() {
                // Screening questions come right after consent, one widget at a time.
                if !matches!(
                    action,
                    AgentAction::Conclude {
                        reason: ConcludeReason::SafetyTriggered
                    }
                ) {
                    action = runtime_widget;
                }
            } else if self.screening_awaits_verdict() {
                return Err(SessionError::InvalidState {
                    status: self.status,
                });
            } else if action == runtime_widget {
                return Err(invalid("action", "consent and screening are done"));
            }
        }
        // After the summary has been answered, no more questions: a confirmed summary concludes;
        // an addition is taken in (extraction) and re-confirmed once; after that the interview
        // concludes whatever is proposed. No refusal here can send the interviewer back to the
        // summary it came from.
        let mut settled_reason = None;
        // A safety stop claimed by a policy counts only when a safety pattern did match.
        let abandoning = matches!(action, AgentAction::Conclude { reason }
            if reason.abandons() && (reason != ConcludeReason::SafetyTriggered || self.safety_triggered));
        if self.summary.is_some() && self.summary_confirmed.is_some() && !abandoning {
            // An unconfirmed reply that adds nothing is an end intent at this step.
            let ended_here =
                self.summary_confirmed == Some(false) && self.summary_addition.is_none();
            let done =
                self.summary_confirmed == Some(true) || self.summaries_proposed >= 2 || ended_here;
            let proposed = match action {
                _ if ended_here && self.end_requested => {
                    Some(ConcludeReason::ParticipantRequestedEnd)
                }
                AgentAction::Conclude { reason } => Some(reason),
                _ => None,
            };
            match (&action, done) {
                (AgentAction::Conclude { .. }, _) | (_, true) => {
                    if let Some(reason) = self.completion_reason(proposed, at) {
                        settled_reason = Some(reason);
                        action = AgentAction::Conclude { reason };
                    }
                }
                // One extraction per reply (the addition), then the summary again.
                (AgentAction::ExtractFields, false) if !self.extracted_since_reply => {}
                (AgentAction::SummarizeAndConfirm, false) => {}
                (_, false) => action = AgentAction::SummarizeAndConfirm,
            }
        }
        // A summary before anything allows questioning to stop would end the interview early:
        // the first must objective not asked yet is asked instead.
        if matches!(action, AgentAction::SummarizeAndConfirm)
            && self.summary.is_none()
            && self.questioning_may_stop(at).is_none()
        {
            if let Some(next) = self
                .objectives_in_order()
                .into_iter()
                .find(|o| o.priority == Priority::Must && !self.objective(&o.id).asked)
            {
                action = AgentAction::AskQuestion {
                    objective_id: next.id.clone(),
                };
            }
        }
        // Limits, end intent and fatigue stop questioning: summary first, then conclude.
        let questioning = matches!(
            action,
            AgentAction::AskQuestion { .. }
                | AgentAction::Probe { .. }
                | AgentAction::RenderInteraction {
                    objective_id: Some(_)
                }
        );
        if let (true, Some(reason)) = (questioning, self.stop_reason(at)) {
            action = if self.summary.is_none() {
                AgentAction::SummarizeAndConfirm
            } else {
                AgentAction::Conclude { reason }
            };
        }
        // Objective rules: it exists; it opens with its question; probes stay under the cap.
        if let Some(objective_id) = action.objective_id().map(String::from) {
            let objective = self
                .find_objective(&objective_id)
                .ok_or_else(|| invalid("objective_id", format!("no objective {objective_id:?}")))?;
            let progress = self.objective(&objective_id);
            if !progress.asked && !matches!(action, AgentAction::AskQuestion { .. }) {
                action = AgentAction::AskQuestion { objective_id };
            } else if matches!(action, AgentAction::Probe { .. })
                && progress.probes >= objective.max_probe_count
            {
                action = if objective.interaction.is_some() && !progress.interaction_rendered {
                    AgentAction::RenderInteraction {
                        objective_id: Some(objective_id),
                    }
                } else {
                    AgentAction::ExtractFields
                };
            } else if matches!(action, AgentAction::RenderInteraction { .. })
                && progress.interaction_rendered
            {
                return Err(invalid(
                    "action",
                    "this objective's widget was already shown",
                ));
            }
        }
        // Conclusions must be true, and a completed interview confirms its summary first.
        if let AgentAction::Conclude { reason } = action {
            if settled_reason != Some(reason) && !self.reason_holds(reason, at) {
                return Err(invalid(
                    "reason",
                    format!("{reason:?} does not hold for this session"),
                ));
            }
            if !reason.abandons() && self.summary.is_none() {
                action = AgentAction::SummarizeAndConfirm;
            }
        }

        let rewritten = action != p.action;
        let proposed = rewritten.then(|| p.action.clone());
        // A closing message stands when only the recorded reason changed (the policy may not
        // know which reason the runtime settles on); any other rewrite says the runtime's words.
        let keeps_text = !rewritten
            || matches!(
                (&action, &p.action),
                (AgentAction::Conclude { .. }, AgentAction::Conclude { .. })
            );
        let own = |text: &Option<String>| if keeps_text { non_empty(text) } else { None };
        let mut judged = Judged {
            action: action.clone(),
            proposed,
            message: None,
            interaction: None,
            summary: None,
            fields: Vec::new(),
        };
        match &action {
            AgentAction::AskQuestion { objective_id } => {
                let objective = self.find_objective(objective_id).expect("checked above");
                judged.message =
                    Some(own(&p.message).unwrap_or_else(|| objective.opening_question.clone()));
            }
            AgentAction::Probe { .. } => {
                judged.message = Some(
                    own(&p.message)
                        .ok_or_else(|| invalid("message", "a probe needs its question"))?,
                );
            }
            AgentAction::RenderInteraction { objective_id } => {
                let interaction_id = interaction_id
                    .ok_or_else(|| invalid("interaction_id", "a widget needs an interaction id"))?;
                let screening = self
                    .consent
                    .is_some()
                    .then(|| self.next_screening_question())
                    .flatten();
                let spec = match (objective_id, screening) {
                    (None, Some(question)) => question.spec.clone(),
                    (None, None) => InteractionSpec {
                        prompt: phrases::consent_prompt(locale).into(),
                        research_intent: "consent".into(),
                        kind: InteractionKind::Consent {
                            consent_text: study.study_config.consent.text.clone(),
                            consent_version: study.study_config.consent.version.clone(),
                        },
                    },
                    (Some(id), _) => {
                        let configured =
                            self.find_objective(id).and_then(|o| o.interaction.clone());
                        let offered = if rewritten {
                            None
                        } else {
                            p.interaction.clone()
                        };
                        offered.or(configured).ok_or_else(|| {
                            invalid(
                                "interaction",
                                "no widget was given or configured for this objective",
                            )
                        })?
                    }
                };
                spec.validate("interaction")
                    .map_err(|(field, message)| invalid(&field, message))?;
                let consent_panel = objective_id.is_none() && screening.is_none();
                if matches!(spec.kind, InteractionKind::Consent { .. }) != consent_panel {
                    return Err(invalid(
                        "interaction.type",
                        "consent is asked only by the runtime",
                    ));
                }
                let tool_call_id = format!("tc_{interaction_id}");
                judged.message = own(&p.message);
                let mut call = InteractionToolCall::new(
                    interaction_id,
                    tool_call_id,
                    objective_id.clone(),
                    &spec,
                );
                call.screening_question_id = screening.map(|q| q.id.clone());
                judged.interaction = Some(Box::new(call));
            }
            AgentAction::ExtractFields => {
                let schema = &study.output_schema.fields;
                for f in &p.fields {
                    if !schema.iter().any(|s| s.id == f.field_id) {
                        return Err(invalid(
                            "fields",
                            format!("no output field {:?}", f.field_id),
                        ));
                    }
                    if !(0.0..=1.0).contains(&f.confidence) {
                        return Err(invalid("fields", "confidence must be between 0 and 1"));
                    }
                }
                judged.fields = if rewritten {
                    Vec::new()
                } else {
                    p.fields.clone()
                };
            }
            AgentAction::SummarizeAndConfirm => {
                let summary = own(&p.summary).unwrap_or_else(|| self.default_summary());
                let message = own(&p.message).unwrap_or_else(|| {
                    format!(
                        "{}\n{summary}\n{}",
                        phrases::summary_intro(locale),
                        phrases::confirm_question(locale)
                    )
                });
                judged.summary = Some(summary);
                judged.message = Some(message);
            }
            AgentAction::Conclude { reason } => {
                judged.message = Some(
                    own(&p.message)
                        .unwrap_or_else(|| phrases::closing(locale, *reason).to_string()),
                );
            }
        }
        Ok(judged)
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
            fields: judged.fields,
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
        }
    }

    /// Writes a judged decision's events.
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
        match judged.action {
            AgentAction::AskQuestion { .. } | AgentAction::Probe { .. } => {
                self.emit(sink, say(judged.message.unwrap_or_default()), at)
                    .await;
                self.change_status(sink, SessionStatus::WaitingForUser, at)
                    .await;
            }
            AgentAction::RenderInteraction { .. } => {
                if let Some(message) = judged.message {
                    self.emit(sink, say(message), at).await;
                }
                let interaction = judged
                    .interaction
                    .expect("judged widgets carry their interaction");
                self.render(sink, interaction, at).await?;
            }
            AgentAction::ExtractFields => {
                let extraction_id = Uuid::new_v5(&message_id, b"extraction");
                let body = EventBody::ExtractionCompleted {
                    extraction_id,
                    fields: judged.fields,
                    is_final: false,
                    decided_by: None,
                };
                self.emit(sink, body, at).await;
                self.change_phase(sink, Phase::EvaluateCoverage, at).await;
            }
            AgentAction::SummarizeAndConfirm => {
                let summary = judged.summary.unwrap_or_default();
                self.emit(sink, EventBody::SummaryProposed { summary }, at)
                    .await;
                self.emit(sink, say(judged.message.unwrap_or_default()), at)
                    .await;
                self.change_status(sink, SessionStatus::WaitingForUser, at)
                    .await;
            }
            AgentAction::Conclude { reason } => {
                self.emit(sink, say(judged.message.unwrap_or_default()), at)
                    .await;
                self.end(sink, reason, at).await;
            }
        }
        Ok(())
    }
}
