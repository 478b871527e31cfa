//! What the `rules` interviewer makes of the answers: the fields (FR-04-26 for the rules, and
//! the widget and declined fields every mode shares).
//!
//! - Widget values fill the fields of their objective in the field's type, confidence 1.
//! - Text fields take the answers (only answers: not "nothing more", a question back, a refusal,
//!   an end wish), each answer going to the one text field whose description it shares the most
//!   words with (the first required one when none), as sentences, each said once, with a
//!   confidence that grows with the amount said (0.3 + 0.05 per word, CJK text counted two
//!   characters a word, at most 0.9) — honest, since no model judged them.
//! - An objective that got no answer at all, only refusals or "I don't know", has its empty fields
//!   recorded as `refused` / `unknown`; a skipped widget's as `skipped`.
//! - A reply to the summary that adds or corrects goes into the text field it is most about.

use interview_session::decision::{AgentAction, ExtractedField, FieldStatus, Proposal};
use interview_session::input_class::{classify, InputClass};
use interview_session::study::{FieldType, Objective};
use interview_session::text;
use interview_session::text::normalize;
use interview_session::Session;
use serde_json::{json, Value};

use super::probing;
use super::rules_proposal::proposal;
use interview_session::conversation::{Answer, Conversation};

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
                    status: FieldStatus::Answered,
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

/// Every objective's declined or unknown fields (see [`declined_fields`]) among those `filled`
/// leaves empty — what a model's final extraction is completed with.
pub fn all_declined_fields(
    s: &Session,
    c: &Conversation,
    filled: &[ExtractedField],
) -> Vec<ExtractedField> {
    let Some(study) = s.study() else {
        return Vec::new();
    };
    s.objectives_in_order()
        .into_iter()
        .flat_map(|o| {
            let answers: Vec<&Answer> = c.answers_to(&o.id).collect();
            declined_fields(study, o, &answers, filled)
        })
        .collect()
}

/// The rules extraction of one objective's fields (see the module docs).
// Long by design: the module doc's rules in the order they apply: widget values first, then each
// text field built from the answers it is most about (each said once, joined as sentences, a
// confidence from the words said, the evidence, the longest as quote), then declined fields for
// what is still empty; the order is the behaviour, a later source filling only what an earlier one
// left.
pub(super) fn extract(s: &Session, o: &Objective, answers: &[&Answer]) -> Vec<ExtractedField> {
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
            status: FieldStatus::Answered,
        });
    }
    let declined = declined_fields(study, o, answers, &out);
    out.extend(declined);
    out
}

/// Fields the participant declined or could not answer (issue 29), told apart from fields never
/// asked about: when an objective got no answer at all — only refusals ("I'd rather not say"),
/// or only "I don't know" — its fields left empty are `refused` (a refusal first) or `unknown`,
/// with those replies as evidence; a skipped widget's typed fields left empty are `skipped`. The
/// value is null, the confidence 1 (the participant said so).
pub fn declined_fields(
    study: &interview_session::study::PinnedStudy,
    o: &Objective,
    answers: &[&Answer],
    filled: &[ExtractedField],
) -> Vec<ExtractedField> {
    let ends = &study.agent_config.end_phrases;
    let replies: Vec<(&Answer, InputClass)> = answers
        .iter()
        .filter(|a| a.widget.is_none())
        .map(|a| (*a, classify(&a.content, ends)))
        .collect();
    let said = |class: InputClass| -> Vec<&Answer> {
        replies
            .iter()
            .filter(|(_, c)| *c == class)
            .map(|(a, _)| *a)
            .collect()
    };
    let answered = replies.iter().any(|(_, c)| c.is_answer());
    let (refusals, unknowns) = (said(InputClass::Refusal), said(InputClass::NonAnswer));
    let declined: Option<(FieldStatus, &[&Answer])> = match () {
        _ if answered => None,
        _ if !refusals.is_empty() => Some((FieldStatus::Refused, &refusals)),
        _ if !unknowns.is_empty() => Some((FieldStatus::Unknown, &unknowns)),
        _ => None,
    };
    let skipped = answers
        .iter()
        .rev()
        .find(|a| a.widget.is_some() && a.value.is_none());
    study
        .output_schema
        .fields
        .iter()
        .filter(|f| f.objective_id == o.id && !filled.iter().any(|x| x.field_id == f.id))
        .filter_map(|f| {
            let text = matches!(f.field_type, FieldType::String | FieldType::StringList);
            let (status, evidence): (FieldStatus, Vec<&Answer>) = match (declined, skipped) {
                (Some((status, replies)), _) => (status, replies.to_vec()),
                (None, Some(skip)) if !text => (FieldStatus::Skipped, vec![*skip]),
                _ => return None,
            };
            Some(ExtractedField {
                field_id: f.id.clone(),
                value: Value::Null,
                confidence: 1.0,
                evidence_turn_ids: evidence.iter().map(|a| a.turn_id).collect(),
                quote: evidence
                    .iter()
                    .find(|a| !a.content.is_empty())
                    .map(|a| a.content.trim().to_string()),
                status,
            })
        })
        .collect()
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
// Long by design: the steps of one addition in order: taken once (none when its turn is evidence
// already), its lead-in stripped (a correction or an addition), the text field it shares most words
// with, the new value and evidence (replaced for a correction, appended otherwise), then the
// proposal; the stripped text and whether it corrects are used by every later step.
pub(super) fn take_in_addition(s: &Session, c: &Conversation, addition: &str) -> Option<Proposal> {
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
        status: FieldStatus::Answered,
    }];
    Some(p)
}
