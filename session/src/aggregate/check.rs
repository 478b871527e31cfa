//! Re-checking a stored stream against the rules (used by `replay verify`).

use chrono::{DateTime, Utc};
use cqrs_es::Aggregate;

use super::Session;
use crate::decision::AgentAction;
use crate::events::{EventBody, SessionEvent};

/// Re-checks a stored stream against the aggregate's rules, event by event: it starts with
/// `session.created`, every status change follows the status machine from the current status,
/// at most one interaction is pending, answers match the pending interaction, probes stay under
/// their objective's cap, nothing but
/// system work follows a terminal status, and time never runs backwards. Returns every problem.
// Long by design: one pass over the stream checking each rule in turn, each rule a few lines;
// the problems are collected in stream order.
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
            _ if state.erased => problem("after the participant's data was erased".into()),
            EventBody::ParticipantDataErased(_) if !state.status.is_terminal() => {
                problem("an erasure of a session that had not ended".into())
            }
            EventBody::SessionCreated { .. } if created => {
                problem("a second session.created".into())
            }
            EventBody::SessionCreated { .. } => {}
            _ if !created => problem("the stream does not start with session.created".into()),
            // Only system work (the phase reaching END, extraction, errors) follows the end.
            EventBody::PhaseChanged { .. }
            | EventBody::ExtractionStarted { .. }
            | EventBody::ExtractionCompleted { .. }
            | EventBody::ErrorRecorded { .. }
            | EventBody::ParticipantDataErased(_)
                if state.status.is_terminal() => {}
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
            EventBody::DecisionRecorded {
                selected_action: AgentAction::Probe { objective_id, .. },
                ..
            } if state.study().is_some_and(|s| {
                s.study_config.objectives.iter().any(|o| {
                    o.id == *objective_id
                        && state.objective(objective_id).probes >= o.max_probe_count
                })
            }) =>
            {
                problem(format!(
                    "a probe on {objective_id} past its max_probe_count"
                ));
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
