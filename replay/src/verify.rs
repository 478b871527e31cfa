//! Verification: the hash chain and sequence (the stored `event_version` is part of the hashed
//! text; version 3 hashes as the version 2 payload it stands for), every event decoding to its stored type and a known version, the aggregate's rules
//! re-checked over the stream, and (against a database) every column of the stored read models
//! compared with the rows rebuilt in memory. Event metadata (`actor`, `request_id`) is not
//! covered by the hash: it is reported as unaudited.

use interview_projections::columns::{self, Cell, Kind, StoredRow};
use interview_projections::views::{NewRows, SessionStateView};
use interview_projections::Db;
use interview_session::aggregate::check_stream;
use interview_session::chain::verify_chain;
use interview_session::codec::{self, DecodeError};
use interview_session::hash::GENESIS_HASH;
use interview_session::SessionEvent;

use crate::source::StoredEvent;

/// The decoded events (through the one decode point, every known version), or the problems that
/// stop decoding.
pub fn decode(events: &[StoredEvent]) -> Result<Vec<SessionEvent>, Vec<String>> {
    let mut problems = Vec::new();
    let mut decoded = Vec::new();
    let documents: std::collections::HashMap<String, serde_json::Value> =
        events.iter().flat_map(|e| e.documents.clone()).collect();
    let mut prev = GENESIS_HASH.to_string();
    let mut before = codec::compact::Before::default();
    for e in events {
        let hash = e.hash_bytes();
        match codec::decode_after(e.stored(hash.as_deref()), &prev, &before, &documents) {
            Ok(d) => {
                prev = d.hash.clone();
                before = codec::compact::Before::of(&d);
                decoded.push(d);
            }
            Err(DecodeError::UnknownVersion(version)) => problems.push(format!(
                "event {}: version {version:?} is not one this log's events are written in (known: {})",
                e.sequence,
                codec::KNOWN_VERSIONS.join(", ")
            )),
            Err(DecodeError::TypeMismatch { stored, payload }) => problems.push(format!(
                "event {}: stored as {stored} but its payload is {payload}",
                e.sequence
            )),
            Err(err) => problems.push(format!("event {}: does not decode: {err}", e.sequence)),
        }
    }
    if problems.is_empty() {
        Ok(decoded)
    } else {
        Err(problems)
    }
}

/// Every problem found in a stream (empty when it verifies), and its head hash.
pub fn verify_stream(events: &[StoredEvent]) -> (Vec<String>, String) {
    let hashes: Vec<Option<Vec<u8>>> = events.iter().map(StoredEvent::hash_bytes).collect();
    let chain = verify_chain(events.iter().zip(&hashes).map(|(e, hash)| {
        (
            e.sequence as usize,
            e.event_type.as_str(),
            e.event_version.as_str(),
            &e.payload,
            hash.as_deref(),
        )
    }));
    let mut problems = Vec::new();
    let head = match chain {
        Ok(head) => head,
        Err(breaks) => {
            problems.extend(
                breaks
                    .into_iter()
                    .map(|b| format!("event {}: {}", b.sequence, b.problem)),
            );
            String::new()
        }
    };
    match decode(events) {
        Ok(decoded) if problems.is_empty() => {
            problems.extend(check_stream(&decoded));
            problems.extend(still_personal(events, &decoded));
        }
        Ok(_) => {}
        Err(decode_problems) => problems.extend(decode_problems),
    }
    (problems, head)
}

/// Events stored as erased that still hold something erasure takes away (their erased form is
/// not what they say): the digest proves they did not change since, not that they were erased.
fn still_personal(events: &[StoredEvent], decoded: &[SessionEvent]) -> Vec<String> {
    events
        .iter()
        .zip(decoded)
        .filter(|(stored, event)| {
            stored.event_version == codec::erased::VERSION
                && event.body.without_personal_data() != event.body
        })
        .map(|(stored, _)| {
            format!(
                "event {}: stored as erased but it still holds content erasure removes",
                stored.sequence
            )
        })
        .collect()
}

/// The read models folded in memory from the stream.
pub fn fold_views(events: &[StoredEvent], decoded: &[SessionEvent]) -> (SessionStateView, NewRows) {
    let mut view = SessionStateView::default();
    let mut rows = NewRows::default();
    for (stored, event) in events.iter().zip(decoded) {
        view.apply(stored.sequence, event, &mut rows);
    }
    (view, rows)
}

/// One read model's expected rows (rebuilt from the log) and how to read its stored ones.
struct Table<'a> {
    name: &'static str,
    columns: &'a [&'static str],
    kinds: &'a [Kind],
    /// How many leading columns identify a row (`session_id`, and `seq` where there is one).
    key: usize,
    order_by: &'static str,
    expected: Vec<Vec<Cell>>,
}

/// Differences between the stored read models and the ones rebuilt from the log, column by
/// column: `session_state`, `transcript`, `results` and the session's study
/// overview contribution, `session_overview` (the rules are in `interview_projections::columns`).
/// Whether each study's counts are the sum of its sessions' is checked by `verify --all`
/// (`interview_projections::overview::drift`).
// Long by design: mostly a table of data: one entry per read-model table with its columns, key and
// the rows the log gives; the loop that compares them is short.
pub async fn compare_views(
    db: &Db,
    session_id: &str,
    events: &[StoredEvent],
) -> Result<Vec<String>, String> {
    let Ok(decoded) = decode(events) else {
        return Ok(Vec::new());
    };
    let (rebuilt, rows) = fold_views(events, &decoded);
    let session = interview_session::Session::from_events(decoded.iter().cloned());
    let overview = interview_projections::overview::NewContribution::of(session_id, &session);
    let tables = [
        Table {
            name: "session_state",
            columns: &columns::STATE_COLUMNS,
            kinds: &columns::STATE_KINDS,
            key: 1,
            order_by: "session_id",
            expected: vec![columns::state_cells(&rebuilt).to_vec()],
        },
        Table {
            name: "transcript",
            columns: &columns::TRANSCRIPT_COLUMNS,
            kinds: &columns::TRANSCRIPT_KINDS,
            key: 2,
            order_by: "seq",
            expected: rows
                .transcript
                .iter()
                .map(|t| columns::transcript_cells(session_id, t).to_vec())
                .collect(),
        },
        Table {
            name: "session_fields",
            columns: &columns::FIELD_COLUMNS,
            kinds: &columns::FIELD_KINDS,
            key: 2,
            order_by: "field_id",
            expected: {
                let mut fields: Vec<_> = rebuilt.extracted_fields.iter().collect();
                fields.sort_by(|a, b| a.0.cmp(b.0));
                fields
                    .into_iter()
                    .map(|(field, value)| columns::field_cells(session_id, field, value).to_vec())
                    .collect()
            },
        },
        Table {
            name: "results",
            columns: &columns::RESULT_COLUMNS,
            kinds: &columns::RESULT_KINDS,
            key: 1,
            order_by: "session_id",
            expected: columns::result_cells(&rebuilt)
                .map(|r| vec![r.to_vec()])
                .unwrap_or_default(),
        },
        Table {
            name: "session_overview",
            columns: &columns::OVERVIEW_COLUMNS,
            kinds: &columns::OVERVIEW_KINDS,
            key: 1,
            order_by: "session_id",
            expected: overview.iter().map(|m| m.cells().to_vec()).collect(),
        },
    ];
    let mut problems = Vec::new();
    for table in tables {
        let stored = columns::stored_rows(
            db,
            table.name,
            table.columns,
            table.kinds,
            session_id,
            table.order_by,
        )
        .await
        .map_err(|e| e.to_string())?;
        compare_table(&table, stored, &mut problems);
    }
    Ok(problems)
}

fn row_key(table: &Table, cells: &[String]) -> String {
    table.columns[..table.key]
        .iter()
        .zip(cells)
        .skip(1) // every row is this session's
        .map(|(c, v)| format!("{c}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

// Long by design: two passes over one table sharing the same canonical rows and keys: each row the
// log gives, missing or compared column by column, then each stored row the log does not give;
// split, the keyed maps would be passed between them.
fn compare_table(table: &Table, stored: Vec<StoredRow>, problems: &mut Vec<String>) {
    let shown = |row: &[Result<Cell, String>]| -> Vec<String> {
        row.iter()
            .map(|c| match c {
                Ok(cell) => cell.canonical(),
                Err(e) => format!("<unreadable: {e}>"),
            })
            .collect()
    };
    let expected: Vec<Vec<String>> = table
        .expected
        .iter()
        .map(|r| r.iter().map(Cell::canonical).collect())
        .collect();
    let stored: Vec<Vec<String>> = stored.iter().map(|r| shown(r)).collect();
    let key_of = |r: &Vec<String>| r[..table.key].to_vec();
    let stored_by_key: std::collections::BTreeMap<Vec<String>, &Vec<String>> =
        stored.iter().map(|r| (key_of(r), r)).collect();
    let expected_keys: std::collections::BTreeSet<Vec<String>> =
        expected.iter().map(key_of).collect();
    for row in &expected {
        let where_ = match row_key(table, row) {
            k if k.is_empty() => table.name.to_string(),
            k => format!("{} row {k}", table.name),
        };
        let Some(found) = stored_by_key.get(&key_of(row)) else {
            problems.push(format!(
                "{where_}: missing from the store (the log gives it)"
            ));
            continue;
        };
        for (i, ((column, want), have)) in
            table.columns.iter().zip(row).zip(found.iter()).enumerate()
        {
            if want == have {
                continue;
            }
            let json = |text: &str| serde_json::from_str::<serde_json::Value>(text).ok();
            let at = match (table.kinds[i], json(want), json(have)) {
                (Kind::Json, Some(w), Some(h)) => first_difference(&w, &h, String::new()),
                _ => None,
            };
            problems.push(match at {
                Some((path, w, h)) => format!(
                    "{where_}: column {column} differs at {}: stored {} but the log gives {}",
                    if path.is_empty() { "the top" } else { &path },
                    clip(&h),
                    clip(&w)
                ),
                None => format!(
                    "{where_}: column {column} is stored as {} but the log gives {}",
                    clip(have),
                    clip(want)
                ),
            });
        }
    }
    for row in &stored {
        if !expected_keys.contains(&key_of(row)) {
            let k = row_key(table, row);
            problems.push(format!(
                "{} row {}: stored, but the log gives no such row",
                table.name,
                if k.is_empty() {
                    "for this session".to_string()
                } else {
                    k
                }
            ));
        }
    }
}

/// Where two JSON values first differ: the path (`.turn_count`, `.fields.x[2]`) and both values.
fn first_difference(
    want: &serde_json::Value,
    have: &serde_json::Value,
    path: String,
) -> Option<(String, String, String)> {
    use serde_json::Value;
    match (want, have) {
        (Value::Object(w), Value::Object(h)) => {
            let keys: std::collections::BTreeSet<&String> = w.keys().chain(h.keys()).collect();
            keys.into_iter().find_map(|k| {
                let (a, b) = (
                    w.get(k).unwrap_or(&Value::Null),
                    h.get(k).unwrap_or(&Value::Null),
                );
                if w.contains_key(k) != h.contains_key(k) {
                    return Some((format!("{path}.{k}"), a.to_string(), b.to_string()));
                }
                first_difference(a, b, format!("{path}.{k}"))
            })
        }
        (Value::Array(w), Value::Array(h)) if w.len() == h.len() => w
            .iter()
            .zip(h)
            .enumerate()
            .find_map(|(i, (a, b))| first_difference(a, b, format!("{path}[{i}]"))),
        (a, b) if a != b => Some((path, a.to_string(), b.to_string())),
        _ => None,
    }
}

/// A value short enough for a report line.
fn clip(value: &str) -> String {
    if value.chars().count() <= 120 {
        return value.to_string();
    }
    let mut cut: String = value.chars().take(117).collect();
    cut.push_str("...");
    cut
}

/// What `verify` can still prove of a session whose participant's data was erased, and what was
/// erased (when, by whom, why); nothing for any other session.
pub fn erasure_note(events: &[StoredEvent]) -> Vec<String> {
    let Some(erasure) = events
        .iter()
        .find(|e| e.event_type == "participant.data.erased")
    else {
        return Vec::new();
    };
    let p = &erasure.payload;
    let n = p["erased_events"].as_u64().unwrap_or(0);
    let reason = p["reason"]
        .as_str()
        .map(|r| format!(", reason {r:?}"))
        .unwrap_or_default();
    let verified = if p["content_verified"].as_bool() == Some(true) {
        "verified"
    } else {
        "did NOT verify"
    };
    vec![
        format!(
            "erased:   the participant's data, at {} by the {}{reason} (event {}): events 1-{n} hold \
             none of the words, answers, panel id, summaries, extracted values and quotes erasure removes",
            p["at"].as_str().unwrap_or("?"),
            p["by"].as_str().unwrap_or("?"),
            erasure.sequence
        ),
        format!(
            "proven:   events 1-{n} are the ones erased, unchanged since (their digest, under the \
             head above), in order, with their types, times, statuses, phases, decisions' actions, \
             ids, counts and the rules; their chain over the whole content {verified} just before \
             the erasure"
        ),
    ]
}

/// Whether the erased events of `stored` are the events of `bundle` — the session exported
/// before its erasure — with their content erased: the bundle's chain must verify, and each of
/// its events, put in its erased form (`codec::erased::encode`), must be the row stored at its
/// place, hash included. The line that links the two chains, or every problem.
pub fn link_to_bundle(
    stored: &[StoredEvent],
    bundle: &[StoredEvent],
) -> Result<String, Vec<String>> {
    let (problems, bundle_head) = verify_stream(bundle);
    if !problems.is_empty() {
        return Err(problems
            .into_iter()
            .map(|p| format!("the bundle: {p}"))
            .collect());
    }
    let decoded = decode(bundle)?;
    let erased = stored
        .iter()
        .take_while(|e| e.event_version == codec::erased::VERSION)
        .count();
    if decoded.len() > erased {
        return Err(vec![format!(
            "the bundle holds {} events but only {erased} are stored erased",
            decoded.len()
        )]);
    }
    let canonical = |v: &serde_json::Value| interview_session::hash::canonical_json(v);
    let mismatched: Vec<String> = decoded
        .iter()
        .zip(stored)
        .filter(|(event, row)| {
            let expected = codec::erased::encode(event);
            row.event_type != expected.event_type
                || canonical(&row.payload) != canonical(&expected.payload)
                || row.hash_bytes().as_deref() != Some(&expected.hash[..])
        })
        .map(|(_, row)| {
            format!(
                "event {}: is not the bundle's event with its content erased",
                row.sequence
            )
        })
        .collect();
    if !mismatched.is_empty() {
        return Err(mismatched);
    }
    Ok(format!(
        "linked:   events 1-{} are the bundle's (head {bundle_head}), their content erased",
        decoded.len()
    ))
}
