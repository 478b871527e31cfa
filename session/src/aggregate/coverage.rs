//! Where each objective stands (FR-04-13), for researchers: derived from the folded session, so
//! it is exactly what the guards judge by.

use serde::Serialize;
use serde_json::{Map, Value};

use super::Session;
use crate::study::Priority;

/// One objective's standing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObjectiveCoverage {
    pub objective_id: String,
    pub title: String,
    pub priority: Priority,
    /// `not_started` (not asked yet), `in_progress`, `covered` (answered, and its required fields
    /// at the threshold or its probes used up), or `skipped` (its widget skipped, not covered).
    pub status: &'static str,
    pub asked: bool,
    pub answered: bool,
    pub probes_used: u32,
    pub probe_cap: u32,
    /// `none` (no widget), `not_shown`, `shown`, `skipped`.
    pub widget: &'static str,
    /// The objective's output fields: the confidence extracted so far (null: nothing yet).
    pub fields: Map<String, Value>,
}

impl Session {
    /// Every objective of the pinned study, in priority order, with where it stands.
    pub fn coverage(&self) -> Vec<ObjectiveCoverage> {
        let Some(study) = self.study() else {
            return Vec::new();
        };
        self.objectives_in_order()
            .into_iter()
            .map(|o| {
                let p = self.objective(&o.id);
                let covered = self.objective_covered(&o.id);
                let status = match (p.asked, covered, p.skipped) {
                    (false, _, _) => "not_started",
                    (true, true, _) => "covered",
                    (true, false, true) => "skipped",
                    (true, false, false) => "in_progress",
                };
                let widget = match (&o.interaction, p.interaction_rendered, p.skipped) {
                    (None, _, _) => "none",
                    (Some(_), false, _) => "not_shown",
                    (Some(_), true, true) => "skipped",
                    (Some(_), true, false) => "shown",
                };
                let fields = study
                    .output_schema
                    .fields
                    .iter()
                    .filter(|f| f.objective_id == o.id)
                    .map(|f| {
                        let confidence = self
                            .fields()
                            .get(&f.id)
                            .map_or(Value::Null, |x| Value::from(x.confidence));
                        (f.id.clone(), confidence)
                    })
                    .collect();
                ObjectiveCoverage {
                    objective_id: o.id.clone(),
                    title: o.title.clone(),
                    priority: o.priority,
                    status,
                    asked: p.asked,
                    answered: p.answered,
                    probes_used: p.probes,
                    probe_cap: o.max_probe_count,
                    widget,
                    fields,
                }
            })
            .collect()
    }
}
