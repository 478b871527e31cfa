//! Verification: the hash chain and sequence, every event decoding to its stored type, the
//! aggregate's rules re-checked over the stream, and (against a database) the stored read
//! models compared with ones rebuilt in memory.

use interview_projections::views::{NewRows, SessionStateView};
use interview_projections::{read, Db};
use interview_session::aggregate::check_stream;
use interview_session::hash::verify_chain;
use interview_session::SessionEvent;

use crate::source::StoredEvent;

/// The decoded events, or the problems that stop decoding.
pub fn decode(events: &[StoredEvent]) -> Result<Vec<SessionEvent>, Vec<String>> {
    let mut problems = Vec::new();
    let mut decoded = Vec::new();
    for e in events {
        match serde_json::from_value::<SessionEvent>(e.payload.clone()) {
            Ok(d) if d.body.event_type() == e.event_type => decoded.push(d),
            Ok(d) => problems.push(format!(
                "event {}: stored as {} but its payload is {}",
                e.sequence,
                e.event_type,
                d.body.event_type()
            )),
            Err(err) => problems.push(format!("event {}: does not decode: {err}", e.sequence)),
        }
    }
    if problems.is_empty() {
        Ok(decoded)
    } else {
        Err(problems)
    }
}

/// Every problem found in a stream (empty when it verifies), and its head hash.
pub fn verify_stream(events: &[StoredEvent]) -> (Vec<String>, String) {
    let chain = verify_chain(
        events
            .iter()
            .map(|e| (e.sequence as usize, e.event_type.as_str(), &e.payload)),
    );
    let mut problems = Vec::new();
    let head = match chain {
        Ok(head) => head,
        Err(breaks) => {
            problems.extend(
                breaks
                    .into_iter()
                    .map(|b| format!("event {}: {}", b.sequence, b.problem)),
            );
            String::new()
        }
    };
    match decode(events) {
        Ok(decoded) if problems.is_empty() => problems.extend(check_stream(&decoded)),
        Ok(_) => {}
        Err(decode_problems) => problems.extend(decode_problems),
    }
    (problems, head)
}

/// The read models folded in memory from the stream.
pub fn fold_views(events: &[StoredEvent], decoded: &[SessionEvent]) -> (SessionStateView, NewRows) {
    let mut view = SessionStateView::default();
    let mut rows = NewRows::default();
    for (stored, event) in events.iter().zip(decoded) {
        view.apply(stored.sequence, event, &mut rows);
    }
    (view, rows)
}

/// Differences between the stored read models and the rebuilt ones.
pub async fn compare_views(
    db: &Db,
    session_id: &str,
    events: &[StoredEvent],
) -> Result<Vec<String>, String> {
    let Ok(decoded) = decode(events) else {
        return Ok(Vec::new());
    };
    let (rebuilt, rebuilt_rows) = fold_views(events, &decoded);
    let stored = read::session_state(db, session_id)
        .await
        .map_err(|e| e.to_string())?;
    let stored_transcript = read::transcript(db, session_id)
        .await
        .map_err(|e| e.to_string())?;
    let stored_decisions = read::decisions(db, session_id)
        .await
        .map_err(|e| e.to_string())?;
    let mut problems = Vec::new();
    match stored {
        None => problems.push("session_state: no stored row".to_string()),
        Some(stored) => {
            let (a, b) = (
                serde_json::to_value(&stored).unwrap_or_default(),
                serde_json::to_value(&rebuilt).unwrap_or_default(),
            );
            if let (Some(a), Some(b)) = (a.as_object(), b.as_object()) {
                for (key, value) in b {
                    if a.get(key) != Some(value) {
                        problems.push(format!(
                            "session_state.{key}: stored {} but the log gives {}",
                            a.get(key)
                                .map(|v| v.to_string())
                                .unwrap_or_else(|| "nothing".into()),
                            value
                        ));
                    }
                }
            }
            if stored.participant_token_sha256 != rebuilt.participant_token_sha256 {
                problems.push("session_state.participant_token_sha256 differs from the log".into());
            }
        }
    }
    if stored_transcript != rebuilt_rows.transcript {
        problems.push(format!(
            "transcript: {} stored rows differ from the {} the log gives",
            stored_transcript.len(),
            rebuilt_rows.transcript.len()
        ));
    }
    if stored_decisions != rebuilt_rows.decisions {
        problems.push(format!(
            "decision_log: {} stored rows differ from the {} the log gives",
            stored_decisions.len(),
            rebuilt_rows.decisions.len()
        ));
    }
    Ok(problems)
}
