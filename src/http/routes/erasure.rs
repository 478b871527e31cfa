//! Withdrawal and erasure (`docs/privacy.md`): the participant withdraws with their token; a
//! researcher erases one session, or every session of a panel id in a study (how a data-subject
//! request arrives); the study's purge log. Each answers the erasure's receipt; erasing again
//! answers the same receipt and changes nothing.

use actix_web::{delete, get, post, web, HttpRequest, HttpResponse};
use interview_session::erasure::ErasedBy;
use serde::Deserialize;
use serde_json::json;

use crate::access::Role;
use crate::command::{erasure, studies};
use crate::http::auth::{require_role, Caller, OnStudy, Owner};
use crate::http::auth::{Participant, SessionCaller};
use crate::http::body::{parse_json, read_bytes, ShapeErrors};
use crate::http::error::ApiError;
use crate::state::AppState;
use crate::telemetry::request_id;

/// The largest body these routes read (a reason, a panel id).
const BODY_LIMIT: usize = 8 * 1024;

/// A researcher's erasure of one session.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EraseBody {
    /// Why (kept in the log as long as the session's events: name no one in it).
    #[serde(default)]
    reason: Option<String>,
}

/// A data-subject request: every session of a panel id in a study.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EraseParticipantBody {
    participant_ref: String,
    #[serde(default)]
    reason: Option<String>,
}

/// Withdraw from the interview: it ends if it is running, and everything the participant said,
/// chose or was told is erased. Answers the erasure's receipt (the same one when called again).
#[utoipa::path(tag = "participant", security(("bearer" = [])),
    params(("session_id" = String, Path)),
    responses((status = 200, description = "the receipt: session_id, erased_at, erased_by, events_erased, head_hash, sequence, content_verified"),
              (status = 401), (status = 403, description = "a researcher token, or another session's"), (status = 404), (status = 503)))]
#[post("/api/sessions/{session_id}/withdraw")]
pub async fn withdraw(
    state: web::Data<AppState>,
    req: HttpRequest,
    Participant { session_id }: Participant,
) -> Result<HttpResponse, ApiError> {
    let receipt = erasure::erase(
        state.erasing(),
        &session_id.to_string(),
        ErasedBy::Participant,
        None,
        &request_id(&req),
    )
    .await?;
    Ok(HttpResponse::Ok().json(receipt))
}

/// Erase a session's participant data (a researcher acting on a request); optional JSON
/// `{"reason"}`. Answers the receipt (the same one when called again).
#[utoipa::path(tag = "research", security(("bearer" = ["owner"])),
    params(("session_id" = String, Path)),
    request_body(content = Object, description = r#"optional: {"reason": "…"} (at most 500 characters; kept in the audit log)"#),
    responses((status = 200, description = "the receipt"), (status = 400), (status = 401),
              (status = 403, description = "a participant token"), (status = 404), (status = 422), (status = 503)))]
#[delete("/api/sessions/{session_id}/participant-data")]
pub async fn erase_session(
    state: web::Data<AppState>,
    req: HttpRequest,
    SessionCaller {
        caller,
        session_id,
        study_id,
    }: SessionCaller,
    body: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let Caller::Researcher(researcher) = caller else {
        return Err(ApiError::Forbidden(
            "this needs a researcher token (a participant withdraws with POST …/withdraw)",
        ));
    };
    // Erasing is the study owner's (a viewer may read the session, not erase it).
    require_role(
        &researcher,
        study_id.as_deref().unwrap_or_default(),
        Role::Owner,
    )?;
    let body: EraseBody = parse_json(
        &read_bytes(body, BODY_LIMIT).await?,
        true,
        ShapeErrors::BadRequest,
    )?;
    crate::http::access_log::note_detail(&req, "erase the session".into());
    let receipt = erasure::erase(
        state.erasing(),
        &session_id.to_string(),
        ErasedBy::Researcher,
        body.reason,
        &request_id(&req),
    )
    .await?;
    Ok(HttpResponse::Ok().json(receipt))
}

/// Erase every session of a study created for a panel id (`participant_ref`): a data-subject
/// request. Answers the receipts; a panel id whose sessions are all erased already names none
/// any more (the erasure took it too), so a repeat answers an empty list.
#[utoipa::path(tag = "research", security(("bearer" = ["owner"])),
    params(("study_id" = String, Path)),
    request_body(content = Object, description = r#"{"participant_ref": "…", "reason": "…"?}"#),
    responses((status = 200, description = "{study_id, receipts: [...]}"), (status = 400), (status = 401), (status = 403), (status = 404), (status = 422)))]
#[post("/api/studies/{study_id}/erasures")]
pub async fn erase_participant(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
    body: web::Payload,
    _owner: OnStudy<Owner>,
) -> Result<HttpResponse, ApiError> {
    let study = studies::get(&state.db, &path).await?;
    let body: EraseParticipantBody = parse_json(
        &read_bytes(body, BODY_LIMIT).await?,
        false,
        ShapeErrors::BadRequest,
    )?;
    if body.participant_ref.trim().is_empty() {
        return Err(ApiError::invalid(
            "invalid_value",
            "participant_ref",
            "name the panel id whose sessions to erase",
        ));
    }
    crate::http::access_log::note_detail(&req, "erase a participant's sessions".into());
    let receipts = erasure::erase_participant(
        state.erasing(),
        &study.study_id,
        &body.participant_ref,
        body.reason,
        &request_id(&req),
    )
    .await?;
    Ok(HttpResponse::Ok().json(json!({ "study_id": study.study_id, "receipts": receipts })))
}

/// The study's purge log: every erasure of its sessions (session, when, who, why), oldest first.
#[utoipa::path(tag = "research", security(("bearer" = ["owner"])),
    params(("study_id" = String, Path)),
    responses((status = 200, description = "{study_id, erasures: [...]}"), (status = 401), (status = 403), (status = 404)))]
#[get("/api/studies/{study_id}/erasures")]
pub async fn purge_log(
    state: web::Data<AppState>,
    path: web::Path<String>,
    _owner: OnStudy<Owner>,
) -> Result<HttpResponse, ApiError> {
    let study = studies::get(&state.db, &path).await?;
    let erasures = interview_projections::erasure::study_log(&state.db, &study.study_id).await?;
    Ok(HttpResponse::Ok().json(json!({ "study_id": study.study_id, "erasures": erasures })))
}
