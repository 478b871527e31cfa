//! Liveness and readiness.

use actix_web::{get, web, HttpResponse};
use serde_json::json;

use crate::error::ApiError;
use crate::state::AppState;

/// The process is up.
#[utoipa::path(get, path = "/healthz", tag = "operations", responses((status = 200, description = "alive")))]
#[get("/healthz")]
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({ "status": "ok" }))
}

/// The database answers.
#[utoipa::path(get, path = "/readyz", tag = "operations", responses(
    (status = 200, description = "ready"),
    (status = 503, description = "database unreachable")))]
#[get("/readyz")]
pub async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    state.db.ping().await?;
    Ok(HttpResponse::Ok().json(json!({ "status": "ready", "database": state.db.backend() })))
}
