//! Verifying a session's stored chain: every version of every event, erased ones through the
//! digest their erasure carries (the links themselves are `hash`'s).

use serde_json::Value;

use crate::hash::{event_hash, to_hex, GENESIS_HASH};

/// A problem found while checking a stored chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainBreak {
    /// 1-based sequence of the offending event.
    pub sequence: usize,
    pub problem: String,
}

/// One stored event as the chain check reads it: its sequence, `event_type`, `event_version`,
/// payload and `hash` column (absent for version 1, whose links are inside the payload).
pub type ChainRow<'a> = (usize, &'a str, &'a str, &'a Value, Option<&'a [u8]>);

/// Checks a session's stored events in sequence order: sequences are 1, 2, 3…; a version 1
/// event's `prev_hash` is the previous hash and its `hash` recomputes; a version 2 event's stored
/// hash recomputes from the previous hash, and a version 3 event's from its whole version 2
/// payload (what it leaves out put back from the event before it, `codec::compact`). Erased
/// events (`codec::erased`) are checked through the digest the `participant.data.erased` event
/// after them carries, which must cover events 1 to N, all of them stored erased (what follows
/// them before it is the withdrawal that ended the session in the same commit) and whose chain
/// the erasing server found whole; nothing may be erased without one. Returns the head hash, or every break found.
// Long by design: one pass over the events in order, carrying the expected sequence, the previous
// hash, the event before and the erasure digest; one branch per stored version (erased, 1, 2 or 3),
// each with its checks; split, that carried state would have to be passed in and out.
pub fn verify_chain<'a>(
    events: impl IntoIterator<Item = ChainRow<'a>>,
) -> Result<String, Vec<ChainBreak>> {
    let mut breaks = Vec::new();
    let mut expected_prev = GENESIS_HASH.to_string();
    let mut expected_seq = 1usize;
    let mut seen_v2 = false;
    let mut before = crate::codec::compact::Before::default();
    let mut erased = crate::codec::erased::FormDigest::default();
    // The events after the erased ones, up to their erasure record: only a withdrawal may be
    // there (see `erasure_covers`).
    let mut after_erased: Vec<(String, Value)> = Vec::new();
    for (sequence, event_type, event_version, payload, column) in events {
        if sequence != expected_seq {
            breaks.push(ChainBreak {
                sequence,
                problem: format!("expected sequence {expected_seq}, found {sequence}"),
            });
        }
        expected_seq = sequence + 1;
        let mut problem = |problem: String| breaks.push(ChainBreak { sequence, problem });
        if event_version == "1" && seen_v2 {
            // Nothing writes version 1 any more: one after a later version was put there.
            problem("a version 1 event after events of a later version".into());
        }
        seen_v2 |= event_version != "1";
        let stored = if event_version == crate::codec::erased::VERSION {
            // Its hash was taken over content that is gone: the erasure's digest covers it.
            before = crate::codec::compact::Before::of_payload(event_type, payload);
            if sequence as u64 != erased.events() + 1 {
                problem("an erased event after events that are not erased".into());
            }
            match column.filter(|c| c.len() == 32) {
                Some(hash) => {
                    erased.add(sequence as u64, event_type, payload, hash);
                    to_hex(hash)
                }
                None => {
                    problem("an erased event without its 32-byte hash".into());
                    String::new()
                }
            }
        } else if event_version == "1" {
            before = crate::codec::compact::Before::of_payload(event_type, payload);
            let prev = payload
                .get("prev_hash")
                .and_then(Value::as_str)
                .unwrap_or("");
            if prev != expected_prev {
                problem(format!(
                    "prev_hash {prev:?} does not match the previous hash {expected_prev:?}"
                ));
            }
            let stored = payload.get("hash").and_then(Value::as_str).unwrap_or("");
            let recomputed = event_hash(prev, event_type, event_version, payload);
            if recomputed != stored {
                problem(format!(
                    "hash {stored:?} does not match the payload (recomputed {recomputed:?})"
                ));
            }
            stored.to_string()
        } else {
            let stored = column.map(to_hex).unwrap_or_default();
            let (version, whole) = if event_version == crate::codec::compact::VERSION {
                match crate::codec::compact::restore(event_type, payload, &before) {
                    Ok(whole) => ("2", std::borrow::Cow::Owned(whole)),
                    Err(e) => {
                        problem(format!("cannot be read as version 3: {e}"));
                        (event_version, std::borrow::Cow::Borrowed(payload))
                    }
                }
            } else {
                (event_version, std::borrow::Cow::Borrowed(payload))
            };
            before = crate::codec::compact::Before::of_payload(event_type, &whole);
            let recomputed = event_hash(&expected_prev, event_type, version, &whole);
            if column.is_none_or(|c| c.len() != 32) {
                problem(format!("the hash column holds {stored:?}, not 32 bytes"));
            } else if recomputed != stored {
                problem(format!(
                    "hash {stored:?} does not match the payload and the previous hash (recomputed {recomputed:?})"
                ));
            }
            if event_type == "participant.data.erased" {
                let digest = std::mem::take(&mut erased);
                let between = std::mem::take(&mut after_erased);
                if let Err(p) = erasure_covers(&whole, sequence, digest, &between) {
                    problem(p);
                }
            } else if erased.events() > 0 {
                after_erased.push((event_type.to_string(), whole.into_owned()));
            }
            stored
        };
        expected_prev = stored;
    }
    if erased.events() > 0 {
        breaks.push(ChainBreak {
            sequence: expected_seq.saturating_sub(1),
            problem: format!(
                "{} events are stored erased with no participant.data.erased after them",
                erased.events()
            ),
        });
    }
    if breaks.is_empty() {
        Ok(expected_prev)
    } else {
        Err(breaks)
    }
}

/// Whether an erasure record (`payload`, at `sequence`) covers the erased events before it: events
/// 1 to N, all stored erased, and between them and the record nothing but the withdrawal that
/// ended a running session in the same commit (`between`: `session.abandoned` with reason
/// `withdrawn`, then `session.status_changed` to `abandoned`), or nothing at all.
fn erasure_covers(
    payload: &Value,
    sequence: usize,
    digest: crate::codec::erased::FormDigest,
    between: &[(String, Value)],
) -> Result<(), String> {
    let said = payload["erased_events"].as_u64().unwrap_or(0);
    if said == 0 || said >= sequence as u64 || digest.events() != said {
        return Err(format!(
            "the erasure covers {said} events but {} of the {} before it are stored erased",
            digest.events(),
            sequence - 1
        ));
    }
    let withdrawal = match between {
        [] => true,
        [(abandoned, a), (changed, c)] => {
            abandoned == "session.abandoned"
                && a["reason"] == "withdrawn"
                && changed == "session.status_changed"
                && c["to"] == "abandoned"
        }
        _ => false,
    };
    if !withdrawal || said + between.len() as u64 + 1 != sequence as u64 {
        return Err(format!(
            "events {}-{} come between the erased events and their erasure, and are not a withdrawal",
            said + 1,
            sequence - 1
        ));
    }
    if payload["content_verified"].as_bool() != Some(true) {
        return Err(
            "the server that erased these events found their chain broken just before (content_verified is false)"
                .into(),
        );
    }
    let recorded = payload["erased_form_sha256"].as_str().unwrap_or("");
    let stored = digest.finish();
    if recorded != stored {
        return Err(format!(
            "the erased events as stored (digest {stored:?}) are not the ones erased (digest {recorded:?})"
        ));
    }
    Ok(())
}
