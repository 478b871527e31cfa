//! Post-session extraction (FR-04-26): after a session completes, a final extraction over its
//! whole transcript is recorded (`extraction.started` / `extraction.completed`, `final`), and
//! the results view picks it up.
//!
//! It is driven by the completion commit: the cqrs-es query [`Completions`] hands each session
//! that completes to a pool of [`WORKERS`] workers, so the work keeps up with the sessions that
//! complete. The `session_state` view (`needs_final_extraction`) is swept at start-up and every
//! `SWEEP_INTERVAL_SECS` as recovery, so nothing is lost when a process dies between the commit
//! and the work. The aggregate makes it idempotent and safe on several processes and against the
//! sweep: one claim at a time, one completion; a claim abandoned by a dead process is retried
//! once it is stale, which is also the backoff after a failure (recorded as `error.recorded`).

use interview_session::commands as cmd;
use std::sync::Arc;
use std::time::Duration;

use actix_web::web;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use cqrs_es::{AggregateError, EventEnvelope, Query};
use interview_projections::read;
use interview_session::{EventBody, Session, SessionCommand, SessionError};
use tokio::sync::{mpsc, Semaphore};
use uuid::Uuid;

use crate::command::error::CommandError;
use crate::command::store::Actor;
use crate::state::AppState;

/// Sessions the recovery sweep takes at once.
const BATCH: i64 = 50;

/// Final extractions run at once in this process (each may wait for a model).
pub const WORKERS: usize = 4;

/// Registered with the cqrs framework: announces each session whose commit completed it.
pub struct Completions(pub mpsc::UnboundedSender<String>);

#[async_trait]
impl Query<Session> for Completions {
    async fn dispatch(&self, aggregate_id: &str, events: &[EventEnvelope<Session>]) {
        if events
            .iter()
            .any(|e| matches!(e.payload.body, EventBody::SessionCompleted { .. }))
        {
            // No receiver: background work is off (tests drive it by hand).
            let _ = self.0.send(aggregate_id.to_string());
        }
    }
}

/// Runs every pending final extraction once (the recovery sweep); returns how many completed.
#[tracing::instrument(skip(state))]
pub async fn run_once(state: &AppState, now: DateTime<Utc>) -> Result<usize, CommandError> {
    let mut done = 0;
    for id in read::pending_final_extractions(&state.db, BATCH).await? {
        if extract_one(state, &id, now).await? {
            done += 1;
        }
    }
    Ok(done)
}

/// Runs one session's final extraction, unless it is done or another worker holds a fresh
/// claim; true when this call completed it.
// Long by design: the steps of one final extraction in order: claim it (skipped when done, claimed
// elsewhere or erased), load the session and work out the fields, complete it (skipped if erased
// meanwhile), then count the outcome and, on a failure, record it so the sweep retries; split, the
// extraction id and the one outcome each path must count would be spread out.
#[tracing::instrument(skip(state))]
pub async fn extract_one(
    state: &AppState,
    id: &str,
    now: DateTime<Utc>,
) -> Result<bool, CommandError> {
    let id = id.to_string();
    let extraction_id = Uuid::new_v4();
    let claim = SessionCommand::StartFinalExtraction(cmd::StartFinalExtraction {
        extraction_id,
        at: now,
    });
    match state
        .store
        .execute(&id, claim, Actor::System, "final-extraction")
        .await
    {
        Ok(()) => {}
        // Done, or another worker holds a fresh claim, or the participant's data is erased.
        Err(AggregateError::UserError(
            SessionError::InvalidState { .. } | SessionError::Erased,
        ))
        | Err(AggregateError::AggregateConflict) => {
            metrics::counter!("interview_final_extractions_total", "outcome" => "skipped")
                .increment(1);
            return Ok(false);
        }
        Err(e) => return Err(e.into()),
    }
    let result = match state.interviewer.load_latest(&id).await {
        Ok(loaded) => {
            // In llm mode one model call over the whole transcript; the rules copier
            // otherwise, and as the recorded fallback.
            let (fields, decided_by) = state.interviewer.final_fields(&id, &loaded, now).await;
            let complete = SessionCommand::CompleteFinalExtraction(cmd::CompleteFinalExtraction {
                extraction_id,
                fields,
                decided_by,
                at: Utc::now().max(now),
            });
            match state
                .store
                .execute(&id, complete, Actor::System, "final-extraction")
                .await
            {
                // Erased while it ran: nothing to record, nothing to retry.
                Err(AggregateError::UserError(SessionError::Erased)) => {
                    metrics::counter!("interview_final_extractions_total", "outcome" => "skipped")
                        .increment(1);
                    return Ok(false);
                }
                other => other.map_err(|e| e.to_string()),
            }
        }
        Err(e) => Err(e.to_string()),
    };
    match result {
        Ok(()) => {
            metrics::counter!("interview_final_extractions_total", "outcome" => "completed")
                .increment(1);
            Ok(true)
        }
        Err(message) => {
            // Kept in the permanent log: short, nothing token-shaped.
            let message = crate::llm::redact::redact(&message, None);
            tracing::warn!(
                session_id = id,
                detail = message,
                "final extraction failed; it will be retried"
            );
            let error = SessionCommand::RecordError(cmd::RecordError {
                source: "final_extraction".into(),
                code: "final_extraction_failed".into(),
                message,
                at: Utc::now().max(now),
            });
            let _ = state
                .store
                .execute(&id, error, Actor::System, "final-extraction")
                .await;
            metrics::counter!("interview_final_extractions_total", "outcome" => "failed")
                .increment(1);
            Ok(false)
        }
    }
}

/// Runs each session `completed` announces on a pool of [`WORKERS`], and sweeps for pending
/// work now (start-up) and then every `every_secs`. `every_secs` 0 turns both off.
pub fn spawn(
    state: web::Data<AppState>,
    every_secs: u64,
    mut completed: mpsc::UnboundedReceiver<String>,
) {
    if every_secs == 0 {
        return;
    }
    let workers = Arc::new(Semaphore::new(WORKERS));
    let pool_state = state.clone();
    tokio::spawn(async move {
        while let Some(id) = completed.recv().await {
            let Ok(permit) = workers.clone().acquire_owned().await else {
                return;
            };
            let state = pool_state.clone();
            tokio::spawn(async move {
                if let Err(error) = extract_one(&state, &id, Utc::now()).await {
                    tracing::warn!(session_id = id, %error, "final extraction failed; the sweep will retry");
                }
                drop(permit);
            });
        }
    });
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(every_secs));
        loop {
            tick.tick().await;
            if let Err(error) = run_once(&state, Utc::now()).await {
                tracing::warn!(%error, "final extraction sweep failed; will retry");
            }
        }
    });
}
