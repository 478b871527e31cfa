//! The stored form: version 2 round trips, the chain over it, documents by reference, and
//! version 1 logs read as before (alone and continued in version 2).

use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use uuid::Uuid;

use super::*;
use crate::chain::verify_chain;
use crate::events::{ConcludeReason, EventBody, SessionEvent};
use crate::hash::{event_hash, GENESIS_HASH};

fn message(prev: &str, content: &str) -> SessionEvent {
    SessionEvent::seal(
        EventBody::AgentMessageCompleted {
            message_id: Uuid::nil(),
            content: content.into(),
        },
        DateTime::UNIX_EPOCH,
        prev,
    )
}

fn stored(e: &Encoded) -> Stored<'_> {
    Stored {
        event_type: e.event_type,
        event_version: e.event_version,
        payload: &e.payload,
        hash: Some(&e.hash),
    }
}

/// A version 1 payload as the code before version 2 wrote it.
fn v1(event: &SessionEvent, prev: &str) -> (Value, String) {
    let mut payload = serde_json::to_value(SessionEvent {
        prev_hash: prev.into(),
        hash: String::new(),
        ..event.clone()
    })
    .unwrap();
    payload.as_object_mut().unwrap().remove("hash");
    let hash = event_hash(prev, event.body.event_type(), "1", &payload);
    payload["hash"] = json!(hash);
    (payload, hash)
}

#[test]
fn a_version_2_payload_holds_the_body_and_time_only_and_decodes_back() {
    let e = SessionEvent::seal(
        EventBody::SessionAbandoned {
            reason: ConcludeReason::Timeout,
        },
        DateTime::UNIX_EPOCH,
        GENESIS_HASH,
    );
    let enc = encode(&e);
    assert_eq!(
        (enc.event_type, enc.event_version),
        ("session.abandoned", "2")
    );
    assert_eq!(
        enc.payload,
        json!({"reason": "timeout", "at": "1970-01-01T00:00:00Z"})
    );
    assert_eq!(enc.hash.len(), 32);
    assert_eq!(hex(&enc.hash), e.hash);
    let back = decode(stored(&enc), GENESIS_HASH, &NoDocuments).unwrap();
    assert_eq!(back, e);
    // A reader that did not read the hash column computes the same hash.
    let without = Stored {
        hash: None,
        ..stored(&enc)
    };
    assert_eq!(decode(without, GENESIS_HASH, &NoDocuments).unwrap(), e);
}

#[test]
fn the_chain_runs_over_version_2_rows_and_an_edit_breaks_it_where_it_is() {
    let a = message(GENESIS_HASH, "Hi");
    let b = message(&a.hash, "How do you plan?");
    let (ea, mut eb) = (encode(&a), encode(&b));
    let rows = |ea: &Encoded, eb: &Encoded| {
        verify_chain([
            (
                1,
                ea.event_type,
                ea.event_version,
                &ea.payload,
                Some(&ea.hash[..]),
            ),
            (
                2,
                eb.event_type,
                eb.event_version,
                &eb.payload,
                Some(&eb.hash[..]),
            ),
        ])
    };
    assert_eq!(rows(&ea, &eb), Ok(b.hash.clone()));
    eb.payload["content"] = json!("How do you shop?");
    let breaks = rows(&ea, &eb).unwrap_err();
    assert_eq!(breaks.len(), 1);
    assert_eq!(breaks[0].sequence, 2);
    // A 2 stored as 3 breaks too: it leaves out nothing a version 3 row must.
    let eb = Encoded {
        event_version: "3",
        ..encode(&b)
    };
    assert!(rows(&ea, &eb).is_err());
    // A missing or short hash column is a break, not a pass.
    let short = verify_chain([(1, ea.event_type, "2", &ea.payload, Some(&ea.hash[..31]))]);
    assert!(short.is_err());
    assert!(verify_chain([(1, ea.event_type, "2", &ea.payload, None)]).is_err());
}

#[test]
fn session_created_names_its_documents_and_decodes_with_them_checked() {
    let study = crate::aggregate::tests::study();
    let e = SessionEvent::seal(
        EventBody::SessionCreated {
            session_id: Uuid::nil(),
            study: Box::new(study.clone()),
            participant_ref: None,
            participant_token_sha256: "ab".repeat(32),
            preview: false,
            chain_secret: None,
        },
        DateTime::UNIX_EPOCH,
        GENESIS_HASH,
    );
    let enc = encode(&e);
    let kept = enc.payload["study"].as_object().unwrap();
    let mut keys: Vec<&str> = kept.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["config_versions", "public_slug", "study_id"]);
    let full = serde_json::to_value(&study).unwrap();
    let v = &study.config_versions;
    let docs: HashMap<String, Value> = [
        (&v.study_config_version_id, "study_config"),
        (&v.agent_config_version_id, "agent_config"),
        (&v.output_schema_version_id, "output_schema"),
        (&v.model_config_version_id, "model_config"),
    ]
    .into_iter()
    .map(|(id, field)| (id.clone(), full[field].clone()))
    .collect();
    let mut needed = documents_needed(stored(&enc));
    needed.sort();
    let mut ids: Vec<String> = docs.keys().cloned().collect();
    ids.sort();
    assert_eq!(needed, ids);
    assert_eq!(decode(stored(&enc), GENESIS_HASH, &docs).unwrap(), e);

    let missing = decode(stored(&enc), GENESIS_HASH, &NoDocuments).unwrap_err();
    assert!(
        matches!(missing, DecodeError::MissingDocument(_)),
        "{missing}"
    );
    let mut edited = docs.clone();
    edited.get_mut(&v.study_config_version_id).unwrap()["title"] = json!("Tea habits");
    let mismatch = decode(stored(&enc), GENESIS_HASH, &edited).unwrap_err();
    assert!(
        matches!(mismatch, DecodeError::DocumentMismatch(_)),
        "{mismatch}"
    );
    assert_eq!(document_prefix(&v.agent_config_version_id), Some("acv"));
    assert_eq!(document_prefix("xyz_1"), None);
}

#[test]
fn a_version_1_log_decodes_verifies_and_continues_in_version_2() {
    let a = message(GENESIS_HASH, "Hi");
    let (payload_a, hash_a) = v1(&a, GENESIS_HASH);
    let row_a = Stored {
        event_type: "agent.message.completed",
        event_version: "1",
        payload: &payload_a,
        hash: None,
    };
    let decoded_a = decode(row_a, "ignored for version 1", &NoDocuments).unwrap();
    assert_eq!(decoded_a.hash, hash_a);
    assert_eq!(decoded_a.body, a.body);
    // The session goes on under version 2 from the version 1 head.
    let b = message(&hash_a, "And then?");
    let eb = encode(&b);
    assert_eq!(
        verify_chain([
            (1, "agent.message.completed", "1", &payload_a, None),
            (2, eb.event_type, "2", &eb.payload, Some(&eb.hash[..])),
        ]),
        Ok(b.hash.clone())
    );
    assert_eq!(decode(stored(&eb), &hash_a, &NoDocuments).unwrap(), b);
}

#[test]
fn the_text_path_decodes_like_the_tree_path() {
    let a = message(GENESIS_HASH, "Hi");
    let enc = encode(&a);
    let text = enc.payload.to_string();
    let back = decode_text(
        enc.event_type,
        "2",
        &text,
        Some(&enc.hash),
        GENESIS_HASH,
        &NoDocuments,
    );
    assert_eq!(back.unwrap(), a);
    let (v1_payload, v1_hash) = v1(&a, GENESIS_HASH);
    let back = decode_text(
        enc.event_type,
        "1",
        &v1_payload.to_string(),
        None,
        "",
        &NoDocuments,
    )
    .unwrap();
    assert_eq!((back.body, back.hash), (a.body.clone(), v1_hash));
    // A payload that claims another type than its column is refused on this path too.
    let spliced = decode_text(
        "session.abandoned",
        "2",
        &text,
        Some(&enc.hash),
        GENESIS_HASH,
        &NoDocuments,
    );
    assert!(spliced.is_err());
}

#[test]
fn a_row_that_does_not_match_its_columns_is_refused() {
    let enc = encode(&message(GENESIS_HASH, "Hi"));
    let wrong_type = Stored {
        event_type: "participant.message.created",
        ..stored(&enc)
    };
    assert!(decode(wrong_type, GENESIS_HASH, &NoDocuments).is_err());
    let unknown = Stored {
        event_version: "9",
        ..stored(&enc)
    };
    assert!(matches!(
        decode(unknown, GENESIS_HASH, &NoDocuments),
        Err(DecodeError::UnknownVersion(_))
    ));
    let (payload, _) = v1(&message(GENESIS_HASH, "Hi"), GENESIS_HASH);
    let mislabeled = Stored {
        event_type: "session.abandoned",
        event_version: "1",
        payload: &payload,
        hash: None,
    };
    assert!(matches!(
        decode(mislabeled, GENESIS_HASH, &NoDocuments),
        Err(DecodeError::TypeMismatch { .. })
    ));
    assert_eq!(hex_to_bytes("0aFf"), Some(vec![10, 255]));
    assert_eq!(hex_to_bytes("0a f"), None);
    let _ = Utc::now();
}

#[test]
fn numbers_are_stored_as_any_store_gives_them_back() {
    // PostgreSQL's jsonb has no negative zero and prints 1e16 as 10000000000000000: the payload
    // (and so the hash) is made of what comes back, and the sealed event is the one decoded.
    let e = SessionEvent::seal(
        EventBody::ToolCallCompleted {
            tool_call_id: "tc".into(),
            tool_result: json!({"value": -0.0, "big": 1e16, "small": 0.5, "n": 3}),
        },
        DateTime::UNIX_EPOCH,
        GENESIS_HASH,
    );
    let enc = encode(&e);
    assert_eq!(
        enc.payload["tool_result"],
        json!({"value": 0.0, "big": 10000000000000000u64, "small": 0.5, "n": 3})
    );
    let EventBody::ToolCallCompleted { tool_result, .. } = &e.body else {
        unreachable!()
    };
    assert_eq!(tool_result, &enc.payload["tool_result"]);
    // What a store gives back hashes the same.
    let back: Value = serde_json::from_str(&enc.payload.to_string()).unwrap();
    assert_eq!(hash(GENESIS_HASH, enc.event_type, &back), e.hash);
    assert_eq!(decode(stored(&enc), GENESIS_HASH, &NoDocuments).unwrap(), e);
}

#[test]
fn keys_a_version_2_payload_never_has_are_refused_and_every_key_is_hashed() {
    let a = message(GENESIS_HASH, "Hi");
    let mut enc = encode(&a);
    enc.payload["hash"] = json!("not covered before");
    assert!(decode(stored(&enc), GENESIS_HASH, &NoDocuments).is_err());
    assert!(decode_text(
        enc.event_type,
        "2",
        &enc.payload.to_string(),
        Some(&enc.hash),
        GENESIS_HASH,
        &NoDocuments
    )
    .is_err());
    // The added key is under the hash: the chain breaks there.
    assert!(verify_chain([(1, enc.event_type, "2", &enc.payload, Some(&enc.hash[..]))]).is_err());
    // A version 1 event after version 2 ones is flagged (nothing writes version 1 any more).
    let b = message(&a.hash, "Then?");
    let (payload_b, _) = v1(&b, &a.hash);
    let ea = encode(&a);
    let breaks = verify_chain([
        (1, ea.event_type, "2", &ea.payload, Some(&ea.hash[..])),
        (2, "agent.message.completed", "1", &payload_b, None),
    ])
    .unwrap_err();
    assert!(
        breaks
            .iter()
            .any(|b| b.problem.contains("version 1 event after")),
        "{breaks:?}"
    );
}

#[test]
fn the_text_path_reads_a_duplicated_key_as_the_tree_path_does() {
    let a = message(GENESIS_HASH, "orig");
    let enc = encode(&a);
    // SQLite keeps the text as written: a key added ahead of the real one.
    let text = enc
        .payload
        .to_string()
        .replacen('{', "{\"content\":\"FORGED\",", 1);
    let tree: Value = serde_json::from_str(&text).unwrap();
    let by_tree = decode(
        Stored {
            payload: &tree,
            ..stored(&enc)
        },
        GENESIS_HASH,
        &NoDocuments,
    )
    .unwrap();
    let by_text = decode_text(
        enc.event_type,
        "2",
        &text,
        Some(&enc.hash),
        GENESIS_HASH,
        &NoDocuments,
    )
    .unwrap();
    assert_eq!(by_text, by_tree);
}

// Long by design: one decision with every field spelled out, then its round trip in order: stored
// without its empty fields, decoded both ways, shown with every field; then the older form with
// each empty field written out, read as the same decision both ways and its chain verified.
#[test]
fn a_decision_is_stored_without_its_empty_fields_and_read_as_before() {
    let body = EventBody::DecisionRecorded {
        decision_id: Uuid::nil(),
        turn_id: None,
        phase: crate::events::Phase::Opening,
        input_summary: "session start".into(),
        selected_action: crate::decision::AgentAction::AskQuestion {
            objective_id: "o".into(),
        },
        proposed_action: None,
        rationale: "first".into(),
        model: "rules".into(),
        prompt_version_id: "rules-v1".into(),
        latency_ms: 0,
        token_usage: crate::decision::TokenUsage::default(),
        study_prompt_version: None,
        alongside: None,
        input_class: None,
        refused_proposal: None,
    };
    let e = SessionEvent::seal(body, DateTime::UNIX_EPOCH, GENESIS_HASH);
    let enc = encode(&e);
    for empty in ["turn_id", "proposed_action", "latency_ms", "token_usage"] {
        assert!(enc.payload.get(empty).is_none(), "{}", enc.payload);
    }
    assert_eq!(decode(stored(&enc), GENESIS_HASH, &NoDocuments).unwrap(), e);
    let short = enc.payload.to_string();
    let fast = decode_text(
        "agent.decision.recorded",
        "2",
        &short,
        Some(&enc.hash),
        GENESIS_HASH,
        &NoDocuments,
    )
    .unwrap();
    assert_eq!(fast, e);
    // The event's own serde form (what researchers are shown) keeps every field.
    let shown = serde_json::to_value(&e).unwrap();
    for field in ["turn_id", "proposed_action", "latency_ms", "token_usage"] {
        assert!(shown.get(field).is_some(), "{shown}");
    }
    // As version 2 stored it before: every empty field spelled out. It reads as the same
    // decision, and its hash is over what is stored.
    let mut before = enc.payload.clone();
    before["turn_id"] = Value::Null;
    before["proposed_action"] = Value::Null;
    before["latency_ms"] = json!(0);
    before["token_usage"] = json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0});
    let hash = hash(GENESIS_HASH, "agent.decision.recorded", &before);
    let bytes = hex_to_bytes(&hash).unwrap();
    let row = Stored {
        event_type: "agent.decision.recorded",
        event_version: "2",
        payload: &before,
        hash: Some(&bytes),
    };
    let read = decode(row, GENESIS_HASH, &NoDocuments).unwrap();
    assert_eq!(read.body, e.body);
    assert_eq!(read.hash, hash);
    let text = before.to_string();
    let fast = decode_text(
        "agent.decision.recorded",
        "2",
        &text,
        Some(&bytes),
        GENESIS_HASH,
        &NoDocuments,
    )
    .unwrap();
    assert_eq!(fast.body, e.body);
    assert!(verify_chain([(1, "agent.decision.recorded", "2", &before, Some(&bytes[..]))]).is_ok());
}

#[test]
fn documents_checked_once_are_still_checked_the_first_time() {
    let doc = json!({"a": 1});
    let mut digest = doc.clone();
    crate::hash::normalize_numbers(&mut digest);
    let id = format!(
        "scv_{}",
        &crate::hash::sha256_hex(crate::hash::canonical_json(&digest).as_bytes())[..32]
    );
    let good: HashMap<String, Value> = [(id.clone(), doc.clone())].into();
    let once = CheckedOnce::new(good);
    assert_eq!(once.checked("scv", &id).unwrap(), doc);
    assert_eq!(once.checked("scv", &id).unwrap(), doc);
    // A document that is not the one its id names is refused, first time and every time.
    let forged: HashMap<String, Value> = [(id.clone(), json!({"a": 2}))].into();
    let once = CheckedOnce::new(forged);
    for _ in 0..2 {
        assert!(matches!(
            once.checked("scv", &id),
            Err(DecodeError::DocumentMismatch(_))
        ));
    }
    // Checked as one kind, a document is not thereby another kind's.
    let good: HashMap<String, Value> = [(id.clone(), doc.clone())].into();
    let once = CheckedOnce::new(good);
    assert!(once.checked("scv", &id).is_ok());
    assert!(matches!(
        once.checked("acv", &id),
        Err(DecodeError::DocumentMismatch(_))
    ));
    assert!(matches!(
        once.checked("scv", "scv_missing"),
        Err(DecodeError::MissingDocument(_))
    ));
}
