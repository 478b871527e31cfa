//! The `Session` aggregate: the guard every command passes.
//!
//! `handle` checks a command against the state folded from earlier events and writes new
//! events; `apply` folds an event into the state. Each written event is sealed onto the hash
//! chain with the hash of the event before it, so the chain is built here, deterministically,
//! with no I/O. Interviewer decisions are judged in [`decide`].

mod check;
mod coverage;
mod decide;
mod outcome;

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::Aggregate;
use serde::{Deserialize, Serialize};
use serde_json::json;
use uuid::Uuid;

pub use check::check_stream;
pub use outcome::{moves_overview, Contribution, OutcomeFacts};

use crate::commands::SessionCommand;
use crate::decision::{AgentAction, ConcludeReason, ExtractedField};
use crate::error::SessionError;
use crate::events::{EventBody, Phase, SessionEvent, SessionStatus, SubmitStatus};
use crate::hash::GENESIS_HASH;
use crate::interaction::{InteractionKind, InteractionToolCall};
use crate::study::PinnedStudy;
use crate::text;

/// What the session knows about one objective.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectiveProgress {
    pub asked: bool,
    pub answered: bool,
    pub probes: u32,
    pub interaction_rendered: bool,
    /// The participant skipped the objective's widget.
    #[serde(default)]
    pub skipped: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Session {
    session_id: Option<Uuid>,
    status: SessionStatus,
    phase: Phase,
    study: Option<Box<PinnedStudy>>,
    created_at: Option<DateTime<Utc>>,
    turn_count: u32,
    /// Every participant turn, with the SHA-256 of a message's text (a widget answer has none):
    /// a retried message id must carry the same text.
    turn_ids: BTreeMap<Uuid, Option<String>>,
    last_turn_id: Option<Uuid>,
    pending: Option<Box<InteractionToolCall>>,
    answered: BTreeSet<String>,
    open_message: Option<OpenClaim>,
    consent: Option<bool>,
    objectives: BTreeMap<String, ObjectiveProgress>,
    current_objective: Option<String>,
    one_word_streak: u32,
    end_requested: bool,
    fields: BTreeMap<String, ExtractedField>,
    summary: Option<String>,
    summary_confirmed: Option<bool>,
    last_activity_at: Option<DateTime<Utc>>,
    screening_answers: BTreeMap<String, Option<serde_json::Value>>,
    /// The screening verdict, once evaluated.
    screening: Option<bool>,
    /// Participant text matched a safety pattern.
    safety_triggered: bool,
    /// The post-session extraction: its id, when it was claimed, and whether it completed.
    final_extraction: Option<(Uuid, DateTime<Utc>, bool)>,
    last_hash: Option<String>,
    /// The participant has just answered (or skipped) a question of the interview and the
    /// interviewer has not taken the turn yet: one message may follow, as part of the same turn
    /// (AG-UI's "answer in my own words instead": skip the widget, then say it).
    #[serde(default)]
    may_add_message: bool,
    /// Why questioning stopped, as it stood when the summary was proposed (see
    /// [`Session::questioning_may_stop`]); a confirmed summary concludes with it when the reason
    /// proposed then does not hold.
    #[serde(default)]
    stopped_because: Option<ConcludeReason>,
    /// Summaries proposed so far (a re-confirmation after an addition is the second).
    #[serde(default)]
    summaries_proposed: u32,
    /// What the participant added to the latest summary, if the reply was an addition.
    #[serde(default)]
    summary_addition: Option<String>,
    /// An extraction has followed the latest reply to the summary (one is allowed).
    #[serde(default)]
    extracted_since_reply: bool,
    /// A researcher's preview: left out of the study overview.
    #[serde(default)]
    preview: bool,
    /// How the session ended and what its model calls cost (for the study overview).
    #[serde(default)]
    outcome: OutcomeFacts,
}

/// The claim on the utterance being written (`agent.message.started` with no decision yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenClaim {
    pub message_id: Uuid,
    pub run_id: Uuid,
    pub process_id: Option<Uuid>,
    pub at: DateTime<Utc>,
}

/// `at` cut to whole microseconds.
pub fn micros(at: DateTime<Utc>) -> DateTime<Utc> {
    use chrono::Timelike;
    let nanos = at.nanosecond();
    at.with_nanosecond(nanos - nanos % 1_000).unwrap_or(at)
}

/// A claim older than this may be taken over: its run is presumed dead.
pub const CLAIM_TIMEOUT_SECS: i64 = 120;

impl Session {
    /// The session folded from its events, in order.
    pub fn from_events(events: impl IntoIterator<Item = SessionEvent>) -> Self {
        let mut session = Self::default();
        for event in events {
            session.apply(event);
        }
        session
    }

    pub fn status(&self) -> SessionStatus {
        self.status
    }

    pub fn phase(&self) -> Phase {
        self.phase
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

    pub fn consent(&self) -> Option<bool> {
        self.consent
    }

    pub fn objective(&self, id: &str) -> ObjectiveProgress {
        self.objectives.get(id).cloned().unwrap_or_default()
    }

    pub fn current_objective(&self) -> Option<&str> {
        self.current_objective.as_deref()
    }

    /// The open claim on the next utterance, if a run holds one.
    pub fn open_claim(&self) -> Option<&OpenClaim> {
        self.open_message.as_ref()
    }

    pub fn last_turn_id(&self) -> Option<Uuid> {
        self.last_turn_id
    }

    pub fn fields(&self) -> &BTreeMap<String, ExtractedField> {
        &self.fields
    }

    pub fn summary(&self) -> Option<&str> {
        self.summary.as_deref()
    }

    /// The participant's addition to the latest summary (an unconfirmed reply that is not an
    /// end intent).
    pub fn summary_addition(&self) -> Option<&str> {
        self.summary_addition.as_deref()
    }

    pub fn summary_confirmed(&self) -> Option<bool> {
        self.summary_confirmed
    }

    pub fn end_requested(&self) -> bool {
        self.end_requested
    }

    pub fn one_word_streak(&self) -> u32 {
        self.one_word_streak
    }

    pub fn screening_verdict(&self) -> Option<bool> {
        self.screening
    }

    pub fn screening_answers(&self) -> &BTreeMap<String, Option<serde_json::Value>> {
        &self.screening_answers
    }

    /// The next screening question to ask, once consent is given and until all are answered.
    pub fn next_screening_question(&self) -> Option<&crate::study::ScreeningQuestion> {
        let study = self.study.as_deref()?;
        study
            .study_config
            .screening
            .questions
            .iter()
            .find(|q| !self.screening_answers.contains_key(&q.id))
    }

    /// Screening questions exist, are all answered, and await their verdict.
    pub fn screening_awaits_verdict(&self) -> bool {
        let has_questions = self
            .study
            .as_deref()
            .is_some_and(|s| !s.study_config.screening.questions.is_empty());
        has_questions && self.screening.is_none() && self.next_screening_question().is_none()
    }

    pub fn safety_triggered(&self) -> bool {
        self.safety_triggered
    }

    /// Consent given, screening passed (or none), no safety stop: the interview proper.
    pub fn interviewing(&self) -> bool {
        self.consent == Some(true)
            && !self.safety_triggered
            && self.screening != Some(false)
            && self.next_screening_question().is_none()
            && !self.screening_awaits_verdict()
    }

    /// Whether the post-session extraction has completed.
    pub fn final_extraction_done(&self) -> bool {
        self.final_extraction.is_some_and(|(_, _, done)| done)
    }

    pub fn created_at(&self) -> Option<DateTime<Utc>> {
        self.created_at
    }

    /// Hash of the last applied event (the chain head).
    pub fn head_hash(&self) -> &str {
        self.last_hash.as_deref().unwrap_or(GENESIS_HASH)
    }

    /// The time an event is stamped with: the command's time to the microsecond (what both
    /// stores keep, so a stored row and the row rebuilt from the log agree), and never earlier
    /// than the session's last event — commands decided on a stale clock reading, or a slower
    /// process's clock, cannot make time run backwards within a session.
    pub fn event_time(&self, at: DateTime<Utc>) -> DateTime<Utc> {
        let at = micros(at);
        // Every applied event sets `last_activity_at`: it is the last event's time.
        match self.last_activity_at {
            Some(last) if last > at => last,
            _ => at,
        }
    }

    async fn emit(&mut self, sink: &EventSink<Self>, body: EventBody, at: DateTime<Utc>) {
        let at = self.event_time(at);
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

    async fn change_phase(&mut self, sink: &EventSink<Self>, to: Phase, at: DateTime<Utc>) {
        if self.phase != to {
            let from = self.phase;
            self.emit(sink, EventBody::PhaseChanged { from, to }, at)
                .await;
        }
    }

    /// Ends the session: the closing words, then `session.completed` or `session.abandoned`.
    async fn end(&mut self, sink: &EventSink<Self>, reason: ConcludeReason, at: DateTime<Utc>) {
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

    /// The participant ends the interview. Before the interview proper (consent, screening) the
    /// session is abandoned; during it, questioning stops and the summary is confirmed (a widget
    /// left open is recorded as skipped); at the confirmation step — ending again — it completes
    /// with the summary unconfirmed.
    async fn request_end(&mut self, sink: &EventSink<Self>, at: DateTime<Utc>) {
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

    /// Whether participant input now is a turn (`docs/interview-flow.md`): consent, screening answers and the
    /// reply to the summary are not.
    fn is_turn(&self) -> bool {
        self.phase.counts_turns()
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
                self.post_message(sink, turn_id, client_message_id, content, false, at)
                    .await?
            }
            SessionCommand::StartAgentMessage {
                message_id,
                run_id,
                process_id,
                takes_over,
                at,
            } => {
                self.ensure_open()?;
                self.ensure_status(&[Active])?;
                let mut replaced = None;
                if let Some(open) = self.open_message {
                    // Another run holds the turn, unless its claim is stale or its process is
                    // known to be dead.
                    let stale = (at - open.at).num_seconds() >= CLAIM_TIMEOUT_SECS;
                    if !stale && takes_over != Some(open.run_id) {
                        return Err(SessionError::InvalidState {
                            status: self.status,
                        });
                    }
                    replaced = Some(open.run_id);
                }
                self.emit(
                    sink,
                    EventBody::AgentMessageStarted {
                        message_id,
                        run_id,
                        process_id,
                        takes_over: replaced,
                    },
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
                if self.open_message.map(|c| c.message_id) != Some(message_id) {
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
                self.render(sink, interaction, at).await?;
            }
            SessionCommand::Decide {
                message_id,
                interaction_id,
                proposal,
                at,
            } => {
                self.ensure_open()?;
                self.ensure_no_pending()?;
                self.ensure_status(&[Active])?;
                if self.open_message.map(|c| c.message_id) != Some(message_id) {
                    return Err(SessionError::InvalidState {
                        status: self.status,
                    });
                }
                let judged = self.judge(&proposal, interaction_id, at)?;
                self.carry_out(sink, message_id, *proposal, judged, at)
                    .await?;
            }
            SessionCommand::RecordExtraction {
                message_id,
                proposal,
                at,
            } => {
                self.ensure_open()?;
                self.ensure_status(&[Active])?;
                if self.open_message.map(|c| c.message_id) != Some(message_id) {
                    return Err(SessionError::InvalidState {
                        status: self.status,
                    });
                }
                self.record_extraction(sink, message_id, *proposal, at)
                    .await?;
            }
            SessionCommand::SubmitInteraction {
                interaction_id,
                turn_id,
                status,
                value,
                client_context,
                at,
            } => {
                self.submit_interaction(
                    sink,
                    interaction_id,
                    turn_id,
                    status,
                    value,
                    client_context,
                    at,
                )
                .await?
            }
            SessionCommand::SubmitThenPostMessage {
                interaction_id,
                turn_id,
                status,
                value,
                client_context,
                message,
                at,
            } => {
                self.submit_interaction(
                    sink,
                    interaction_id,
                    turn_id,
                    status,
                    value,
                    client_context,
                    at,
                )
                .await?;
                self.post_message(
                    sink,
                    message.turn_id,
                    message.client_message_id,
                    message.content,
                    true,
                    at,
                )
                .await?
            }
            SessionCommand::EvaluateScreening {
                eligible,
                rationale,
                decided_by,
                at,
            } => {
                self.ensure_open()?;
                if self.consent != Some(true) || !self.screening_awaits_verdict() {
                    return Err(SessionError::InvalidState {
                        status: self.status,
                    });
                }
                if rationale.trim().is_empty() {
                    return Err(SessionError::InvalidValue {
                        field: "rationale".into(),
                        message: "a screening verdict needs a rationale".into(),
                    });
                }
                let answers = self.screening_answers.clone();
                let body = EventBody::ScreeningEvaluated {
                    eligible,
                    rationale,
                    answers,
                    decided_by,
                };
                self.emit(sink, body, at).await;
            }
            SessionCommand::ConfirmSummary {
                confirmed,
                addition,
                at,
            } => {
                self.ensure_open()?;
                // One reply per proposed summary: a second run classifying the same reply is
                // refused (a new proposal resets this).
                if self.summary.is_none() || self.summary_confirmed.is_some() {
                    return Err(SessionError::InvalidState {
                        status: self.status,
                    });
                }
                self.emit(
                    sink,
                    EventBody::SummaryConfirmed {
                        confirmed,
                        addition,
                    },
                    at,
                )
                .await;
            }
            SessionCommand::StartFinalExtraction { extraction_id, at } => {
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
                    Some((_, claimed, false))
                        if (at - claimed).num_seconds() < CLAIM_TIMEOUT_SECS =>
                    {
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
            }
            SessionCommand::CompleteFinalExtraction {
                extraction_id,
                fields,
                decided_by,
                at,
            } => {
                match self.final_extraction {
                    Some((id, _, false)) if id == extraction_id => {}
                    _ => {
                        return Err(SessionError::InvalidState {
                            status: self.status,
                        })
                    }
                }
                let known = |id: &str| {
                    self.study
                        .as_deref()
                        .is_some_and(|s| s.output_schema.fields.iter().any(|f| f.id == id))
                };
                if let Some(bad) = fields
                    .iter()
                    .find(|f| !known(&f.field_id) || !(0.0..=1.0).contains(&f.confidence))
                {
                    return Err(SessionError::InvalidValue {
                        field: "fields".into(),
                        message: format!(
                            "{:?} is not an output field with a confidence in [0, 1]",
                            bad.field_id
                        ),
                    });
                }
                let body = EventBody::ExtractionCompleted {
                    extraction_id,
                    fields,
                    is_final: true,
                    decided_by,
                };
                self.emit(sink, body, at).await;
                self.change_phase(sink, Phase::End, at).await;
            }
            SessionCommand::RecordError {
                source,
                code,
                message,
                at,
            } => {
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
            }
            SessionCommand::Complete {
                summary,
                summary_confirmed,
                reason,
                at,
            } => {
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
            }
            SessionCommand::Expire { at } => {
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
            }
            SessionCommand::RequestEnd { at } => {
                self.ensure_open()?;
                self.request_end(sink, at).await;
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
        // A message that follows an answer in the same turn (AG-UI's "in my own words") is part
        // of that turn, not a turn of its own.
        let follows_answer = self.may_add_message;
        // Only the events a submission itself writes keep the way open for a following message.
        if !matches!(
            event.body,
            EventBody::ToolCallCompleted { .. }
                | EventBody::ConsentRecorded { .. }
                | EventBody::StatusChanged { .. }
        ) {
            self.may_add_message = false;
        }
        self.outcome.note(self.phase, &event.body, event.at);
        match event.body {
            EventBody::SessionCreated {
                session_id,
                study,
                preview,
                ..
            } => {
                self.preview = preview;
                self.session_id = Some(session_id);
                self.study = Some(study);
                self.created_at = Some(event.at);
            }
            EventBody::StatusChanged { to, .. } => {
                self.status = to;
                if to.is_terminal() {
                    self.pending = None;
                    self.open_message = None;
                }
            }
            EventBody::PhaseChanged { to, .. } => self.phase = to,
            EventBody::ParticipantMessageCreated {
                turn_id, content, ..
            } => {
                self.turn_ids
                    .insert(turn_id, Some(crate::hash::sha256_hex(content.as_bytes())));
                self.last_turn_id = Some(turn_id);
                if self.is_turn() && !follows_answer {
                    self.turn_count += 1;
                    if let Some(objective) = &self.current_objective {
                        self.objectives
                            .entry(objective.clone())
                            .or_default()
                            .answered = true;
                    }
                    self.one_word_streak = if text::is_one_word(&content) {
                        self.one_word_streak + 1
                    } else {
                        0
                    };
                }
                let study = self.study.as_deref();
                if study
                    .is_some_and(|s| text::matches_phrase(&content, &s.agent_config.end_phrases))
                {
                    self.end_requested = true;
                }
                if study
                    .is_some_and(|s| text::matches_any(&content, &s.agent_config.safety_patterns))
                {
                    self.safety_triggered = true;
                }
            }
            EventBody::AgentMessageStarted {
                message_id,
                run_id,
                process_id,
                ..
            } => {
                self.open_message = Some(OpenClaim {
                    message_id,
                    run_id,
                    process_id,
                    at: event.at,
                })
            }
            EventBody::AgentMessageCompleted { .. } | EventBody::DecisionRecorded { .. } => {
                let mut keeps_claim = false;
                if let EventBody::DecisionRecorded {
                    selected_action,
                    alongside,
                    ..
                } = &event.body
                {
                    self.record_action(selected_action);
                    keeps_claim = alongside.is_some();
                }
                if !keeps_claim {
                    self.open_message = None;
                }
            }
            EventBody::InteractionRendered { interaction } => self.pending = Some(interaction),
            EventBody::InteractionSubmitted {
                interaction_id,
                turn_id,
                value,
                status,
                ..
            } => {
                let pending = self.pending.take();
                if let (SubmitStatus::Skipped, Some(objective)) = (
                    status,
                    pending.as_ref().and_then(|p| p.objective_id.clone()),
                ) {
                    self.objectives.entry(objective).or_default().skipped = true;
                }
                if let Some(question) = pending
                    .as_ref()
                    .and_then(|p| p.screening_question_id.clone())
                {
                    self.screening_answers.insert(question, value);
                }
                let counts =
                    pending.as_ref().is_some_and(|p| p.type_name() != "consent") && self.is_turn();
                self.may_add_message = counts;
                if counts {
                    self.turn_count += 1;
                    self.turn_ids.insert(turn_id, None);
                    self.last_turn_id = Some(turn_id);
                    if let Some(objective) = pending.and_then(|p| p.objective_id) {
                        self.objectives.entry(objective).or_default().answered = true;
                    }
                }
                self.answered.insert(interaction_id);
            }
            EventBody::ConsentRecorded { accepted, .. } => self.consent = Some(accepted),
            EventBody::ScreeningEvaluated { eligible, .. } => self.screening = Some(eligible),
            EventBody::ExtractionStarted {
                extraction_id,
                is_final: true,
            } => {
                self.final_extraction = Some((extraction_id, event.at, false));
            }
            EventBody::ExtractionCompleted {
                fields, is_final, ..
            } => {
                if is_final {
                    if let Some(f) = self.final_extraction.as_mut() {
                        f.2 = true;
                    }
                } else if self.summary_confirmed.is_some() {
                    self.extracted_since_reply = true;
                }
                for field in fields {
                    self.fields.insert(field.field_id.clone(), field);
                }
            }
            EventBody::SummaryProposed { summary } => {
                self.stopped_because = self
                    .stopped_because
                    .or_else(|| self.questioning_may_stop(event.at));
                self.summaries_proposed += 1;
                self.summary = Some(summary);
                self.summary_confirmed = None;
            }
            EventBody::SummaryConfirmed {
                confirmed,
                addition,
            } => {
                self.summary_confirmed = Some(confirmed);
                self.summary_addition = addition;
                self.extracted_since_reply = false;
            }
            EventBody::ToolCallCreated { .. }
            | EventBody::ToolCallCompleted { .. }
            | EventBody::ExtractionStarted { .. }
            | EventBody::ErrorRecorded { .. }
            | EventBody::SessionCompleted { .. }
            | EventBody::SessionAbandoned { .. } => {}
            EventBody::EndRequested {} => self.end_requested = true,
        }
        self.last_activity_at = Some(event.at);
        self.last_hash = Some(event.hash);
    }
}

impl Session {
    /// A participant answers (or skips) the pending widget.
    #[allow(clippy::too_many_arguments)]
    async fn submit_interaction(
        &mut self,
        sink: &EventSink<Self>,
        interaction_id: String,
        turn_id: Uuid,
        status: SubmitStatus,
        value: Option<serde_json::Value>,
        client_context: Option<serde_json::Value>,
        at: DateTime<Utc>,
    ) -> Result<(), SessionError> {
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

    /// A participant message: while the session waits for the participant, or (`after_answer`)
    /// right after the participant's own answer, before the interviewer takes the turn.
    async fn post_message(
        &mut self,
        sink: &EventSink<Self>,
        turn_id: Uuid,
        client_message_id: Option<String>,
        content: String,
        after_answer: bool,
        at: DateTime<Utc>,
    ) -> Result<(), SessionError> {
        if let Some(digest) = self.turn_ids.get(&turn_id) {
            // A retry of an accepted message: the first answer stands, nothing is written. The
            // same id with other text is a client's mistake, said plainly.
            if digest.as_deref() == Some(&crate::hash::sha256_hex(content.as_bytes())) {
                return Ok(());
            }
            return Err(SessionError::IdempotencyKeyReused { client_message_id });
        }
        self.ensure_open()?;
        if after_answer {
            if !(self.may_add_message && self.status == SessionStatus::Active) {
                return Err(SessionError::InvalidState {
                    status: self.status,
                });
            }
        } else {
            // A message while a widget waits, or while the interviewer holds the turn, would
            // advance nothing: it is refused, naming the widget or the status.
            self.ensure_no_pending()?;
            self.ensure_status(&[SessionStatus::WaitingForUser])?;
        }
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
        self.change_status(sink, SessionStatus::Active, at).await;
        Ok(())
    }

    fn record_action(&mut self, action: &AgentAction) {
        match action {
            AgentAction::AskQuestion { objective_id } => {
                self.objectives
                    .entry(objective_id.clone())
                    .or_default()
                    .asked = true;
                self.current_objective = Some(objective_id.clone());
            }
            AgentAction::Probe { objective_id, .. } => {
                self.objectives
                    .entry(objective_id.clone())
                    .or_default()
                    .probes += 1;
                self.current_objective = Some(objective_id.clone());
            }
            AgentAction::RenderInteraction {
                objective_id: Some(objective_id),
            } => {
                self.objectives
                    .entry(objective_id.clone())
                    .or_default()
                    .interaction_rendered = true;
                self.current_objective = Some(objective_id.clone());
            }
            _ => {}
        }
    }

    /// Shows a widget: the tool call, the rendered interaction, and the wait for its answer.
    async fn render(
        &mut self,
        sink: &EventSink<Self>,
        interaction: Box<InteractionToolCall>,
        at: DateTime<Utc>,
    ) -> Result<(), SessionError> {
        if self.answered.contains(&interaction.interaction_id) {
            return Err(SessionError::InteractionAlreadyAnswered {
                interaction_id: interaction.interaction_id.clone(),
            });
        }
        let tool_input = serde_json::to_value(&interaction).expect("interactions serialize");
        let created = EventBody::ToolCallCreated {
            tool_call_id: interaction.tool_call_id.clone(),
            tool_name: "render_interaction".into(),
            tool_input,
        };
        self.emit(sink, created, at).await;
        self.emit(sink, EventBody::InteractionRendered { interaction }, at)
            .await;
        self.change_status(sink, SessionStatus::WaitingForTool, at)
            .await;
        Ok(())
    }
}

#[cfg(test)]
mod decide_tests;
#[cfg(test)]
pub(crate) mod tests;
