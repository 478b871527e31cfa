//! What one session adds to its study's overview (`docs/overview.md`): a set of named whole
//! counts, computed from the folded session — so "covered" is exactly what the guards judge by,
//! and a rebuild from the log gives the same numbers. The projection keeps each session's last
//! contribution and adds the difference to its study's counts whenever the contribution moves.
//!
//! The names are `metric` or `metric:key` (`abandoned:ASK_OR_PROBE`, `objective_covered:habits`).
//! Everything but the funnel is counted for completed interviews only: what a researcher reads
//! as the study's results.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::Session;
use crate::decision::ConcludeReason;
use crate::events::{EventBody, Phase, SessionStatus};

/// A session's counts, by name; zero counts are left out.
pub type Contribution = BTreeMap<String, i64>;

/// What the rest of the fold does not keep and the overview needs: how the session ended, and
/// what its model calls cost.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeFacts {
    pub ended_at: Option<DateTime<Utc>>,
    pub end_reason: Option<ConcludeReason>,
    /// The phase the session was in when it was abandoned.
    pub stopped_in: Option<Phase>,
    /// Model calls: decisions a model made, its screening verdicts and final extractions, and
    /// the calls that failed.
    pub model_calls: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl OutcomeFacts {
    /// Notes what `body` tells; `phase` is the session's phase before it.
    pub(super) fn note(&mut self, phase: Phase, body: &EventBody, at: DateTime<Utc>) {
        match body {
            EventBody::StatusChanged { to, .. } if to.is_terminal() => self.ended_at = Some(at),
            EventBody::SessionCompleted { reason, .. } => self.end_reason = Some(*reason),
            EventBody::SessionAbandoned { reason } => {
                self.end_reason = Some(*reason);
                self.stopped_in = Some(phase);
            }
            _ => {}
        }
        if let Some(used) = body.model_use() {
            self.model_calls += used.calls;
            self.prompt_tokens += used.prompt_tokens;
            self.completion_tokens += used.completion_tokens;
        }
    }
}

/// Whether an event can move the contribution of a session that is still open (the others
/// never do): the funnel's steps and the end. Once a session has ended everything it adds is
/// counted, so every command on an ended session (the final extraction, a model call that
/// failed after the end) recomputes it — see [`Session::overview_may_move`].
pub fn moves_overview(body: &EventBody) -> bool {
    matches!(
        body,
        EventBody::SessionCreated { .. }
            | EventBody::ConsentRecorded { .. }
            | EventBody::ScreeningEvaluated { .. }
            | EventBody::StatusChanged {
                to: SessionStatus::Completed | SessionStatus::Abandoned,
                ..
            }
            | EventBody::ParticipantDataErased(_)
    )
}

impl Session {
    /// Whether events just folded into this session may have moved its contribution.
    pub fn overview_may_move<'a>(&self, mut folded: impl Iterator<Item = &'a EventBody>) -> bool {
        self.status.is_terminal() || folded.any(moves_overview)
    }

    /// What the session adds to its study's overview now. A preview adds nothing.
    // Long by design: the list of counters one session adds, read top to bottom: the funnel, then
    // an early return for an erased, abandoned or running session, then a completed session's
    // counts; the early returns decide what is counted, so their order must stay visible.
    pub fn overview_contribution(&self) -> Contribution {
        let mut c = Contribution::new();
        let Some(study) = self.study.as_deref() else {
            return c;
        };
        if self.preview {
            return c;
        }
        let mut add = |name: String, n: i64| {
            if n != 0 {
                *c.entry(name).or_default() += n;
            }
        };
        add("created".into(), 1);
        add("consented".into(), i64::from(self.consent == Some(true)));
        add("screened_in".into(), i64::from(self.screened_in()));
        // An erased session counts in the funnel it went through and then only as withdrawn:
        // nothing it said or how it ended is a result any more.
        if self.erased {
            add("withdrawn".into(), 1);
            return c;
        }
        let facts = &self.outcome;
        let reason = facts.end_reason;
        let phase = facts.stopped_in.map_or("UNKNOWN", <&str>::from);
        match self.status {
            SessionStatus::Completed => {}
            SessionStatus::Abandoned => {
                use crate::decision::Stopped;
                let stopped = match reason.map(ConcludeReason::stopped) {
                    Some(Stopped::Declined) => "declined".into(),
                    Some(Stopped::ScreenedOut) => "screened_out".into(),
                    Some(Stopped::IdleExpired) => format!("idle_expired:{phase}"),
                    Some(Stopped::Otherwise) | None => format!("abandoned:{phase}"),
                };
                add(stopped, 1);
                return c;
            }
            _ => {
                add("in_progress".into(), 1);
                return c;
            }
        }
        add("completed".into(), 1);
        if let Some(reason) = reason {
            add(format!("completed_reason:{}", reason.as_ref()), 1);
        }
        if let (Some(start), Some(end)) = (self.created_at, facts.ended_at) {
            add(
                format!("duration_s:{}", (end - start).num_seconds().max(0)),
                1,
            );
        }
        add(format!("turns:{}", self.turns.count()), 1);
        for objective in &study.study_config.objectives {
            let id = &objective.id;
            add(format!("objective_sessions:{id}"), 1);
            add(
                format!("objective_covered:{id}"),
                i64::from(self.objective_covered(id)),
            );
            add(
                format!("objective_probes:{id}"),
                i64::from(self.objective(id).probes),
            );
        }
        for field in &study.output_schema.fields {
            let id = &field.id;
            add(format!("field_sessions:{id}"), 1);
            if let Some(found) = self.fields.get(id).filter(|f| !f.value.is_null()) {
                add(format!("field_filled:{id}"), 1);
                let micros = (found.confidence.clamp(0.0, 1.0) * 1e6).round() as i64;
                add(format!("field_confidence_micros:{id}"), micros);
            }
        }
        if facts.model_calls > 0 {
            add("model_sessions".into(), 1);
            add("model_calls".into(), facts.model_calls as i64);
            add("prompt_tokens".into(), facts.prompt_tokens as i64);
            add("completion_tokens".into(), facts.completion_tokens as i64);
            if let Some(price) = study.model_config.price_per_million_tokens {
                // Dollars per million tokens are micro-dollars per token.
                let spend = facts.prompt_tokens as f64 * price.prompt
                    + facts.completion_tokens as f64 * price.completion;
                add("priced_sessions".into(), 1);
                add("spend_micro_usd".into(), spend.round() as i64);
            }
        }
        c
    }

    /// Consent given and the screening passed (or the study has none).
    fn screened_in(&self) -> bool {
        let screens = self
            .study
            .as_deref()
            .is_some_and(|s| !s.study_config.screening.questions.is_empty());
        self.consent == Some(true) && (!screens || self.screening == Some(true))
    }
}

#[cfg(test)]
mod tests {
    use cqrs_es::Aggregate;
    use uuid::Uuid;

    use super::*;
    use crate::decision::{AgentAction, TokenUsage};
    use crate::events::SessionEvent;
    use crate::study::ModelPrice;

    fn created(preview: bool) -> EventBody {
        let mut study = super::super::tests::study();
        study.model_config.price_per_million_tokens = Some(ModelPrice {
            prompt: 0.5,
            completion: 2.0,
        });
        EventBody::SessionCreated {
            session_id: Uuid::nil(),
            study: Box::new(study),
            participant_ref: None,
            participant_token_sha256: "ab".repeat(32),
            preview,
            chain_secret: None,
        }
    }

    fn status(from: SessionStatus, to: SessionStatus) -> EventBody {
        EventBody::StatusChanged { from, to }
    }

    fn phase(from: Phase, to: Phase) -> EventBody {
        EventBody::PhaseChanged { from, to }
    }

    fn consent(accepted: bool) -> EventBody {
        EventBody::ConsentRecorded {
            accepted,
            consent_version: "1".into(),
        }
    }

    /// Given these events (a minute apart), the session's contribution.
    fn given(bodies: Vec<EventBody>) -> Contribution {
        let mut session = Session::default();
        let mut prev = crate::hash::GENESIS_HASH.to_string();
        for (i, body) in bodies.into_iter().enumerate() {
            let at = super::super::tests::at() + chrono::Duration::minutes(i as i64);
            let event = SessionEvent::seal(body, at, &prev);
            prev = event.hash.clone();
            session.apply(event);
        }
        session.overview_contribution()
    }

    fn counts(pairs: &[(&str, i64)]) -> Contribution {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn a_new_session_is_created_and_in_progress() {
        assert_eq!(
            given(vec![created(false)]),
            counts(&[("created", 1), ("in_progress", 1)])
        );
    }

    #[test]
    fn a_preview_adds_nothing() {
        assert_eq!(
            given(vec![created(true), consent(true)]),
            Contribution::new()
        );
    }

    #[test]
    fn a_declined_consent_is_counted_apart_from_other_abandons() {
        use SessionStatus::*;
        let got = given(vec![
            created(false),
            status(Created, Active),
            consent(false),
            EventBody::SessionAbandoned {
                reason: ConcludeReason::ConsentDeclined,
            },
            status(Active, Abandoned),
        ]);
        assert_eq!(got, counts(&[("created", 1), ("declined", 1)]));
    }

    #[test]
    fn an_idle_session_is_counted_by_the_phase_it_stopped_in() {
        use SessionStatus::*;
        let got = given(vec![
            created(false),
            status(Created, Active),
            consent(true),
            phase(Phase::ConsentOrScreening, Phase::Opening),
            EventBody::SessionAbandoned {
                reason: ConcludeReason::Timeout,
            },
            status(Active, Abandoned),
        ]);
        assert_eq!(
            got,
            counts(&[
                ("created", 1),
                ("consented", 1),
                ("screened_in", 1),
                ("idle_expired:OPENING", 1)
            ])
        );
    }

    // Long by design: one decision written out field by field (the variant takes every field),
    // one completed session's events, then the whole list of counters it adds, one line each.
    #[test]
    fn a_completed_interview_counts_its_duration_turns_objectives_fields_and_spend() {
        use SessionStatus::*;
        let decision = EventBody::DecisionRecorded {
            decision_id: Uuid::from_u128(1),
            turn_id: None,
            phase: Phase::Opening,
            input_summary: String::new(),
            selected_action: AgentAction::AskQuestion {
                objective_id: "o1".into(),
            },
            proposed_action: None,
            rationale: String::new(),
            model: "gpt-test".into(),
            prompt_version_id: "p".into(),
            latency_ms: 5,
            token_usage: TokenUsage {
                prompt_tokens: 1000,
                completion_tokens: 100,
                total_tokens: 1100,
            },
            study_prompt_version: None,
            alongside: None,
            input_class: None,
            refused_proposal: None,
        };
        let got = given(vec![
            created(false),
            status(Created, Active),
            consent(true),
            decision,
            EventBody::SessionCompleted {
                summary: String::new(),
                summary_confirmed: true,
                reason: ConcludeReason::MaxTurnsReached,
            },
            status(Active, Completed),
        ]);
        assert_eq!(
            got,
            counts(&[
                ("created", 1),
                ("consented", 1),
                ("screened_in", 1),
                ("completed", 1),
                ("completed_reason:max_turns_reached", 1),
                ("duration_s:300", 1),
                ("turns:0", 1),
                ("objective_sessions:o1", 1),
                ("objective_sessions:o2", 1),
                ("field_sessions:f1", 1),
                ("field_sessions:f2", 1),
                ("model_sessions", 1),
                ("model_calls", 1),
                ("prompt_tokens", 1000),
                ("completion_tokens", 100),
                ("priced_sessions", 1),
                // 1000 × 0.5 + 100 × 2.0 micro-dollars.
                ("spend_micro_usd", 700),
            ])
        );
    }
}
