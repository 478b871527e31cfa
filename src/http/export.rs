//! Results exports: CSV (RFC 4180) and JSON Lines, one line per completed session.
//!
//! CSV columns: `session_id, participant_ref, completed_at, end_reason, summary_confirmed,
//! summary`, then for each field of the study's published output schema `<id>`,
//! `<id>__confidence`, `<id>__evidence_turn_ids` (space-separated) and `<id>__quote`. Text values
//! are written as they are; other values as JSON.
//!
//! Participants' words reach researchers' spreadsheets, which run a cell starting with `=`, `+`,
//! `-`, `@`, a tab or a carriage return as a formula. Every CSV cell that starts with one of those
//! gets a leading `'` (OWASP's advice), so it shows as text — except a plain number (`-3`), which
//! no spreadsheet runs. JSON Lines stays exactly as stored.

use interview_projections::read::ResultRow;
use serde_json::{json, Value};

/// A cell a spreadsheet would take for a formula, made plain text with a leading `'`.
fn neutralised(text: &str) -> std::borrow::Cow<'_, str> {
    // A plain number (a rating of -2, say) is data, not a formula: it stays a number.
    let number = text.parse::<f64>().is_ok_and(f64::is_finite) && !text.starts_with('+');
    if !number && text.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{text}").into()
    } else {
        text.into()
    }
}

/// Quotes a CSV field when it holds a comma, a quote or a line break (RFC 4180), after
/// neutralising a formula.
pub fn csv_field(text: &str) -> String {
    let text = neutralised(text);
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.into_owned()
    }
}

fn csv_line(fields: impl IntoIterator<Item = String>) -> String {
    let mut line = fields
        .into_iter()
        .map(|f| csv_field(&f))
        .collect::<Vec<_>>()
        .join(",");
    line.push_str("\r\n");
    line
}

fn plain(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub fn csv_header(field_ids: &[String]) -> String {
    let mut columns: Vec<String> = [
        "session_id",
        "participant_ref",
        "completed_at",
        "end_reason",
        "summary_confirmed",
        "summary",
    ]
    .map(String::from)
    .to_vec();
    for id in field_ids {
        columns.extend([
            id.clone(),
            format!("{id}__confidence"),
            format!("{id}__evidence_turn_ids"),
            format!("{id}__quote"),
            format!("{id}__status"),
        ]);
    }
    csv_line(columns)
}

pub fn csv_row(row: &ResultRow, field_ids: &[String]) -> String {
    let mut cells = vec![
        row.session_id.clone(),
        row.participant_ref.clone().unwrap_or_default(),
        row.completed_at.to_rfc3339(),
        row.end_reason.clone().unwrap_or_default(),
        row.summary_confirmed
            .map(|c| c.to_string())
            .unwrap_or_default(),
        row.summary.clone().unwrap_or_default(),
    ];
    for id in field_ids {
        let f = &row.fields[id];
        let evidence = f["evidence_turn_ids"]
            .as_array()
            .map(|ids| ids.iter().map(plain).collect::<Vec<_>>().join(" "))
            .unwrap_or_default();
        cells.extend([
            plain(&f["value"]),
            plain(&f["confidence"]),
            evidence,
            plain(&f["quote"]),
            // `answered`, `refused`, `unknown` or `skipped`; empty when the field has nothing.
            match (&f["status"], f.is_null()) {
                (_, true) => String::new(),
                (Value::String(status), _) => status.clone(),
                _ => "answered".into(),
            },
        ]);
    }
    csv_line(cells)
}

pub fn jsonl_row(row: &ResultRow) -> String {
    let mut line = json!(row).to_string();
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn awkward_text_survives_csv_quoting() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(
            csv_field("say \"hi\"\nthen 走"),
            "\"say \"\"hi\"\"\nthen 走\""
        );
    }

    #[test]
    fn formulas_become_text() {
        assert_eq!(csv_field("=1+1"), "'=1+1");
        assert_eq!(
            csv_field("=HYPERLINK(\"http://x\",\"y\")"),
            "\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\""
        );
        assert_eq!(csv_field("-3"), "-3", "numbers stay numbers");
        assert_eq!(csv_field("-0.5"), "-0.5");
        for start in ["+1", "-1+A1", "@SUM(A1)", "\tx", "\rx", "-inf"] {
            assert!(
                csv_field(start).trim_start_matches('"').starts_with('\''),
                "{start:?}"
            );
        }
        assert_eq!(csv_field("a = b"), "a = b");
    }
}
