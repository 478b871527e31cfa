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

#[derive(Debug, Clone, PartialEq)]
pub enum SessionCommand {
    /// A participant opens the public link (FR-04-1); pins the study (FR-04-2).
    Create {
        session_id: Uuid,
        study: Box<PinnedStudy>,
        participant_ref: Option<String>,
        participant_token_sha256: String,
        preview: bool,
        /// Random, from the caller (the aggregate draws nothing): see `SessionCreated`.
        chain_secret: Option<String>,
        at: DateTime<Utc>,
    },
    /// The interviewer takes the session up: `created → active`.
    Start { at: DateTime<Utc> },
    /// A participant message (FR-04-6). `turn_id` is derived from `client_message_id` when one is
    /// given, so a retry is recognised and writes nothing.
    PostMessage {
        turn_id: Uuid,
        client_message_id: Option<String>,
        content: String,
        at: DateTime<Utc>,
    },
    /// The participant ends the interview (`POST …/end`).
    RequestEnd { at: DateTime<Utc> },
    /// The interviewer claims the next utterance; only one may be open at a time. An open claim
    /// is replaced only when it is stale, or when `takes_over` names its run: the harness found
    /// that run's process dead (that check is I/O, so it happens outside the aggregate).
    StartAgentMessage {
        message_id: Uuid,
        run_id: Uuid,
        process_id: Option<Uuid>,
        takes_over: Option<Uuid>,
        at: DateTime<Utc>,
    },
    /// The interviewer's utterance is complete; with `await_reply` the session waits for the
    /// participant.
    CompleteAgentMessage {
        message_id: Uuid,
        content: String,
        await_reply: bool,
        at: DateTime<Utc>,
    },
    /// Show a widget and wait for its answer (FR-04-16/17).
    RenderInteraction {
        interaction: Box<InteractionToolCall>,
        at: DateTime<Utc>,
    },
    /// A participant answers (or skips) the pending widget.
    SubmitInteraction {
        interaction_id: String,
        turn_id: Uuid,
        status: SubmitStatus,
        value: Option<Value>,
        client_context: Option<Value>,
        at: DateTime<Utc>,
    },
    /// The same, followed by a participant message in the same turn, before the interviewer
    /// takes it up — AG-UI's resume with a new user message ("answer in my own words instead":
    /// skip the widget, then say it). Both are written, in that order, or neither.
    SubmitThenPostMessage {
        interaction_id: String,
        turn_id: Uuid,
        status: SubmitStatus,
        value: Option<Value>,
        client_context: Option<Value>,
        message: FollowingMessage,
        at: DateTime<Utc>,
    },
    /// An interviewer decision, under the claim `message_id` (see `StartAgentMessage`). The
    /// aggregate judges it: a decision that breaks a rule is rewritten (`proposed_action` kept)
    /// or refused. `interaction_id` names the widget a `render_interaction` shows.
    Decide {
        message_id: Uuid,
        interaction_id: Option<String>,
        proposal: Box<Proposal>,
        at: DateTime<Utc>,
    },
    /// A decision the rules took, with no claim open: nothing is streamed before it is
    /// committed, so its commit is its own lock. One that shows words writes its claim first, in
    /// the same commit (`agent.message.started` naming `run_id` and `process_id`), and its words
    /// reach this process's live subscribers once it is committed (`src/live/stream_hub.rs`); one that shows
    /// none (a widget with no words before it, an extraction) writes no claim. It is taken only
    /// on the state its run weighed — `after_hash` is that state's chain head; anything
    /// committed since (a participant's added words, another run's step) refuses it — and only
    /// as proposed (a decision the guards would rewrite is refused). `message_id` names the
    /// utterance and seeds the decision's ids.
    DecideUnclaimed {
        after_hash: String,
        message_id: Uuid,
        run_id: Uuid,
        process_id: Option<Uuid>,
        interaction_id: Option<String>,
        proposal: Box<Proposal>,
        at: DateTime<Utc>,
    },
    /// An extraction decided alongside the utterance the open claim `message_id` is for (the
    /// `llm` policy asks for both at once, so the participant waits on one model call): it is
    /// logged as its own decision, and the claim stays open for the utterance's `Decide`.
    RecordExtraction {
        message_id: Uuid,
        proposal: Box<Proposal>,
        at: DateTime<Utc>,
    },
    /// The screening verdict (the study's rules, or the model's judgement), once every
    /// screening question is answered.
    EvaluateScreening {
        eligible: bool,
        rationale: String,
        /// The model call that judged, when a model did; `None` when the study's rules decided.
        decided_by: Option<crate::decision::Provenance>,
        at: DateTime<Utc>,
    },
    /// The participant's reply to the proposed summary: a confirmation, or an addition.
    ConfirmSummary {
        confirmed: bool,
        addition: Option<String>,
        at: DateTime<Utc>,
    },
    /// Claims the post-session extraction of a completed session (FR-04-26).
    StartFinalExtraction {
        extraction_id: Uuid,
        at: DateTime<Utc>,
    },
    /// The post-session extraction's result, over the whole transcript.
    CompleteFinalExtraction {
        extraction_id: Uuid,
        fields: Vec<crate::decision::ExtractedField>,
        /// The model call that made it; `None` for the rules copier.
        decided_by: Option<crate::decision::Provenance>,
        at: DateTime<Utc>,
    },
    /// A handled failure, kept for auditors.
    RecordError {
        source: String,
        code: String,
        message: String,
        at: DateTime<Utc>,
    },
    /// The system completes a session (for example one idle at summary confirmation, with the
    /// summary unconfirmed).
    Complete {
        summary: String,
        summary_confirmed: bool,
        reason: ConcludeReason,
        at: DateTime<Utc>,
    },
    /// The idle sweeper: a session idle for its study's `idle_ttl_minutes` is abandoned
    /// (`timeout`), or completed with its summary unconfirmed if it was idle at the summary
    /// confirmation. Refused if the session is not idle that long.
    Expire { at: DateTime<Utc> },
    /// The interview ends early.
    Abandon {
        reason: ConcludeReason,
        at: DateTime<Utc>,
    },
    /// Records that the participant's data is erased (`docs/privacy.md`), on an ended session:
    /// `erasure` covers every event so far, the last of which has `head_hash` (the caller read
    /// and erased exactly those; anything committed since refuses this). Once recorded, the
    /// session takes no command at all.
    RecordErasure {
        erasure: crate::erasure::Erasure,
        head_hash: String,
        at: DateTime<Utc>,
    },
}

/// The message of a [`SessionCommand::SubmitThenPostMessage`].
#[derive(Debug, Clone, PartialEq)]
pub struct FollowingMessage {
    pub turn_id: Uuid,
    pub client_message_id: Option<String>,
    pub content: String,
}
