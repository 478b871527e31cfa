//! Participant routes: create a session from a public link, post messages, answer widgets, read
//! the session. Researchers may read any session, with more detail.

use actix_web::{get, post, web, HttpRequest, HttpResponse};
use chrono::{DateTime, Utc};
use interview_projections::{read, DecisionRow, SessionStateView, WidgetHistory};
use interview_session::commands as cmd;
use interview_session::events::SubmitStatus;
use interview_session::SessionCommand;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::command::store::Actor;
use crate::http::auth::{Caller, Participant, SessionCaller};
use crate::http::body::{json_body, ShapeErrors};
use crate::http::error::ApiError;
use crate::http::routes::studies::ConfigVersionsSchema;
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
}

#[derive(Serialize, ToSchema)]
pub struct SubmitInteractionResponse {
    ok: bool,
    status: String,
}

#[derive(Serialize, ToSchema)]
pub struct TranscriptTurn {
    turn_id: String,
    role: String,
    /// `message` or `interaction`.
    kind: String,
    content: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    interaction_id: Option<String>,
    created_at: DateTime<Utc>,
}

/// A session; the fields after `last_activity_at` are for researchers only.
#[derive(Serialize, ToSchema)]
pub struct SessionResponse {
    session_id: String,
    status: String,
    current_phase: String,
    turn_count: u32,
    config_versions: Option<ConfigVersionsSchema>,
    transcript: Vec<TranscriptTurn>,
    /// The pending InteractionToolCall, or null.
    #[schema(value_type = Object)]
    pending_interaction: Value,
    created_at: Option<DateTime<Utc>>,
    last_activity_at: Option<DateTime<Utc>>,
    /// Once the session has ended: the study's `completion_redirect_url` with
    /// `{participant_ref}` and `{outcome}` (`completed`, `screened_out`, `abandoned`) filled in.
    redirect_url: Option<String>,
    #[serde(flatten)]
    #[schema(value_type = Object)]
    researcher: Option<Map<String, Value>>,
}

/// The session's state view (404 if it is not there).
pub(crate) async fn load_view(
    state: &AppState,
    session_id: Uuid,
) -> Result<SessionStateView, ApiError> {
    read::session_state(&state.db, &session_id.to_string())
        .await?
        .ok_or_else(ApiError::session_not_found)
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
    if request.content.trim().is_empty() {
        return Err(ApiError::BadRequest {
            code: "empty_content",
            message: "the message is empty".into(),
            details: Some(json!({ "field": "content" })),
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
                "client_message_id",
                "use 1 to 200 characters",
            ))
        }
        Some(id) => Uuid::new_v5(&session_id, id.as_bytes()),
        None => Uuid::new_v4(),
    };
    let command = SessionCommand::PostMessage(cmd::PostMessage {
        turn_id,
        client_message_id: request.client_message_id,
        content: request.content,
        at: Utc::now(),
    });
    let status = execute_participant(&state, &req, session_id, command).await?;
    Ok(HttpResponse::Accepted().json(PostMessageResponse { turn_id, status }))
}

/// Answer (or skip) the pending interaction.
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
    let request: SubmitInteractionRequest = json_body(
        body,
        state.settings.max_body_bytes,
        false,
        ShapeErrors::BadRequest,
    )
    .await?;
    let command = SessionCommand::SubmitInteraction(cmd::SubmitInteraction {
        turn_id: Uuid::new_v5(
            &session_id,
            format!("interaction:{interaction_id}").as_bytes(),
        ),
        interaction_id,
        status: request.status,
        value: request.value,
        client_context: request.client_context,
        at: Utc::now(),
    });
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

/// Read a session: participants see their conversation; researchers also see tool calls,
/// interaction events, extracted fields and the decision log.
#[utoipa::path(tag = "participant", security(("bearer" = [])),
    params(("session_id" = String, Path)),
    responses((status = 200, body = SessionResponse), (status = 401), (status = 403), (status = 404), (status = 503)))]
#[get("/api/sessions/{session_id}")]
pub async fn get(
    state: web::Data<AppState>,
    SessionCaller { caller, session_id }: SessionCaller,
) -> Result<HttpResponse, ApiError> {
    let view = load_view(&state, session_id).await?;
    let rows = read::transcript(&state.db, &session_id.to_string()).await?;
    let transcript = rows
        .into_iter()
        .map(|r| TranscriptTurn {
            turn_id: r.turn_id,
            role: r.role,
            kind: r.kind,
            content: r.content,
            interaction_id: r.interaction_id,
            created_at: r.created_at,
        })
        .collect();
    let researcher = match caller {
        Caller::Researcher => {
            let from_log = from_log(&state, &session_id.to_string(), view.last_seq).await?;
            Some(researcher_fields(&view, from_log))
        }
        Caller::Participant { .. } => None,
    };
    Ok(HttpResponse::Ok().json(SessionResponse {
        session_id: view.session_id.clone(),
        status: view.status.as_str().into(),
        current_phase: view.current_phase.as_ref().into(),
        turn_count: view.turns.count(),
        config_versions: view.config_versions.as_ref().map(Into::into),
        transcript,
        pending_interaction: serde_json::to_value(&view.pending_interaction)
            .expect("interactions serialize"),
        created_at: view.created_at,
        last_activity_at: view.last_activity_at,
        redirect_url: view.redirect_url(),
        researcher,
    }))
}

/// What the researcher routes fold from the session's log rather than keep in a view: where
/// each objective stands (FR-04-13) — exactly what the guards judge by (see
/// `Session::coverage`) —, the session's tool calls and interaction events, and its decision
/// log. Folded up to the view's `last_seq`, so one answer agrees with itself.
pub(crate) struct FromLog {
    pub covered_objectives: Value,
    pub history: WidgetHistory,
    pub decisions: Vec<DecisionRow>,
}

/// Only the tool calls and interaction events of [`from_log`] (no fold of the session).
pub(crate) async fn widget_history(
    state: &AppState,
    session_id: &str,
    up_to: u64,
) -> Result<WidgetHistory, ApiError> {
    let events = read::decoded_events_between(&state.db, session_id, 0, up_to).await?;
    Ok(WidgetHistory::of(events.iter().map(|(_, e)| e)))
}

/// Only the decision log of [`from_log`] (no fold of the session).
pub(crate) async fn decision_log(
    state: &AppState,
    session_id: &str,
    up_to: u64,
) -> Result<Vec<DecisionRow>, ApiError> {
    let events = read::decoded_events_between(&state.db, session_id, 0, up_to).await?;
    Ok(interview_projections::decision_log::of(
        session_id,
        events.iter().map(|(seq, e)| (*seq, e)),
    ))
}

pub(crate) async fn from_log(
    state: &AppState,
    session_id: &str,
    up_to: u64,
) -> Result<FromLog, ApiError> {
    let events = read::decoded_events_between(&state.db, session_id, 0, up_to).await?;
    let history = WidgetHistory::of(events.iter().map(|(_, e)| e));
    let decisions = interview_projections::decision_log::of(
        session_id,
        events.iter().map(|(seq, e)| (*seq, e)),
    );
    let session = interview_session::Session::from_events(events.into_iter().map(|(_, e)| e));
    let covered_objectives: Map<String, Value> = session
        .coverage()
        .into_iter()
        .map(|c| {
            let id = c.objective_id.clone();
            (id, serde_json::to_value(c).expect("coverage serializes"))
        })
        .collect();
    Ok(FromLog {
        covered_objectives: Value::Object(covered_objectives),
        history,
        decisions,
    })
}

fn researcher_fields(view: &SessionStateView, from_log: FromLog) -> Map<String, Value> {
    let FromLog {
        covered_objectives,
        history,
        decisions,
    } = from_log;
    let fields = json!({
        "study_id": view.study_id,
        "public_slug": view.public_slug,
        "participant_ref": view.participant_ref,
        "preview": view.preview,
        "tool_calls": history.tool_calls,
        "interaction_events": history.interaction_events,
        "covered_objectives": covered_objectives,
        "extracted_fields": view.extracted_fields,
        "decision_log": decisions,
        "errors": view.errors,
        "consent": view.consent,
        "screening": view.screening,
        "summary": view.summary,
        "summary_confirmed": view.summary_confirmed,
        "end_reason": view.end_reason,
        "ended_at": view.ended_at,
        "last_seq": view.last_seq,
    });
    match fields {
        Value::Object(map) => map,
        _ => unreachable!("a json! object literal"),
    }
}
