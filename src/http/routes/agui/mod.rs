//! `POST /api/sessions/{id}/agui`: the interview over the AG-UI protocol, so `@ag-ui/client`'s
//! `HttpAgent` (and assistant-ui's AG-UI adapter) can drive it unchanged.
//!
//! A run takes a `RunAgentInput`: its `resume` entry answers the pending interaction
//! (`resolved` = submitted with the payload as value, `cancelled` = skipped), or else its last
//! user message is the participant's new message (its id is the `client_message_id`, so a
//! retried run writes nothing twice). These are the same commands the REST routes send. The
//! answer is an event stream: RUN_STARTED, the interviewer's utterances as they stream, any
//! interaction it shows, a STATE_SNAPSHOT, and RUN_FINISHED once the interviewer has had its
//! turn — with an `interrupt` outcome while an interaction waits for an answer.

mod command;
mod events;
mod follow;
mod history;
mod input;

/// The tool name under which interactions are announced (live, and in a snapshot's history).
const RENDER_TOOL: &str = "render_interaction";

use actix_web::web::Bytes;
use actix_web::{post, web, HttpRequest, HttpResponse};
use interview_projections::read;
use tokio::sync::mpsc;

use crate::http::auth::Participant;
use crate::http::body::{json_body, ShapeErrors};
use crate::http::error::ApiError;
use crate::http::routes::turns::execute_participant;
use crate::live::feed::SessionFeed;
use crate::state::AppState;
use input::RunAgentInput;

/// Run the interview over AG-UI (RunAgentInput in, an AG-UI event stream out).
#[utoipa::path(tag = "participant", security(("bearer" = [])),
    params(("session_id" = String, Path)),
    request_body(content = Object, description = "an AG-UI RunAgentInput: threadId = the session id, runId, messages (the last user message is the new one), resume (answers the pending interaction)"),
    responses((status = 200, description = "text/event-stream of AG-UI events", content_type = "text/event-stream"),
              (status = 400, description = "a malformed RunAgentInput; nothing written"), (status = 401), (status = 403), (status = 404),
              (status = 409, description = "a pending interaction not answered, or another state conflict"),
              (status = 410), (status = 413), (status = 422), (status = 503)))]
#[post("/api/sessions/{session_id}/agui")]
pub async fn run(
    state: web::Data<AppState>,
    guards: web::Data<crate::http::guards::Guards>,
    req: HttpRequest,
    Participant { session_id }: Participant,
    body: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let limit = state
        .settings
        .max_body_bytes
        .max(state.settings.message_body_bytes());
    let input: RunAgentInput = json_body(body, limit, true, ShapeErrors::BadRequest).await?;
    let prepared = std::time::Instant::now();
    let id = session_id.to_string();
    input.check(&id)?;
    let slot = guards
        .streams
        .try_open(&id)
        .map_err(|what| ApiError::Overloaded { what })?;
    // Subscribed before acting, so nothing the interviewer streams is missed.
    let mut feed = SessionFeed::subscribe(&state.hub, &state.db, &id, 0);
    // The run folds every event after it into this view, so its end reads nothing back.
    let view = read::session_state(&state.db, &id)
        .await?
        .unwrap_or_default();
    feed.skip_to(view.last_seq);
    // A client that lacks the session's earlier messages (a reload, a stale copy) gets them
    // first, as they stood before this run's own command.
    let history = history::History::read(&state.db, session_id, view.last_seq).await?;
    let pending = view.pending_interaction.as_ref();
    let snapshot = history.snapshot_for(&state.db, pending, &input).await?;
    let held = |id: &str| history.words_of_turn(id).map(str::to_string);
    let command = command::of_run(&input, session_id, state.settings.max_message_bytes, held)?;
    metrics::histogram!("interview_turn_stage_seconds", "stage" => "run_prepare")
        .record(prepared.elapsed().as_secs_f64());
    if let Some(command) = command {
        execute_participant(&state, &req, session_id, command).await?;
    }
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        let folded = follow::RunView { view };
        follow::pump(state.clone(), id, input, folded, feed, tx, snapshot).await;
        drop(slot);
    });
    Ok(crate::http::routes::stream::event_stream(rx))
}
