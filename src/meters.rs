//! Prometheus metrics for operators: `GET /metrics` (`http/routes/metrics.rs`) in the text format, rendered by
//! `metrics-exporter-prometheus` from what the server records through the `metrics` facade.
//!
//! Counters and histograms are recorded where things happen (commands in `command/store.rs`,
//! commits in `projections/src/commit/group_commit.rs`, model calls in `interviewer/charged.rs`, fallbacks
//! in `interviewer/mod.rs`, refusals in `http/error.rs`, background work in `jobs/sweeper.rs` and
//! `jobs/extraction.rs`); gauges that describe the present (sessions by status and phase, streams
//! and requests open) are read when Prometheus scrapes. The route is protected: a researcher token,
//! or `METRICS_TOKEN` when set. The families are listed in the README.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// The process's recorder (one per process: every server built in it shares it).
static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the recorder (once per process) and describes the families.
pub fn install() {
    HANDLE.get_or_init(|| {
        let handle = PrometheusBuilder::new()
            .set_buckets(&[
                0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0,
                30.0,
            ])
            .expect("buckets are not empty")
            .install_recorder()
            .expect("no other metrics recorder in this process");
        describe();
        zero();
        handle
    });
}

// Long by design: one entry per metric (each with its help text), nothing else.
fn describe() {
    use ::metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!(
        "interview_commands_total",
        "Commands on sessions, by command and outcome (accepted, refused, lost_race, error)"
    );
    describe_histogram!(
        "interview_commit_batch_commands",
        "Commands written by one group-commit transaction"
    );
    describe_histogram!(
        "interview_turn_stage_seconds",
        Unit::Seconds,
        "Where a turn's time goes, by stage: run_prepare (an AG-UI run's reads before its \
         command), session_lock (a command waiting for the session's earlier command in this \
         process), commit_queue (a command's events waiting for a committer), interviewer_start \
         (a triggered interviewer run waiting for the runtime to start it), interviewer_run (one \
         run, start to end)"
    );
    describe_counter!(
        "interview_commits_total",
        "Group commits, by path: one_statement (PostgreSQL, every view kept) or transaction"
    );
    describe_histogram!(
        "interview_commit_seconds",
        Unit::Seconds,
        "Time of one group-commit transaction"
    );
    describe_counter!(
        "interview_projection_caught_up_events_total",
        "Events the periodic catch-up found the views behind on, and folded"
    );
    describe_gauge!(
        "interview_projection_lag_events",
        "Events the views were behind at the last catch-up"
    );
    describe_gauge!(
        "interview_sessions",
        "Sessions by status and phase (read when scraped)"
    );
    describe_gauge!(
        "interview_streams_open",
        "Event streams (SSE and AG-UI runs) open in this process"
    );
    describe_gauge!("interview_requests_in_flight", "Requests being handled");
    describe_counter!(
        "interview_model_calls_total",
        "Model calls by kind (step, extraction) and outcome (ok or the failure's code)"
    );
    describe_histogram!(
        "interview_model_call_seconds",
        Unit::Seconds,
        "Time of one model call"
    );
    describe_counter!(
        "interview_model_tokens_total",
        "Tokens spent on model calls, by direction (prompt, completion)"
    );
    describe_counter!(
        "interview_fallbacks_total",
        "Handled failures where the rules took over, by source and code"
    );
    describe_counter!(
        "interview_refusals_total",
        "Requests refused to protect the service, by code (rate_limited, overloaded, shutting_down)"
    );
    describe_counter!(
        "interview_sweeper_closed_sessions_total",
        "Idle sessions the sweeper closed"
    );
    describe_counter!(
        "interview_final_extractions_total",
        "Post-session extractions, by outcome (completed, skipped, failed)"
    );
    describe_counter!(
        "interview_erasures_total",
        "Sessions whose participant's data was erased, by who asked (participant, researcher, retention)"
    );
    describe_counter!(
        "interview_webhook_deliveries_total",
        "Webhook delivery attempts, by outcome (delivered: a 2xx; failed: anything else)"
    );
    describe_gauge!(
        "interview_webhook_oldest_undelivered_seconds",
        "Per webhook subscription, the age of the oldest notice it has not delivered (0: caught up)"
    );
}

/// Families whose events may not have happened yet start at zero, so every family is there
/// from the first scrape (an absent series is not the same as none in a query).
fn zero() {
    use ::metrics::{counter, gauge};
    counter!("interview_projection_caught_up_events_total").absolute(0);
    gauge!("interview_projection_lag_events").set(0.0);
    counter!("interview_sweeper_closed_sessions_total").absolute(0);
    for outcome in ["completed", "skipped", "failed"] {
        counter!("interview_final_extractions_total", "outcome" => outcome).absolute(0);
    }
    for by in ["participant", "researcher", "retention"] {
        counter!("interview_erasures_total", "by" => by).absolute(0);
    }
    for code in ["rate_limited", "overloaded", "shutting_down"] {
        counter!("interview_refusals_total", "code" => code).absolute(0);
    }
    for direction in ["prompt", "completion"] {
        counter!("interview_model_tokens_total", "direction" => direction).absolute(0);
    }
    counter!("interview_model_calls_total", "outcome" => "ok").absolute(0);
    for outcome in ["delivered", "failed"] {
        counter!("interview_webhook_deliveries_total", "outcome" => outcome).absolute(0);
    }
}

/// What the process's recorder holds, in Prometheus text format (empty before [`install`]).
pub fn render() -> String {
    HANDLE
        .get()
        .map(PrometheusHandle::render)
        .unwrap_or_default()
}
