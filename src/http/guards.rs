//! The HTTP layer's guards, kept apart from the domain services in [`crate::state::AppState`]:
//! the rate limiters, the caps on open streams and requests in flight, and the budget of
//! request bodies being read. Built once per server from its settings and handed to the door
//! and the routes that need them as `web::Data<Guards>`.

use super::limits::{BodyBudget, Gauge, RateLimiter, StreamLimits};
use crate::settings::Settings;

pub struct Guards {
    /// New sessions per client address, and per study.
    pub create_by_address: RateLimiter,
    pub create_by_study: RateLimiter,
    /// A session's inputs (messages, widget answers, ends) per minute.
    pub inputs_by_session: RateLimiter,
    /// Open event streams, and requests in flight.
    pub streams: StreamLimits,
    pub inflight: Gauge,
    /// Bytes of request bodies being read at the door.
    pub body_budget: BodyBudget,
}

impl Guards {
    /// The server's guards, from a request it is serving (`startup.rs` registers them).
    pub fn of(req: &actix_web::HttpRequest) -> &Self {
        req.app_data::<actix_web::web::Data<Self>>()
            .expect("the server registers its guards")
    }

    pub fn new(settings: &Settings) -> Self {
        Self {
            create_by_address: RateLimiter::new(settings.create_rate_per_address),
            create_by_study: RateLimiter::new(settings.create_rate_per_study),
            inputs_by_session: RateLimiter::new(settings.inputs_per_session_per_minute),
            streams: StreamLimits::new(settings.max_streams, settings.max_streams_per_session),
            inflight: Gauge::new(settings.max_inflight_requests),
            body_budget: BodyBudget::new(settings.max_pending_body_bytes),
        }
    }
}
