//! Human and machine views of a stream: the timeline, the state at a point, the participant's
//! StreamEvents.

use interview_projections::stream::StreamFolder;
use interview_session::codec::compact::{self, Before};
use interview_session::{EventBody, SessionEvent};
use serde_json::{json, Value};

use crate::source::StoredEvent;

pub fn timeline(events: &[StoredEvent], as_json: bool) {
    let decoded = crate::verify::decode(events).ok();
    // A command's metadata is stored on its first event only (since 2026-12-02): the events
    // after it without any are its own, and are shown with it.
    let mut metadata = Value::Null;
    let mut before = Before::default();
    for (i, e) in events.iter().enumerate() {
        if e.metadata.get("actor").is_some() || e.metadata.get("request_id").is_some() {
            metadata = e.metadata.clone();
        }
        let actor = metadata["actor"].as_str().unwrap_or("-");
        if as_json {
            // A version 3 payload with what it left out put back: every line has the whole
            // version 2 payload.
            let payload = match e.event_version.as_str() {
                compact::VERSION => compact::restore(&e.event_type, &e.payload, &before)
                    .unwrap_or_else(|_| e.payload.clone()),
                _ => e.payload.clone(),
            };
            before = Before::of_payload(&e.event_type, &payload);
            let line = json!({"sequence": e.sequence, "event_type": e.event_type,
                              "event_version": e.event_version, "actor": actor,
                              "metadata": metadata, "payload": payload});
            outln!("{line}");
            continue;
        }
        // A version 3 event may leave its time to the one before: the decoded event has it.
        let at = match &decoded {
            Some(decoded) => serde_json::to_value(decoded[i].at).ok(),
            None => e.payload.get("at").cloned(),
        };
        let at = at.as_ref().and_then(Value::as_str).unwrap_or("-");
        let what = match &decoded {
            Some(decoded) => describe(&decoded[i].body),
            None => serde_json::from_value::<SessionEvent>(e.payload.clone())
                .map(|d| describe(&d.body))
                .unwrap_or_else(|_| "(undecodable payload)".into()),
        };
        outln!(
            "{:>4}  {at}  {actor:<11}  {:<28}  {what}",
            e.sequence,
            e.event_type
        );
    }
}

/// The participant-visible StreamEvents, as SSE frames, exactly as the live stream sends them.
pub fn stream(events: &[StoredEvent], decoded: &[SessionEvent]) {
    let mut folder = StreamFolder::default();
    for (stored, event) in events.iter().zip(decoded) {
        if let Some(frame) = folder.next(event) {
            out!("{}", frame.to_sse(Some(stored.sequence)));
        }
    }
}

// Long by design: one line of words per event type, exhaustive, so a new event type is listed
// here by the compiler.
pub fn describe(body: &EventBody) -> String {
    match body {
        EventBody::SessionCreated {
            study,
            participant_ref,
            preview,
            ..
        } => format!(
            "study {} ({}), versions {}/{}/{}/{}{}{}",
            study.study_id,
            study.public_slug,
            study.config_versions.study_config_version_id,
            study.config_versions.agent_config_version_id,
            study.config_versions.output_schema_version_id,
            study.config_versions.model_config_version_id,
            participant_ref
                .as_ref()
                .map(|r| format!(", participant {r}"))
                .unwrap_or_default(),
            if *preview { ", preview" } else { "" }
        ),
        EventBody::StatusChanged { from, to } => format!("{} -> {}", from.as_str(), to.as_str()),
        EventBody::ParticipantMessageCreated {
            turn_id, content, ..
        } => format!("turn {turn_id}: {content:?}"),
        EventBody::AgentMessageStarted {
            message_id,
            run_id,
            takes_over,
            ..
        } => {
            match takes_over {
                Some(dead) => {
                    format!("message {message_id} claimed by run {run_id} (taking over dead run {dead})")
                }
                None => format!("message {message_id} claimed by run {run_id}"),
            }
        }
        EventBody::AgentMessageCompleted {
            message_id,
            content,
        } => format!("message {message_id}: {content:?}"),
        EventBody::ToolCallCreated {
            tool_call_id,
            tool_name,
            ..
        } => format!("{tool_name} ({tool_call_id})"),
        EventBody::InteractionRendered { interaction } => {
            format!(
                "{} {} {:?}",
                interaction.type_name(),
                interaction.interaction_id,
                interaction.prompt
            )
        }
        EventBody::InteractionSubmitted {
            interaction_id,
            status,
            value,
            ..
        } => {
            format!(
                "{interaction_id} {status:?} {}",
                value.as_ref().map(Value::to_string).unwrap_or_default()
            )
        }
        EventBody::ToolCallCompleted {
            tool_call_id,
            tool_result,
        } => format!("{tool_call_id} -> {tool_result}"),
        EventBody::SessionCompleted {
            summary,
            summary_confirmed,
            reason,
        } => format!(
            "{reason:?}, summary {}: {summary:?}",
            if *summary_confirmed {
                "confirmed"
            } else {
                "unconfirmed"
            }
        ),
        EventBody::PhaseChanged { from, to } => format!("{from:?} -> {to:?}"),
        EventBody::ConsentRecorded {
            accepted,
            consent_version,
        } => {
            format!(
                "{} (consent version {consent_version})",
                if *accepted { "accepted" } else { "declined" }
            )
        }
        EventBody::ScreeningEvaluated {
            eligible,
            rationale,
            ..
        } => format!(
            "{} — {rationale:?}",
            if *eligible {
                "eligible"
            } else {
                "not eligible"
            }
        ),
        EventBody::DecisionRecorded {
            selected_action,
            proposed_action,
            rationale,
            model,
            latency_ms,
            token_usage,
            input_class,
            refused_proposal,
            ..
        } => format!(
            "{}{}{} — {rationale:?} [{model}, {latency_ms} ms, {} tokens]{}",
            serde_json::to_string(selected_action).unwrap_or_default(),
            proposed_action
                .as_ref()
                .map(|p| format!(
                    " (rewritten from {})",
                    serde_json::to_string(p).unwrap_or_default()
                ))
                .unwrap_or_default(),
            input_class
                .map(|c| format!(
                    " after input {}",
                    serde_json::to_value(c)
                        .ok()
                        .and_then(|v| v.as_str().map(String::from))
                        .unwrap_or_default()
                ))
                .unwrap_or_default(),
            token_usage.total_tokens,
            refused_proposal
                .as_ref()
                .map(|r| format!(
                    "; refused proposal {} by {} ({}): {:?} — {:?}",
                    serde_json::to_string(&r.proposed_action).unwrap_or_default(),
                    r.model,
                    r.prompt_version_id,
                    r.rationale,
                    r.reason
                ))
                .unwrap_or_default()
        ),
        EventBody::SummaryProposed { summary } => format!("{summary:?}"),
        EventBody::SummaryConfirmed {
            confirmed,
            addition,
        } => format!(
            "{}{}",
            if *confirmed {
                "confirmed"
            } else {
                "not confirmed"
            },
            addition
                .as_ref()
                .map(|a| format!(", added {a:?}"))
                .unwrap_or_default()
        ),
        EventBody::ExtractionStarted {
            extraction_id,
            is_final,
        } => {
            format!("{extraction_id}{}", if *is_final { " (final)" } else { "" })
        }
        EventBody::ExtractionCompleted {
            fields, is_final, ..
        } => format!(
            "{}{}",
            fields
                .iter()
                .map(|f| format!("{}={} ({:.2})", f.field_id, f.value, f.confidence))
                .collect::<Vec<_>>()
                .join(", "),
            if *is_final { " (final)" } else { "" }
        ),
        EventBody::ErrorRecorded {
            source,
            code,
            message,
        } => format!("{source}/{code}: {message}"),
        EventBody::SessionAbandoned { reason } => format!("reason {reason:?}"),
        EventBody::EndRequested {} => "the participant asked to end".into(),
        EventBody::ParticipantDataErased(e) => format!(
            "the participant's data was erased by the {}{}: events 1-{} hold no content{}",
            e.by.as_str(),
            e.reason
                .as_ref()
                .map(|r| format!(" ({r:?})"))
                .unwrap_or_default(),
            e.erased_events,
            if e.content_verified {
                " (their chain verified just before)"
            } else {
                " (their chain did NOT verify just before)"
            }
        ),
    }
}
