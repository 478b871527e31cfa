//! A circuit breaker on the model endpoint (issue 32): an endpoint whose calls keep failing —
//! a server that answers 200 and sends nothing, a provider that is down, a key that was
//! revoked — is not paid for call after call. After [`OPEN_AFTER`] failed calls in a row no
//! call goes out for a while (30 s, doubling while it keeps failing, at most 10 min); the rules
//! interviewer decides meanwhile, as after any failed call. The first call after the pause is
//! the trial: a success closes the breaker, a failure opens it again for longer. Opening and
//! closing each log one line; `/readyz` and `interview_model_circuit_open` say where it stands.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failed calls in a row that open the breaker.
pub const OPEN_AFTER: u32 = 5;
const FIRST_PAUSE: Duration = Duration::from_secs(30);
const LONGEST_PAUSE: Duration = Duration::from_secs(600);

#[derive(Debug)]
pub struct Breaker {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    failures_in_a_row: u32,
    open_until: Option<Instant>,
    pause: Duration,
}

impl Default for Breaker {
    fn default() -> Self {
        Self {
            state: Mutex::new(State {
                failures_in_a_row: 0,
                open_until: None,
                pause: FIRST_PAUSE,
            }),
        }
    }
}

impl Breaker {
    /// `Err(seconds until the next trial)` while the breaker is open.
    pub fn allows(&self, now: Instant) -> Result<(), u64> {
        let state = self.state.lock().expect("the breaker is never poisoned");
        match state.open_until {
            Some(until) if until > now => Err((until - now).as_secs().max(1)),
            _ => Ok(()),
        }
    }

    /// A call's outcome (`ok`: the endpoint answered with a complete stream).
    pub fn record(&self, ok: bool, now: Instant) {
        let mut state = self.state.lock().expect("the breaker is never poisoned");
        if ok {
            if state.open_until.take().is_some() || state.failures_in_a_row >= OPEN_AFTER {
                tracing::info!("the model endpoint answers again; model calls resume");
            }
            state.failures_in_a_row = 0;
            state.pause = FIRST_PAUSE;
            metrics::gauge!("interview_model_circuit_open").set(0.0);
            return;
        }
        state.failures_in_a_row += 1;
        if state.failures_in_a_row >= OPEN_AFTER {
            let pause = state.pause;
            state.open_until = Some(now + pause);
            state.pause = (pause * 2).min(LONGEST_PAUSE);
            metrics::gauge!("interview_model_circuit_open").set(1.0);
            tracing::warn!(
                failures_in_a_row = state.failures_in_a_row,
                pause_secs = pause.as_secs(),
                "the model endpoint keeps failing; no model calls for a while (the rules interviewer decides)"
            );
        }
    }

    /// Where it stands, for `/readyz`.
    pub fn status(&self, now: Instant) -> serde_json::Value {
        let state = self.state.lock().expect("the breaker is never poisoned");
        match state.open_until {
            Some(until) if until > now => serde_json::json!({
                "circuit": "open",
                "retry_in_secs": (until - now).as_secs().max(1),
                "failures_in_a_row": state.failures_in_a_row,
            }),
            _ => serde_json::json!({
                "circuit": "closed",
                "failures_in_a_row": state.failures_in_a_row,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_opens_after_failures_in_a_row_and_closes_on_a_success() {
        let b = Breaker::default();
        let t = Instant::now();
        for _ in 0..OPEN_AFTER - 1 {
            b.record(false, t);
        }
        assert_eq!(b.allows(t), Ok(()), "not yet");
        b.record(true, t);
        for _ in 0..OPEN_AFTER {
            b.record(false, t);
        }
        assert_eq!(b.allows(t), Err(30));
        // The trial after the pause fails: open again, for longer.
        let later = t + Duration::from_secs(31);
        assert_eq!(b.allows(later), Ok(()));
        b.record(false, later);
        assert_eq!(b.allows(later), Err(60));
        // A success closes it, and the next opening starts short again.
        let after = later + Duration::from_secs(61);
        b.record(true, after);
        assert_eq!(b.allows(after), Ok(()));
        for _ in 0..OPEN_AFTER {
            b.record(false, after);
        }
        assert_eq!(b.allows(after), Err(30));
    }
}
