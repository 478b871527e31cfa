//! What a run writes down besides its steps: an extraction decided alongside an utterance, a
//! proposal the guards refused, a handled failure (`error.recorded`) — each for auditors, none
//! stopping the run.

use chrono::Utc;
use cqrs_es::AggregateError;
use interview_session::commands as cmd;
use interview_session::decision::Proposal;
use interview_session::{SessionCommand, SessionError};
use uuid::Uuid;

use super::{Interviewer, InterviewerError};

impl Interviewer {
    /// Commits an extraction decided alongside the utterance of claim `message_id`; one the
    /// aggregate refuses is recorded and the turn goes on without it.
    pub(super) async fn record_extraction(
        &self,
        session_id: &str,
        message_id: Uuid,
        proposal: Proposal,
        run_id: Uuid,
    ) -> Result<(), InterviewerError> {
        let command = SessionCommand::RecordExtraction(cmd::RecordExtraction {
            message_id,
            proposal: Box::new(proposal),
            at: Utc::now(),
        });
        match self.execute(session_id, command, run_id).await {
            Ok(()) => Ok(()),
            Err(AggregateError::UserError(refusal)) => {
                self.record_refusal(session_id, run_id, &refusal).await;
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Records a proposal the guards refused (source `guard`).
    pub(super) async fn record_refusal(
        &self,
        session_id: &str,
        run_id: Uuid,
        refusal: &SessionError,
    ) {
        let message = refusal.to_string();
        self.record_error(session_id, run_id, "guard", refusal.code(), &message)
            .await;
    }

    /// Records a handled failure (`error.recorded`), for auditors; the run goes on.
    pub(super) async fn record_error(
        &self,
        session_id: &str,
        run_id: Uuid,
        source: &str,
        code: &str,
        message: &str,
    ) {
        // The gateway already trims upstream text; this is the last line before the log.
        let message = &crate::llm::redact::redact(message, None);
        metrics::counter!("interview_fallbacks_total", "source" => source.to_string(), "code" => code.to_string())
            .increment(1);
        tracing::warn!(
            session_id,
            source,
            code,
            detail = message,
            "handled failure; falling back"
        );
        let command = SessionCommand::RecordError(cmd::RecordError {
            source: source.into(),
            code: code.into(),
            message: message.into(),
            at: Utc::now(),
        });
        if let Err(e) = self.execute(session_id, command, run_id).await {
            tracing::error!(session_id, error = %e, "cannot record a harness error");
        }
    }
}
