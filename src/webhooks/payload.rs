//! What a delivery carries, read when it is sent (never stored): the body
//! `{"type", "timestamp", "data"}` that Standard Webhooks recommend, with the notice's
//! `position` beside them, and its headers' id.
//!
//! - `session.completed`: the session's results row — the extracted fields with value,
//!   confidence, evidence turn ids and quote, the summary, the end reason, the panel reference.
//!   Once the session is erased the row is gone, and the body says `"erased": true` and carries
//!   nothing of it.
//! - `session.abandoned`: the reason, no content.
//! - `participant.data.erased`: the erasure's receipt (who, when, what it covers; no content).
//! - `study.paused` / `study.resumed`: the study and when.

use interview_projections::notices::Notice;
use interview_projections::{erasure, read, Db, ProjectionError};
use interview_session::notice::NoticeKind;
use interview_session::EventBody;
use serde_json::{json, Value};
use uuid::Uuid;

/// Names every delivery id: `msg_` and a UUID derived from the subscription and the notice, so
/// every attempt at one notice — after a crash, a retry or a redelivery — carries the same
/// `webhook-id`, and receivers deduplicate by it.
const MESSAGE_IDS: Uuid = Uuid::from_u128(0x6c1f_0b3e_9a57_4d2b_8f61_2e4a_7c90_d315);

pub fn message_id(hook_id: &str, position: i64) -> String {
    let id = Uuid::new_v5(&MESSAGE_IDS, format!("{hook_id}\n{position}").as_bytes());
    format!("msg_{}", id.simple())
}

/// The body of `notice`'s delivery.
#[tracing::instrument(skip(db), fields(kind = notice.kind.as_str(), position = notice.position))]
pub async fn body(db: &Db, notice: &Notice) -> Result<Value, ProjectionError> {
    let data = match notice.kind {
        NoticeKind::SessionCompleted => completed(db, notice).await?,
        NoticeKind::SessionAbandoned => abandoned(db, notice).await?,
        NoticeKind::ParticipantDataErased => erased(db, notice).await?,
        NoticeKind::StudyPaused | NoticeKind::StudyResumed => json!({
            "study_id": notice.study_id,
        }),
    };
    Ok(json!({
        "type": notice.kind.as_str(),
        "timestamp": notice.at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        "position": notice.position,
        "data": data,
    }))
}

fn session_of(notice: &Notice) -> &str {
    notice.session_id.as_deref().unwrap_or_default()
}

async fn completed(db: &Db, notice: &Notice) -> Result<Value, ProjectionError> {
    let session_id = session_of(notice);
    if let Some(row) = read::result_of(db, session_id).await? {
        return Ok(json!({
            "study_id": notice.study_id,
            "session_id": session_id,
            "participant_ref": row.participant_ref,
            "completed_at": row.completed_at,
            "end_reason": row.end_reason,
            "summary": row.summary,
            "summary_confirmed": row.summary_confirmed,
            "fields": row.fields,
        }));
    }
    // No results row: erased with the participant's data — or being rebuilt (`replay rebuild`
    // drops a session's views before it folds them again), which an error retries.
    match erasure::receipt(db, session_id).await? {
        Some(_) => Ok(json!({
            "study_id": notice.study_id,
            "session_id": session_id,
            "erased": true,
        })),
        None => Err(ProjectionError::Db(sqlx::Error::RowNotFound)),
    }
}

async fn abandoned(db: &Db, notice: &Notice) -> Result<Value, ProjectionError> {
    let session_id = session_of(notice);
    let seq = notice.sequence.unwrap_or_default().max(1) as u64;
    let events = read::decoded_events_between(db, session_id, seq - 1, seq).await?;
    let reason = events.iter().find_map(|(_, e)| match &e.body {
        EventBody::SessionAbandoned { reason } => Some(reason.as_ref().to_string()),
        _ => None,
    });
    Ok(json!({
        "study_id": notice.study_id,
        "session_id": session_id,
        "reason": reason,
        "abandoned_at": notice.at,
    }))
}

async fn erased(db: &Db, notice: &Notice) -> Result<Value, ProjectionError> {
    let session_id = session_of(notice);
    let receipt = erasure::receipt(db, session_id).await?;
    Ok(json!({
        "study_id": notice.study_id,
        "session_id": session_id,
        "receipt": receipt,
    }))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_notice_keeps_its_message_id_and_two_notices_differ() {
        let a = super::message_id("hook-1", 7);
        assert_eq!(a, super::message_id("hook-1", 7));
        assert_ne!(a, super::message_id("hook-1", 8));
        assert_ne!(a, super::message_id("hook-2", 7));
        assert!(a.starts_with("msg_") && a.len() == 36, "{a}");
    }
}
