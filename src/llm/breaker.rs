//! A circuit breaker on the model endpoint (issue 32): calls that keep failing at the endpoint
//! — a server that answers 200 and sends nothing, an error inside the stream, a provider that is
//! down or times out — are not paid for call after call. After [`OPEN_AFTER`] such failures in
//! a row no call goes out for a while (30 s); the rules interviewer decides meanwhile, as after
//! any failed call. When the pause is over exactly one call goes out as the trial: a success
//! closes the breaker, a failure opens it again for twice as long (at most 10 min). A model
//! that answers badly (no tool, unreadable or overlong arguments) is not an endpoint failure:
//! the guards deal with it, call by call. There is a breaker per model and request form
//! (`super::gateway`); opening and closing each log one line; `/readyz` and
//! `interview_model_circuit_open{form}` say where they stand.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Endpoint failures in a row that open the breaker.
pub const OPEN_AFTER: u32 = 5;
const FIRST_PAUSE: Duration = Duration::from_secs(30);
const LONGEST_PAUSE: Duration = Duration::from_secs(600);

#[derive(Debug)]
pub struct Breaker {
    /// The metric's `form` label.
    form: &'static str,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    failures_in_a_row: u32,
    open_until: Option<Instant>,
    /// The pause the next opening lasts.
    pause: Duration,
    /// The one call let through after a pause is under way.
    trial: bool,
}

impl Breaker {
    pub fn new(form: &'static str) -> Self {
        Self {
            form,
            state: Mutex::new(State {
                failures_in_a_row: 0,
                open_until: None,
                pause: FIRST_PAUSE,
                trial: false,
            }),
        }
    }

    /// `Err(seconds until a call may go)` while the breaker is open, or while its trial call
    /// is under way.
    pub fn allows(&self, now: Instant) -> Result<(), u64> {
        let mut state = self.state.lock().expect("the breaker is never poisoned");
        match state.open_until {
            Some(until) if until > now => Err((until - now).as_secs().max(1)),
            Some(_) if state.trial => Err(1),
            Some(_) => {
                state.trial = true;
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// A call's outcome: `ok`, or whether it failed at the endpoint (other failures leave the
    /// breaker as it is, but end a trial as a success: the endpoint answered).
    pub fn record(&self, outcome: Outcome, now: Instant) {
        let mut state = self.state.lock().expect("the breaker is never poisoned");
        let was_open = state.open_until.is_some();
        match outcome {
            Outcome::Answered => {
                state.failures_in_a_row = 0;
                state.pause = FIRST_PAUSE;
                state.open_until = None;
                state.trial = false;
                if was_open {
                    tracing::info!(
                        form = self.form,
                        "the model endpoint answers again; model calls resume"
                    );
                }
                metrics::gauge!("interview_model_circuit_open", "form" => self.form).set(0.0);
            }
            Outcome::EndpointFailed => {
                // A call that was already under way when the breaker opened says nothing new.
                if state.open_until.is_some_and(|until| until > now) {
                    return;
                }
                if was_open && !state.trial {
                    return;
                }
                state.trial = false;
                state.failures_in_a_row += 1;
                if state.failures_in_a_row >= OPEN_AFTER {
                    let pause = state.pause;
                    state.open_until = Some(now + pause);
                    state.pause = (pause * 2).min(LONGEST_PAUSE);
                    metrics::gauge!("interview_model_circuit_open", "form" => self.form).set(1.0);
                    tracing::warn!(
                        form = self.form,
                        failures_in_a_row = state.failures_in_a_row,
                        pause_secs = pause.as_secs(),
                        "the model endpoint keeps failing; no model calls for a while (the rules interviewer decides)"
                    );
                }
            }
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
            Some(_) => serde_json::json!({
                "circuit": "half_open",
                "failures_in_a_row": state.failures_in_a_row,
            }),
            None => serde_json::json!({
                "circuit": "closed",
                "failures_in_a_row": state.failures_in_a_row,
            }),
        }
    }
}

/// What a call tells the breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The endpoint answered (well or not).
    Answered,
    /// The endpoint failed: an HTTP error, no answer in time, an empty or broken stream.
    EndpointFailed,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_opens_after_failures_in_a_row_lets_one_trial_through_and_closes_on_an_answer() {
        let b = Breaker::new("steps");
        let t = Instant::now();
        for _ in 0..OPEN_AFTER - 1 {
            b.record(Outcome::EndpointFailed, t);
        }
        assert_eq!(b.allows(t), Ok(()), "not yet");
        b.record(Outcome::Answered, t);
        for _ in 0..OPEN_AFTER {
            b.record(Outcome::EndpointFailed, t);
        }
        assert_eq!(b.allows(t), Err(30));
        // Calls under way when it opened change nothing.
        b.record(Outcome::EndpointFailed, t);
        assert_eq!(b.allows(t), Err(30));
        // After the pause, one trial; the others wait for it.
        let later = t + Duration::from_secs(31);
        assert_eq!(b.allows(later), Ok(()));
        assert_eq!(b.allows(later), Err(1));
        b.record(Outcome::EndpointFailed, later);
        assert_eq!(b.allows(later), Err(60), "open again, for longer");
        // A trial the endpoint answers closes it, and the next opening starts short again.
        let after = later + Duration::from_secs(61);
        assert_eq!(b.allows(after), Ok(()));
        b.record(Outcome::Answered, after);
        assert_eq!(b.allows(after), Ok(()));
        for _ in 0..OPEN_AFTER {
            b.record(Outcome::EndpointFailed, after);
        }
        assert_eq!(b.allows(after), Err(30));
    }
}
