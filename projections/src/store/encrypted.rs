//! The encrypted form of a stored event (`event_version` `encrypted`, `docs/privacy.md`).
//!
//! An event that holds personal data — what `EventBody::without_personal_data` would change —
//! is stored with its version 2 or 3 payload sealed under the session's data key
//! (XChaCha20-Poly1305), as version `encrypted` or `encrypted-3`:
//!
//! ```text
//! payload: {"at": <the payload's at, when it has one>}     sealed: nonce ‖ ciphertext ‖ tag
//! ```
//!
//! The sealed bytes go in the `sealed` column (bytes, not base64 in the JSON: a third smaller).
//! The sealed bytes are the payload's JSON without `at` — since 2026-12-05 deflated, behind a zero
//! byte, when that is shorter ([`packed`]; rows sealed before hold the JSON text) —, bound (as associated data) to the
//! session, the sequence, the event type and the sealed version: a sealed payload moved to
//! another row does not open. The column tells the sealed version, so whether a row is a place
//! decoding can start is known without opening it (`log::read_between`). The hash column holds the inner row's hash, unchanged: the chain is over
//! the content, so opening a row gives back exactly the row every reader decoded before
//! encryption, and `replay verify` checks it the same way. `at` stays in clear because a
//! session's start orders session lists (`read::sessions`) and is no personal data.
//! Events without personal data (status and phase changes, most decisions' bookkeeping, the
//! erasure record) are stored as before, in clear.

use interview_session::codec::{
    self, DecodeError, Encoded, ENCRYPTED_COMPACT_VERSION, ENCRYPTED_VERSION,
};
use serde_json::{Map, Value};

use crate::store::keys::DataKey;

fn aad(session_id: &str, sequence: u64, event_type: &str, sealed_version: &str) -> Vec<u8> {
    format!("event\n{session_id}\n{sequence}\n{event_type}\n{sealed_version}").into_bytes()
}

/// The stored version of an encrypted row sealing `version`, and back.
fn encrypted_version(version: &str) -> Option<&'static str> {
    match version {
        codec::CURRENT_VERSION => Some(ENCRYPTED_VERSION),
        codec::compact::VERSION => Some(ENCRYPTED_COMPACT_VERSION),
        _ => None,
    }
}

/// The version an encrypted row's stored version says it seals.
pub fn sealed_version(stored_version: &str) -> Option<&'static str> {
    match stored_version {
        ENCRYPTED_VERSION => Some(codec::CURRENT_VERSION),
        ENCRYPTED_COMPACT_VERSION => Some(codec::compact::VERSION),
        _ => None,
    }
}

/// `stored` (a version 2 or 3 row) sealed under `key` as the row at `sequence` of `session_id`:
/// the row as stored, and its sealed bytes.
///
/// # Panics
/// On a row of another version (nothing else is written).
pub fn encrypt(
    stored: Encoded,
    key: &DataKey,
    session_id: &str,
    sequence: u64,
) -> (Encoded, Vec<u8>) {
    let version = encrypted_version(stored.event_version)
        .expect("only version 2 and 3 rows are written, and sealed");
    let mut inner = stored.payload;
    let at = inner.as_object_mut().and_then(|m| m.remove("at"));
    let plaintext = packed(serde_json::to_vec(&inner).expect("a JSON value serializes"));
    let aad = aad(
        session_id,
        sequence,
        stored.event_type,
        stored.event_version,
    );
    let sealed = key.seal(&aad, &plaintext);
    let mut payload = Map::new();
    if let Some(at) = at {
        payload.insert("at".into(), at);
    }
    let row = Encoded {
        event_type: stored.event_type,
        event_version: version,
        payload: Value::Object(payload),
        hash: stored.hash,
    };
    (row, sealed)
}

/// The first byte of a sealed plaintext that is the payload's JSON deflated (what follows it is a
/// raw DEFLATE stream, RFC 1951); a plaintext of JSON text begins with `{`.
const DEFLATED: u8 = 0;

/// The most a deflated payload may inflate to (a payload is a few kilobytes; the tag already
/// proves the plaintext is one this server sealed).
const MOST_INFLATED: u64 = 16 << 20;

/// The plaintext sealed for `json`: deflated when that is shorter, else the JSON as it is.
///
/// Why: a sealed payload cannot be compressed by the database (PostgreSQL's TOAST compresses
/// only rows over 2 KB, and ciphertext never), and a third of an encrypted event's JSON is the
/// keys and the repeats DEFLATE removes (benchmarks.md, "Bytes per turn"). What an observer of
/// the stored bytes learns changes little: they saw each payload's length before, and now see
/// its length after compression (docs/privacy.md, "Encryption at rest").
fn packed(json: Vec<u8>) -> Vec<u8> {
    use flate2::{Compress, Compression, FlushCompress, Status};
    thread_local! {
        // A compressor's tables take longer to set up than a payload takes to deflate: one per
        // thread, reset for each payload.
        static DEFLATE: std::cell::RefCell<Compress> =
            std::cell::RefCell::new(Compress::new(Compression::default(), false));
    }
    DEFLATE.with(|deflate| {
        let mut deflate = deflate.borrow_mut();
        deflate.reset();
        // Room for as many bytes as the JSON: a stream that does not end within it is no shorter.
        let mut deflated = Vec::with_capacity(json.len());
        deflated.push(DEFLATED);
        match deflate.compress_vec(&json, &mut deflated, FlushCompress::Finish) {
            Ok(Status::StreamEnd) if deflated.len() < json.len() => deflated,
            _ => json,
        }
    })
}

/// The JSON a sealed plaintext holds (see [`packed`]).
fn unpacked(plaintext: Vec<u8>) -> Result<Vec<u8>, DecodeError> {
    use std::io::Read;
    if plaintext.first() != Some(&DEFLATED) {
        return Ok(plaintext);
    }
    let mut json = Vec::with_capacity(plaintext.len() * 3);
    flate2::read::DeflateDecoder::new(&plaintext[1..])
        .take(MOST_INFLATED)
        .read_to_end(&mut json)
        .map_err(|_| DecodeError::NotOpened)?;
    Ok(json)
}

/// The version 2 or 3 payload an encrypted row stored as `stored_version`, `payload` and
/// `sealed` seals, opened with `key`.
pub fn open(
    stored_version: &str,
    payload: &Value,
    sealed: &[u8],
    key: &DataKey,
    (session_id, sequence, event_type): (&str, u64, &str),
) -> Result<Value, DecodeError> {
    let version = sealed_version(stored_version).ok_or(DecodeError::NotOpened)?;
    // Nothing beside the time: a key added in clear would be read by no one and checked by
    // nothing.
    let keys_ok = payload
        .as_object()
        .is_some_and(|m| m.keys().all(|k| k == "at"));
    if !keys_ok {
        return Err(DecodeError::NotOpened);
    }
    let aad = aad(session_id, sequence, event_type, version);
    let plaintext = key.open(&aad, sealed).ok_or(DecodeError::NotOpened)?;
    let mut inner: Value = serde_json::from_slice(&unpacked(plaintext)?)?;
    if let (Some(map), Some(at)) = (inner.as_object_mut(), payload.get("at")) {
        map.insert("at".into(), at.clone());
    }
    Ok(inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};
    use interview_session::{EventBody, SessionEvent};

    fn key() -> DataKey {
        DataKey::from_bytes(&[3; 32])
    }

    fn message(text: &str) -> SessionEvent {
        let at = Utc.with_ymd_and_hms(2026, 12, 3, 12, 0, 0).unwrap();
        let body: EventBody = serde_json::from_value(serde_json::json!({
            "type": "participant.message.created",
            "turn_id": "7d6f1c1e-8c5e-4a59-9d7e-3c2f9b1c0a11",
            "client_message_id": null,
            "content": text,
        }))
        .unwrap();
        let payload = codec::payload(&body, at);
        let hash = codec::hash(
            interview_session::hash::GENESIS_HASH,
            body.event_type(),
            &payload,
        );
        SessionEvent {
            body,
            at,
            salt: None,
            prev_hash: interview_session::hash::GENESIS_HASH.into(),
            hash,
        }
    }

    #[test]
    fn an_encrypted_row_opens_into_the_row_it_seals_and_nowhere_else() {
        let event = message("I plan with a paper notebook");
        assert!(event.body.holds_personal_data());
        let plain = codec::encode(&event);
        let (row, bytes) = encrypt(plain.clone(), &key(), "s1", 4);
        assert_eq!(row.event_version, ENCRYPTED_VERSION);
        assert_eq!(row.hash, plain.hash);
        let text = row.payload.to_string();
        assert!(!text.contains("notebook"), "{text}");
        assert!(!String::from_utf8_lossy(&bytes).contains("notebook"));
        assert_eq!(row.payload["at"], plain.payload["at"]);

        let at = ("s1", 4, plain.event_type);
        let payload = open(row.event_version, &row.payload, &bytes, &key(), at).unwrap();
        assert_eq!(payload, plain.payload);

        for moved in [
            ("s2", 4, plain.event_type),
            ("s1", 5, plain.event_type),
            ("s1", 4, "interviewer.utterance.completed"),
        ] {
            let opened = open(row.event_version, &row.payload, &bytes, &key(), moved);
            assert!(opened.is_err(), "{moved:?}");
        }
        let other = DataKey::from_bytes(&[4; 32]);
        assert!(open(row.event_version, &row.payload, &bytes, &other, at).is_err());
        assert!(
            open(ENCRYPTED_COMPACT_VERSION, &row.payload, &bytes, &key(), at).is_err(),
            "the version it seals is bound too"
        );
        let mut changed = bytes.clone();
        changed[30] ^= 1;
        assert!(open(row.event_version, &row.payload, &changed, &key(), at).is_err());
        let mut added = row.payload.clone();
        added["content"] = "We never plan.".into();
        assert!(
            open(row.event_version, &added, &bytes, &key(), at).is_err(),
            "a key in clear beside the time"
        );
    }

    #[test]
    fn a_payload_is_sealed_deflated_when_that_is_shorter_and_rows_sealed_before_still_open() {
        let long = message(&"We make a list on Sunday and buy what is on it. ".repeat(8));
        let plain = codec::encode(&long);
        let (row, bytes) = encrypt(plain.clone(), &key(), "s1", 4);
        let json = serde_json::to_vec(&plain.payload).unwrap();
        // The nonce (24 bytes) and the tag (16) aside, fewer bytes than the JSON.
        assert!(
            bytes.len() - 40 < json.len() / 2,
            "{} of {}",
            bytes.len(),
            json.len()
        );
        let at = ("s1", 4, plain.event_type);
        let opened = open(row.event_version, &row.payload, &bytes, &key(), at).unwrap();
        assert_eq!(opened, plain.payload);

        // A row sealed before holds its JSON text: it opens as it did.
        let mut inner = plain.payload.clone();
        inner.as_object_mut().unwrap().remove("at");
        let aad = aad("s1", 4, plain.event_type, plain.event_version);
        let before = key().seal(&aad, &serde_json::to_vec(&inner).unwrap());
        let opened = open(row.event_version, &row.payload, &before, &key(), at).unwrap();
        assert_eq!(opened, plain.payload);

        // What does not inflate (only a holder of the key could seal it) opens as nothing.
        let broken = key().seal(&aad, &[DEFLATED, 0xff, 0xff, 0xff]);
        assert!(open(row.event_version, &row.payload, &broken, &key(), at).is_err());
    }
}
