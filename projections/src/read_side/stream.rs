//! Participant-visible StreamEvents (FR-04-7) folded from the event stream.
//!
//! The live SSE route and (later) `replay stream` use the same fold, so a stream replayed from
//! the log is the stream participants saw. Each persisted event yields at most one StreamEvent,
//! which carries that event's sequence as its SSE id. Nothing here exposes internal fields:
//! extraction results go out as ids and values only.

use interview_session::events::{EventBody, Phase, SessionEvent, SessionStatus, SubmitStatus};
use serde_json::{json, Value};

/// One StreamEvent: its SSE event name and its JSON (which repeats the name as `type`).
#[derive(Debug, Clone, PartialEq)]
pub struct StreamEvent {
    pub event_type: &'static str,
    pub data: Value,
}

impl StreamEvent {
    fn new(event_type: &'static str, mut data: Value) -> Self {
        data["type"] = Value::String(event_type.into());
        Self { event_type, data }
    }

    /// A live, unpersisted piece of an utterance being streamed.
    pub fn delta(message_id: &str, content: &str) -> Self {
        Self::new(
            "message.delta",
            json!({ "message_id": message_id, "content": content }),
        )
    }

    /// The SSE frame: `event:`, `id:` for persisted events, `data:`.
    pub fn to_sse(&self, id: Option<u64>) -> String {
        let mut frame = format!("event: {}\n", self.event_type);
        if let Some(id) = id {
            frame.push_str(&format!("id: {id}\n"));
        }
        frame.push_str(&format!("data: {}\n\n", self.data));
        frame
    }
}

/// Folds events in sequence order, remembering the status and phase that `session.status`
/// reports.
#[derive(Debug, Default, Clone)]
pub struct StreamFolder {
    status: SessionStatus,
    phase: Phase,
    /// For the redirect URL an ended session reports.
    redirect_template: Option<String>,
    participant_ref: Option<String>,
    end_reason: Option<interview_session::ConcludeReason>,
    /// The study's locale, for the runtime's own words.
    locale: String,
    /// When the participant's latest input came, and whether the runtime has apologized for a
    /// wait since: an apology is for a wait the participant felt, once a turn.
    input_at: Option<chrono::DateTime<chrono::Utc>>,
    apologized: bool,
}

/// A model failure the participant waited this long on (from their input) earns an apology;
/// one that failed at once is worked around without a word.
const FELT_WAIT: chrono::TimeDelta = chrono::TimeDelta::seconds(2);

impl StreamFolder {
    /// The participant spoke or answered: a new turn, with no apology yet.
    fn input(&mut self, event: &SessionEvent) {
        self.input_at = Some(event.at);
        self.apologized = false;
    }

    /// `session.status` as of now; an ended session also says where a panel participant goes.
    fn status_event(&self) -> StreamEvent {
        let mut data = json!({ "status": self.status, "phase": self.phase });
        if let Some(url) = interview_session::redirect::redirect_url(
            self.redirect_template.as_deref(),
            self.participant_ref.as_deref(),
            self.status,
            self.end_reason,
        ) {
            data["redirect_url"] = Value::String(url);
        }
        StreamEvent::new("session.status", data)
    }

    // Long by design: one arm per event type, exhaustive, each the frame a participant sees for it.
    pub fn next(&mut self, event: &SessionEvent) -> Option<StreamEvent> {
        match &event.body {
            EventBody::SessionCreated {
                study,
                participant_ref,
                ..
            } => {
                self.redirect_template = study.study_config.completion_redirect_url.clone();
                self.locale.clone_from(&study.study_config.locale);
                self.participant_ref = participant_ref.clone();
                Some(self.status_event())
            }
            EventBody::StatusChanged { to, .. } => {
                self.status = *to;
                Some(self.status_event())
            }
            EventBody::PhaseChanged { to, .. } => {
                self.phase = *to;
                Some(self.status_event())
            }
            // Ids and values only: confidence, evidence and rationale stay with researchers.
            EventBody::ExtractionCompleted { fields, .. } => Some(StreamEvent::new(
                "extraction.completed",
                json!({ "fields": fields.iter().map(|f| json!({ "field_id": f.field_id, "value": f.value })).collect::<Vec<_>>() }),
            )),
            EventBody::ParticipantMessageCreated {
                turn_id, content, ..
            } => {
                self.input(event);
                Some(StreamEvent::new(
                    "message.completed",
                    json!({ "turn_id": turn_id, "message_id": turn_id, "role": "user", "content": content }),
                ))
            }
            EventBody::AgentMessageCompleted {
                message_id,
                content,
            } => Some(StreamEvent::new(
                "message.completed",
                json!({ "turn_id": message_id, "message_id": message_id, "role": "assistant", "content": content }),
            )),
            EventBody::ToolCallCreated {
                tool_call_id,
                tool_name,
                tool_input,
            } => Some(StreamEvent::new(
                "tool.call",
                json!({ "tool_call_id": tool_call_id, "tool_name": tool_name, "tool_input": tool_input }),
            )),
            EventBody::InteractionRendered { interaction } => Some(StreamEvent::new(
                "interaction.render",
                json!({ "interaction": interaction }),
            )),
            // The participant's own answer goes back to them, so the conversation can show it.
            EventBody::InteractionSubmitted {
                interaction_id,
                status,
                value,
                ..
            } => {
                self.input(event);
                let mut data = json!({
                    "interaction_id": interaction_id,
                    "status": match status { SubmitStatus::Submitted => "submitted", SubmitStatus::Skipped => "skipped" },
                });
                if let (SubmitStatus::Submitted, Some(v)) = (status, value) {
                    data["value"] = v.clone();
                }
                Some(StreamEvent::new("interaction.resolved", data))
            }
            EventBody::SessionCompleted {
                summary, reason, ..
            } => {
                self.end_reason = Some(*reason);
                let redirect = interview_session::redirect::redirect_url(
                    self.redirect_template.as_deref(),
                    self.participant_ref.as_deref(),
                    SessionStatus::Completed,
                    self.end_reason,
                );
                let mut data = json!({ "summary": summary });
                if let Some(url) = redirect {
                    data["redirect_url"] = Value::String(url);
                }
                Some(StreamEvent::new("session.completed", data))
            }
            EventBody::SessionAbandoned { reason } => {
                self.end_reason = Some(*reason);
                None
            }
            EventBody::AgentMessageStarted { .. }
            | EventBody::ToolCallCompleted { .. }
            | EventBody::ConsentRecorded { .. }
            | EventBody::ScreeningEvaluated { .. }
            | EventBody::DecisionRecorded { .. }
            | EventBody::SummaryProposed { .. }
            | EventBody::SummaryConfirmed { .. }
            | EventBody::ExtractionStarted { .. } => None,
            // The participant waited on a failed model call: a plain apology, never the cause
            // (the interview goes on with the fallback's next step).
            EventBody::ErrorRecorded { source, .. } if source == "model" => {
                let felt = self
                    .input_at
                    .is_some_and(|input| event.at - input >= FELT_WAIT);
                (felt && !std::mem::replace(&mut self.apologized, true)).then(|| {
                    StreamEvent::new(
                        "error",
                        json!({ "message": interview_session::phrases::delayed(&self.locale) }),
                    )
                })
            }
            EventBody::ErrorRecorded { .. } | EventBody::EndRequested {} => None,
            // The page says the answers are gone (a reload then shows an empty conversation).
            EventBody::ParticipantDataErased(_) => {
                self.redirect_template = None;
                Some(StreamEvent::new(
                    "session.erased",
                    json!({ "erased_at": event.at }),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use interview_session::hash::GENESIS_HASH;
    use uuid::Uuid;

    fn event(body: EventBody) -> SessionEvent {
        SessionEvent::seal(body, Utc::now(), GENESIS_HASH)
    }

    #[test]
    fn status_events_carry_the_current_phase_and_frames_carry_ids() {
        let mut folder = StreamFolder::default();
        let e = folder
            .next(&event(EventBody::StatusChanged {
                from: SessionStatus::Created,
                to: SessionStatus::Active,
            }))
            .unwrap();
        assert_eq!(
            e.data,
            json!({"type": "session.status", "status": "active", "phase": "LOAD_CONTEXT"})
        );
        assert_eq!(
            e.to_sse(Some(7)),
            "event: session.status\nid: 7\ndata: {\"phase\":\"LOAD_CONTEXT\",\"status\":\"active\",\"type\":\"session.status\"}\n\n"
        );
        let m = folder
            .next(&event(EventBody::ParticipantMessageCreated {
                turn_id: Uuid::nil(),
                client_message_id: None,
                content: "hi".into(),
            }))
            .unwrap();
        assert_eq!(m.data["role"], "user");
        assert!(folder
            .next(&event(EventBody::AgentMessageStarted {
                message_id: Uuid::nil(),
                run_id: Uuid::nil(),
                process_id: None,
                takes_over: None,
            }))
            .is_none());
    }

    /// An apology is for a wait the participant felt (2 s or more since their input), once a
    /// turn: a model that failed at once is worked around without a word.
    #[test]
    fn an_apology_only_for_a_felt_wait_and_once_a_turn() {
        let at = Utc::now();
        let sealed = |body: EventBody, secs: i64| {
            SessionEvent::seal(body, at + chrono::TimeDelta::seconds(secs), GENESIS_HASH)
        };
        let said = |secs| {
            sealed(
                EventBody::ParticipantMessageCreated {
                    turn_id: Uuid::nil(),
                    client_message_id: None,
                    content: "hi".into(),
                },
                secs,
            )
        };
        let failed = |secs| {
            sealed(
                EventBody::ErrorRecorded {
                    source: "model".into(),
                    code: "model_stalled".into(),
                    message: "x".into(),
                },
                secs,
            )
        };
        let mut folder = StreamFolder::default();
        folder.next(&said(0));
        assert!(folder.next(&failed(0)).is_none(), "at once: no apology");
        let apology = folder.next(&failed(3)).expect("a felt wait");
        assert_eq!(apology.event_type, "error");
        assert!(folder.next(&failed(9)).is_none(), "once a turn");
        folder.next(&said(10));
        assert!(folder.next(&failed(13)).is_some(), "a new turn may");
    }
}
