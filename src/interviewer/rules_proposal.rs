//! What every decision of the rules is made of: its provenance (the rules, at their prompt
//! version) and a proposal carrying nothing but the action, its reason and what it followed.

use interview_session::decision::{AgentAction, Proposal, Provenance};

pub const PROMPT_VERSION_ID: &str = "rules-v1";

pub(crate) fn proposal(action: AgentAction, rationale: String, input_summary: String) -> Proposal {
    Proposal {
        action,
        rationale,
        message: None,
        interaction: None,
        fields: Vec::new(),
        summary: None,
        input_summary,
        provenance: Provenance {
            model: "rules".into(),
            prompt_version_id: PROMPT_VERSION_ID.into(),
            latency_ms: 0,
            token_usage: Default::default(),
        },
        input_class: None,
        refused: None,
    }
}
