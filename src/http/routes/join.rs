//! Joining a study: a session created from the study's public link, and the places and
//! participant references that creates and consents are checked against
//! ([`crate::command::places`], [`crate::command::participant_links`]).

use actix_web::cookie::{Cookie, SameSite};
use actix_web::{post, web, HttpRequest, HttpResponse};
use chrono::Utc;
use interview_session::commands as cmd;
use interview_session::events::SubmitStatus;
use interview_session::study::{PinnedStudy, StudyConfig};
use interview_session::SessionCommand;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::access::Role;
use crate::command::participant_links;
use crate::command::places::{self, Refusal};
use crate::command::store::Actor;
use crate::command::studies::{self, StudyStatus};
use crate::http::auth::{authenticate, require_role, Caller, PARTICIPANT_COOKIE};
use crate::http::body::{json_body, ShapeErrors};
use crate::http::error::ApiError;
use crate::http::routes::studies::ConfigVersionsSchema;
use crate::state::AppState;
use crate::telemetry::request_id;

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSessionRequest {
    /// An opaque reference of the participant's own (a panel id, say); at most 200 characters.
    #[serde(default)]
    participant_ref: Option<String>,
    /// The link's signature of `participant_ref` (hex HMAC-SHA256 under the study's link
    /// secret): required with a `participant_ref` once the study signs its links.
    #[serde(default)]
    participant_ref_signature: Option<String>,
    /// Researchers only: a preview session, kept out of results.
    #[serde(default)]
    preview: bool,
}

#[derive(Serialize, ToSchema)]
pub struct CreateSessionResponse {
    session_id: Uuid,
    status: String,
    /// Bearer token for this session only. Also set as an HttpOnly cookie.
    participant_token: String,
    config_versions: ConfigVersionsSchema,
}

/// Start a session from a study's public link (no login).
// Long by design: the steps of one request in order, cheapest first: the body and the reference's
// length, a preview's researcher token, the rate limits (per address, then per study link) before
// any database work, the open study and the link's signature, the create under the study's places,
// then the interviewer started and the cookie set (secure over https); the order is the behaviour,
// each check refusing before the costlier ones run.
#[utoipa::path(tag = "participant",
    params(("public_slug" = String, Path)),
    request_body(content = CreateSessionRequest, description = "optional"),
    responses((status = 201, body = CreateSessionResponse), (status = 400),
              (status = 403, description = "a participant_ref without its valid signature, on a study that signs its links"),
              (status = 404, description = "unknown or unpublished study"),
              (status = 409, description = "study_paused, study_full, or active_session_exists (the reference holds an open, consented session; which one is not said)"),
              (status = 413), (status = 422), (status = 429, description = "rate_limited, with Retry-After"), (status = 503)))]
#[post("/api/public/studies/{public_slug}/sessions")]
pub async fn create(
    state: web::Data<AppState>,
    guards: web::Data<crate::http::guards::Guards>,
    req: HttpRequest,
    path: web::Path<String>,
    body: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let request: CreateSessionRequest =
        json_body(body, 16 * 1024, true, ShapeErrors::BadRequest).await?;
    if let Some(r) = &request.participant_ref {
        if r.chars().count() > 200 {
            return Err(ApiError::invalid(
                "invalid_participant_ref",
                "participant_ref",
                "at most 200 characters",
            ));
        }
    }
    // A preview is its study owner's trial run: a researcher's token, checked for the role
    // once the study is known.
    let previewer = match request.preview {
        false => None,
        true => match authenticate(&state, &req).await? {
            Caller::Researcher(researcher) => Some(researcher),
            Caller::Participant { .. } => {
                return Err(ApiError::Forbidden(
                    "preview sessions need a researcher token",
                ))
            }
        },
    };
    // Overload protection before any work: per client address, then per study link.
    let address = req
        .peer_addr()
        .map(|a| crate::http::door::client_key(a.ip()).to_string())
        .unwrap_or_default();
    for (limiter, key, who) in [
        (&guards.create_by_address, address.as_str(), "your network"),
        (&guards.create_by_study, path.as_str(), "this study"),
    ] {
        if let Err(retry_after) = limiter.check(key) {
            return Err(ApiError::TooManyRequests {
                message: format!(
                    "too many new interviews from {who} just now; please try again in {retry_after} s"
                ),
                retry_after,
            });
        }
    }
    let pinned = open_study(&state, &path).await?;
    if let Some(researcher) = &previewer {
        require_role(researcher, &pinned.study_id, Role::Owner)?;
    }
    let signed = check_signature(&state, &pinned.study_id, &request).await?;
    let config = pinned.study_config.clone();
    let study_id = pinned.study_id.clone();
    // A reference is checked at create only when signed: otherwise a stranger could ask, of
    // any panel id, whether its owner is taking part. Unsigned, it is checked at consent.
    let participant_ref = request.participant_ref.clone().filter(|_| signed);
    let gate = with_places(
        &state,
        &study_id,
        &config,
        participant_ref.as_deref(),
        None,
        || create_session(&state, &req, pinned, request),
    )
    .await?;
    let (session_id, token, config_versions) = match gate {
        Gate::Passed(created) => created?,
        Gate::Refused(refusal) => return Err(refused(refusal)),
    };
    crate::telemetry::note_session(session_id);
    // The interviewer starts at once: consent, then the interview.
    state.interviewer.trigger(&session_id.to_string());
    // Sent only over https when the server is reached by https (its public URL says so, or the
    // request came in over TLS), so the token never travels in clear (issue 30).
    let https = state
        .settings
        .public_base_url
        .as_deref()
        .is_some_and(|u| u.starts_with("https://"))
        || req.connection_info().scheme() == "https";
    let cookie = Cookie::build(PARTICIPANT_COOKIE, token.clone())
        .path(format!("/api/sessions/{session_id}"))
        .http_only(true)
        .same_site(SameSite::Lax)
        .secure(https)
        .finish();
    Ok(HttpResponse::Created()
        .cookie(cookie)
        .json(CreateSessionResponse {
            session_id,
            status: "created".into(),
            participant_token: token,
            config_versions,
        }))
}

/// The published, unpaused study behind a public link.
async fn open_study(state: &AppState, slug: &str) -> Result<PinnedStudy, ApiError> {
    match studies::by_slug(&state.db, slug).await? {
        Some(s) if s.status == StudyStatus::Paused => Err(ApiError::Conflict {
            code: "study_paused",
            message: "this study is not taking new participants right now".into(),
            details: Some(json!({ "status": "paused" })),
        }),
        Some(s) => s
            .published
            .ok_or_else(|| ApiError::not_found("study_not_found", "no such study")),
        None => Err(ApiError::not_found("study_not_found", "no such study")),
    }
}

/// A study that signs its links takes a `participant_ref` only with its signature (and, if it
/// asks, takes no create without one); whether the reference was signed (false without a
/// reference, or on a study that does not sign).
async fn check_signature(
    state: &AppState,
    study_id: &str,
    request: &CreateSessionRequest,
) -> Result<bool, ApiError> {
    let Some(signing) = participant_links::signing(&state.db, study_id).await? else {
        return Ok(false);
    };
    let Some(participant_ref) = &request.participant_ref else {
        return match signing.require_reference {
            true => Err(ApiError::Forbidden(
                "this study takes participants only through its panel's signed links",
            )),
            false => Ok(false),
        };
    };
    let signed = request
        .participant_ref_signature
        .as_deref()
        .is_some_and(|sig| participant_links::verify(&signing.secret, participant_ref, sig));
    match signed {
        true => Ok(true),
        false => Err(ApiError::Forbidden(
            "this study takes a participant_ref only with the signature its link carries",
        )),
    }
}

/// What came of a request that needed a place.
enum Gate<T> {
    /// The study had room: the request ran, with this result.
    Passed(Result<T, ApiError>),
    /// It did not run.
    Refused(Refusal),
}

/// Runs `act` once the study's places and the participant's reference have been checked, under
/// the study's lock when its rules ask for one: in this process first (so one connection at
/// most waits on the database's lock), then across processes sharing the database.
async fn with_places<T, F, Fut>(
    state: &AppState,
    study_id: &str,
    config: &StudyConfig,
    participant_ref: Option<&str>,
    consenting: Option<&str>,
    act: F,
) -> Result<Gate<T>, ApiError>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<T, ApiError>>,
{
    if !places::guarded(config, participant_ref) {
        return Ok(Gate::Passed(act().await));
    }
    // Not forever: a holder stuck on the database must not hold every other request here.
    let _serialized = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        state.study_locks.of(study_id).lock(),
    )
    .await
    .map_err(|_| ApiError::Overloaded {
        what: "study_places",
    })?;
    let lock = interview_projections::locks::lock_study_creates(&state.db, study_id).await?;
    let outcome = match check_under_lock(state, study_id, config, participant_ref, consenting).await
    {
        Ok(None) => Ok(Gate::Passed(act().await)),
        Ok(Some(refusal)) => Ok(Gate::Refused(refusal)),
        Err(e) => Err(e),
    };
    lock.release().await;
    outcome
}

/// The check itself, under the study's lock. A consenting session is read again first: a
/// second consent racing the first (two tabs, a retried request) finds it given and passes on to
/// the aggregate, which answers it; the session never counts against itself.
async fn check_under_lock(
    state: &AppState,
    study_id: &str,
    config: &StudyConfig,
    participant_ref: Option<&str>,
    consenting: Option<&str>,
) -> Result<Option<Refusal>, ApiError> {
    if let Some(id) = consenting {
        let view = interview_projections::read::session_state(&state.db, id).await?;
        if view.is_some_and(|v| v.consent.is_some()) {
            return Ok(None);
        }
    }
    Ok(places::check(&state.db, study_id, config, participant_ref, consenting).await?)
}

/// The 409 of a refused place. It never names another session: a stranger who knows a
/// reference learns nothing from it.
fn refused(refusal: Refusal) -> ApiError {
    match refusal {
        Refusal::StudyFull { max_sessions } => ApiError::Conflict {
            code: "study_full",
            message: "this study has all the participants it needs, thank you".into(),
            details: Some(json!({ "max_sessions": max_sessions })),
        },
        Refusal::ParticipantHasSession => ApiError::Conflict {
            code: "active_session_exists",
            message: "you already have an interview in progress for this study; please continue it where you started it".into(),
            details: None,
        },
    }
}

/// The create itself; the caller has checked the study's rules.
async fn create_session(
    state: &AppState,
    req: &HttpRequest,
    pinned: PinnedStudy,
    request: CreateSessionRequest,
) -> Result<(Uuid, String, ConfigVersionsSchema), ApiError> {
    let session_id = Uuid::new_v4();
    let (token, token_sha256) = crate::http::auth::new_participant_token(session_id);
    let config_versions = (&pinned.config_versions).into();
    let command = SessionCommand::Create(cmd::Create {
        session_id,
        study: Box::new(pinned),
        participant_ref: request.participant_ref,
        participant_token_sha256: token_sha256,
        preview: request.preview,
        chain_secret: Some(chain_secret()),
        at: Utc::now(),
    });
    state
        .store
        .execute(
            &session_id.to_string(),
            command,
            Actor::Participant,
            &request_id(req),
        )
        .await?;
    Ok((session_id, token, config_versions))
}

/// Whether a participant command accepts a consent (`{"accepted": true}`): the moment a place
/// is taken.
pub(crate) fn accepts_consent(command: &SessionCommand) -> bool {
    let (status, value) = match command {
        SessionCommand::SubmitInteraction(cmd::SubmitInteraction { status, value, .. })
        | SessionCommand::SubmitThenPostMessage(cmd::SubmitThenPostMessage {
            answer: cmd::SubmitInteraction { status, value, .. },
            ..
        }) => (status, value),
        _ => return false,
    };
    *status == SubmitStatus::Submitted
        && value.as_ref().and_then(|v| v.get("accepted")) == Some(&Value::Bool(true))
}

/// Runs a participant's command (`act`); one that accepts a consent ([`accepts_consent`]) is
/// first checked against the study's places and the participant's reference, under the study's
/// lock. A consent refused a place ends the session (`study_full`, `duplicate_participant`)
/// and answers its 409.
pub(crate) async fn execute_with_places<T, F, Fut>(
    state: &AppState,
    req: &HttpRequest,
    session_id: Uuid,
    consenting: bool,
    act: F,
) -> Result<T, ApiError>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<T, ApiError>>,
{
    if !consenting {
        return act().await;
    }
    let id = session_id.to_string();
    let view = match interview_projections::read::session_state(&state.db, &id).await? {
        Some(view) if view.consent.is_none() && !view.preview => view,
        _ => return act().await,
    };
    // The study's rules as published now: a researcher who raises the cap lets people in.
    let config = match studies::get(&state.db, &view.study_id).await?.published {
        Some(published) => published.study_config,
        None => return act().await,
    };
    let participant_ref = view.participant_ref.as_deref();
    match with_places(
        state,
        &view.study_id,
        &config,
        participant_ref,
        Some(&id),
        act,
    )
    .await?
    {
        Gate::Passed(done) => done,
        Gate::Refused(refusal) => {
            let abandon = SessionCommand::Abandon(cmd::Abandon {
                reason: refusal.end_reason(),
                at: Utc::now(),
            });
            state
                .store
                .execute(&id, abandon, Actor::System, &request_id(req))
                .await?;
            state.interviewer.trigger(&id);
            Err(refused(refusal))
        }
    }
}

/// 256 random bits, in hex: a new session's `chain_secret` (`interview_session::SessionCreated`).
fn chain_secret() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the operating system gives random bytes");
    interview_session::hash::to_hex(&bytes)
}
