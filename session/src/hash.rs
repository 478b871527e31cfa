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
        assert!(crate::chain::verify_chain([(1, "t", "1", &stored, None)]).is_ok());
        assert!(
            crate::chain::verify_chain([(1, "t", "2", &stored, None)]).is_err(),
            "an edited version breaks the chain"
        );
    }
}
