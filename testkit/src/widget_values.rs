//! A valid answer for each widget type: shared by the tests and the benchmarks, so both
//! exercise the same values.

use serde_json::{json, Value};

/// A valid answer for a pending widget.
pub fn typical_value(interaction: &Value) -> Value {
    let first_option = || interaction["options"][0]["id"].clone();
    match interaction["type"].as_str().unwrap_or_default() {
        "consent" => json!({"accepted": true}),
        "single_choice" => first_option(),
        "multiple_choice" => json!([first_option()]),
        "likert" => interaction["scale"]["max"]
            .as_i64()
            .or_else(|| interaction["value_schema"]["maximum"].as_i64())
            .map_or(json!(4), |m| json!(m)),
        "rating" => interaction["value_schema"]["minimum"].clone(),
        "ranking" => Value::Array(
            interaction["options"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o["id"].clone())
                .collect(),
        ),
        "yes_no" => json!(true),
        _ => json!("A fairly long answer with details."),
    }
}
