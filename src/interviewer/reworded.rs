//! A model's decision kept when only its words are refused.
//!
//! A small model often picks a fair next step and words it badly: SmolLM2-135M chose to probe a
//! vague answer and wrote "./pickup.json: …", or chose to ask the next objective and copied a
//! prompt line after the question. Its words are never shown (`step_text`, `visible`), but the
//! decision need not be thrown away with them: when the guards would carry out the action as
//! proposed, it is carried out in the runtime's own words — the objective's opening question,
//! for a probe of the answer just given the rules' probe question when they would probe it too,
//! else a question that claims nothing about the answer (`probing::worded`), the configured
//! widget, the runtime's summary, the study's closing. The decision log records it as the
//! model's, with a rationale that starts with [`WORDED_BY_RUNTIME`], so a researcher (and
//! `scripts/eval`'s R7) can tell it from a decision said in the model's own words.

use chrono::{DateTime, Utc};
use interview_session::decision::{AgentAction, ProbeTrigger, Proposal};
use interview_session::Session;
use uuid::Uuid;

use super::{probing, rules, step_text, streamed};
use crate::llm::visible::Visible;
use interview_session::conversation::Conversation;

/// How the rationale of a decision kept this way begins (the refused term follows in brackets,
/// then the model's own rationale).
pub const WORDED_BY_RUNTIME: &str = "The model's decision in the runtime's words";

/// The model's proposal with the runtime's words in place of its refused ones, if the guards
/// would carry it out as proposed; `None` when the rules' step (`rules_step`, what the rules
/// interviewer would do now) should be taken instead.
// Long by design: one arm per kind of action in an exhaustive match, so the compiler lists it for a
// new action, each saying whether the model's decision is kept and in whose words (the rules'
// question, the opening question, a neutral probe); between the common steps before it (message,
// summary and refused widget replaced) and after it (the guards' checks, the rationale).
pub(super) fn in_runtime_words(
    session: &Session,
    conversation: &Conversation,
    visible: &Visible,
    rules_step: &Proposal,
    model: &Proposal,
    term: &str,
    now: DateTime<Utc>,
) -> Option<Proposal> {
    let study = session.study()?;
    let mut p = model.clone();
    p.message = None;
    // The participant confirms the runtime's summary, built from what was recorded and
    // answered (`llm_step` puts the model's back when it passes every check on its own). A
    // widget the model wrote goes with its words when they are what was refused (the
    // objective's configured widget then, or, none configured, the rules decide); it stays
    // when only the message was.
    if p.action == AgentAction::SummarizeAndConfirm {
        p.summary = Some(super::founded::runtime_summary(session, conversation));
    }
    if step_text::refused_text(visible, &p).is_some() {
        p.interaction = None;
    }
    match &model.action {
        AgentAction::AskQuestion { objective_id } if session.objective(objective_id).asked => {
            // Asking an objective again is what a model that lost the thread does (SmolLM2-135M
            // asked one opening question four times): kept only when the rules would ask it
            // again too — a question back — and then in their other words.
            if rules_step.action != model.action {
                return None;
            }
            p.message = rules_step.message.clone();
        }
        AgentAction::AskQuestion { .. } => {} // the objective's opening question
        AgentAction::Probe {
            objective_id,
            trigger,
            ..
        } => {
            // A probe follows up the answer just given to the objective under discussion; its
            // words must fit that answer, which the model's trigger alone does not vouch for.
            let answered = rules::input_class(session, conversation).is_some_and(|c| c.is_answer());
            if session.current_objective() != Some(objective_id.as_str()) || !answered {
                return None;
            }
            p.message = match &rules_step.action {
                // The rules would probe it too: their question fits what was said.
                AgentAction::Probe {
                    objective_id: ref theirs,
                    ..
                } if theirs == objective_id => rules_step.message.clone(),
                // Otherwise a question that claims nothing about the answer: no "that sounds
                // like it matters a lot to you", no "earlier it sounded different" on the
                // model's word alone.
                _ => {
                    let objective = study
                        .study_config
                        .objectives
                        .iter()
                        .find(|o| &o.id == objective_id)?;
                    let asked = conversation
                        .probes_asked
                        .get(objective_id)
                        .map(Vec::as_slice)
                        .unwrap_or_default();
                    let neutral = match trigger {
                        ProbeTrigger::StrongEmotion | ProbeTrigger::Contradiction => {
                            ProbeTrigger::Vague
                        }
                        other => *other,
                    };
                    Some(probing::worded(
                        neutral,
                        &objective.probe_hints,
                        asked,
                        &study.study_config.locale,
                    ))
                }
            };
        }
        // Nothing an extraction says reaches a participant; nothing of it was refused as words.
        AgentAction::ExtractFields => return None,
        AgentAction::RenderInteraction { .. }
        | AgentAction::SummarizeAndConfirm
        | AgentAction::Conclude { .. } => {}
    }
    if !streamed::accepted_as_is(session, p.action.clone(), now) {
        return None;
    }
    session.judge(&p, Some(Uuid::nil().to_string()), now).ok()?;
    p.rationale = format!(
        "{WORDED_BY_RUNTIME} (its own contained {term:?}): {}",
        model.rationale
    );
    Some(p)
}
