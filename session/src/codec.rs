//! Stored events: the one place an event is turned into its stored form and read back.
//!
//! Every reader of the log — the command side, the projector, live streams, the researcher
//! routes, `replay` — decodes through [`decode`], so a schema change is made here once, with an
//! upcaster, and reaches `replay verify` too.
//!
//! **Version 2** (written today) stores only what the fold cannot derive:
//! - the payload is the body's fields and `at` — no `type` (the `event_type` column names it) and
//!   no chain links: the event's hash is stored beside the payload as 32 bytes (the `hash`
//!   column), and its previous hash is the previous event's;
//! - `session.created` names the pinned study's four documents by their content ids
//!   (`config_versions`) instead of carrying them: the documents are stored once per version
//!   (`config_documents`), and a bundle carries them;
//! - an `agent.decision.recorded` leaves out its empty fields (`turn_id`, `proposed_action`,
//!   `latency_ms`, `token_usage` when there is no turn, no rewrite, no time or tokens). Version 2
//!   decisions written before 2026-12-02 spell them out as `null` / `0`; both spellings decode
//!   to the same event and each verifies against what is stored. This relaxation kept the
//!   version number: a reader of this code reads both, but a `replay` or server built before it
//!   cannot read the short form — upgrade them together.
//!
//! `hash = SHA-256(prev_hash "\n" event_type "\n" "2" "\n" canonical(payload))`.
//!
//! **Version 3** (written today for a commit's second and later events) is a version 2 payload
//! without what the event before it in the same commit already says — its `at`, and a rendered
//! interaction that repeats its tool call — and decodes, and hashes, as that version 2 payload
//! once [`compact::restore`] has put those back (see `codec/compact.rs`).
//!
//! **Erased** (`erased`, `codec/erased.rs`): an event whose personal data was erased, rewritten
//! in place as the version 2 payload of its erased body with its original hash kept in the
//! column; the `participant.data.erased` event after it carries a digest of the erased rows.
//!
//! **Encrypted** (`encrypted`, `encrypted-3`): a version 2 (or 3) row whose payload is sealed
//! under the session's data key; the store opens it back into that row before it reaches this module
//! (`interview_projections::encrypted`, `docs/privacy.md`). Its hash is that row's.
//!
//! **Version 1** (logs written before) carries `type`, `prev_hash` and `hash` inside the payload
//! and the whole study in `session.created`. It decodes as it always did; nothing writes it.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::events::{EventBody, SessionEvent};
use crate::hash::{canonical_json, event_hash, sha256_hex};

/// The version every new event is written in.
pub const CURRENT_VERSION: &str = "2";

/// The versions [`decode`] reads.
pub const KNOWN_VERSIONS: [&str; 4] = ["1", "2", "3", erased::VERSION];

/// The `event_version` of an event whose content is encrypted under its session's data key,
/// sealing a version 2 row ([`ENCRYPTED_COMPACT_VERSION`]: a version 3 one). The store opens it
/// into the row it seals before anything decodes it
/// (`interview_projections::encrypted`); [`decode`] meets one only when the key is gone.
pub const ENCRYPTED_VERSION: &str = "encrypted";

/// [`ENCRYPTED_VERSION`] sealing a version 3 row: like it, not a place decoding can start.
pub const ENCRYPTED_COMPACT_VERSION: &str = "encrypted-3";

pub mod compact;
pub mod erased;
use compact::Before;

/// An event in the form it is stored: the columns beside the aggregate id and sequence.
#[derive(Debug, Clone, PartialEq)]
pub struct Encoded {
    pub event_type: &'static str,
    pub event_version: &'static str,
    pub payload: Value,
    /// The chain hash, 32 bytes.
    pub hash: Vec<u8>,
}

/// A stored event as read back.
#[derive(Debug, Clone, Copy)]
pub struct Stored<'a> {
    pub event_type: &'a str,
    pub event_version: &'a str,
    pub payload: &'a Value,
    /// The `hash` column (version 2; absent for version 1, whose hash is in its payload, and when
    /// the reader did not read the column — the hash is then computed from `prev_hash`).
    pub hash: Option<&'a [u8]>,
}

/// Where the pinned study's documents come from when `session.created` names them: the
/// database's `config_documents`, or a bundle's document lines.
pub trait Documents {
    fn document(&self, version_id: &str) -> Option<Value>;

    /// The document `id` names, checked against that content id (`prefix` is its kind's).
    fn checked(&self, prefix: &str, id: &str) -> Result<Value, DecodeError> {
        let document = self
            .document(id)
            .ok_or_else(|| DecodeError::MissingDocument(id.into()))?;
        if !document_matches(prefix, id, &document) {
            return Err(DecodeError::DocumentMismatch(id.into()));
        }
        Ok(document)
    }
}

/// Documents from a source that cannot change while it is read (a bulk rebuild's batch of
/// them), each checked against its content id the first time a `session.created` names it
/// rather than for every session: the check hashes the whole document, and a rebuild meets the
/// same few documents thousands of times.
pub struct CheckedOnce<D> {
    source: D,
    /// `(prefix, id)`: a document checked as one kind is not thereby one of another.
    checked: std::sync::Mutex<std::collections::HashSet<(String, String)>>,
}

impl<D: Documents> CheckedOnce<D> {
    pub fn new(source: D) -> Self {
        Self {
            source,
            checked: Default::default(),
        }
    }
}

impl<D: Documents> Documents for CheckedOnce<D> {
    fn document(&self, version_id: &str) -> Option<Value> {
        self.source.document(version_id)
    }

    fn checked(&self, prefix: &str, id: &str) -> Result<Value, DecodeError> {
        let mut checked = self.checked.lock().expect("never poisoned");
        let key = (prefix.to_string(), id.to_string());
        if checked.contains(&key) {
            return self
                .source
                .document(id)
                .ok_or_else(|| DecodeError::MissingDocument(id.into()));
        }
        let document = self.source.checked(prefix, id)?;
        checked.insert(key);
        Ok(document)
    }
}

impl Documents for HashMap<String, Value> {
    fn document(&self, version_id: &str) -> Option<Value> {
        self.get(version_id).cloned()
    }
}

/// No documents at hand (a reader that never meets a version 2 `session.created`).
pub struct NoDocuments;

impl Documents for NoDocuments {
    fn document(&self, _: &str) -> Option<Value> {
        None
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("event version {0:?} is not one this code knows")]
    UnknownVersion(String),
    #[error("the payload does not decode: {0}")]
    Malformed(#[from] serde_json::Error),
    #[error("the payload is a {payload:?} but the event_type column says {stored:?}")]
    TypeMismatch { stored: String, payload: String },
    #[error("the study document {0} is not stored")]
    MissingDocument(String),
    #[error("the study document stored as {0} does not match its content id")]
    DocumentMismatch(String),
    #[error("the hash column does not hold 32 bytes")]
    BadHash,
    #[error("an erased event needs its hash column: its payload no longer gives it")]
    ErasedWithoutHash,
    #[error(
        "the event's content is encrypted and does not open here: its session's data key was \
         destroyed (an erasure), the key-encryption key that wraps it is not configured, or the \
         stored row was changed"
    )]
    Encrypted,
    #[error(
        "the encrypted event does not open under its session's data key: it was changed, or \
         moved from another row"
    )]
    NotOpened,
}

#[derive(Serialize)]
struct V2Out<'a> {
    #[serde(flatten)]
    body: &'a EventBody,
    at: DateTime<Utc>,
}

#[derive(Deserialize)]
struct V2In {
    #[serde(flatten)]
    body: EventBody,
    at: DateTime<Utc>,
    #[serde(default)]
    salt: Option<String>,
}

/// The four document fields of a pinned study, with the `config_versions` key naming each.
const STUDY_DOCUMENTS: [(&str, &str, &str); 4] = [
    ("study_config", "study_config_version_id", "scv"),
    ("agent_config", "agent_config_version_id", "acv"),
    ("output_schema", "output_schema_version_id", "osv"),
    ("model_config", "model_config_version_id", "mcv"),
];

/// The version 2 payload of an event (what its hash covers), its numbers normalized
/// (`hash::normalize_numbers`): what any store gives back.
pub fn payload(body: &EventBody, at: DateTime<Utc>) -> Value {
    payload_and_changed(body, at).0
}

/// [`payload`], and whether normalizing changed a number (the sealed body is then read back from
/// it, so the event in memory is the one every reader decodes).
pub fn payload_and_changed(body: &EventBody, at: DateTime<Utc>) -> (Value, bool) {
    let mut value = serde_json::to_value(V2Out { body, at }).expect("events serialize");
    let map = value.as_object_mut().expect("an event is an object");
    map.remove("type");
    leave_out_empty(body, map);
    if let Some(Value::Object(study)) = map.get_mut("study") {
        for (field, _, _) in STUDY_DOCUMENTS {
            study.remove(field);
        }
    }
    let changed = crate::hash::normalize_numbers(&mut value);
    (value, changed)
}

/// Puts an event's salt into its version 2 payload (under the hash; see `SessionEvent::salt`).
pub fn add_salt(payload: &mut Value, salt: Option<&str>) {
    if let (Some(salt), Some(map)) = (salt, payload.as_object_mut()) {
        map.insert("salt".into(), Value::String(salt.into()));
    }
}

/// A decision's empty fields — no turn, no rewrite, no latency, no tokens: every rules decision —
/// are not stored; they decode back as empty (`#[serde(default)]` on the body's fields).
fn leave_out_empty(body: &EventBody, map: &mut serde_json::Map<String, Value>) {
    if let EventBody::DecisionRecorded {
        turn_id,
        proposed_action,
        latency_ms,
        token_usage,
        ..
    } = body
    {
        let empty = [
            ("turn_id", turn_id.is_none()),
            ("proposed_action", proposed_action.is_none()),
            ("latency_ms", *latency_ms == 0),
            ("token_usage", token_usage.is_zero()),
        ];
        for (key, _) in empty.into_iter().filter(|(_, is_empty)| *is_empty) {
            map.remove(key);
        }
    }
}

/// The body as every reader decodes it from `payload` (see [`payload_and_changed`]).
pub fn body_from(event_type: &str, payload: &Value, body: EventBody) -> EventBody {
    let mut full = payload.clone();
    if let Some(map) = full.as_object_mut() {
        map.insert("type".into(), Value::String(event_type.into()));
    }
    match body {
        // The study stays the one sealed (its documents are not in the payload).
        EventBody::SessionCreated { .. } => body,
        other => serde_json::from_value::<V2In>(full).map_or(other, |v| v.body),
    }
}

/// The version 2 hash of `payload` after `prev_hash`.
pub fn hash(prev_hash: &str, event_type: &str, payload: &Value) -> String {
    event_hash(prev_hash, event_type, CURRENT_VERSION, payload)
}

/// The stored form of a sealed event.
pub fn encode(event: &SessionEvent) -> Encoded {
    let mut payload = payload(&event.body, event.at);
    add_salt(&mut payload, event.salt.as_deref());
    Encoded {
        event_type: event.body.event_type(),
        event_version: CURRENT_VERSION,
        payload,
        hash: hex_to_bytes(&event.hash).expect("sealed events carry a SHA-256 hash"),
    }
}

/// The stored form of a sealed event written right after `before` in the same commit: version 3
/// when it can leave out what `before` says, else [`encode`]'s.
pub fn encode_after(event: &SessionEvent, before: Option<&SessionEvent>) -> Encoded {
    let encoded = encode(event);
    match before {
        // An erasure record is read on its own (its receipt, the purge log): stored whole.
        Some(_) if matches!(event.body, EventBody::ParticipantDataErased(_)) => encoded,
        Some(before) => compact::leave_out(encoded, event, before),
        None => encoded,
    }
}

/// The document ids a stored event needs before it can be decoded (a version 2
/// `session.created`'s study documents); empty for every other event.
pub fn documents_needed(row: Stored<'_>) -> Vec<String> {
    if row.event_version == "1" || row.event_type != "session.created" {
        return Vec::new();
    }
    let versions = &row.payload["study"]["config_versions"];
    STUDY_DOCUMENTS
        .iter()
        .filter_map(|(_, key, _)| versions[key].as_str().map(String::from))
        .collect()
}

/// Decodes one stored event. `prev_hash` is the hash of the event before it (the genesis hash
/// for the first): a version 2 event's link, and its hash when the row's was not read. A
/// version 3 event needs the event before it too: see [`decode_after`].
pub fn decode(
    row: Stored<'_>,
    prev_hash: &str,
    documents: &dyn Documents,
) -> Result<SessionEvent, DecodeError> {
    decode_after(row, prev_hash, &Before::default(), documents)
}

/// [`decode`], with what the event before says (`Before::of` it) for a version 3 row to take.
// Long by design: one branch per stored version: version 3 and erased rows are turned into version
// 2 and decoded again, versions 1 and 2 are decoded here, the version 2 arm with its checks; every
// stored version is read in this one place.
pub fn decode_after(
    row: Stored<'_>,
    prev_hash: &str,
    before: &Before,
    documents: &dyn Documents,
) -> Result<SessionEvent, DecodeError> {
    if row.event_version == compact::VERSION {
        let whole = compact::restore(row.event_type, row.payload, before)?;
        let row = Stored {
            event_version: CURRENT_VERSION,
            payload: &whole,
            ..row
        };
        return decode_after(row, prev_hash, before, documents);
    }
    if row.event_version == erased::VERSION {
        // A version 2 payload whose hash is the one stored, never one recomputed from it.
        if row.hash.is_none_or(|h| h.len() != 32) {
            return Err(DecodeError::ErasedWithoutHash);
        }
        let row = Stored {
            event_version: CURRENT_VERSION,
            ..row
        };
        return decode_after(row, prev_hash, before, documents);
    }
    let event = match row.event_version {
        ENCRYPTED_VERSION | ENCRYPTED_COMPACT_VERSION => return Err(DecodeError::Encrypted),
        // Version 1 is the typed event's own serde form.
        "1" => serde_json::from_value::<SessionEvent>(row.payload.clone())?,
        "2" => {
            let hash = match row.hash {
                Some(bytes) if bytes.len() == 32 => hex(bytes),
                Some(_) => return Err(DecodeError::BadHash),
                None => hash(prev_hash, row.event_type, row.payload),
            };
            let mut full = row.payload.clone();
            let map = full
                .as_object_mut()
                .ok_or_else(|| serde::de::Error::custom("the payload is not an object"))
                .map_err(DecodeError::Malformed)?;
            // Keys a version 2 payload never has: the column says the type, the chain the hashes.
            if let Some(key) = ["type", "hash", "prev_hash"]
                .into_iter()
                .find(|k| map.contains_key(*k))
            {
                return Err(DecodeError::Malformed(serde::de::Error::custom(format!(
                    "a version 2 payload has no {key:?} key"
                ))));
            }
            map.insert("type".into(), Value::String(row.event_type.into()));
            if row.event_type == "session.created" {
                attach_documents(map, documents)?;
            }
            let V2In { body, at, salt } = serde_json::from_value(full)?;
            SessionEvent {
                body,
                at,
                salt,
                prev_hash: prev_hash.to_string(),
                hash,
            }
        }
        other => return Err(DecodeError::UnknownVersion(other.into())),
    };
    if event.body.event_type() != row.event_type {
        return Err(DecodeError::TypeMismatch {
            stored: row.event_type.into(),
            payload: event.body.event_type().into(),
        });
    }
    Ok(event)
}

/// [`decode`] from the payload's JSON text (the bulk rebuild): most version 2 events are read
/// straight from the text, with their type spliced in, and no JSON tree in between.
pub fn decode_text(
    event_type: &str,
    event_version: &str,
    payload: &str,
    hash: Option<&[u8]>,
    prev_hash: &str,
    documents: &dyn Documents,
) -> Result<SessionEvent, DecodeError> {
    let row = (event_type, event_version, payload, hash);
    decode_text_after(row, prev_hash, &Before::default(), documents)
}

/// [`decode_text`] of `(event_type, event_version, payload, hash)`, with what the event before
/// says for a version 3 row (which takes the tree path).
pub fn decode_text_after(
    (event_type, event_version, payload, hash): (&str, &str, &str, Option<&[u8]>),
    prev_hash: &str,
    before: &Before,
    documents: &dyn Documents,
) -> Result<SessionEvent, DecodeError> {
    let fast = match (event_version, hash) {
        ("1", _) => Some(serde_json::from_str::<SessionEvent>(payload)?),
        // The splice is only for payloads without the keys version 2 never has (those take the
        // tree path and are refused there).
        ("2", Some(hash))
            if hash.len() == 32
                && event_type != "session.created"
                && !["\"type\"", "\"hash\"", "\"prev_hash\""]
                    .iter()
                    .any(|k| payload.contains(k)) =>
        {
            // `{"at": …}` becomes `{"type": "<event_type>", "at": …}`.
            match payload.trim_start().strip_prefix('{') {
                Some(rest) if !rest.trim_start().starts_with('}') => {
                    let text = format!("{{\"type\":{},{rest}", Value::from(event_type));
                    // Anything the fast path cannot read (a duplicated key in SQLite's text, say)
                    // is read as the tree path reads it, so rebuild and verify agree.
                    serde_json::from_str::<V2In>(&text)
                        .ok()
                        .map(|V2In { body, at, salt }| SessionEvent {
                            body,
                            at,
                            salt,
                            prev_hash: prev_hash.to_string(),
                            hash: hex(hash),
                        })
                }
                _ => None,
            }
        }
        _ => None,
    };
    match fast {
        Some(event) if event.body.event_type() == event_type => Ok(event),
        Some(event) => Err(DecodeError::TypeMismatch {
            stored: event_type.into(),
            payload: event.body.event_type().into(),
        }),
        None => {
            let payload: Value = serde_json::from_str(payload)?;
            let row = Stored {
                event_type,
                event_version,
                payload: &payload,
                hash,
            };
            decode_after(row, prev_hash, before, documents)
        }
    }
}

/// The study documents a version 1 `session.created` carries inline, as `(content id, kind,
/// document)`, each checked against its id: what must be stored before the event is rewritten
/// in a form that names them instead (its erasure, `codec/erased.rs`). Empty for every other row.
pub fn inline_documents(
    row: Stored<'_>,
) -> Result<Vec<(String, &'static str, Value)>, DecodeError> {
    if row.event_version != "1" || row.event_type != "session.created" {
        return Ok(Vec::new());
    }
    let study = &row.payload["study"];
    let mut found = Vec::new();
    for (field, key, prefix) in STUDY_DOCUMENTS {
        let Some(id) = study["config_versions"][key].as_str() else {
            continue;
        };
        let mut document = study[field].clone();
        crate::hash::normalize_numbers(&mut document);
        if !document_matches(prefix, id, &document) {
            return Err(DecodeError::DocumentMismatch(id.into()));
        }
        found.push((id.to_string(), field, document));
    }
    Ok(found)
}

/// Puts the pinned study's documents back into a version 2 `session.created`, each checked
/// against its content id.
fn attach_documents(
    map: &mut serde_json::Map<String, Value>,
    documents: &dyn Documents,
) -> Result<(), DecodeError> {
    let Some(Value::Object(study)) = map.get_mut("study") else {
        return Ok(());
    };
    let versions = study.get("config_versions").cloned().unwrap_or_default();
    for (field, key, prefix) in STUDY_DOCUMENTS {
        let Some(id) = versions[key].as_str() else {
            continue;
        };
        study.insert(field.into(), documents.checked(prefix, id)?);
    }
    Ok(())
}

/// Whether `document` is the one its content id `id` names (`prefix_` + the first 128 bits of
/// the SHA-256 of its canonical JSON, numbers normalized).
pub fn document_matches(prefix: &str, id: &str, document: &Value) -> bool {
    let mut document = document.clone();
    crate::hash::normalize_numbers(&mut document);
    let digest = sha256_hex(canonical_json(&document).as_bytes());
    id == format!("{prefix}_{}", &digest[..32])
}

/// The content-id prefix of a document id (`scv_…` → `scv`), if it is one of a study's four.
pub fn document_prefix(id: &str) -> Option<&'static str> {
    STUDY_DOCUMENTS
        .iter()
        .map(|(_, _, prefix)| *prefix)
        .find(|prefix| id.strip_prefix(prefix).is_some_and(|r| r.starts_with('_')))
}

pub use crate::hash::to_hex as hex;

/// The bytes of a lower-case or upper-case hex string.
pub fn hex_to_bytes(hex: &str) -> Option<Vec<u8>> {
    if hex.len() % 2 != 0 {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The version every event is written in.
pub const EVENT_VERSION: &str = CURRENT_VERSION;

/// Sealing an event onto its session's chain is storing it: its payload, salt and hash are the
/// codec's.
impl SessionEvent {
    /// Seals `body` onto the chain after `prev_hash`, unsalted.
    pub fn seal(body: EventBody, at: DateTime<Utc>, prev_hash: &str) -> Self {
        Self::seal_with(body, at, prev_hash, None)
    }

    /// Seals `body` onto the chain after `prev_hash`; salted, when it holds personal data, with
    /// the session's `chain_secret` and its place in the chain: deterministic, so the aggregate
    /// stays a function of its commands, and unguessable without the secret, which is erased
    /// with the content.
    pub fn seal_with(
        body: EventBody,
        at: DateTime<Utc>,
        prev_hash: &str,
        chain_secret: Option<&str>,
    ) -> Self {
        let salt = chain_secret
            .filter(|_| body.holds_personal_data())
            .map(|secret| {
                let digest =
                    crate::hash::sha256_hex(format!("salt\n{secret}\n{prev_hash}").as_bytes());
                digest[..32].to_string()
            });
        let (mut payload, changed) = payload_and_changed(&body, at);
        add_salt(&mut payload, salt.as_deref());
        let hash = hash(prev_hash, body.event_type(), &payload);
        let body = if changed {
            body_from(body.event_type(), &payload, body)
        } else {
            body
        };
        Self {
            body,
            at,
            salt,
            prev_hash: prev_hash.to_string(),
            hash,
        }
    }
}

impl cqrs_es::DomainEvent for SessionEvent {
    fn event_type(&self) -> String {
        self.body.event_type().to_string()
    }

    fn event_version(&self) -> String {
        EVENT_VERSION.to_string()
    }
}

#[cfg(test)]
#[path = "codec_tests.rs"]
mod tests;
