//! The participant's commands: a message, a widget answered or skipped, both in one turn (a
//! widget answer followed by a message), and ending the interview.

use super::*;
use crate::commands as cmd;
use crate::input_class::{classify, InputClass};
use serde_json::json;

/// The largest `client_context` an answer carries, as compact JSON.
pub const MAX_CLIENT_CONTEXT_BYTES: usize = 2048;

impl Session {
    /// A widget answer followed by a participant message in the same turn, before the interviewer
    /// takes it up — AG-UI's resume with a new user message ("answer in my own words instead":
    /// skip the widget, then say it). Both are written, in that order, or neither.
    pub(super) async fn submit_then_post_message(
        &mut self,
        sink: &EventSink<Self>,
        c: cmd::SubmitThenPostMessage,
    ) -> Result<(), SessionError> {
        let cmd::SubmitThenPostMessage { answer, message } = c;
        // One turn, one moment: the message is written at the answer's time.
        let message = cmd::PostMessage {
            at: answer.at,
            ..message
        };
        self.submit_interaction(sink, answer).await?;
        self.message_after_answer(sink, message).await
    }

    /// The participant ends the interview (`POST …/end`).
    pub(super) async fn end_by_participant(
        &mut self,
        sink: &EventSink<Self>,
        c: cmd::RequestEnd,
    ) -> Result<(), SessionError> {
        let cmd::RequestEnd { at } = c;
        self.ensure_open()?;
        self.request_end(sink, at).await;
        Ok(())
    }

    /// A participant message, while the session waits for the participant.
    pub(super) async fn post_message(
        &mut self,
        sink: &EventSink<Self>,
        c: cmd::PostMessage,
    ) -> Result<(), SessionError> {
        if !self.fresh_message(&c)? {
            return Ok(());
        }
        // A message while a widget waits, or while the interviewer holds the turn, would
        // advance nothing: it is refused, naming the widget or the status.
        self.ensure_no_pending()?;
        self.ensure_status(&[SessionStatus::WaitingForUser])?;
        self.record_message(sink, c).await
    }

    /// A participant message right after the participant's own answer, before the interviewer
    /// takes the turn (the second half of [`Self::submit_then_post_message`]).
    async fn message_after_answer(
        &mut self,
        sink: &EventSink<Self>,
        c: cmd::PostMessage,
    ) -> Result<(), SessionError> {
        if !self.fresh_message(&c)? {
            return Ok(());
        }
        if !(self.turns.message_may_follow() && self.status == SessionStatus::Active) {
            return Err(SessionError::InvalidState {
                status: self.status,
            });
        }
        self.record_message(sink, c).await
    }

    /// Whether the message is new to an open session. A retry of one accepted before is not:
    /// the first answer stands and nothing is written. The same id with other text is a
    /// client's mistake, said plainly.
    fn fresh_message(&self, c: &cmd::PostMessage) -> Result<bool, SessionError> {
        match self.turn_ids.get(&c.turn_id) {
            None => self.ensure_open().map(|()| true),
            Some(digest)
                if digest.as_deref() == Some(&crate::hash::sha256_hex(c.content.as_bytes())) =>
            {
                Ok(false)
            }
            Some(_) => Err(SessionError::IdempotencyKeyReused {
                client_message_id: c.client_message_id.clone(),
            }),
        }
    }

    /// Writes a message the session may take now: its words, an end wish said in them, and the
    /// interviewer's turn.
    async fn record_message(
        &mut self,
        sink: &EventSink<Self>,
        c: cmd::PostMessage,
    ) -> Result<(), SessionError> {
        let cmd::PostMessage {
            turn_id,
            client_message_id,
            content,
            at,
        } = c;
        if content.trim().is_empty() {
            return Err(SessionError::InvalidValue {
                field: "content".into(),
                message: "the message is empty".into(),
            });
        }
        let wish = self.study.as_deref().is_some_and(|s| {
            classify(&content, &s.agent_config.end_phrases) == InputClass::EndIntent
        });
        let body = EventBody::ParticipantMessageCreated {
            turn_id,
            client_message_id,
            content,
        };
        self.emit(sink, body, at).await;
        // A sentence that asks for the end (`input_class`) is the participant's wish like an end
        // phrase: recorded as such, in the log, in the same commit.
        if wish && !self.end_requested && self.interviewing() {
            self.emit(sink, EventBody::EndRequested {}, at).await;
        }
        self.change_status(sink, SessionStatus::Active, at).await;
        Ok(())
    }

    /// A participant answers (or skips) the pending widget.
    // Long by design: the steps of one command in order: every check first (open, not answered, a
    // bounded context, the pending widget, a valid value), then its events in the order they are
    // stored; split, it would be harder to see that nothing is written before every check passed.
    pub(super) async fn submit_interaction(
        &mut self,
        sink: &EventSink<Self>,
        c: cmd::SubmitInteraction,
    ) -> Result<(), SessionError> {
        let cmd::SubmitInteraction {
            interaction_id,
            turn_id,
            status,
            value,
            client_context,
            at,
        } = c;
        self.ensure_open()?;
        if self.answered.contains(&interaction_id) {
            return Err(SessionError::InteractionAlreadyAnswered { interaction_id });
        }
        // Whatever a client sends along is kept with the answer until erasure: bounded.
        if client_context
            .as_ref()
            .is_some_and(|c| c.to_string().len() > MAX_CLIENT_CONTEXT_BYTES)
        {
            return Err(SessionError::InvalidValue {
                field: "client_context".into(),
                message: format!(
                    "client_context holds at most {MAX_CLIENT_CONTEXT_BYTES} bytes of JSON"
                ),
            });
        }
        let pending = match &self.pending {
            Some(p) if p.interaction_id == interaction_id => p,
            _ => return Err(SessionError::InteractionNotFound { interaction_id }),
        };
        let value = match status {
            SubmitStatus::Submitted => {
                let value = value.ok_or_else(|| SessionError::InvalidValue {
                    field: "value".into(),
                    message: "an answer is needed (or skip the question)".into(),
                })?;
                pending
                    .kind
                    .check_value(&value)
                    .map_err(|message| SessionError::InvalidValue {
                        field: "value".into(),
                        message,
                    })?;
                Some(value)
            }
            SubmitStatus::Skipped => None,
        };
        let consent_version = match &pending.kind {
            InteractionKind::Consent {
                consent_version, ..
            } => Some(consent_version.clone()),
            _ => None,
        };
        let tool_call_id = pending.tool_call_id.clone();
        let tool_result = json!({ "status": status, "value": value });
        let accepted = value
            .as_ref()
            .and_then(|v| v.get("accepted"))
            .and_then(|a| a.as_bool());
        let submitted = EventBody::InteractionSubmitted {
            interaction_id,
            turn_id,
            status,
            value,
            client_context,
        };
        self.emit(sink, submitted, at).await;
        self.emit(
            sink,
            EventBody::ToolCallCompleted {
                tool_call_id,
                tool_result,
            },
            at,
        )
        .await;
        if let Some(consent_version) = consent_version {
            // Skipping the consent panel is not consent.
            let accepted = accepted.unwrap_or(false);
            self.emit(
                sink,
                EventBody::ConsentRecorded {
                    accepted,
                    consent_version,
                },
                at,
            )
            .await;
        }
        self.change_status(sink, SessionStatus::Active, at).await;
        Ok(())
    }

    /// The participant ends the interview. Before the interview proper (consent, screening) the
    /// session is abandoned; during it, questioning stops and the summary is confirmed (a widget
    /// left open is recorded as skipped); at the confirmation step — ending again — it completes
    /// with the summary unconfirmed.
    pub(super) async fn request_end(&mut self, sink: &EventSink<Self>, at: DateTime<Utc>) {
        let reason = ConcludeReason::ParticipantRequestedEnd;
        if self.summary.is_none() && self.end_requested {
            return; // already on its way to the summary
        }
        self.emit(sink, EventBody::EndRequested {}, at).await;
        if !self.interviewing() {
            self.emit(sink, EventBody::SessionAbandoned { reason }, at)
                .await;
            self.change_status(sink, SessionStatus::Abandoned, at).await;
            self.change_phase(sink, Phase::End, at).await;
            return;
        }
        if self.summary.is_some() {
            self.end(sink, reason, at).await;
            return;
        }
        if let Some(pending) = self.pending.clone() {
            let session_id = self.session_id.unwrap_or_default();
            let submitted = EventBody::InteractionSubmitted {
                interaction_id: pending.interaction_id.clone(),
                turn_id: Uuid::new_v5(
                    &session_id,
                    format!("interaction:{}", pending.interaction_id).as_bytes(),
                ),
                status: SubmitStatus::Skipped,
                value: None,
                client_context: Some(json!({ "ended_by_participant": true })),
            };
            self.emit(sink, submitted, at).await;
            let tool_result = json!({ "status": SubmitStatus::Skipped, "value": null });
            let completed = EventBody::ToolCallCompleted {
                tool_call_id: pending.tool_call_id.clone(),
                tool_result,
            };
            self.emit(sink, completed, at).await;
        }
        if self.status != SessionStatus::Active {
            self.change_status(sink, SessionStatus::Active, at).await;
        }
    }
}
