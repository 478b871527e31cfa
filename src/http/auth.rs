//! Bearer tokens, and what their holders may do.
//!
//! A researcher's token is one of `RESEARCHER_TOKENS` (admins; compared by SHA-256 digest) or
//! a token issued to a named researcher (`access::identities`, looked up by its digest on every
//! request, so a revoke holds at once); routes then ask for a role on the study they touch
//! ([`OnStudy`], [`Admin`], the session routes through [`authorize`]). A participant
//! token is `pt_<session id>_<256 random bits>`: it names its session, so a token for another
//! session is recognised (403) rather than merely unknown (401); only its SHA-256 is stored, in
//! the `session.created` event. Browsers' EventSource may send it as the `token` query parameter
//! or the HttpOnly cookie set at session creation.

use std::marker::PhantomData;

use actix_web::{FromRequest, HttpRequest};
use interview_session::hash::sha256_hex;
use uuid::Uuid;

use crate::access::{identities, sso, Identity, Role};
use crate::http::access_log::{note_researcher, note_target};

use crate::http::error::ApiError;
use crate::state::AppState;
use interview_projections::read;

/// Name of the cookie holding a participant token.
pub const PARTICIPANT_COOKIE: &str = "participant_token";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    Researcher(Identity),
    Participant { session_id: Uuid },
}

/// A new participant token for `session_id` and its digest.
pub fn new_participant_token(session_id: Uuid) -> (String, String) {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).expect("the OS random source works");
    let secret: String = secret.iter().map(|b| format!("{b:02x}")).collect();
    let token = format!("pt_{}_{secret}", session_id.simple());
    let digest = sha256_hex(token.as_bytes());
    (token, digest)
}

/// Where a token came from. Researcher tokens count only from the header: a query string ends
/// up in proxies' logs and browser history, and a cookie rides along on cross-site requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Carrier {
    Header,
    Query,
    Cookie,
}

/// The token a request carries: Authorization header, then `token` query parameter, then cookie.
fn presented_token(req: &HttpRequest) -> Option<(String, Carrier)> {
    if let Some(value) = req.headers().get(actix_web::http::header::AUTHORIZATION) {
        let value = value.to_str().ok()?;
        let (scheme, token) = value.split_once(' ')?;
        return scheme
            .eq_ignore_ascii_case("bearer")
            .then(|| (token.trim().to_string(), Carrier::Header));
    }
    let from_query = req
        .query_string()
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == "token")
        .map(|(_, v)| v.to_string());
    if let Some(token) = from_query {
        return Some((token, Carrier::Query));
    }
    req.cookie(PARTICIPANT_COOKIE)
        .map(|c| (c.value().to_string(), Carrier::Cookie))
}

/// Whether a researcher's token still reads `study_id` (an open stream asks this while it runs):
/// not revoked, not expired, the role not taken away. A configured token always does.
pub async fn still_reads(state: &AppState, token: &str, study_id: &str) -> bool {
    let digest = sha256_hex(token.as_bytes());
    match identify(state, token, &digest).await {
        Ok(Identified::Is(identity)) => identity.may(study_id, Role::Viewer),
        _ => false,
    }
}

/// The bearer token in the request's `Authorization` header, if any.
pub fn header_token(req: &HttpRequest) -> Option<String> {
    match presented_token(req) {
        Some((token, Carrier::Header)) => Some(token),
        _ => None,
    }
}

/// True when the request is authenticated by the participant cookie alone (no header, no query
/// token): such a request may have been sent by another site's page, so JSON routes insist on
/// a JSON content type from it (a cross-site form cannot send one).
pub fn cookie_only(req: &HttpRequest) -> bool {
    matches!(presented_token(req), Some((_, Carrier::Cookie)))
}

/// Who is calling, or 401.
pub async fn authenticate(state: &AppState, req: &HttpRequest) -> Result<Caller, ApiError> {
    let (token, carrier) = presented_token(req)
        .filter(|(t, _)| !t.is_empty())
        .ok_or(ApiError::Unauthorized)?;
    let digest = sha256_hex(token.as_bytes());
    if !token.starts_with("pt_") {
        let identity = researcher(state, req, &token, &digest).await?;
        note_researcher(req, &identity.name, identity.researcher_id.as_deref());
        return match carrier {
            Carrier::Header => Ok(Caller::Researcher(identity)),
            // Said plainly rather than "invalid", so a researcher knows what to change.
            Carrier::Query | Carrier::Cookie => Err(ApiError::ResearcherTokenOutsideHeader),
        };
    }
    participant(state, &token, &digest).await
}

/// Who a (non-participant) token names, or why it names no one: the one decision both a
/// request ([`researcher`]) and an open stream ([`still_reads`]) take.
enum Identified {
    Is(Identity),
    /// A single sign-on JWT refused.
    RefusedJwt(sso::Refused),
    /// A token of ours that is not (or no longer) live.
    NotLive,
}

async fn identify(state: &AppState, token: &str, digest: &str) -> Result<Identified, ApiError> {
    if state.researcher_token_digests.contains(digest) {
        return Ok(Identified::Is(Identity::configured(digest)));
    }
    if let Some(sso) = state.sso.as_ref().filter(|_| sso::looks_like_jwt(token)) {
        return Ok(match sso.identity(token).await {
            Ok(identity) => Identified::Is(identity),
            Err(refused) => Identified::RefusedJwt(refused),
        });
    }
    Ok(
        match identities::identity(&state.db, digest, chrono::Utc::now()).await? {
            Some(identity) => Identified::Is(identity),
            None => Identified::NotLive,
        },
    )
}

/// The researcher a (non-participant) token names: a configured admin, a single sign-on JWT,
/// or a token issued here; else 401, noted for the access log under whom it names.
async fn researcher(
    state: &AppState,
    req: &HttpRequest,
    token: &str,
    digest: &str,
) -> Result<Identity, ApiError> {
    match identify(state, token, digest).await? {
        Identified::Is(identity) => return Ok(identity),
        Identified::RefusedJwt(refused) => {
            // A refused JWT is in the access log: under the researcher it names when its
            // signature held, else as an unverified token (at most so many a second).
            tracing::info!(reason = %refused, "a single sign-on token was refused");
            match &refused {
                sso::Refused::Claims { name, id, .. } => note_researcher(req, name, id.as_deref()),
                sso::Refused::Unverified(_)
                    if state
                        .sso
                        .as_ref()
                        .is_some_and(|sso| sso.record_unverified()) =>
                {
                    note_researcher(req, "unverified token", None)
                }
                sso::Refused::Unverified(_) => {}
            }
        }
        Identified::NotLive => {
            // A revoked or expired token still names its researcher: the refusal is theirs in
            // the access log. A token that names no one leaves no row.
            if let Some((name, id)) = identities::holder(&state.db, digest).await? {
                note_researcher(req, &name, Some(&id));
            }
        }
    }
    Err(ApiError::Unauthorized)
}

/// The session a participant's token (`pt_<session>_<secret>`) opens, checked against the
/// digest its `session.created` event stored (kept in a cache after the first read).
async fn participant(state: &AppState, token: &str, digest: &str) -> Result<Caller, ApiError> {
    let session_id = token
        .strip_prefix("pt_")
        .and_then(|rest| rest.split_once('_'))
        .and_then(|(id, _)| Uuid::try_parse(id).ok())
        .ok_or(ApiError::Unauthorized)?;
    let known = state
        .participant_token_digests
        .lock()
        .expect("the token cache is never poisoned")
        .get(&session_id)
        .cloned();
    let stored = match known {
        Some(stored) => stored,
        None => {
            let stored =
                interview_projections::read::session_token(&state.db, &session_id.to_string())
                    .await?
                    .ok_or(ApiError::Unauthorized)?;
            state
                .participant_token_digests
                .lock()
                .expect("the token cache is never poisoned")
                .insert(session_id, stored.clone());
            stored
        }
    };
    if stored == digest {
        Ok(Caller::Participant { session_id })
    } else {
        Err(ApiError::Unauthorized)
    }
}

/// `/metrics`: `METRICS_TOKEN` when set (in the header), or an admin's token.
pub async fn require_metrics_reader(state: &AppState, req: &HttpRequest) -> Result<(), ApiError> {
    if let (Some(expected), Some((token, Carrier::Header))) =
        (&state.settings.metrics_token, presented_token(req))
    {
        // Compared as digests: the comparison takes the same time wherever the tokens differ.
        if sha256_hex(token.as_bytes()) == sha256_hex(expected.0.as_bytes()) {
            return Ok(());
        }
    }
    match require_researcher(state, req).await? {
        identity if identity.admin => Ok(()),
        _ => Err(ApiError::RoleRequired { role: "admin" }),
    }
}

/// What a caller extractor's check comes to.
type Checked<T> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, ApiError>>>>;

/// A caller with a researcher token, whoever they are (401 without a valid token, 403 with a
/// participant's): routes that answer each researcher with what they may see (the study list).
/// As a handler's last argument, the check runs after the other arguments were extracted.
pub struct Researcher(pub Identity);

impl FromRequest for Researcher {
    type Error = ApiError;
    type Future = Checked<Self>;

    fn from_request(req: &HttpRequest, _: &mut actix_web::dev::Payload) -> Self::Future {
        researcher_then(req, |identity| Ok(Researcher(identity)))
    }
}

/// The caller as a researcher (401, or 403 for a participant's token), then `check`ed.
fn researcher_then<T: 'static>(
    req: &HttpRequest,
    check: impl FnOnce(Identity) -> Result<T, ApiError> + 'static,
) -> Checked<T> {
    let req = req.clone();
    Box::pin(async move {
        let state = state_of(&req)?;
        check(require_researcher(&state, &req).await?)
    })
}

/// An admin (a configured token, or a researcher made admin): creating studies, managing
/// researchers. 403 `forbidden` with `details.required_role: "admin"` for other researchers.
pub struct Admin(pub Identity);

impl FromRequest for Admin {
    type Error = ApiError;
    type Future = Checked<Self>;

    fn from_request(req: &HttpRequest, _: &mut actix_web::dev::Payload) -> Self::Future {
        researcher_then(req, |identity| match identity.admin {
            true => Ok(Admin(identity)),
            false => Err(ApiError::RoleRequired { role: "admin" }),
        })
    }
}

/// The role a route needs on its study, as a type ([`OnStudy`]'s parameter).
pub trait Needs {
    const ROLE: Role;
}
/// Reads a study and its sessions.
pub struct Viewer;
/// Reads and exports results.
pub struct Analyst;
/// Changes the study, its roles, and erases its participants' data.
pub struct Owner;
impl Needs for Viewer {
    const ROLE: Role = Role::Viewer;
}
impl Needs for Analyst {
    const ROLE: Role = Role::Analyst;
}
impl Needs for Owner {
    const ROLE: Role = Role::Owner;
}

/// A researcher holding at least `N`'s role on the study the path names (`{study_id}`): 403
/// `forbidden` with `details.required_role` otherwise — also for a study that is not there,
/// unless the caller is an admin (who then gets the route's 404), so a role-less caller learns
/// nothing of which studies exist.
pub struct OnStudy<N> {
    pub researcher: Identity,
    pub study_id: String,
    needs: PhantomData<N>,
}

impl<N: Needs> FromRequest for OnStudy<N> {
    type Error = ApiError;
    type Future = Checked<Self>;

    fn from_request(req: &HttpRequest, _: &mut actix_web::dev::Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let state = state_of(&req)?;
            let researcher = require_researcher(&state, &req).await?;
            let study_id = req
                .match_info()
                .get("study_id")
                .unwrap_or_default()
                .to_string();
            note_target(&req, Some(&study_id), None);
            require_role(&researcher, &study_id, N::ROLE)?;
            Ok(OnStudy {
                researcher,
                study_id,
                needs: PhantomData,
            })
        })
    }
}

/// 403 unless `researcher` holds at least `needed` on `study_id`.
pub fn require_role(researcher: &Identity, study_id: &str, needed: Role) -> Result<(), ApiError> {
    if researcher.may(study_id, needed) {
        return Ok(());
    }
    Err(ApiError::RoleRequired {
        role: needed.into(),
    })
}

/// The researcher calling, or 401 (no valid token) / 403 (a participant's token).
pub async fn require_researcher(state: &AppState, req: &HttpRequest) -> Result<Identity, ApiError> {
    match authenticate(state, req).await? {
        Caller::Researcher(identity) => Ok(identity),
        Caller::Participant { .. } => Err(ApiError::Forbidden("this needs a researcher token")),
    }
}

fn parse_session_id(raw: &str) -> Result<Uuid, ApiError> {
    Uuid::try_parse(raw).map_err(|_| ApiError::session_not_found())
}

/// Checks the caller may see the session `raw_id` names: its own participant, or a researcher
/// with a role on its study (404 for a session that is not there, 403 for another session's
/// participant or a researcher without a role there). Answers the session's study for a
/// researcher (a participant's request reads nothing more).
pub(crate) async fn authorize(
    state: &AppState,
    req: &HttpRequest,
    raw_id: &str,
) -> Result<(Caller, Uuid, Option<String>), ApiError> {
    let caller = authenticate(state, req).await?;
    authorize_caller(state, req, caller, raw_id).await
}

/// [`authorize`] for a caller already authenticated.
pub(crate) async fn authorize_caller(
    state: &AppState,
    req: &HttpRequest,
    caller: Caller,
    raw_id: &str,
) -> Result<(Caller, Uuid, Option<String>), ApiError> {
    let session_id = parse_session_id(raw_id)?;
    crate::telemetry::note_session(session_id);
    match caller {
        // A participant token is only valid for a session that exists.
        Caller::Participant { session_id: own } if own == session_id => {}
        Caller::Participant { .. } => {
            if read::session_status(&state.db, &session_id.to_string())
                .await?
                .is_none()
            {
                return Err(ApiError::session_not_found());
            }
            return Err(ApiError::Forbidden("this token belongs to another session"));
        }
        Caller::Researcher(ref researcher) => {
            let id = session_id.to_string();
            note_target(req, None, Some(&id));
            let study_id = read::session_study(&state.db, &id)
                .await?
                .ok_or_else(ApiError::session_not_found)?;
            note_target(req, Some(&study_id), None);
            require_role(researcher, &study_id, Role::Viewer)?;
            return Ok((caller, session_id, Some(study_id)));
        }
    }
    Ok((caller, session_id, None))
}

/// The server state a request's extractor reads.
fn state_of(req: &HttpRequest) -> Result<actix_web::web::Data<AppState>, ApiError> {
    req.app_data::<actix_web::web::Data<AppState>>()
        .cloned()
        .ok_or_else(|| ApiError::Internal("the server state is not registered".into()))
}

/// The session a route's path names (`{session_id}`).
fn session_in_path(req: &HttpRequest) -> String {
    req.match_info()
        .get("session_id")
        .unwrap_or_default()
        .to_string()
}

/// Who calls a session's route, checked against the session its path names: the session's own
/// participant, or a researcher ([`authorize`]). As a handler's argument, before the body, it
/// runs the check before anything of the request is read.
pub struct SessionCaller {
    pub caller: Caller,
    pub session_id: Uuid,
    /// The session's study, for a researcher (whose role on it was checked).
    pub study_id: Option<String>,
}

impl FromRequest for SessionCaller {
    type Error = ApiError;
    type Future = Checked<Self>;

    fn from_request(req: &HttpRequest, _: &mut actix_web::dev::Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let (caller, session_id, study_id) =
                authorize(&*state_of(&req)?, &req, &session_in_path(&req)).await?;
            Ok(SessionCaller {
                caller,
                session_id,
                study_id,
            })
        })
    }
}

/// The participant of the session a route's path names: the one caller who may speak in it
/// (researchers may read sessions but not speak in them).
pub struct Participant {
    pub session_id: Uuid,
}

impl FromRequest for Participant {
    type Error = ApiError;
    type Future = Checked<Self>;

    fn from_request(req: &HttpRequest, payload: &mut actix_web::dev::Payload) -> Self::Future {
        let caller = SessionCaller::from_request(req, payload);
        Box::pin(async move {
            match caller.await? {
                SessionCaller {
                    caller: Caller::Participant { .. },
                    session_id,
                    ..
                } => Ok(Participant { session_id }),
                SessionCaller {
                    caller: Caller::Researcher(_),
                    ..
                } => Err(ApiError::Forbidden(
                    "only the participant can answer in a session",
                )),
            }
        })
    }
}
