//! Where a session's events come from: the database, or a portable bundle file.
//!
//! A bundle is JSON Lines: one stored event per line (`sequence`, `event_type`,
//! `event_version`, `payload`, `metadata`), in order. Its first event, `session.created`,
//! carries the pinned study configuration, so the bundle alone is enough to replay and verify.

use std::io::{BufRead, Write};
use std::path::Path;

use interview_projections::{read, Db};
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredEvent {
    pub sequence: u64,
    pub event_type: String,
    pub event_version: String,
    pub payload: Value,
    pub metadata: Value,
}

/// Why events could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("no session {0} in this log")]
    UnknownSession(String),
    #[error("cannot read the log: {0}")]
    Database(String),
    #[error("cannot read the bundle {path}: {reason}")]
    Bundle { path: String, reason: String },
}

pub async fn from_db(db: &Db, session_id: &str) -> Result<Vec<StoredEvent>, SourceError> {
    let rows = read::events_with_versions(db, session_id)
        .await
        .map_err(|e| SourceError::Database(e.to_string()))?;
    if rows.is_empty() {
        return Err(SourceError::UnknownSession(session_id.to_string()));
    }
    Ok(rows
        .into_iter()
        .map(
            |(sequence, event_type, event_version, payload, metadata)| StoredEvent {
                sequence,
                event_type,
                event_version,
                payload,
                metadata,
            },
        )
        .collect())
}

pub fn from_bundle(path: &Path) -> Result<Vec<StoredEvent>, SourceError> {
    let fail = |reason: String| SourceError::Bundle {
        path: path.display().to_string(),
        reason,
    };
    let file = std::fs::File::open(path).map_err(|e| fail(e.to_string()))?;
    let mut events = Vec::new();
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| fail(e.to_string()))?;
        if line.trim().is_empty() {
            continue;
        }
        let event: StoredEvent =
            serde_json::from_str(&line).map_err(|e| fail(format!("line {}: {e}", n + 1)))?;
        events.push(event);
    }
    if events.is_empty() {
        return Err(fail("it holds no events".into()));
    }
    Ok(events)
}

pub fn write_bundle(path: &Path, events: &[StoredEvent]) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for event in events {
        serde_json::to_writer(&mut out, event)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

/// The session id a stream belongs to (from its `session.created`).
pub fn session_id(events: &[StoredEvent]) -> String {
    events
        .first()
        .and_then(|e| e.payload["session_id"].as_str())
        .unwrap_or_default()
        .to_string()
}
