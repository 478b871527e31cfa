//! Commands on a session. Who may send which is decided by the HTTP layer; whether it is allowed
//! now is decided by the aggregate. Every command carries its own time (`at`), because the
//! aggregate never reads a clock.

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use crate::decision::Proposal;
use crate::events::{ConcludeReason, SubmitStatus};
use crate::interaction::InteractionToolCall;
use crate::study::PinnedStudy;

/// A command's name (`submit_interaction`) is its variant's, in snake case (`strum`): the
/// metric and trace label.
#[derive(Debug, Clone, PartialEq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum SessionCommand {
    /// A participant opens the public link (FR-04-1); pins the study (FR-04-2).
    Create(Create),
    /// The interviewer takes the session up: `created → active`.
    Start(Start),
    /// A participant message (FR-04-6). `turn_id` is derived from `client_message_id` when one is
    /// given, so a retry is recognised and writes nothing.
    PostMessage(PostMessage),
    /// The participant ends the interview (`POST …/end`).
    RequestEnd(RequestEnd),
    /// The interviewer claims the next utterance; only one may be open at a time. An open claim
    /// is replaced only when it is stale, or when `takes_over` names its run: the harness found
    /// that run's process dead (that check is I/O, so it happens outside the aggregate).
    StartAgentMessage(StartAgentMessage),
    /// The interviewer's utterance is complete; with `await_reply` the session waits for the
    /// participant.
    CompleteAgentMessage(CompleteAgentMessage),
    /// Show a widget and wait for its answer (FR-04-16/17).
    RenderInteraction(RenderInteraction),
    /// A participant answers (or skips) the pending widget.
    SubmitInteraction(SubmitInteraction),
    /// The same, followed by a participant message in the same turn, before the interviewer
    /// takes it up — AG-UI's resume with a new user message ("answer in my own words instead":
    /// skip the widget, then say it). Both are written, in that order, or neither.
    SubmitThenPostMessage(SubmitThenPostMessage),
    /// An interviewer decision, under the claim `message_id` (see `StartAgentMessage`). The
    /// aggregate judges it: a decision that breaks a rule is rewritten (`proposed_action` kept)
    /// or refused. `interaction_id` names the widget a `render_interaction` shows.
    Decide(Decide),
    /// A decision the rules took, with no claim open: nothing is streamed before it is
    /// committed, so its commit is its own lock. One that shows words writes its claim first, in
    /// the same commit (`agent.message.started` naming `run_id` and `process_id`), and its words
    /// reach this process's live subscribers once it is committed (`src/live/stream_hub.rs`); one that shows
    /// none (a widget with no words before it, an extraction) writes no claim. It is taken only
    /// on the state its run weighed — `after_hash` is that state's chain head; anything
    /// committed since (a participant's added words, another run's step) refuses it — and only
    /// as proposed (a decision the guards would rewrite is refused). `message_id` names the
    /// utterance and seeds the decision's ids.
    DecideUnclaimed(DecideUnclaimed),
    /// An extraction decided alongside the utterance the open claim `message_id` is for (the
    /// `llm` policy asks for both at once, so the participant waits on one model call): it is
    /// logged as its own decision, and the claim stays open for the utterance's `Decide`.
    RecordExtraction(RecordExtraction),
    /// The screening verdict (the study's rules, or the model's judgement), once every
    /// screening question is answered.
    EvaluateScreening(EvaluateScreening),
    /// The participant's reply to the proposed summary: a confirmation, or an addition.
    ConfirmSummary(ConfirmSummary),
    /// Claims the post-session extraction of a completed session (FR-04-26).
    StartFinalExtraction(StartFinalExtraction),
    /// The post-session extraction's result, over the whole transcript.
    CompleteFinalExtraction(CompleteFinalExtraction),
    /// A handled failure, kept for auditors.
    RecordError(RecordError),
    /// The system completes a session (for example one idle at summary confirmation, with the
    /// summary unconfirmed).
    Complete(Complete),
    /// The idle sweeper: a session idle for its study's `idle_ttl_minutes` is abandoned
    /// (`timeout`), or completed with its summary unconfirmed if it was idle at the summary
    /// confirmation. Refused if the session is not idle that long.
    Expire(Expire),
    /// The interview ends early.
    Abandon(Abandon),
    /// Records that the participant's data is erased (`docs/privacy.md`), on an ended session:
    /// `erasure` covers every event so far, the last of which has `head_hash` (the caller read
    /// and erased exactly those; anything committed since refuses this). Once recorded, the
    /// session takes no command at all.
    RecordErasure(RecordErasure),
}

/// See [`SessionCommand::Create`].
#[derive(Debug, Clone, PartialEq)]
pub struct Create {
    pub session_id: Uuid,
    pub study: Box<PinnedStudy>,
    pub participant_ref: Option<String>,
    pub participant_token_sha256: String,
    pub preview: bool,
    /// Random, from the caller (the aggregate draws nothing): see `SessionCreated`.
    pub chain_secret: Option<String>,
    pub at: DateTime<Utc>,
}

/// See [`SessionCommand::Start`].
#[derive(Debug, Clone, PartialEq)]
pub struct Start {
    pub at: DateTime<Utc>,
}

/// See [`SessionCommand::PostMessage`].
#[derive(Debug, Clone, PartialEq)]
pub struct PostMessage {
    pub turn_id: Uuid,
    pub client_message_id: Option<String>,
    pub content: String,
    pub at: DateTime<Utc>,
}

/// See [`SessionCommand::RequestEnd`].
#[derive(Debug, Clone, PartialEq)]
pub struct RequestEnd {
    pub at: DateTime<Utc>,
}

/// See [`SessionCommand::StartAgentMessage`].
#[derive(Debug, Clone, PartialEq)]
pub struct StartAgentMessage {
    pub message_id: Uuid,
    pub run_id: Uuid,
    pub process_id: Option<Uuid>,
    pub takes_over: Option<Uuid>,
    pub at: DateTime<Utc>,
}

/// See [`SessionCommand::CompleteAgentMessage`].
#[derive(Debug, Clone, PartialEq)]
pub struct CompleteAgentMessage {
    pub message_id: Uuid,
    pub content: String,
    pub await_reply: bool,
    pub at: DateTime<Utc>,
}

/// See [`SessionCommand::RenderInteraction`].
#[derive(Debug, Clone, PartialEq)]
pub struct RenderInteraction {
    pub interaction: Box<InteractionToolCall>,
    pub at: DateTime<Utc>,
}

/// See [`SessionCommand::SubmitInteraction`].
#[derive(Debug, Clone, PartialEq)]
pub struct SubmitInteraction {
    pub interaction_id: String,
    pub turn_id: Uuid,
    pub status: SubmitStatus,
    pub value: Option<Value>,
    pub client_context: Option<Value>,
    pub at: DateTime<Utc>,
}

/// See [`SessionCommand::SubmitThenPostMessage`].
#[derive(Debug, Clone, PartialEq)]
pub struct SubmitThenPostMessage {
    pub answer: SubmitInteraction,
    pub message: PostMessage,
}

/// See [`SessionCommand::Decide`].
#[derive(Debug, Clone, PartialEq)]
pub struct Decide {
    pub message_id: Uuid,
    pub interaction_id: Option<String>,
    pub proposal: Box<Proposal>,
    pub at: DateTime<Utc>,
}

/// See [`SessionCommand::DecideUnclaimed`].
#[derive(Debug, Clone, PartialEq)]
pub struct DecideUnclaimed {
    pub after_hash: String,
    pub message_id: Uuid,
    pub run_id: Uuid,
    pub process_id: Option<Uuid>,
    pub interaction_id: Option<String>,
    pub proposal: Box<Proposal>,
    pub at: DateTime<Utc>,
}

/// See [`SessionCommand::RecordExtraction`].
#[derive(Debug, Clone, PartialEq)]
pub struct RecordExtraction {
    pub message_id: Uuid,
    pub proposal: Box<Proposal>,
    pub at: DateTime<Utc>,
}

/// See [`SessionCommand::EvaluateScreening`].
#[derive(Debug, Clone, PartialEq)]
pub struct EvaluateScreening {
    pub eligible: bool,
    pub rationale: String,
    /// The model call that judged, when a model did; `None` when the study's rules decided.
    pub decided_by: Option<crate::decision::Provenance>,
    pub at: DateTime<Utc>,
}

/// See [`SessionCommand::ConfirmSummary`].
#[derive(Debug, Clone, PartialEq)]
pub struct ConfirmSummary {
    pub confirmed: bool,
    pub addition: Option<String>,
    pub at: DateTime<Utc>,
}

/// See [`SessionCommand::StartFinalExtraction`].
#[derive(Debug, Clone, PartialEq)]
pub struct StartFinalExtraction {
    pub extraction_id: Uuid,
    pub at: DateTime<Utc>,
}

/// See [`SessionCommand::CompleteFinalExtraction`].
#[derive(Debug, Clone, PartialEq)]
pub struct CompleteFinalExtraction {
    pub extraction_id: Uuid,
    pub fields: Vec<crate::decision::ExtractedField>,
    /// The model call that made it; `None` for the rules copier.
    pub decided_by: Option<crate::decision::Provenance>,
    pub at: DateTime<Utc>,
}

/// See [`SessionCommand::RecordError`].
#[derive(Debug, Clone, PartialEq)]
pub struct RecordError {
    pub source: String,
    pub code: String,
    pub message: String,
    pub at: DateTime<Utc>,
}

/// See [`SessionCommand::Complete`].
#[derive(Debug, Clone, PartialEq)]
pub struct Complete {
    pub summary: String,
    pub summary_confirmed: bool,
    pub reason: ConcludeReason,
    pub at: DateTime<Utc>,
}

/// See [`SessionCommand::Expire`].
#[derive(Debug, Clone, PartialEq)]
pub struct Expire {
    pub at: DateTime<Utc>,
}

/// See [`SessionCommand::Abandon`].
#[derive(Debug, Clone, PartialEq)]
pub struct Abandon {
    pub reason: ConcludeReason,
    pub at: DateTime<Utc>,
}

/// See [`SessionCommand::RecordErasure`].
#[derive(Debug, Clone, PartialEq)]
pub struct RecordErasure {
    pub erasure: crate::erasure::Erasure,
    pub head_hash: String,
    pub at: DateTime<Utc>,
}
