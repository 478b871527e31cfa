//! Logging and traces: `tracing` with an env filter (RUST_LOG), logs in text or JSON, a span
//! around every request (its request id, and the session once the route knows it) under which
//! the interviewer runs it starts, the commands, commits and model calls nest; with the `otlp`
//! feature and `OTEL_EXPORTER_OTLP_ENDPOINT`, the spans go to an OTLP collector as traces.
//! Only the path is logged — never the query string (it may carry a token) and never headers.

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
    drop(init_with(format, None));
}

/// Installs the global subscriber: logs in `format`, and — in a server built with the `otlp`
/// feature, when `otlp_endpoint` is set — every span sent as a trace to that OTLP/HTTP
/// collector. Keep the answer until exit: dropping it sends the spans still buffered.
pub fn init_with(format: LogFormat, otlp_endpoint: Option<&str>) -> Traces {
    use tracing_subscriber::prelude::*;
    use tracing_subscriber::{Layer, Registry};
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    let logs: Box<dyn Layer<Registry> + Send + Sync> = match format {
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_target(false)
            .boxed(),
        LogFormat::Text => tracing_subscriber::fmt::layer().with_target(false).boxed(),
    };
    let mut layers = vec![logs];
    let traces = match otlp_endpoint {
        Some(endpoint) => otlp::start(endpoint, &mut layers),
        None => Traces::default(),
    };
    let _ = tracing_subscriber::registry()
        .with(layers)
        .with(filter)
        .try_init();
    if let (Some(_), false) = (otlp_endpoint, cfg!(feature = "otlp")) {
        tracing::warn!("OTEL_EXPORTER_OTLP_ENDPOINT is set, but this server was built without the otlp feature: no traces are sent");
    }
    traces
}

/// The trace exporter, while traces are sent; flushed and stopped when dropped.
#[derive(Default)]
pub struct Traces {
    #[cfg(feature = "otlp")]
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Drop for Traces {
    fn drop(&mut self) {
        #[cfg(feature = "otlp")]
        if let Some(provider) = self.provider.take() {
            // Off the async runtime: the exporter's blocking HTTP client may not be dropped on it.
            let _ = std::thread::spawn(move || provider.shutdown()).join();
        }
    }
}

#[cfg(not(feature = "otlp"))]
mod otlp {
    use tracing_subscriber::{Layer, Registry};

    pub fn start(_: &str, _: &mut Vec<Box<dyn Layer<Registry> + Send + Sync>>) -> super::Traces {
        super::Traces::default()
    }
}

#[cfg(feature = "otlp")]
mod otlp {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_otlp::WithExportConfig;
    use tracing_subscriber::{Layer, Registry};

    /// Adds the layer that turns spans into OTLP traces for `endpoint` (its `/v1/traces`).
    pub fn start(
        endpoint: &str,
        layers: &mut Vec<Box<dyn Layer<Registry> + Send + Sync>>,
    ) -> super::Traces {
        let base = endpoint.trim_end_matches('/');
        let url = if base.ends_with("/v1/traces") {
            base.to_string()
        } else {
            format!("{base}/v1/traces")
        };
        // Built off the async runtime: the exporter's blocking HTTP client refuses to start on it.
        let built = std::thread::spawn(move || {
            opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_endpoint(url)
                .build()
        })
        .join();
        let exporter = match built {
            Ok(Ok(exporter)) => exporter,
            Ok(Err(error)) => {
                eprintln!("warning: no traces are sent: {error}");
                return super::Traces::default();
            }
            Err(_) => return super::Traces::default(),
        };
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name("interview-runtime")
            .build();
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("interview-runtime");
        layers.push(tracing_opentelemetry::layer().with_tracer(tracer).boxed());
        super::Traces {
            provider: Some(provider),
        }
    }
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

/// Names the session the current request is about on its span (and so on every log line and
/// trace span under it). Called by the routes once they have checked the id.
pub fn note_session(session_id: impl std::fmt::Display) {
    tracing::Span::current().record("session_id", tracing::field::display(session_id));
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
    // `session_id` is filled in once the route knows the session ([`note_session`]).
    let span = tracing::info_span!(
        "request",
        method = %req.method(),
        path = %req.path(),
        request_id = %id,
        session_id = tracing::field::Empty
    );
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
