//! Where a turn's time goes: the server's stage histograms (`interview_turn_stage_seconds`,
//! `interview_commit_seconds`), read from the process's own recorder (the bench runs the server
//! in-process) before and after a measurement, and their difference cut into percentiles.
//! Percentiles are bucket bounds (the recorder's buckets: 0.5, 1, 2, 5, 10, 20, 50, 100, 200 ms…):
//! "p99 ≤ 20 ms" means the 99th percentile fell in the bucket that ends at 20 ms.

use std::collections::BTreeMap;

/// Cumulative bucket counts per series (`stage` or `commit`), by upper bound in seconds.
#[derive(Default)]
pub struct Snapshot(BTreeMap<String, Vec<(f64, u64)>>);

impl Snapshot {
    pub fn take() -> Self {
        let mut series: BTreeMap<String, Vec<(f64, u64)>> = BTreeMap::new();
        for line in interview_runtime::meters::render().lines() {
            let Some((name, rest)) = line.split_once("_bucket{") else {
                continue;
            };
            let Some((labels, count)) = rest.split_once("} ") else {
                continue;
            };
            let label = |key: &str| {
                labels
                    .split(',')
                    .find_map(|kv| kv.strip_prefix(key))
                    .map(|v| v.trim_matches('"').to_string())
            };
            let key = match name {
                "interview_turn_stage_seconds" => label("stage=").unwrap_or_default(),
                "interview_commit_seconds" => "commit (one batch)".to_string(),
                _ => continue,
            };
            let le = match label("le=").as_deref() {
                Some("+Inf") => f64::INFINITY,
                Some(v) => v.parse().unwrap_or(f64::INFINITY),
                None => continue,
            };
            let count = count.trim().parse().unwrap_or(0);
            series.entry(key).or_default().push((le, count));
        }
        for buckets in series.values_mut() {
            buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        Snapshot(series)
    }

    /// One line per stage: how many were recorded since `before`, and their p50 and p99 bounds.
    pub fn since(&self, before: &Snapshot) -> Vec<String> {
        let mut lines = Vec::new();
        for (stage, after) in &self.0 {
            let earlier = before.0.get(stage);
            let counts: Vec<(f64, u64)> = after
                .iter()
                .map(|&(le, n)| {
                    let was = earlier
                        .and_then(|b| b.iter().find(|(l, _)| *l == le))
                        .map_or(0, |(_, n)| *n);
                    (le, n.saturating_sub(was))
                })
                .collect();
            let total = counts.last().map_or(0, |(_, n)| *n);
            if total == 0 {
                continue;
            }
            let bound = |q: f64| {
                let want = (total as f64 * q).ceil() as u64;
                let le = counts
                    .iter()
                    .find(|(_, n)| *n >= want)
                    .map_or(f64::INFINITY, |(le, _)| *le);
                if le.is_infinite() {
                    "> 30 s".to_string()
                } else {
                    format!("≤ {} ms", le * 1e3)
                }
            };
            lines.push(format!(
                "{stage}: {total}, p50 {}, p99 {}",
                bound(0.5),
                bound(0.99)
            ));
        }
        lines
    }
}
