//! `replay`: the auditor's tool. Reads a session's event stream — and nothing else — to show
//! its timeline or verify it: hash chain, sequence continuity, and every rule of the aggregate
//! re-checked by folding the stream. Never calls a model, never writes.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use interview_projections::{read, Db};
use interview_session::hash::verify_chain;
use interview_session::{EventBody, SessionEvent};
use serde_json::Value;

/// Exit codes: 0 ok, 1 verification failed, 2 usage, 3 unknown session, 4 database unreachable.
const VERIFY_FAILED: u8 = 1;
const UNKNOWN_SESSION: u8 = 3;
const DATABASE_UNREACHABLE: u8 = 4;

#[derive(Parser)]
#[command(
    name = "replay",
    version,
    about = "Show and verify interview sessions from their event log"
)]
struct Cli {
    /// postgres://… or sqlite://PATH [default: sqlite://./data/interview.db].
    #[arg(long, env = "DATABASE_URL", global = true)]
    database_url: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// A session's timeline: time, actor, event and what it says.
    Show {
        session_id: String,
        /// One JSON object per event instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Check the hash chain, the sequence and the aggregate's rules for one session or all.
    Verify {
        session_id: Option<String>,
        #[arg(long, conflicts_with = "session_id")]
        all: bool,
    },
}

type Stored = Vec<(u64, String, Value, Value)>;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let url = cli
        .database_url
        .unwrap_or_else(|| "sqlite://./data/interview.db".into());
    let db = match Db::open_read_only(&url).await {
        Ok(db) => db,
        Err(e) => {
            eprintln!("error: cannot open the database: {e}");
            return ExitCode::from(DATABASE_UNREACHABLE);
        }
    };
    match cli.command {
        Command::Show { session_id, json } => match load(&db, &session_id).await {
            Ok(events) => {
                show(&events, json);
                ExitCode::SUCCESS
            }
            Err(code) => code,
        },
        Command::Verify { session_id, all } => {
            let ids = match (session_id, all) {
                (Some(id), false) => vec![id],
                (None, true) => match read::session_ids(&db).await {
                    Ok(ids) => ids,
                    Err(e) => {
                        eprintln!("error: cannot read the log: {e}");
                        return ExitCode::from(DATABASE_UNREACHABLE);
                    }
                },
                _ => {
                    eprintln!("error: give a session id or --all");
                    return ExitCode::from(2);
                }
            };
            let mut failed = 0;
            for id in &ids {
                let events = match load(&db, id).await {
                    Ok(events) => events,
                    Err(code) => return code,
                };
                let problems = verify(&events);
                if problems.is_empty() {
                    println!(
                        "ok        {id}  ({} events, head {})",
                        events.len(),
                        head(&events)
                    );
                } else {
                    failed += 1;
                    println!("FAILED    {id}");
                    for p in problems {
                        println!("  - {p}");
                    }
                }
            }
            println!("{} session(s) checked, {failed} failed", ids.len());
            if failed > 0 {
                ExitCode::from(VERIFY_FAILED)
            } else {
                ExitCode::SUCCESS
            }
        }
    }
}

async fn load(db: &Db, session_id: &str) -> Result<Stored, ExitCode> {
    match read::events(db, session_id).await {
        Ok(events) if events.is_empty() => {
            eprintln!("error: no session {session_id} in this log");
            Err(ExitCode::from(UNKNOWN_SESSION))
        }
        Ok(events) => Ok(events),
        Err(e) => {
            eprintln!("error: cannot read the log: {e}");
            Err(ExitCode::from(DATABASE_UNREACHABLE))
        }
    }
}

fn head(events: &Stored) -> &str {
    events
        .last()
        .and_then(|e| e.2["hash"].as_str())
        .unwrap_or("")
}

/// Every problem found in a session's stream.
fn verify(events: &Stored) -> Vec<String> {
    let mut problems = Vec::new();
    if let Err(breaks) = verify_chain(events.iter().map(|e| (e.0 as usize, e.1.as_str(), &e.2))) {
        problems.extend(
            breaks
                .into_iter()
                .map(|b| format!("event {}: {}", b.sequence, b.problem)),
        );
    }
    let mut decoded = Vec::new();
    for (seq, event_type, payload, _) in events {
        match serde_json::from_value::<SessionEvent>(payload.clone()) {
            Ok(e) if e.body.event_type() == event_type => decoded.push(e),
            Ok(e) => problems.push(format!(
                "event {seq}: stored as {event_type} but its payload is {}",
                e.body.event_type()
            )),
            Err(err) => problems.push(format!("event {seq}: does not decode: {err}")),
        }
    }
    if problems.is_empty() {
        problems.extend(interview_session::aggregate::check_stream(&decoded));
    }
    problems
}

fn show(events: &Stored, json: bool) {
    for (seq, event_type, payload, metadata) in events {
        let actor = metadata["actor"].as_str().unwrap_or("-");
        if json {
            let line = serde_json::json!({"sequence": seq, "event_type": event_type, "actor": actor, "metadata": metadata, "payload": payload});
            println!("{line}");
            continue;
        }
        let at = payload["at"].as_str().unwrap_or("-");
        let what = serde_json::from_value::<SessionEvent>(payload.clone())
            .map(|e| describe(&e.body))
            .unwrap_or_else(|_| "(undecodable payload)".into());
        println!("{seq:>4}  {at}  {actor:<11}  {event_type:<28}  {what}");
    }
}

fn describe(body: &EventBody) -> String {
    match body {
        EventBody::SessionCreated {
            study,
            participant_ref,
            preview,
            ..
        } => format!(
            "study {} ({}), versions {}/{}/{}/{}{}{}",
            study.study_id,
            study.public_slug,
            study.config_versions.study_config_version_id,
            study.config_versions.agent_config_version_id,
            study.config_versions.output_schema_version_id,
            study.config_versions.model_config_version_id,
            participant_ref
                .as_ref()
                .map(|r| format!(", participant {r}"))
                .unwrap_or_default(),
            if *preview { ", preview" } else { "" }
        ),
        EventBody::StatusChanged { from, to } => format!("{} -> {}", from.as_str(), to.as_str()),
        EventBody::ParticipantMessageCreated {
            turn_id, content, ..
        } => format!("turn {turn_id}: {content:?}"),
        EventBody::AgentMessageStarted { message_id, run_id } => {
            format!("message {message_id} claimed by run {run_id}")
        }
        EventBody::AgentMessageCompleted {
            message_id,
            content,
        } => format!("message {message_id}: {content:?}"),
        EventBody::ToolCallCreated {
            tool_call_id,
            tool_name,
            ..
        } => format!("{tool_name} ({tool_call_id})"),
        EventBody::InteractionRendered { interaction } => {
            format!(
                "{} {} {:?}",
                interaction.type_name(),
                interaction.interaction_id,
                interaction.prompt
            )
        }
        EventBody::InteractionSubmitted {
            interaction_id,
            status,
            value,
            ..
        } => {
            format!(
                "{interaction_id} {status:?} {}",
                value.as_ref().map(Value::to_string).unwrap_or_default()
            )
        }
        EventBody::ToolCallCompleted {
            tool_call_id,
            tool_result,
        } => format!("{tool_call_id} -> {tool_result}"),
        EventBody::SessionCompleted {
            summary,
            summary_confirmed,
            reason,
        } => format!(
            "{reason:?}, summary {}: {summary:?}",
            if *summary_confirmed {
                "confirmed"
            } else {
                "unconfirmed"
            }
        ),
        EventBody::PhaseChanged { from, to } => format!("{from:?} -> {to:?}"),
        EventBody::ConsentRecorded {
            accepted,
            consent_version,
        } => {
            format!(
                "{} (consent version {consent_version})",
                if *accepted { "accepted" } else { "declined" }
            )
        }
        EventBody::DecisionRecorded {
            selected_action,
            proposed_action,
            rationale,
            model,
            latency_ms,
            token_usage,
            ..
        } => format!(
            "{}{} — {rationale:?} [{model}, {latency_ms} ms, {} tokens]",
            serde_json::to_string(selected_action).unwrap_or_default(),
            proposed_action
                .as_ref()
                .map(|p| format!(
                    " (rewritten from {})",
                    serde_json::to_string(p).unwrap_or_default()
                ))
                .unwrap_or_default(),
            token_usage.total_tokens
        ),
        EventBody::SummaryProposed { summary } => format!("{summary:?}"),
        EventBody::SummaryConfirmed {
            confirmed,
            addition,
        } => format!(
            "{}{}",
            if *confirmed {
                "confirmed"
            } else {
                "not confirmed"
            },
            addition
                .as_ref()
                .map(|a| format!(", added {a:?}"))
                .unwrap_or_default()
        ),
        EventBody::ExtractionStarted {
            extraction_id,
            is_final,
        } => {
            format!("{extraction_id}{}", if *is_final { " (final)" } else { "" })
        }
        EventBody::ExtractionCompleted {
            fields, is_final, ..
        } => format!(
            "{}{}",
            fields
                .iter()
                .map(|f| format!("{}={} ({:.2})", f.field_id, f.value, f.confidence))
                .collect::<Vec<_>>()
                .join(", "),
            if *is_final { " (final)" } else { "" }
        ),
        EventBody::ErrorRecorded {
            source,
            code,
            message,
        } => format!("{source}/{code}: {message}"),
        EventBody::SessionAbandoned { reason } => format!("reason {reason:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use interview_session::events::{ConcludeReason, SessionStatus};
    use interview_session::hash::GENESIS_HASH;

    fn stored(bodies: Vec<EventBody>) -> Stored {
        let mut prev = GENESIS_HASH.to_string();
        let mut out = Vec::new();
        for (i, body) in bodies.into_iter().enumerate() {
            let e = SessionEvent::seal(body, Utc::now(), &prev);
            prev = e.hash.clone();
            out.push((
                i as u64 + 1,
                e.body.event_type().to_string(),
                serde_json::to_value(&e).unwrap(),
                Value::Null,
            ));
        }
        out
    }

    fn session() -> Stored {
        let study = pinned_study();
        stored(vec![
            EventBody::SessionCreated {
                session_id: uuid::Uuid::nil(),
                study: Box::new(study),
                participant_ref: None,
                participant_token_sha256: String::new(),
                preview: false,
            },
            EventBody::SessionAbandoned {
                reason: ConcludeReason::Timeout,
            },
            EventBody::StatusChanged {
                from: SessionStatus::Created,
                to: SessionStatus::Abandoned,
            },
        ])
    }

    fn pinned_study() -> interview_session::PinnedStudy {
        let d: interview_session::StudyDefinition = serde_json::from_value(serde_json::json!({
            "title": "T", "consent": {"text": "c", "version": "1"},
            "objectives": [{"id": "o", "title": "O", "priority": "must", "opening_question": "Q?"}],
            "output_schema": {"fields": []}
        }))
        .unwrap();
        d.versioned_documents().pin("s", "slug")
    }

    #[test]
    fn an_untouched_stream_verifies() {
        assert_eq!(verify(&session()), Vec::<String>::new());
    }

    #[test]
    fn tampering_is_reported() {
        let mut edited = session();
        edited[1].2["reason"] = "consent_declined".into();
        assert!(
            verify(&edited).iter().any(|p| p.contains("event 2")),
            "{:?}",
            verify(&edited)
        );
        let mut gap = session();
        gap.remove(1);
        assert!(!verify(&gap).is_empty());
    }
}
