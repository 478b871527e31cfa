//! Bulk rebuild: many sessions' views dropped and refolded from the log at once.
//!
//! The per-session path ([`Projector::rebuild`]) costs two transactions and a query per row. This
//! one reads a batch of sessions' events in one ordered query, folds each session in memory with
//! the same fold, and writes the batch's views with multi-row inserts in one transaction — so
//! the cost is per batch, not per session or per row. Views written this way are identical to
//! the live ones (the fold is the same code).

use interview_session::codec;
use interview_session::hash::GENESIS_HASH;
use interview_session::AGGREGATE_TYPE;

use crate::store::log::KeptDocuments;
use sqlx::{QueryBuilder, Row};

use crate::commit::projector::{ProjectionError, Projector};
use crate::on_db;
use crate::read_side::views::{NewRows, SessionStateView, TranscriptRow};

/// Sessions per batch (one read, one write transaction).
pub const BATCH: usize = 500;
/// Rows per multi-row INSERT: under SQLite's 32,766 and PostgreSQL's 65,535 parameters.
const ROWS_PER_INSERT: usize = 1000;

/// A stored event with its payload as JSON text.
struct TextRow {
    session_id: String,
    sequence: u64,
    event_type: String,
    event_version: String,
    payload: String,
    hash: Option<Vec<u8>>,
    sealed: Option<Vec<u8>>,
}

/// The documents the batch's `session.created` events name, in a map of the batch's own (a
/// batch may name more than the process-wide cache keeps).
async fn load_documents(
    db: &crate::store::db::Db,
    rows: &[TextRow],
) -> Result<std::collections::HashMap<String, serde_json::Value>, ProjectionError> {
    let mut missing = Vec::new();
    for row in rows.iter().filter(|r| r.event_type == "session.created") {
        let Ok(payload) = serde_json::from_str::<serde_json::Value>(&row.payload) else {
            continue;
        };
        missing.extend(interview_session::codec::documents_needed(
            interview_session::codec::Stored {
                event_type: &row.event_type,
                event_version: &row.event_version,
                payload: &payload,
                hash: None,
            },
        ));
    }
    missing.sort();
    missing.dedup();
    let mut documents = std::collections::HashMap::new();
    use interview_session::codec::Documents;
    for id in missing {
        if KeptDocuments.document(&id).is_none() {
            crate::store::log::load_documents(db, std::slice::from_ref(&id)).await?;
        }
        if let Some(document) = KeptDocuments.document(&id) {
            documents.insert(id, document);
        }
    }
    Ok(documents)
}

/// One session's rebuilt views.
struct RebuiltSession {
    session_id: String,
    view: SessionStateView,
    rows: NewRows,
    /// The session itself, for its study overview contribution.
    session: interview_session::Session,
}

impl Projector {
    /// Rebuilds the views of `ids` in batches of [`BATCH`]; `progress(sessions, events)` is
    /// called after each batch. Returns the number of events folded.
    #[tracing::instrument(skip(self, ids, progress), fields(sessions = ids.len()), err)]
    pub async fn rebuild_many(
        &self,
        ids: &[String],
        progress: impl FnMut(usize, u64),
    ) -> Result<u64, ProjectionError> {
        self.rebuild_in_batches(ids, BATCH, progress).await
    }

    /// [`Projector::rebuild_many`] with `batch` sessions per batch.
    pub async fn rebuild_in_batches(
        &self,
        ids: &[String],
        batch: usize,
        mut progress: impl FnMut(usize, u64),
    ) -> Result<u64, ProjectionError> {
        // A pipeline: while one batch is written, the next is read and folded (on two cores,
        // decoding overlaps the database's own work).
        let mut total = 0;
        let mut batches = ids.chunks(batch.max(1));
        let Some(first) = batches.next() else {
            return Ok(0);
        };
        let mut current = (first, self.fold_batch(first).await?);
        for next in batches {
            let (ids, (folded, events)) = &current;
            let (written, read) =
                tokio::join!(self.write_batch(ids, folded), self.fold_batch(next));
            written?;
            total += events;
            progress(ids.len(), *events);
            current = (next, read?);
        }
        let (ids, (folded, events)) = &current;
        self.write_batch(ids, folded).await?;
        total += events;
        progress(ids.len(), *events);
        Ok(total)
    }

    /// Reads the batch's events in one query and folds each session.
    // Long by design: the steps of one batch in order: one query for all its sessions' events, the
    // sealed rows opened, each document checked once, then one pass over the rows that starts a new
    // session's fold at each change of session id; split, the previous hash and the compact codec's
    // memory of the event before, which the pass carries from row to row and resets per session,
    // would travel in arguments.
    async fn fold_batch(
        &self,
        ids: &[String],
    ) -> Result<(Vec<RebuiltSession>, u64), ProjectionError> {
        let rows = on_db!(read(self.db()), |pool| {
            // The payload as text, decoded straight into events (no JSON tree in between).
            let mut q = QueryBuilder::new(if self.db().is_postgres() {
                "SELECT aggregate_id, sequence, event_type, event_version, payload::text AS payload, hash, sealed \
                 FROM events WHERE aggregate_type = "
            } else {
                "SELECT aggregate_id, sequence, event_type, event_version, payload, hash, sealed \
                 FROM events WHERE aggregate_type = "
            });
            q.push_bind(AGGREGATE_TYPE).push(" AND aggregate_id IN (");
            let mut list = q.separated(", ");
            for id in ids {
                list.push_bind(id.as_str());
            }
            q.push(") ORDER BY aggregate_id, sequence");
            let rows = q.build().fetch_all(pool).await?;
            rows.iter()
                .map(|r| {
                    Ok(TextRow {
                        session_id: r.try_get("aggregate_id")?,
                        sequence: r.try_get::<i64, _>("sequence")? as u64,
                        event_type: r.try_get("event_type")?,
                        event_version: r.try_get("event_version")?,
                        payload: r.try_get("payload")?,
                        hash: r.try_get("hash")?,
                        sealed: r.try_get("sealed")?,
                    })
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()?
        });
        let mut rows = expand_text_rows(rows);
        open_text_rows(self.db(), &mut rows).await?;
        let events = rows.len() as u64;
        // Each document is checked against its content id once per batch, not per session.
        let documents = codec::CheckedOnce::new(load_documents(self.db(), &rows).await?);
        let mut folded: Vec<RebuiltSession> = Vec::with_capacity(ids.len());
        let mut prev = GENESIS_HASH.to_string();
        let mut before = codec::compact::Before::default();
        for row in rows {
            if folded.last().is_none_or(|f| f.session_id != row.session_id) {
                prev = GENESIS_HASH.to_string();
                before = codec::compact::Before::default();
                folded.push(RebuiltSession {
                    session_id: row.session_id.clone(),
                    view: SessionStateView::default(),
                    rows: NewRows::default(),
                    session: interview_session::Session::default(),
                });
            }
            let stored = (
                row.event_type.as_str(),
                row.event_version.as_str(),
                row.payload.as_str(),
                row.hash.as_deref(),
            );
            let event =
                codec::decode_text_after(stored, &prev, &before, &documents).map_err(|source| {
                    ProjectionError::Decode {
                        session_id: row.session_id.clone(),
                        sequence: row.sequence,
                        source,
                    }
                })?;
            let f = folded.last_mut().expect("just pushed");
            f.view.apply(row.sequence, &event, &mut f.rows);
            prev = event.hash.clone();
            before = codec::compact::Before::of(&event);
            cqrs_es::Aggregate::apply(&mut f.session, event);
        }
        Ok((folded, events))
    }

    /// Replaces the batch's views in one transaction.
    async fn write_batch(
        &self,
        ids: &[String],
        folded: &[RebuiltSession],
    ) -> Result<(), ProjectionError> {
        on_db!(write(self.db()), |pool| {
            let mut tx = pool.begin().await?;
            delete_views(&mut tx, ids).await?;
            for chunk in folded.chunks(ROWS_PER_INSERT / 2) {
                let mut q = QueryBuilder::new(format!(
                    "INSERT INTO session_state ({}) ",
                    crate::read_side::columns::STATE_COLUMNS.join(", ")
                ));
                q.push_values(chunk, |mut b, f| {
                    use crate::read_side::columns::Cell;
                    for cell in crate::read_side::columns::state_cells(&f.view) {
                        match cell {
                            Cell::Text(v) => b.push_bind(v),
                            Cell::Int(v) => b.push_bind(v),
                            Cell::Bool(v) => b.push_bind(v),
                            Cell::Json(v) => b.push_bind(v),
                            Cell::Time(v) => b.push_bind(v),
                            Cell::Bytes(v) => b.push_bind(v),
                        };
                    }
                });
                q.build().execute(&mut *tx).await?;
            }
            let transcript: Vec<(&str, &TranscriptRow)> = folded
                .iter()
                .flat_map(|f| {
                    f.rows
                        .transcript
                        .iter()
                        .map(move |t| (f.session_id.as_str(), t))
                })
                .collect();
            crate::commit::view_writes::insert_transcript(&mut tx, &transcript).await?;
            let fields: Vec<_> = folded
                .iter()
                .flat_map(|f| crate::commit::view_writes::changed_fields(&f.session_id, &f.rows))
                .collect();
            crate::commit::view_writes::upsert_fields(&mut tx, &fields).await?;
            crate::commit::view_writes::upsert_results(&mut tx, folded.iter().map(|f| &f.view))
                .await?;
            let moved: Vec<_> = folded
                .iter()
                .filter_map(|f| {
                    crate::read_side::overview::NewContribution::of(&f.session_id, &f.session)
                })
                .collect();
            crate::read_side::overview::write(&mut tx, &moved).await?;
            tx.commit().await?;
        });
        Ok(())
    }
}

/// The rows as if each of their events had one of its own (`shared_rows::expand`): only a row
/// whose text names a shared row's key is parsed.
fn expand_text_rows(rows: Vec<TextRow>) -> Vec<TextRow> {
    use crate::store::shared_rows::{take_shared, LEADING, TRAILING};
    let names_key = |text: &str| text.contains(LEADING) || text.contains(TRAILING);
    if !rows.iter().any(|r| names_key(&r.payload)) {
        return rows;
    }
    let mut out = Vec::with_capacity(rows.len() + rows.len() / 2);
    for mut row in rows {
        let parsed = names_key(&row.payload)
            .then(|| serde_json::from_str::<serde_json::Value>(&row.payload).ok())
            .flatten();
        let Some(mut payload) = parsed else {
            out.push(row);
            continue;
        };
        let carrier = (row.event_type.as_str(), row.event_version.as_str());
        let Some(shared) = take_shared(&mut payload, &mut row.hash, carrier) else {
            out.push(row);
            continue;
        };
        row.payload = payload.to_string();
        let (leading, carrier, trailing) = shared.placed(row.sequence);
        let held = |(sequence, held, hash): crate::store::shared_rows::Placed| TextRow {
            session_id: row.session_id.clone(),
            sequence,
            event_type: held.event_type,
            event_version: held.event_version.to_string(),
            payload: held.payload.to_string(),
            hash,
            sealed: None,
        };
        out.extend(leading.into_iter().map(held));
        let trailing: Vec<TextRow> = trailing.into_iter().map(held).collect();
        row.sequence = carrier;
        out.push(row);
        out.extend(trailing);
    }
    out
}

/// Opens a batch's encrypted rows (`encrypted.rs`) with their sessions' keys, read in one query.
async fn open_text_rows(
    db: &crate::store::db::Db,
    rows: &mut [TextRow],
) -> Result<(), ProjectionError> {
    use crate::store::encrypted::sealed_version;
    let mut sessions: Vec<&str> = rows
        .iter()
        .filter(|r| sealed_version(&r.event_version).is_some())
        .map(|r| r.session_id.as_str())
        .collect();
    if sessions.is_empty() {
        return Ok(());
    }
    sessions.dedup();
    let keys = crate::store::keys::for_sessions(db, &sessions).await?;
    for row in rows.iter_mut() {
        let Some(key) = keys.get(&row.session_id) else {
            continue;
        };
        let Some(version) = sealed_version(&row.event_version) else {
            continue;
        };
        // One that does not open stays as stored, and fails to decode saying so.
        let at = (
            row.session_id.as_str(),
            row.sequence,
            row.event_type.as_str(),
        );
        let opened = serde_json::from_str::<serde_json::Value>(&row.payload)
            .map_err(interview_session::codec::DecodeError::Malformed)
            .and_then(|stored| {
                let sealed = row.sealed.as_deref().unwrap_or_default();
                crate::store::encrypted::open(&row.event_version, &stored, sealed, key, at)
            });
        if let Ok(payload) = opened {
            row.payload = payload.to_string();
            row.event_version = version.to_string();
        }
    }
    Ok(())
}

/// Deletes the views of `ids` (the batch is written anew in the same transaction).
async fn delete_views<DB: crate::store::backend::Backend>(
    tx: &mut sqlx::Transaction<'_, DB>,
    ids: &[String],
) -> Result<(), sqlx::Error> {
    use crate::store::backend::Statement;
    for table in ["transcript", "session_fields", "results", "session_state"] {
        let sql = format!(
            "DELETE FROM {table} WHERE session_id IN ({})",
            crate::store::statements::placeholders::<DB>(ids.len(), 1)
        );
        let mut q = sqlx::query(&sql);
        for id in ids {
            q = q.arg(id.clone());
        }
        q.execute_in(tx).await?;
    }
    Ok(())
}
