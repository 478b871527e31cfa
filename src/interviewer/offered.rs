//! Which steps a model is offered: those the guards would carry out as proposed now, each
//! limited to the objectives it may name. A step the guards would rewrite — a summary before
//! anything allows questioning to stop, a probe of an objective never asked, a conclusion with
//! questions left — costs a call and ends as the rules' step anyway; a server that constrains
//! decoding to the schema (llama.cpp, vLLM, Ollama) cannot even write it. A 135M model offered
//! every tool opened the interview with `summarize_and_confirm` (issue 32).
//!
//! Nothing a model could do is lost: the guards judge on the session's state (a wish to stop is
//! taken from the participant's message when it arrives), not on the model's reading, so an
//! action not offered here is one they would have replaced.

use chrono::{DateTime, Utc};
use interview_session::decision::{AgentAction, ConcludeReason, ProbeTrigger};
use interview_session::Session;

use crate::llm::schemas::Offer;

/// Whether the guards would carry out `action` as proposed, judged on the action alone (its
/// words, widget and fields are checked when it is proposed: a model may write the widget of
/// an objective the study gives none). A closing stands whatever reason the runtime records.
fn accepted(session: &Session, action: &AgentAction, now: DateTime<Utc>) -> bool {
    match session.allowed(action.clone(), now) {
        Ok(AgentAction::Conclude { .. }) => matches!(action, AgentAction::Conclude { .. }),
        Ok(carried) => carried == *action,
        Err(_) => false,
    }
}

const TRIGGERS: [ProbeTrigger; 4] = [
    ProbeTrigger::Vague,
    ProbeTrigger::StrongEmotion,
    ProbeTrigger::Contradiction,
    ProbeTrigger::MissingField,
];

/// The reasons a model may give (`tools.json`): any that stands counts, as the runtime records
/// the reason it can prove.
const REASONS: [ConcludeReason; 7] = [
    ConcludeReason::AllMustObjectivesCovered,
    ConcludeReason::ConfidenceThresholdMet,
    ConcludeReason::MaxTurnsReached,
    ConcludeReason::MaxDurationReached,
    ConcludeReason::ParticipantRequestedEnd,
    ConcludeReason::ParticipantFatigue,
    ConcludeReason::SafetyTriggered,
];

/// The steps the guards accept now, in the order `tools.json` lists them; `extraction` says
/// whether `extract_fields` may be among them (not while an extraction runs alongside). Never
/// empty: should no step stand as proposed, every tool is offered and the guards decide.
// Long by design: a table of data: one entry per tool in the order tools.json lists them, each with
// the action the guards are asked about (per objective for the three tools that name one), then the
// fallback to every tool when none stands.
pub fn offered_now(session: &Session, now: DateTime<Utc>, extraction: bool) -> Vec<Offer> {
    let accepted = |action: AgentAction| accepted(session, &action, now);
    let objectives: Vec<&str> = session
        .study()
        .map(|s| {
            s.study_config
                .objectives
                .iter()
                .map(|o| o.id.as_str())
                .collect()
        })
        .unwrap_or_default();
    let naming = |tool: &'static str, fits: &dyn Fn(&str) -> bool| Offer {
        tool,
        objectives: objectives
            .iter()
            .filter(|o| fits(o))
            .map(|o| o.to_string())
            .collect(),
    };
    let mut offers = vec![
        naming("ask_question", &|o| {
            accepted(AgentAction::AskQuestion {
                objective_id: o.into(),
            })
        }),
        naming("probe", &|o| {
            TRIGGERS.iter().any(|trigger| {
                accepted(AgentAction::Probe {
                    objective_id: o.into(),
                    based_on_turn_id: None,
                    trigger: *trigger,
                })
            })
        }),
        naming("render_interaction", &|o| {
            accepted(AgentAction::RenderInteraction {
                objective_id: Some(o.into()),
            })
        }),
    ];
    offers.retain(|offer| !offer.objectives.is_empty());
    let plain = |tool| Offer {
        tool,
        objectives: Vec::new(),
    };
    if extraction && accepted(AgentAction::ExtractFields) {
        offers.push(plain("extract_fields"));
    }
    if accepted(AgentAction::SummarizeAndConfirm) {
        offers.push(plain("summarize_and_confirm"));
    }
    if REASONS
        .iter()
        .any(|reason| accepted(AgentAction::Conclude { reason: *reason }))
    {
        offers.push(plain("conclude"));
    }
    if offers.is_empty() {
        return every_tool(&objectives, extraction);
    }
    offers
}

fn every_tool(objectives: &[&str], extraction: bool) -> Vec<Offer> {
    let all: Vec<String> = objectives.iter().map(|o| o.to_string()).collect();
    [
        "ask_question",
        "probe",
        "render_interaction",
        "extract_fields",
        "summarize_and_confirm",
        "conclude",
    ]
    .into_iter()
    .filter(|tool| extraction || *tool != "extract_fields")
    .map(|tool| Offer {
        tool,
        objectives: match tool {
            "ask_question" | "probe" | "render_interaction" => all.clone(),
            _ => Vec::new(),
        },
    })
    .collect()
}
