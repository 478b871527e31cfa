//! Researcher read APIs: a study's sessions, each session's transcript, state, decisions, tool
//! calls, interaction events and raw event log, and a study's results as JSON pages or streamed
//! CSV / JSON Lines exports. All need a researcher token (participant tokens get 403).

use actix_web::web::Bytes;
use actix_web::{get, web, HttpRequest, HttpResponse};
use chrono::{DateTime, Utc};
use interview_projections::read::{self, SessionFilter};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::mpsc;
use utoipa::IntoParams;

use crate::command::studies;
use crate::http::auth::{authorize_caller, require_researcher, Analyst, Caller, OnStudy, Viewer};
use crate::http::error::ApiError;
use crate::http::export;
use crate::http::routes::sessions::{decision_log, from_log, load_view, widget_history};
use crate::state::AppState;

const STATUSES: [&str; 7] = [
    "created",
    "active",
    "waiting_for_user",
    "waiting_for_tool",
    "completed",
    "abandoned",
    "all",
];

#[derive(Deserialize, IntoParams)]
pub struct SessionListQuery {
    /// One status, or `all`; by default every session but abandoned ones (the valid list).
    status: Option<String>,
    /// Include preview sessions (default false).
    #[serde(default)]
    include_preview: bool,
    /// The `next_cursor` of the previous page.
    cursor: Option<String>,
    /// Page size, 1–500 (default 100).
    limit: Option<i64>,
}

#[derive(Deserialize, IntoParams)]
pub struct PageQuery {
    cursor: Option<String>,
    /// Page size, 1–1000 (default 100).
    limit: Option<i64>,
}

fn bad_query(field: &str, message: &str) -> ApiError {
    ApiError::BadRequest {
        code: "invalid_query",
        message: message.into(),
        details: Some(serde_json::json!({ "field": field })),
    }
}

/// Cursors are `<nanoseconds since the epoch>.<id>` of the last item of the previous page
/// (full precision: the stored times have nanoseconds).
fn encode_cursor(at: Option<DateTime<Utc>>, id: &str) -> String {
    format!(
        "{}.{id}",
        at.and_then(|t| t.timestamp_nanos_opt()).unwrap_or_default()
    )
}

fn decode_cursor(cursor: &Option<String>) -> Result<Option<(DateTime<Utc>, String)>, ApiError> {
    let Some(c) = cursor.as_deref().filter(|c| !c.is_empty()) else {
        return Ok(None);
    };
    let (micros, id) = c
        .split_once('.')
        .ok_or_else(|| bad_query("cursor", "cursor is not one this API gave"))?;
    let nanos: i64 = micros
        .parse()
        .map_err(|_| bad_query("cursor", "cursor is not one this API gave"))?;
    let at = DateTime::from_timestamp_nanos(nanos);
    Ok(Some((at, id.to_string())))
}

/// A page size: 100 by default, 1 to `max` when given (400 `invalid_query` otherwise).
pub(crate) fn limit(raw: Option<i64>, max: i64) -> Result<i64, ApiError> {
    match raw {
        None => Ok(100),
        Some(n) if (1..=max).contains(&n) => Ok(n),
        Some(_) => Err(bad_query(
            "limit",
            &format!("limit must be between 1 and {max}"),
        )),
    }
}

/// A study's sessions, oldest first, in pages.
#[utoipa::path(tag = "research", security(("bearer" = ["viewer"])),
    params(("study_id" = String, Path), SessionListQuery),
    responses((status = 200, description = "{sessions: [...], next_cursor}"), (status = 400), (status = 401), (status = 403), (status = 404)))]
#[get("/api/studies/{study_id}/sessions")]
pub async fn study_sessions(
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: crate::http::query::Query<SessionListQuery>,
    _viewer: OnStudy<Viewer>,
) -> Result<HttpResponse, ApiError> {
    studies::get(&state.db, &path).await?;
    let status = match query.status.as_deref() {
        None => None,
        Some(s) if STATUSES.contains(&s) => Some(s.to_string()),
        Some(_) => {
            return Err(bad_query(
                "status",
                "status must be a session status or `all`",
            ))
        }
    };
    let page = limit(query.limit, 500)?;
    let filter = SessionFilter {
        status: status.clone().filter(|s| s != "all"),
        include_preview: query.include_preview,
        after: decode_cursor(&query.cursor)?,
        limit: page + 1,
    };
    // `all` means every status, abandoned included.
    let mut sessions = if status.as_deref() == Some("all") {
        let mut all = Vec::new();
        for s in &STATUSES[..6] {
            let f = SessionFilter {
                status: Some(s.to_string()),
                ..filter.clone()
            };
            all.extend(read::study_sessions(&state.db, &path, &f).await?);
        }
        all.sort_by(|a, b| (a.created_at, &a.session_id).cmp(&(b.created_at, &b.session_id)));
        all.truncate(page as usize + 1);
        all
    } else {
        read::study_sessions(&state.db, &path, &filter).await?
    };
    let next_cursor = (sessions.len() as i64 > page).then(|| {
        sessions.truncate(page as usize);
        let last = sessions.last().expect("a full page");
        encode_cursor(last.created_at, &last.session_id)
    });
    Ok(HttpResponse::Ok().json(json!({ "sessions": sessions, "next_cursor": next_cursor })))
}

async fn researcher_session(
    state: &AppState,
    req: &HttpRequest,
    raw: &str,
) -> Result<(String, interview_projections::SessionStateView), ApiError> {
    // A participant's token is refused before the session is looked at (as every researcher
    // route refuses it); a researcher needs a role on the session's study.
    let researcher = require_researcher(state, req).await?;
    let (_, id, _) = authorize_caller(state, req, Caller::Researcher(researcher), raw).await?;
    Ok((id.to_string(), load_view(state, id).await?))
}

/// A session's transcript.
#[utoipa::path(tag = "research", security(("bearer" = ["viewer"])),
    params(("session_id" = String, Path)), responses((status = 200), (status = 401), (status = 403), (status = 404)))]
#[get("/api/sessions/{session_id}/transcript")]
pub async fn transcript(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let (id, _) = researcher_session(&state, &req, &path).await?;
    let rows = read::transcript(&state.db, &id).await?;
    Ok(HttpResponse::Ok().json(json!({ "session_id": id, "transcript": rows })))
}

/// A session's state view.
#[utoipa::path(tag = "research", security(("bearer" = ["viewer"])),
    params(("session_id" = String, Path)), responses((status = 200), (status = 401), (status = 403), (status = 404)))]
#[get("/api/sessions/{session_id}/state")]
pub async fn session_state(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let (id, view) = researcher_session(&state, &req, &path).await?;
    let from_log = from_log(&state, &id, view.last_seq).await?;
    let fields = read::extracted_fields(&state.db, &id).await?;
    let mut body = serde_json::to_value(view).expect("views serialize");
    body["extracted_fields"] = serde_json::Value::Object(fields);
    body["covered_objectives"] = from_log.covered_objectives;
    body["tool_calls"] =
        serde_json::to_value(from_log.history.tool_calls).expect("records serialize");
    body["interaction_events"] =
        serde_json::to_value(from_log.history.interaction_events).expect("records serialize");
    Ok(HttpResponse::Ok().json(body))
}

/// A session's decision log.
#[utoipa::path(tag = "research", security(("bearer" = ["viewer"])),
    params(("session_id" = String, Path)), responses((status = 200), (status = 401), (status = 403), (status = 404)))]
#[get("/api/sessions/{session_id}/decisions")]
pub async fn decisions(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let (id, view) = researcher_session(&state, &req, &path).await?;
    let rows = decision_log(&state, &id, view.last_seq).await?;
    Ok(HttpResponse::Ok().json(json!({ "session_id": id, "decisions": rows })))
}

/// A session's tool calls with their results.
#[utoipa::path(tag = "research", security(("bearer" = ["viewer"])),
    params(("session_id" = String, Path)), responses((status = 200), (status = 401), (status = 403), (status = 404)))]
#[get("/api/sessions/{session_id}/tool-calls")]
pub async fn tool_calls(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let (id, view) = researcher_session(&state, &req, &path).await?;
    let history = widget_history(&state, &id, view.last_seq).await?;
    Ok(HttpResponse::Ok().json(json!({ "session_id": id, "tool_calls": history.tool_calls })))
}

/// A session's interaction events (rendered, submitted, skipped).
#[utoipa::path(tag = "research", security(("bearer" = ["viewer"])),
    params(("session_id" = String, Path)), responses((status = 200), (status = 401), (status = 403), (status = 404)))]
#[get("/api/sessions/{session_id}/interaction-events")]
pub async fn interaction_events(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let (id, view) = researcher_session(&state, &req, &path).await?;
    let history = widget_history(&state, &id, view.last_seq).await?;
    Ok(HttpResponse::Ok()
        .json(json!({ "session_id": id, "interaction_events": history.interaction_events })))
}

/// A session's raw event log.
#[utoipa::path(tag = "research", security(("bearer" = ["viewer"])),
    params(("session_id" = String, Path)), responses((status = 200), (status = 401), (status = 403), (status = 404)))]
#[get("/api/sessions/{session_id}/events")]
pub async fn events(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let (id, _) = researcher_session(&state, &req, &path).await?;
    let rows = read::events(&state.db, &id).await?;
    let versions = read::event_versions(&state.db, &id).await?;
    let events: Vec<_> = rows
        .into_iter()
        .zip(versions)
        .map(|((sequence, event_type, payload, metadata), event_version)| {
            json!({"sequence": sequence, "event_type": event_type, "event_version": event_version, "payload": payload, "metadata": metadata})
        })
        .collect();
    Ok(HttpResponse::Ok().json(json!({ "session_id": id, "events": events })))
}

/// A study's results (completed, non-preview sessions), in pages.
#[utoipa::path(tag = "research", security(("bearer" = ["analyst"])),
    params(("study_id" = String, Path), PageQuery),
    responses((status = 200, description = "{results: [...], next_cursor}"), (status = 400), (status = 401), (status = 403), (status = 404)))]
#[get("/api/studies/{study_id}/results")]
pub async fn results(
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: crate::http::query::Query<PageQuery>,
    _analyst: OnStudy<Analyst>,
) -> Result<HttpResponse, ApiError> {
    studies::get(&state.db, &path).await?;
    let page = limit(query.limit, 1000)?;
    let mut rows =
        read::results_page(&state.db, &path, decode_cursor(&query.cursor)?, page + 1).await?;
    let next_cursor = (rows.len() as i64 > page).then(|| {
        rows.truncate(page as usize);
        let last = rows.last().expect("a full page");
        encode_cursor(Some(last.completed_at), &last.session_id)
    });
    Ok(HttpResponse::Ok().json(json!({ "results": rows, "next_cursor": next_cursor })))
}

/// Streams a study's results in `format`, row by row.
async fn export_results(
    state: web::Data<AppState>,
    study_id: String,
    csv: bool,
) -> Result<HttpResponse, ApiError> {
    let study = studies::get(&state.db, &study_id).await?;
    let field_ids: Vec<String> = study
        .published
        .as_ref()
        .map(|p| {
            p.output_schema
                .fields
                .iter()
                .map(|f| f.id.clone())
                .collect()
        })
        .unwrap_or_default();
    let (rows_tx, rows_rx) = mpsc::channel(256);
    let db = state.db.clone();
    let source = study_id.clone();
    tokio::spawn(async move {
        if let Err(error) = read::stream_results(&db, &source, rows_tx).await {
            tracing::error!(%error, study_id = source, "results export stopped");
        }
    });
    let header = csv.then(|| Bytes::from(export::csv_header(&field_ids)));
    let body = futures_util::stream::unfold((header, rows_rx), move |(header, mut rows)| {
        let field_ids = field_ids.clone();
        async move {
            if let Some(h) = header {
                return Some((Ok::<_, actix_web::Error>(h), (None, rows)));
            }
            let row = rows.recv().await?;
            let line = if csv {
                export::csv_row(&row, &field_ids)
            } else {
                export::jsonl_row(&row)
            };
            Some((Ok(Bytes::from(line)), (None, rows)))
        }
    });
    let (content_type, extension) = if csv {
        ("text/csv; charset=utf-8", "csv")
    } else {
        ("application/x-ndjson", "jsonl")
    };
    Ok(HttpResponse::Ok()
        .content_type(content_type)
        .insert_header((
            "content-disposition",
            format!("attachment; filename=\"results-{study_id}.{extension}\""),
        ))
        .streaming(body))
}

/// A study's results as CSV, streamed.
#[utoipa::path(tag = "research", security(("bearer" = ["analyst"])),
    params(("study_id" = String, Path)), responses((status = 200, content_type = "text/csv"), (status = 401), (status = 403), (status = 404)))]
#[get("/api/studies/{study_id}/results.csv")]
pub async fn results_csv(
    state: web::Data<AppState>,
    path: web::Path<String>,
    _analyst: OnStudy<Analyst>,
) -> Result<HttpResponse, ApiError> {
    export_results(state, path.into_inner(), true).await
}

/// A study's results as JSON Lines, streamed.
#[utoipa::path(tag = "research", security(("bearer" = ["analyst"])),
    params(("study_id" = String, Path)), responses((status = 200, content_type = "application/x-ndjson"), (status = 401), (status = 403), (status = 404)))]
#[get("/api/studies/{study_id}/results.jsonl")]
pub async fn results_jsonl(
    state: web::Data<AppState>,
    path: web::Path<String>,
    _analyst: OnStudy<Analyst>,
) -> Result<HttpResponse, ApiError> {
    export_results(state, path.into_inner(), false).await
}
