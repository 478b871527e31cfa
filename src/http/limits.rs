//! Overload protection: a token-bucket rate limit on the public create-session route (per client
//! address and per study), and the gauges behind the caps on requests in flight and open event
//! streams (the door, `crate::http::door`, applies the first). Each
//! refusal is quick and explicit (429 or 503 with `Retry-After`) instead of queueing until memory
//! runs out. Limits are per process; behind several processes, divide them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A token bucket per key: `per_minute` tokens, refilled continuously, bursting to the same.
pub struct RateLimiter {
    per_minute: u32,
    buckets: Mutex<HashMap<String, (f64, Instant)>>,
}

impl RateLimiter {
    /// `per_minute` 0 turns the limit off.
    pub fn new(per_minute: u32) -> Self {
        Self {
            per_minute,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes a token for `key`; when none is left, the seconds until one is.
    pub fn check(&self, key: &str) -> Result<(), u64> {
        if self.per_minute == 0 {
            return Ok(());
        }
        let capacity = f64::from(self.per_minute);
        let per_sec = capacity / 60.0;
        let now = Instant::now();
        let mut buckets = self.buckets.lock().expect("rate limiter lock");
        if buckets.len() > 100_000 {
            // Forget full buckets (idle keys) so the map cannot grow without bound.
            buckets.retain(|_, (tokens, at)| {
                *tokens + now.duration_since(*at).as_secs_f64() * per_sec < capacity
            });
        }
        let (tokens, at) = buckets.entry(key.to_string()).or_insert((capacity, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * per_sec).min(capacity);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - *tokens) / per_sec).ceil().max(1.0) as u64)
        }
    }
}

/// Counts something open (an event stream, a request in flight) against a cap.
#[derive(Clone)]
pub struct Gauge {
    open: Arc<AtomicUsize>,
    max: usize,
}

/// One open slot; dropping it frees the slot.
pub struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Gauge {
    /// `max` 0 means no cap.
    pub fn new(max: usize) -> Self {
        Self {
            open: Arc::new(AtomicUsize::new(0)),
            max,
        }
    }

    pub fn try_open(&self) -> Option<Slot> {
        let now = self.open.fetch_add(1, Ordering::AcqRel) + 1;
        let slot = Slot(self.open.clone());
        if self.max != 0 && now > self.max {
            return None; // the slot drops here, undoing the count
        }
        Some(slot)
    }

    pub fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }
}

/// The caps on open event streams: in all (`MAX_STREAMS`) and per session
/// (`MAX_STREAMS_PER_SESSION`), so one session's token cannot take every stream.
pub struct StreamLimits {
    all: Gauge,
    per_session: usize,
    open: Arc<Mutex<HashMap<String, usize>>>,
}

/// One open stream; dropping it frees both of its places.
pub struct StreamSlot {
    _all: Slot,
    session: String,
    open: Arc<Mutex<HashMap<String, usize>>>,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().expect("stream counts");
        if let Some(n) = open.get_mut(&self.session) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.session);
            }
        }
    }
}

impl StreamLimits {
    /// `max` and `per_session` 0 mean no cap.
    pub fn new(max: usize, per_session: usize) -> Self {
        Self {
            all: Gauge::new(max),
            per_session,
            open: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// A place for one more stream of `session`, or which cap is full.
    pub fn try_open(&self, session: &str) -> Result<StreamSlot, &'static str> {
        let all = self.all.try_open().ok_or("open event streams")?;
        let mut open = self.open.lock().expect("stream counts");
        let n = open.entry(session.to_string()).or_insert(0);
        if self.per_session != 0 && *n >= self.per_session {
            return Err("open event streams of this session");
        }
        *n += 1;
        Ok(StreamSlot {
            _all: all,
            session: session.to_string(),
            open: self.open.clone(),
        })
    }

    /// Streams open in all.
    pub fn open(&self) -> usize {
        self.all.open()
    }
}

/// Bytes of request bodies being read at the door at once, across all connections; beyond it a
/// body is refused 503 `overloaded` (so thousands of slow uploads cannot fill memory).
pub struct BodyBudget {
    max: usize,
    used: Arc<std::sync::atomic::AtomicUsize>,
}

/// Bytes held against the budget until the request is answered.
pub struct HeldBytes {
    used: Arc<std::sync::atomic::AtomicUsize>,
    bytes: usize,
}

impl Drop for HeldBytes {
    fn drop(&mut self) {
        self.used
            .fetch_sub(self.bytes, std::sync::atomic::Ordering::AcqRel);
    }
}

impl BodyBudget {
    /// `max` 0 means no budget.
    pub fn new(max: usize) -> Self {
        Self {
            max,
            used: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
        }
    }

    pub(crate) fn hold(&self) -> HeldBytes {
        HeldBytes {
            used: self.used.clone(),
            bytes: 0,
        }
    }

    /// Adds `bytes` to `held`, or refuses when the budget would be exceeded.
    pub(crate) fn take(&self, held: &mut HeldBytes, bytes: usize) -> bool {
        let now = self
            .used
            .fetch_add(bytes, std::sync::atomic::Ordering::AcqRel)
            + bytes;
        held.bytes += bytes;
        self.max == 0 || now <= self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_refuses_with_a_wait() {
        let limiter = RateLimiter::new(3);
        for _ in 0..3 {
            assert_eq!(limiter.check("a"), Ok(()));
        }
        assert_eq!(limiter.check("a"), Err(20));
        assert_eq!(limiter.check("b"), Ok(()), "keys are separate");
        assert_eq!(RateLimiter::new(0).check("a"), Ok(()));
    }

    #[test]
    fn streams_are_capped_per_session_and_in_all() {
        let limits = StreamLimits::new(3, 2);
        let a1 = limits.try_open("a").unwrap();
        let _a2 = limits.try_open("a").unwrap();
        assert_eq!(
            limits.try_open("a").err(),
            Some("open event streams of this session")
        );
        let _b = limits.try_open("b").unwrap();
        assert_eq!(limits.try_open("c").err(), Some("open event streams"));
        drop(a1);
        assert_eq!(limits.open(), 2);
        assert!(limits.try_open("a").is_ok());
    }

    #[test]
    fn a_gauge_caps_and_frees_its_slots() {
        let gauge = Gauge::new(2);
        let a = gauge.try_open().unwrap();
        let _b = gauge.try_open().unwrap();
        assert!(gauge.try_open().is_none());
        assert_eq!(gauge.open(), 2);
        drop(a);
        assert!(gauge.try_open().is_some());
    }
}
