//! The erased form of a stored event (`event_version` `erased`), and the digest that keeps erased
//! events auditable.
//!
//! When a participant's data is erased, every event of the session so far is rewritten in place
//! as its erased form: the version 2 payload of [`EventBody::without_personal_data`], with the
//! event's original hash kept in the `hash` column. That hash was taken over the whole content,
//! so it can no longer be recomputed; instead the `participant.data.erased` event that follows
//! carries the [`FormDigest`] of the erased rows exactly as stored — their sequence, type, payload
//! and hash — and is itself stored whole and chained as usual (onto the last erased event, or the
//! withdrawal that came in its commit). `replay verify` recomputes the digest from the rows and
//! the erasure event's hash from its payload: an edit of any erased row, or of the erasure
//! record, is caught against the head after the erasure (`chain::verify_chain`).

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{hex_to_bytes, payload, Encoded};
use crate::events::SessionEvent;
use crate::hash::canonical_json;

/// The `event_version` of an erased event.
pub const VERSION: &str = "erased";

/// The stored form of `event` once its personal data is erased: its hash stays the one sealed.
pub fn encode(event: &SessionEvent) -> Encoded {
    let body = event.body.without_personal_data();
    Encoded {
        event_type: body.event_type(),
        event_version: VERSION,
        payload: payload(&body, event.at),
        hash: hex_to_bytes(&event.hash).expect("sealed events carry a SHA-256 hash"),
    }
}

/// The SHA-256 over erased events as stored, in sequence order:
///
/// ```text
/// for each event:  sequence "\n" event_type "\n" canonical(payload) "\n" hex(hash) "\n"
/// ```
#[derive(Default)]
pub struct FormDigest {
    hasher: Sha256,
    events: u64,
}

impl FormDigest {
    pub fn add(&mut self, sequence: u64, event_type: &str, payload: &Value, hash: &[u8]) {
        let line = format!(
            "{sequence}\n{event_type}\n{}\n{}\n",
            canonical_json(payload),
            super::hex(hash)
        );
        self.hasher.update(line.as_bytes());
        self.events += 1;
    }

    /// How many events were added.
    pub fn events(&self) -> u64 {
        self.events
    }

    pub fn finish(self) -> String {
        super::hex(&self.hasher.finalize())
    }
}

/// The digest of `events` (sequence, event) in their erased form, as [`encode`] stores them.
pub fn digest_of<'a>(events: impl IntoIterator<Item = (u64, &'a SessionEvent)>) -> FormDigest {
    let mut digest = FormDigest::default();
    for (sequence, event) in events {
        let erased = encode(event);
        digest.add(sequence, erased.event_type, &erased.payload, &erased.hash);
    }
    digest
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};
    use uuid::Uuid;

    use super::*;
    use crate::codec::{decode, NoDocuments, Stored};
    use crate::events::EventBody;
    use crate::hash::GENESIS_HASH;

    fn message(content: &str) -> SessionEvent {
        let at = Utc.with_ymd_and_hms(2026, 12, 3, 10, 0, 0).unwrap();
        SessionEvent::seal(
            EventBody::ParticipantMessageCreated {
                turn_id: Uuid::nil(),
                client_message_id: Some("m1".into()),
                content: content.into(),
            },
            at,
            GENESIS_HASH,
        )
    }

    #[test]
    fn an_erased_event_keeps_its_hash_and_loses_its_words() {
        let event = message("I plan with a paper notebook");
        let erased = encode(&event);
        assert_eq!(erased.event_version, VERSION);
        assert!(!erased.payload.to_string().contains("notebook"));
        let row = Stored {
            event_type: erased.event_type,
            event_version: erased.event_version,
            payload: &erased.payload,
            hash: Some(&erased.hash),
        };
        let read = decode(row, GENESIS_HASH, &NoDocuments).unwrap();
        assert_eq!(read.hash, event.hash);
        assert_eq!(read.at, event.at);
        assert!(matches!(
            read.body,
            EventBody::ParticipantMessageCreated { ref content, ref client_message_id, .. }
                if content.is_empty() && client_message_id.as_deref() == Some("")
        ));
    }

    #[test]
    fn an_erased_row_without_its_hash_does_not_decode() {
        let erased = encode(&message("hello"));
        let row = Stored {
            event_type: erased.event_type,
            event_version: erased.event_version,
            payload: &erased.payload,
            hash: None,
        };
        assert!(decode(row, GENESIS_HASH, &NoDocuments).is_err());
    }

    #[test]
    fn the_digest_depends_on_every_part_of_a_row() {
        let event = message("hello");
        let base = digest_of([(1, &event)]).finish();
        assert_eq!(base, digest_of([(1, &event)]).finish());
        assert_ne!(base, digest_of([(2, &event)]).finish());
        let erased = encode(&event);
        let mut edited = erased.payload.clone();
        edited["at"] = "2026-12-03T10:00:01Z".into();
        let mut other = FormDigest::default();
        other.add(1, erased.event_type, &edited, &erased.hash);
        assert_ne!(base, other.finish());
    }

    /// Two events and the erasure after them, as stored.
    fn erased_log() -> Vec<Encoded> {
        erased_log_with(true)
    }

    fn erased_log_with(content_verified: bool) -> Vec<Encoded> {
        let first = message("first words");
        let second = SessionEvent::seal(
            EventBody::AgentMessageCompleted {
                message_id: Uuid::nil(),
                content: "You said: first words".into(),
            },
            first.at,
            &first.hash,
        );
        let digest = digest_of([(1, &first), (2, &second)]);
        let erasure = SessionEvent::seal(
            EventBody::ParticipantDataErased(crate::erasure::Erasure {
                by: crate::erasure::ErasedBy::Researcher,
                reason: Some("request".into()),
                erased_events: digest.events(),
                erased_form_sha256: digest.finish(),
                content_verified,
            }),
            first.at,
            &second.hash,
        );
        vec![
            encode(&first),
            encode(&second),
            crate::codec::encode(&erasure),
        ]
    }

    fn verify(rows: &[Encoded]) -> Result<String, Vec<crate::chain::ChainBreak>> {
        crate::chain::verify_chain(rows.iter().enumerate().map(|(i, r)| {
            (
                i + 1,
                r.event_type,
                r.event_version,
                &r.payload,
                Some(&r.hash[..]),
            )
        }))
    }

    #[test]
    fn an_erased_log_verifies_and_every_edit_of_it_is_caught() {
        let rows = erased_log();
        assert_eq!(verify(&rows).unwrap(), crate::codec::hex(&rows[2].hash));
        assert!(!format!("{:?}", rows).contains("first words"));

        let mut edited = rows.clone();
        edited[1].payload["content"] = "something else".into();
        assert!(verify(&edited).is_err(), "an erased row edited");

        let mut relinked = rows.clone();
        relinked[0].hash[0] ^= 1;
        assert!(verify(&relinked).is_err(), "an erased row's hash edited");

        let mut reason = rows.clone();
        reason[2].payload["reason"] = "another".into();
        assert!(verify(&reason).is_err(), "the erasure record edited");

        assert!(
            verify(&rows[..2]).is_err(),
            "erased rows with no erasure after them"
        );

        assert!(
            verify(&erased_log_with(false)).is_err(),
            "an erasure of a chain found broken"
        );

        let mut partly = rows.clone();
        partly[0] = crate::codec::encode(&message("first words"));
        assert!(
            verify(&partly).is_err(),
            "an event the erasure covers left whole"
        );
    }

    #[test]
    fn a_withdrawal_between_the_erased_events_and_their_record_verifies() {
        let first = message("first words");
        let withdrawal = [
            EventBody::SessionAbandoned {
                reason: crate::events::ConcludeReason::Withdrawn,
            },
            EventBody::StatusChanged {
                from: crate::events::SessionStatus::WaitingForUser,
                to: crate::events::SessionStatus::Abandoned,
            },
        ];
        // `first`, then `between` kept whole, then the record covering `first`.
        let log = |between: &[EventBody]| -> Vec<Encoded> {
            let mut rows = vec![encode(&first)];
            let mut head = first.hash.clone();
            for body in between {
                let event = SessionEvent::seal(body.clone(), first.at, &head);
                head = event.hash.clone();
                rows.push(crate::codec::encode(&event));
            }
            let digest = digest_of([(1, &first)]);
            let erasure = SessionEvent::seal(
                EventBody::ParticipantDataErased(crate::erasure::Erasure {
                    by: crate::erasure::ErasedBy::Participant,
                    reason: None,
                    erased_events: digest.events(),
                    erased_form_sha256: digest.finish(),
                    content_verified: true,
                }),
                first.at,
                &head,
            );
            rows.push(crate::codec::encode(&erasure));
            rows
        };
        assert!(verify(&log(&withdrawal)).is_ok());
        assert!(verify(&log(&[])).is_ok());

        // Anything else kept whole between the erased events and their record is refused: a
        // summary that quotes the participant, half a withdrawal, a withdrawal for another reason.
        let summary = EventBody::SummaryProposed {
            summary: "first words, kept".into(),
        };
        assert!(verify(&log(std::slice::from_ref(&summary))).is_err());
        assert!(verify(&log(&withdrawal[..1])).is_err());
        let mut timeout = withdrawal.clone();
        timeout[0] = EventBody::SessionAbandoned {
            reason: crate::events::ConcludeReason::Timeout,
        };
        assert!(verify(&log(&timeout)).is_err());

        // An event the record does not cover, stored erased.
        let mut late = log(&withdrawal);
        let abandoned = SessionEvent::seal(withdrawal[0].clone(), first.at, &first.hash);
        late[1] = encode(&abandoned);
        assert!(verify(&late).is_err());
    }
}
