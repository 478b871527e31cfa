//! A study's webhook subscriptions (its owners; `docs/webhooks.md`): make one (its secret shown
//! once), list them with how far each has delivered, delete one, send one back to deliver again
//! from any notice, and read its delivery attempts.

use actix_web::http::header::CACHE_CONTROL;
use actix_web::{delete, get, post, web, HttpRequest, HttpResponse};
use base64::Engine;
use chrono::{DateTime, Utc};
use interview_session::notice::NoticeKind;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use crate::command::studies;
use crate::http::access_log::note_detail;
use crate::http::auth::{OnStudy, Owner};
use crate::http::body::{json_body, ShapeErrors};
use crate::http::error::ApiError;
use crate::http::query::Query;
use crate::state::AppState;
use crate::webhooks::address::{self, UrlRefused};
use crate::webhooks::subscriptions::{self, NewSubscription, Subscription};
use crate::webhooks::WebhookError;

/// The largest body these routes read.
const BODY_LIMIT: usize = 16 * 1024;

/// Subscriptions a study may have.
const MAX_PER_STUDY: usize = 20;

/// A subscription to make.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewWebhookRequest {
    /// Where to deliver: https, at a public address (see `WEBHOOK_ALLOW_PRIVATE_ADDRESSES`).
    url: String,
    /// The notices to deliver, at least one: `session.completed`, `session.abandoned`,
    /// `participant.data.erased`, `study.paused`, `study.resumed`.
    events: Vec<String>,
    /// `whsec_` and 24 to 64 bytes in base64; one is made when none is given.
    #[serde(default)]
    secret: Option<String>,
}

/// A subscription as made: with its secret, shown this once.
#[derive(Serialize, ToSchema)]
pub struct MadeWebhook {
    #[serde(flatten)]
    subscription: Subscription,
    secret: String,
}

impl From<WebhookError> for ApiError {
    fn from(err: WebhookError) -> Self {
        match err {
            WebhookError::Database(e) => e.into(),
            WebhookError::UrlRefused(refused) => refused_url(refused),
            WebhookError::Invalid { field, message } => {
                ApiError::invalid("invalid_value", field, message)
            }
            WebhookError::NotFound(id) => ApiError::not_found(
                "webhook_not_found",
                format!("no webhook {id} on this study"),
            ),
        }
    }
}

fn refused_url(refused: UrlRefused) -> ApiError {
    ApiError::invalid("webhook_url_refused", "url", refused.to_string())
}

/// The kinds named, checked: known, at least one, each once.
fn checked_kinds(events: &[String]) -> Result<Vec<String>, WebhookError> {
    let invalid = |message: String| WebhookError::Invalid {
        field: "events",
        message,
    };
    if events.is_empty() {
        return Err(invalid("name at least one event".into()));
    }
    let mut kept: Vec<String> = Vec::new();
    for e in events {
        let kind: NoticeKind = e.parse().map_err(|_| {
            let known: Vec<&str> = NoticeKind::all().map(NoticeKind::as_str).collect();
            invalid(format!("unknown event {e:?}; known: {}", known.join(", ")))
        })?;
        if !kept.iter().any(|k| k == kind.as_str()) {
            kept.push(kind.as_str().to_string());
        }
    }
    Ok(kept)
}

/// The secret given (checked), or a new one.
fn checked_or_new_secret(given: Option<String>) -> Result<String, WebhookError> {
    let engine = base64::engine::general_purpose::STANDARD;
    match given {
        None => {
            let mut bytes = [0u8; 32];
            getrandom::fill(&mut bytes).expect("the OS random source works");
            Ok(format!("whsec_{}", engine.encode(bytes)))
        }
        Some(s) => {
            let ok = s
                .strip_prefix("whsec_")
                .and_then(|b| engine.decode(b).ok())
                .is_some_and(|key| (24..=64).contains(&key.len()));
            if ok {
                Ok(s)
            } else {
                Err(WebhookError::Invalid {
                    field: "secret",
                    message: "a secret is whsec_ followed by 24 to 64 bytes in base64".into(),
                })
            }
        }
    }
}

/// Subscribe to the study's notices: they are delivered from the next one on, signed with the
/// secret answered here (shown this once).
#[utoipa::path(tag = "webhooks", security(("bearer" = ["owner"])),
    params(("study_id" = String, Path)), request_body = NewWebhookRequest,
    responses((status = 201, body = MadeWebhook), (status = 400), (status = 401), (status = 403),
              (status = 404), (status = 409, description = "too_many_webhooks"),
              (status = 422, description = "webhook_url_refused, invalid_value")))]
#[post("/api/studies/{study_id}/webhooks")]
pub async fn create(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Payload,
    owner: OnStudy<Owner>,
) -> Result<HttpResponse, ApiError> {
    let request: NewWebhookRequest =
        json_body(body, BODY_LIMIT, false, ShapeErrors::BadRequest).await?;
    let study = studies::get(&state.db, &owner.study_id).await?;
    let allow_private = state.settings.webhooks.allow_private_addresses;
    let url = address::check(&request.url, allow_private).map_err(refused_url)?;
    if let Some(url::Host::Domain(name)) = url.host() {
        address::check_name(name, allow_private)
            .await
            .map_err(refused_url)?;
    }
    let events = checked_kinds(&request.events)?;
    let secret = checked_or_new_secret(request.secret)?;
    if subscriptions::of_study(&state.db, &study.study_id, None)
        .await?
        .len()
        >= MAX_PER_STUDY
    {
        return Err(ApiError::Conflict {
            code: "too_many_webhooks",
            message: format!("a study has at most {MAX_PER_STUDY} webhooks; delete one first"),
            details: None,
        });
    }
    let hook_id = uuid::Uuid::new_v4().to_string();
    // The host only: a receiver's path may hold a token of its own.
    note_detail(
        &req,
        format!(
            "add webhook {hook_id} to {}",
            url.host_str().unwrap_or_default()
        ),
    );
    let subscription = subscriptions::create(
        &state.db,
        NewSubscription {
            hook_id,
            study_id: study.study_id,
            // As given (it parses): what the owner reads back is what they wrote.
            url: request.url,
            events,
            secret: secret.clone(),
            created_by: owner.researcher.name,
        },
    )
    .await?;
    Ok(HttpResponse::Created()
        .insert_header((CACHE_CONTROL, "no-store"))
        .json(MadeWebhook {
            subscription,
            secret,
        }))
}

/// The study's subscriptions and how far each has delivered (never their secrets).
#[utoipa::path(tag = "webhooks", security(("bearer" = ["owner"])),
    params(("study_id" = String, Path)),
    responses((status = 200, description = "{webhooks: [Subscription]}"), (status = 401), (status = 403), (status = 404)))]
#[get("/api/studies/{study_id}/webhooks")]
pub async fn list(
    state: web::Data<AppState>,
    owner: OnStudy<Owner>,
) -> Result<HttpResponse, ApiError> {
    let study = studies::get(&state.db, &owner.study_id).await?;
    let hooks = subscriptions::of_study(&state.db, &study.study_id, None).await?;
    Ok(HttpResponse::Ok().json(json!({ "webhooks": hooks })))
}

/// The study's subscription `hook_id`, or 404.
async fn subscription_of(
    state: &AppState,
    study_id: &str,
    hook_id: &str,
) -> Result<Subscription, ApiError> {
    studies::get(&state.db, study_id).await?;
    subscriptions::of_study(&state.db, study_id, Some(hook_id))
        .await?
        .pop()
        .ok_or_else(|| WebhookError::NotFound(hook_id.to_string()).into())
}

/// One subscription.
#[utoipa::path(tag = "webhooks", security(("bearer" = ["owner"])),
    params(("study_id" = String, Path), ("hook_id" = String, Path)),
    responses((status = 200, body = Subscription), (status = 401), (status = 403), (status = 404)))]
#[get("/api/studies/{study_id}/webhooks/{hook_id}")]
pub async fn get(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    _owner: OnStudy<Owner>,
) -> Result<HttpResponse, ApiError> {
    let (study_id, hook_id) = path.into_inner();
    Ok(HttpResponse::Ok().json(subscription_of(&state, &study_id, &hook_id).await?))
}

/// Delete a subscription: nothing more is delivered to it, and its attempts are forgotten.
#[utoipa::path(tag = "webhooks", security(("bearer" = ["owner"])),
    params(("study_id" = String, Path), ("hook_id" = String, Path)),
    responses((status = 204), (status = 401), (status = 403), (status = 404)))]
#[delete("/api/studies/{study_id}/webhooks/{hook_id}")]
pub async fn remove(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    _owner: OnStudy<Owner>,
) -> Result<HttpResponse, ApiError> {
    let (study_id, hook_id) = path.into_inner();
    note_detail(&req, format!("delete webhook {hook_id}"));
    studies::get(&state.db, &study_id).await?;
    if subscriptions::delete(&state.db, &study_id, &hook_id).await? {
        Ok(HttpResponse::NoContent().finish())
    } else {
        Err(WebhookError::NotFound(hook_id).into())
    }
}

/// Where a redelivery starts: a notice's position, or a time (the first notice at or after it).
#[derive(Deserialize, ToSchema)]
#[serde(untagged)]
pub enum RedeliverFrom {
    Position(i64),
    Time(DateTime<Utc>),
}

/// A redelivery.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RedeliverRequest {
    /// A notice's `position` (1 for the study's first), or an RFC 3339 time; none: from the
    /// first notice not delivered yet.
    #[serde(default)]
    from: Option<RedeliverFrom>,
}

/// Deliver again from any point: the cursor goes to just before `from`, failures are cleared (a
/// failing subscription delivers again) and delivery starts now. Notices already delivered go
/// again under their first `webhook-id`; a `from` past the cursor skips the notices before it.
#[utoipa::path(tag = "webhooks", security(("bearer" = ["owner"])),
    params(("study_id" = String, Path), ("hook_id" = String, Path)),
    request_body(content = RedeliverRequest, description = "optional"),
    responses((status = 202, body = Subscription), (status = 400), (status = 401), (status = 403),
              (status = 404), (status = 422)))]
#[post("/api/studies/{study_id}/webhooks/{hook_id}/redeliver")]
pub async fn redeliver(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Payload,
    _owner: OnStudy<Owner>,
) -> Result<HttpResponse, ApiError> {
    let (study_id, hook_id) = path.into_inner();
    let request: RedeliverRequest =
        json_body(body, BODY_LIMIT, true, ShapeErrors::BadRequest).await?;
    let hook = subscription_of(&state, &study_id, &hook_id).await?;
    let from = match request.from {
        None => hook.delivered_through + 1,
        Some(RedeliverFrom::Position(p)) if (1..=hook.head + 1).contains(&p) => p,
        Some(RedeliverFrom::Position(_)) => {
            return Err(WebhookError::Invalid {
                field: "from",
                message: format!(
                    "a position from 1 to {} (one past the study's last notice)",
                    hook.head + 1
                ),
            }
            .into())
        }
        Some(RedeliverFrom::Time(at)) => {
            interview_projections::notices::first_at_or_after(&state.db, &study_id, at).await?
        }
    };
    note_detail(&req, format!("redeliver webhook {hook_id} from {from}"));
    subscriptions::redeliver(&state.db, &study_id, &hook_id, from).await?;
    Ok(HttpResponse::Accepted().json(subscription_of(&state, &study_id, &hook_id).await?))
}

/// Which attempts to read.
#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct DeliveriesQuery {
    /// The `next_cursor` of the previous page.
    cursor: Option<i64>,
    /// Page size, 1–1000 (default 100).
    limit: Option<i64>,
}

/// The subscription's delivery attempts, newest first: the notice, its `webhook-id`, the
/// receiver's status, the latency, the error and the start of the receiver's answer.
#[utoipa::path(tag = "webhooks", security(("bearer" = ["owner"])),
    params(("study_id" = String, Path), ("hook_id" = String, Path), DeliveriesQuery),
    responses((status = 200, description = "{deliveries: [Delivery], next_cursor}"), (status = 400),
              (status = 401), (status = 403), (status = 404)))]
#[get("/api/studies/{study_id}/webhooks/{hook_id}/deliveries")]
pub async fn deliveries(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    Query(query): Query<DeliveriesQuery>,
    _owner: OnStudy<Owner>,
) -> Result<HttpResponse, ApiError> {
    let (study_id, hook_id) = path.into_inner();
    let limit = crate::http::routes::research::limit(query.limit, 1000)?;
    subscription_of(&state, &study_id, &hook_id).await?;
    let before = query.cursor.unwrap_or(i64::MAX);
    let mut page = subscriptions::deliveries(&state.db, &hook_id, before, limit + 1).await?;
    let next_cursor = (page.len() as i64 > limit).then(|| {
        page.truncate(limit as usize);
        page.last().expect("a full page").attempt
    });
    Ok(HttpResponse::Ok().json(json!({ "deliveries": page, "next_cursor": next_cursor })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_made_and_checked() {
        let made = checked_or_new_secret(None).unwrap();
        assert!(made.starts_with("whsec_"));
        assert!(checked_or_new_secret(Some(made)).is_ok());
        for bad in ["whsec_", "whsec_c2hvcnQ=", "abc", "whsec_!!!"] {
            assert!(checked_or_new_secret(Some(bad.into())).is_err(), "{bad}");
        }
    }

    #[test]
    fn events_are_known_kinds_each_once() {
        assert_eq!(
            checked_kinds(&["session.completed".into(), "session.completed".into()]).unwrap(),
            vec!["session.completed"]
        );
        assert!(checked_kinds(&[]).is_err());
        assert!(checked_kinds(&["session.created".into()]).is_err());
    }
}
