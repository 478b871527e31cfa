//! A session's decision log, folded from its log when a researcher or an auditor asks.
//!
//! It is not a stored read model: every field FR-04-11 lists is in the session's
//! `agent.decision.recorded` events already, one row per decision, so a table beside them only
//! doubled the bytes every decision costs (8–10 KB of a 14-turn interview) and added an insert
//! to the commit of every decision. The researcher routes read the session's events through the
//! one decode point anyway (for the objectives' coverage and the widget history) and fold the
//! log from them; `replay at` does the same.

use chrono::{DateTime, Utc};
use interview_session::events::{EventBody, SessionEvent};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One decision with the log FR-04-11 lists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRow {
    pub seq: u64,
    pub session_id: String,
    pub decision_id: String,
    pub turn_id: Option<String>,
    pub phase: String,
    pub selected_action: Value,
    pub proposed_action: Option<Value>,
    pub rationale: String,
    pub model: String,
    pub prompt_version_id: String,
    pub latency_ms: u64,
    pub token_usage: Value,
    pub input_summary: String,
    pub created_at: DateTime<Utc>,
    /// The study's `agent.prompt_version` the decision was made under (absent in older logs).
    pub study_prompt_version: Option<String>,
    /// What the participant's input the decision follows is (`answer`, `non_answer`,
    /// `question_back`, …), as the policy judged it; absent in older logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_class: Option<Value>,
    /// A proposal the runtime refused and this decision replaces: its action, rationale,
    /// model, prompt version and the refusal's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_proposal: Option<Value>,
}

impl DecisionRow {
    /// The log's row for the event at `seq`, if it records a decision.
    pub fn of(session_id: &str, seq: u64, event: &SessionEvent) -> Option<Self> {
        let EventBody::DecisionRecorded {
            decision_id,
            turn_id,
            phase,
            input_summary,
            selected_action,
            proposed_action,
            rationale,
            model,
            prompt_version_id,
            latency_ms,
            token_usage,
            study_prompt_version,
            input_class,
            refused_proposal,
            ..
        } = &event.body
        else {
            return None;
        };
        let json = |v: serde_json::Result<Value>| v.expect("decision parts serialize");
        Some(Self {
            seq,
            session_id: session_id.to_string(),
            decision_id: decision_id.to_string(),
            turn_id: turn_id.map(|t| t.to_string()),
            phase: phase.as_ref().to_string(),
            selected_action: json(serde_json::to_value(selected_action)),
            proposed_action: proposed_action
                .as_ref()
                .map(|a| json(serde_json::to_value(a))),
            rationale: rationale.clone(),
            model: model.clone(),
            prompt_version_id: prompt_version_id.clone(),
            latency_ms: *latency_ms,
            token_usage: json(serde_json::to_value(token_usage)),
            input_summary: input_summary.clone(),
            created_at: event.at,
            study_prompt_version: study_prompt_version.clone(),
            input_class: input_class.map(|c| json(serde_json::to_value(c))),
            refused_proposal: refused_proposal
                .as_ref()
                .map(|r| json(serde_json::to_value(r))),
        })
    }
}

/// A session's decision log from its events (`(sequence, event)` in sequence order).
pub fn of<'a>(
    session_id: &str,
    events: impl IntoIterator<Item = (u64, &'a SessionEvent)>,
) -> Vec<DecisionRow> {
    events
        .into_iter()
        .filter_map(|(seq, e)| DecisionRow::of(session_id, seq, e))
        .collect()
}
