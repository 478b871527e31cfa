//! The `Session` aggregate: the guard every command passes.
//!
//! `handle` checks a command against the state folded from earlier events and writes new
//! events — one function per command, by who sends it: [`lifecycle`] (created, started, ended
//! by the system), [`participant`], [`interviewer`] (decisions judged in [`judge`], carried out
//! in [`decide`]), [`system`] (the post-session extraction, handled failures); `apply` folds an
//! event into the state ([`fold`]). Each written event is sealed onto the hash chain with the
//! hash of the event before it, so the chain is built here, deterministically, with no I/O. This
//! file keeps the state, what it answers, and the guards and writes every command shares.

mod answers;
mod check;
mod coverage;
mod decide;
mod erase;
mod fold;
mod interviewer;
mod judge;
mod lifecycle;
mod outcome;
mod participant;
mod summary;
mod system;

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::Aggregate;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub use check::check_stream;
pub use judge::{Carried, Judged};
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
    /// Shared, not copied, by every copy of the session (the command side hands one to each
    /// command): a study may be large, and it never changes once pinned.
    study: Option<std::sync::Arc<PinnedStudy>>,
    /// What the salts of its events are derived from (`SessionEvent::seal_with`).
    chain_secret: Option<String>,
    created_at: Option<DateTime<Utc>>,
    /// Turns so far, and whether a message may still join the last one: the participant has
    /// just answered (or skipped) a question of the interview and the interviewer has not taken
    /// the turn yet (AG-UI's "answer in my own words instead": skip the widget, then say it).
    turns: crate::turns::Turns,
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
    /// Events folded so far (an erasure must cover them all).
    #[serde(default)]
    events: u64,
    /// The participant's data was erased: no command is taken any more.
    #[serde(default)]
    erased: bool,
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
    async fn emit(&mut self, sink: &EventSink<Self>, body: EventBody, at: DateTime<Utc>) {
        let at = self.event_time(at);
        // `session.created` brings the secret its own salt is derived from.
        let secret = match &body {
            EventBody::SessionCreated { chain_secret, .. } => chain_secret.clone(),
            _ => self.chain_secret.clone(),
        };
        let event = SessionEvent::seal_with(body, at, self.head_hash(), secret.as_deref());
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
        use SessionCommand as C;
        if self.erased {
            return Err(SessionError::Erased);
        }
        // One function per command, by who sends it: lifecycle.rs, participant.rs,
        // interviewer.rs, system.rs, erase.rs (the guards they share are below).
        match command {
            C::Create(c) => self.create(sink, c).await,
            C::Start(c) => self.start(sink, c).await,
            C::PostMessage(c) => self.post_message(sink, c).await,
            C::StartAgentMessage(c) => self.claim_utterance(sink, c).await,
            C::CompleteAgentMessage(c) => self.complete_utterance(sink, c).await,
            C::RenderInteraction(c) => self.render_interaction(sink, c).await,
            C::Decide(c) => self.decide(sink, c).await,
            C::DecideUnclaimed(c) => self.decide_unclaimed(sink, c).await,
            C::RecordExtraction(c) => self.record_extraction_alongside(sink, c).await,
            C::SubmitInteraction(c) => self.submit_interaction(sink, c).await,
            C::SubmitThenPostMessage(c) => self.submit_then_post_message(sink, c).await,
            C::EvaluateScreening(c) => self.evaluate_screening(sink, c).await,
            C::ConfirmSummary(c) => self.confirm_summary(sink, c).await,
            C::StartFinalExtraction(c) => self.start_final_extraction(sink, c).await,
            C::CompleteFinalExtraction(c) => self.complete_final_extraction(sink, c).await,
            C::RecordError(c) => self.record_error(sink, c).await,
            C::Complete(c) => self.complete(sink, c).await,
            C::Expire(c) => self.expire(sink, c).await,
            C::RequestEnd(c) => self.end_by_participant(sink, c).await,
            C::Abandon(c) => self.abandon(sink, c).await,
            C::RecordErasure(c) => self.record_erasure(sink, c).await,
        }
    }

    fn apply(&mut self, event: Self::Event) {
        self.fold(event);
    }
}

#[cfg(test)]
mod decide_tests;
#[cfg(test)]
mod notice_tests;
#[cfg(test)]
pub(crate) mod tests;
