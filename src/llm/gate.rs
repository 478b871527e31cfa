//! How many requests the model endpoint gets at once, and in which order (issue 32).
//!
//! A self-hosted server often serves one request at a time: llama-cpp-python queues the rest,
//! or by default *interrupts* the running request when another arrives, ending it empty. Sending
//! the step and the extraction of the same turn at once then costs the participant a prefill's
//! wait, or costs the extraction its answer. With a limit (`MODEL_MAX_CONCURRENT_REQUESTS`, or
//! learned — see [`Gate::learn_single_slot`]) requests wait here instead, and a request a
//! participant is waiting for (a step, a screening verdict) always goes before a background one
//! (an extraction), whenever it started waiting.
//!
//! Written by hand because tokio's `Semaphore` is first come, first served: it has no notion
//! of one waiter going before another.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;

use tokio::sync::oneshot;

/// Streams cut short beside another request before the gate takes one at a time.
const LEARN_AFTER: u32 = 2;

/// Who waits for a request's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// A participant is waiting: the interviewer's next step, a screening verdict.
    Participant,
    /// Nobody is waiting: an extraction alongside a step, the final extraction.
    Background,
}

impl Priority {
    fn index(self) -> usize {
        match self {
            Self::Participant => 0,
            Self::Background => 1,
        }
    }
}

#[derive(Default)]
struct State {
    /// At most this many requests at once; 0 for no limit.
    limit: usize,
    in_flight: usize,
    /// Waiters by priority: participant-facing first.
    waiting: [VecDeque<oneshot::Sender<()>>; 2],
}

/// The gate in front of one endpoint.
#[derive(Default)]
pub struct Gate {
    state: Mutex<State>,
    /// Whether a limit was set (by the operator, `0` included, or learned): nothing more is
    /// learned then.
    limited: AtomicBool,
    /// Streams cut short while another request was in flight (see
    /// [`Gate::cut_short_beside_another`]).
    cut_short: AtomicU32,
}

/// A request's place at the endpoint, given back (to the next waiter) when dropped.
pub struct Permit<'a> {
    gate: &'a Gate,
    /// Whether another request was in flight when this one went out.
    pub shared: bool,
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.gate.release();
    }
}

/// A waiter's end of the hand-over. Should the waiting future be dropped (its call cut) just
/// after the place was handed to it, the place is passed on rather than lost.
struct Waiting<'a> {
    gate: &'a Gate,
    place: Option<oneshot::Receiver<()>>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Some(mut place) = self.place.take() {
            place.close();
            if place.try_recv().is_ok() {
                self.gate.release();
            }
        }
    }
}

impl Gate {
    /// A gate letting at most `limit` requests through at once (0: no limit), as the operator
    /// set it: never changed by what the endpoint does. [`Gate::default`] learns instead.
    pub fn new(limit: usize) -> Self {
        Self {
            state: Mutex::new(State {
                limit,
                ..State::default()
            }),
            limited: AtomicBool::new(true),
            cut_short: AtomicU32::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .expect("the gate's lock is never poisoned")
    }

    /// The current limit (0: none), for `/readyz`.
    pub fn limit(&self) -> usize {
        self.lock().limit
    }

    /// Whether more than one request holds a place now (the caller's among them).
    pub fn others_in_flight(&self) -> bool {
        self.lock().in_flight > 1
    }

    /// Waits for a place at the endpoint.
    pub async fn enter(&self, priority: Priority) -> Permit<'_> {
        let place = {
            let mut state = self.lock();
            if state.limit == 0 || state.in_flight < state.limit {
                state.in_flight += 1;
                let shared = state.in_flight > 1;
                return Permit { gate: self, shared };
            }
            let (tx, rx) = oneshot::channel();
            state.waiting[priority.index()].push_back(tx);
            rx
        };
        let mut waiting = Waiting {
            gate: self,
            place: Some(place),
        };
        let handed = waiting.place.as_mut().expect("set above").await;
        waiting.place = None;
        debug_assert!(
            handed.is_ok(),
            "a waiter's sender is only dropped by handing over"
        );
        Permit {
            gate: self,
            shared: self.lock().in_flight > 1,
        }
    }

    /// Gives a place back: to the first live waiter, participant-facing ones first.
    fn release(&self) {
        let mut state = self.lock();
        let over = state.limit > 0 && state.in_flight > state.limit;
        if !over {
            for queue in 0..2 {
                while let Some(waiter) = state.waiting[queue].pop_front() {
                    if waiter.send(()).is_ok() {
                        return;
                    }
                }
            }
        }
        state.in_flight -= 1;
    }

    /// The endpoint cut a stream short (empty, or ended without finishing) while another
    /// request was in flight. Twice, with no limit set: the server serves one request at a time
    /// (llama-cpp-python interrupts the running request when another arrives), so from now on
    /// one request goes at a time; said once. Twice, so that one dropped stream at a busy hosted
    /// provider does not slow every session down.
    pub fn cut_short_beside_another(&self) {
        if self.cut_short.fetch_add(1, Ordering::Relaxed) + 1 < LEARN_AFTER {
            return;
        }
        self.learn_single_slot();
    }

    fn learn_single_slot(&self) {
        if self.limited.swap(true, Ordering::Relaxed) {
            return;
        }
        self.lock().limit = 1;
        tracing::warn!(
            "the model endpoint failed a request while another was in flight; sending one request at a time from now on (set MODEL_MAX_CONCURRENT_REQUESTS to choose)"
        );
        metrics::counter!("interview_model_form_changes_total", "form" => "one_at_a_time")
            .increment(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    async fn settle() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    #[tokio::test]
    async fn a_participant_facing_request_goes_before_background_ones_waiting_longer() {
        let gate = Arc::new(Gate::new(1));
        let order = Arc::new(Mutex::new(Vec::new()));
        let first = gate.enter(Priority::Background).await;
        let mut tasks = Vec::new();
        for (name, priority) in [
            ("extraction", Priority::Background),
            ("step", Priority::Participant),
        ] {
            let (gate, order) = (gate.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let _permit = gate.enter(priority).await;
                order.lock().unwrap().push(name);
                settle().await;
            }));
            settle().await;
        }
        drop(first);
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), ["step", "extraction"]);
    }

    #[tokio::test]
    async fn no_limit_lets_everything_through_and_a_cut_waiter_loses_no_place() {
        let open = Gate::new(0);
        // The operator's "no limit" is not learned away.
        open.cut_short_beside_another();
        open.cut_short_beside_another();
        assert_eq!(open.limit(), 0);
        let (_a, b) = (
            open.enter(Priority::Background).await,
            open.enter(Priority::Background).await,
        );
        assert!(b.shared);

        let gate = Gate::new(1);
        let held = gate.enter(Priority::Participant).await;
        // A waiter whose call is cut while it waits.
        let cut = tokio::time::timeout(Duration::from_millis(10), gate.enter(Priority::Background));
        assert!(cut.await.is_err());
        drop(held);
        let again = tokio::time::timeout(
            Duration::from_millis(100),
            gate.enter(Priority::Participant),
        );
        assert!(again.await.is_ok(), "the place went back to the gate");
    }

    #[tokio::test]
    async fn a_learned_limit_takes_effect_once_the_calls_in_flight_end() {
        let gate = Gate::default();
        let (a, b) = (
            gate.enter(Priority::Background).await,
            gate.enter(Priority::Participant).await,
        );
        gate.cut_short_beside_another();
        assert_eq!(gate.limit(), 0, "once is not enough");
        gate.cut_short_beside_another();
        assert_eq!(gate.limit(), 1);
        drop(a);
        // One still in flight: the next waits until it ends.
        let waits =
            tokio::time::timeout(Duration::from_millis(10), gate.enter(Priority::Participant));
        assert!(waits.await.is_err());
        drop(b);
        let c = gate.enter(Priority::Participant).await;
        assert!(!c.shared);
    }
}
