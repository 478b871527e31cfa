//! The built-in `rules` interviewer: deterministic, offline, no model needed.
//!
//! - Objectives in priority order (must, should, could); each opens with its opening question.
//! - An answer is probed, up to the objective's `max_probe_count`, when it shows strong feeling,
//!   contradicts an earlier answer, is vague (no concrete detail), or leaves a required field
//!   under the threshold — the heuristics, the words and the order are in [`super::probing`].
//! - After the open answer (and any probes) the objective's widget is shown, if it has one.
//! - Then the objective's fields are extracted ([`super::rules_fields`]): widget values, the
//!   answers' words, or what the participant declined.
//! - A question back gets the question said another way, at most twice.
//! - When no objective is left, or a limit, end request or fatigue stops questioning, the
//!   summary is proposed; a confirmation concludes, an addition is extracted and re-confirmed
//!   once, then the interview concludes.

use chrono::{DateTime, Utc};
use interview_session::decision::{AgentAction, ConcludeReason, Proposal};
use interview_session::input_class::{classify, InputClass};
use interview_session::study::{FieldType, Objective};
use interview_session::Session;

use super::founded::runtime_summary;
use super::probing;
pub use super::rules_fields::{all_declined_fields, all_widget_fields, extract_all};
use super::rules_fields::{extract, take_in_addition};
use interview_session::conversation::{Answer, Conversation};

pub(super) use super::rules_proposal::proposal;
pub use super::rules_proposal::PROMPT_VERSION_ID;

/// The next decision for a session whose interviewer holds the turn, with the class of the
/// participant's input it follows.
pub fn propose(s: &Session, c: &Conversation, at: DateTime<Utc>) -> Proposal {
    let mut p = next_decision(s, c, at);
    p.input_class = input_class(s, c);
    p
}

/// What the participant's latest input is, by the rules (`input_class::classify`): their
/// message, or an answer when it was a widget's; `None` before any input.
pub fn input_class(s: &Session, c: &Conversation) -> Option<InputClass> {
    let last = s.last_turn_id()?;
    match &c.last_message {
        Some((id, text)) if *id == last => {
            let ends = s
                .study()
                .map(|st| st.agent_config.end_phrases.as_slice())
                .unwrap_or_default();
            Some(classify(text, ends))
        }
        _ => Some(InputClass::Answer),
    }
}

// Long by design: a priority list of rules where the order is the behaviour, each rule a few lines:
// consent, a safety stop, the screening verdict, the next screening question, a reply to the
// summary, a limit that stops questioning, the objective in progress, the next objective not asked,
// then the summary.
fn next_decision(s: &Session, c: &Conversation, at: DateTime<Utc>) -> Proposal {
    let Some(study) = s.study() else {
        return proposal(
            AgentAction::ExtractFields,
            "nothing to do".into(),
            String::new(),
        );
    };
    let locale = study.study_config.locale.as_str();
    match s.consent() {
        None => {
            return proposal(
                AgentAction::RenderInteraction { objective_id: None },
                "Consent must be given before any question.".into(),
                "session start".into(),
            )
        }
        Some(false) => {
            return proposal(
                AgentAction::Conclude {
                    reason: ConcludeReason::ConsentDeclined,
                },
                "The participant declined consent.".into(),
                "consent declined".into(),
            )
        }
        Some(true) => {}
    }
    if s.safety_triggered() {
        return proposal(
            AgentAction::Conclude {
                reason: ConcludeReason::SafetyTriggered,
            },
            "The participant's words matched a safety or privacy pattern; the session stops here."
                .into(),
            "safety trigger".into(),
        );
    }
    if s.screening_verdict() == Some(false) {
        return proposal(
            AgentAction::Conclude {
                reason: ConcludeReason::ScreeningFailed,
            },
            "The screening answers do not meet the study's criteria.".into(),
            "screening verdict".into(),
        );
    }
    if let Some(question) = s.next_screening_question() {
        return proposal(
            AgentAction::RenderInteraction { objective_id: None },
            format!(
                "Screening question {:?} comes before the interview.",
                question.id
            ),
            "screening".into(),
        );
    }
    if s.summary().is_some() {
        return after_summary(s, c, at);
    }
    if let Some(reason) = s.stop_reason(at) {
        let mut p = proposal(
            AgentAction::SummarizeAndConfirm,
            format!("Questioning stops ({reason:?}); the summary is confirmed before concluding."),
            format!("{} turns", s.turn_count()),
        );
        p.summary = Some(runtime_summary(s, c));
        return p;
    }
    if let Some(current) = s
        .current_objective()
        .and_then(|id| s.objectives_in_order().into_iter().find(|o| o.id == id))
    {
        if let Some(p) = continue_objective(s, c, current, locale) {
            return p;
        }
    }
    for objective in s.objectives_in_order() {
        if skipped_as_confident(s, objective) {
            continue;
        }
        if !s.objective(&objective.id).asked {
            return proposal(
                AgentAction::AskQuestion {
                    objective_id: objective.id.clone(),
                },
                format!(
                    "{:?} objective {:?} has not been asked yet; it opens with its question.",
                    objective.priority, objective.title
                ),
                "next objective".into(),
            );
        }
    }
    let mut p = proposal(
        AgentAction::SummarizeAndConfirm,
        "Every objective has been covered; the summary is confirmed before concluding.".into(),
        format!("{} turns", s.turn_count()),
    );
    p.summary = Some(runtime_summary(s, c));
    p
}

/// Probe, widget or extraction for the objective in progress; `None` when it is done.
// Long by design: a priority list where the order is the behaviour: nothing until the objective is
// answered, a question back said another way, a probe while probing is not over, the objective's
// widget, then its fields unless already recorded; the answers gathered at the top are shared by
// every rule.
fn continue_objective(
    s: &Session,
    c: &Conversation,
    o: &Objective,
    locale: &str,
) -> Option<Proposal> {
    let progress = s.objective(&o.id);
    if !progress.answered {
        return None;
    }
    let answers: Vec<&Answer> = c.answers_to(&o.id).collect();
    let texts: Vec<&Answer> = answers
        .iter()
        .copied()
        .filter(|a| a.widget.is_none())
        .collect();
    let ends = s
        .study()
        .map(|st| st.agent_config.end_phrases.as_slice())
        .unwrap_or_default();
    if let Some(p) = said_another_way(c, o, &texts, ends, locale) {
        return Some(p);
    }
    if let Some((last, earlier)) = texts.split_last() {
        // After "nothing more", a refusal or a question back, no probe: the objective's
        // probing is over (its widget, if any, still comes).
        let probing_over = !classify(&last.content, ends).is_answer();
        if !probing_over && !progress.interaction_rendered && progress.probes < o.max_probe_count {
            let earlier: Vec<&str> = earlier.iter().map(|a| a.content.as_str()).collect();
            let asked = c.probes_asked.get(&o.id).cloned().unwrap_or_default();
            let missing = missing_field(s, o, &answers);
            let question = std::iter::once(o.opening_question.clone())
                .chain(asked.iter().cloned())
                .collect::<Vec<_>>()
                .join(" ");
            if let Some(probe) = probing::choose_after(
                &question,
                &last.content,
                &earlier,
                missing.as_ref().map(|(id, d)| (id.as_str(), d.as_str())),
                &o.probe_hints,
                &asked,
                locale,
            ) {
                let mut p = proposal(
                    AgentAction::Probe {
                        objective_id: o.id.clone(),
                        based_on_turn_id: Some(last.turn_id),
                        trigger: probe.trigger,
                    },
                    format!(
                        "The answer about {:?} calls for a {} probe: {}; probe {} of {}.",
                        o.title,
                        probe.trigger.as_ref(),
                        probe.because,
                        progress.probes + 1,
                        o.max_probe_count
                    ),
                    format!("last answer: {} words", probing::word_count(&last.content)),
                );
                p.message = Some(probe.question);
                return Some(p);
            }
        }
    }
    if o.interaction.is_some() && !progress.interaction_rendered {
        return Some(proposal(
            AgentAction::RenderInteraction {
                objective_id: Some(o.id.clone()),
            },
            format!(
                "The open answer about {:?} is in; its structured question follows.",
                o.title
            ),
            "objective answered".into(),
        ));
    }
    let fields = extract(s, o, &answers);
    let already = fields
        .iter()
        .all(|f| s.fields().get(&f.field_id) == Some(f));
    if fields.is_empty() || already {
        return None;
    }
    let mut p = proposal(
        AgentAction::ExtractFields,
        format!(
            "The answers about {:?} are in; their fields are extracted.",
            o.title
        ),
        format!("{} answers", answers.len()),
    );
    p.fields = fields;
    Some(p)
}

/// How often a question is said again for a participant who keeps asking what it means; after
/// that the interview moves on.
const MAX_REPHRASINGS: usize = 2;

/// A question back ("what do you mean?") as the participant's latest message gets the
/// objective's question said another way (`ask_question` again, in other words), not a probe.
fn said_another_way(
    c: &Conversation,
    o: &Objective,
    texts: &[&Answer],
    ends: &[String],
    locale: &str,
) -> Option<Proposal> {
    let last = texts.last()?;
    let latest = c
        .last_message
        .as_ref()
        .is_some_and(|(id, _)| *id == last.turn_id);
    let asked_back = |a: &&&Answer| classify(&a.content, ends) == InputClass::QuestionBack;
    if !latest || !asked_back(&last) {
        return None;
    }
    let times = texts.iter().filter(asked_back).count();
    if times > MAX_REPHRASINGS {
        return None;
    }
    let mut p = proposal(
        AgentAction::AskQuestion {
            objective_id: o.id.clone(),
        },
        format!(
            "The participant asked what the question about {:?} means (a question back, not an answer); it is said another way ({times} of {MAX_REPHRASINGS}).",
            o.title
        ),
        "question back".into(),
    );
    p.message = Some(probing::rephrase(
        &o.description,
        &o.title,
        times - 1,
        locale,
    ));
    Some(p)
}

/// A required text field of the objective the answers so far would leave under the study's
/// confidence threshold.
fn missing_field(s: &Session, o: &Objective, answers: &[&Answer]) -> Option<(String, String)> {
    let study = s.study()?;
    let threshold = study.study_config.limits.confidence_threshold;
    let extracted = extract(s, o, answers);
    study
        .output_schema
        .fields
        .iter()
        .filter(|f| f.objective_id == o.id && f.required && f.field_type == FieldType::String)
        .find(|f| {
            extracted
                .iter()
                .find(|x| x.field_id == f.id)
                .is_none_or(|x| x.confidence < threshold)
        })
        .map(|f| (f.id.clone(), f.description.clone()))
}

/// FR-04-21 in the rules interviewer: once every `must` objective is covered and every required
/// field has reached the confidence threshold, `could` objectives not yet asked are left out
/// (`should` ones are still asked while the limits allow).
fn skipped_as_confident(s: &Session, objective: &interview_session::study::Objective) -> bool {
    objective.priority == interview_session::study::Priority::Could
        && !s.objective(&objective.id).asked
        && s.all_must_covered()
        && s.required_fields_met()
}

/// After the summary was proposed and the reply classified: conclude, or take in an addition
/// and re-confirm once. The reason is `confidence_threshold_met` when objectives were left out
/// because the required fields were already known, `all_must_objectives_covered` otherwise.
fn after_summary(s: &Session, c: &Conversation, at: DateTime<Utc>) -> Proposal {
    let left_out = s
        .objectives_in_order()
        .into_iter()
        .any(|o| skipped_as_confident(s, o));
    let reason = s.stop_reason(at).unwrap_or(
        if left_out || (s.required_fields_met() && !s.all_must_covered()) {
            ConcludeReason::ConfidenceThresholdMet
        } else {
            ConcludeReason::AllMustObjectivesCovered
        },
    );
    if s.summary_confirmed() == Some(false) && c.summaries_proposed < 2 {
        if let Some(p) = s.summary_addition().and_then(|a| take_in_addition(s, c, a)) {
            return p;
        }
        let mut p = proposal(
            AgentAction::SummarizeAndConfirm,
            "The participant added to the summary; a short re-confirmation follows.".into(),
            "summary addition".into(),
        );
        p.summary = Some(runtime_summary(s, c));
        return p;
    }
    proposal(
        AgentAction::Conclude { reason },
        format!(
            "The summary was {}; the interview concludes ({reason:?}).",
            if s.summary_confirmed() == Some(true) {
                "confirmed"
            } else {
                "answered"
            }
        ),
        "summary reply".into(),
    )
}
