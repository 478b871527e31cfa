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

mod events;
mod input;

use interview_session::commands as cmd;
use std::time::Duration;

use actix_web::web::Bytes;
use actix_web::{post, web, HttpRequest, HttpResponse};
use chrono::Utc;
use interview_projections::{read, NewRows, SessionStateView};
use interview_session::events::SubmitStatus;
use interview_session::{SessionCommand, SessionEvent, SessionStatus};
use serde_json::Value;
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::http::auth::Participant;
use crate::http::body::{json_body, ShapeErrors};
use crate::http::error::ApiError;
use crate::http::routes::sessions::execute_participant;
use crate::live::feed::{Fed, FeedError, SessionFeed};
use crate::state::AppState;
use events::Translator;
use input::{ResumeStatus, RunAgentInput};

/// How long a run may wait for the interviewer before it ends with RUN_ERROR.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

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
    // The new user message, checked before anything is written.
    let message = match input.new_user_message() {
        Some((message_id, text)) => {
            if text.trim().is_empty() {
                return Err(ApiError::BadRequest {
                    code: "empty_content",
                    message: "the message is empty".into(),
                    details: Some(serde_json::json!({ "field": "messages" })),
                });
            }
            if text.len() > state.settings.max_message_bytes {
                return Err(ApiError::PayloadTooLarge {
                    what: "message",
                    limit: state.settings.max_message_bytes,
                });
            }
            Some(cmd::PostMessage {
                turn_id: Uuid::new_v5(&session_id, message_id.as_bytes()),
                client_message_id: Some(message_id.to_string()),
                content: text,
                at: Utc::now(),
            })
        }
        None => None,
    };
    let resume = input.resume.as_ref().and_then(|r| r.first());
    let command = match (resume, message) {
        // A resume and a new message (the adapter's "answer in my own words instead"): the
        // answer or skip, then the message, as one turn — both written, or neither.
        (Some(entry), message) => {
            let (status, value) = match entry.status {
                ResumeStatus::Resolved => (SubmitStatus::Submitted, entry.payload.clone()),
                ResumeStatus::Cancelled => (SubmitStatus::Skipped, None),
            };
            let turn_id = Uuid::new_v5(
                &session_id,
                format!("interaction:{}", entry.interrupt_id).as_bytes(),
            );
            let interaction_id = entry.interrupt_id.clone();
            let client_context =
                Some(serde_json::json!({ "via": "ag-ui", "run_id": input.run_id }));
            let answer = cmd::SubmitInteraction {
                interaction_id,
                turn_id,
                status,
                value,
                client_context,
                at: Utc::now(),
            };
            Some(match message {
                Some(message) => {
                    SessionCommand::SubmitThenPostMessage(cmd::SubmitThenPostMessage {
                        answer,
                        message,
                    })
                }
                None => SessionCommand::SubmitInteraction(answer),
            })
        }
        (None, Some(message)) => Some(SessionCommand::PostMessage(message)),
        (None, None) => None,
    };
    if let Some(command) = command {
        execute_participant(&state, &req, session_id, command).await?;
    }
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        let folded = RunView { view };
        pump(state.clone(), id, input, folded, feed, tx).await;
        drop(slot);
    });
    Ok(crate::http::routes::stream::event_stream(rx))
}

fn frame(event: &Value) -> Bytes {
    Bytes::from(format!("data: {event}\n\n"))
}

async fn send_all(tx: &mpsc::Sender<Bytes>, events: Vec<Value>) -> Result<(), ()> {
    for e in events {
        tx.send(frame(&e)).await.map_err(|_| ())?;
    }
    Ok(())
}

/// The session's state view as of the run's start, with every event the run has seen folded
/// in by the projector's own fold: what `RUN_FINISHED` and its snapshot are made of.
struct RunView {
    view: SessionStateView,
}

impl RunView {
    fn fold(&mut self, seq: u64, event: &SessionEvent) {
        self.view.apply(seq, event, &mut NewRows::default());
    }

    /// The interviewer has had its turn: the session waits for the participant or has ended.
    fn turn_is_over(&self) -> bool {
        !matches!(
            self.view.status,
            SessionStatus::Created | SessionStatus::Active
        )
    }
}

/// Folds what the feed brought into the run's view and sends it as AG-UI events.
async fn forward(
    fed: Fed,
    folded: &mut RunView,
    t: &mut Translator,
    tx: &mpsc::Sender<Bytes>,
) -> Result<(), &'static str> {
    match fed {
        Fed::Delta {
            message_id,
            content,
        } => send_all(tx, t.delta(&message_id, &content))
            .await
            .map_err(|_| "gone"),
        Fed::Events(events) => {
            for (seq, e) in &events {
                folded.fold(*seq, e);
                send_all(tx, t.event(e)).await.map_err(|_| "gone")?;
            }
            Ok(())
        }
        Fed::Idle => Ok(()),
    }
}

/// Streams one run: live deltas and committed events until the interviewer has had its turn.
async fn pump(
    state: web::Data<AppState>,
    session_id: String,
    input: RunAgentInput,
    mut folded: RunView,
    mut feed: SessionFeed,
    tx: mpsc::Sender<Bytes>,
) {
    let (thread, run_id) = (input.thread_id.as_str(), input.run_id.as_str());
    let mut t = Translator::new(input.messages.iter().map(|m| m.to_value()).collect());
    if send_all(&tx, vec![events::run_started(thread, run_id)])
        .await
        .is_err()
    {
        return;
    }
    let deadline = tokio::time::Instant::now() + RUN_TIMEOUT;
    let mut draining = state.draining.subscribe();
    let outcome: Result<(), &'static str> = async {
        // The log is read only when a commit's events did not come with its note (another
        // process's commit, a lagging subscriber: the feed reads those itself), or by the
        // safety net below; the run ends when this process's interviewer says it is idle (or,
        // for a run elsewhere, when a commit leaves the session waiting). Nothing is read at
        // the start: the feed was subscribed before the view was read, so every commit the
        // view does not hold comes as a note.
        let mut read_log = false;
        loop {
            if read_log {
                let events = feed.read_up_to(u64::MAX).await.map_err(|_| "read")?;
                forward(Fed::Events(events), &mut folded, &mut t, &tx).await?;
                read_log = false;
            }
            // Idle: no run here, and the events folded leave the session waiting. Nothing is
            // read for it: this process's commits come with their notes, in order. The run is
            // asked first, then the notes already queued are taken: every commit a run made
            // before it went idle was announced before, so the view is not judged without them
            // (a step committed in one go, a widget with no words, can be over before the
            // first look — and the view still says the session waits, as it did before the
            // participant's own command).
            let running = state.interviewer.is_running(&session_id);
            loop {
                match feed.try_next().await {
                    Ok(Some(fed)) => forward(fed, &mut folded, &mut t, &tx).await?,
                    Ok(None) => break,
                    Err(FeedError::Lagged) => {
                        read_log = true;
                        break;
                    }
                    Err(FeedError::Read(_) | FeedError::Closed) => return Err("read"),
                }
            }
            if read_log {
                continue;
            }
            if !running && folded.turn_is_over() {
                // On PostgreSQL a commit made by another process meanwhile may not have been
                // announced yet: the log's tail is read once more. The embedded store has one
                // process.
                if !state.db.is_postgres() {
                    return Ok(());
                }
                let tail = feed.read_up_to(u64::MAX).await.map_err(|_| "read")?;
                if tail.is_empty() {
                    return Ok(());
                }
                forward(Fed::Events(tail), &mut folded, &mut t, &tx).await?;
                continue;
            }
            // A safety net only: notes are not lost within a process, but a NOTIFY from
            // another process can be.
            let recheck = tokio::time::sleep(Duration::from_secs(1));
            tokio::pin!(recheck);
            loop {
                let note = tokio::select! {
                    note = feed.next_note() => note,
                    _ = &mut recheck => { read_log = true; break }
                    _ = tokio::time::sleep_until(deadline) => return Err("timeout"),
                    // The process is stopping: the run ends now so the client retries elsewhere.
                    changed = draining.changed() => {
                        if changed.is_err() || *draining.borrow() {
                            return Err("restarting");
                        }
                        continue;
                    }
                };
                // Events move the turn on, and the interviewer's idleness may end it: look
                // again. A delta, or a commit already folded, does neither.
                let moved = match feed.take(note).await {
                    Ok(Fed::Events(events)) if events.is_empty() => false,
                    Ok(fed @ (Fed::Events(_) | Fed::Idle)) => {
                        forward(fed, &mut folded, &mut t, &tx).await?;
                        true
                    }
                    Ok(fed @ Fed::Delta { .. }) => {
                        forward(fed, &mut folded, &mut t, &tx).await?;
                        false
                    }
                    Err(FeedError::Lagged) => {
                        read_log = true;
                        true
                    }
                    Err(FeedError::Read(_) | FeedError::Closed) => return Err("read"),
                };
                if moved {
                    break;
                }
            }
        }
    }
    .await;
    let mut tail = t.close_open();
    match outcome {
        Ok(()) => {
            let view = &folded.view;
            if let Some(pending) = &view.pending_interaction {
                tail.extend(t.announce(pending));
            }
            tail.push(events::snapshot(view));
            tail.push(events::run_finished(thread, run_id, view));
        }
        Err("gone") => return,
        Err("restarting") => tail.push(events::run_error(
            "The interview service is restarting. Please try again in a moment.",
            "unavailable",
        )),
        Err("timeout") => tail.push(events::run_error(
            "The interviewer is taking longer than usual. Please try again in a moment.",
            "timeout",
        )),
        Err(_) => tail.push(events::run_error(
            "Something went wrong on our side. Please try again in a moment.",
            "unavailable",
        )),
    }
    let _ = send_all(&tx, tail).await;
}
