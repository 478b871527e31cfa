//! The projector: brings a session's views up to its event stream.
//!
//! For one session it locks the view row, reads the events after the view's `last_seq` in
//! sequence order, folds them in memory and writes `session_state`, `transcript` and `results`
//! in the same transaction — the transaction that appended the
//! events, when a command goes through [`Projector::append_and_project`]. Running it twice, or
//! concurrently, or after views were dropped, gives the same views.

use cqrs_es::persist::PersistenceError;
use hashlink::LruCache;
use interview_session::codec::DecodeError;
use interview_session::hash::GENESIS_HASH;
use interview_session::AGGREGATE_TYPE;
use serde_json::Value;
use sqlx::Row;
use std::sync::{Arc, Mutex};

use crate::db::Db;
use crate::group_commit::{self, GroupCommit};
use crate::log::{self, NewEvent};
use crate::on_db;
use crate::overview::Moved;
use crate::view_writes;
use crate::views::{NewRows, SessionStateView};

/// The PostgreSQL NOTIFY channel announcing `<session id> <last sequence>` after each projection.
pub const NOTIFY_CHANNEL: &str = "interview_session_events";

#[derive(Debug, thiserror::Error)]
pub enum ProjectionError {
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    #[error("event {sequence} of session {session_id} does not decode: {source}")]
    Decode {
        session_id: String,
        sequence: u64,
        source: DecodeError,
    },
    #[error("the events of session {session_id} are not the ones its erasure covers")]
    ErasureMismatch { session_id: String },
    #[error("data keys: {0}")]
    Keys(#[from] crate::keys::KeyError),
}

#[derive(Clone, Debug)]
pub struct Projector {
    db: Db,
    recent: Arc<RecentViews>,
    /// Commands committed together (the server, on both stores); `None`: each on its own.
    group: Option<GroupCommit>,
}

/// The `session_state` view of recently written sessions, as committed. A command's fold
/// starts from it instead of reading and decoding the row; the write is guarded by the view's
/// `last_seq`, so a stale entry (views rebuilt, another process) only costs the slow path.
/// Bounded: the least recently used entry goes first.
pub(crate) struct RecentViews(Mutex<LruCache<String, SessionStateView>>);

impl Default for RecentViews {
    fn default() -> Self {
        Self(Mutex::new(LruCache::new(RECENT_VIEWS)))
    }
}

impl std::fmt::Debug for RecentViews {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecentViews")
    }
}

/// How many sessions' views the projector keeps in memory.
const RECENT_VIEWS: usize = 2048;

impl RecentViews {
    /// The `last_seq` of the view kept for `session_id`, leaving the order of use as it is.
    pub(crate) fn kept_seq(&self, session_id: &str) -> Option<u64> {
        self.0
            .lock()
            .expect("the view cache is never poisoned")
            .peek(session_id)
            .map(|view| view.last_seq)
    }

    pub(crate) fn take(&self, session_id: &str) -> Option<SessionStateView> {
        self.0
            .lock()
            .expect("the view cache is never poisoned")
            .remove(session_id)
    }

    pub(crate) fn keep(&self, view: SessionStateView) {
        self.0
            .lock()
            .expect("the view cache is never poisoned")
            .insert(view.session_id.clone(), view);
    }
}

impl Projector {
    pub fn new(db: Db) -> Self {
        Self {
            db,
            recent: Arc::default(),
            group: None,
        }
    }

    /// Commits concurrent commands together (see [`crate::group_commit`]). Starts a task on
    /// the current Tokio runtime, which must outlive every command.
    pub fn with_group_commit(mut self) -> Self {
        self.group = Some(GroupCommit::start(self.db.clone(), self.recent.clone()));
        self
    }

    pub(crate) fn db(&self) -> &Db {
        &self.db
    }

    /// Applies every event of `session_id` the views have not seen; returns how many.
    #[tracing::instrument(skip(self), err)]
    pub async fn project(&self, session_id: &str) -> Result<u64, ProjectionError> {
        let postgres = self.db.is_postgres();
        on_db!(write(&self.db), |pool| {
            let mut tx = pool.begin().await?;
            let (applied, _) = fold_pending(&mut tx, session_id, postgres, true).await?;
            if applied == 0 {
                tx.rollback().await?;
            } else {
                tx.commit().await?;
            }
            Ok(applied)
        })
    }

    /// Appends a command's events and folds them into the views in one transaction: views can
    /// never lag the log they are built from. A duplicate `(aggregate, sequence)` is a lost
    /// optimistic-lock race. With group commit on, the transaction is shared with whatever other
    /// commands are waiting ([`crate::group_commit`]).
    ///
    /// `moved` is the session's new contribution to its study's overview, when the command
    /// wrote an event that moves it ([`interview_session::aggregate::moves_overview`]).
    #[tracing::instrument(name = "commit", skip_all, fields(events = events.len()), err)]
    pub async fn append_and_project(
        &self,
        events: &[NewEvent],
        moved: Option<Moved>,
    ) -> Result<(), PersistenceError> {
        if events.is_empty() {
            return Ok(());
        }
        match &self.group {
            Some(group) => group.submit(events, moved).await,
            None => {
                let mut held = crate::db::Held::default();
                group_commit::commit(
                    &self.db,
                    &self.recent,
                    &[(events, moved.as_ref())],
                    &mut held,
                )
                .await
                .remove(0)
            }
        }
    }

    /// Drops a session's views and folds them again from its whole stream.
    #[tracing::instrument(skip(self), err)]
    pub async fn rebuild(&self, session_id: &str) -> Result<u64, ProjectionError> {
        on_db!(write(&self.db), |pool| {
            let mut tx = pool.begin().await?;
            for table in ["transcript", "results"] {
                sqlx::query(&format!("DELETE FROM {table} WHERE session_id = $1"))
                    .bind(session_id)
                    .execute(&mut *tx)
                    .await?;
            }
            sqlx::query("DELETE FROM session_state WHERE session_id = $1")
                .bind(session_id)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
        });
        self.project(session_id).await
    }

    /// Projects every session whose views lag its event stream (start-up and periodic catch-up).
    #[tracing::instrument(skip(self), err)]
    pub async fn catch_up(&self) -> Result<u64, ProjectionError> {
        // Both queries visit each session once through an index (the events' primary key, and
        // the stream heads), rather than grouping every event of the log.
        let lagging: Vec<String> = on_db!(read(&self.db), |pool| {
            let mut ids: Vec<String> = sqlx::query_scalar(
                "SELECT s.session_id FROM session_state s WHERE EXISTS (SELECT 1 FROM events e \
                 WHERE e.aggregate_type = $1 AND e.aggregate_id = s.session_id AND e.sequence > s.last_seq)",
            )
            .bind(AGGREGATE_TYPE)
            .fetch_all(pool)
            .await?;
            let without_views: Vec<String> = sqlx::query_scalar(
                "SELECT e.aggregate_id FROM events e WHERE e.aggregate_type = $1 AND e.sequence = 1 \
                 AND NOT EXISTS (SELECT 1 FROM session_state s WHERE s.session_id = e.aggregate_id)",
            )
            .bind(AGGREGATE_TYPE)
            .fetch_all(pool)
            .await?;
            ids.extend(without_views);
            ids
        });
        let mut applied = 0;
        for session_id in &lagging {
            applied += self.project(session_id).await?;
        }
        self.backfill_overviews().await?;
        metrics::counter!("interview_projection_caught_up_events_total").increment(applied);
        metrics::gauge!("interview_projection_lag_events").set(applied as f64);
        if applied > 0 {
            tracing::info!(
                sessions = lagging.len(),
                events = applied,
                "projections caught up"
            );
        }
        Ok(applied)
    }
}

/// The `results.end_reason` column of a view.
pub(crate) fn end_reason_text(view: &SessionStateView) -> Option<String> {
    view.end_reason.map(|r| {
        serde_json::to_value(r)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default()
    })
}

/// Folds the session's events after the view's `last_seq` into the views, in the caller's
/// transaction (locking the view row on PostgreSQL), and on PostgreSQL announces the commit.
/// With `overview`, a session whose new events move its study overview contribution is folded
/// whole once more for it (a command's own contribution comes with its events instead).
pub(crate) async fn fold_pending<'c, DB>(
    tx: &mut sqlx::Transaction<'c, DB>,
    session_id: &str,
    postgres: bool,
    overview: bool,
) -> Result<(u64, Option<SessionStateView>), ProjectionError>
where
    DB: sqlx::Database,
    for<'e> &'e mut <DB as sqlx::Database>::Connection: sqlx::Executor<'e, Database = DB>,
    for<'q> <DB as sqlx::Database>::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'q> String: sqlx::Encode<'q, DB> + sqlx::Type<DB> + sqlx::Decode<'q, DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Type<DB> + sqlx::Decode<'q, DB>,
    for<'q> bool: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Value: sqlx::Encode<'q, DB> + sqlx::Type<DB> + sqlx::Decode<'q, DB>,
    for<'q> Option<String>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<Value>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<bool>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> chrono::DateTime<chrono::Utc>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<chrono::DateTime<chrono::Utc>>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'a> &'a str: sqlx::ColumnIndex<<DB as sqlx::Database>::Row>,
    usize: sqlx::ColumnIndex<<DB as sqlx::Database>::Row>,
    for<'q> Option<i64>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<Vec<u8>>: sqlx::Decode<'q, DB> + sqlx::Type<DB>,
{
    let lock = if postgres { " FOR UPDATE" } else { "" };
    let select_view =
        format!("SELECT last_seq, participant_token_sha256, state FROM session_state WHERE session_id = $1{lock}");
    sqlx::query(
        "INSERT INTO session_state (session_id) VALUES ($1) ON CONFLICT (session_id) DO NOTHING",
    )
    .bind(session_id)
    .execute(&mut **tx)
    .await?;
    let row = sqlx::query(&select_view)
        .bind(session_id)
        .fetch_one(&mut **tx)
        .await?;
    let last_seq: i64 = row.try_get("last_seq")?;
    // From the view's last event, for the hash the first new one links to.
    let mut rows = log::rows_in(tx, session_id, last_seq.max(1)).await?;
    let prev = match rows.first() {
        Some(first) if last_seq > 0 && first.sequence == last_seq as u64 => {
            log::row_hash(&rows.remove(0))
        }
        _ => GENESIS_HASH.to_string(),
    };
    if rows.is_empty() {
        return Ok((0, None));
    }
    let events = if rows[0].event_version == interview_session::codec::compact::VERSION {
        // The view ends inside a commit (it never should): the first new event takes what it
        // leaves out from the ones before it, so the stream is decoded from its start.
        let all = log::rows_in(tx, session_id, 1).await?;
        let mut events =
            log::decode_rows(session_id, &all, GENESIS_HASH.into(), &log::KeptDocuments)?;
        events.retain(|(seq, _)| *seq > last_seq as u64);
        events
    } else {
        log::decode_rows(session_id, &rows, prev, &log::KeptDocuments)?
    };
    let mut view: SessionStateView = if last_seq == 0 {
        SessionStateView::default()
    } else {
        let state: Value = row.try_get("state")?;
        let mut view: SessionStateView =
            serde_json::from_value(state).map_err(|source| ProjectionError::Decode {
                session_id: session_id.into(),
                sequence: last_seq as u64,
                source: source.into(),
            })?;
        view.participant_token_sha256 = row.try_get("participant_token_sha256")?;
        view
    };
    let mut new_rows = NewRows::default();
    for (sequence, event) in &events {
        view.apply(*sequence, event, &mut new_rows);
    }
    // The row is locked (PostgreSQL) or the writer is ours (SQLite): the guard holds.
    write_views(tx, session_id, &view, &new_rows, last_seq).await?;
    if postgres {
        view_writes::notify(tx, &[(session_id, view.last_seq)]).await?;
    }
    let moves = |(_, e): &(u64, interview_session::SessionEvent)| {
        interview_session::aggregate::moves_overview(&e.body)
    };
    if overview && (view.status.is_terminal() || events.iter().any(moves)) {
        crate::overview::recompute(tx, session_id).await?;
    }
    Ok((events.len() as u64, Some(view)))
}

/// Writes the folded `session_state` row, the new `transcript` rows, and —
/// for a completed session that is not a preview — its `results` row, in the caller's
/// transaction. Generic over the backend: the SQL is the same text on both. Writes nothing and
/// answers false when the stored row is not at `expected_last_seq`.
async fn write_views<'c, DB>(
    tx: &mut sqlx::Transaction<'c, DB>,
    session_id: &str,
    view: &SessionStateView,
    rows: &NewRows,
    expected_last_seq: i64,
) -> Result<bool, sqlx::Error>
where
    DB: sqlx::Database,
    for<'e> &'e mut <DB as sqlx::Database>::Connection: sqlx::Executor<'e, Database = DB>,
    for<'q> <DB as sqlx::Database>::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'q> String: sqlx::Encode<'q, DB> + sqlx::Type<DB> + sqlx::Decode<'q, DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> bool: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Value: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<String>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<Value>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<bool>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> chrono::DateTime<chrono::Utc>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<chrono::DateTime<chrono::Utc>>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    usize: sqlx::ColumnIndex<<DB as sqlx::Database>::Row>,
    for<'q> Option<i64>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    if !view_writes::update_states(tx, &[(expected_last_seq, view)])
        .await?
        .contains(session_id)
    {
        return Ok(false);
    }
    let transcript: Vec<_> = rows.transcript.iter().map(|t| (session_id, t)).collect();
    view_writes::insert_transcript(tx, &transcript).await?;
    view_writes::upsert_results(tx, [view]).await?;
    if view.erasure.is_some() {
        crate::erasure::forget_views(tx, session_id).await?;
    }
    Ok(true)
}

/// The placeholders of a multi-row statement: `($1, $2), ($3, $4)` on PostgreSQL, `(?, ?),
/// (?, ?)` on SQLite, for `rows` rows of `columns` values bound in order. (SQLite reads `$1` as a
/// *named* parameter and looks each one up by name, which makes a statement with thousands of
/// them slow to prepare; `?` is positional.)
pub(crate) fn placeholders<DB: sqlx::Database>(rows: usize, columns: usize) -> String {
    let numbered = DB::NAME == "PostgreSQL";
    (0..rows)
        .map(|r| {
            let row: Vec<String> = (1..=columns)
                .map(|c| {
                    if numbered {
                        format!("${}", r * columns + c)
                    } else {
                        "?".to_string()
                    }
                })
                .collect();
            format!("({})", row.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn placeholders_number_every_value_once() {
        use super::placeholders;
        use sqlx::{Postgres, Sqlite};
        assert_eq!(placeholders::<Postgres>(1, 2), "($1, $2)");
        assert_eq!(placeholders::<Postgres>(2, 3), "($1, $2, $3), ($4, $5, $6)");
        assert_eq!(placeholders::<Sqlite>(2, 2), "(?, ?), (?, ?)");
    }
}
