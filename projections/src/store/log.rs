//! The event log's rows: what a command appends ([`NewEvent`]: the typed event and its stored
//! form side by side, so the fold never decodes what this process just encoded), and reading a
//! session's events back through the one decode point (`interview_session::codec`), with the
//! hash column and the pinned study's documents it needs.

use std::sync::Mutex;

use hashlink::LruCache;
use interview_session::codec::compact::{self, Before};
use interview_session::codec::{self, Documents, Encoded, Stored};
use interview_session::hash::GENESIS_HASH;
use interview_session::{SessionEvent, AGGREGATE_TYPE};
use serde_json::Value;

use crate::store::backend::{Backend, Query, ReadColumn, Statement};
use crate::store::db::Db;
use crate::store::encrypted;
use crate::store::keys::{self, DataKey};
use crate::store::shared_rows;
use crate::{on_db, store::error::ProjectionError};

/// One event a command appends.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub aggregate_id: String,
    pub sequence: u64,
    pub event: SessionEvent,
    pub stored: Encoded,
    /// An encrypted event's sealed bytes (`encrypted.rs`).
    pub sealed: Option<Vec<u8>>,
    /// The command's metadata on its first event, `{}` on the others (a row that holds events
    /// in clear: its first event's).
    pub metadata: Value,
    /// The sequence of the row this event is written as: its own, or its first event's when
    /// events in clear share it; `None` for an event held in another's row (`shared_rows.rs`).
    pub row_sequence: Option<u64>,
}

/// The `events` columns a new row fills, in the order [`NewEvent::bind_row`] binds them.
pub const EVENT_COLUMNS: &str =
    "aggregate_type, aggregate_id, sequence, event_type, event_version, payload, metadata, hash, sealed";

/// How many values [`NewEvent::bind_row`] binds.
pub const EVENT_VALUES: usize = 9;

impl NewEvent {
    /// Whether the event is written as a row (not inside another's: `shared_rows.rs`).
    pub fn has_row(&self) -> bool {
        self.row_sequence.is_some()
    }

    /// Binds the row's nine [`EVENT_COLUMNS`]: what both commit paths insert, for the events
    /// that [have a row](Self::has_row).
    pub(crate) fn bind_row<'q, DB: Backend>(&'q self, q: Query<'q, DB>) -> Query<'q, DB> {
        let sequence = self.row_sequence.unwrap_or(self.sequence);
        q.arg(AGGREGATE_TYPE)
            .arg(self.aggregate_id.as_str())
            .arg(sequence as i64)
            .arg(self.stored.event_type)
            .arg(self.stored.event_version)
            .arg(&self.stored.payload)
            .arg(&self.metadata)
            .arg(&self.stored.hash)
            .arg(self.sealed.clone())
    }

    /// The row of `event`, written right after `before` when it is the same command's (its
    /// stored form then leaves out what `before` says: `codec::compact`), and encrypted under
    /// the session's data `key` when one is given — the caller gives it for an event that holds
    /// personal data (`EventBody::holds_personal_data`, `encrypted.rs`).
    pub fn new(
        aggregate_id: &str,
        sequence: u64,
        event: SessionEvent,
        before: Option<&SessionEvent>,
        metadata: Value,
        key: Option<&DataKey>,
    ) -> Self {
        let mut stored = codec::encode_after(&event, before);
        let mut sealed = None;
        if let Some(key) = key {
            let (encrypted, bytes) = encrypted::encrypt(stored, key, aggregate_id, sequence);
            (stored, sealed) = (encrypted, Some(bytes));
        }
        Self {
            aggregate_id: aggregate_id.to_string(),
            sequence,
            event,
            stored,
            sealed,
            metadata,
            row_sequence: Some(sequence),
        }
    }
}

/// A stored event as read: the columns the decode point takes.
#[derive(Debug, Clone)]
pub struct Row {
    pub sequence: u64,
    pub event_type: String,
    pub event_version: String,
    pub payload: Value,
    pub hash: Option<Vec<u8>>,
    pub metadata: Value,
    /// An encrypted event's sealed bytes; `None` once opened, and for every other row.
    pub sealed: Option<Vec<u8>>,
}

impl Row {
    /// Reads a row selected with [`ROW_COLUMNS`].
    pub fn from_sql<R: ReadColumn>(r: &R) -> Result<Self, sqlx::Error> {
        Ok(Row {
            sequence: r.read::<i64>("sequence")? as u64,
            event_type: r.read("event_type")?,
            event_version: r.read("event_version")?,
            payload: r.read("payload")?,
            hash: r.read("hash")?,
            metadata: r.read("metadata")?,
            sealed: r.read("sealed")?,
        })
    }

    /// The row as the chain check reads it (`interview_session::chain::verify_chain`).
    pub fn chain(&self) -> interview_session::chain::ChainRow<'_> {
        (
            self.sequence as usize,
            &self.event_type,
            &self.event_version,
            &self.payload,
            self.hash.as_deref(),
        )
    }

    /// Opens the row if it is encrypted (into the version 2 row it seals).
    pub(crate) fn open(&mut self, key: &DataKey, session_id: &str) -> Result<(), ProjectionError> {
        let Some(version) = encrypted::sealed_version(&self.event_version) else {
            return Ok(());
        };
        let row = (session_id, self.sequence, self.event_type.as_str());
        let sealed = self.sealed.as_deref().unwrap_or_default();
        let payload = encrypted::open(&self.event_version, &self.payload, sealed, key, row)
            .map_err(|source| ProjectionError::Decode {
                session_id: session_id.into(),
                sequence: self.sequence,
                source,
            })?;
        self.event_version = version.to_string();
        self.payload = payload;
        self.sealed = None;
        Ok(())
    }

    pub fn stored(&self) -> Stored<'_> {
        Stored {
            event_type: &self.event_type,
            event_version: &self.event_version,
            payload: &self.payload,
            hash: self.hash.as_deref(),
        }
    }
}

/// The columns [`Row`] reads, for SQL built elsewhere.
pub const ROW_COLUMNS: &str =
    "sequence, event_type, event_version, payload, hash, metadata, sealed";

/// The hash a stored row links to the next one.
pub fn row_hash(row: &Row) -> String {
    match &row.hash {
        Some(bytes) => codec::hex(bytes),
        None => row.payload["hash"].as_str().unwrap_or_default().to_string(),
    }
}

/// Decodes a session's rows in order; `prev` is the hash of the event before the first.
pub fn decode_rows(
    session_id: &str,
    rows: &[Row],
    mut prev: String,
    documents: &dyn Documents,
) -> Result<Vec<(u64, SessionEvent)>, ProjectionError> {
    let mut out: Vec<(u64, SessionEvent)> = Vec::with_capacity(rows.len());
    let mut before = Before::default();
    for row in rows {
        let decoded = codec::decode_after(row.stored(), &prev, &before, documents);
        let event = decoded.map_err(|source| ProjectionError::Decode {
            session_id: session_id.into(),
            sequence: row.sequence,
            source,
        })?;
        prev = event.hash.clone();
        before = Before::of(&event);
        out.push((row.sequence, event));
    }
    Ok(out)
}

/// Documents are content-addressed, so never change: kept once read.
static DOCUMENTS: Mutex<Option<LruCache<String, Value>>> = Mutex::new(None);

/// How many configuration documents are kept in memory (four per published study version).
const KEPT_DOCUMENTS: usize = 1024;

fn kept_document(id: &str) -> Option<Value> {
    let mut kept = DOCUMENTS
        .lock()
        .expect("the document cache is never poisoned");
    kept.get_or_insert_with(|| LruCache::new(KEPT_DOCUMENTS))
        .get(id)
        .cloned()
}

/// Remembers a document (read, or just published).
pub fn keep_document(id: &str, document: &Value) {
    let mut kept = DOCUMENTS
        .lock()
        .expect("the document cache is never poisoned");
    kept.get_or_insert_with(|| LruCache::new(KEPT_DOCUMENTS))
        .insert(id.to_string(), document.clone());
}

/// The ids `rows` need that are not kept in memory.
pub fn missing_documents(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .flat_map(|r| codec::documents_needed(r.stored()))
        .filter(|id| kept_document(id).is_none())
        .collect()
}

/// The kept documents (fill them with [`keep_document`] first).
pub struct KeptDocuments;

impl Documents for KeptDocuments {
    fn document(&self, version_id: &str) -> Option<Value> {
        kept_document(version_id)
    }
}

/// Reads documents into the cache, through `fetch` (one query per document: only a session's
/// first load of its `session.created` needs them, and only once per study version).
pub async fn load_documents(db: &Db, ids: &[String]) -> Result<(), sqlx::Error> {
    for id in ids {
        let document: Option<Value> = on_db!(read(db), |pool| {
            sqlx::query_scalar(include_str!("sql/document.sql"))
                .bind(id)
                .fetch_optional(pool)
                .await?
        });
        if let Some(document) = document {
            keep_document(id, &document);
        }
    }
    Ok(())
}

/// Opens `rows`' encrypted ones with the session's `key`. One that does not open — no key
/// (erased, or its key-encryption key not configured here), or a changed row — stays as stored:
/// it fails to decode saying so, and `replay verify` reports it with the rest of the chain.
fn open_rows(session_id: &str, rows: &mut [Row], key: Option<&DataKey>) {
    let Some(key) = key else {
        return;
    };
    for row in rows.iter_mut() {
        if let Err(error) = row.open(key, session_id) {
            tracing::warn!(%error, "an encrypted event does not open");
        }
    }
}

fn any_encrypted(rows: &[Row]) -> bool {
    rows.iter()
        .any(|r| encrypted::sealed_version(&r.event_version).is_some())
}

/// Reads a session's events with `from <= sequence <= up_to`, in order, each as the row it would
/// have on its own (`shared_rows::expand`), opened.
async fn rows(
    db: &Db,
    session_id: &str,
    from: u64,
    up_to: u64,
) -> Result<Vec<Row>, ProjectionError> {
    // The row holding event `from` may start a few before it.
    let stored = stored_rows(db, session_id, shared_rows::earliest_row_of(from), up_to).await?;
    let mut rows = shared_rows::expand(stored);
    rows.retain(|r| (from..=up_to).contains(&r.sequence));
    if any_encrypted(&rows) {
        let key = keys::for_reading(db, session_id).await?;
        open_rows(session_id, &mut rows, key.as_ref());
    }
    Ok(rows)
}

/// A session's rows with `from <= sequence <= up_to` as stored (a shared row once, under its
/// first sequence).
pub(crate) async fn stored_rows(
    db: &Db,
    session_id: &str,
    from: u64,
    up_to: u64,
) -> Result<Vec<Row>, sqlx::Error> {
    on_db!(read(db), |pool| {
        let rows = sqlx::query(&format!(
            "SELECT {ROW_COLUMNS} FROM events \
             WHERE aggregate_type = $1 AND aggregate_id = $2 AND sequence >= $3 AND sequence <= $4 \
             ORDER BY sequence"
        ))
        .bind(AGGREGATE_TYPE)
        .bind(session_id)
        .bind(from.min(i64::MAX as u64) as i64)
        .bind(up_to.min(i64::MAX as u64) as i64)
        .fetch_all(pool)
        .await?;
        rows.iter()
            .map(Row::from_sql)
            .collect::<Result<Vec<_>, _>>()
    })
}

/// Every stored row of a session, undecoded (the audit's source), its encrypted ones opened.
pub async fn all_rows(db: &Db, session_id: &str) -> Result<Vec<Row>, ProjectionError> {
    rows(db, session_id, 1, u64::MAX).await
}

/// A session's decoded events with `after < sequence <= up_to`, in order.
pub async fn read_between(
    db: &Db,
    session_id: &str,
    after: u64,
    up_to: u64,
) -> Result<Vec<(u64, SessionEvent)>, ProjectionError> {
    // Decoding starts at an event stored whole: the first one returned, unless it is a version 3
    // one (inside a command, taking what it leaves out from the events before it), and then the
    // nearest whole one before it. The event before the first decoded is read for its hash, the
    // first one's link.
    let first = after.saturating_add(1);
    let mut whole = first;
    let mut read = rows(db, session_id, whole.saturating_sub(1).max(1), up_to).await?;
    let inside = read
        .iter()
        .find(|r| r.sequence == first)
        .is_some_and(|r| r.event_version == compact::VERSION);
    if inside && first > 1 {
        whole = whole_at_or_before(db, session_id, after).await?;
        read = rows(db, session_id, whole.saturating_sub(1).max(1), up_to).await?;
    }
    let prev = match read.first() {
        Some(r) if whole > 1 && r.sequence == whole - 1 => row_hash(&read.remove(0)),
        _ => GENESIS_HASH.to_string(),
    };
    let mut events = decode_read(db, session_id, &read, prev).await?;
    events.retain(|(seq, _)| *seq > after);
    Ok(events)
}

/// The last event at or before `seq` stored whole (not version 3, nor an encrypted version 3):
/// where decoding can start.
async fn whole_at_or_before(db: &Db, session_id: &str, seq: u64) -> Result<u64, sqlx::Error> {
    let found: Option<i64> = on_db!(read(db), |pool| {
        sqlx::query_scalar(include_str!("sql/whole_event_at_or_before.sql"))
            .bind(AGGREGATE_TYPE)
            .bind(session_id)
            .bind(seq.min(i64::MAX as u64) as i64)
            .bind(compact::VERSION)
            .bind(interview_session::codec::ENCRYPTED_COMPACT_VERSION)
            .fetch_one(pool)
            .await?
    });
    Ok(found.map_or(1, |s| s.max(1) as u64))
}

/// [`decode_rows`] for rows read from `db`, after reading the study documents they name.
pub async fn decode_read(
    db: &Db,
    session_id: &str,
    rows: &[Row],
    prev: String,
) -> Result<Vec<(u64, SessionEvent)>, ProjectionError> {
    let missing = missing_documents(rows);
    if !missing.is_empty() {
        load_documents(db, &missing).await?;
    }
    decode_rows(session_id, rows, prev, &KeptDocuments)
}

/// A session's events from `from` on, each as its own row (`shared_rows::expand`), read in the caller's transaction (which sees its own
/// uncommitted events), opened, with the documents they name kept for decoding.
pub(crate) async fn rows_in<'c, DB: Backend>(
    tx: &mut sqlx::Transaction<'c, DB>,
    session_id: &str,
    from: i64,
) -> Result<Vec<Row>, ProjectionError> {
    use crate::store::backend::ReadColumn;
    let stored = sqlx::query(&format!(
        "SELECT {ROW_COLUMNS} FROM events \
         WHERE aggregate_type = $1 AND aggregate_id = $2 AND sequence >= $3 ORDER BY sequence"
    ))
    .arg(AGGREGATE_TYPE)
    .arg(session_id)
    // The row holding event `from` may start a few before it.
    .arg(shared_rows::earliest_row_of(from.max(1) as u64) as i64)
    .fetch_all_in(tx)
    .await?;
    let stored = stored
        .iter()
        .map(Row::from_sql)
        .collect::<Result<Vec<_>, _>>()?;
    let mut rows = shared_rows::expand(stored);
    rows.retain(|r| r.sequence as i64 >= from);
    if any_encrypted(&rows) {
        let key = keys::in_transaction(tx, session_id).await?;
        open_rows(session_id, &mut rows, key.as_ref());
    }
    for id in missing_documents(&rows) {
        let found = sqlx::query(include_str!("sql/document.sql"))
            .arg(&id)
            .fetch_optional_in(tx)
            .await?;
        if let Some(found) = found {
            keep_document(&id, &found.read::<Value>(0)?);
        }
    }
    Ok(rows)
}
