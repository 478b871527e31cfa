//! The request for one interviewer step (`docs/llm-contract.md`, "The prompt"): the study and
//! the conversation so far, where the interview stands, the tools the guards would carry out
//! now, and what the rules expect next.

use chrono::{DateTime, Utc};
use interview_session::events::SessionEvent;
use interview_session::Session;
use uuid::Uuid;

use crate::llm::{prompt, ModelRequest};
use interview_session::conversation::Conversation;

/// The step request. `alongside`: the participant's latest input is being extracted by a call
/// of its own, so the step is offered no extraction.
pub(super) fn step_request(
    session: &Session,
    conversation: &Conversation,
    events: &[SessionEvent],
    alongside: bool,
    expected: &interview_session::decision::Proposal,
    now: DateTime<Utc>,
) -> ModelRequest {
    let study = session.study().expect("a running session has its study");
    let system = prompt::system_prompt(session);
    let listing = prompt::Listing::from_events(events);
    let mut user = prompt::transcript(session, events, &listing, conversation);
    if alongside {
        user.push_str(prompt::ALONGSIDE_NOTE);
    }
    let stopping = session.stop_reason(now).is_some() || session.summary_confirmed().is_some();
    user.push_str(&prompt::progress_section(session, now));
    // Only what the guards would carry out as proposed (`offered.rs`); an extraction only of an
    // input not extracted yet (a model offered it after every extraction spent the turn's three
    // calls on it), and none while questioning stops or one runs alongside.
    let extraction = !stopping && !alongside && super::llm_records::extraction_due(session, events);
    let offers = super::offered::offered_now(session, now, extraction);
    let judged = session
        .judge(expected, Some(Uuid::nil().to_string()), now)
        .ok();
    user.push_str(&prompt::expected_next(
        &expected.action,
        judged.as_ref(),
        offers.iter().any(|o| o.tool == "extract_fields"),
    ));
    let tools = crate::llm::schemas::for_step(&offers, study).into();
    prompt::request(&study.model_config, system, user, tools)
}

/// What the decision log says the step was decided on: the turn count and the start of the
/// participant's last input.
pub(super) fn input_summary(session: &Session, conversation: &Conversation) -> String {
    format!(
        "{} turns; last participant input: {}",
        session.turn_count(),
        conversation
            .last_message
            .as_ref()
            .map(|(_, t)| t.chars().take(120).collect::<String>())
            .unwrap_or_default()
    )
}
