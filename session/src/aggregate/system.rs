//! Work the system does on a session: the post-session extraction (claimed, then completed)
//! and handled failures kept for auditors.

use super::*;
use crate::commands as cmd;
use crate::events::SessionStatus::*;

impl Session {
    /// Claims the post-session extraction of a completed session (FR-04-26).
    pub(super) async fn start_final_extraction(
        &mut self,
        sink: &EventSink<Self>,
        c: cmd::StartFinalExtraction,
    ) -> Result<(), SessionError> {
        let cmd::StartFinalExtraction { extraction_id, at } = c;
        // System work after the end: only on a completed session, once, one worker at a
        // time (a claim older than CLAIM_TIMEOUT_SECS is presumed dead and retried).
        if self.status != Completed {
            return Err(SessionError::InvalidState {
                status: self.status,
            });
        }
        match self.final_extraction {
            Some((_, _, true)) => {
                return Err(SessionError::InvalidState {
                    status: self.status,
                })
            }
            Some((_, claimed, false)) if (at - claimed).num_seconds() < CLAIM_TIMEOUT_SECS => {
                return Err(SessionError::InvalidState {
                    status: self.status,
                })
            }
            _ => {}
        }
        self.emit(
            sink,
            EventBody::ExtractionStarted {
                extraction_id,
                is_final: true,
            },
            at,
        )
        .await;
        Ok(())
    }

    /// The post-session extraction's result, over the whole transcript.
    pub(super) async fn complete_final_extraction(
        &mut self,
        sink: &EventSink<Self>,
        c: cmd::CompleteFinalExtraction,
    ) -> Result<(), SessionError> {
        let cmd::CompleteFinalExtraction {
            extraction_id,
            fields,
            decided_by,
            at,
        } = c;
        match self.final_extraction {
            Some((id, _, false)) if id == extraction_id => {}
            _ => {
                return Err(SessionError::InvalidState {
                    status: self.status,
                })
            }
        }
        let study = self.study.as_deref().ok_or(SessionError::NotCreated)?;
        crate::field_values::check_fields(&study.output_schema, &fields).map_err(|message| {
            SessionError::InvalidValue {
                field: "fields".into(),
                message,
            }
        })?;
        let body = EventBody::ExtractionCompleted {
            extraction_id,
            fields,
            is_final: true,
            decided_by,
        };
        self.emit(sink, body, at).await;
        self.change_phase(sink, Phase::End, at).await;
        Ok(())
    }

    /// A handled failure, kept for auditors.
    pub(super) async fn record_error(
        &mut self,
        sink: &EventSink<Self>,
        c: cmd::RecordError,
    ) -> Result<(), SessionError> {
        let cmd::RecordError {
            source,
            code,
            message,
            at,
        } = c;
        if self.session_id.is_none() {
            return Err(SessionError::NotCreated);
        }
        self.emit(
            sink,
            EventBody::ErrorRecorded {
                source,
                code,
                message,
            },
            at,
        )
        .await;
        Ok(())
    }
}
