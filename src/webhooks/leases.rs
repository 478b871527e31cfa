//! What a delivery task reads and writes of its subscription (`webhooks`,
//! `webhook_deliveries`; SQL in `sql/`): which subscriptions are due, the lease one process holds
//! on one, the cursor it moves, the failures it counts and the attempts it records.
//!
//! Every write names the lease and the cursor the task started from, so a task whose lease was
//! taken over (its process was thought dead) or whose subscription was sent back to an earlier
//! notice meanwhile (a redelivery) changes nothing and stops.

use chrono::{DateTime, Utc};
use interview_projections::{on_db, Db};

use interview_projections::micros::from_micros;

use super::subscriptions::{self, Delivery, Subscription};

/// Attempts kept per subscription; older ones are dropped.
const KEPT_ATTEMPTS: i64 = 1_000;

/// Records an attempt (by the lease holder: one writer per subscription).
#[tracing::instrument(skip_all, fields(hook_id))]
pub async fn record(db: &Db, hook_id: &str, d: &Delivery) -> Result<(), sqlx::Error> {
    on_db!(write(db), |pool| {
        let mut tx = pool.begin().await?;
        sqlx::query(include_str!("sql/insert_delivery.sql"))
            .bind(hook_id)
            .bind(d.position)
            .bind(&d.kind)
            .bind(&d.message_id)
            .bind(d.attempted_at.timestamp_micros())
            .bind(d.status.map(i32::from))
            .bind(d.latency_ms)
            .bind(&d.error)
            .bind(&d.response_excerpt)
            .execute(&mut *tx)
            .await?;
        sqlx::query(include_str!("sql/prune_deliveries.sql"))
            .bind(hook_id)
            .bind(KEPT_ATTEMPTS)
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    })
}

/// A delivery task's hold on one subscription: its process, and how long its lease lasts.
pub struct Lease<'a> {
    pub holder: &'a str,
    pub length: chrono::Duration,
    /// A process silent since then is dead: its leases are taken at once.
    pub dead_since: DateTime<Utc>,
}

/// Subscriptions with notices to deliver now whose lease is free (or this process's, or a dead
/// process's).
#[tracing::instrument(skip_all)]
/// Answers each one's id and its study's.
pub async fn due(
    db: &Db,
    lease: &Lease<'_>,
    now: DateTime<Utc>,
) -> Result<Vec<(String, String)>, sqlx::Error> {
    on_db!(read(db), |pool| {
        sqlx::query_as(include_str!("sql/due_hooks.sql"))
            .bind(now.timestamp_micros())
            .bind(lease.holder)
            .bind(lease.dead_since)
            .fetch_all(pool)
            .await
    })
}

/// Takes (or renews) the lease on a subscription; the subscription when it is now this
/// process's.
#[tracing::instrument(skip(db, lease))]
pub async fn take_lease(
    db: &Db,
    hook_id: &str,
    lease: &Lease<'_>,
    now: DateTime<Utc>,
) -> Result<Option<Subscription>, sqlx::Error> {
    // The subscription's study when the lease is ours now.
    let taken: Option<String> = on_db!(write(db), |pool| {
        sqlx::query_scalar(include_str!("sql/take_lease.sql"))
            .bind(hook_id)
            .bind(lease.holder)
            .bind((now + lease.length).timestamp_micros())
            .bind(now.timestamp_micros())
            .bind(lease.dead_since)
            .fetch_optional(pool)
            .await?
    });
    match taken {
        Some(study_id) => Ok(subscriptions::of_study(db, &study_id, Some(hook_id))
            .await?
            .pop()),
        None => Ok(None),
    }
}

/// Lets the lease go; the subscription is due again no earlier than `now` (behind those that
/// have waited longer).
#[tracing::instrument(skip(db))]
pub async fn release(
    db: &Db,
    hook_id: &str,
    holder: &str,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    on_db!(write(db), |pool| {
        sqlx::query(include_str!("sql/release_lease.sql"))
            .bind(hook_id)
            .bind(holder)
            .bind(now.timestamp_micros())
            .execute(pool)
            .await
            .map(|_| ())
    })
}

/// Moves the cursor from `from` to `to` and renews the lease; false when the lease or the cursor
/// is no longer what the task held.
#[tracing::instrument(skip(db, lease))]
pub async fn advance(
    db: &Db,
    hook_id: &str,
    lease: &Lease<'_>,
    from: i64,
    to: i64,
    now: DateTime<Utc>,
) -> Result<bool, sqlx::Error> {
    on_db!(write(db), |pool| {
        let changed = sqlx::query(include_str!("sql/advance.sql"))
            .bind(hook_id)
            .bind(lease.holder)
            .bind(from)
            .bind(to)
            .bind((now + lease.length).timestamp_micros())
            .bind(now.timestamp_micros())
            .execute(pool)
            .await?
            .rows_affected();
        Ok(changed > 0)
    })
}

/// A failed attempt at the notice after `cursor`, and what follows it.
pub struct Failure<'a> {
    pub cursor: i64,
    pub at: DateTime<Utc>,
    /// When the next attempt is due.
    pub next: DateTime<Utc>,
    /// A notice retried since before this is given up on: the subscription is marked failing.
    pub window_start: DateTime<Utc>,
    pub error: &'a str,
}

/// Counts a failed attempt, sets the next one (or marks the subscription failing) and lets the
/// lease go; whether it is failing now (`None`: the task no longer held it).
#[tracing::instrument(skip(db, failure))]
pub async fn retry_later(
    db: &Db,
    hook_id: &str,
    holder: &str,
    failure: &Failure<'_>,
) -> Result<Option<bool>, sqlx::Error> {
    on_db!(write(db), |pool| {
        sqlx::query_scalar(include_str!("sql/retry_later.sql"))
            .bind(hook_id)
            .bind(holder)
            .bind(failure.cursor)
            .bind(failure.at.timestamp_micros())
            .bind(failure.next.timestamp_micros())
            .bind(failure.window_start.timestamp_micros())
            .bind(failure.error)
            .fetch_optional(pool)
            .await
    })
}

/// Frees every lease: on the embedded store, which one process serves, the leases a killed
/// process left are this process's to take at start-up.
#[tracing::instrument(skip(db))]
pub async fn free_all(db: &Db) -> Result<(), sqlx::Error> {
    on_db!(write(db), |pool| {
        sqlx::query(include_str!("sql/free_all_leases.sql"))
            .execute(pool)
            .await
            .map(|_| ())
    })
}

/// A subscription's id and when its oldest undelivered notice happened (none: caught up).
pub type Lag = (String, Option<DateTime<Utc>>);

/// Each subscription's [`Lag`].
#[tracing::instrument(skip(db))]
pub async fn oldest_undelivered(db: &Db) -> Result<Vec<Lag>, sqlx::Error> {
    let rows: Vec<(String, Option<i64>)> = on_db!(read(db), |pool| {
        sqlx::query_as(include_str!("sql/oldest_undelivered.sql"))
            .fetch_all(pool)
            .await?
    });
    Ok(rows
        .into_iter()
        .map(|(id, us)| (id, us.map(from_micros)))
        .collect())
}
