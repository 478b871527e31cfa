//! Status and phase changes stored in the row of another event of the same command.
//!
//! A `session.status_changed` or `session.phase_changed` says two words, but a row of its own
//! costs about 200 bytes on PostgreSQL (the row header, the session id, the type, the version,
//! the hash) — a quarter of an interview's stored events were such rows. So a change committed
//! by the same command as another event, at the same time, is written inside that event's row
//! (its *carrier*): the changes before the carrier under `preceded_by`, those after it under
//! `followed_by`, each as the words `status FROM TO` or `phase FROM TO`, with its `at` after them
//! when its stored payload has one (version 2: the command's first event, or one at another time
//! than the event before it; otherwise version 3, which takes `at` from the event before it). The row's `hash` column holds the hash of each of
//! its events in order, 32 bytes each; its `sequence` is its first event's, and its metadata
//! (the command's, when that first event is the command's first) is that event's.
//!
//! Every reader expands such a row back into the rows its events would have had on their own
//! ([`expand`]) before anything else looks at it — before encrypted rows are opened, before the
//! decode point, the chain check, `replay`, the live streams and the researcher's `/events` — so
//! each change is still its own event in the log, with its sequence, its hash and its place in
//! the chain, exactly as when it had a row. An erasure writes every event on a row of its own
//! again (`commit::erasure::rewrite`). Nothing is folded into or beside an erasure record, and
//! at most [`MOST_HELD`] changes share a row, so a reader starting inside the log knows how far
//! back the row holding an event may start.

use interview_session::codec::ENCRYPTED_COMPACT_VERSION;
use interview_session::EventBody;
use serde_json::{Map, Value};

use crate::store::log::{NewEvent, Row};

/// The key of the changes before a row's carrier.
pub const LEADING: &str = "preceded_by";
/// The key of the changes after it.
pub const TRAILING: &str = "followed_by";
/// The most changes one row holds besides its carrier: a row holding event N starts at
/// N − `MOST_HELD` at the earliest.
pub const MOST_HELD: u64 = 4;

/// How far before `sequence` the row holding it may start.
pub fn earliest_row_of(sequence: u64) -> u64 {
    sequence.saturating_sub(MOST_HELD).max(1)
}

/// The short names of the changes a row holds, and their event types.
const KINDS: [(&str, &str); 2] = [
    ("status", "session.status_changed"),
    ("phase", "session.phase_changed"),
];

/// Whether `event` may be held in another's row: a status or phase change in clear, with no
/// salt (it holds no personal data) and its stored payload no more than `from`, `to` and `at`.
fn holdable(event: &NewEvent) -> bool {
    matches!(
        event.event.body,
        EventBody::StatusChanged { .. } | EventBody::PhaseChanged { .. }
    ) && event.sealed.is_none()
        && event.event.salt.is_none()
        && event.stored.payload.as_object().is_some_and(|payload| {
            payload.iter().all(|(key, value)| {
                matches!(key.as_str(), "from" | "to" | "at")
                    && value
                        .as_str()
                        .is_some_and(|word| !word.is_empty() && !word.contains(' '))
            })
        })
}

/// The entry a held change is stored as: `"<status|phase> <from> <to>"`, and its `at` after them
/// when its payload has one (none of them has a space).
fn entry(event: &NewEvent) -> Value {
    let kind = match event.event.body {
        EventBody::StatusChanged { .. } => "status",
        _ => "phase",
    };
    let payload = &event.stored.payload;
    let word = |key: &str| payload.get(key).and_then(Value::as_str).unwrap_or_default();
    let mut entry = format!("{kind} {} {}", word("from"), word("to"));
    if payload.get("at").is_some() {
        entry.push(' ');
        entry.push_str(word("at"));
    }
    Value::String(entry)
}

/// One row a command writes: the changes before its carrier, the carrier, those after (indexes
/// into the command's events).
#[derive(Debug, Default)]
struct Planned {
    leading: Vec<usize>,
    carrier: Option<usize>,
    trailing: Vec<usize>,
}

impl Planned {
    fn held(&self) -> usize {
        self.leading.len() + self.trailing.len()
    }
}

/// Which rows a command's events are written as: a change joins the row of the event before it
/// in the command, else of the one after it, when it happened at the same time and that row has
/// room; changes with neither share rows among themselves; every other event has a row of its own.
/// A row's events are consecutive.
fn plan(events: &[NewEvent]) -> Vec<Planned> {
    let mut rows: Vec<Planned> = Vec::new();
    // Changes no row before them could take, waiting for the next carrier.
    let mut waiting: Vec<usize> = Vec::new();
    for (i, event) in events.iter().enumerate() {
        if holdable(event) {
            match rows.last_mut() {
                Some(row) if waiting.is_empty() && takes(row, events, i) => row.trailing.push(i),
                _ => waiting.push(i),
            }
            continue;
        }
        // The changes right before it that happened at its time lead it; those before them
        // share rows among themselves.
        let at = event.event.at;
        let mut split = waiting.len();
        while split > 0
            && events[waiting[split - 1]].event.at == at
            && ((waiting.len() - split) as u64) < MOST_HELD
        {
            split -= 1;
        }
        group_changes(&waiting[..split], events, &mut rows);
        rows.push(Planned {
            leading: waiting.split_off(split),
            carrier: Some(i),
            trailing: Vec::new(),
        });
        waiting.clear();
    }
    group_changes(&waiting, events, &mut rows);
    rows
}

/// Whether `row` can take change `i` after its events.
fn takes(row: &Planned, events: &[NewEvent], i: usize) -> bool {
    row.carrier
        .is_some_and(|c| events[c].event.at == events[i].event.at)
        && (row.held() as u64) < MOST_HELD
}

/// Rows for a run of consecutive changes with no other event to join: the first carries those
/// after it that it can take.
fn group_changes(run: &[usize], events: &[NewEvent], rows: &mut Vec<Planned>) {
    let mut current: Option<Planned> = None;
    for &w in run {
        match &mut current {
            Some(row) if takes(row, events, w) => row.trailing.push(w),
            _ => {
                rows.extend(current.take());
                current = Some(Planned {
                    carrier: Some(w),
                    ..Planned::default()
                });
            }
        }
    }
    rows.extend(current);
}

/// Writes one command's changes into the rows of its other events where they can go (see the
/// module docs): the events they join get the changes in their stored payload, the hashes in
/// their hash column, and the row's first sequence and metadata; the changes get no row.
pub fn share_rows(events: &mut [NewEvent]) {
    if events
        .iter()
        .any(|e| matches!(e.event.body, EventBody::ParticipantDataErased(_)))
    {
        return;
    }
    for row in plan(events) {
        let Some(carrier) = row.carrier else { continue };
        if row.held() == 0 {
            continue;
        }
        let first = row.leading.first().copied().unwrap_or(carrier);
        let order: Vec<usize> = row
            .leading
            .iter()
            .copied()
            .chain([carrier])
            .chain(row.trailing.iter().copied())
            .collect();
        let hashes: Vec<u8> = order
            .iter()
            .flat_map(|&i| events[i].stored.hash.clone())
            .collect();
        let leading: Vec<Value> = row.leading.iter().map(|&i| entry(&events[i])).collect();
        let trailing: Vec<Value> = row.trailing.iter().map(|&i| entry(&events[i])).collect();
        let (sequence, metadata) = (events[first].sequence, events[first].metadata.clone());
        for &i in row.leading.iter().chain(&row.trailing) {
            events[i].row_sequence = None;
        }
        let c = &mut events[carrier];
        let map = c
            .stored
            .payload
            .as_object_mut()
            .expect("an event is an object");
        if !leading.is_empty() {
            map.insert(LEADING.into(), Value::Array(leading));
        }
        if !trailing.is_empty() {
            map.insert(TRAILING.into(), Value::Array(trailing));
        }
        c.stored.hash = hashes;
        c.row_sequence = Some(sequence);
        c.metadata = metadata;
    }
}

/// One event a row holds besides its carrier, as the row it would have had on its own.
#[derive(Debug, Clone, PartialEq)]
pub struct Held {
    pub event_type: String,
    pub event_version: &'static str,
    pub payload: Value,
}

impl Held {
    /// The change an entry stands for; one not understood stays as it is under an event type no
    /// event has, so decoding and the chain check report it.
    fn of(entry: &Value) -> Self {
        let words: Vec<&str> = entry.as_str().unwrap_or_default().split(' ').collect();
        let found = match words.as_slice() {
            [kind, from, to, at @ ..] if at.len() <= 1 => KINDS
                .iter()
                .find(|(k, _)| k == kind)
                .map(|(_, event_type)| (event_type, from, to, at.first())),
            _ => None,
        };
        let Some((event_type, from, to, at)) = found else {
            return Self::not_understood(entry.clone());
        };
        let mut payload = Map::new();
        payload.insert("from".into(), Value::String((*from).into()));
        payload.insert("to".into(), Value::String((*to).into()));
        if let Some(at) = at {
            payload.insert("at".into(), Value::String((*at).into()));
        }
        Self {
            event_type: (*event_type).to_string(),
            event_version: if at.is_some() { "2" } else { "3" },
            payload: Value::Object(payload),
        }
    }
}

impl Held {
    fn not_understood(payload: Value) -> Self {
        Self {
            event_type: NOT_UNDERSTOOD.into(),
            event_version: "3",
            payload,
        }
    }

    /// Read as an entry not understood: it is somewhere this code never writes one.
    fn refuse(&mut self) {
        let payload = std::mem::take(&mut self.payload);
        *self = Self::not_understood(payload);
    }
}

/// The event type of an entry not understood: one no event has, so decoding and the chain check
/// report it at its place.
pub const NOT_UNDERSTOOD: &str = "(an entry of a shared row not understood)";

/// What a stored row holds besides its carrier, taken out of its payload, and each event's hash
/// from the column (`None` for all when the column does not hold one per event: the carrier then
/// keeps the column as it was, and the chain check reports it).
pub struct Shared {
    pub leading: Vec<(Held, Option<Vec<u8>>)>,
    pub trailing: Vec<(Held, Option<Vec<u8>>)>,
}

/// Takes the held changes out of a row's `payload`, leaving the carrier's own payload, and
/// splits `hash` likewise (leaving the carrier's); `None` for a row that holds nothing else.
/// `version` is the row's stored `event_version` (its carrier's).
///
/// Entries in a place this code never writes them are read as entries not understood (which
/// every check reports at their events): more than [`MOST_HELD`] in a row, a change before a
/// carrier stored whole (one decodable on its own, which `log::read_between` may start at), and a
/// time on any but the first change before the carrier (a held change is at its carrier's time).
pub fn take_shared(
    payload: &mut Value,
    hash: &mut Option<Vec<u8>>,
    version: &str,
) -> Option<Shared> {
    let map = payload.as_object_mut()?;
    if !map.contains_key(LEADING) && !map.contains_key(TRAILING) {
        return None;
    }
    let mut list = |key: &str| -> Vec<Held> {
        match map.remove(key) {
            Some(Value::Array(entries)) => entries.iter().map(Held::of).collect(),
            Some(other) => vec![Held::of(&other)],
            None => Vec::new(),
        }
    };
    let (mut leading, mut trailing) = (list(LEADING), list(TRAILING));
    let too_many = (leading.len() + trailing.len()) as u64 > MOST_HELD;
    let carrier_whole = !matches!(version, "3" | ENCRYPTED_COMPACT_VERSION);
    for (i, held) in leading.iter_mut().enumerate() {
        if too_many || carrier_whole || (i > 0 && held.event_version == "2") {
            held.refuse();
        }
    }
    for held in trailing.iter_mut() {
        if too_many || held.event_version == "2" {
            held.refuse();
        }
    }
    let count = leading.len() + 1 + trailing.len();
    let mut hashes: Vec<Option<Vec<u8>>> = match hash.as_ref() {
        Some(column) if column.len() == 32 * count => {
            column.chunks(32).map(|c| Some(c.to_vec())).collect()
        }
        _ => {
            let mut none = vec![None; count];
            none[leading.len()] = hash.take();
            none
        }
    };
    *hash = hashes[leading.len()].take();
    let rest = hashes.split_off(leading.len() + 1);
    Some(Shared {
        leading: leading.into_iter().zip(hashes).collect(),
        trailing: trailing.into_iter().zip(rest).collect(),
    })
}

/// The rows as if each of their events had one of its own (see the module docs).
pub fn expand(rows: Vec<Row>) -> Vec<Row> {
    let mut out = Vec::with_capacity(rows.len() + rows.len() / 2);
    for mut row in rows {
        let Some(shared) = take_shared(&mut row.payload, &mut row.hash, &row.event_version) else {
            out.push(row);
            continue;
        };
        let metadata = std::mem::replace(&mut row.metadata, Value::Object(Map::new()));
        let mut sequence = row.sequence;
        let mut metadata = Some(metadata);
        for (held, hash) in shared.leading {
            out.push(held_row(sequence, held, hash, metadata.take()));
            sequence += 1;
        }
        row.sequence = sequence;
        if let Some(metadata) = metadata.take() {
            row.metadata = metadata;
        }
        out.push(row);
        for (held, hash) in shared.trailing {
            sequence += 1;
            out.push(held_row(sequence, held, hash, None));
        }
    }
    out
}

fn held_row(sequence: u64, held: Held, hash: Option<Vec<u8>>, metadata: Option<Value>) -> Row {
    Row {
        sequence,
        event_type: held.event_type,
        event_version: held.event_version.to_string(),
        payload: held.payload,
        hash,
        metadata: metadata.unwrap_or_else(|| Value::Object(Map::new())),
        sealed: None,
    }
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Duration, Utc};
    use interview_session::hash::GENESIS_HASH;
    use interview_session::{EventBody, Phase, SessionEvent, SessionStatus};
    use serde_json::json;
    use uuid::Uuid;

    use super::*;

    fn status(from: SessionStatus, to: SessionStatus) -> EventBody {
        EventBody::StatusChanged { from, to }
    }

    fn phase(from: Phase, to: Phase) -> EventBody {
        EventBody::PhaseChanged { from, to }
    }

    fn started() -> EventBody {
        EventBody::AgentMessageStarted {
            message_id: Uuid::from_u128(7),
            run_id: Uuid::from_u128(8),
            process_id: None,
            takes_over: None,
        }
    }

    fn said(content: &str) -> EventBody {
        EventBody::AgentMessageCompleted {
            message_id: Uuid::from_u128(7),
            content: content.into(),
        }
    }

    /// One command's events from `first` on, chained after `prev`, as a command writes them.
    fn command(first: u64, prev: &str, bodies: Vec<(EventBody, DateTime<Utc>)>) -> Vec<NewEvent> {
        let mut prev = prev.to_string();
        let mut out: Vec<NewEvent> = Vec::new();
        for (i, (body, at)) in bodies.into_iter().enumerate() {
            let event = SessionEvent::seal(body, at, &prev);
            prev = event.hash.clone();
            let metadata = if i == 0 {
                json!({"actor": "agent"})
            } else {
                json!({})
            };
            let before = out.last().map(|e| e.event.clone());
            out.push(NewEvent::new(
                "s",
                first + i as u64,
                event,
                before.as_ref(),
                metadata,
                None,
            ));
        }
        out
    }

    /// The rows `events` are written as.
    fn written(events: &[NewEvent]) -> Vec<Row> {
        events
            .iter()
            .filter_map(|e| {
                Some(Row {
                    sequence: e.row_sequence?,
                    event_type: e.stored.event_type.into(),
                    event_version: e.stored.event_version.into(),
                    payload: e.stored.payload.clone(),
                    hash: Some(e.stored.hash.clone()),
                    metadata: e.metadata.clone(),
                    sealed: e.sealed.clone(),
                })
            })
            .collect()
    }

    /// Every column of the rows, as text.
    fn summary(rows: &[Row]) -> Vec<String> {
        rows.iter().map(|r| format!("{r:?}")).collect()
    }

    /// A run's command: the changes around an utterance, all at one time.
    fn run(at: DateTime<Utc>) -> Vec<(EventBody, DateTime<Utc>)> {
        use Phase::*;
        use SessionStatus::*;
        vec![
            (status(WaitingForUser, Active), at),
            (phase(Opening, Extract), at),
            (started(), at),
            (phase(Extract, EvaluateCoverage), at),
            (phase(EvaluateCoverage, AskOrProbe), at),
            (said("What do you buy?"), at),
            (status(Active, WaitingForUser), at),
        ]
    }

    #[test]
    fn changes_share_the_rows_of_their_commands_other_events_and_read_back_as_their_own() {
        let at = Utc::now();
        let alone = command(5, GENESIS_HASH, run(at));
        let mut shared = alone.clone();
        share_rows(&mut shared);
        let rows = written(&shared);
        // The two changes before the claim lead it; the two after it and the one after the
        // utterance follow those.
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].sequence, 5);
        assert_eq!(rows[0].event_type, "agent.message.started");
        let at_text = json!(at).as_str().unwrap().to_string();
        assert_eq!(
            rows[0].payload[LEADING],
            json!([
                format!("status waiting_for_user active {at_text}"),
                "phase OPENING EXTRACT"
            ])
        );
        assert_eq!(rows[0].metadata, json!({"actor": "agent"}));
        assert_eq!(rows[0].hash.as_ref().map(Vec::len), Some(5 * 32));
        assert_eq!(rows[1].sequence, 10);
        assert_eq!(
            rows[1].payload[TRAILING],
            json!(["status active waiting_for_user"])
        );
        // Read back, each is the row it would have had on its own.
        assert_eq!(summary(&expand(rows)), summary(&written(&alone)));
        // In memory, every event is there with its own sequence.
        let sequences: Vec<u64> = shared.iter().map(|e| e.sequence).collect();
        assert_eq!(sequences, (5..12).collect::<Vec<_>>());
    }

    #[test]
    fn a_change_at_another_time_or_past_the_rows_room_keeps_a_row_of_its_own() {
        use Phase::*;
        let at = Utc::now();
        let later = at + Duration::milliseconds(1);
        let mut events = command(
            1,
            GENESIS_HASH,
            vec![
                (started(), at),
                (phase(Opening, Extract), later),
                (phase(Extract, EvaluateCoverage), later),
                (phase(EvaluateCoverage, NextTopicOrProbe), later),
                (phase(NextTopicOrProbe, AskOrProbe), later),
                (phase(AskOrProbe, Extract), later),
                (phase(Extract, EvaluateCoverage), later),
                (said("Next?"), at),
            ],
        );
        let alone = events.clone();
        share_rows(&mut events);
        let rows = written(&events);
        // The first change is at another time than the claim: it carries the next four (the
        // most a row holds); the sixth cannot lead the utterance either (another time).
        let shape: Vec<(u64, usize)> = rows
            .iter()
            .map(|r| {
                let held = [LEADING, TRAILING]
                    .iter()
                    .filter_map(|k| r.payload.get(*k)?.as_array().map(Vec::len))
                    .sum();
                (r.sequence, held)
            })
            .collect();
        assert_eq!(shape, vec![(1, 0), (2, 4), (7, 0), (8, 0)]);
        assert_eq!(summary(&expand(rows)), summary(&written(&alone)));
    }

    #[test]
    fn nothing_shares_a_row_with_an_erasure() {
        let at = Utc::now();
        let erasure = interview_session::erasure::Erasure {
            by: interview_session::erasure::ErasedBy::Participant,
            reason: None,
            erased_events: 3,
            erased_form_sha256: "00".into(),
            content_verified: true,
        };
        let mut events = command(
            4,
            GENESIS_HASH,
            vec![
                (EventBody::ParticipantDataErased(erasure), at),
                (status(SessionStatus::Active, SessionStatus::Abandoned), at),
            ],
        );
        share_rows(&mut events);
        assert!(events.iter().all(NewEvent::has_row));
    }

    #[test]
    fn a_changed_shared_row_reads_as_events_the_chain_check_refuses() {
        let at = Utc::now();
        let mut events = command(1, GENESIS_HASH, run(at));
        share_rows(&mut events);
        let mut rows = written(&events);
        // An entry no change is, and a hash column cut short.
        rows[0].payload[LEADING][1] = json!("phase OPENING");
        rows[1].hash.as_mut().unwrap().truncate(32);
        let expanded = expand(rows);
        assert_eq!(
            expanded[1].event_type,
            "(an entry of a shared row not understood)"
        );
        assert_eq!(expanded[5].hash.as_ref().map(Vec::len), Some(32));
        assert_eq!(expanded[6].hash, None);
        let breaks =
            interview_session::chain::verify_chain(expanded.iter().map(Row::chain)).unwrap_err();
        let at: Vec<usize> = breaks.iter().map(|b| b.sequence).collect();
        assert!(at.contains(&2) && at.contains(&7), "{breaks:?}");
    }

    #[test]
    fn entries_where_no_command_writes_them_read_as_not_understood() {
        let word = |held: &Shared| -> Vec<String> {
            held.leading
                .iter()
                .chain(&held.trailing)
                .map(|(h, _)| h.event_type.clone())
                .collect()
        };
        let status = "status active waiting_for_user";
        let timed = "status active waiting_for_user 2026-12-05T10:00:00Z";
        let cases = [
            // Before a carrier stored whole (decodable on its own): refused.
            (json!({LEADING: [status]}), "2", vec![NOT_UNDERSTOOD]),
            (
                json!({LEADING: [status]}),
                "3",
                vec!["session.status_changed"],
            ),
            // A time on a change after its carrier, or on a second one before it.
            (json!({TRAILING: [timed]}), "3", vec![NOT_UNDERSTOOD]),
            (
                json!({LEADING: [timed, timed]}),
                "encrypted-3",
                vec!["session.status_changed", NOT_UNDERSTOOD],
            ),
            // More than a row holds.
            (
                json!({TRAILING: [status, status, status, status, status]}),
                "2",
                vec![NOT_UNDERSTOOD; 5],
            ),
        ];
        for (mut payload, version, expected) in cases {
            let mut hash = None;
            let held = take_shared(&mut payload, &mut hash, version).unwrap();
            assert_eq!(word(&held), expected, "{version}");
            assert_eq!(payload, json!({}));
        }
    }
}
