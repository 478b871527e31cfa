//! Post-session extraction (FR-04-26): after a session completes, a final extraction over its
//! whole transcript is recorded (`extraction.started` / `extraction.completed`, `final`), and
//! the results view picks it up.
//!
//! Work is found in the `session_state` view (`needs_final_extraction`), at start-up and on
//! every sweep, so nothing is lost when a process dies. The aggregate makes it idempotent and
//! safe on several processes: one claim at a time, one completion; a claim abandoned by a dead
//! process is retried once it is stale, which is also the backoff after a failure (recorded as
//! `error.recorded`).

use std::time::Duration;

use actix_web::web;
use chrono::{DateTime, Utc};
use cqrs_es::AggregateError;
use interview_projections::read;
use interview_session::{SessionCommand, SessionError};
use uuid::Uuid;

use crate::error::ApiError;
use crate::harness;
use crate::state::AppState;
use crate::store::Actor;

const BATCH: i64 = 50;

/// Runs every pending final extraction once; returns how many completed.
#[tracing::instrument(skip(state))]
pub async fn run_once(state: &AppState, now: DateTime<Utc>) -> Result<usize, ApiError> {
    let mut done = 0;
    for id in read::pending_final_extractions(&state.db, BATCH).await? {
        let extraction_id = Uuid::new_v4();
        let claim = SessionCommand::StartFinalExtraction {
            extraction_id,
            at: now,
        };
        match state
            .store
            .execute(&id, claim, Actor::System, "final-extraction")
            .await
        {
            Ok(()) => {}
            // Done, or another worker holds a fresh claim.
            Err(AggregateError::UserError(SessionError::InvalidState { .. }))
            | Err(AggregateError::AggregateConflict) => continue,
            Err(e) => return Err(e.into()),
        }
        let result = match harness::load(&state.db, &id).await {
            Ok(loaded) => {
                // In llm mode one model call over the whole transcript; the rules copier
                // otherwise, and as the recorded fallback.
                let (fields, decided_by) = state.harness.final_fields(&id, &loaded, now).await;
                let complete = SessionCommand::CompleteFinalExtraction {
                    extraction_id,
                    fields,
                    decided_by,
                    at: Utc::now().max(now),
                };
                state
                    .store
                    .execute(&id, complete, Actor::System, "final-extraction")
                    .await
                    .map_err(|e| e.to_string())
            }
            Err(e) => Err(e.to_string()),
        };
        match result {
            Ok(()) => done += 1,
            Err(message) => {
                // Kept in the permanent log: short, nothing token-shaped.
                let message = crate::llm::redact::redact(&message, None);
                tracing::warn!(
                    session_id = id,
                    detail = message,
                    "final extraction failed; it will be retried"
                );
                let error = SessionCommand::RecordError {
                    source: "final_extraction".into(),
                    code: "final_extraction_failed".into(),
                    message,
                    at: Utc::now().max(now),
                };
                let _ = state
                    .store
                    .execute(&id, error, Actor::System, "final-extraction")
                    .await;
            }
        }
    }
    Ok(done)
}

/// Runs pending work now (start-up) and then every `every_secs`.
pub fn spawn(state: web::Data<AppState>, every_secs: u64) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(every_secs.max(1)));
        loop {
            tick.tick().await;
            if let Err(error) = run_once(&state, Utc::now()).await {
                tracing::warn!(%error, "final extraction sweep failed; will retry");
            }
        }
    });
}
