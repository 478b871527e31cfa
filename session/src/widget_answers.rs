//! What a widget's answer says: the options a widget offers, the answer in words (one format,
//! for the transcript, the model's prompt and a text field of the results) and the value it
//! gives an output field of its objective.
//!
//! What a researcher or the model reads words answers here. What the participant reads — the
//! page (`web/page/widgets.js`) and the summary they confirm (`aggregate/summary.rs`) — words them in
//! the participant's language.

use serde_json::{json, Value};

use crate::interaction::{Choice, InteractionKind};
use crate::study::{FieldType, OutputField};

/// Which wording [`InteractionKind::answer_in_words`] writes: part of the model prompt's
/// version (`llm::prompt::prompt_version_id`), so a decision records the wording it read.
/// Changed with the wording.
pub const WORDING: &str =
    "answers in words 2: labels; 1. ranked; label (n of scale); n (on min to max); Yes/No";

impl InteractionKind {
    /// The options a choice widget offers (none for the others).
    pub fn options(&self) -> &[Choice] {
        match self {
            Self::SingleChoice { options }
            | Self::MultipleChoice { options, .. }
            | Self::Ranking { options } => options,
            Self::Consent { .. }
            | Self::Likert { .. }
            | Self::Rating { .. }
            | Self::YesNo {}
            | Self::FreeText { .. } => &[],
        }
    }

    /// A submitted `value` in words, as a researcher reads it: option labels ("Bread, Milk"), a
    /// ranking's order ("1. Price, 2. Speed"), a scale point with its label ("Easy (4 of 5)"),
    /// a rating with its range ("7 (on 0 to 10)"), "Yes" or "No", the consent given or not, the
    /// text written. `None` when the value is not one this widget takes (an unknown option).
    pub fn answer_in_words(&self, value: &Value) -> Option<String> {
        let label = |id: &Value| -> Option<&str> {
            let id = id.as_str()?;
            Some(self.options().iter().find(|o| o.id == id)?.label.as_str())
        };
        let labels = || -> Option<Vec<&str>> { value.as_array()?.iter().map(label).collect() };
        Some(match self {
            Self::Consent { .. } => match value.get("accepted")?.as_bool()? {
                true => "I agree to take part.".into(),
                false => "I do not agree to take part.".into(),
            },
            Self::SingleChoice { .. } => label(value)?.to_string(),
            Self::MultipleChoice { .. } => labels()?.join(", "),
            Self::Ranking { .. } => labels()?
                .iter()
                .enumerate()
                .map(|(i, l)| format!("{}. {l}", i + 1))
                .collect::<Vec<_>>()
                .join(", "),
            Self::Likert { scale, labels } => {
                let n = value
                    .as_u64()
                    .filter(|n| (1..=u64::from(*scale)).contains(n))?;
                match labels.get(n as usize - 1).filter(|l| !l.trim().is_empty()) {
                    Some(l) => format!("{l} ({n} of {scale})"),
                    None => format!("{n} of {scale}"),
                }
            }
            Self::Rating { min, max, .. } => format!(
                "{} (on {} to {})",
                plain_number(value.as_f64()?),
                plain_number(*min),
                plain_number(*max)
            ),
            Self::YesNo {} => if value.as_bool()? { "Yes" } else { "No" }.into(),
            Self::FreeText { .. } => value.as_str()?.to_string(),
        })
    }

    /// What a submitted `value` gives an output `field` of the widget's objective, in the
    /// field's type: the option id (or its label) an `enum` field lists, the labels for text,
    /// the number for a number, the answer for a yes/no. `None` when the value says nothing that
    /// field can hold (a ranking for a number, say). The one place a widget answer becomes
    /// research data: the rules extraction and the model's both take it from here.
    // Long by design: one arm per widget type, each but consent with one arm per field type, both
    // matches exhaustive, so a new widget or field type is listed here by the compiler; the
    // closures above are shared by the arms.
    pub fn field_value(&self, value: &Value, field: &OutputField) -> Option<Value> {
        use FieldType as F;
        let label = |options: &[Choice], id: &Value| -> Option<(String, String)> {
            let id = id.as_str()?;
            let found = options.iter().find(|o| o.id == id)?;
            Some((found.id.clone(), found.label.clone()))
        };
        // The first candidate an enum field lists, as it lists it.
        let listed = |candidates: &[String]| -> Option<Value> {
            candidates
                .iter()
                .find_map(|c| field.options.iter().find(|o| o.eq_ignore_ascii_case(c)))
                .map(|o| Value::String(o.clone()))
        };
        let text = |s: String| Some(Value::String(s));
        match self {
            Self::Consent { .. } => None,
            Self::SingleChoice { options } => {
                let (id, label) = label(options, value)?;
                match field.field_type {
                    F::Enum => listed(&[id, label.clone()]),
                    F::String => text(label),
                    F::StringList => Some(json!([label])),
                    F::Number | F::Integer | F::Boolean => None,
                }
            }
            Self::MultipleChoice { options, .. } => {
                let chosen: Vec<(String, String)> = value
                    .as_array()?
                    .iter()
                    .map(|v| label(options, v))
                    .collect::<Option<_>>()?;
                let labels: Vec<&str> = chosen.iter().map(|(_, l)| l.as_str()).collect();
                match field.field_type {
                    F::StringList => Some(json!(labels)),
                    F::String => text(self.answer_in_words(value)?),
                    F::Enum => match chosen.as_slice() {
                        [(id, label)] => listed(&[id.clone(), label.clone()]),
                        _ => None,
                    },
                    F::Number | F::Integer | F::Boolean => None,
                }
            }
            Self::Likert { scale, labels } => {
                let n = value
                    .as_u64()
                    .filter(|n| (1..=u64::from(*scale)).contains(n))?;
                let named = labels.get(n as usize - 1).filter(|l| !l.trim().is_empty());
                match field.field_type {
                    F::Integer | F::Number => Some(json!(n)),
                    F::String => text(self.answer_in_words(value)?),
                    F::Enum => listed(&[n.to_string(), named.cloned().unwrap_or_default()]),
                    F::StringList | F::Boolean => None,
                }
            }
            Self::Rating { .. } => {
                let x = value.as_f64()?;
                match field.field_type {
                    F::Number => Some(value.clone()),
                    F::Integer => (x.fract() == 0.0).then(|| json!(x as i64)),
                    F::String => text(self.answer_in_words(value)?),
                    F::Enum => listed(&[plain_number(x)]),
                    F::StringList | F::Boolean => None,
                }
            }
            Self::Ranking { options } => {
                let order: Vec<String> = value
                    .as_array()?
                    .iter()
                    .map(|v| label(options, v).map(|(_, l)| l))
                    .collect::<Option<_>>()?;
                match field.field_type {
                    F::StringList => Some(json!(order)),
                    F::String => text(self.answer_in_words(value)?),
                    F::Enum | F::Number | F::Integer | F::Boolean => None,
                }
            }
            Self::YesNo {} => {
                let yes = value.as_bool()?;
                let word = if yes { "yes" } else { "no" };
                match field.field_type {
                    F::Boolean => Some(Value::Bool(yes)),
                    F::String => text(self.answer_in_words(value)?),
                    F::Enum => listed(&[word.into(), yes.to_string()]),
                    F::StringList | F::Number | F::Integer => None,
                }
            }
            Self::FreeText { .. } => {
                let said = value.as_str().map(str::trim).filter(|s| !s.is_empty())?;
                match field.field_type {
                    F::String => text(said.into()),
                    F::StringList => Some(json!([said])),
                    F::Enum => listed(&[said.into()]),
                    F::Number | F::Integer | F::Boolean => None,
                }
            }
        }
    }
}

/// A number as a person writes it: `7`, not `7.0`.
fn plain_number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

/// An answer in words when its widget is known and the value is one it takes; otherwise the
/// text given, or the value as JSON (never nothing for something answered).
pub fn in_words(kind: Option<&InteractionKind>, value: &Value) -> String {
    kind.and_then(|k| k.answer_in_words(value))
        .unwrap_or_else(|| match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::tests::choices;

    fn field(field_type: FieldType, options: &[&str]) -> OutputField {
        serde_json::from_value(json!({
            "id": "f", "type": field_type, "objective_id": "o",
            "options": options,
        }))
        .unwrap()
    }

    /// Every widget type: its answer in words, and what words an answer it does not take gets.
    // Long by design: a table with one row per widget type (two for consent and Likert): the
    // widget, an answer and the words it reads as; then a choice the widget does not offer and an
    // answer with no widget.
    #[test]
    fn every_widget_answer_reads_in_one_format() {
        let consent = InteractionKind::Consent {
            consent_text: "Agree?".into(),
            consent_version: "1".into(),
        };
        let cases = [
            (
                consent.clone(),
                json!({"accepted": true}),
                "I agree to take part.",
            ),
            (
                consent,
                json!({"accepted": false}),
                "I do not agree to take part.",
            ),
            (
                InteractionKind::SingleChoice { options: choices() },
                json!("b"),
                "B",
            ),
            (
                InteractionKind::MultipleChoice {
                    options: choices(),
                    min_selections: 1,
                    max_selections: None,
                },
                json!(["c", "a"]),
                "C, A",
            ),
            (
                InteractionKind::Ranking { options: choices() },
                json!(["b", "c", "a"]),
                "1. B, 2. C, 3. A",
            ),
            (
                InteractionKind::Likert {
                    scale: 5,
                    labels: ["Bad", "Poor", "Fair", "Good", "Great"]
                        .map(String::from)
                        .to_vec(),
                },
                json!(4),
                "Good (4 of 5)",
            ),
            (
                InteractionKind::Likert {
                    scale: 7,
                    labels: vec![],
                },
                json!(2),
                "2 of 7",
            ),
            (
                InteractionKind::Rating {
                    min: 0.0,
                    max: 10.0,
                    step: 0.5,
                },
                json!(7.5),
                "7.5 (on 0 to 10)",
            ),
            (InteractionKind::YesNo {}, json!(false), "No"),
            (
                InteractionKind::FreeText { max_length: 100 },
                json!("on Saturdays"),
                "on Saturdays",
            ),
        ];
        for (kind, value, words) in cases {
            assert_eq!(in_words(Some(&kind), &value), words, "{}", kind.type_name());
        }
        let single = InteractionKind::SingleChoice { options: choices() };
        assert_eq!(single.answer_in_words(&json!("zzz")), None);
        assert_eq!(in_words(Some(&single), &json!("zzz")), "zzz");
        assert_eq!(in_words(None, &json!([1, 2])), "[1,2]");
    }

    /// Every widget type against every field type: what its answer gives the field.
    // Long by design: the widget types built once, then a table of widget, answer, field type and
    // the value the field gets (or none), a few rows per widget type.
    #[test]
    fn a_widget_answer_gives_each_field_type_its_value() {
        use FieldType as F;
        let single = InteractionKind::SingleChoice { options: choices() };
        let many = InteractionKind::MultipleChoice {
            options: choices(),
            min_selections: 1,
            max_selections: None,
        };
        let likert = InteractionKind::Likert {
            scale: 5,
            labels: ["Very hard", "Hard", "Neutral", "Easy", "Very easy"]
                .map(String::from)
                .to_vec(),
        };
        let rating = InteractionKind::Rating {
            min: 0.0,
            max: 10.0,
            step: 0.5,
        };
        let ranking = InteractionKind::Ranking { options: choices() };
        let free = InteractionKind::FreeText { max_length: 100 };
        let consent = InteractionKind::Consent {
            consent_text: "ok".into(),
            consent_version: "1".into(),
        };
        let table: Vec<(&InteractionKind, Value, OutputField, Option<Value>)> = vec![
            (&single, json!("b"), field(F::String, &[]), Some(json!("B"))),
            (
                &single,
                json!("b"),
                field(F::Enum, &["a", "b"]),
                Some(json!("b")),
            ),
            (
                &single,
                json!("b"),
                field(F::Enum, &["A", "B"]),
                Some(json!("B")),
            ),
            (&single, json!("c"), field(F::Enum, &["a", "b"]), None),
            (
                &single,
                json!("b"),
                field(F::StringList, &[]),
                Some(json!(["B"])),
            ),
            (&single, json!("b"), field(F::Number, &[]), None),
            (&single, json!("z"), field(F::String, &[]), None),
            (
                &many,
                json!(["a", "c"]),
                field(F::String, &[]),
                Some(json!("A, C")),
            ),
            (
                &many,
                json!(["a", "c"]),
                field(F::StringList, &[]),
                Some(json!(["A", "C"])),
            ),
            (
                &many,
                json!(["a"]),
                field(F::Enum, &["a"]),
                Some(json!("a")),
            ),
            (&many, json!(["a", "c"]), field(F::Enum, &["a", "c"]), None),
            (&likert, json!(4), field(F::Integer, &[]), Some(json!(4))),
            (&likert, json!(4), field(F::Number, &[]), Some(json!(4))),
            (
                &likert,
                json!(4),
                field(F::String, &[]),
                Some(json!("Easy (4 of 5)")),
            ),
            (
                &likert,
                json!(4),
                field(F::Enum, &["easy"]),
                Some(json!("easy")),
            ),
            (&likert, json!(6), field(F::Integer, &[]), None),
            (&rating, json!(7.5), field(F::Number, &[]), Some(json!(7.5))),
            (&rating, json!(7.5), field(F::Integer, &[]), None),
            (&rating, json!(7.0), field(F::Integer, &[]), Some(json!(7))),
            (
                &rating,
                json!(7.5),
                field(F::String, &[]),
                Some(json!("7.5 (on 0 to 10)")),
            ),
            (
                &ranking,
                json!(["c", "a", "b"]),
                field(F::StringList, &[]),
                Some(json!(["C", "A", "B"])),
            ),
            (
                &ranking,
                json!(["c", "a", "b"]),
                field(F::String, &[]),
                Some(json!("1. C, 2. A, 3. B")),
            ),
            (
                &ranking,
                json!(["c", "a", "b"]),
                field(F::Number, &[]),
                None,
            ),
            (
                &InteractionKind::YesNo {},
                json!(true),
                field(F::Boolean, &[]),
                Some(json!(true)),
            ),
            (
                &InteractionKind::YesNo {},
                json!(false),
                field(F::String, &[]),
                Some(json!("No")),
            ),
            (
                &InteractionKind::YesNo {},
                json!(true),
                field(F::Enum, &["Yes", "No"]),
                Some(json!("Yes")),
            ),
            (
                &InteractionKind::YesNo {},
                json!(true),
                field(F::Integer, &[]),
                None,
            ),
            (
                &free,
                json!(" weekends "),
                field(F::String, &[]),
                Some(json!("weekends")),
            ),
            (
                &free,
                json!("weekends"),
                field(F::StringList, &[]),
                Some(json!(["weekends"])),
            ),
            (&free, json!("  "), field(F::String, &[]), None),
            (
                &consent,
                json!({"accepted": true}),
                field(F::Boolean, &[]),
                None,
            ),
        ];
        for (kind, value, field, expected) in table {
            assert_eq!(
                kind.field_value(&value, &field),
                expected,
                "{} {value} into {:?}",
                kind.type_name(),
                field.field_type
            );
        }
    }
}
