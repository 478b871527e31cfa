//! What an extracted value may be (issue 32): a value is checked against its output field's
//! type — and an `enum` field's options — wherever fields are recorded, whoever extracted them,
//! so a model's `{"type": "number"}` in a text field reaches no summary and no export. An
//! answered, non-empty value must cite the turns it rests on; a declined, unknown or skipped
//! field holds no value.

use serde_json::Value;

use crate::decision::ExtractedField;
use crate::study::{FieldType, OutputField, OutputSchema};

/// Why `value` cannot be `field`'s, if it cannot.
pub fn check_value(field: &OutputField, value: &Value) -> Result<(), String> {
    let fits = match field.field_type {
        FieldType::String => value.is_string(),
        FieldType::Number => value.is_number(),
        FieldType::Integer => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|n| n.fract() == 0.0)
        }
        FieldType::Boolean => value.is_boolean(),
        FieldType::StringList => value.as_array().is_some_and(|items| {
            items
                .iter()
                .all(|i| i.as_str().is_some_and(|s| !looks_like_json(s)))
        }),
        FieldType::Enum => value
            .as_str()
            .is_some_and(|s| field.options.iter().any(|o| o == s)),
    };
    match fits {
        true => Ok(()),
        false if field.field_type == FieldType::Enum => {
            Err(format!("{:?} takes one of {:?}", field.id, field.options))
        }
        false => Err(format!(
            "{:?} takes a {} value",
            field.id,
            type_name(field.field_type)
        )),
    }
}

fn type_name(t: FieldType) -> &'static str {
    match t {
        FieldType::String => "text",
        FieldType::Number => "number",
        FieldType::Integer => "whole-number",
        FieldType::Boolean => "true/false",
        FieldType::StringList => "list-of-texts",
        FieldType::Enum => "enum",
    }
}

/// A text that is a JSON object or array, not words (what a small model echoes of a schema).
pub fn looks_like_json(s: &str) -> bool {
    let t = s.trim();
    ((t.starts_with('{') && t.ends_with('}')) || (t.starts_with('[') && t.ends_with(']')))
        && serde_json::from_str::<Value>(t).is_ok()
}

/// The output field an extracted field names, with a confidence in [0, 1].
fn field_of<'s>(schema: &'s OutputSchema, f: &ExtractedField) -> Result<&'s OutputField, String> {
    let Some(field) = schema.fields.iter().find(|s| s.id == f.field_id) else {
        return Err(format!("no output field {:?}", f.field_id));
    };
    if !(0.0..=1.0).contains(&f.confidence) {
        return Err(format!(
            "{:?}: confidence must be between 0 and 1",
            f.field_id
        ));
    }
    Ok(field)
}

/// What a model extracted, before the harness's guards tidy it (they null a declined field's
/// value, and widget answers replace the model's): an output field it names, a confidence in
/// [0, 1], an answered value of the field's type, and no text that is an echoed JSON object or
/// array (a participant may write such text; a model that puts it in a field has echoed its
/// schema).
pub fn check_model_fields(schema: &OutputSchema, fields: &[ExtractedField]) -> Result<(), String> {
    for f in fields {
        let field = field_of(schema, f)?;
        if f.value.is_null() || !f.status.is_answered() {
            continue;
        }
        check_value(field, &f.value)?;
        let texts: Vec<&str> = match &f.value {
            Value::String(s) => vec![s],
            Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if texts.into_iter().any(looks_like_json) {
            return Err(format!(
                "{:?}: the value is a JSON document, not an answer",
                f.field_id
            ));
        }
    }
    Ok(())
}

/// Checks every field of an extraction against the schema: an output field it names, a
/// confidence in [0, 1], a value of the field's type (null only when nothing was answered), and
/// evidence for an answered value. Returns the first fault, as the argument name and a message.
pub fn check_fields(schema: &OutputSchema, fields: &[ExtractedField]) -> Result<(), String> {
    for f in fields {
        let field = field_of(schema, f)?;
        if f.value.is_null() {
            continue;
        }
        if !f.status.is_answered() {
            return Err(format!(
                "{:?}: a declined, unknown or skipped field holds no value",
                f.field_id
            ));
        }
        check_value(field, &f.value)?;
        if f.evidence_turn_ids.is_empty() {
            return Err(format!(
                "{:?}: a value needs the turns it rests on",
                f.field_id
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field(field_type: FieldType) -> OutputField {
        OutputField {
            id: "f".into(),
            field_type,
            description: String::new(),
            required: false,
            objective_id: "o".into(),
            options: vec!["a".into(), "b".into()],
            participant_label: None,
        }
    }

    #[test]
    fn each_type_takes_its_own_values_only() {
        use FieldType::*;
        let cases = [
            (String, json!("a moka pot"), true),
            (String, json!("{\"type\": \"number\"}"), true), // a participant may write it
            (String, json!({"type": "string"}), false),
            (String, json!(3), false),
            (Number, json!(3.5), true),
            (Number, json!("3.5"), false),
            (Integer, json!(4), true),
            (Integer, json!(4.0), true),
            (Integer, json!(4.5), false),
            (Boolean, json!(true), true),
            (Boolean, json!("yes"), false),
            (StringList, json!(["a", "b"]), true),
            (StringList, json!(["a", 1]), false),
            (StringList, json!("a"), false),
            (Enum, json!("b"), true),
            (Enum, json!("c"), false),
        ];
        for (t, value, fits) in cases {
            assert_eq!(
                check_value(&field(t), &value).is_ok(),
                fits,
                "{t:?} {value}"
            );
        }
    }

    #[test]
    fn a_model_may_not_echo_json_into_a_field_but_may_leave_a_declined_value_to_be_cleared() {
        use crate::decision::FieldStatus;
        let schema = OutputSchema {
            fields: vec![field(FieldType::String)],
        };
        let extracted = |value: Value, status: FieldStatus| ExtractedField {
            field_id: "f".into(),
            value,
            confidence: 0.9,
            evidence_turn_ids: vec![],
            quote: None,
            status,
        };
        let echo = extracted(json!("{\"type\": \"number\"}"), FieldStatus::Answered);
        assert!(check_model_fields(&schema, &[echo]).is_err());
        let declined = extracted(json!("declined"), FieldStatus::Refused);
        assert!(check_model_fields(&schema, &[declined]).is_ok());
        let plain = extracted(json!("a list"), FieldStatus::Answered);
        assert!(check_model_fields(&schema, &[plain]).is_ok());
    }
}
