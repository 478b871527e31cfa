//! A study's overview as researchers read it (`GET /api/studies/{id}/overview`), worked out
//! from its named counts: rates, means and percentiles are computed here, on read, so the stored
//! counts stay whole numbers that any order of writes (or a rebuild) sums to the same values.

use std::collections::BTreeMap;

use serde::Serialize;

/// The study's sessions from creation to completion; previews are left out.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Funnel {
    pub created: i64,
    pub consented: i64,
    pub screened_in: i64,
    pub completed: i64,
}

/// Sessions that stopped in one way, by the phase they were in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ByPhase {
    pub total: i64,
    pub by_phase: BTreeMap<String, i64>,
}

/// Where every session that has not completed is: each created session is counted exactly once
/// here or in `funnel.completed`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stopped {
    pub in_progress: i64,
    pub declined: i64,
    pub screened_out: i64,
    pub abandoned: ByPhase,
    pub idle_expired: ByPhase,
    /// Sessions whose participant's data was erased (withdrawn, erased on request, or past the
    /// study's retention), however they had ended: they count nowhere else.
    pub withdrawn: i64,
}

/// The median and 90th percentile of a measure (linear between closest ranks, as numpy and
/// Python's `statistics.median` compute them); null with no completed interview.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spread {
    pub median: Option<f64>,
    pub p90: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Completed {
    pub count: i64,
    pub by_reason: BTreeMap<String, i64>,
    /// From the session's creation to its completion, in whole seconds.
    pub duration_seconds: Spread,
    pub turns: Spread,
}

/// One objective over the completed interviews whose study version had it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObjectiveStat {
    pub objective_id: String,
    /// From the study's current definition (null for an objective it no longer has).
    pub title: Option<String>,
    pub sessions: i64,
    pub covered: i64,
    pub covered_rate: Option<f64>,
    pub probes_used: i64,
    pub probes_per_session: Option<f64>,
}

/// One output field over the completed interviews whose study version had it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldStat {
    pub field_id: String,
    pub sessions: i64,
    pub filled: i64,
    pub fill_rate: Option<f64>,
    /// Over the interviews that filled it.
    pub mean_confidence: Option<f64>,
}

/// Per completed interview in which a model took part (llm mode).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerInterview {
    pub calls: Option<f64>,
    pub prompt_tokens: Option<f64>,
    pub completion_tokens: Option<f64>,
    /// Only over interviews whose study version has `model.price_per_million_tokens`.
    pub spend_usd: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelStat {
    /// Completed interviews in which a model took part.
    pub sessions: i64,
    pub calls: i64,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub spend_usd: Option<f64>,
    pub per_interview: PerInterview,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Overview {
    pub study_id: String,
    pub funnel: Funnel,
    pub stopped: Stopped,
    pub completed: Completed,
    pub objectives: Vec<ObjectiveStat>,
    pub fields: Vec<FieldStat>,
    pub model: ModelStat,
}

/// The `p` quantile (0–1) of the values counted in `histogram` (value → how many), linear
/// between the two closest ranks; `None` when it counts nothing.
pub fn percentile(histogram: &BTreeMap<i64, i64>, p: f64) -> Option<f64> {
    let total: i64 = histogram.values().sum();
    if total <= 0 {
        return None;
    }
    let rank = (total - 1) as f64 * p.clamp(0.0, 1.0);
    let low = rank.floor() as i64;
    let at = |k: i64| -> f64 {
        let mut seen = 0;
        for (value, n) in histogram {
            seen += n;
            if k < seen {
                return *value as f64;
            }
        }
        *histogram.keys().next_back().expect("not empty") as f64
    };
    let (a, b) = (at(low), at((low + 1).min(total - 1)));
    Some(a + (rank - low as f64) * (b - a))
}

/// Where `id` stands in `order` (the ones it lacks go last, by id).
fn position(order: &[&str], id: &str) -> (usize, String) {
    let at = order.iter().position(|o| *o == id).unwrap_or(order.len());
    (at, id.to_string())
}

fn ratio(part: i64, whole: i64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

impl Overview {
    /// Puts objectives and fields in the order of the study's current definition, with the
    /// objectives' titles.
    pub fn arrange(&mut self, objectives: &[(&str, &str)], fields: &[&str]) {
        let ids: Vec<&str> = objectives.iter().map(|(id, _)| *id).collect();
        self.objectives
            .sort_by_key(|o| position(&ids, &o.objective_id));
        for o in &mut self.objectives {
            o.title = objectives
                .iter()
                .find(|(id, _)| *id == o.objective_id)
                .map(|(_, title)| title.to_string());
        }
        self.fields.sort_by_key(|f| position(fields, &f.field_id));
    }

    /// Works the overview out of a study's counts (see `interview_session::aggregate::outcome`
    /// for their names).
    // Long by design: a table of data: each field of the overview next to the named count (or
    // family of counts) it is read from, with the readers (one count, a prefixed family, a
    // histogram's median and p90) as closures above; one struct literal, so the compiler checks
    // that no field is left out.
    pub fn from_counts(study_id: &str, counts: &BTreeMap<String, i64>) -> Self {
        let get = |name: &str| counts.get(name).copied().unwrap_or(0);
        let keyed = |metric: &str| -> BTreeMap<String, i64> {
            let prefix = format!("{metric}:");
            counts
                .range(prefix.clone()..)
                .take_while(|(name, _)| name.starts_with(&prefix))
                .map(|(name, n)| (name[prefix.len()..].to_string(), *n))
                .collect()
        };
        let by_phase = |metric: &str| {
            let by_phase = keyed(metric);
            ByPhase {
                total: by_phase.values().sum(),
                by_phase,
            }
        };
        let histogram = |metric: &str| -> BTreeMap<i64, i64> {
            keyed(metric)
                .into_iter()
                .filter_map(|(value, n)| Some((value.parse().ok()?, n)))
                .collect()
        };
        let spread = |metric: &str| {
            let h = histogram(metric);
            Spread {
                median: percentile(&h, 0.5),
                p90: percentile(&h, 0.9),
            }
        };
        let probes = keyed("objective_probes");
        let covered = keyed("objective_covered");
        let objectives = keyed("objective_sessions")
            .into_iter()
            .map(|(id, sessions)| {
                let covered = covered.get(&id).copied().unwrap_or(0);
                let probes_used = probes.get(&id).copied().unwrap_or(0);
                ObjectiveStat {
                    title: None,
                    covered_rate: ratio(covered, sessions),
                    probes_per_session: ratio(probes_used, sessions),
                    objective_id: id,
                    sessions,
                    covered,
                    probes_used,
                }
            })
            .collect();
        let filled = keyed("field_filled");
        let confidence = keyed("field_confidence_micros");
        let fields = keyed("field_sessions")
            .into_iter()
            .map(|(id, sessions)| {
                let filled = filled.get(&id).copied().unwrap_or(0);
                let micros = confidence.get(&id).copied().unwrap_or(0);
                FieldStat {
                    fill_rate: ratio(filled, sessions),
                    mean_confidence: ratio(micros, filled).map(|c| c / 1e6),
                    field_id: id,
                    sessions,
                    filled,
                }
            })
            .collect();
        let model_sessions = get("model_sessions");
        let priced = get("priced_sessions");
        let spend = (priced > 0).then(|| get("spend_micro_usd") as f64 / 1e6);
        Overview {
            study_id: study_id.to_string(),
            funnel: Funnel {
                created: get("created"),
                consented: get("consented"),
                screened_in: get("screened_in"),
                completed: get("completed"),
            },
            stopped: Stopped {
                in_progress: get("in_progress"),
                declined: get("declined"),
                screened_out: get("screened_out"),
                abandoned: by_phase("abandoned"),
                idle_expired: by_phase("idle_expired"),
                withdrawn: get("withdrawn"),
            },
            completed: Completed {
                count: get("completed"),
                by_reason: keyed("completed_reason"),
                duration_seconds: spread("duration_s"),
                turns: spread("turns"),
            },
            objectives,
            fields,
            model: ModelStat {
                sessions: model_sessions,
                calls: get("model_calls"),
                prompt_tokens: get("prompt_tokens"),
                completion_tokens: get("completion_tokens"),
                spend_usd: spend,
                per_interview: PerInterview {
                    calls: ratio(get("model_calls"), model_sessions),
                    prompt_tokens: ratio(get("prompt_tokens"), model_sessions),
                    completion_tokens: ratio(get("completion_tokens"), model_sessions),
                    spend_usd: spend.and_then(|s| (priced > 0).then(|| s / priced as f64)),
                },
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(values: &[i64]) -> BTreeMap<i64, i64> {
        let mut h = BTreeMap::new();
        for v in values {
            *h.entry(*v).or_default() += 1;
        }
        h
    }

    #[test]
    fn percentiles_match_the_linear_method() {
        // numpy.percentile / statistics.median on the same values.
        assert_eq!(percentile(&hist(&[4, 6]), 0.5), Some(5.0));
        assert_eq!(percentile(&hist(&[3, 1, 2]), 0.5), Some(2.0));
        assert_eq!(
            percentile(&hist(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]), 0.9),
            Some(9.1)
        );
        assert_eq!(percentile(&hist(&[7, 7, 7, 9]), 0.5), Some(7.0));
        assert_eq!(percentile(&hist(&[42]), 0.9), Some(42.0));
        assert_eq!(percentile(&hist(&[]), 0.5), None);
    }

    #[test]
    fn every_created_session_is_counted_once() {
        let counts: BTreeMap<String, i64> = [
            ("created", 7),
            ("withdrawn", 1),
            ("consented", 4),
            ("screened_in", 3),
            ("completed", 2),
            ("declined", 1),
            ("screened_out", 1),
            ("abandoned:ASK_OR_PROBE", 1),
            ("idle_expired:OPENING", 1),
            ("turns:4", 1),
            ("turns:6", 1),
            ("objective_sessions:a", 2),
            ("objective_covered:a", 1),
            ("objective_probes:a", 3),
            ("field_sessions:f", 2),
            ("field_filled:f", 1),
            ("field_confidence_micros:f", 800_000),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let o = Overview::from_counts("s", &counts);
        let s = &o.stopped;
        assert_eq!(
            o.funnel.completed
                + s.in_progress
                + s.declined
                + s.screened_out
                + s.abandoned.total
                + s.idle_expired.total
                + s.withdrawn,
            o.funnel.created
        );
        assert_eq!(s.abandoned.by_phase["ASK_OR_PROBE"], 1);
        assert_eq!(o.completed.turns.median, Some(5.0));
        assert_eq!(o.objectives[0].covered_rate, Some(0.5));
        assert_eq!(o.objectives[0].probes_per_session, Some(1.5));
        assert_eq!(o.fields[0].mean_confidence, Some(0.8));
        assert_eq!(o.model.per_interview.calls, None);
    }
}
