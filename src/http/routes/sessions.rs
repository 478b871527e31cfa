//! Reading a session: participants see their conversation; researchers may read any session,
//! with more detail. (The participant's writes are in `turns`.)

use actix_web::{get, web, HttpResponse};
use chrono::{DateTime, Utc};
use interview_projections::{read, DecisionRow, SessionStateView, WidgetHistory};
use serde::Serialize;
use serde_json::{json, Map, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::http::auth::{Caller, SessionCaller};
use crate::http::error::ApiError;
use crate::http::routes::studies::ConfigVersionsSchema;
use crate::state::AppState;

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

/// Read a session: participants see their conversation; researchers also see tool calls,
/// interaction events, extracted fields and the decision log.
#[utoipa::path(tag = "participant", security(("bearer" = [])),
    params(("session_id" = String, Path)),
    responses((status = 200, body = SessionResponse), (status = 401), (status = 403), (status = 404), (status = 503)))]
#[get("/api/sessions/{session_id}")]
pub async fn get(
    state: web::Data<AppState>,
    SessionCaller {
        caller, session_id, ..
    }: SessionCaller,
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
        Caller::Researcher(_) => {
            let from_log = from_log(&state, &session_id.to_string(), view.last_seq).await?;
            let fields = read::extracted_fields(&state.db, &session_id.to_string()).await?;
            Some(researcher_fields(&view, fields, from_log))
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

fn researcher_fields(
    view: &SessionStateView,
    extracted_fields: Map<String, Value>,
    from_log: FromLog,
) -> Map<String, Value> {
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
        "extracted_fields": extracted_fields,
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
