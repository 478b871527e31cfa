//! What the model may spend: a few calls per participant turn, the study's token budget per
//! session, and the operator's daily token cap per process. Past any of them the rules
//! interviewer decides, and the decision's rationale says which limit was reached
//! (`docs/llm-contract.md`, "Budgets").
//!
//! Turn and session spend are counted from the session's events (so they hold across restarts
//! and processes); the daily cap is this process's own count.

use std::sync::Mutex;

use chrono::{DateTime, NaiveDate, Utc};
use interview_session::events::{EventBody, SessionEvent};
use interview_session::study::ModelConfig;

/// Model calls between a participant's input and the next wait for the participant.
pub const MAX_MODEL_CALLS_PER_TURN: usize = 3;

/// The limit that stops the model for now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spent {
    Turn,
    Session { budget: u64 },
    Server { cap: u64 },
}

impl Spent {
    /// The opening of the rationale of the decision the rules interviewer makes instead.
    pub fn reason(self) -> String {
        match self {
            Spent::Turn => format!(
                "The model was called {MAX_MODEL_CALLS_PER_TURN} times since the participant's last input (the limit per turn)"
            ),
            Spent::Session { budget } => {
                format!("The session's model budget ({budget} tokens) is spent")
            }
            Spent::Server { cap } => {
                format!("The server's daily model cap ({cap} tokens) is spent")
            }
        }
    }
}

/// Model calls since the participant's last input: decisions a model made, failed calls
/// (recorded errors from the model, or its text refused) and screening verdicts it gave.
pub fn calls_this_turn(events: &[SessionEvent]) -> usize {
    events
        .iter()
        .rev()
        .take_while(|e| {
            !matches!(
                e.body,
                EventBody::ParticipantMessageCreated { .. }
                    | EventBody::InteractionSubmitted { .. }
            )
        })
        .filter_map(|e| e.body.model_use())
        .map(|used| used.calls as usize)
        .sum()
}

/// Tokens the session's model calls have cost so far (failed calls included: a fallback's
/// decision carries them).
pub fn session_tokens(events: &[SessionEvent]) -> u64 {
    events
        .iter()
        .filter_map(|e| e.body.model_use())
        .map(|used| used.total_tokens)
        .sum()
}

/// This process's model spend per UTC day, against the operator's cap (0 = none).
#[derive(Debug, Default)]
pub struct DailyCap {
    cap: u64,
    spent: Mutex<(Option<NaiveDate>, u64)>,
}

impl DailyCap {
    pub fn new(cap: u64) -> Self {
        Self {
            cap,
            spent: Mutex::default(),
        }
    }

    fn today(&self, now: DateTime<Utc>) -> u64 {
        let mut spent = self
            .spent
            .lock()
            .expect("the spend count is never poisoned");
        if spent.0 != Some(now.date_naive()) {
            *spent = (Some(now.date_naive()), 0);
        }
        spent.1
    }

    pub fn spend(&self, tokens: u64, now: DateTime<Utc>) {
        self.today(now);
        self.spent
            .lock()
            .expect("the spend count is never poisoned")
            .1 += tokens;
    }

    fn exhausted(&self, now: DateTime<Utc>) -> bool {
        self.cap > 0 && self.today(now) >= self.cap
    }
}

/// The limit that keeps the model from the next decision, if one does. `per_turn` is false for
/// screening (one call, not a loop).
pub fn check(
    events: &[SessionEvent],
    model: &ModelConfig,
    daily: &DailyCap,
    now: DateTime<Utc>,
    per_turn: bool,
) -> Option<Spent> {
    if daily.exhausted(now) {
        return Some(Spent::Server { cap: daily.cap });
    }
    if let Some(budget) = model.max_tokens_per_session {
        if session_tokens(events) >= budget {
            return Some(Spent::Session { budget });
        }
    }
    (per_turn && calls_this_turn(events) >= MAX_MODEL_CALLS_PER_TURN).then_some(Spent::Turn)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn the_daily_cap_resets_each_utc_day() {
        let cap = DailyCap::new(100);
        let day = Utc.with_ymd_and_hms(2026, 12, 1, 23, 0, 0).unwrap();
        cap.spend(60, day);
        assert!(!cap.exhausted(day));
        cap.spend(40, day);
        assert!(cap.exhausted(day));
        assert!(!cap.exhausted(day + chrono::Duration::hours(2)));
        assert!(!DailyCap::new(0).exhausted(day), "0 is no cap");
    }
}
