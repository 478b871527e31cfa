//! What each study announces to outside systems (`study_notices`, migration 0020): the outbox its
//! webhooks deliver from (`src/webhooks/`, `docs/webhooks.md`).
//!
//! A notice is written in the transaction that commits its fact — the session's events (the
//! group commit's transaction path, stage 4) or the study's pause — so a fact is announced if and
//! only if it was committed. Each study numbers its notices from 1: the transaction adds its
//! notices to the study's row in `study_notice_heads` and takes the positions below the new head.
//! That row stays locked until the commit, so a second commit of the same study waits for the
//! first, and positions are commit order: a reader that has seen position `n` will never see a
//! smaller one appear. The rows are taken last in the transaction (after every other lock it
//! needs), studies in one order, so no two commits wait on each other round a circle; SQLite has
//! one writer.
//!
//! A notice holds no content, only what it points at (a session and an event's sequence), so
//! erasing the session reaches every delivery made after it.

use chrono::{DateTime, Utc};
use interview_session::notice::NoticeKind;

use crate::store::backend::{Backend, ReadColumn, Statement};
use crate::store::micros::from_micros;
use crate::{on_db, Db};

/// A notice to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewNotice {
    pub study_id: String,
    pub kind: NoticeKind,
    pub session_id: Option<String>,
    pub sequence: Option<u64>,
    pub at: DateTime<Utc>,
}

/// A stored notice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub study_id: String,
    pub position: i64,
    pub kind: NoticeKind,
    pub session_id: Option<String>,
    pub sequence: Option<i64>,
    pub at: DateTime<Utc>,
}

/// Writes `notices` in `tx`, numbering each study's after its last.
#[tracing::instrument(skip_all, fields(notices = notices.len()))]
pub async fn append<DB: Backend>(
    tx: &mut sqlx::Transaction<'_, DB>,
    notices: &[NewNotice],
) -> Result<(), sqlx::Error> {
    let mut studies: Vec<&str> = notices.iter().map(|n| n.study_id.as_str()).collect();
    studies.sort_unstable();
    studies.dedup();
    for study in studies {
        let ours: Vec<&NewNotice> = notices.iter().filter(|n| n.study_id == study).collect();
        let head = sqlx::query::<DB>(include_str!("sql/notices_take_positions.sql"))
            .arg(study)
            .arg(ours.len() as i64)
            .fetch_one_in(tx)
            .await?
            .read::<i64>(0)?;
        for (position, n) in (head - ours.len() as i64 + 1..).zip(ours) {
            sqlx::query::<DB>(include_str!("sql/notices_insert.sql"))
                .arg(study)
                .arg(position)
                .arg(n.kind.as_str())
                .arg(n.session_id.clone())
                .arg(n.sequence.map(|s| s as i64))
                .arg(n.at.timestamp_micros())
                .execute_in(tx)
                .await?;
        }
    }
    Ok(())
}

/// The study's last position (0 before its first notice).
#[tracing::instrument(skip(db))]
pub async fn head(db: &Db, study_id: &str) -> Result<i64, sqlx::Error> {
    on_db!(read(db), |pool| {
        sqlx::query_scalar(include_str!("sql/notices_head.sql"))
            .bind(study_id)
            .fetch_one(pool)
            .await
    })
}

/// A stored notice of a kind this build does not know (written by a newer one): its position
/// and its kind's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unknown {
    pub position: i64,
    pub kind: String,
}

/// Up to `limit` of the study's notices after `position`, in order.
#[tracing::instrument(skip(db))]
pub async fn after(
    db: &Db,
    study_id: &str,
    position: i64,
    limit: i64,
) -> Result<Vec<Result<Notice, Unknown>>, sqlx::Error> {
    type Raw = (i64, String, Option<String>, Option<i64>, i64);
    let rows: Vec<Raw> = on_db!(read(db), |pool| {
        sqlx::query_as(include_str!("sql/notices_after.sql"))
            .bind(study_id)
            .bind(position)
            .bind(limit)
            .fetch_all(pool)
            .await
    })?;
    Ok(rows
        .into_iter()
        .map(
            |(position, kind, session_id, sequence, at)| match kind.parse() {
                Ok(known) => Ok(Notice {
                    study_id: study_id.to_string(),
                    position,
                    kind: known,
                    session_id,
                    sequence,
                    at: from_micros(at),
                }),
                Err(_) => Err(Unknown { position, kind }),
            },
        )
        .collect())
}

/// The position of the study's first notice at or after `at` (one past its head when none is).
#[tracing::instrument(skip(db))]
pub async fn first_at_or_after(
    db: &Db,
    study_id: &str,
    at: DateTime<Utc>,
) -> Result<i64, sqlx::Error> {
    on_db!(read(db), |pool| {
        sqlx::query_scalar(include_str!("sql/notices_first_at.sql"))
            .bind(study_id)
            .bind(at.timestamp_micros())
            .fetch_one(pool)
            .await
    })
}
