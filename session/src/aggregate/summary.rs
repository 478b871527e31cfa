//! The summary the participant confirms when the interviewer gives none (the rules interviewer
//! always): one line per objective, as a person would write it — what they said, condensed to
//! its informative clauses and spoken back to them ([`crate::condense`]), then every widget
//! answer in the words they saw. Never a field's id or its researcher-facing description, never
//! an answer twice.

use std::collections::BTreeMap;

use super::Session;
use crate::condense;
use crate::decision::ExtractedField;
use crate::interaction::InteractionKind;
use crate::phrases;
use crate::study::{FieldType, Objective, OutputField};

impl Session {
    /// A summary written from what was extracted, for when the policy gave none.
    pub fn default_summary(&self) -> String {
        self.summary_of(&self.fields)
    }

    /// The summary [`Session::default_summary`] writes, over `values` in place of the recorded
    /// ones (an interviewer may summarise values it has not recorded yet).
    pub fn summary_of(&self, values: &BTreeMap<String, ExtractedField>) -> String {
        let Some(study) = self.study.as_deref() else {
            return String::new();
        };
        let locale = &study.study_config.locale;
        let zh = locale.to_lowercase().starts_with("zh");
        let mut lines: Vec<String> = Vec::new();
        for o in &study.study_config.objectives {
            let fields: Vec<&OutputField> = study
                .output_schema
                .fields
                .iter()
                .filter(|f| f.objective_id == o.id)
                .collect();
            let mut parts: Vec<String> = Vec::new();
            for f in &fields {
                let Some(v) = values.get(&f.id) else {
                    continue;
                };
                let Some(shown) = self.shown_value(o, f, v, zh) else {
                    continue;
                };
                // The same answer filling two fields is said once (whole values compared: "No"
                // is not inside "notebook").
                let same = |p: &String| crate::text::normalize(p) == crate::text::normalize(&shown);
                if !shown.is_empty() && !parts.iter().any(same) && !lines.iter().any(same) {
                    parts.push(shown);
                }
            }
            if parts.is_empty() {
                continue;
            }
            // The study's words for the participant name the line; an objective's title is the
            // researcher's, so without a label the line is what was said alone.
            let label = fields.iter().find_map(|f| {
                f.participant_label
                    .as_deref()
                    .filter(|l| !l.trim().is_empty())
            });
            let separator = if zh { "；" } else { "; " };
            let said = parts.join(separator);
            lines.push(match label {
                Some(label) if zh => format!("- {}：{said}", label.trim()),
                Some(label) => format!("- {}: {said}", label.trim()),
                None => format!("- {}", capitalised(&said)),
            });
        }
        if lines.is_empty() {
            phrases::nothing_to_summarize(locale).to_string()
        } else {
            lines.join("\n")
        }
    }

    /// A field's value as the participant would recognise it: words condensed, options by
    /// their labels, a widget's answer after its question.
    // Long by design: one arm per kind of JSON value (text in three cases), each saying how the
    // participant reads it; the closures above (an option's label, the widget's question before an
    // answer) are shared by the arms.
    fn shown_value(
        &self,
        o: &Objective,
        f: &OutputField,
        field: &ExtractedField,
        zh: bool,
    ) -> Option<String> {
        let value = &field.value;
        use serde_json::Value;
        use InteractionKind as K;
        let widget = o.interaction.as_ref();
        let label_of = |id: &str| -> String {
            let options = widget.map_or(&[][..], |w| w.kind.options());
            options
                .iter()
                .find(|o| o.id == id)
                .map(|o| o.label.clone())
                .unwrap_or_else(|| id.replace('_', " "))
        };
        let locale = if zh { "zh" } else { "en" };
        // A widget's answer follows its question, unless the field names it.
        let from_widget = f.field_type != FieldType::String || self.widget_answered(field);
        let asked = |answer: String| match widget {
            Some(w) if f.participant_label.is_none() && from_widget => {
                let prompt = w.prompt.trim();
                let joint = if prompt.ends_with(|c: char| {
                    c.is_ascii_punctuation() || c.is_alphanumeric() && c.is_ascii()
                }) {
                    " "
                } else {
                    ""
                };
                format!("{prompt}{joint}{answer}")
            }
            _ => answer,
        };
        let shown = match value {
            Value::Null => return None,
            Value::String(s)
                if f.options.contains(s)
                    || widget.is_some_and(|_| f.field_type == FieldType::Enum) =>
            {
                asked(label_of(s))
            }
            Value::String(s)
                if f.field_type == FieldType::String && !self.widget_answered(field) =>
            {
                condense::condense(&[s.as_str()], &f.description, zh)
            }
            Value::String(s) => asked(s.trim().to_string()),
            Value::Array(items) => {
                let listed: Vec<String> = items
                    .iter()
                    .map(|i| i.as_str().map_or_else(|| i.to_string(), label_of))
                    .collect();
                match f.field_type {
                    FieldType::StringList if widget.is_none() => {
                        let said: Vec<&str> = listed.iter().map(String::as_str).collect();
                        condense::condense(&said, &f.description, zh)
                    }
                    _ => asked(listed.join(", ")),
                }
            }
            Value::Bool(b) => asked(phrases::yes_no(locale, *b).to_string()),
            Value::Number(n) => {
                let answer = match widget.map(|w| &w.kind) {
                    Some(K::Likert { labels, .. }) => n
                        .as_u64()
                        .and_then(|i| labels.get((i as usize).checked_sub(1)?))
                        .cloned()
                        .unwrap_or_else(|| n.to_string()),
                    _ => n.to_string(),
                };
                asked(answer)
            }
            other => other.to_string(),
        };
        (!shown.is_empty()).then_some(shown)
    }

    /// Whether a field's value came from its objective's widget (its evidence is the widget's
    /// answer), so it is shown as answered, not condensed.
    fn widget_answered(&self, v: &ExtractedField) -> bool {
        !v.evidence_turn_ids.is_empty()
            && v.evidence_turn_ids
                .iter()
                .all(|t| matches!(self.turn_ids.get(t), Some(None)))
    }
}

/// The first letter in upper case (a line that starts with what was said).
fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map_or_else(String::new, |c| c.to_uppercase().chain(chars).collect())
}
