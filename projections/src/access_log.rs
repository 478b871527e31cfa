//! The access log (issue 34): every researcher request that reads a session's content, exports,
//! erases, grants or revokes — and every refusal of one — as a row: who, what (method, route,
//! study, session), when, from which address, with the request id and the status answered.
//!
//! Append-only and hash-chained: row `n` holds the hash of row `n - 1` (`prev_hash`; the first
//! holds 64 zeros) and its own `hash`, the SHA-256 of that previous hash and the row's fields in
//! one canonical form ([`hash_of`]). An edited row no longer matches its hash, a deleted one
//! leaves a gap in `seq` and a broken link; [`verify`] finds both (`replay verify --access-log`).
//! Cutting rows off the end leaves a shorter chain that still holds: an auditor compares the
//! head `replay verify --access-log` prints with one they kept.
//!
//! Several writers (server processes, the command line) append one at a time: on PostgreSQL
//! each takes a transaction-scoped advisory lock, reads the head and inserts `seq + 1`; SQLite
//! has one writer per process, and a writer of another process that took the same `seq` is
//! refused by the primary key and tries again on the new head. The chain never forks.

use chrono::{DateTime, Utc};

use crate::store::micros::from_micros;
use interview_session::hash::sha256_hex;
use serde::Serialize;

use crate::store::backend::{Backend, ReadColumn, Statement};
use crate::{on_db, Db};

/// The `prev_hash` of the first row.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What one request did, as the log records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    pub at: DateTime<Utc>,
    /// The researcher's name (`token:<8 hex>` for a configured token, `unverified token` for a
    /// JWT whose signature did not hold).
    pub researcher: String,
    pub researcher_id: Option<String>,
    pub method: String,
    /// The route as registered (`/api/sessions/{session_id}/transcript`).
    pub route: String,
    pub study_id: Option<String>,
    pub session_id: Option<String>,
    /// What a change changed, in words (`grant Vera analyst`); `None` for a read.
    pub detail: Option<String>,
    pub status: u16,
    pub address: String,
    pub request_id: String,
}

/// A row of the log: its place in the chain, and what it records.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub seq: i64,
    #[serde(flatten)]
    pub entry: Entry,
    pub prev_hash: String,
    pub hash: String,
}

/// The hash of row `seq` after `prev_hash`: SHA-256 of the previous hash and the row's fields
/// as one JSON array, in a fixed order, the time in microseconds.
pub fn hash_of(prev_hash: &str, seq: i64, e: &Entry) -> String {
    let fields = serde_json::json!([
        seq,
        e.at.timestamp_micros(),
        e.researcher,
        e.researcher_id,
        e.method,
        e.route,
        e.study_id,
        e.session_id,
        e.detail,
        e.status,
        e.address,
        e.request_id,
    ]);
    sha256_hex(format!("{prev_hash}{fields}").as_bytes())
}

/// How many times a SQLite writer reads the head again after another process took its `seq`.
const TRIES: usize = 50;

/// Appends `entry`; its `seq`.
#[tracing::instrument(skip_all, fields(route = %entry.route, status = entry.status))]
pub async fn append(db: &Db, entry: &Entry) -> Result<i64, sqlx::Error> {
    match db {
        Db::Postgres(pool) => {
            // One writer at a time across every process: the lock is the transaction's.
            let mut tx = pool.begin().await?;
            sqlx::query(include_str!("sql/access_log_lock.sql"))
                .execute(&mut *tx)
                .await?;
            let seq = insert_next(&mut tx, entry).await?;
            tx.commit().await?;
            Ok(seq)
        }
        Db::Sqlite(sqlite) => {
            let mut last_error = None;
            for _ in 0..TRIES {
                let mut tx = sqlite.write.begin().await?;
                match insert_next(&mut tx, entry).await {
                    Ok(seq) => {
                        tx.commit().await?;
                        return Ok(seq);
                    }
                    Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                        last_error = Some(sqlx::Error::Database(e));
                    }
                    Err(e) => return Err(e),
                }
            }
            Err(last_error.expect("tried at least once"))
        }
    }
}

/// Reads the head and inserts `entry` after it, in `tx`.
async fn insert_next<DB: Backend>(
    tx: &mut sqlx::Transaction<'_, DB>,
    entry: &Entry,
) -> Result<i64, sqlx::Error> {
    let head = sqlx::query::<DB>(include_str!("sql/access_log_head.sql"))
        .fetch_optional_in(tx)
        .await?;
    let (seq, prev) = match head {
        Some(row) => (row.read::<i64>("seq")? + 1, row.read::<String>("hash")?),
        None => (1, GENESIS.to_string()),
    };
    let hash = hash_of(&prev, seq, entry);
    sqlx::query::<DB>(include_str!("sql/access_log_insert.sql"))
        .arg(seq)
        .arg(entry.at.timestamp_micros())
        .arg(&entry.researcher)
        .arg(entry.researcher_id.clone())
        .arg(&entry.method)
        .arg(&entry.route)
        .arg(entry.study_id.clone())
        .arg(entry.session_id.clone())
        .arg(entry.detail.clone())
        .arg(i64::from(entry.status))
        .arg(&entry.address)
        .arg(&entry.request_id)
        .arg(prev)
        .arg(hash)
        .execute_in(tx)
        .await?;
    Ok(seq)
}

/// Which rows to read.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub study_id: Option<String>,
    pub researcher: Option<String>,
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    /// Rows after this `seq` (a page's cursor).
    pub after: i64,
    pub limit: i64,
}

type RawRow = (
    i64,
    i64,
    String,
    Option<String>,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    i32,
    String,
    String,
    String,
    String,
);

/// Rows in `seq` order, as `filter` says.
#[tracing::instrument(skip(db))]
pub async fn page(db: &Db, filter: &Filter) -> Result<Vec<Row>, sqlx::Error> {
    let rows: Vec<RawRow> = on_db!(read(db), |pool| {
        sqlx::query_as(include_str!("sql/access_log_page.sql"))
            .bind(&filter.study_id)
            .bind(&filter.researcher)
            .bind(
                filter
                    .from
                    .map(|at| at.timestamp_micros())
                    .unwrap_or(i64::MIN),
            )
            .bind(
                filter
                    .to
                    .map(|at| at.timestamp_micros())
                    .unwrap_or(i64::MAX),
            )
            .bind(filter.after)
            .bind(filter.limit)
            .fetch_all(pool)
            .await
    })?;
    Ok(rows
        .into_iter()
        .map(|r| Row {
            seq: r.0,
            entry: Entry {
                at: from_micros(r.1),
                researcher: r.2,
                researcher_id: r.3,
                method: r.4,
                route: r.5,
                study_id: r.6,
                session_id: r.7,
                detail: r.8,
                status: u16::try_from(r.9).unwrap_or_default(),
                address: r.10,
                request_id: r.11,
            },
            prev_hash: r.12,
            hash: r.13,
        })
        .collect())
}

/// What [`verify`] found wrong, at which row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Break {
    pub seq: i64,
    pub problem: String,
}

/// The chain's length and head hash, or where it breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub rows: i64,
    pub head: String,
}

/// Reads the whole log in pages and checks its chain: `seq` runs 1, 2, 3 … without a gap, each
/// row's `prev_hash` is the hash before it, and each `hash` is what its fields give.
pub async fn verify(db: &Db) -> Result<Result<Verified, Break>, sqlx::Error> {
    let mut expected_seq = 1;
    let mut prev = GENESIS.to_string();
    loop {
        let filter = Filter {
            after: expected_seq - 1,
            limit: 1000,
            ..Filter::default()
        };
        let rows = page(db, &filter).await?;
        if rows.is_empty() {
            return Ok(Ok(Verified {
                rows: expected_seq - 1,
                head: prev,
            }));
        }
        for row in rows {
            if let Err(problem) = check(&row, expected_seq, &prev) {
                return Ok(Err(Break {
                    seq: row.seq,
                    problem,
                }));
            }
            prev = row.hash.clone();
            expected_seq += 1;
        }
    }
}

/// One row against the one before it.
fn check(row: &Row, expected_seq: i64, prev: &str) -> Result<(), String> {
    if row.seq != expected_seq {
        return Err(format!(
            "rows {expected_seq} to {} are missing",
            row.seq - 1
        ));
    }
    if row.prev_hash != prev {
        return Err("its prev_hash is not the hash of the row before it".into());
    }
    if row.hash != hash_of(prev, row.seq, &row.entry) {
        return Err("its fields do not give its hash: the row was changed".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry {
        Entry {
            at: from_micros(1_764_900_000_123_456),
            researcher: "Vera".into(),
            researcher_id: Some("r1".into()),
            method: "GET".into(),
            route: "/api/sessions/{session_id}/transcript".into(),
            study_id: Some("s".into()),
            session_id: Some("x".into()),
            detail: None,
            status: 200,
            address: "10.0.0.1".into(),
            request_id: "req-1".into(),
        }
    }

    fn row(seq: i64, prev: &str, e: &Entry) -> Row {
        Row {
            seq,
            entry: e.clone(),
            prev_hash: prev.into(),
            hash: hash_of(prev, seq, e),
        }
    }

    #[test]
    fn a_row_checks_against_the_one_before_and_an_edit_breaks_it() {
        let first = row(1, GENESIS, &entry());
        assert_eq!(check(&first, 1, GENESIS), Ok(()));
        let second = row(2, &first.hash, &entry());
        assert_eq!(check(&second, 2, &first.hash), Ok(()));
        let mut edited = second.clone();
        edited.entry.status = 403;
        assert!(check(&edited, 2, &first.hash)
            .unwrap_err()
            .contains("changed"));
        assert!(check(&second, 3, &first.hash)
            .unwrap_err()
            .contains("missing"));
        assert!(check(&second, 2, GENESIS)
            .unwrap_err()
            .contains("prev_hash"));
    }

    #[test]
    fn every_field_is_in_the_hash() {
        let base = entry();
        let h = hash_of(GENESIS, 1, &base);
        let changed: Vec<Entry> = vec![
            Entry {
                at: from_micros(1),
                ..base.clone()
            },
            Entry {
                researcher: "x".into(),
                ..base.clone()
            },
            Entry {
                researcher_id: None,
                ..base.clone()
            },
            Entry {
                method: "POST".into(),
                ..base.clone()
            },
            Entry {
                route: "/x".into(),
                ..base.clone()
            },
            Entry {
                study_id: None,
                ..base.clone()
            },
            Entry {
                session_id: None,
                ..base.clone()
            },
            Entry {
                detail: Some("grant".into()),
                ..base.clone()
            },
            Entry {
                status: 500,
                ..base.clone()
            },
            Entry {
                address: "x".into(),
                ..base.clone()
            },
            Entry {
                request_id: "x".into(),
                ..base.clone()
            },
        ];
        for e in changed {
            assert_ne!(hash_of(GENESIS, 1, &e), h, "{e:?}");
        }
        assert_ne!(hash_of(GENESIS, 2, &base), h);
    }
}
