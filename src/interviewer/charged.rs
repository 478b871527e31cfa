//! What a model call costs: its provenance (the model that answered, its latency and tokens —
//! as the endpoint counted them, or estimated), charged against the daily cap and counted in the
//! metrics. Every model call the interviewer makes goes through here.

use chrono::{DateTime, Utc};
use interview_session::decision::{Provenance, TokenUsage};

use super::Interviewer;
use crate::llm::ModelTurn;

impl Interviewer {
    /// A model call's provenance — the model that answered, as the endpoint names it (the
    /// configured one otherwise), and its tokens — counted against the daily cap.
    pub(super) fn charge(
        &self,
        turn: &ModelTurn,
        session_id: &str,
        study: &interview_session::study::PinnedStudy,
        prompt_version_id: &str,
        prompt_chars: usize,
        now: DateTime<Utc>,
    ) -> Provenance {
        let provenance = Provenance {
            model: turn
                .model
                .clone()
                .unwrap_or_else(|| study.model_config.model.clone()),
            prompt_version_id: prompt_version_id.to_string(),
            latency_ms: turn.latency_ms,
            token_usage: usage_of(turn, prompt_chars),
        };
        let usage = &provenance.token_usage;
        let cost = study.model_config.price_per_million_tokens.map(|price| {
            price.micro_usd(
                u64::from(usage.prompt_tokens),
                u64::from(usage.completion_tokens),
            )
        });
        self.budgets.spend(
            session_id,
            &study.study_id,
            u64::from(usage.total_tokens),
            cost,
            now,
        );
        metrics::counter!("interview_model_tokens_total", "direction" => "prompt")
            .increment(u64::from(usage.prompt_tokens));
        metrics::counter!("interview_model_tokens_total", "direction" => "completion")
            .increment(u64::from(usage.completion_tokens));
        metrics::histogram!("interview_model_call_seconds").record(turn.latency_ms as f64 / 1e3);
        provenance
    }

    /// A finished call: what arrived, the failure's code and message if it failed, and its
    /// provenance (charged against the daily cap).
    #[allow(clippy::result_large_err)] // the gateway's own result, taken apart here
    pub(super) fn settle(
        &self,
        result: Result<ModelTurn, (crate::llm::ModelError, ModelTurn)>,
        session_id: &str,
        study: &interview_session::study::PinnedStudy,
        prompt_version_id: &str,
        prompt_chars: usize,
        now: DateTime<Utc>,
    ) -> (ModelTurn, Option<(String, String)>, Provenance) {
        let (turn, failure) = match result {
            Ok(turn) => (turn, None),
            Err((error, turn)) => (turn, Some((error.code().to_string(), error.to_string()))),
        };
        let outcome = failure
            .as_ref()
            .map_or("ok".to_string(), |(code, _)| code.clone());
        metrics::counter!("interview_model_calls_total", "outcome" => outcome).increment(1);
        let provenance = self.charge(
            &turn,
            session_id,
            study,
            prompt_version_id,
            prompt_chars,
            now,
        );
        (turn, failure, provenance)
    }
}

/// Tokens as the endpoint counted them, or an estimate (four characters a token) when it
/// reported none, so budgets hold against servers that do not count.
fn usage_of(turn: &ModelTurn, prompt_chars: usize) -> TokenUsage {
    if turn.usage_reported {
        return turn.usage;
    }
    let prompt_tokens = (prompt_chars / 4) as u32;
    let completion_tokens = (turn.arguments.len() / 4) as u32;
    TokenUsage {
        prompt_tokens,
        completion_tokens,
        total_tokens: prompt_tokens + completion_tokens,
    }
}
