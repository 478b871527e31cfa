//! Managing researchers (admins) and a study's roles (its owners) over HTTP — what
//! `interview-runtime researchers …` does on the command line (`access::cli`) — and reading the
//! access log. A token is in the answer that makes it, once, marked `no-store`.

use actix_web::http::header::CACHE_CONTROL;
use actix_web::{delete, get, post, put, web, HttpRequest, HttpResponse};
use chrono::{DateTime, Utc};
use interview_projections::access_log::{self, Filter};
use serde::Deserialize;
use serde_json::json;
use utoipa::ToSchema;

use crate::access::identities::{self, Issued, NewResearcher};
use crate::access::{expiry_in_days, Role};
use crate::command::studies;
use crate::http::access_log::note_detail;
use crate::http::auth::{Admin, OnStudy, Owner};
use crate::http::body::{json_body, ShapeErrors};
use crate::http::error::ApiError;
use crate::http::query::Query;
use crate::state::AppState;

/// The largest body these routes read.
const BODY_LIMIT: usize = 64 * 1024;

/// A role on a study, as a request names it.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StudyRoleRequest {
    study_id: String,
    role: Role,
}

/// A researcher to add.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddResearcherRequest {
    /// 1 to 100 characters, unique, not starting with `token:`.
    name: String,
    /// May do everything, create studies and manage researchers.
    #[serde(default)]
    admin: bool,
    #[serde(default)]
    roles: Vec<StudyRoleRequest>,
    /// The first token stops working this many days from now.
    #[serde(default)]
    expires_in_days: Option<f64>,
}

/// A further token's expiry.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct TokenRequest {
    #[serde(default)]
    expires_in_days: Option<f64>,
}

/// A role to give.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GrantRequest {
    role: Role,
}

fn issued(made: Issued) -> HttpResponse {
    HttpResponse::Created()
        .insert_header((CACHE_CONTROL, "no-store"))
        .json(made)
}

/// Add a researcher: their name, whether an admin, their roles; answers their first token,
/// shown this once.
#[utoipa::path(tag = "researchers", security(("bearer" = ["admin"])),
    request_body = AddResearcherRequest,
    responses((status = 201, body = Issued), (status = 400), (status = 401), (status = 403),
              (status = 404, description = "a study named in `roles` is not there"),
              (status = 409, description = "researcher_exists"), (status = 422)))]
#[post("/api/researchers")]
pub async fn add(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Payload,
    _admin: Admin,
) -> Result<HttpResponse, ApiError> {
    let request: AddResearcherRequest =
        json_body(body, BODY_LIMIT, false, ShapeErrors::BadRequest).await?;
    let granted: String = request
        .roles
        .iter()
        .map(|r| format!(" {}:{}", r.study_id, r.role))
        .collect();
    let admin = if request.admin { " admin" } else { "" };
    note_detail(&req, format!("add {}{admin}{granted}", request.name));
    for role in &request.roles {
        studies::get(&state.db, &role.study_id).await?;
    }
    let new = NewResearcher {
        name: request.name,
        admin: request.admin,
        roles: request
            .roles
            .into_iter()
            .map(|r| (r.study_id, r.role))
            .collect(),
        expires_at: expiry_in_days(request.expires_in_days)?,
    };
    Ok(issued(identities::add(&state.db, new).await?))
}

/// Every researcher, their roles and their tokens' dates (never a token).
#[utoipa::path(tag = "researchers", security(("bearer" = ["admin"])),
    responses((status = 200, description = "{researchers: [...]}"), (status = 401), (status = 403)))]
#[get("/api/researchers")]
pub async fn list(state: web::Data<AppState>, _admin: Admin) -> Result<HttpResponse, ApiError> {
    let researchers = identities::list(&state.db).await?;
    Ok(HttpResponse::Ok().json(json!({ "researchers": researchers })))
}

/// Revoke a researcher: every token of theirs stops working at once, in every process.
#[utoipa::path(tag = "researchers", security(("bearer" = ["admin"])),
    params(("name" = String, Path)),
    responses((status = 200), (status = 401), (status = 403), (status = 404)))]
#[post("/api/researchers/{name}/revoke")]
pub async fn revoke(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
    _admin: Admin,
) -> Result<HttpResponse, ApiError> {
    note_detail(&req, format!("revoke {}", path.as_str()));
    identities::revoke(&state.db, &path).await?;
    Ok(HttpResponse::Ok().json(json!({ "name": path.into_inner(), "revoked": true })))
}

/// A further token for a researcher, shown this once (their other tokens keep working).
#[utoipa::path(tag = "researchers", security(("bearer" = ["admin"])),
    params(("name" = String, Path)), request_body(content = TokenRequest, description = "optional"),
    responses((status = 201, body = Issued), (status = 401), (status = 403), (status = 404), (status = 422)))]
#[post("/api/researchers/{name}/tokens")]
pub async fn token(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
    body: web::Payload,
    _admin: Admin,
) -> Result<HttpResponse, ApiError> {
    note_detail(&req, format!("token {}", path.as_str()));
    let request: TokenRequest = json_body(body, BODY_LIMIT, true, ShapeErrors::BadRequest).await?;
    let expires_at = expiry_in_days(request.expires_in_days)?;
    Ok(issued(
        identities::issue_token(&state.db, &path, expires_at).await?,
    ))
}

/// Who holds which role on the study (admins hold every role everywhere and are not listed).
#[utoipa::path(tag = "studies", security(("bearer" = ["owner"])),
    params(("study_id" = String, Path)),
    responses((status = 200, description = "{study_id, roles: [{name, role, granted_at}]}"), (status = 401), (status = 403), (status = 404)))]
#[get("/api/studies/{study_id}/roles")]
pub async fn roles(
    state: web::Data<AppState>,
    study: OnStudy<Owner>,
) -> Result<HttpResponse, ApiError> {
    let study = studies::get(&state.db, &study.study_id).await?;
    let roles = identities::holders(&state.db, &study.study_id).await?;
    Ok(HttpResponse::Ok().json(json!({ "study_id": study.study_id, "roles": roles })))
}

/// Give a researcher a role on the study (replacing the one they had there).
#[utoipa::path(tag = "studies", security(("bearer" = ["owner"])),
    params(("study_id" = String, Path), ("name" = String, Path)), request_body = GrantRequest,
    responses((status = 200), (status = 400), (status = 401), (status = 403),
              (status = 404, description = "no such study, or no such researcher")))]
#[put("/api/studies/{study_id}/roles/{name}")]
pub async fn grant(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Payload,
    _owner: OnStudy<Owner>,
) -> Result<HttpResponse, ApiError> {
    let (study_id, name) = path.into_inner();
    let request: GrantRequest = json_body(body, BODY_LIMIT, false, ShapeErrors::BadRequest).await?;
    note_detail(&req, format!("grant {name} {}", request.role));
    let study = studies::get(&state.db, &study_id).await?;
    identities::grant(&state.db, &name, &study.study_id, request.role).await?;
    Ok(HttpResponse::Ok()
        .json(json!({ "study_id": study.study_id, "name": name, "role": request.role })))
}

/// Take a researcher's role on the study away.
#[utoipa::path(tag = "studies", security(("bearer" = ["owner"])),
    params(("study_id" = String, Path), ("name" = String, Path)),
    responses((status = 204), (status = 401), (status = 403),
              (status = 404, description = "the researcher holds no role on the study")))]
#[delete("/api/studies/{study_id}/roles/{name}")]
pub async fn ungrant(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    _owner: OnStudy<Owner>,
) -> Result<HttpResponse, ApiError> {
    let (study_id, name) = path.into_inner();
    note_detail(&req, format!("ungrant {name}"));
    if identities::remove_role(&state.db, &name, &study_id).await? {
        Ok(HttpResponse::NoContent().finish())
    } else {
        Err(ApiError::not_found(
            "role_not_found",
            format!("{name} holds no role on this study"),
        ))
    }
}

/// Which rows of the access log to read.
#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct AccessLogQuery {
    /// Only this researcher's requests (their name; `token:<8 hex>` for a configured token).
    researcher: Option<String>,
    /// From this time (RFC 3339), inclusive.
    from: Option<DateTime<Utc>>,
    /// Before this time (RFC 3339).
    to: Option<DateTime<Utc>>,
    /// The `next_cursor` of the previous page.
    cursor: Option<i64>,
    /// Page size, 1–1000 (default 100).
    limit: Option<i64>,
}

/// A page of the access log, as `filter` narrows it.
async fn access_log_page(
    state: &AppState,
    study_id: Option<String>,
    query: AccessLogQuery,
) -> Result<HttpResponse, ApiError> {
    let limit = crate::http::routes::research::limit(query.limit, 1000)?;
    let filter = Filter {
        study_id,
        researcher: query.researcher,
        from: query.from,
        to: query.to,
        after: query.cursor.unwrap_or(0),
        limit: limit + 1,
    };
    let mut rows = access_log::page(&state.db, &filter).await?;
    let next_cursor = (rows.len() as i64 > limit).then(|| {
        rows.truncate(limit as usize);
        rows.last().expect("a full page").seq
    });
    Ok(HttpResponse::Ok().json(json!({ "entries": rows, "next_cursor": next_cursor })))
}

/// Who read, exported, erased or changed what of the study, when and from where — and every
/// refusal — oldest first (reads of this log are in it too).
#[utoipa::path(tag = "research", security(("bearer" = ["owner"])),
    params(("study_id" = String, Path), AccessLogQuery),
    responses((status = 200, description = "{entries: [{seq, at, researcher, researcher_id, method, route, study_id, session_id, status, address, request_id, prev_hash, hash}], next_cursor}"),
              (status = 400), (status = 401), (status = 403), (status = 404)))]
#[get("/api/studies/{study_id}/access-log")]
pub async fn study_access_log(
    state: web::Data<AppState>,
    query: Query<AccessLogQuery>,
    owner: OnStudy<Owner>,
) -> Result<HttpResponse, ApiError> {
    let study = studies::get(&state.db, &owner.study_id).await?;
    access_log_page(&state, Some(study.study_id), query.0).await
}

/// The whole access log (researchers' management included), oldest first.
#[utoipa::path(tag = "researchers", security(("bearer" = ["admin"])),
    params(AccessLogQuery),
    responses((status = 200, description = "{entries: [...], next_cursor}"), (status = 400), (status = 401), (status = 403)))]
#[get("/api/access-log")]
pub async fn whole_access_log(
    state: web::Data<AppState>,
    query: Query<AccessLogQuery>,
    _admin: Admin,
) -> Result<HttpResponse, ApiError> {
    access_log_page(&state, None, query.0).await
}
