//! The participant's turns: a message, a widget answered or skipped — with a message in their
//! own words when none of its options fit —, and ending the interview. Each is one command on
//! the session; the interviewer takes its turn after it.

use actix_web::{post, web, HttpRequest, HttpResponse};
use chrono::Utc;
use interview_projections::read;
use interview_session::commands as cmd;
use interview_session::events::SubmitStatus;
use interview_session::SessionCommand;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::command::store::Actor;
use crate::http::auth::Participant;
use crate::http::body::{json_body, ShapeErrors};
use crate::http::error::ApiError;
use crate::state::AppState;
use crate::telemetry::request_id;

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PostMessageRequest {
    content: String,
    /// Makes retries safe: the same id always answers the same `turn_id` and writes once.
    #[serde(default)]
    client_message_id: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct PostMessageResponse {
    turn_id: Uuid,
    /// The session's status after the message was accepted.
    status: String,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitInteractionRequest {
    #[schema(value_type = String, example = "submitted")]
    status: SubmitStatus,
    /// The answer; its shape is the interaction's `value_schema`.
    #[serde(default)]
    #[schema(value_type = Object)]
    value: Option<Value>,
    #[serde(default)]
    #[schema(value_type = Object)]
    client_context: Option<Value>,
    /// The participant's message in their own words, written right after the answer or skip in
    /// the same turn (both or neither): "none of these fit — I'll say it myself".
    #[serde(default)]
    message: Option<PostMessageRequest>,
}

#[derive(Serialize, ToSchema)]
pub struct SubmitInteractionResponse {
    ok: bool,
    status: String,
}

/// Runs a participant's command, gives the interviewer its turn (handing it the events the
/// command committed) and answers the session's status after the command.
pub(crate) async fn execute_participant(
    state: &AppState,
    req: &HttpRequest,
    session_id: Uuid,
    command: SessionCommand,
) -> Result<String, ApiError> {
    let id = session_id.to_string();
    // A session's inputs are rate limited (each may cost model calls), and the calls they
    // cause are charged to the address they came from (issue 30, `interviewer::budget`).
    let guards = crate::http::guards::Guards::of(req);
    if let Err(retry_after) = guards.inputs_by_session.check(&id) {
        return Err(ApiError::TooManyRequests {
            message: format!(
                "that was a lot of messages in a short time; please try again in {retry_after} s"
            ),
            retry_after,
        });
    }
    if let Some(peer) = req.peer_addr() {
        let address = crate::http::door::client_key(peer.ip()).to_string();
        state.interviewer.note_address(&id, &address);
    }
    let actor = Actor::Participant;
    // A consent takes one of the study's places (`join`): checked, under the study's lock,
    // before it is committed.
    let consenting = super::join::accepts_consent(&command);
    let committed =
        super::join::execute_with_places(state, req, session_id, consenting, || async {
            let request = request_id(req);
            Ok(state
                .store
                .execute_committed(&id, command, actor, &request)
                .await?)
        })
        .await?;
    // The state the command just committed; the database only when it is no longer kept.
    let status = match state.store.kept_status(&id) {
        Some(status) => status.as_str().to_string(),
        None => read::session_status(&state.db, &id)
            .await?
            .ok_or_else(ApiError::session_not_found)?,
    };
    // Handed to the interviewer only while they are the last this process committed on the
    // session: another participant command racing this one may have committed after them.
    let last = committed.last().map(|(seq, _)| *seq);
    if last.is_some() && state.store.kept_version(&id) == last {
        state.interviewer.trigger_after(&id, committed);
    } else {
        state.interviewer.trigger(&id);
    }
    Ok(status)
}

/// Post a participant message.
#[utoipa::path(tag = "participant", security(("bearer" = [])),
    params(("session_id" = String, Path)), request_body = PostMessageRequest,
    responses((status = 202, body = PostMessageResponse), (status = 400), (status = 401), (status = 403), (status = 404),
              (status = 409, description = "a pending interaction or another state conflict; details say which"),
              (status = 410, description = "the session has ended"), (status = 413), (status = 422), (status = 503)))]
#[post("/api/sessions/{session_id}/messages")]
pub async fn post_message(
    state: web::Data<AppState>,
    req: HttpRequest,
    Participant { session_id }: Participant,
    body: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let limit = state.settings.max_message_bytes;
    let request: PostMessageRequest = json_body(
        body,
        state.settings.message_body_bytes(),
        false,
        ShapeErrors::BadRequest,
    )
    .await?;
    let message = message_command(session_id, request, limit, "")?;
    let turn_id = message.turn_id;
    let command = SessionCommand::PostMessage(message);
    let status = execute_participant(&state, &req, session_id, command).await?;
    Ok(HttpResponse::Accepted().json(PostMessageResponse { turn_id, status }))
}

/// A participant's message as its command: not empty, at most `limit` bytes; its turn is
/// named from its `client_message_id`, so a retry writes nothing twice. An error names the
/// field under `within` (`""` for a message body, `"message."` for one inside an answer).
fn message_command(
    session_id: Uuid,
    request: PostMessageRequest,
    limit: usize,
    within: &str,
) -> Result<cmd::PostMessage, ApiError> {
    if request.content.trim().is_empty() {
        return Err(ApiError::BadRequest {
            code: "empty_content",
            message: "the message is empty".into(),
            details: Some(json!({ "field": format!("{within}content") })),
        });
    }
    if request.content.len() > limit {
        return Err(ApiError::PayloadTooLarge {
            what: "message",
            limit,
        });
    }
    let turn_id = match &request.client_message_id {
        Some(id) if id.is_empty() || id.chars().count() > 200 => {
            return Err(ApiError::invalid(
                "invalid_client_message_id",
                format!("{within}client_message_id"),
                "use 1 to 200 characters",
            ))
        }
        Some(id) => Uuid::new_v5(&session_id, id.as_bytes()),
        None => Uuid::new_v4(),
    };
    Ok(cmd::PostMessage {
        turn_id,
        client_message_id: request.client_message_id,
        content: request.content,
        at: Utc::now(),
    })
}

/// Answer (or skip) the pending interaction; with a `message`, the participant's own words
/// follow it in the same turn.
#[utoipa::path(tag = "participant",
    security(("bearer" = [])),
    params(("session_id" = String, Path), ("interaction_id" = String, Path)), request_body = SubmitInteractionRequest,
    responses((status = 200, body = SubmitInteractionResponse), (status = 400), (status = 401), (status = 403),
              (status = 404, description = "unknown session or interaction"),
              (status = 409, description = "interaction_already_answered"), (status = 410), (status = 422)))]
#[post("/api/sessions/{session_id}/interactions/{interaction_id}/submit")]
pub async fn submit_interaction(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    Participant { session_id }: Participant,
    body: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let (_, interaction_id) = path.into_inner();
    // A body that carries a message is held to `max_body_bytes` like any other (the door reads
    // no more); the message in it, to `max_message_bytes`.
    let request: SubmitInteractionRequest = json_body(
        body,
        state.settings.max_body_bytes,
        false,
        ShapeErrors::BadRequest,
    )
    .await?;
    let answer = cmd::SubmitInteraction {
        turn_id: Uuid::new_v5(
            &session_id,
            format!("interaction:{interaction_id}").as_bytes(),
        ),
        interaction_id,
        status: request.status,
        value: request.value,
        client_context: request.client_context,
        at: Utc::now(),
    };
    let command = match request.message {
        None => SessionCommand::SubmitInteraction(answer),
        Some(message) => {
            let limit = state.settings.max_message_bytes;
            let message = message_command(session_id, message, limit, "message.")?;
            SessionCommand::SubmitThenPostMessage(cmd::SubmitThenPostMessage { answer, message })
        }
    };
    let status = execute_participant(&state, &req, session_id, command).await?;
    Ok(HttpResponse::Ok().json(SubmitInteractionResponse { ok: true, status }))
}

/// The participant ends the interview. During the interview the interviewer stops asking and
/// confirms its summary (ending again at that step completes the session with the summary
/// unconfirmed); before it (consent, screening) the session is abandoned. A widget left open
/// is recorded as skipped. The body, if any, is ignored.
#[utoipa::path(tag = "participant", security(("bearer" = [])),
    params(("session_id" = String, Path)),
    responses((status = 200, body = SubmitInteractionResponse), (status = 401), (status = 403), (status = 404),
              (status = 410, description = "the session has already ended"), (status = 503)))]
#[post("/api/sessions/{session_id}/end")]
pub async fn end(
    state: web::Data<AppState>,
    req: HttpRequest,
    Participant { session_id }: Participant,
) -> Result<HttpResponse, ApiError> {
    let command = SessionCommand::RequestEnd(cmd::RequestEnd { at: Utc::now() });
    let status = execute_participant(&state, &req, session_id, command).await?;
    Ok(HttpResponse::Ok().json(SubmitInteractionResponse { ok: true, status }))
}
