//! `GET /metrics`: what the server records through the `metrics` facade (`crate::meters`), and
//! the gauges of the present read at the scrape, for an admin's token or `METRICS_TOKEN`.

use actix_web::{get, web, HttpRequest, HttpResponse};

use crate::http::error::ApiError;
use crate::state::AppState;

/// The metrics, in Prometheus text format.
#[utoipa::path(tag = "operations", security(("bearer" = [])),
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain"),
              (status = 401), (status = 403)))]
#[get("/metrics")]
pub async fn scrape(
    state: web::Data<AppState>,
    guards: web::Data<crate::http::guards::Guards>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    crate::http::auth::require_metrics_reader(&state, &req).await?;
    // What the present looks like, read now.
    for (status, phase, n) in
        interview_projections::read::sessions_by_status_and_phase(&state.db).await?
    {
        ::metrics::gauge!("interview_sessions", "status" => status, "phase" => phase).set(n as f64);
    }
    ::metrics::gauge!("interview_streams_open").set(guards.streams.open() as f64);
    ::metrics::gauge!("interview_requests_in_flight").set(guards.inflight.open() as f64);
    let body = crate::meters::render();
    Ok(HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(body))
}
