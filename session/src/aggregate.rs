//! The `Session` aggregate: the guard every command passes.
//!
//! `handle` checks a command against the state folded from earlier events and writes new
//! events; `apply` folds an event into the state. Each written event is sealed onto the hash
//! chain with the hash of the event before it, so the chain is built here, deterministically,
//! with no I/O.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::Aggregate;
use serde::{Deserialize, Serialize};
use serde_json::json;
use uuid::Uuid;

use crate::commands::SessionCommand;
use crate::error::SessionError;
use crate::events::{EventBody, SessionEvent, SessionStatus, SubmitStatus};
use crate::hash::GENESIS_HASH;
use crate::interaction::InteractionToolCall;
use crate::study::PinnedStudy;

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Session {
    session_id: Option<Uuid>,
    status: SessionStatus,
    study: Option<Box<PinnedStudy>>,
    turn_count: u32,
    turn_ids: BTreeSet<Uuid>,
    pending: Option<Box<InteractionToolCall>>,
    answered: BTreeSet<String>,
    open_message: Option<Uuid>,
    last_hash: Option<String>,
}

impl Session {
    pub fn status(&self) -> SessionStatus {
        self.status
    }

    pub fn turn_count(&self) -> u32 {
        self.turn_count
    }

    pub fn study(&self) -> Option<&PinnedStudy> {
        self.study.as_deref()
    }

    pub fn pending_interaction(&self) -> Option<&InteractionToolCall> {
        self.pending.as_deref()
    }

    /// Hash of the last applied event (the chain head).
    pub fn head_hash(&self) -> &str {
        self.last_hash.as_deref().unwrap_or(GENESIS_HASH)
    }

    async fn emit(&mut self, sink: &EventSink<Self>, body: EventBody, at: DateTime<Utc>) {
        let event = SessionEvent::seal(body, at, self.head_hash());
        sink.write(event, self).await;
    }

    async fn change_status(
        &mut self,
        sink: &EventSink<Self>,
        to: SessionStatus,
        at: DateTime<Utc>,
    ) {
        if self.status != to {
            debug_assert!(self.status.can_become(to), "{:?} -> {to:?}", self.status);
            let from = self.status;
            self.emit(sink, EventBody::StatusChanged { from, to }, at)
                .await;
        }
    }

    /// Refuses commands on a session that does not exist or has ended.
    fn ensure_open(&self) -> Result<(), SessionError> {
        if self.session_id.is_none() {
            return Err(SessionError::NotCreated);
        }
        if self.status.is_terminal() {
            return Err(SessionError::Terminal {
                status: self.status,
            });
        }
        Ok(())
    }

    fn ensure_no_pending(&self) -> Result<(), SessionError> {
        match &self.pending {
            Some(p) => Err(SessionError::InteractionPending {
                interaction_id: p.interaction_id.clone(),
            }),
            None => Ok(()),
        }
    }

    fn ensure_status(&self, allowed: &[SessionStatus]) -> Result<(), SessionError> {
        if allowed.contains(&self.status) {
            Ok(())
        } else {
            Err(SessionError::InvalidState {
                status: self.status,
            })
        }
    }
}

impl Aggregate for Session {
    const TYPE: &'static str = crate::AGGREGATE_TYPE;
    type Command = SessionCommand;
    type Event = SessionEvent;
    type Error = SessionError;
    type Services = ();

    async fn handle(
        &mut self,
        command: Self::Command,
        _services: &Self::Services,
        sink: &EventSink<Self>,
    ) -> Result<(), Self::Error> {
        use SessionStatus::*;
        match command {
            SessionCommand::Create {
                session_id,
                study,
                participant_ref,
                participant_token_sha256,
                preview,
                at,
            } => {
                if self.session_id.is_some() {
                    return Err(SessionError::AlreadyCreated);
                }
                let body = EventBody::SessionCreated {
                    session_id,
                    study,
                    participant_ref,
                    participant_token_sha256,
                    preview,
                };
                self.emit(sink, body, at).await;
            }
            SessionCommand::Start { at } => {
                self.ensure_open()?;
                self.ensure_status(&[Created])?;
                self.change_status(sink, Active, at).await;
            }
            SessionCommand::PostMessage {
                turn_id,
                client_message_id,
                content,
                at,
            } => {
                if self.turn_ids.contains(&turn_id) {
                    // A retry of an accepted message: the first answer stands, nothing is written.
                    return Ok(());
                }
                self.ensure_open()?;
                self.ensure_no_pending()?;
                if content.trim().is_empty() {
                    return Err(SessionError::InvalidValue {
                        field: "content".into(),
                        message: "the message is empty".into(),
                    });
                }
                let body = EventBody::ParticipantMessageCreated {
                    turn_id,
                    client_message_id,
                    content,
                };
                self.emit(sink, body, at).await;
                self.change_status(sink, Active, at).await;
            }
            SessionCommand::StartAgentMessage {
                message_id,
                run_id,
                at,
            } => {
                self.ensure_open()?;
                self.ensure_status(&[Active])?;
                if self.open_message.is_some() {
                    return Err(SessionError::InvalidState {
                        status: self.status,
                    });
                }
                self.emit(
                    sink,
                    EventBody::AgentMessageStarted { message_id, run_id },
                    at,
                )
                .await;
            }
            SessionCommand::CompleteAgentMessage {
                message_id,
                content,
                await_reply,
                at,
            } => {
                self.ensure_open()?;
                if self.open_message != Some(message_id) {
                    return Err(SessionError::InvalidState {
                        status: self.status,
                    });
                }
                self.emit(
                    sink,
                    EventBody::AgentMessageCompleted {
                        message_id,
                        content,
                    },
                    at,
                )
                .await;
                if await_reply {
                    self.change_status(sink, WaitingForUser, at).await;
                }
            }
            SessionCommand::RenderInteraction { interaction, at } => {
                self.ensure_open()?;
                self.ensure_no_pending()?;
                self.ensure_status(&[Active])?;
                if self.answered.contains(&interaction.interaction_id) {
                    return Err(SessionError::InteractionAlreadyAnswered {
                        interaction_id: interaction.interaction_id.clone(),
                    });
                }
                let tool_input =
                    serde_json::to_value(&interaction).expect("interactions serialize");
                let created = EventBody::ToolCallCreated {
                    tool_call_id: interaction.tool_call_id.clone(),
                    tool_name: "render_interaction".into(),
                    tool_input,
                };
                self.emit(sink, created, at).await;
                self.emit(sink, EventBody::InteractionRendered { interaction }, at)
                    .await;
                self.change_status(sink, WaitingForTool, at).await;
            }
            SessionCommand::SubmitInteraction {
                interaction_id,
                turn_id,
                status,
                value,
                client_context,
                at,
            } => {
                self.ensure_open()?;
                if self.answered.contains(&interaction_id) {
                    return Err(SessionError::InteractionAlreadyAnswered { interaction_id });
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
                        pending.kind.check_value(&value).map_err(|message| {
                            SessionError::InvalidValue {
                                field: "value".into(),
                                message,
                            }
                        })?;
                        Some(value)
                    }
                    SubmitStatus::Skipped => None,
                };
                let tool_call_id = pending.tool_call_id.clone();
                let tool_result = json!({ "status": status, "value": value });
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
                self.change_status(sink, Active, at).await;
            }
            SessionCommand::Complete {
                summary,
                summary_confirmed,
                at,
            } => {
                self.ensure_open()?;
                self.ensure_status(&[Active, WaitingForUser, WaitingForTool])?;
                let body = EventBody::SessionCompleted {
                    summary,
                    summary_confirmed,
                };
                self.emit(sink, body, at).await;
                self.change_status(sink, Completed, at).await;
            }
            SessionCommand::Abandon { reason, at } => {
                self.ensure_open()?;
                self.emit(sink, EventBody::SessionAbandoned { reason }, at)
                    .await;
                self.change_status(sink, Abandoned, at).await;
            }
        }
        Ok(())
    }

    fn apply(&mut self, event: Self::Event) {
        match event.body {
            EventBody::SessionCreated {
                session_id, study, ..
            } => {
                self.session_id = Some(session_id);
                self.study = Some(study);
            }
            EventBody::StatusChanged { to, .. } => {
                self.status = to;
                if to.is_terminal() {
                    self.pending = None;
                    self.open_message = None;
                }
            }
            EventBody::ParticipantMessageCreated { turn_id, .. } => {
                self.turn_ids.insert(turn_id);
                self.turn_count += 1;
            }
            EventBody::AgentMessageStarted { message_id, .. } => {
                self.open_message = Some(message_id)
            }
            EventBody::AgentMessageCompleted { .. } => self.open_message = None,
            EventBody::InteractionRendered { interaction } => self.pending = Some(interaction),
            EventBody::InteractionSubmitted {
                interaction_id,
                turn_id,
                ..
            } => {
                let was_consent = self
                    .pending
                    .take()
                    .is_some_and(|p| p.type_name() == "consent");
                if !was_consent {
                    self.turn_count += 1;
                    self.turn_ids.insert(turn_id);
                }
                self.answered.insert(interaction_id);
            }
            EventBody::ToolCallCreated { .. }
            | EventBody::ToolCallCompleted { .. }
            | EventBody::SessionCompleted { .. }
            | EventBody::SessionAbandoned { .. } => {}
        }
        self.last_hash = Some(event.hash);
    }
}

/// Re-checks a stored stream against the aggregate's rules, event by event: it starts with
/// `session.created`, every status change follows the status machine from the current status,
/// at most one interaction is pending, answers match the pending interaction, nothing but
/// system work follows a terminal status, and time never runs backwards. Returns every problem.
pub fn check_stream(events: &[SessionEvent]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut state = Session::default();
    let mut last_at: Option<DateTime<Utc>> = None;
    for (i, event) in events.iter().enumerate() {
        let seq = i + 1;
        let mut problem =
            |p: String| problems.push(format!("event {seq} ({}): {p}", event.body.event_type()));
        let created = state.session_id.is_some();
        match &event.body {
            EventBody::SessionCreated { .. } if created => {
                problem("a second session.created".into())
            }
            EventBody::SessionCreated { .. } => {}
            _ if !created => problem("the stream does not start with session.created".into()),
            _ if state.status.is_terminal() => {
                problem(format!("after the session was {}", state.status.as_str()))
            }
            EventBody::StatusChanged { from, to } => {
                if *from != state.status {
                    problem(format!(
                        "says the status was {} but it was {}",
                        from.as_str(),
                        state.status.as_str()
                    ));
                }
                if !state.status.can_become(*to) {
                    problem(format!(
                        "{} -> {} is not a valid transition",
                        state.status.as_str(),
                        to.as_str()
                    ));
                }
            }
            EventBody::InteractionRendered { interaction } => {
                if let Some(p) = &state.pending {
                    problem(format!(
                        "{} rendered while {} was pending",
                        interaction.interaction_id, p.interaction_id
                    ));
                }
            }
            EventBody::InteractionSubmitted { interaction_id, .. }
                if state.pending.as_ref().map(|p| &p.interaction_id) != Some(interaction_id) =>
            {
                problem(format!(
                    "{interaction_id} answered but it was not the pending interaction"
                ));
            }
            EventBody::ParticipantMessageCreated { .. } => {
                if let Some(p) = &state.pending {
                    problem(format!(
                        "a message accepted while {} was pending",
                        p.interaction_id
                    ));
                }
            }
            _ => {}
        }
        if last_at.is_some_and(|prev| event.at < prev) {
            problem("its time is earlier than the event before".into());
        }
        last_at = Some(event.at);
        state.apply(event.clone());
    }
    problems
}

#[cfg(test)]
mod tests;
