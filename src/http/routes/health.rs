//! Liveness and readiness.

use actix_web::{get, web, HttpResponse};
use serde_json::json;

use crate::http::error::ApiError;
use crate::state::AppState;

/// The process is up.
#[utoipa::path(tag = "operations", responses((status = 200, description = "alive")))]
#[get("/healthz")]
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({ "status": "ok" }))
}

/// The database answers.
#[utoipa::path(tag = "operations", responses(
    (status = 200, description = "ready"),
    (status = 503, description = "database unreachable")))]
#[get("/readyz")]
pub async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    // One check at a time, its answer shared for READY_FOR: a flood of probes (they are outside
    // the request cap) costs the database one round trip per interval, not one per probe.
    let mut last = state.readiness.lock().await;
    let ready = match *last {
        Some((at, ready)) if at.elapsed() < READY_FOR => ready,
        _ => {
            let ready = match state.db.ping().await {
                Ok(()) => true,
                Err(error) => {
                    tracing::warn!(%error, "readiness check: the database does not answer");
                    false
                }
            };
            *last = Some((std::time::Instant::now(), ready));
            ready
        }
    };
    drop(last);
    if !ready {
        return Err(ApiError::Unavailable("the database does not answer".into()));
    }
    // The model endpoint's state is reported, not judged: the rules interviewer answers while
    // it is unwell, so the process stays ready.
    let mut body = json!({ "status": "ready", "database": state.db.backend() });
    if let Some(model) = state.interviewer.model_status() {
        body["model"] = model;
    }
    Ok(HttpResponse::Ok().json(body))
}

/// How long one readiness check answers for.
pub const READY_FOR: std::time::Duration = std::time::Duration::from_millis(500);
