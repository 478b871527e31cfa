//! Version 3: a version 2 payload stored without what the event before it in the same commit
//! already says.
//!
//! A command's events share its time, and a widget's `interaction.rendered` repeats the
//! `tool.call.created` before it word for word. So an event written right after another of the
//! same commit leaves out
//! - its `at`, when it is the one before's, and
//! - an `interaction.rendered`'s `interaction`, when the event before is the `tool.call.created`
//!   of that call and its `tool_input` is exactly that interaction.
//!
//! Readers put them back from the event before ([`restore`]) and then read a version 2 payload:
//! the event, and its hash, are the version 2 ones (`SHA-256(prev "\n" type "\n" "2" "\n"
//! canonical(the whole payload))`), so what is left out is still under the hash of the event
//! that leaves it out. A version 3 payload leaves out at least one of the two; one that leaves
//! out neither is refused, so a version 2 row relabelled 3 does not pass as one.
//!
//! Only a commit's second and later events are written this way, so a reader that starts at a
//! commit's first event never needs anything before it; one that starts inside a commit reads
//! back to an event stored whole (`interview_projections::log::read_between`).

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{DecodeError, Encoded};
use crate::events::{EventBody, SessionEvent};

/// The version of a row written this way.
pub const VERSION: &str = "3";

/// What a version 3 event may take from the event before it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Before {
    pub at: Option<DateTime<Utc>>,
    /// The `tool_input` of the event before, when it is a `tool.call.created`.
    pub tool_input: Option<Value>,
}

impl Before {
    /// From the decoded event before.
    pub fn of(event: &SessionEvent) -> Self {
        Self {
            at: Some(event.at),
            tool_input: match &event.body {
                EventBody::ToolCallCreated { tool_input, .. } => Some(tool_input.clone()),
                _ => None,
            },
        }
    }

    /// From the whole (restored) payload of the event before, as stored in any version.
    pub fn of_payload(event_type: &str, payload: &Value) -> Self {
        Self {
            at: payload
                .get("at")
                .and_then(|at| serde_json::from_value(at.clone()).ok()),
            tool_input: (event_type == "tool.call.created")
                .then(|| payload.get("tool_input").cloned())
                .flatten(),
        }
    }
}

/// `encoded` (the version 2 form of `event`) with what `before` — the event before it in the
/// same commit — says left out, as version 3; unchanged when nothing can be.
pub fn leave_out(mut encoded: Encoded, event: &SessionEvent, before: &SessionEvent) -> Encoded {
    let map = encoded
        .payload
        .as_object_mut()
        .expect("an event is an object");
    let mut left_out = false;
    if before.at == event.at {
        left_out |= map.remove("at").is_some();
    }
    if let (EventBody::InteractionRendered { .. }, EventBody::ToolCallCreated { tool_input, .. }) =
        (&event.body, &before.body)
    {
        if map.get("interaction") == Some(tool_input) {
            map.remove("interaction");
            left_out = true;
        }
    }
    if left_out {
        encoded.event_version = VERSION;
    }
    encoded
}

/// The whole version 2 payload of a version 3 `payload`, from the event before it.
pub fn restore(event_type: &str, payload: &Value, before: &Before) -> Result<Value, DecodeError> {
    let malformed = |why: &str| DecodeError::Malformed(serde::de::Error::custom(why));
    let mut whole = payload.clone();
    let map = whole
        .as_object_mut()
        .ok_or_else(|| malformed("the payload is not an object"))?;
    let mut restored = false;
    if !map.contains_key("at") {
        let at = before.at.ok_or_else(|| {
            malformed("a version 3 event leaves out its time, but nothing before it says one")
        })?;
        map.insert("at".into(), serde_json::to_value(at)?);
        restored = true;
    }
    if event_type == "interaction.rendered" && !map.contains_key("interaction") {
        let input = before.tool_input.clone().ok_or_else(|| {
            malformed("a version 3 interaction.rendered leaves out its interaction, but the event before is not its tool call")
        })?;
        map.insert("interaction".into(), input);
        restored = true;
    }
    if !restored {
        return Err(malformed("a version 3 payload leaves out nothing"));
    }
    Ok(whole)
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Duration};
    use serde_json::json;

    use super::*;
    use crate::chain::verify_chain;
    use crate::codec::{decode, decode_after, encode_after, Encoded, NoDocuments, Stored};
    use crate::events::{EventBody, SessionEvent, SessionStatus};
    use crate::hash::GENESIS_HASH;
    use crate::interaction::InteractionToolCall;

    fn likert() -> InteractionToolCall {
        serde_json::from_value(json!({
            "interaction_id": "i1", "tool_call_id": "tc_i1", "schema_version": "1",
            "research_intent": "satisfaction", "prompt": "How satisfied are you?",
            "type": "likert", "scale": 5, "labels": ["a", "b", "c", "d", "e"],
            "value_schema": {"type": "integer", "minimum": 1, "maximum": 5}
        }))
        .unwrap()
    }

    /// A widget's commit: its tool call, the rendered interaction, the status change — all at
    /// one time — and then a later command's event.
    fn commit() -> Vec<SessionEvent> {
        let at = DateTime::UNIX_EPOCH + Duration::microseconds(1_764_655_247_836_706);
        let interaction = likert();
        let bodies = [
            EventBody::ToolCallCreated {
                tool_call_id: "tc_i1".into(),
                tool_name: "render_interaction".into(),
                tool_input: serde_json::to_value(&interaction).unwrap(),
            },
            EventBody::InteractionRendered {
                interaction: Box::new(interaction),
            },
            EventBody::StatusChanged {
                from: SessionStatus::Active,
                to: SessionStatus::WaitingForTool,
            },
        ];
        let mut prev = GENESIS_HASH.to_string();
        let mut events = Vec::new();
        for body in bodies {
            let e = SessionEvent::seal(body, at, &prev);
            prev = e.hash.clone();
            events.push(e);
        }
        events
    }

    /// Encoded as a command's events are: each after the one before.
    fn encoded(events: &[SessionEvent]) -> Vec<Encoded> {
        (0..events.len())
            .map(|i| encode_after(&events[i], i.checked_sub(1).map(|b| &events[b])))
            .collect()
    }

    fn rows(encoded: &[Encoded]) -> Vec<crate::chain::ChainRow<'_>> {
        encoded
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let hash: &[u8] = &e.hash;
                (i + 1, e.event_type, e.event_version, &e.payload, Some(hash))
            })
            .collect()
    }

    fn decode_all(encoded: &[Encoded]) -> Result<Vec<SessionEvent>, DecodeError> {
        let mut prev = GENESIS_HASH.to_string();
        let mut before = Before::default();
        let mut out = Vec::new();
        for e in encoded {
            let row = Stored {
                event_type: e.event_type,
                event_version: e.event_version,
                payload: &e.payload,
                hash: Some(&e.hash),
            };
            let event = decode_after(row, &prev, &before, &NoDocuments)?;
            prev = event.hash.clone();
            before = Before::of(&event);
            out.push(event);
        }
        Ok(out)
    }

    #[test]
    fn a_commits_later_events_leave_out_what_the_one_before_says_and_read_back_whole() {
        let events = commit();
        let encoded = encoded(&events);
        let versions: Vec<&str> = encoded.iter().map(|e| e.event_version).collect();
        assert_eq!(versions, ["2", "3", "3"]);
        assert!(encoded[0].payload.get("at").is_some());
        assert_eq!(
            encoded[1].payload,
            json!({}),
            "time and interaction are the tool call's"
        );
        assert_eq!(
            encoded[2].payload,
            json!({"from": "active", "to": "waiting_for_tool"})
        );
        assert_eq!(decode_all(&encoded).unwrap(), events);
        // The hashes are the version 2 ones, over the whole payloads.
        assert_eq!(verify_chain(rows(&encoded)).unwrap(), events[2].hash);
    }

    #[test]
    fn what_differs_from_the_event_before_is_kept() {
        let mut events = commit();
        let later = events[2].at + Duration::microseconds(1);
        events[2] = SessionEvent::seal(events[2].body.clone(), later, &events[1].hash);
        let encoded = encoded(&events);
        assert_eq!(encoded[2].event_version, "2");
        assert!(encoded[2].payload.get("at").is_some());
        assert_eq!(decode_all(&encoded).unwrap(), events);
        // A rendered interaction that is not its tool call's input word for word keeps it.
        let mut events = commit();
        let EventBody::InteractionRendered { interaction } = &mut events[1].body else {
            unreachable!()
        };
        interaction.prompt = "Another prompt".into();
        let encoded = encode_after(&events[1], Some(&events[0]));
        assert_eq!(encoded.event_version, "3");
        assert_eq!(encoded.payload["interaction"]["prompt"], "Another prompt");
        assert!(encoded.payload.get("at").is_none());
    }

    #[test]
    fn a_version_3_row_needs_the_event_before_and_must_leave_something_out() {
        let events = commit();
        let encoded = encoded(&events);
        let alone = Stored {
            event_type: encoded[1].event_type,
            event_version: "3",
            payload: &encoded[1].payload,
            hash: Some(&encoded[1].hash),
        };
        assert!(decode(alone, &events[0].hash, &NoDocuments).is_err());
        // A version 2 row relabelled 3 leaves out nothing: refused, and the chain says so.
        let mut relabelled = encoded.clone();
        relabelled[0].event_version = "3";
        assert!(decode_all(&relabelled).is_err());
        assert!(verify_chain(rows(&relabelled)).is_err());
        // A version 3 row relabelled 2 lacks its time.
        let mut relabelled = encoded.clone();
        relabelled[2].event_version = "2";
        assert!(decode_all(&relabelled).is_err());
    }

    #[test]
    fn an_edit_of_what_is_left_out_breaks_the_chain_where_it_is_read_too() {
        let events = commit();
        let mut encoded = encoded(&events);
        encoded[0].payload["tool_input"]["prompt"] = json!("Edited");
        let breaks = verify_chain(rows(&encoded)).unwrap_err();
        let at: Vec<usize> = breaks.iter().map(|b| b.sequence).collect();
        assert_eq!(
            at,
            [1, 2],
            "the tool call, and the interaction read from it: {breaks:?}"
        );
    }

    #[test]
    fn before_from_a_payload_is_before_from_its_event() {
        let events = commit();
        let whole = crate::codec::encode(&events[0]).payload;
        assert_eq!(
            Before::of_payload("tool.call.created", &whole),
            Before::of(&events[0])
        );
    }
}
