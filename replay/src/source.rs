//! Where a session's events come from: the database, or a portable bundle file.
//!
//! A bundle is JSON Lines: one stored event per line (`sequence`, `event_type`,
//! `event_version`, `payload`, `metadata`, and from schema version 2 its `hash` in hex), in
//! order. Its first event, `session.created`, carries the pinned study configuration — inline in
//! a version 1 payload; from version 2 its four documents ride on the line as `documents`
//! (version id → document), each checked against its content id when the stream is decoded — so
//! the bundle alone is enough to replay and verify.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::Path;

use interview_projections::{log, Db};
use interview_session::codec;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredEvent {
    pub sequence: u64,
    pub event_type: String,
    pub event_version: String,
    pub payload: Value,
    pub metadata: Value,
    /// The `hash` column (schema version 2), in hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// The study documents a version 2 `session.created` names, by version id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub documents: BTreeMap<String, Value>,
}

impl StoredEvent {
    /// The event as the decode point takes it.
    pub fn stored<'a>(&'a self, hash: Option<&'a [u8]>) -> codec::Stored<'a> {
        codec::Stored {
            event_type: &self.event_type,
            event_version: &self.event_version,
            payload: &self.payload,
            hash,
        }
    }

    /// The hash column's bytes (`None` when absent or not hex).
    pub fn hash_bytes(&self) -> Option<Vec<u8>> {
        self.hash.as_deref().and_then(codec::hex_to_bytes)
    }
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

fn database(e: impl std::fmt::Display) -> SourceError {
    SourceError::Database(e.to_string())
}

pub async fn from_db(db: &Db, session_id: &str) -> Result<Vec<StoredEvent>, SourceError> {
    let rows = log::all_rows(db, session_id).await.map_err(database)?;
    if rows.is_empty() {
        return Err(SourceError::UnknownSession(session_id.to_string()));
    }
    let mut events = Vec::with_capacity(rows.len());
    for row in rows {
        let needed = codec::documents_needed(row.stored());
        log::load_documents(db, &needed).await.map_err(database)?;
        let documents = needed
            .into_iter()
            .filter_map(|id| {
                let document = codec::Documents::document(&log::KeptDocuments, &id)?;
                Some((id, document))
            })
            .collect();
        events.push(StoredEvent {
            sequence: row.sequence,
            event_type: row.event_type,
            event_version: row.event_version,
            payload: row.payload,
            metadata: row.metadata,
            hash: row.hash.as_deref().map(codec::hex),
            documents,
        });
    }
    Ok(events)
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
