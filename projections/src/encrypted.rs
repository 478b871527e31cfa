//! The encrypted form of a stored event (`event_version` `encrypted`, `docs/privacy.md`).
//!
//! An event that holds personal data — what [`EventBody::without_personal_data`] would change —
//! is stored with its version 2 payload sealed under the session's data key
//! (XChaCha20-Poly1305):
//!
//! ```text
//! {"at": <the payload's at>, "c": base64(nonce ‖ ciphertext ‖ tag)}
//! ```
//!
//! The sealed bytes are the payload's JSON without `at`, bound (as associated data) to the
//! session, the sequence and the event type: a sealed payload moved to another row does not
//! open. It is always a whole version 2 payload, never a version 3 one (which leaves out what
//! the event before says), so an encrypted row is a place decoding can start, as the
//! `event_version` column alone tells (`log::read_between`). The hash column holds the inner row's hash, unchanged: the chain is over
//! the content, so opening a row gives back exactly the row every reader decoded before
//! encryption, and `replay verify` checks it the same way. `at` stays in clear because a
//! session's start orders session lists (`read::sessions`) and is no personal data.
//! Events without personal data (status and phase changes, most decisions' bookkeeping, the
//! erasure record) are stored as before, in clear.

use base64::Engine as _;
use interview_session::codec::{self, DecodeError, Encoded, ENCRYPTED_VERSION};
use interview_session::SessionEvent;
use serde_json::{Map, Value};

use crate::keys::DataKey;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD_NO_PAD;

/// Whether `event` is stored encrypted: it holds something an erasure would remove.
pub fn holds_personal_data(event: &SessionEvent) -> bool {
    event.body.holds_personal_data()
}

fn aad(session_id: &str, sequence: u64, event_type: &str) -> Vec<u8> {
    format!("event\n{session_id}\n{sequence}\n{event_type}\n2").into_bytes()
}

/// `event`'s version 2 row sealed under `key` as the row at `sequence` of `session_id`.
pub fn encrypt(event: &SessionEvent, key: &DataKey, session_id: &str, sequence: u64) -> Encoded {
    let stored = codec::encode(event);
    let mut inner = stored.payload;
    let at = inner.as_object_mut().and_then(|m| m.remove("at"));
    let plaintext = serde_json::to_vec(&inner).expect("a JSON value serializes");
    let aad = aad(session_id, sequence, stored.event_type);
    let sealed = key.seal(&aad, &plaintext);
    let mut payload = Map::new();
    if let Some(at) = at {
        payload.insert("at".into(), at);
    }
    payload.insert("c".into(), Value::String(B64.encode(sealed)));
    Encoded {
        event_type: stored.event_type,
        event_version: ENCRYPTED_VERSION,
        payload: Value::Object(payload),
        hash: stored.hash,
    }
}

/// The version 2 payload an encrypted row seals, opened with `key`.
pub fn open(
    payload: &Value,
    key: &DataKey,
    session_id: &str,
    sequence: u64,
    event_type: &str,
) -> Result<Value, DecodeError> {
    // Nothing beside the sealed bytes and the time: a key added in clear would be read by no one
    // and checked by nothing.
    let keys_ok = payload
        .as_object()
        .is_some_and(|m| m.keys().all(|k| k == "at" || k == "c"));
    if !keys_ok {
        return Err(DecodeError::NotOpened);
    }
    let sealed = payload["c"]
        .as_str()
        .and_then(|c| B64.decode(c).ok())
        .ok_or(DecodeError::NotOpened)?;
    let aad = aad(session_id, sequence, event_type);
    let plaintext = key.open(&aad, &sealed).ok_or(DecodeError::NotOpened)?;
    let mut inner: Value = serde_json::from_slice(&plaintext)?;
    if let (Some(map), Some(at)) = (inner.as_object_mut(), payload.get("at")) {
        map.insert("at".into(), at.clone());
    }
    Ok(inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};
    use interview_session::EventBody;

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
        assert!(holds_personal_data(&event));
        let plain = codec::encode(&event);
        let sealed = encrypt(&event, &key(), "s1", 4);
        assert_eq!(sealed.event_version, ENCRYPTED_VERSION);
        assert_eq!(sealed.hash, plain.hash);
        let text = sealed.payload.to_string();
        assert!(!text.contains("notebook"), "{text}");
        assert_eq!(sealed.payload["at"], plain.payload["at"]);

        let payload = open(&sealed.payload, &key(), "s1", 4, plain.event_type).unwrap();
        assert_eq!(payload, plain.payload);

        for (session, sequence, event_type) in [
            ("s2", 4, plain.event_type),
            ("s1", 5, plain.event_type),
            ("s1", 4, "interviewer.utterance.completed"),
        ] {
            assert!(
                open(&sealed.payload, &key(), session, sequence, event_type).is_err(),
                "{session} {sequence} {event_type}"
            );
        }
        let other = DataKey::from_bytes(&[4; 32]);
        assert!(open(&sealed.payload, &other, "s1", 4, plain.event_type).is_err());
    }
}
