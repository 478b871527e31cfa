//! Events in clear stored in the row of another event of the same command.
//!
//! A row costs about 150 bytes on PostgreSQL before its payload (the row header, the session id,
//! the type, the version, the hash), and most of an interview's events in clear are small: a
//! `session.status_changed` or `session.phase_changed` says two words, a claim three ids — 82 of
//! an interview's 169 events were such rows. So an event stored in clear (no personal data, no
//! salt) committed by the same command as another event, at the same time, is *held* in that
//! event's row (its *carrier*): those before the carrier under `preceded_by`, those after it
//! under `followed_by`. A status or phase change is held as the words `status FROM TO` or
//! `phase FROM TO`, with its `at` after them when its stored payload has one (version 2: the
//! command's first event, or one at another time than the event before it; otherwise version 3,
//! which takes `at` from the event before it); any other event as `[event_type, event_version,
//! payload]`. The row's `hash` column holds the hash of each of its events in order, 32 bytes
//! each; its `sequence` is its first event's, and its metadata (the command's, when that first
//! event is the command's first) is that event's.
//!
//! Every reader expands such a row back into the rows its events would have had on their own
//! ([`expand`]) before anything else looks at it — before encrypted rows are opened (a sealed
//! carrier's sealing is bound to its own sequence), before the decode point, the chain check,
//! `replay`, the live streams and the researcher's `/events` — so each event is still its own
//! in the log, with its sequence, its hash and its place in the chain, exactly as when it had a
//! row. An erasure writes every event on a row of its own again (`commit::erasure::rewrite`).
//! Nothing is held in or beside an erasure record or a session's first event, and at most
//! [`MOST_HELD`] events share a row with its carrier, so a reader starting inside the log knows
//! how far back the row holding an event may start.

use interview_session::codec::ENCRYPTED_COMPACT_VERSION;
use interview_session::EventBody;
use serde_json::{Map, Value};

use crate::store::log::{NewEvent, Row};

/// The key of the events held before a row's carrier.
pub const LEADING: &str = "preceded_by";
/// The key of those after it.
pub const TRAILING: &str = "followed_by";
/// The most events one row holds besides its carrier: a row holding event N starts at
/// N − `MOST_HELD` at the earliest.
pub const MOST_HELD: u64 = 6;

/// How far before `sequence` the row holding it may start.
pub fn earliest_row_of(sequence: u64) -> u64 {
    sequence.saturating_sub(MOST_HELD).max(1)
}

/// The short names of the changes a row holds, and their event types.
const KINDS: [(&str, &str); 2] = [
    ("status", "session.status_changed"),
    ("phase", "session.phase_changed"),
];

/// Whether `event` may be held in another's row: one stored in clear and unsalted (it holds no
/// personal data), other than a session's first event and an erasure record (each read on its
/// own).
fn holdable(event: &NewEvent) -> bool {
    event.sealed.is_none()
        && event.event.salt.is_none()
        && !read_alone(event.stored.event_type)
        && event.stored.payload.is_object()
        && matches!(event.stored.event_version, "2" | "3")
}

/// The events read on their own, by their row (a session's first event, `sequence = 1`; an
/// erasure record, by its type): never held, and never carrying others.
fn read_alone(event_type: &str) -> bool {
    matches!(event_type, "session.created" | "participant.data.erased")
}

/// The words a status or phase change is held as (`"<status|phase> <from> <to>"`, and its `at`
/// after them when its payload has one), if its payload is its two words and time, none with a
/// space.
fn words(event: &NewEvent) -> Option<String> {
    let kind = match event.event.body {
        EventBody::StatusChanged { .. } => "status",
        EventBody::PhaseChanged { .. } => "phase",
        _ => return None,
    };
    let payload = event.stored.payload.as_object()?;
    let plain = payload.iter().all(|(key, value)| {
        matches!(key.as_str(), "from" | "to" | "at")
            && value
                .as_str()
                .is_some_and(|word| !word.is_empty() && !word.contains(' '))
    });
    let word = |key: &str| payload.get(key).and_then(Value::as_str);
    let mut words = format!("{kind} {} {}", word("from")?, word("to")?);
    if let Some(at) = word("at") {
        words.push(' ');
        words.push_str(at);
    }
    plain.then_some(words)
}

/// The entry a held event is stored as: a change's words, any other event's
/// `[event_type, event_version, payload]`.
fn entry(event: &NewEvent) -> Value {
    match words(event) {
        Some(words) => Value::String(words),
        None => Value::Array(vec![
            event.stored.event_type.into(),
            event.stored.event_version.into(),
            event.stored.payload.clone(),
        ]),
    }
}

/// One row a command writes: the events held before its carrier, the carrier, those after
/// (indexes into the command's events).
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

/// Which rows a command's events are written as: an event in clear joins the row of the sealed
/// event before it in the command, else of the one after it, when it happened at the same time
/// and that row has room; events in clear with neither share rows among themselves; every other
/// event has a row of its own.
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
        // The events in clear right before it that happened at its time lead it; those before them
        // share rows among themselves.
        let at = event.event.at;
        let mut split = waiting.len();
        while split > 0
            && !read_alone(event.stored.event_type)
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

/// Whether `row` can hold event `i` after its events.
fn takes(row: &Planned, events: &[NewEvent], i: usize) -> bool {
    row.carrier.is_some_and(|c| {
        events[c].event.at == events[i].event.at && !read_alone(events[c].stored.event_type)
    }) && (row.held() as u64) < MOST_HELD
}

/// Rows for a run of consecutive events in clear with no other event to join: the first carries those
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

/// Writes one command's events in clear into the rows of its other events where they can go (see
/// the module docs): the carriers get them in their stored payload, the hashes in their hash
/// column, and the row's first sequence and metadata; the events held get no row.
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
    /// The event an entry stands for; one not understood stays as it is under an event type no
    /// event has, so decoding and the chain check report it.
    fn of(entry: &Value) -> Self {
        match entry {
            Value::String(words) => {
                Self::of_words(words).unwrap_or_else(|| Self::not_understood(entry.clone()))
            }
            Value::Array(parts) => match parts.as_slice() {
                [Value::String(event_type), Value::String(version), payload @ Value::Object(_)]
                    if matches!(version.as_str(), "2" | "3") =>
                {
                    Self {
                        event_type: event_type.clone(),
                        event_version: if version == "2" { "2" } else { "3" },
                        payload: payload.clone(),
                    }
                }
                _ => Self::not_understood(entry.clone()),
            },
            _ => Self::not_understood(entry.clone()),
        }
    }

    /// A status or phase change from its words.
    fn of_words(words: &str) -> Option<Self> {
        let words: Vec<&str> = words.split(' ').collect();
        let [kind, from, to, at @ ..] = words.as_slice() else {
            return None;
        };
        let (_, event_type) = KINDS.iter().find(|(k, _)| k == kind)?;
        if at.len() > 1 {
            return None;
        }
        let mut payload = Map::new();
        payload.insert("from".into(), Value::String((*from).into()));
        payload.insert("to".into(), Value::String((*to).into()));
        if let Some(at) = at.first() {
            payload.insert("at".into(), Value::String((*at).into()));
        }
        Some(Self {
            event_type: (*event_type).to_string(),
            event_version: if at.is_empty() { "3" } else { "2" },
            payload: Value::Object(payload),
        })
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

/// One held event, with the sequence and hash its own row would have.
pub type Placed = (u64, Held, Option<Vec<u8>>);

impl Shared {
    /// The held events of the row stored at `first`, each with its sequence — those before the
    /// carrier from `first` on, the carrier's own, then those after it — the one place a shared
    /// row's events are numbered.
    pub fn placed(self, first: u64) -> (Vec<Placed>, u64, Vec<Placed>) {
        let carrier = first + self.leading.len() as u64;
        let number = |from: u64, held: Vec<(Held, Option<Vec<u8>>)>| -> Vec<Placed> {
            (from..)
                .zip(held)
                .map(|(sequence, (held, hash))| (sequence, held, hash))
                .collect()
        };
        (
            number(first, self.leading),
            carrier,
            number(carrier + 1, self.trailing),
        )
    }
}

/// Takes the held events out of a row's `payload`, leaving the carrier's own payload, and
/// splits `hash` likewise (leaving the carrier's); `None` for a row that holds nothing else.
/// `version` is the row's stored `event_version` (its carrier's).
///
/// Entries in a place this code never writes them are read as entries not understood (which
/// every check reports at their events): more than [`MOST_HELD`] in a row, an event before a
/// carrier stored whole (one decodable on its own, which `log::read_between` may start at), and a
/// version 2 form (its own time) on any but the first event before the carrier (a held event is
/// at its carrier's time, and so leaves it out).
pub fn take_shared(
    payload: &mut Value,
    hash: &mut Option<Vec<u8>>,
    (event_type, version): (&str, &str),
) -> Option<Shared> {
    let map = payload.as_object_mut()?;
    if !map.contains_key(LEADING) && !map.contains_key(TRAILING) {
        return None;
    }
    let mut list = |key: &str| -> Vec<Held> {
        match map.remove(key) {
            Some(Value::Array(entries)) => entries.iter().map(Held::of).collect(),
            Some(other) => vec![Held::not_understood(other)],
            None => Vec::new(),
        }
    };
    let (mut leading, mut trailing) = (list(LEADING), list(TRAILING));
    // Anywhere no command writes one: more than a row holds, beside an event read on its own,
    // itself one of those, before a carrier stored whole, or with a time of its own after the
    // first.
    let too_many = (leading.len() + trailing.len()) as u64 > MOST_HELD || read_alone(event_type);
    let carrier_whole = !matches!(version, "3" | ENCRYPTED_COMPACT_VERSION);
    for (i, held) in leading.iter_mut().enumerate() {
        let timed = i > 0 && held.event_version == "2";
        if too_many || carrier_whole || timed || read_alone(&held.event_type) {
            held.refuse();
        }
    }
    for held in trailing.iter_mut() {
        if too_many || held.event_version == "2" || read_alone(&held.event_type) {
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
        let carrier = (row.event_type.as_str(), row.event_version.as_str());
        let Some(shared) = take_shared(&mut row.payload, &mut row.hash, carrier) else {
            out.push(row);
            continue;
        };
        let (leading, carrier, trailing) = shared.placed(row.sequence);
        // The row's metadata is its first event's.
        let mut metadata = Some(std::mem::replace(
            &mut row.metadata,
            Value::Object(Map::new()),
        ));
        for (sequence, held, hash) in leading {
            out.push(held_row(sequence, held, hash, metadata.take()));
        }
        row.sequence = carrier;
        row.metadata = metadata.unwrap_or_else(|| Value::Object(Map::new()));
        out.push(row);
        for (sequence, held, hash) in trailing {
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
    use crate::store::keys::DataKey;

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

    /// One command's events from `first` on, chained after `prev`, as a command writes them:
    /// those holding personal data sealed.
    fn command(first: u64, prev: &str, bodies: Vec<(EventBody, DateTime<Utc>)>) -> Vec<NewEvent> {
        let key = DataKey::from_bytes(&[3; 32]);
        let mut prev = prev.to_string();
        let mut out: Vec<NewEvent> = Vec::new();
        for (i, (body, at)) in bodies.into_iter().enumerate() {
            let personal = body.holds_personal_data();
            let event = SessionEvent::seal(body, at, &prev);
            prev = event.hash.clone();
            let metadata = if i == 0 {
                json!({"actor": "agent"})
            } else {
                json!({})
            };
            let before = out.last().map(|e| e.event.clone());
            let sequence = first + i as u64;
            let key = personal.then_some(&key);
            out.push(NewEvent::new(
                "s",
                sequence,
                event,
                before.as_ref(),
                metadata,
                key,
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

    /// How many events each row holds beside its own, by its sequence.
    fn shape(rows: &[Row]) -> Vec<(u64, usize)> {
        rows.iter()
            .map(|r| {
                let held = [LEADING, TRAILING]
                    .iter()
                    .filter_map(|k| r.payload.get(*k)?.as_array().map(Vec::len))
                    .sum();
                (r.sequence, held)
            })
            .collect()
    }

    /// A run's command: a claim and the changes around an utterance, all at one time.
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
    fn events_in_clear_share_the_row_of_their_commands_sealed_event_and_read_back_as_their_own() {
        let at = Utc::now();
        let alone = command(5, GENESIS_HASH, run(at));
        let mut shared = alone.clone();
        share_rows(&mut shared);
        let rows = written(&shared);
        // Everything in clear is held by the sealed utterance: five before it, one after.
        assert_eq!(shape(&rows), vec![(5, 6)]);
        assert_eq!(rows[0].event_type, "agent.message.completed");
        let at_text = json!(at).as_str().unwrap().to_string();
        let leading = rows[0].payload[LEADING].as_array().unwrap();
        assert_eq!(
            leading[0],
            json!(format!("status waiting_for_user active {at_text}"))
        );
        assert_eq!(leading[1], json!("phase OPENING EXTRACT"));
        assert_eq!(leading[2][0], json!("agent.message.started"));
        assert_eq!(leading[2][1], json!("3"));
        assert_eq!(
            rows[0].payload[TRAILING],
            json!(["status active waiting_for_user"])
        );
        assert_eq!(rows[0].metadata, json!({"actor": "agent"}));
        assert_eq!(rows[0].hash.as_ref().map(Vec::len), Some(7 * 32));
        assert!(rows[0].sealed.is_some());
        // Read back, each is the row it would have had on its own (the sealed one included:
        // its sequence, which its sealing is bound to, is its own again).
        assert_eq!(summary(&expand(rows)), summary(&written(&alone)));
        // In memory, every event is there with its own sequence.
        let sequences: Vec<u64> = shared.iter().map(|e| e.sequence).collect();
        assert_eq!(sequences, (5..12).collect::<Vec<_>>());
    }

    #[test]
    fn an_event_at_another_time_or_past_the_rows_room_is_not_held() {
        use Phase::*;
        let at = Utc::now();
        let later = at + Duration::milliseconds(1);
        let mut bodies = vec![(started(), at)];
        let phases = [
            Opening,
            Extract,
            EvaluateCoverage,
            NextTopicOrProbe,
            AskOrProbe,
        ];
        for i in 0..8 {
            bodies.push((phase(phases[i % 4], phases[i % 4 + 1]), later));
        }
        bodies.push((said("Next?"), at));
        let mut events = command(1, GENESIS_HASH, bodies);
        let alone = events.clone();
        share_rows(&mut events);
        let rows = written(&events);
        // The claim is at another time than the changes after it, and they than the utterance:
        // the first change holds the next six (the most a row holds), the eighth has its own.
        assert_eq!(shape(&rows), vec![(1, 0), (2, 6), (9, 0), (10, 0)]);
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
        // An entry no event is, and a hash column cut short.
        rows[0].payload[LEADING][1] = json!("phase OPENING");
        rows[0].hash.as_mut().unwrap().truncate(32);
        let expanded = expand(rows);
        assert_eq!(expanded[1].event_type, NOT_UNDERSTOOD);
        assert_eq!(expanded[5].hash.as_ref().map(Vec::len), Some(32));
        assert_eq!(expanded[6].hash, None);
        let breaks =
            interview_session::chain::verify_chain(expanded.iter().map(Row::chain)).unwrap_err();
        let at: Vec<usize> = breaks.iter().map(|b| b.sequence).collect();
        assert!(at.contains(&2) && at.contains(&7), "{breaks:?}");
    }

    #[test]
    fn entries_where_no_command_writes_them_read_as_not_understood() {
        let types = |held: &Shared| -> Vec<String> {
            held.leading
                .iter()
                .chain(&held.trailing)
                .map(|(h, _)| h.event_type.clone())
                .collect()
        };
        let status = "status active waiting_for_user";
        let timed = "status active waiting_for_user 2026-12-05T10:00:00Z";
        let claim = json!(["agent.message.started", "3", {"message_id": "m", "run_id": "r"}]);
        let erasure = json!(["participant.data.erased", "3", {}]);
        let decision = "agent.decision.recorded";
        let cases = [
            // Before a carrier stored whole (decodable on its own): refused.
            (
                json!({LEADING: [status]}),
                decision,
                "2",
                vec![NOT_UNDERSTOOD],
            ),
            (
                json!({LEADING: [status, claim]}),
                decision,
                "3",
                vec!["session.status_changed", "agent.message.started"],
            ),
            // A time on an event after its carrier, or on a second one before it.
            (
                json!({TRAILING: [timed]}),
                decision,
                "3",
                vec![NOT_UNDERSTOOD],
            ),
            (
                json!({LEADING: [timed, timed]}),
                decision,
                "encrypted-3",
                vec!["session.status_changed", NOT_UNDERSTOOD],
            ),
            // More than a row holds.
            (
                json!({TRAILING: vec![status; 7]}),
                decision,
                "2",
                vec![NOT_UNDERSTOOD; 7],
            ),
            // Not an entry this code writes.
            (
                json!({TRAILING: [["agent.message.started", "4", {}], 5, ["x", "3"]]}),
                decision,
                "3",
                vec![NOT_UNDERSTOOD; 3],
            ),
            (
                json!({TRAILING: status}),
                decision,
                "3",
                vec![NOT_UNDERSTOOD],
            ),
            // Beside, or as, an event read on its own.
            (
                json!({TRAILING: [status]}),
                "session.created",
                "2",
                vec![NOT_UNDERSTOOD],
            ),
            (
                json!({TRAILING: [erasure]}),
                decision,
                "3",
                vec![NOT_UNDERSTOOD],
            ),
        ];
        for (mut payload, carrier, version, expected) in cases {
            let mut hash = None;
            let held = take_shared(&mut payload, &mut hash, (carrier, version)).unwrap();
            assert_eq!(types(&held), expected, "{version}");
            assert_eq!(payload, json!({}));
        }
    }

    #[test]
    fn a_claim_and_a_widget_decode_and_verify_from_shared_rows_as_from_rows_of_their_own() {
        let at = Utc::now();
        let interaction: interview_session::interaction::InteractionToolCall =
            serde_json::from_value(json!({
                "interaction_id": "i1", "tool_call_id": "tc_i1", "schema_version": "1",
                "research_intent": "satisfaction", "prompt": "How satisfied are you?",
                "type": "likert", "scale": 5, "labels": ["a", "b", "c", "d", "e"],
                "value_schema": {"type": "integer", "minimum": 1, "maximum": 5}
            }))
            .unwrap();
        let bodies = vec![
            (started(), at),
            (said("One more question."), at),
            (
                EventBody::ToolCallCreated {
                    tool_call_id: "tc_i1".into(),
                    tool_name: "render_interaction".into(),
                    tool_input: serde_json::to_value(&interaction).unwrap(),
                },
                at,
            ),
            (
                EventBody::InteractionRendered {
                    interaction: Box::new(interaction),
                },
                at,
            ),
            (
                status(SessionStatus::Active, SessionStatus::WaitingForTool),
                at,
            ),
        ];
        let mut events = command(1, GENESIS_HASH, bodies);
        let alone = events.clone();
        share_rows(&mut events);
        let rows = written(&events);
        // The sealed utterance holds the claim before it (version 2: the command's first event);
        // the widget's texts are sealed, so its tool call and the rendered widget keep their rows,
        // and the status change joins the second.
        assert_eq!(shape(&rows), vec![(1, 1), (3, 0), (4, 1)]);
        assert_eq!(
            rows[0].payload[LEADING][0][0],
            json!("agent.message.started")
        );
        assert_eq!(rows[0].payload[LEADING][0][1], json!("2"));
        let expanded = expand(rows);
        assert_eq!(summary(&expanded), summary(&written(&alone)));
        // Opened, they decode to the events written, and the chain verifies.
        let key = DataKey::from_bytes(&[3; 32]);
        let mut opened = expanded.clone();
        for row in opened.iter_mut().filter(|r| r.sealed.is_some()) {
            row.open(&key, "s").unwrap();
        }
        let decoded = crate::store::log::decode_rows(
            "s",
            &opened,
            GENESIS_HASH.into(),
            &crate::store::log::KeptDocuments,
        )
        .unwrap();
        let written_events: Vec<_> = alone
            .iter()
            .map(|e| (e.sequence, e.event.clone()))
            .collect();
        assert_eq!(decoded, written_events);
        interview_session::chain::verify_chain(opened.iter().map(Row::chain)).unwrap();
    }
}
