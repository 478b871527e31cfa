//! What the model may spend (issue 30: bounded by default): a few calls per participant turn,
//! tokens per session (the study's `model.max_tokens_per_session`, else the operator's
//! default), and this process's tokens per UTC day — in all, per study, and per hour on the
//! inputs of one client address, so no stranger spends what the others need. Past any of them
//! the rules interviewer decides, the decision's rationale says which limit was reached, a
//! warning is logged and `interview_model_budget_reached_total{limit}` counts it
//! (`docs/llm-contract.md`, "Budgets"; worst cases in `docs/security.md`).
//!
//! Turn and session spend are counted from the session's events (so they hold across restarts
//! and processes); the others are this process's own counts.

use std::collections::HashMap;
use std::sync::Mutex;

use chrono::{DateTime, NaiveDate, Utc};
use hashlink::LruCache;
use interview_session::events::{EventBody, SessionEvent};
use interview_session::study::{ModelConfig, ModelPrice};

/// Model calls between a participant's input and the next wait for the participant.
pub const MAX_MODEL_CALLS_PER_TURN: usize = 3;

/// The limit that stops the model for now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spent {
    Turn,
    Session {
        budget: u64,
    },
    Server {
        cap: u64,
    },
    Study {
        cap: u64,
    },
    Address {
        cap: u64,
    },
    /// The study's `model.max_usd_per_session`, in micro-dollars.
    SessionMoney {
        cap_micro_usd: u64,
    },
    /// The study's `model.max_usd_per_day`, in micro-dollars.
    StudyMoney {
        cap_micro_usd: u64,
    },
}

fn usd(micro: u64) -> String {
    format!("${}", micro as f64 / 1e6)
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
            Spent::Study { cap } => {
                format!("The study's daily model cap on this server ({cap} tokens) is spent")
            }
            Spent::Address { cap } => format!(
                "The hourly model cap for one network address ({cap} tokens) is spent"
            ),
            Spent::SessionMoney { cap_micro_usd } => format!(
                "The session's model budget ({}) is spent",
                usd(cap_micro_usd)
            ),
            Spent::StudyMoney { cap_micro_usd } => format!(
                "The study's daily model budget on this server ({}) is spent",
                usd(cap_micro_usd)
            ),
        }
    }

    /// The limit's name in the metric and the log.
    pub fn name(self) -> &'static str {
        match self {
            Spent::Turn => "turn",
            Spent::Session { .. } => "session",
            Spent::Server { .. } => "server_day",
            Spent::Study { .. } => "study_day",
            Spent::Address { .. } => "address_hour",
            Spent::SessionMoney { .. } => "session_usd",
            Spent::StudyMoney { .. } => "study_day_usd",
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

/// What the session's model calls have cost so far at `price`, in micro-dollars.
pub fn session_micro_usd(events: &[SessionEvent], price: &ModelPrice) -> u64 {
    let (prompt, completion) = events
        .iter()
        .filter_map(|e| e.body.model_use())
        .fold((0, 0), |(p, c), used| {
            (p + used.prompt_tokens, c + used.completion_tokens)
        });
    price.micro_usd(prompt, completion)
}

/// The operator's limits (0 = none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    pub per_day: u64,
    pub per_study_per_day: u64,
    pub per_session: u64,
    pub per_address_per_hour: u64,
}

/// This process's model spend against the operator's limits, and which client address each
/// session's inputs last came from (so the calls they cause are charged to it).
#[derive(Debug)]
pub struct Budgets {
    limits: Limits,
    spent: Mutex<Spend>,
    addresses: Mutex<LruCache<String, String>>,
}

#[derive(Debug, Default)]
struct Spend {
    day: Option<NaiveDate>,
    total: u64,
    by_study: HashMap<String, u64>,
    /// Micro-dollars per study, for studies that give a price.
    by_study_micro_usd: HashMap<String, u64>,
    /// The hour (since the epoch) and the tokens per address in it.
    hour: i64,
    by_address: HashMap<String, u64>,
}

/// Sessions whose client address is remembered (least recently used first out).
const ADDRESSES: usize = 100_000;

impl Default for Budgets {
    fn default() -> Self {
        Self::new(Limits::default())
    }
}

impl Budgets {
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            spent: Mutex::default(),
            addresses: Mutex::new(LruCache::new(ADDRESSES)),
        }
    }

    /// Remembers the client address a session's latest input came from.
    pub fn note_address(&self, session_id: &str, address: &str) {
        self.addresses
            .lock()
            .expect("the address map is never poisoned")
            .insert(session_id.to_string(), address.to_string());
    }

    /// Forgets the client address of a session (its data was erased).
    pub fn forget_address(&self, session_id: &str) {
        self.addresses
            .lock()
            .expect("the address map is never poisoned")
            .remove(session_id);
    }

    fn address_of(&self, session_id: &str) -> Option<String> {
        self.addresses
            .lock()
            .expect("the address map is never poisoned")
            .get(session_id)
            .cloned()
    }

    /// The spend so far, rolled over to `now`'s day and hour.
    fn current(&self, now: DateTime<Utc>) -> std::sync::MutexGuard<'_, Spend> {
        let mut spent = self
            .spent
            .lock()
            .expect("the spend count is never poisoned");
        if spent.day != Some(now.date_naive()) {
            spent.day = Some(now.date_naive());
            spent.total = 0;
            spent.by_study.clear();
            spent.by_study_micro_usd.clear();
        }
        let hour = now.timestamp() / 3600;
        if spent.hour != hour {
            spent.hour = hour;
            spent.by_address.clear();
        }
        spent
    }

    /// Charges a call's tokens to this process, the study and the session's address, and its
    /// cost to the study when the study gives a price.
    pub fn spend(
        &self,
        session_id: &str,
        study_id: &str,
        tokens: u64,
        micro_usd: Option<u64>,
        now: DateTime<Utc>,
    ) {
        let address = self.address_of(session_id);
        let mut spent = self.current(now);
        spent.total += tokens;
        *spent.by_study.entry(study_id.to_string()).or_default() += tokens;
        if let Some(micro_usd) = micro_usd {
            *spent
                .by_study_micro_usd
                .entry(study_id.to_string())
                .or_default() += micro_usd;
        }
        if let Some(address) = address {
            *spent.by_address.entry(address).or_default() += tokens;
        }
    }

    /// The process-wide limit reached, if one is (day, study, address).
    fn shared_limit(&self, session_id: &str, study_id: &str, now: DateTime<Utc>) -> Option<Spent> {
        let address = self.address_of(session_id);
        let spent = self.current(now);
        let over = |cap: u64, used: u64| cap > 0 && used >= cap;
        let l = self.limits;
        if over(l.per_day, spent.total) {
            return Some(Spent::Server { cap: l.per_day });
        }
        if over(
            l.per_study_per_day,
            spent.by_study.get(study_id).copied().unwrap_or(0),
        ) {
            return Some(Spent::Study {
                cap: l.per_study_per_day,
            });
        }
        let by_address = address.and_then(|a| spent.by_address.get(&a).copied());
        if over(l.per_address_per_hour, by_address.unwrap_or(0)) {
            return Some(Spent::Address {
                cap: l.per_address_per_hour,
            });
        }
        None
    }
}

/// The limit that keeps the model from the next decision of a session, if one does (and then
/// it is logged and counted). `per_turn` is false for screening and the final extraction (one
/// call, not a loop).
pub fn check(
    events: &[SessionEvent],
    study: &interview_session::study::PinnedStudy,
    budgets: &Budgets,
    session_id: &str,
    now: DateTime<Utc>,
    per_turn: bool,
) -> Option<Spent> {
    let spent = limit(
        events,
        &study.model_config,
        budgets,
        session_id,
        &study.study_id,
        now,
        per_turn,
    )?;
    metrics::counter!("interview_model_budget_reached_total", "limit" => spent.name()).increment(1);
    tracing::warn!(
        session_id,
        study_id = %study.study_id,
        limit = spent.name(),
        "model budget reached; the rules interviewer decides: {}",
        spent.reason()
    );
    Some(spent)
}

fn limit(
    events: &[SessionEvent],
    model: &ModelConfig,
    budgets: &Budgets,
    session_id: &str,
    study_id: &str,
    now: DateTime<Utc>,
    per_turn: bool,
) -> Option<Spent> {
    if let Some(spent) = budgets.shared_limit(session_id, study_id, now) {
        return Some(spent);
    }
    if let Some(spent) = money_limit(events, model, budgets, study_id, now) {
        return Some(spent);
    }
    let budget = model
        .max_tokens_per_session
        .or((budgets.limits.per_session > 0).then_some(budgets.limits.per_session));
    if let Some(budget) = budget {
        if session_tokens(events) >= budget {
            return Some(Spent::Session { budget });
        }
    }
    (per_turn && calls_this_turn(events) >= MAX_MODEL_CALLS_PER_TURN).then_some(Spent::Turn)
}

/// The study's budgets in money, where it gives a price.
fn money_limit(
    events: &[SessionEvent],
    model: &ModelConfig,
    budgets: &Budgets,
    study_id: &str,
    now: DateTime<Utc>,
) -> Option<Spent> {
    let price = model.price_per_million_tokens?;
    let micro = |usd: f64| (usd * 1e6).round() as u64;
    if let Some(cap_micro_usd) = model.max_usd_per_session.map(micro) {
        if session_micro_usd(events, &price) >= cap_micro_usd {
            return Some(Spent::SessionMoney { cap_micro_usd });
        }
    }
    if let Some(cap_micro_usd) = model.max_usd_per_day.map(micro) {
        let spent = budgets.current(now);
        if spent.by_study_micro_usd.get(study_id).copied().unwrap_or(0) >= cap_micro_usd {
            return Some(Spent::StudyMoney { cap_micro_usd });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn budgets() -> Budgets {
        Budgets::new(Limits {
            per_day: 100,
            per_study_per_day: 60,
            per_session: 0,
            per_address_per_hour: 30,
        })
    }

    #[test]
    fn each_shared_limit_holds_and_rolls_over() {
        let at = Utc.with_ymd_and_hms(2026, 12, 1, 10, 10, 0).unwrap();
        let b = budgets();
        b.note_address("s1", "203.0.113.7");
        b.spend("s1", "study-a", 29, None, at);
        assert_eq!(b.shared_limit("s1", "study-a", at), None);
        b.spend("s1", "study-a", 1, None, at);
        // One address's hour is spent; another session from elsewhere goes on.
        assert_eq!(
            b.shared_limit("s1", "study-a", at),
            Some(Spent::Address { cap: 30 })
        );
        assert_eq!(b.shared_limit("s2", "study-a", at), None);
        // Erased, a session's address is forgotten: its calls are charged to no address.
        b.forget_address("s1");
        assert_eq!(b.address_of("s1"), None);
        b.note_address("s1", "203.0.113.7");
        assert_eq!(
            b.shared_limit("s1", "study-a", at + chrono::Duration::hours(1)),
            None
        );
        b.spend("s2", "study-a", 30, None, at);
        assert_eq!(
            b.shared_limit("s2", "study-a", at),
            Some(Spent::Study { cap: 60 })
        );
        assert_eq!(
            b.shared_limit("s2", "study-b", at),
            None,
            "another study goes on"
        );
        b.spend("s3", "study-b", 40, None, at);
        assert_eq!(
            b.shared_limit("s3", "study-c", at),
            Some(Spent::Server { cap: 100 })
        );
        // A new UTC day starts from zero.
        let tomorrow = at + chrono::Duration::hours(14);
        assert_eq!(b.shared_limit("s3", "study-a", tomorrow), None);
        assert_eq!(
            Budgets::default().shared_limit("s", "x", at),
            None,
            "0 is no cap"
        );
    }

    #[test]
    fn a_study_with_a_price_spends_within_its_money() {
        let at = Utc.with_ymd_and_hms(2026, 12, 1, 10, 10, 0).unwrap();
        let model = ModelConfig {
            price_per_million_tokens: Some(ModelPrice {
                prompt: 10.0,
                completion: 30.0,
            }),
            max_usd_per_day: Some(0.01),
            ..ModelConfig::default()
        };
        let b = Budgets::default();
        // 120 prompt and 30 completion tokens: 2,100 micro-dollars a call.
        for _ in 0..4 {
            b.spend("s1", "study-a", 150, Some(2_100), at);
        }
        assert_eq!(money_limit(&[], &model, &b, "study-a", at), None);
        b.spend("s1", "study-a", 150, Some(2_100), at);
        assert_eq!(
            money_limit(&[], &model, &b, "study-a", at),
            Some(Spent::StudyMoney {
                cap_micro_usd: 10_000
            })
        );
        assert_eq!(money_limit(&[], &model, &b, "study-b", at), None);
        let tomorrow = at + chrono::Duration::hours(14);
        assert_eq!(money_limit(&[], &model, &b, "study-a", tomorrow), None);
        assert_eq!(
            Spent::StudyMoney {
                cap_micro_usd: 10_000
            }
            .reason(),
            "The study's daily model budget on this server ($0.01) is spent"
        );
    }
}
