//! The idle sweeper: sessions left idle past their study's `idle_ttl_minutes` are abandoned
//! (`timeout`), or — idle at the summary confirmation — completed with the summary unconfirmed.
//! Each sweep then runs the studies' retention (`jobs::retention`).
//!
//! The aggregate decides (`Expire` is refused for a session that is not idle), so the sweeper is
//! safe on several processes at once and against a participant who comes back at the last
//! moment: whoever commits first wins the optimistic lock and the other is refused.

use interview_session::commands as cmd;
use std::time::Duration;

use actix_web::web;
use chrono::{DateTime, Utc};
use cqrs_es::AggregateError;
use interview_projections::read;
use interview_session::{SessionCommand, SessionError};

use crate::command::error::CommandError;
use crate::command::store::Actor;
use crate::state::AppState;

/// Sessions expired per sweep at most (the next sweep takes the rest).
const BATCH: i64 = 200;

/// Expires every idle session as of `now`; returns how many were closed.
#[tracing::instrument(skip(state))]
pub async fn sweep_once(state: &AppState, now: DateTime<Utc>) -> Result<usize, CommandError> {
    let mut closed = 0;
    for id in read::idle_sessions(&state.db, now, BATCH).await? {
        match state
            .store
            .execute(
                &id,
                SessionCommand::Expire(cmd::Expire { at: now }),
                Actor::System,
                "sweeper",
            )
            .await
        {
            Ok(()) => closed += 1,
            // Someone came back, another process swept it first, or it ended meanwhile.
            Err(AggregateError::UserError(
                SessionError::InvalidState { .. } | SessionError::Terminal { .. },
            ))
            | Err(AggregateError::AggregateConflict) => {}
            Err(e) => return Err(e.into()),
        }
    }
    if closed > 0 {
        metrics::counter!("interview_sweeper_closed_sessions_total").increment(closed as u64);
        tracing::info!(closed, "idle sessions closed");
    }
    Ok(closed)
}

pub fn spawn(state: web::Data<AppState>, every_secs: u64) {
    if every_secs == 0 {
        return;
    }
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(every_secs));
        loop {
            tick.tick().await;
            if let Err(error) = sweep_once(&state, Utc::now()).await {
                tracing::warn!(%error, "idle sweep failed; will retry");
            }
            if let Err(error) = crate::jobs::retention::erase_expired(&state, Utc::now()).await {
                tracing::warn!(%error, "retention sweep failed; will retry");
            }
        }
    });
}
