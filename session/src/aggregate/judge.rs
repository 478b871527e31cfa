//! Judging an interviewer's proposal (`docs/interview-flow.md`), in two steps: **which action**
//! the session's rules allow ([`Session::allowed_action`]: each guard below, in order, may
//! rewrite the proposed action or refuse it), then **what it carries** — the words, the widget,
//! the summary or the fields — as a [`Carried`] ([`Session::compose`]).
//!
//! [`Session::judge`] is pure: the harness calls it on its loaded state before it streams a
//! word (so nothing shown is later contradicted), and the aggregate calls it again at commit.
//! A rewritten decision keeps the original as `proposed_action`; a refusal names its reason, and
//! the harness falls back.

use chrono::{DateTime, Utc};

use super::Session;
use crate::decision::{AgentAction, ConcludeReason, ExtractedField, Proposal};
use crate::error::SessionError;
use crate::interaction::{InteractionKind, InteractionSpec, InteractionToolCall};
use crate::phrases;
use crate::study::Priority;

/// A decision as the aggregate will carry it out.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    pub action: AgentAction,
    /// What the policy proposed, when a guard rewrote it.
    pub proposed: Option<AgentAction>,
    pub carried: Carried,
}

/// What a judged action carries, by action.
#[derive(Debug, Clone, PartialEq)]
pub enum Carried {
    /// A question or a probe: its words.
    Say { message: String },
    /// A widget, and the words before it, if any.
    Widget {
        message: Option<String>,
        interaction: Box<InteractionToolCall>,
    },
    /// An extraction's fields (none when a guard turned another action into it).
    Extract { fields: Vec<ExtractedField> },
    /// The summary to confirm, and the words that present it.
    Summary { summary: String, message: String },
    /// The closing words.
    Close { message: String },
}

impl Judged {
    /// The words the participant will read, if the action says any.
    pub fn message(&self) -> Option<&str> {
        match &self.carried {
            Carried::Say { message }
            | Carried::Summary { message, .. }
            | Carried::Close { message } => Some(message),
            Carried::Widget { message, .. } => message.as_deref(),
            Carried::Extract { .. } => None,
        }
    }
}

pub(super) fn invalid(field: &str, message: impl Into<String>) -> SessionError {
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
        if self.study.is_none() {
            return Err(SessionError::NotCreated);
        }
        let action = self.allowed_action(p.action.clone(), at)?;
        let carried = self.compose(p, &action, interaction_id)?;
        let proposed = (action != p.action).then(|| p.action.clone());
        Ok(Judged {
            action,
            proposed,
            carried,
        })
    }

    /// The action the guards would carry out for a proposal of `action`, whatever its words,
    /// widget or fields (those are checked on the proposal itself): what a policy may be offered.
    pub fn allowed(
        &self,
        action: AgentAction,
        at: DateTime<Utc>,
    ) -> Result<AgentAction, SessionError> {
        self.allowed_action(action, at)
    }

    /// The action the session's rules allow instead of `action`, or why none is: the guards in
    /// the order they apply.
    fn allowed_action(
        &self,
        action: AgentAction,
        at: DateTime<Utc>,
    ) -> Result<AgentAction, SessionError> {
        let action = self.consent_and_screening(action)?;
        let (action, settled) = self.after_the_summary(action, at);
        let action = self.no_early_summary(action, at);
        let action = self.within_limits(action, at);
        let action = self.objective_rules(action)?;
        self.true_conclusion(action, settled, at)
    }

    /// Consent comes before everything; a declined consent only ends the session; a safety
    /// trigger or a failed screening ends it whatever was proposed; screening questions come
    /// right after consent, one widget at a time.
    fn consent_and_screening(&self, mut action: AgentAction) -> Result<AgentAction, SessionError> {
        let runtime_widget = AgentAction::RenderInteraction { objective_id: None };
        match self.consent {
            None if action != runtime_widget => action = runtime_widget.clone(),
            Some(false) => {
                action = AgentAction::Conclude {
                    reason: ConcludeReason::ConsentDeclined,
                }
            }
            _ => {}
        }
        if self.consent != Some(true) {
            return Ok(action);
        }
        let conclude = |reason| AgentAction::Conclude { reason };
        if self.safety_triggered {
            Ok(conclude(ConcludeReason::SafetyTriggered))
        } else if self.screening == Some(false) {
            Ok(conclude(ConcludeReason::ScreeningFailed))
        } else if self.next_screening_question().is_some() {
            // A safety stop the policy claims stands, to be proven by `true_conclusion`.
            let safety = conclude(ConcludeReason::SafetyTriggered);
            Ok(if action == safety {
                action
            } else {
                runtime_widget
            })
        } else if self.screening_awaits_verdict() {
            Err(SessionError::InvalidState {
                status: self.status,
            })
        } else if action == runtime_widget {
            Err(invalid("action", "consent and screening are done"))
        } else {
            Ok(action)
        }
    }

    /// After the summary has been answered, no more questions: a confirmed summary concludes;
    /// an addition is taken in (extraction) and re-confirmed once; after that the interview
    /// concludes whatever is proposed. No refusal here can send the interviewer back to the
    /// summary it came from. Returns the action and, when it settled one, the reason to conclude
    /// with (which needs no further proof).
    fn after_the_summary(
        &self,
        action: AgentAction,
        at: DateTime<Utc>,
    ) -> (AgentAction, Option<ConcludeReason>) {
        // A safety stop claimed by a policy counts only when a safety pattern did match.
        let abandoning = matches!(action, AgentAction::Conclude { reason }
            if reason.abandons() && (reason != ConcludeReason::SafetyTriggered || self.safety_triggered));
        if self.summary.is_none() || self.summary_confirmed.is_none() || abandoning {
            return (action, None);
        }
        // An unconfirmed reply that adds nothing is an end intent at this step.
        let ended_here = self.summary_confirmed == Some(false) && self.summary_addition.is_none();
        let done =
            self.summary_confirmed == Some(true) || self.summaries_proposed >= 2 || ended_here;
        let proposed = match action {
            _ if ended_here && self.end_requested => Some(ConcludeReason::ParticipantRequestedEnd),
            AgentAction::Conclude { reason } => Some(reason),
            _ => None,
        };
        match (&action, done) {
            // An addition or correction is confirmed once more before the end, so the summary
            // the results keep is the one the participant corrected (issue 29).
            (AgentAction::Conclude { .. }, false) => (AgentAction::SummarizeAndConfirm, None),
            (AgentAction::Conclude { .. }, _) | (_, true) => {
                match self.completion_reason(proposed, at) {
                    Some(reason) => (AgentAction::Conclude { reason }, Some(reason)),
                    None => (action, None),
                }
            }
            // One extraction per reply (the addition), then the summary again.
            (AgentAction::ExtractFields, false) if !self.extracted_since_reply => (action, None),
            (AgentAction::SummarizeAndConfirm, false) => (action, None),
            (_, false) => (AgentAction::SummarizeAndConfirm, None),
        }
    }

    /// A summary before anything allows questioning to stop would end the interview early: the
    /// first must objective not asked yet is asked instead.
    fn no_early_summary(&self, action: AgentAction, at: DateTime<Utc>) -> AgentAction {
        if action != AgentAction::SummarizeAndConfirm
            || self.summary.is_some()
            || self.questioning_may_stop(at).is_some()
        {
            return action;
        }
        self.objectives_in_order()
            .into_iter()
            .find(|o| o.priority == Priority::Must && !self.objective(&o.id).asked)
            .map_or(action, |next| AgentAction::AskQuestion {
                objective_id: next.id.clone(),
            })
    }

    /// Limits, end intent and fatigue stop questioning: the summary first, then the conclusion.
    fn within_limits(&self, action: AgentAction, at: DateTime<Utc>) -> AgentAction {
        let questioning = matches!(
            action,
            AgentAction::AskQuestion { .. }
                | AgentAction::Probe { .. }
                | AgentAction::RenderInteraction {
                    objective_id: Some(_)
                }
        );
        match (questioning, self.stop_reason(at)) {
            (true, Some(_)) if self.summary.is_none() => AgentAction::SummarizeAndConfirm,
            (true, Some(reason)) => AgentAction::Conclude { reason },
            _ => action,
        }
    }

    /// An objective exists; it opens with its question; its probes stay under the cap (then its
    /// widget, or an extraction); its widget is shown once.
    fn objective_rules(&self, action: AgentAction) -> Result<AgentAction, SessionError> {
        let Some(objective_id) = action.objective_id().map(String::from) else {
            return Ok(action);
        };
        let objective = self
            .find_objective(&objective_id)
            .ok_or_else(|| invalid("objective_id", format!("no objective {objective_id:?}")))?;
        let progress = self.objective(&objective_id);
        if !progress.asked && !matches!(action, AgentAction::AskQuestion { .. }) {
            return Ok(AgentAction::AskQuestion { objective_id });
        }
        if matches!(action, AgentAction::Probe { .. })
            && progress.probes >= objective.max_probe_count
        {
            return Ok(
                if objective.interaction.is_some() && !progress.interaction_rendered {
                    AgentAction::RenderInteraction {
                        objective_id: Some(objective_id),
                    }
                } else {
                    AgentAction::ExtractFields
                },
            );
        }
        if matches!(action, AgentAction::RenderInteraction { .. }) && progress.interaction_rendered
        {
            return Err(invalid(
                "action",
                "this objective's widget was already shown",
            ));
        }
        Ok(action)
    }

    /// A conclusion must be true (unless the summary step settled it), and a completed interview
    /// confirms its summary first.
    fn true_conclusion(
        &self,
        action: AgentAction,
        settled: Option<ConcludeReason>,
        at: DateTime<Utc>,
    ) -> Result<AgentAction, SessionError> {
        let AgentAction::Conclude { reason } = action else {
            return Ok(action);
        };
        if settled != Some(reason) && !self.reason_holds(reason, at) {
            return Err(invalid(
                "reason",
                format!("{reason:?} does not hold for this session"),
            ));
        }
        if !reason.abandons() && self.summary.is_none() {
            return Ok(AgentAction::SummarizeAndConfirm);
        }
        Ok(action)
    }

    /// What `action` carries: the proposal's own words and widget when the action is the one
    /// proposed, the runtime's otherwise. A closing message stands when only the recorded reason
    /// changed (the policy may not know which reason the runtime settles on).
    // Long by design: one arm per action in an exhaustive match, each saying what that action
    // carries; the summary arm is the longest, as it fits the summary into the model's words.
    fn compose(
        &self,
        p: &Proposal,
        action: &AgentAction,
        interaction_id: Option<String>,
    ) -> Result<Carried, SessionError> {
        let study = self.study.as_deref().ok_or(SessionError::NotCreated)?;
        let locale = study.study_config.locale.as_str();
        let rewritten = *action != p.action;
        let keeps_text = !rewritten
            || matches!(
                (action, &p.action),
                (AgentAction::Conclude { .. }, AgentAction::Conclude { .. })
            );
        let own = |text: &Option<String>| if keeps_text { non_empty(text) } else { None };
        Ok(match action {
            AgentAction::AskQuestion { objective_id } => {
                let objective = self
                    .find_objective(objective_id)
                    .expect("checked by the guards");
                Carried::Say {
                    message: own(&p.message).unwrap_or_else(|| objective.opening_question.clone()),
                }
            }
            AgentAction::Probe { .. } => Carried::Say {
                message: own(&p.message)
                    .ok_or_else(|| invalid("message", "a probe needs its question"))?,
            },
            AgentAction::RenderInteraction { objective_id } => {
                let offered = (!rewritten).then(|| p.interaction.clone()).flatten();
                Carried::Widget {
                    message: own(&p.message),
                    interaction: self.widget(objective_id.as_deref(), offered, interaction_id)?,
                }
            }
            AgentAction::ExtractFields => {
                crate::field_values::check_fields(&study.output_schema, &p.fields)
                    .map_err(|message| invalid("fields", message))?;
                Carried::Extract {
                    fields: if rewritten {
                        Vec::new()
                    } else {
                        p.fields.clone()
                    },
                }
            }
            AgentAction::SummarizeAndConfirm => {
                let summary = own(&p.summary).unwrap_or_else(|| self.default_summary());
                // The participant confirms what they read, so the summary is always in the words:
                // a model's words without it ("Did I get that right?"; "Your summary is ready.
                // You can now proceed with the interview." from a 135M model — and a grammar
                // holds a message to one line, a summary has several) get it put in, before a
                // question, after a statement.
                let (intro, confirm) = (
                    phrases::summary_intro(locale),
                    phrases::confirm_question(locale),
                );
                let message = match own(&p.message) {
                    Some(m) if m.contains(summary.trim()) => m,
                    Some(m) if m.ends_with(['?', '？']) => format!("{intro}\n{summary}\n{m}"),
                    Some(m) => format!("{m}\n{summary}\n{confirm}"),
                    None => format!("{intro}\n{summary}\n{confirm}"),
                };
                Carried::Summary { summary, message }
            }
            AgentAction::Conclude { reason } => Carried::Close {
                message: own(&p.message)
                    .unwrap_or_else(|| phrases::closing(locale, *reason).to_string()),
            },
        })
    }

    /// The widget to show: the runtime's consent panel or next screening question, or the
    /// objective's — the one offered (when the action was the one proposed) or the configured one.
    fn widget(
        &self,
        objective_id: Option<&str>,
        offered: Option<InteractionSpec>,
        interaction_id: Option<String>,
    ) -> Result<Box<InteractionToolCall>, SessionError> {
        let study = self.study.as_deref().ok_or(SessionError::NotCreated)?;
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
                prompt: phrases::consent_prompt(&study.study_config.locale).into(),
                research_intent: "consent".into(),
                kind: InteractionKind::Consent {
                    consent_text: study.study_config.consent.text.clone(),
                    consent_version: study.study_config.consent.version.clone(),
                },
            },
            (Some(id), _) => {
                // The study's own widget for the objective is the researcher's instrument: a
                // model may write a widget only where the study has none, never one in its
                // place (which would leave the study's unasked: it is shown once).
                let configured = self.find_objective(id).and_then(|o| o.interaction.clone());
                configured.or(offered).ok_or_else(|| {
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
        let mut call = InteractionToolCall::new(
            interaction_id,
            tool_call_id,
            objective_id.map(String::from),
            &spec,
        );
        call.screening_question_id = screening.map(|q| q.id.clone());
        Ok(Box::new(call))
    }
}
