//! The built-in `rules` interviewer: deterministic, offline, no model needed.
//!
//! - Objectives in priority order (must, should, could); each opens with its opening question.
//! - An answer is probed, up to the objective's `max_probe_count`, when it shows strong feeling,
//!   contradicts an earlier answer, is vague (no concrete detail), or leaves a required field
//!   under the threshold — the heuristics, the words and the order are in [`super::probing`].
//! - After the open answer (and any probes) the objective's widget is shown, if it has one.
//! - Then the objective's fields are extracted: widget values with confidence 1.0; text fields
//!   from the answers, each answer going to the one text field whose description it shares the
//!   most words with (the first required one when none), with a confidence that grows with the amount said (0.3 + 0.05 per word,
//!   CJK text counted two characters a word, at most 0.9) — honest, since no model judged them.
//! - When no objective is left, or a limit, end request or fatigue stops questioning, the
//!   summary is proposed; a confirmation concludes, an addition is extracted and re-confirmed
//!   once, then the interview concludes.

use chrono::{DateTime, Utc};
use interview_session::decision::{
    AgentAction, ConcludeReason, ExtractedField, Proposal, Provenance,
};
use interview_session::input_class::{classify, InputClass};
use interview_session::study::{FieldType, Objective};
use interview_session::text;
use interview_session::text::normalize;
use interview_session::Session;
use serde_json::{json, Value};

use super::conversation::{Answer, Conversation};
use super::probing;

pub const PROMPT_VERSION_ID: &str = "rules-v1";

fn proposal(action: AgentAction, rationale: String, input_summary: String) -> Proposal {
    Proposal {
        action,
        rationale,
        message: None,
        interaction: None,
        fields: Vec::new(),
        summary: None,
        input_summary,
        provenance: Provenance {
            model: "rules".into(),
            prompt_version_id: PROMPT_VERSION_ID.into(),
            latency_ms: 0,
            token_usage: Default::default(),
        },
        input_class: None,
        refused: None,
    }
}

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
        p.summary = Some(s.default_summary());
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
    p.summary = Some(s.default_summary());
    p
}

/// Probe, widget or extraction for the objective in progress; `None` when it is done.
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
            if let Some(probe) = probing::choose(
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
                        serde_json::to_value(probe.trigger)
                            .ok()
                            .and_then(|v| v.as_str().map(String::from))
                            .unwrap_or_default(),
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

/// The text field of objective `o` an answer answers: the one whose description (and id) shares
/// the most words with it; when none shares a word, the first required text field of the
/// objective (else its first text field).
fn field_for<'a>(
    study: &'a interview_session::study::PinnedStudy,
    o: &Objective,
    answer: &str,
) -> Option<&'a str> {
    let words = |t: &str| -> std::collections::HashSet<String> {
        text::normalize(&t.replace('_', " "))
            .split(' ')
            .filter(|w| w.chars().count() > 3)
            .map(|w| w.trim_end_matches('s').to_string())
            .collect()
    };
    let said = words(answer);
    let fields: Vec<_> = study
        .output_schema
        .fields
        .iter()
        .filter(|f| {
            f.objective_id == o.id
                && matches!(f.field_type, FieldType::String | FieldType::StringList)
        })
        .collect();
    let overlap = |f: &interview_session::study::OutputField| {
        words(&format!("{} {}", f.description, f.id))
            .intersection(&said)
            .count()
    };
    let best = fields
        .iter()
        .map(|f| (overlap(f), f))
        .filter(|(n, _)| *n > 0)
        .fold(
            None::<(usize, &&interview_session::study::OutputField)>,
            |best, (n, f)| match best {
                Some((m, _)) if m >= n => best,
                _ => Some((n, f)),
            },
        )
        .map(|(_, f)| f.id.as_str());
    best.or_else(|| fields.iter().find(|f| f.required).map(|f| f.id.as_str()))
        .or_else(|| fields.first().map(|f| f.id.as_str()))
}

/// The rules extraction over the whole conversation: every objective's fields — and, over
/// them, every field a reply to the summary added to or corrected (its evidence names a turn
/// that is no answer to a question), as it stands: the participant's last word on it wins, so
/// the results and the summary they confirmed agree.
pub fn extract_all(s: &Session, c: &Conversation) -> Vec<ExtractedField> {
    let mut fields: Vec<ExtractedField> = s
        .objectives_in_order()
        .into_iter()
        .flat_map(|o| {
            let answers: Vec<&Answer> = c.answers_to(&o.id).collect();
            extract(s, o, &answers)
        })
        .collect();
    let answered: std::collections::HashSet<uuid::Uuid> =
        c.answers.iter().map(|a| a.turn_id).collect();
    for (id, field) in s.fields() {
        if field
            .evidence_turn_ids
            .iter()
            .any(|t| !answered.contains(t))
        {
            fields.retain(|f| &f.field_id != id);
            fields.push(field.clone());
        }
    }
    fields
}

/// What the widgets answered for objective `o` give its fields (`InteractionKind::field_value`),
/// the latest answer first, with the answer as evidence: taken as said, confidence 1. A widget
/// fills a text field only when no field of another type takes its answer: a likert that fills
/// a satisfaction score leaves "the main frustration, in the participant's words" to the words.
pub fn widget_fields(
    study: &interview_session::study::PinnedStudy,
    o: &Objective,
    answers: &[&Answer],
) -> Vec<ExtractedField> {
    let mut out: Vec<ExtractedField> = Vec::new();
    let fields: Vec<_> = study
        .output_schema
        .fields
        .iter()
        .filter(|f| f.objective_id == o.id)
        .collect();
    for answer in answers.iter().rev() {
        let (Some(kind), Some(value)) = (&answer.widget, &answer.value) else {
            continue;
        };
        let text = |f: &&&interview_session::study::OutputField| f.field_type == FieldType::String;
        let typed = fields
            .iter()
            .any(|f| !text(&f) && kind.field_value(value, f).is_some());
        for field in fields.iter().filter(|f| !typed || !text(f)) {
            if out.iter().any(|f| f.field_id == field.id) {
                continue;
            }
            if let Some(value) = kind.field_value(value, field) {
                out.push(ExtractedField {
                    field_id: field.id.clone(),
                    value,
                    confidence: 1.0,
                    evidence_turn_ids: vec![answer.turn_id],
                    quote: None,
                });
            }
        }
    }
    out
}

/// Every widget answer's fields over the whole conversation (see [`widget_fields`]).
pub fn all_widget_fields(s: &Session, c: &Conversation) -> Vec<ExtractedField> {
    let Some(study) = s.study() else {
        return Vec::new();
    };
    s.objectives_in_order()
        .into_iter()
        .flat_map(|o| {
            let answers: Vec<&Answer> = c.answers_to(&o.id).collect();
            widget_fields(study, o, &answers)
        })
        .collect()
}

/// The rules extraction of one objective's fields (see the module docs).
fn extract(s: &Session, o: &Objective, answers: &[&Answer]) -> Vec<ExtractedField> {
    let Some(study) = s.study() else {
        return Vec::new();
    };
    // Only answers feed a field: not "nothing more", a question back, a refusal, an end wish.
    let ends = &study.agent_config.end_phrases;
    let texts: Vec<&&Answer> = answers
        .iter()
        .filter(|a| a.widget.is_none() && classify(&a.content, ends).is_answer())
        .collect();
    let mut out = widget_fields(study, o, answers);
    for field in study
        .output_schema
        .fields
        .iter()
        .filter(|f| f.objective_id == o.id)
    {
        if out.iter().any(|f| f.field_id == field.id) {
            continue;
        }
        if !matches!(field.field_type, FieldType::String | FieldType::StringList) {
            continue;
        }
        // Each answer goes to the one text field it answers (see `field_for`), not to all.
        let texts: Vec<&&Answer> = texts
            .iter()
            .copied()
            .filter(|a| field_for(study, o, &a.content) == Some(field.id.as_str()))
            .collect();
        if texts.is_empty() {
            continue;
        }
        // An answer said twice is kept once.
        let mut said: Vec<&str> = Vec::new();
        for a in &texts {
            let a = a.content.trim();
            let same = |s: &&str| normalize(s) == normalize(a);
            if !said.iter().any(same) {
                said.push(a);
            }
        }
        // Several answers read as what was said, one sentence after another.
        let joined = said.iter().map(|a| sentence(a)).collect::<Vec<_>>().join(
            if said.iter().any(|a| a.chars().any(|c| c as u32 >= 0x3040)) {
                ""
            } else {
                " "
            },
        );
        let words = texts
            .iter()
            .map(|a| probing::word_count(&a.content))
            .sum::<usize>();
        let longest = texts
            .iter()
            .max_by_key(|a| a.content.len())
            .map(|a| a.content.clone());
        let value = match field.field_type {
            FieldType::StringList => {
                json!(texts.iter().map(|a| a.content.trim()).collect::<Vec<_>>())
            }
            _ => Value::String(joined),
        };
        out.push(ExtractedField {
            field_id: field.id.clone(),
            value,
            confidence: (0.3 + 0.05 * words as f64).min(0.9),
            evidence_turn_ids: texts.iter().map(|a| a.turn_id).collect(),
            quote: longest,
        });
    }
    out
}

/// An answer as a sentence: ending with a full stop unless it already ends like one.
fn sentence(answer: &str) -> String {
    let a = answer.trim();
    if a.ends_with(['.', '!', '?', '。', '！', '？', '…']) {
        a.to_string()
    } else if a.chars().any(|c| c as u32 >= 0x3040) {
        format!("{a}。")
    } else {
        format!("{a}.")
    }
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
        p.summary = Some(s.default_summary());
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

/// How a reply to the summary says it corrects rather than adds (compared case-insensitively at
/// its start).
const CORRECTION_HEADS: &[&str] = &[
    "correction:",
    "correction,",
    "correction -",
    "to correct:",
    "not quite:",
    "not quite,",
    "that's wrong:",
    "that's wrong,",
    "that’s wrong,",
    "that's not right,",
    "that’s not right,",
    "that isn't right,",
    "更正：",
    "更正:",
    "更正，",
    "纠正：",
    "纠正，",
    "不对，",
    "不对,",
];

/// An addition to the summary, taken into the text field it is most about (the most words in
/// common with what that field holds; the first required text field when none share a word),
/// with the addition as its evidence — once: `None` when it is already in.
fn take_in_addition(s: &Session, c: &Conversation, addition: &str) -> Option<Proposal> {
    let (turn_id, _) = c.last_message.as_ref()?;
    if s.fields()
        .values()
        .any(|f| f.evidence_turn_ids.contains(turn_id))
    {
        return None;
    }
    let study = s.study()?;
    let said = addition
        .trim()
        .trim_start_matches(|ch: char| !ch.is_alphanumeric())
        .to_string();
    let strip = |said: &str, heads: &[&str]| -> Option<String> {
        heads.iter().find_map(|p| {
            said.get(..p.len())
                .filter(|head| head.eq_ignore_ascii_case(p))
                .map(|_| {
                    said[p.len()..]
                        .trim_start_matches(|ch: char| !ch.is_alphanumeric())
                        .trim()
                        .to_string()
                })
        })
    };
    // A correction replaces what the field held; anything else is added to it.
    let corrected = strip(&said, CORRECTION_HEADS);
    let is_correction = corrected.is_some();
    let said = corrected
        .or_else(|| strip(&said, &["add:", "add ", "also,", "also "]))
        .unwrap_or(said);
    let words = |t: &str| -> std::collections::HashSet<String> {
        text::normalize(t)
            .split(' ')
            .filter(|w| w.chars().count() > 3)
            .map(String::from)
            .collect()
    };
    let ours = words(&said);
    let text_fields: Vec<_> = study
        .output_schema
        .fields
        .iter()
        .filter(|f| f.field_type == FieldType::String)
        .collect();
    let overlap = |id: &str| {
        s.fields()
            .get(id)
            .and_then(|f| f.value.as_str())
            .map_or(0, |v| words(v).intersection(&ours).count())
    };
    let field = text_fields
        .iter()
        .max_by_key(|f| (overlap(&f.id), f.required))
        .filter(|f| overlap(&f.id) > 0)
        .or_else(|| text_fields.iter().find(|f| f.required))
        .or_else(|| text_fields.first())?;
    let before = s.fields().get(&field.id);
    let value = match before.and_then(|f| f.value.as_str()) {
        Some(old) if !old.is_empty() && !is_correction => format!("{old}; {said}"),
        _ => said.clone(),
    };
    let mut evidence = before
        .filter(|_| !is_correction)
        .map(|f| f.evidence_turn_ids.clone())
        .unwrap_or_default();
    evidence.push(*turn_id);
    let mut p = proposal(
        AgentAction::ExtractFields,
        format!(
            "The participant added to the summary; the addition goes into {:?}, then the summary is shown again.",
            field.id
        ),
        "summary addition".into(),
    );
    p.fields = vec![ExtractedField {
        field_id: field.id.clone(),
        value: Value::String(value),
        // The field's confidence as it was; a new field's as the rules rate any answer.
        confidence: before.map_or_else(
            || (0.3 + 0.05 * probing::word_count(&said) as f64).min(0.9),
            |f| f.confidence,
        ),
        evidence_turn_ids: evidence,
        quote: Some(said),
    }];
    Some(p)
}
