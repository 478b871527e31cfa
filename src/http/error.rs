//! The HTTP layer's error type and its one mapping to statuses and bodies.
//!
//! Every error answers `{"error": {"code", "message", "details"?}}`. Causes of 500s are logged
//! and never sent; an unreachable database answers 503 with `Retry-After`.

use actix_web::http::{header, StatusCode};
use actix_web::{HttpResponse, ResponseError};
use cqrs_es::AggregateError;
use interview_projections::db::is_unavailable;
use interview_session::error::ErrorKind;
use interview_session::SessionError;
use serde_json::{json, Value};

pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Seconds a client should wait before retrying a 503.
const RETRY_AFTER_SECS: u32 = 2;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{message}")]
    BadRequest {
        code: &'static str,
        message: String,
        details: Option<Value>,
    },
    #[error("a valid bearer token is required")]
    Unauthorized,
    #[error("researcher tokens are accepted only in the Authorization header")]
    ResearcherTokenOutsideHeader,
    #[error("{0}")]
    Forbidden(&'static str),
    /// A researcher without the role the route needs on its study (`admin`: an admin's route).
    #[error("this needs the {role} role")]
    RoleRequired { role: &'static str },
    #[error("{message}")]
    NotFound { code: &'static str, message: String },
    #[error("{message}")]
    Conflict {
        code: &'static str,
        message: String,
        details: Option<Value>,
    },
    #[error("the {what} is larger than the limit of {limit} bytes")]
    PayloadTooLarge { what: &'static str, limit: usize },
    #[error("the request body did not arrive within {secs} s")]
    BodyTimeout { secs: u64 },
    #[error("send the body as JSON, with Content-Type: application/json")]
    UnsupportedMediaType,
    #[error("{message}")]
    Unprocessable {
        code: &'static str,
        message: String,
        field: String,
    },
    #[error(transparent)]
    Domain(#[from] SessionError),
    #[error("the service is temporarily unavailable, please retry shortly")]
    Unavailable(#[source] BoxError),
    #[error("{message}")]
    TooManyRequests { message: String, retry_after: u64 },
    #[error("the service is busy right now, please retry shortly")]
    Overloaded { what: &'static str },
    #[error("the service is restarting, please retry shortly")]
    ShuttingDown,
    #[error("something went wrong on our side")]
    Internal(#[source] BoxError),
}

impl ApiError {
    pub fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        Self::NotFound {
            code,
            message: message.into(),
        }
    }

    pub fn invalid(
        code: &'static str,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self::Unprocessable {
            code,
            message: message.into(),
            field: field.into(),
        }
    }

    pub fn session_not_found() -> Self {
        Self::not_found("session_not_found", "no such session")
    }

    fn code(&self) -> &'static str {
        match self {
            Self::BadRequest { code, .. }
            | Self::NotFound { code, .. }
            | Self::Conflict { code, .. }
            | Self::Unprocessable { code, .. } => code,
            Self::Unauthorized | Self::ResearcherTokenOutsideHeader => "unauthorized",
            Self::Forbidden(_) | Self::RoleRequired { .. } => "forbidden",
            Self::PayloadTooLarge { .. } => "payload_too_large",
            Self::BodyTimeout { .. } => "request_timeout",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::Domain(e) => e.code(),
            Self::Unavailable(_) => "service_unavailable",
            Self::TooManyRequests { .. } => "rate_limited",
            Self::Overloaded { .. } => "overloaded",
            Self::ShuttingDown => "shutting_down",
            Self::Internal(_) => "internal_error",
        }
    }

    fn details(&self) -> Option<Value> {
        match self {
            Self::BadRequest { details, .. } | Self::Conflict { details, .. } => details.clone(),
            Self::Unprocessable { field, .. } => Some(json!({ "field": field })),
            Self::PayloadTooLarge { limit, .. } => Some(json!({ "limit_bytes": limit })),
            Self::Domain(e) => e.details(),
            Self::TooManyRequests { retry_after, .. } => {
                Some(json!({ "retry_after_secs": retry_after }))
            }
            Self::Overloaded { what } => Some(json!({ "limit": what })),
            Self::RoleRequired { role } => Some(json!({ "required_role": role })),
            Self::BodyTimeout { secs } => Some(json!({ "timeout_secs": secs })),
            Self::Unauthorized
            | Self::UnsupportedMediaType
            | Self::ResearcherTokenOutsideHeader
            | Self::Forbidden(_)
            | Self::NotFound { .. }
            | Self::Unavailable(_)
            | Self::ShuttingDown
            | Self::Internal(_) => None,
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            Self::BadRequest { .. } => StatusCode::BAD_REQUEST,
            Self::Unauthorized | Self::ResearcherTokenOutsideHeader => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) | Self::RoleRequired { .. } => StatusCode::FORBIDDEN,
            Self::NotFound { .. } => StatusCode::NOT_FOUND,
            Self::Conflict { .. } => StatusCode::CONFLICT,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::BodyTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::Unprocessable { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            Self::Domain(e) => match e.kind() {
                ErrorKind::NotFound => StatusCode::NOT_FOUND,
                ErrorKind::Conflict => StatusCode::CONFLICT,
                ErrorKind::Gone => StatusCode::GONE,
                ErrorKind::Invalid => StatusCode::UNPROCESSABLE_ENTITY,
            },
            Self::Unavailable(_) | Self::Overloaded { .. } | Self::ShuttingDown => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Self::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        match self {
            Self::Internal(cause) => tracing::error!(error = %cause, "internal error"),
            Self::Unavailable(cause) => tracing::warn!(error = %cause, "database unavailable"),
            _ => {}
        }
        let mut error = json!({ "code": self.code(), "message": self.to_string() });
        if let Some(details) = self.details() {
            error["details"] = details;
        }
        if matches!(
            self,
            Self::TooManyRequests { .. } | Self::Overloaded { .. } | Self::ShuttingDown
        ) {
            metrics::counter!("interview_refusals_total", "code" => self.code()).increment(1);
        }
        let mut response = HttpResponse::build(self.status_code());
        match self {
            Self::Unavailable(_) | Self::Overloaded { .. } | Self::ShuttingDown => {
                response.insert_header((header::RETRY_AFTER, RETRY_AFTER_SECS.to_string()));
            }
            Self::TooManyRequests { retry_after, .. } => {
                response.insert_header((header::RETRY_AFTER, retry_after.to_string()));
            }
            _ => {}
        }
        if matches!(
            self,
            Self::Unauthorized | Self::ResearcherTokenOutsideHeader
        ) {
            response.insert_header((header::WWW_AUTHENTICATE, "Bearer"));
        }
        response.json(json!({ "error": error }))
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(err: sqlx::Error) -> Self {
        if is_unavailable(&err) {
            Self::Unavailable(Box::new(err))
        } else {
            Self::Internal(Box::new(err))
        }
    }
}

/// True when a boxed store error is, underneath, an unreachable database.
fn boxed_is_unavailable(err: &BoxError) -> bool {
    err.downcast_ref::<sqlx::Error>()
        .is_some_and(is_unavailable)
}

impl From<AggregateError<SessionError>> for ApiError {
    fn from(err: AggregateError<SessionError>) -> Self {
        match err {
            AggregateError::UserError(e) => Self::Domain(e),
            AggregateError::AggregateConflict => Self::Conflict {
                code: "concurrent_update",
                message: "the session changed at the same time, please retry".into(),
                details: None,
            },
            AggregateError::DatabaseConnectionError(e) => Self::Unavailable(e),
            AggregateError::DeserializationError(e) => Self::Internal(e),
            AggregateError::UnexpectedError(e) => {
                if boxed_is_unavailable(&e) {
                    Self::Unavailable(e)
                } else {
                    Self::Internal(e)
                }
            }
        }
    }
}

impl From<crate::command::error::CommandError> for ApiError {
    fn from(err: crate::command::error::CommandError) -> Self {
        use crate::command::error::CommandError as E;
        match err {
            E::NotFound { code, message } => Self::NotFound { code, message },
            E::Invalid {
                code,
                field,
                message,
            } => Self::Unprocessable {
                code,
                message,
                field,
            },
            E::Conflict {
                code,
                message,
                details,
            } => Self::Conflict {
                code,
                message,
                details,
            },
            E::Domain(e) => Self::Domain(e),
            E::Session(e) => e.into(),
            E::Database(e) => e.into(),
            E::Storage(e) => e.into(),
            E::Corrupt(e) => Self::Internal(e),
        }
    }
}

impl From<interview_projections::ProjectionError> for ApiError {
    fn from(err: interview_projections::ProjectionError) -> Self {
        match err {
            interview_projections::ProjectionError::Db(e) => e.into(),
            interview_projections::ProjectionError::Keys(
                interview_projections::keys::KeyError::Db(e),
            ) => e.into(),
            other @ (interview_projections::ProjectionError::Decode { .. }
            | interview_projections::ProjectionError::ErasureMismatch { .. }
            | interview_projections::ProjectionError::Keys(_)) => Self::Internal(Box::new(other)),
        }
    }
}

/// The code of an error answered by something other than a route (actix-web's extractors and
/// router, CORS): its status, in words.
fn code_for_status(status: StatusCode, preflight: bool) -> &'static str {
    match status.as_u16() {
        400 if preflight => "cors_refused",
        400 => "bad_request",
        401 => "unauthorized",
        403 => "forbidden",
        404 => "not_found",
        405 => "method_not_allowed",
        408 => "request_timeout",
        411 => "length_required",
        413 => "payload_too_large",
        414 => "uri_too_long",
        415 => "unsupported_media_type",
        431 => "headers_too_large",
        500 => "internal_error",
        503 => "service_unavailable",
        _ if status.is_client_error() => "bad_request",
        _ => "internal_error",
    }
}

/// Middleware: an error answered without our JSON envelope (a refused CORS preflight, an
/// extractor's text/plain) is rewritten into `{"error": {"code", "message"}}` with the same
/// status and headers, so every error a client sees has one shape.
pub async fn envelope(
    req: actix_web::dev::ServiceRequest,
    next: actix_web::middleware::Next<impl actix_web::body::MessageBody + 'static>,
) -> Result<actix_web::dev::ServiceResponse<actix_web::body::BoxBody>, actix_web::Error> {
    let preflight = req.method() == actix_web::http::Method::OPTIONS
        && req
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let res = next.call(req).await?.map_into_boxed_body();
    let status = res.status();
    let content_type = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    // JSON errors are already enveloped; the participant page's own 404 (a link that leads to
    // no study or interview) is a page for a browser, saying so in the participant's words.
    let is_json = content_type.starts_with("application/json");
    let is_page = content_type.starts_with("text/html");
    if status.as_u16() < 400 || is_json || is_page {
        return Ok(res);
    }
    let (req, res) = res.into_parts();
    let (mut res, original) = res.into_parts();
    let text = actix_web::body::to_bytes_limited(original, 1024)
        .await
        .ok()
        .and_then(Result::ok)
        .and_then(|b| String::from_utf8(b.to_vec()).ok())
        .filter(|t| !t.trim().is_empty())
        .unwrap_or_else(|| status.canonical_reason().unwrap_or("error").to_lowercase());
    let body = json!({ "error": { "code": code_for_status(status, preflight), "message": text } });
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    let res = res.set_body(actix_web::body::BoxBody::new(body.to_string()));
    Ok(actix_web::dev::ServiceResponse::new(req, res))
}
