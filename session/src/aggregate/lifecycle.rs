//! The session's lifecycle commands: created, started, and ended by the system — completed,
//! expired when idle, abandoned.

use super::*;
use crate::commands as cmd;
use crate::events::SessionStatus::*;

impl Session {
    /// A participant opens the public link (FR-04-1); pins the study (FR-04-2).
    pub(super) async fn create(
        &mut self,
        sink: &EventSink<Self>,
        c: cmd::Create,
    ) -> Result<(), SessionError> {
        let cmd::Create {
            session_id,
            study,
            participant_ref,
            participant_token_sha256,
            preview,
            chain_secret,
            at,
        } = c;
        if self.session_id.is_some() {
            return Err(SessionError::AlreadyCreated);
        }
        let created = EventBody::SessionCreated {
            session_id,
            study,
            participant_ref,
            participant_token_sha256,
            preview,
            chain_secret,
        };
        self.emit(sink, created, at).await;
        Ok(())
    }

    /// The interviewer takes the session up: `created → active`.
    pub(super) async fn start(
        &mut self,
        sink: &EventSink<Self>,
        c: cmd::Start,
    ) -> Result<(), SessionError> {
        let cmd::Start { at } = c;
        self.ensure_open()?;
        self.ensure_status(&[Created])?;
        self.change_status(sink, Active, at).await;
        Ok(())
    }

    /// The system completes a session (for example one idle at summary confirmation, with the
    /// summary unconfirmed).
    pub(super) async fn complete(
        &mut self,
        sink: &EventSink<Self>,
        c: cmd::Complete,
    ) -> Result<(), SessionError> {
        let cmd::Complete {
            summary,
            summary_confirmed,
            reason,
            at,
        } = c;
        self.ensure_open()?;
        self.ensure_status(&[Active, WaitingForUser, WaitingForTool])?;
        if reason.abandons() {
            return Err(SessionError::InvalidValue {
                field: "reason".into(),
                message: "this reason abandons the session".into(),
            });
        }
        let body = EventBody::SessionCompleted {
            summary,
            summary_confirmed,
            reason,
        };
        self.emit(sink, body, at).await;
        self.change_status(sink, Completed, at).await;
        Ok(())
    }

    /// The idle sweeper: a session idle for its study's `idle_ttl_minutes` is abandoned
    /// (`timeout`), or completed with its summary unconfirmed if it was idle at the summary
    /// confirmation. Refused if the session is not idle that long.
    pub(super) async fn expire(
        &mut self,
        sink: &EventSink<Self>,
        c: cmd::Expire,
    ) -> Result<(), SessionError> {
        let cmd::Expire { at } = c;
        self.ensure_open()?;
        let ttl = self
            .study
            .as_deref()
            .map_or(0, |s| s.study_config.limits.idle_ttl_minutes);
        let idle = self
            .last_activity_at
            .map_or(0, |last| (at - last).num_seconds());
        if idle < i64::from(ttl) * 60 {
            return Err(SessionError::InvalidState {
                status: self.status,
            });
        }
        if self.phase == Phase::SummaryConfirmation && self.summary.is_some() {
            // Idle at the confirmation step: the interview happened; keep it, with the
            // summary unconfirmed (unless it was confirmed just before).
            self.end(sink, ConcludeReason::Timeout, at).await;
        } else {
            self.emit(
                sink,
                EventBody::SessionAbandoned {
                    reason: ConcludeReason::Timeout,
                },
                at,
            )
            .await;
            self.change_status(sink, Abandoned, at).await;
        }
        Ok(())
    }

    /// The interview ends early.
    pub(super) async fn abandon(
        &mut self,
        sink: &EventSink<Self>,
        c: cmd::Abandon,
    ) -> Result<(), SessionError> {
        let cmd::Abandon { reason, at } = c;
        self.ensure_open()?;
        self.emit(sink, EventBody::SessionAbandoned { reason }, at)
            .await;
        self.change_status(sink, Abandoned, at).await;
        Ok(())
    }

    /// Ends the session: the closing words, then `session.completed` or `session.abandoned`.
    pub(super) async fn end(
        &mut self,
        sink: &EventSink<Self>,
        reason: ConcludeReason,
        at: DateTime<Utc>,
    ) {
        if reason.abandons() {
            self.emit(sink, EventBody::SessionAbandoned { reason }, at)
                .await;
            self.change_status(sink, SessionStatus::Abandoned, at).await;
        } else {
            let body = EventBody::SessionCompleted {
                summary: self.summary.clone().unwrap_or_default(),
                summary_confirmed: self.summary_confirmed.unwrap_or(false),
                reason,
            };
            self.emit(sink, body, at).await;
            self.change_status(sink, SessionStatus::Completed, at).await;
            // A completed interview's transcript is extracted once more, after the end
            // (FR-04-26); the phase reaches END when that extraction completes.
            self.change_phase(sink, Phase::PostSessionExtraction, at)
                .await;
            return;
        }
        self.change_phase(sink, Phase::End, at).await;
    }
}
