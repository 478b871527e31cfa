//! Recording researchers' requests in the access log (`interview_projections::access_log`).
//!
//! As a researcher's request is checked (`http::auth`), what it is about is noted on the request
//! ([`Accessed`]: who, and the study and session it touches). Once it is answered, this
//! middleware appends one row with the status — a read, an export, an erasure, a grant, and a
//! refusal (403; 401 for a token that names a researcher, revoked or expired) alike. A request
//! that presents no researcher's token leaves no note and no row (anyone could send those), nor
//! does one the server failed to answer (5xx).
//!
//! The log fails closed for reads: when the row cannot be written, the answer is replaced by 503
//! before a byte of it is sent, so nothing is read that the log does not record. A change
//! (erasure, grant, revoke, publish) is made before its row is written: if the row then cannot
//! be written, the change stands, the answer is a 503, and an error is logged with the request
//! id — the one way a change can lack its row, and only while the database fails.

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::Method;
use actix_web::middleware::Next;
use actix_web::{web, HttpMessage, HttpRequest, ResponseError};
use chrono::Utc;
use interview_projections::access_log::{self, Entry};

use crate::http::error::ApiError;
use crate::state::AppState;

/// What a researcher's request is about, noted as it is checked.
#[derive(Debug, Clone, Default)]
pub struct Accessed {
    pub researcher: String,
    pub researcher_id: Option<String>,
    pub study_id: Option<String>,
    pub session_id: Option<String>,
    /// What a change changed, in words.
    pub detail: Option<String>,
}

/// Notes who is calling (the first note of a request).
pub fn note_researcher(req: &HttpRequest, researcher: &str, researcher_id: Option<&str>) {
    let mut extensions = req.extensions_mut();
    let accessed = extensions.get_mut::<Accessed>();
    match accessed {
        Some(a) => {
            a.researcher = researcher.to_string();
            a.researcher_id = researcher_id.map(str::to_string);
        }
        None => {
            extensions.insert(Accessed {
                researcher: researcher.to_string(),
                researcher_id: researcher_id.map(str::to_string),
                ..Accessed::default()
            });
        }
    }
}

/// Notes the study (and session) the request touches, once it is known.
pub fn note_target(req: &HttpRequest, study_id: Option<&str>, session_id: Option<&str>) {
    if let Some(a) = req.extensions_mut().get_mut::<Accessed>() {
        if let Some(study) = study_id {
            a.study_id = Some(study.to_string());
        }
        if let Some(session) = session_id {
            a.session_id = Some(session.to_string());
        }
    }
}

/// Notes what a change changed, in words (`grant Vera analyst`).
pub fn note_detail(req: &HttpRequest, detail: String) {
    if let Some(a) = req.extensions_mut().get_mut::<Accessed>() {
        a.detail = Some(detail);
    }
}

/// The middleware: the request runs, then its row is appended (or the answer becomes a 503).
pub async fn record(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    let res = next.call(req).await?;
    let noted = res.request().extensions().get::<Accessed>().cloned();
    // A read the server could not answer (5xx: the database away, a restart) read nothing, and
    // its row could not be written either: waiting for that would only delay the answer. A
    // change that failed is recorded all the same (it may have been made in part).
    let read = matches!(*res.request().method(), Method::GET | Method::HEAD);
    let Some(accessed) = noted.filter(|_| !(read && res.status().is_server_error())) else {
        return Ok(res.map_into_left_body());
    };
    let request = res.request();
    let Some(state) = request.app_data::<web::Data<AppState>>().cloned() else {
        return Ok(res.map_into_left_body());
    };
    // A request refused before its target was looked at (a revoked token) is still filed under
    // the study and session its path names, for that study's owners to see.
    let param = |name: &str| request.match_info().get(name).map(str::to_string);
    let session_id = accessed.session_id.or_else(|| param("session_id"));
    let mut study_id = accessed.study_id.or_else(|| param("study_id"));
    if let (None, Some(session)) = (&study_id, &session_id) {
        study_id = interview_projections::read::session_study(&state.db, session)
            .await
            .ok()
            .flatten();
    }
    let entry = Entry {
        at: Utc::now(),
        researcher: accessed.researcher,
        researcher_id: accessed.researcher_id,
        method: request.method().to_string(),
        route: request
            .match_pattern()
            .unwrap_or_else(|| request.path().to_string()),
        study_id,
        session_id,
        detail: accessed.detail,
        status: res.status().as_u16(),
        // The address itself (the door's limits key IPv6 clients by their /64; a log names
        // exactly where a request came from).
        address: request
            .peer_addr()
            .map(|a| a.ip().to_string())
            .unwrap_or_default(),
        request_id: crate::telemetry::request_id(request),
    };
    match access_log::append(&state.db, &entry).await {
        Ok(_) => Ok(res.map_into_left_body()),
        Err(e) => {
            tracing::error!(error = %e, "the access log could not be written; the answer is withheld");
            let error = ApiError::Unavailable("the access log cannot be written".into());
            let (req, _) = res.into_parts();
            Ok(ServiceResponse::new(req, error.error_response()).map_into_right_body())
        }
    }
}
