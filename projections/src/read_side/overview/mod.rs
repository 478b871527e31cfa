//! The `study_overview` read model (`docs/overview.md`): per study, named whole counts that each
//! session contributes to (`interview_session::aggregate::outcome`), so a study's overview is
//! one indexed read of a few hundred rows however many sessions it has.
//!
//! A transactional handler: it runs in the transaction that writes the events moving a
//! contribution (a session created, consented, screened, ended, finally extracted), so the
//! overview never lags or leads the log. Each session's last contribution is kept in
//! `session_overview`; writing a new one adds the difference to its study's counts, which makes
//! the write idempotent and lets any path (a command, catch-up, a rebuild) recompute a session
//! without knowing what was counted before.

mod report;

use std::collections::BTreeMap;

use interview_session::aggregate::Contribution;
use interview_session::hash::GENESIS_HASH;
use interview_session::Session;
use serde_json::Value;

use crate::read_side::columns::{bind_all, Cell, OVERVIEW_COLUMNS};
use crate::store::backend::{Backend, Statement};
use crate::store::statements::placeholders;
use crate::{on_db, store::db::Db, store::error::ProjectionError};

pub use report::{percentile, Overview};

/// A session's new contribution to its study's overview, and the notices the command that moved
/// it announces (`crate::notices`): both are what a command tells its study, written in the
/// transaction path (a command that brings either never takes the one-statement path).
#[derive(Debug, Clone, PartialEq)]
pub struct NewContribution {
    pub session_id: String,
    pub study_id: String,
    pub contribution: Contribution,
    pub notices: Vec<interview_session::notice::SessionNotice>,
}

impl NewContribution {
    /// Its `session_overview` row, in the order of [`OVERVIEW_COLUMNS`].
    pub fn cells(&self) -> [Cell; 3] {
        [
            Cell::Text(Some(self.session_id.clone())),
            Cell::Text(Some(self.study_id.clone())),
            Cell::Json(Some(
                serde_json::to_value(&self.contribution).expect("counts serialize"),
            )),
        ]
    }

    /// The contribution of a folded session, if it has a study yet.
    pub fn of(session_id: &str, session: &Session) -> Option<Self> {
        Some(Self {
            session_id: session_id.to_string(),
            study_id: session.study()?.study_id.clone(),
            contribution: session.overview_contribution(),
            notices: Vec::new(),
        })
    }

    /// With the notices its command announces.
    pub fn announcing(mut self, notices: Vec<interview_session::notice::SessionNotice>) -> Self {
        self.notices = notices;
        self
    }

    /// Its notices, as the commit writes them.
    pub(crate) fn new_notices(&self) -> impl Iterator<Item = crate::notices::NewNotice> + '_ {
        self.notices.iter().map(|n| crate::notices::NewNotice {
            study_id: self.study_id.clone(),
            kind: n.kind,
            session_id: Some(self.session_id.clone()),
            sequence: Some(n.sequence),
            at: n.at,
        })
    }
}

/// Sessions given their first contribution per catch-up.
pub(crate) const BACKFILL: usize = 500;

/// Rows per statement, well under both stores' limit of bound values.
const ROWS: usize = 5_000;

/// Stores each session's new contribution and adds the difference from its last one to its
/// study's counts, in the caller's transaction. The counts are written in one order (study,
/// name) on every process, so two transactions adding to the same rows lock them alike.
// Long by design: the steps of one write in the caller's transaction, in order: keep each session's
// latest contribution, read the stored ones, work out the differences per study and name, add them
// to the counts, then store the new contributions; each step reads the maps the step before built
// (the differences' map is what keeps the counts written in (study, name) order).
pub(crate) async fn write<'c, DB: Backend>(
    tx: &mut sqlx::Transaction<'c, DB>,
    moved: &[NewContribution],
) -> Result<(), sqlx::Error> {
    use crate::store::backend::ReadColumn;
    if moved.is_empty() {
        return Ok(());
    }
    // One session may appear twice in a batch of catch-up work: its last contribution stands.
    let mut latest: BTreeMap<&str, &NewContribution> = BTreeMap::new();
    for m in moved {
        latest.insert(&m.session_id, m);
    }
    let ids: Vec<&str> = latest.keys().copied().collect();
    let mut before: BTreeMap<String, Contribution> = BTreeMap::new();
    for chunk in ids.chunks(ROWS) {
        let sql = format!(
            "SELECT session_id, contribution FROM session_overview WHERE session_id IN ({})",
            placeholders::<DB>(chunk.len(), 1)
        );
        let mut q = sqlx::query(&sql);
        for id in chunk {
            q = q.arg(id.to_string());
        }
        for row in q.fetch_all_in(tx).await? {
            let id: String = row.read(0)?;
            let stored: Value = row.read(1)?;
            // Counted as none, what it once added would stay in the study's counts twice: the
            // command fails instead, and `replay verify` names the row.
            let stored =
                serde_json::from_value(stored).map_err(|e| sqlx::Error::Decode(e.into()))?;
            before.insert(id, stored);
        }
    }
    let mut deltas: BTreeMap<(&str, &str), i64> = BTreeMap::new();
    let mut changed: Vec<&NewContribution> = Vec::new();
    for m in latest.values() {
        let old = before.get(&m.session_id);
        if old == Some(&m.contribution) {
            continue;
        }
        changed.push(m);
        for (name, n) in &m.contribution {
            *deltas.entry((&m.study_id, name)).or_default() += n;
        }
        for (name, n) in old.into_iter().flatten() {
            *deltas.entry((&m.study_id, name)).or_default() -= n;
        }
    }
    let deltas: Vec<((&str, &str), i64)> = deltas.into_iter().filter(|(_, n)| *n != 0).collect();
    for chunk in deltas.chunks(ROWS) {
        let sql = format!(
            "INSERT INTO study_overview (study_id, name, n) VALUES {} \
             ON CONFLICT (study_id, name) DO UPDATE SET n = study_overview.n + excluded.n",
            placeholders::<DB>(chunk.len(), 3)
        );
        let mut q = sqlx::query(&sql);
        for ((study, name), n) in chunk {
            q = q.arg(study.to_string()).arg(name.to_string()).arg(*n);
        }
        q.execute_in(tx).await?;
    }
    for chunk in changed.chunks(ROWS) {
        let sql = format!(
            "INSERT INTO session_overview ({}) VALUES {} \
             ON CONFLICT (session_id) DO UPDATE SET contribution = excluded.contribution",
            OVERVIEW_COLUMNS.join(", "),
            placeholders::<DB>(chunk.len(), OVERVIEW_COLUMNS.len())
        );
        let mut q = sqlx::query(&sql);
        for m in chunk {
            q = bind_all(q, m.cells());
        }
        q.execute_in(tx).await?;
    }
    Ok(())
}

/// Folds the whole session, in the caller's transaction, and writes its contribution: for the
/// paths that fold views from the log rather than from a command (catch-up, one session's
/// rebuild).
pub(crate) async fn recompute<'c, DB: Backend>(
    tx: &mut sqlx::Transaction<'c, DB>,
    session_id: &str,
) -> Result<(), ProjectionError> {
    let rows = crate::store::log::rows_in(tx, session_id, 1).await?;
    let events = crate::store::log::decode_rows(
        session_id,
        &rows,
        GENESIS_HASH.to_string(),
        &crate::store::log::KeptDocuments,
    )?;
    let session = Session::from_events(events.into_iter().map(|(_, e)| e));
    if let Some(moved) = NewContribution::of(session_id, &session) {
        write(tx, &[moved]).await?;
    }
    Ok(())
}

/// Where a study's stored counts are not the sum of its sessions' stored contributions: one line
/// per study and name (`replay verify --all`).
#[tracing::instrument(skip(db), err)]
pub async fn drift(db: &Db) -> Result<Vec<String>, ProjectionError> {
    type Sessions = Vec<(String, Value)>;
    type Counts = Vec<(String, String, i64)>;
    let (sessions, counts): (Sessions, Counts) = on_db!(read(db), |pool| {
        let sessions = sqlx::query_as(include_str!("../sql/overview_contributions.sql"))
            .fetch_all(pool)
            .await?;
        let counts = sqlx::query_as(include_str!("../sql/overview_counts_all.sql"))
            .fetch_all(pool)
            .await?;
        (sessions, counts)
    });
    let mut summed: BTreeMap<(String, String), i64> = BTreeMap::new();
    let mut problems = Vec::new();
    for (study, contribution) in sessions {
        match serde_json::from_value::<Contribution>(contribution) {
            Ok(c) => {
                for (name, n) in c {
                    *summed.entry((study.clone(), name)).or_default() += n;
                }
            }
            Err(e) => problems.push(format!(
                "study {study}: a session's contribution does not read: {e}"
            )),
        }
    }
    let mut stored: BTreeMap<(String, String), i64> = BTreeMap::new();
    for (study, name, n) in counts {
        stored.insert((study, name), n);
    }
    let names: std::collections::BTreeSet<&(String, String)> =
        summed.keys().chain(stored.keys()).collect();
    for key in names {
        let (s, c) = (
            summed.get(key).copied().unwrap_or(0),
            stored.get(key).copied().unwrap_or(0),
        );
        if s != c {
            problems.push(format!(
                "study {}: overview count {} is {c}, its sessions add up to {s}",
                key.0, key.1
            ));
        }
    }
    Ok(problems)
}

/// The study's counts, by name (zero counts left out).
#[tracing::instrument(skip(db), err)]
pub async fn counts(db: &Db, study_id: &str) -> Result<BTreeMap<String, i64>, ProjectionError> {
    let rows: Vec<(String, i64)> = on_db!(read(db), |pool| {
        sqlx::query_as(include_str!("../sql/overview_counts.sql"))
            .bind(study_id)
            .fetch_all(pool)
            .await?
    });
    Ok(rows.into_iter().collect())
}

/// A study's overview, read from its counts.
pub async fn overview(db: &Db, study_id: &str) -> Result<Overview, ProjectionError> {
    Ok(Overview::from_counts(
        study_id,
        &counts(db, study_id).await?,
    ))
}
