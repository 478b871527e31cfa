//! Logging: `tracing` with an env filter (RUST_LOG), text or JSON, and a request-id span around
//! every request. Only the path is logged — never the query string (it may carry a token) and
//! never headers.

use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{Error, HttpMessage, HttpRequest};
use tracing::Instrument;
use tracing_subscriber::EnvFilter;

use crate::settings::LogFormat;

/// Installs the global subscriber (once; later calls are ignored, which suits tests).
pub fn init(format: LogFormat) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false);
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// The id of the current request; also stored in every event's metadata.
#[derive(Clone, Debug)]
pub struct RequestId(pub String);

pub fn request_id(req: &HttpRequest) -> String {
    req.extensions()
        .get::<RequestId>()
        .map(|r| r.0.clone())
        .unwrap_or_default()
}

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Middleware: adopts a sane `X-Request-Id` or makes one, opens the request span, logs the
/// outcome and echoes the id in the response.
pub async fn request_span(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let id = req
        .headers()
        .get(&REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|s| {
            !s.is_empty()
                && s.len() <= 64
                && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
        .map(String::from)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    req.extensions_mut().insert(RequestId(id.clone()));
    let span = tracing::info_span!("request", method = %req.method(), path = %req.path(), request_id = %id);
    let started = Instant::now();
    let mut res = next.call(req).instrument(span.clone()).await?;
    if let Ok(value) = HeaderValue::from_str(&id) {
        res.headers_mut().insert(REQUEST_ID, value);
    }
    span.in_scope(|| {
        tracing::info!(
            status = res.status().as_u16(),
            latency_us = started.elapsed().as_micros() as u64,
            "request finished"
        )
    });
    Ok(res)
}
