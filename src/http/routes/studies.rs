//! Researcher routes for studies: drafts, publishing, pause/resume, listing.

use actix_web::{delete, get, post, put, web, HttpResponse};
use chrono::{DateTime, Utc};
use interview_session::study::{ConfigVersions, StudyDefinition};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::command::participant_links;
use crate::command::studies::{self, StudyRecord, StudyStatus};
use crate::http::auth::{Admin, OnStudy, Owner, Researcher, Viewer};
use crate::http::body::{json_body, ShapeErrors};
use crate::http::error::ApiError;
use crate::state::AppState;

/// A study as researchers see it.
#[derive(Serialize, ToSchema)]
pub struct StudyResponse {
    study_id: String,
    status: StudyStatus,
    title: String,
    /// Set at first publish.
    public_slug: Option<String>,
    /// Where participants start (relative to the server), once published.
    sessions_url: Option<String>,
    interview_url: Option<String>,
    /// The version ids new sessions pin, once published.
    config_versions: Option<ConfigVersionsSchema>,
    published_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    /// The working definition (see docs/study-definition.md).
    #[schema(value_type = Object)]
    definition: Value,
}

/// The four pinned version ids.
#[derive(Serialize, ToSchema)]
pub struct ConfigVersionsSchema {
    study_config_version_id: String,
    agent_config_version_id: String,
    output_schema_version_id: String,
    model_config_version_id: String,
}

impl From<&ConfigVersions> for ConfigVersionsSchema {
    fn from(v: &ConfigVersions) -> Self {
        Self {
            study_config_version_id: v.study_config_version_id.clone(),
            agent_config_version_id: v.agent_config_version_id.clone(),
            output_schema_version_id: v.output_schema_version_id.clone(),
            model_config_version_id: v.model_config_version_id.clone(),
        }
    }
}

impl From<StudyRecord> for StudyResponse {
    fn from(s: StudyRecord) -> Self {
        let published_slug = s.published.as_ref().map(|p| p.public_slug.clone());
        Self {
            study_id: s.study_id,
            status: s.status,
            title: s.definition.title.clone(),
            sessions_url: published_slug
                .as_ref()
                .map(|slug| format!("/api/public/studies/{slug}/sessions")),
            interview_url: published_slug
                .as_ref()
                .map(|slug| format!("/interview/{slug}")),
            public_slug: s.public_slug,
            config_versions: s.published.as_ref().map(|p| (&p.config_versions).into()),
            published_at: s.published_at,
            created_at: s.created_at,
            updated_at: s.updated_at,
            definition: serde_json::to_value(&s.definition).expect("definitions serialize"),
        }
    }
}

async fn definition_body(
    state: &AppState,
    body: web::Payload,
) -> Result<StudyDefinition, ApiError> {
    // Every session pins its study, so a large definition is multiplied by every session.
    let limit = state
        .settings
        .max_study_bytes
        .min(state.settings.max_body_bytes);
    json_body(body, limit, false, ShapeErrors::Unprocessable)
        .await
        .map_err(|e| match e {
            ApiError::PayloadTooLarge { limit, .. } => ApiError::PayloadTooLarge {
                what: "study definition",
                limit,
            },
            other => other,
        })
}

/// Create a study draft from a definition.
#[utoipa::path(tag = "studies", security(("bearer" = ["admin"])),
    request_body(content = Object, description = "A study definition (docs/study-definition.md)"),
    responses((status = 201, body = StudyResponse), (status = 400), (status = 401), (status = 403), (status = 413),
              (status = 422, description = "the definition breaks a rule; details.field names it")))]
#[post("/api/studies")]
pub async fn create(
    state: web::Data<AppState>,
    body: web::Payload,
    _admin: Admin,
) -> Result<HttpResponse, ApiError> {
    let definition = definition_body(&state, body).await?;
    let study = studies::create(&state.db, definition).await?;
    Ok(HttpResponse::Created().json(StudyResponse::from(study)))
}

/// Replace a study's draft definition (published sessions are unaffected until the next publish).
#[utoipa::path(tag = "studies", security(("bearer" = ["owner"])),
    params(("study_id" = String, Path)),
    request_body(content = Object, description = "A study definition"),
    responses((status = 200, body = StudyResponse), (status = 401), (status = 403), (status = 404), (status = 422)))]
#[put("/api/studies/{study_id}")]
pub async fn replace(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Payload,
    _owner: OnStudy<Owner>,
) -> Result<HttpResponse, ApiError> {
    studies::get(&state.db, &path).await?;
    let definition = definition_body(&state, body).await?;
    let study = studies::replace(&state.db, &path, definition).await?;
    Ok(HttpResponse::Ok().json(StudyResponse::from(study)))
}

/// Publish the draft: four content-addressed version ids and the public slug.
#[utoipa::path(tag = "studies", security(("bearer" = ["owner"])),
    params(("study_id" = String, Path)),
    responses((status = 200, body = StudyResponse), (status = 401), (status = 403), (status = 404),
              (status = 409, description = "slug_taken"), (status = 422)))]
#[post("/api/studies/{study_id}/publish")]
pub async fn publish(
    state: web::Data<AppState>,
    path: web::Path<String>,
    _owner: OnStudy<Owner>,
) -> Result<HttpResponse, ApiError> {
    let study = studies::publish(&state.db, &path).await?;
    tracing::info!(study_id = %study.study_id, slug = ?study.public_slug, "study published");
    Ok(HttpResponse::Ok().json(StudyResponse::from(study)))
}

/// Pause a published study: new sessions are refused (409 `study_paused`).
#[utoipa::path(tag = "studies", security(("bearer" = ["owner"])),
    params(("study_id" = String, Path)),
    responses((status = 200, body = StudyResponse), (status = 401), (status = 403), (status = 404),
              (status = 409, description = "study_not_published")))]
#[post("/api/studies/{study_id}/pause")]
pub async fn pause(
    state: web::Data<AppState>,
    path: web::Path<String>,
    _owner: OnStudy<Owner>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(StudyResponse::from(
        studies::set_paused(&state.db, &path, true).await?,
    )))
}

/// Resume a paused study.
#[utoipa::path(tag = "studies", security(("bearer" = ["owner"])),
    params(("study_id" = String, Path)),
    responses((status = 200, body = StudyResponse), (status = 401), (status = 403), (status = 404), (status = 409)))]
#[post("/api/studies/{study_id}/resume")]
pub async fn resume(
    state: web::Data<AppState>,
    path: web::Path<String>,
    _owner: OnStudy<Owner>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(StudyResponse::from(
        studies::set_paused(&state.db, &path, false).await?,
    )))
}

/// Every study the caller holds a role on (an admin: every study), oldest first.
#[derive(Serialize, ToSchema)]
pub struct StudyList {
    studies: Vec<StudyResponse>,
}

/// List the studies the caller may see.
#[utoipa::path(tag = "studies", security(("bearer" = [])),
    responses((status = 200, body = StudyList), (status = 401), (status = 403)))]
#[get("/api/studies")]
pub async fn list(
    state: web::Data<AppState>,
    Researcher(researcher): Researcher,
) -> Result<HttpResponse, ApiError> {
    let studies = studies::list(&state.db).await?;
    // Each researcher sees the studies they hold a role on (an admin, all).
    let studies = studies
        .into_iter()
        .filter(|study| researcher.role_on(&study.study_id).is_some())
        .map(Into::into)
        .collect();
    Ok(HttpResponse::Ok().json(StudyList { studies }))
}

/// One study.
#[utoipa::path(tag = "studies", security(("bearer" = ["viewer"])),
    params(("study_id" = String, Path)),
    responses((status = 200, body = StudyResponse), (status = 401), (status = 403), (status = 404)))]
#[get("/api/studies/{study_id}")]
pub async fn get(
    state: web::Data<AppState>,
    path: web::Path<String>,
    _viewer: OnStudy<Viewer>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(StudyResponse::from(studies::get(&state.db, &path).await?)))
}

/// A study's overview: the funnel, where sessions stopped, and over its completed interviews
/// durations, turns, objective coverage, field fill rates and model spend (`docs/overview.md`).
#[utoipa::path(tag = "studies", security(("bearer" = ["viewer"])),
    params(("study_id" = String, Path)),
    responses((status = 200), (status = 401), (status = 403), (status = 404)))]
#[get("/api/studies/{study_id}/overview")]
pub async fn overview(
    state: web::Data<AppState>,
    path: web::Path<String>,
    _viewer: OnStudy<Viewer>,
) -> Result<HttpResponse, ApiError> {
    let study = studies::get(&state.db, &path).await?;
    let mut overview =
        interview_projections::overview::overview(&state.db, &study.study_id).await?;
    let definition = &study.definition;
    let objectives: Vec<(&str, &str)> = definition
        .objectives
        .iter()
        .map(|o| (o.id.as_str(), o.title.as_str()))
        .collect();
    let fields: Vec<&str> = definition
        .output_schema
        .fields
        .iter()
        .map(|f| f.id.as_str())
        .collect();
    overview.arrange(&objectives, &fields);
    Ok(HttpResponse::Ok().json(overview))
}

/// A study's new participant-link secret, shown once, with a worked example of a signed link.
#[derive(Serialize, ToSchema)]
pub struct LinkSecretResponse {
    study_id: String,
    /// Whether every create must name a signed reference.
    require_reference: bool,
    /// The key panels sign participant references with (hex HMAC-SHA256); shown only now.
    secret: String,
    /// A worked example: this reference, its signature, the page link that carries both.
    example: Value,
}

/// How a study signs its participant links.
#[derive(serde::Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct LinkSecretRequest {
    /// Take no participant without a signed `participant_ref` (default false: anonymous
    /// participants are still welcome).
    #[serde(default)]
    require_reference: bool,
}

/// Start signing the study's participant links (or replace the secret: links signed with the
/// old one stop working). From then on a create with a `participant_ref` needs its signature.
#[utoipa::path(tag = "studies", security(("bearer" = ["owner"])),
    params(("study_id" = String, Path)), request_body(content = LinkSecretRequest, description = "optional"),
    responses((status = 200, body = LinkSecretResponse), (status = 400), (status = 401), (status = 403), (status = 404)))]
#[post("/api/studies/{study_id}/participant-link-secret")]
pub async fn rotate_link_secret(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Payload,
    _owner: OnStudy<Owner>,
) -> Result<HttpResponse, ApiError> {
    let request: LinkSecretRequest = json_body(body, 1024, true, ShapeErrors::BadRequest).await?;
    let study = studies::get(&state.db, &path).await?;
    let secret =
        participant_links::rotate(&state.db, &study.study_id, request.require_reference).await?;
    let example_ref = "panel-12345";
    let signature = participant_links::signature(&secret, example_ref);
    let link = study
        .public_slug
        .as_ref()
        .map(|slug| format!("/interview/{slug}?ref={example_ref}&sig={signature}"));
    // Shown once: no cache along the way may keep it.
    Ok(HttpResponse::Ok()
        .insert_header((actix_web::http::header::CACHE_CONTROL, "no-store"))
        .json(LinkSecretResponse {
            study_id: study.study_id,
            require_reference: request.require_reference,
            secret,
            example: serde_json::json!({
                "participant_ref": example_ref,
                "participant_ref_signature": signature,
                "link": link,
            }),
        }))
}

/// Stop signing the study's participant links: references are taken unsigned again.
#[utoipa::path(tag = "studies", security(("bearer" = ["owner"])),
    params(("study_id" = String, Path)),
    responses((status = 204), (status = 401), (status = 403), (status = 404)))]
#[delete("/api/studies/{study_id}/participant-link-secret")]
pub async fn remove_link_secret(
    state: web::Data<AppState>,
    path: web::Path<String>,
    _owner: OnStudy<Owner>,
) -> Result<HttpResponse, ApiError> {
    let study = studies::get(&state.db, &path).await?;
    participant_links::remove(&state.db, &study.study_id).await?;
    Ok(HttpResponse::NoContent().finish())
}
