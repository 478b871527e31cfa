//! Bearer tokens.
//!
//! Researcher tokens come from configuration and are compared by SHA-256 digest. A participant
//! token is `pt_<session id>_<256 random bits>`: it names its session, so a token for another
//! session is recognised (403) rather than merely unknown (401); only its SHA-256 is stored, in
//! the `session.created` event. Browsers' EventSource may send it as the `token` query parameter
//! or the HttpOnly cookie set at session creation.

use actix_web::{FromRequest, HttpRequest};
use interview_session::hash::sha256_hex;
use uuid::Uuid;

use crate::http::error::ApiError;
use crate::state::AppState;
use interview_projections::read;

/// Name of the cookie holding a participant token.
pub const PARTICIPANT_COOKIE: &str = "participant_token";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    Researcher,
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

/// A random hex token of 256 bits (generated researcher tokens).
pub fn new_researcher_token() -> String {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).expect("the OS random source works");
    let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
    format!("rt_{hex}")
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
    if state.researcher_token_digests.contains(&digest) {
        return match carrier {
            Carrier::Header => Ok(Caller::Researcher),
            // Said plainly rather than "invalid", so a researcher knows what to change.
            Carrier::Query | Carrier::Cookie => Err(ApiError::ResearcherTokenOutsideHeader),
        };
    }
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

/// Researchers only: 401 without a valid token, 403 for a participant token.
/// `/metrics`: `METRICS_TOKEN` when set (in the header), or a researcher token.
pub async fn require_metrics_reader(state: &AppState, req: &HttpRequest) -> Result<(), ApiError> {
    if let (Some(expected), Some((token, Carrier::Header))) =
        (&state.settings.metrics_token, presented_token(req))
    {
        // Compared as digests: the comparison takes the same time wherever the tokens differ.
        if sha256_hex(token.as_bytes()) == sha256_hex(expected.0.as_bytes()) {
            return Ok(());
        }
    }
    require_researcher(state, req).await
}

/// What a caller extractor's check comes to.
type Checked<T> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, ApiError>>>>;

/// A caller with a researcher token. As a handler's last argument it lets the handler run for
/// researchers only (401 without a valid token, 403 with a participant's), after the other
/// arguments were extracted — where the check used to be the handler's first line.
pub struct Researcher;

impl FromRequest for Researcher {
    type Error = ApiError;
    type Future = Checked<Self>;

    fn from_request(req: &HttpRequest, _: &mut actix_web::dev::Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let state = state_of(&req)?;
            require_researcher(&state, &req).await.map(|()| Researcher)
        })
    }
}

pub async fn require_researcher(state: &AppState, req: &HttpRequest) -> Result<(), ApiError> {
    match authenticate(state, req).await? {
        Caller::Researcher => Ok(()),
        Caller::Participant { .. } => Err(ApiError::Forbidden("this needs a researcher token")),
    }
}

fn parse_session_id(raw: &str) -> Result<Uuid, ApiError> {
    Uuid::try_parse(raw).map_err(|_| ApiError::session_not_found())
}

/// Checks the caller may see the session `raw_id` names: its own participant, or a researcher
/// (404 for a session that is not there, 403 for another session's participant).
pub(crate) async fn authorize(
    state: &AppState,
    req: &HttpRequest,
    raw_id: &str,
) -> Result<(Caller, Uuid), ApiError> {
    let caller = authenticate(state, req).await?;
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
        Caller::Researcher => {
            if read::session_status(&state.db, &session_id.to_string())
                .await?
                .is_none()
            {
                return Err(ApiError::session_not_found());
            }
        }
    }
    Ok((caller, session_id))
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
}

impl FromRequest for SessionCaller {
    type Error = ApiError;
    type Future = Checked<Self>;

    fn from_request(req: &HttpRequest, _: &mut actix_web::dev::Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let (caller, session_id) =
                authorize(&*state_of(&req)?, &req, &session_in_path(&req)).await?;
            Ok(SessionCaller { caller, session_id })
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
                } => Ok(Participant { session_id }),
                SessionCaller {
                    caller: Caller::Researcher,
                    ..
                } => Err(ApiError::Forbidden(
                    "only the participant can answer in a session",
                )),
            }
        })
    }
}
