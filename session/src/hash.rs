//! Canonical JSON and the SHA-256 hash chain.
//!
//! Every event has a `hash` (in a version 1 payload, or the version 2 `hash` column; see
//! `codec`), where `hash = SHA-256(prev_hash "\n" event_type "\n" [event_version "\n"]
//! canonical(payload without "hash"))` and `prev_hash` is the previous event's hash. The
//! stored `event_version` column is part of the hashed text for every version but the first, `1`, which is written as nothing — so the hashes of the logs written before the
//! version was covered still recompute, and editing a stored version between 1 and a later one
//! breaks the chain (a `1` made `2` is hashed with `2`; a later version made `1` is hashed
//! without it). Version 3 is a version 2 payload stored with what the event before says left
//! out, and hashes as that version 2 payload (`codec::compact`).
//! Canonical JSON is compact with object keys sorted by their UTF-8 bytes, so the hash does not
//! depend on how a database (PostgreSQL `jsonb` reorders keys) or a serializer orders them.
//! Content-addressed configuration ids use the same canonical form.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Rewrites the numbers a store would give back differently, so a payload hashes the same before
/// and after a round trip through PostgreSQL's `jsonb` (whose `numeric` has no negative zero and
/// prints large whole numbers without an exponent): `-0.0` becomes `0.0`, and a whole float of
/// 1e16 or more (serialized as `1e16`) becomes the integer it is, when one holds it. Returns
/// whether anything changed.
pub fn normalize_numbers(value: &mut Value) -> bool {
    match value {
        Value::Number(n) => match n.as_f64() {
            Some(x) if n.is_f64() && x == 0.0 && x.is_sign_negative() => {
                *value = serde_json::json!(0.0);
                true
            }
            Some(x) if n.is_f64() && x.fract() == 0.0 && x.abs() >= 1e16 => {
                let whole = if (0.0..18_446_744_073_709_551_616.0).contains(&x) {
                    Some(Value::from(x as u64))
                } else if (-9_223_372_036_854_775_808.0..0.0).contains(&x) {
                    Some(Value::from(x as i64))
                } else {
                    None
                };
                match whole {
                    Some(w) => {
                        *value = w;
                        true
                    }
                    None => false,
                }
            }
            _ => false,
        },
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |c, v| normalize_numbers(v) | c),
        Value::Object(map) => map
            .values_mut()
            .fold(false, |c, v| normalize_numbers(v) | c),
        _ => false,
    }
}

/// `prev_hash` of a session's first event.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Writes `value` as canonical JSON: no whitespace, object keys sorted.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::with_capacity(256);
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    to_hex(&Sha256::digest(bytes))
}

pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 0x0f) as usize] as char);
    }
    s
}

/// The chain hash of one event: `payload` is the stored payload; its `hash` key, if present, is
/// left out.
pub fn event_hash(
    prev_hash: &str,
    event_type: &str,
    event_version: &str,
    payload: &Value,
) -> String {
    // A version 1 payload carries its own hash; from version 2 every key is under the hash.
    let canonical = match payload {
        Value::Object(map) if event_version == "1" && map.contains_key("hash") => {
            let mut without = map.clone();
            without.remove("hash");
            canonical_json(&Value::Object(without))
        }
        other => canonical_json(other),
    };
    let mut hasher = Sha256::new();
    hasher.update(prev_hash.as_bytes());
    hasher.update(b"\n");
    hasher.update(event_type.as_bytes());
    hasher.update(b"\n");
    if event_version != "1" {
        hasher.update(event_version.as_bytes());
        hasher.update(b"\n");
    }
    hasher.update(canonical.as_bytes());
    to_hex(&hasher.finalize())
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let v = json!({"b": 1, "a": {"d": [1, {"z": true, "y": null}], "c": "x"}});
        assert_eq!(
            canonical_json(&v),
            r#"{"a":{"c":"x","d":[1,{"y":null,"z":true}]},"b":1}"#
        );
    }

    #[test]
    fn event_hash_ignores_the_hash_key_and_key_order() {
        let a = json!({"type": "t", "x": 1, "prev_hash": GENESIS_HASH});
        let b = json!({"prev_hash": GENESIS_HASH, "x": 1, "type": "t", "hash": "whatever"});
        assert_eq!(
            event_hash(GENESIS_HASH, "t", "1", &a),
            event_hash(GENESIS_HASH, "t", "1", &b)
        );
        let c = json!({"type": "t", "x": 2, "prev_hash": GENESIS_HASH});
        assert_ne!(
            event_hash(GENESIS_HASH, "t", "1", &a),
            event_hash(GENESIS_HASH, "t", "1", &c)
        );
    }

    #[test]
    fn the_event_version_is_hashed_and_version_1_hashes_as_before() {
        let a = json!({"type": "t", "x": 1, "prev_hash": GENESIS_HASH});
        let v1 = event_hash(GENESIS_HASH, "t", "1", &a);
        // The formula before versions were covered: prev, type, payload.
        let mut hasher = Sha256::new();
        hasher.update(format!("{GENESIS_HASH}\nt\n{}", canonical_json(&a)).as_bytes());
        assert_eq!(v1, to_hex(&hasher.finalize()));
        assert_ne!(v1, event_hash(GENESIS_HASH, "t", "2", &a));
        assert_ne!(
            event_hash(GENESIS_HASH, "t", "2", &a),
            event_hash(GENESIS_HASH, "t", "3", &a)
        );
        let stored = json!({"type": "t", "x": 1, "prev_hash": GENESIS_HASH, "hash": v1});
        assert!(verify_chain([(1, "t", "1", &stored, None)]).is_ok());
        assert!(
            verify_chain([(1, "t", "2", &stored, None)]).is_err(),
            "an edited version breaks the chain"
        );
    }
}
