//! Interaction widgets: their configuration, the `InteractionToolCall` a session renders, the
//! JSON Schema (2020-12) of each widget's value, and the check of a submitted value against it.
//!
//! The schema shown to clients and the check run by the aggregate are generated from the same
//! [`InteractionKind`], so they cannot drift apart.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The schema version of [`InteractionToolCall`] payloads.
pub const INTERACTION_SCHEMA_VERSION: &str = "1";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Choice {
    pub id: String,
    pub label: String,
}

/// A widget's kind and its type-specific settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum InteractionKind {
    Consent {
        consent_text: String,
        consent_version: String,
    },
    SingleChoice {
        options: Vec<Choice>,
    },
    MultipleChoice {
        options: Vec<Choice>,
        #[serde(default = "one")]
        min_selections: u32,
        #[serde(default)]
        max_selections: Option<u32>,
    },
    Likert {
        #[serde(default = "five")]
        scale: u32,
        #[serde(default)]
        labels: Vec<String>,
    },
    Rating {
        min: f64,
        max: f64,
        #[serde(default = "one_f")]
        step: f64,
    },
    Ranking {
        options: Vec<Choice>,
    },
    YesNo {},
    FreeText {
        #[serde(default = "free_text_max")]
        max_length: u32,
    },
}

fn one() -> u32 {
    1
}
fn five() -> u32 {
    5
}
fn one_f() -> f64 {
    1.0
}
fn free_text_max() -> u32 {
    2000
}

/// A widget as a study configures it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InteractionSpec {
    pub prompt: String,
    #[serde(default)]
    pub research_intent: String,
    #[serde(flatten)]
    pub kind: InteractionKind,
}

/// A rendered widget, as sent to the participant and stored in `interaction.rendered`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InteractionToolCall {
    pub interaction_id: String,
    pub tool_call_id: String,
    pub schema_version: String,
    pub research_intent: String,
    /// The objective this widget serves, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objective_id: Option<String>,
    /// The screening question this widget asks, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screening_question_id: Option<String>,
    pub prompt: String,
    #[serde(flatten)]
    pub kind: InteractionKind,
    pub value_schema: Value,
}

impl InteractionToolCall {
    pub fn new(
        interaction_id: String,
        tool_call_id: String,
        objective_id: Option<String>,
        spec: &InteractionSpec,
    ) -> Self {
        Self {
            interaction_id,
            tool_call_id,
            schema_version: INTERACTION_SCHEMA_VERSION.into(),
            research_intent: spec.research_intent.clone(),
            objective_id,
            screening_question_id: None,
            prompt: spec.prompt.clone(),
            value_schema: spec.kind.value_schema(),
            kind: spec.kind.clone(),
        }
    }

    pub fn type_name(&self) -> &'static str {
        self.kind.type_name()
    }
}

impl InteractionSpec {
    /// Checks the settings; `Err((field path, message))`.
    pub fn validate(&self, at: &str) -> Result<(), (String, String)> {
        let err = |f: &str, m: &str| Err((format!("{at}.{f}"), m.to_string()));
        if self.prompt.trim().is_empty() {
            return err("prompt", "must not be empty");
        }
        match &self.kind {
            InteractionKind::Consent { consent_text, .. } if consent_text.trim().is_empty() => {
                err("consent_text", "must not be empty")
            }
            InteractionKind::SingleChoice { options } | InteractionKind::Ranking { options } => {
                validate_options(options).or_else(|m| err("options", &m))
            }
            InteractionKind::MultipleChoice {
                options,
                min_selections,
                max_selections,
            } => {
                validate_options(options).or_else(|m| err("options", &m))?;
                let max = max_selections.unwrap_or(options.len() as u32);
                if *min_selections > max || max as usize > options.len() {
                    return err(
                        "max_selections",
                        "need min_selections <= max_selections <= number of options",
                    );
                }
                Ok(())
            }
            InteractionKind::Likert { scale, labels } => {
                if !(2..=11).contains(scale) {
                    return err("scale", "must be between 2 and 11");
                }
                if !labels.is_empty() && labels.len() != *scale as usize {
                    return err("labels", "give one label per scale point, or none");
                }
                Ok(())
            }
            InteractionKind::Rating { min, max, step } => {
                let well_formed = min.is_finite() && max.is_finite() && min < max && *step > 0.0;
                if well_formed {
                    Ok(())
                } else {
                    err("max", "need finite min < max and step > 0")
                }
            }
            InteractionKind::FreeText { max_length } if !(1..=10_000).contains(max_length) => {
                err("max_length", "must be between 1 and 10000")
            }
            _ => Ok(()),
        }
    }
}

fn validate_options(options: &[Choice]) -> Result<(), String> {
    if options.len() < 2 {
        return Err("give at least two options".into());
    }
    for (i, o) in options.iter().enumerate() {
        if o.id.trim().is_empty() || o.label.trim().is_empty() {
            return Err("every option needs an id and a label".into());
        }
        if options[..i].iter().any(|p| p.id == o.id) {
            return Err(format!("duplicate option id {:?}", o.id));
        }
    }
    Ok(())
}

impl InteractionKind {
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Consent { .. } => "consent",
            Self::SingleChoice { .. } => "single_choice",
            Self::MultipleChoice { .. } => "multiple_choice",
            Self::Likert { .. } => "likert",
            Self::Rating { .. } => "rating",
            Self::Ranking { .. } => "ranking",
            Self::YesNo {} => "yes_no",
            Self::FreeText { .. } => "free_text",
        }
    }

    /// The JSON Schema (2020-12) a submitted value must satisfy.
    pub fn value_schema(&self) -> Value {
        const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";
        let ids = |options: &[Choice]| -> Vec<Value> {
            options
                .iter()
                .map(|o| Value::String(o.id.clone()))
                .collect()
        };
        match self {
            Self::Consent { .. } => json!({
                "$schema": DIALECT, "type": "object",
                "properties": {"accepted": {"type": "boolean"}},
                "required": ["accepted"], "additionalProperties": false
            }),
            Self::SingleChoice { options } => json!({
                "$schema": DIALECT, "type": "string", "enum": ids(options)
            }),
            Self::MultipleChoice {
                options,
                min_selections,
                max_selections,
            } => json!({
                "$schema": DIALECT, "type": "array",
                "items": {"type": "string", "enum": ids(options)},
                "uniqueItems": true,
                "minItems": min_selections,
                "maxItems": max_selections.unwrap_or(options.len() as u32)
            }),
            Self::Likert { scale, .. } => json!({
                "$schema": DIALECT, "type": "integer", "minimum": 1, "maximum": scale
            }),
            Self::Rating { min, max, .. } => json!({
                "$schema": DIALECT, "type": "number", "minimum": min, "maximum": max
            }),
            Self::Ranking { options } => json!({
                "$schema": DIALECT, "type": "array",
                "items": {"type": "string", "enum": ids(options)},
                "uniqueItems": true,
                "minItems": options.len(), "maxItems": options.len()
            }),
            Self::YesNo {} => json!({"$schema": DIALECT, "type": "boolean"}),
            Self::FreeText { max_length } => json!({
                "$schema": DIALECT, "type": "string", "maxLength": max_length
            }),
        }
    }

    /// Checks a submitted value; the error says what is wrong in participant-safe words.
    // Long by design: one arm per widget type in an exhaustive match, so a new widget type is
    // listed here by the compiler; the two closures above check option ids for the choice and
    // ranking arms.
    pub fn check_value(&self, value: &Value) -> Result<(), String> {
        let known = |options: &[Choice], v: &Value| -> Result<String, String> {
            let id = v.as_str().ok_or("expected an option id (a string)")?;
            if options.iter().any(|o| o.id == id) {
                Ok(id.to_string())
            } else {
                Err(format!("{id:?} is not one of the options"))
            }
        };
        let distinct = |options: &[Choice], items: &[Value]| -> Result<(), String> {
            let mut seen = Vec::new();
            for item in items {
                let id = known(options, item)?;
                if seen.contains(&id) {
                    return Err(format!("{id:?} is given twice"));
                }
                seen.push(id);
            }
            Ok(())
        };
        match self {
            Self::Consent { .. } => match value.as_object() {
                Some(map)
                    if map.len() == 1 && map.get("accepted").is_some_and(Value::is_boolean) =>
                {
                    Ok(())
                }
                _ => Err("expected {\"accepted\": true|false}".into()),
            },
            Self::SingleChoice { options } => known(options, value).map(|_| ()),
            Self::MultipleChoice {
                options,
                min_selections,
                max_selections,
            } => {
                let items = value.as_array().ok_or("expected a list of option ids")?;
                distinct(options, items)?;
                let max = max_selections.unwrap_or(options.len() as u32) as usize;
                if items.len() < *min_selections as usize || items.len() > max {
                    return Err(format!("choose between {min_selections} and {max} options"));
                }
                Ok(())
            }
            Self::Likert { scale, .. } => match value.as_u64() {
                Some(n) if (1..=*scale as u64).contains(&n) => Ok(()),
                _ => Err(format!("expected a whole number from 1 to {scale}")),
            },
            Self::Rating { min, max, .. } => match value.as_f64() {
                Some(n) if n >= *min && n <= *max => Ok(()),
                _ => Err(format!("expected a number from {min} to {max}")),
            },
            Self::Ranking { options } => {
                let items = value
                    .as_array()
                    .ok_or("expected every option id once, in order")?;
                distinct(options, items)?;
                if items.len() != options.len() {
                    return Err("rank every option exactly once".into());
                }
                Ok(())
            }
            Self::YesNo {} => value
                .is_boolean()
                .then_some(())
                .ok_or_else(|| "expected true or false".into()),
            Self::FreeText { max_length } => match value.as_str() {
                Some(s) if s.chars().count() <= *max_length as usize => Ok(()),
                Some(_) => Err(format!("at most {max_length} characters")),
                None => Err("expected text".into()),
            },
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Three options, `a`–`c`, labelled `A`–`C`.
    pub(crate) fn choices() -> Vec<Choice> {
        ["a", "b", "c"]
            .map(|id| Choice {
                id: id.into(),
                label: id.to_uppercase(),
            })
            .to_vec()
    }

    // Long by design: a table of widget values, one row per case: a widget type, a value, and
    // whether it is accepted; most types have one accepted and one refused value.
    #[test]
    fn values_are_checked_by_kind() {
        let cases: Vec<(InteractionKind, Value, bool)> = vec![
            (
                InteractionKind::Likert {
                    scale: 5,
                    labels: vec![],
                },
                json!(5),
                true,
            ),
            (
                InteractionKind::Likert {
                    scale: 5,
                    labels: vec![],
                },
                json!(6),
                false,
            ),
            (
                InteractionKind::Likert {
                    scale: 5,
                    labels: vec![],
                },
                json!("3"),
                false,
            ),
            (
                InteractionKind::SingleChoice { options: choices() },
                json!("b"),
                true,
            ),
            (
                InteractionKind::SingleChoice { options: choices() },
                json!("z"),
                false,
            ),
            (
                InteractionKind::Ranking { options: choices() },
                json!(["c", "a", "b"]),
                true,
            ),
            (
                InteractionKind::Ranking { options: choices() },
                json!(["c", "a", "a"]),
                false,
            ),
            (
                InteractionKind::Consent {
                    consent_text: "x".into(),
                    consent_version: "1".into(),
                },
                json!({"accepted": false}),
                true,
            ),
            (
                InteractionKind::Consent {
                    consent_text: "x".into(),
                    consent_version: "1".into(),
                },
                json!({"accepted": "yes"}),
                false,
            ),
            (InteractionKind::YesNo {}, json!(true), true),
            (
                InteractionKind::FreeText { max_length: 3 },
                json!("abcd"),
                false,
            ),
            (
                InteractionKind::Rating {
                    min: 0.0,
                    max: 10.0,
                    step: 0.5,
                },
                json!(7.5),
                true,
            ),
            (
                InteractionKind::MultipleChoice {
                    options: choices(),
                    min_selections: 1,
                    max_selections: Some(2),
                },
                json!(["a", "b", "c"]),
                false,
            ),
        ];
        for (kind, value, ok) in cases {
            assert_eq!(kind.check_value(&value).is_ok(), ok, "{kind:?} {value}");
        }
    }
}
