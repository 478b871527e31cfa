//! A study's webhook subscriptions and their deliveries, as stored (`webhooks`,
//! `webhook_deliveries`, migration 0020; SQL in `sql/`). Times are whole microseconds since the
//! epoch on both stores.
//!
//! Every write a delivery task makes names its lease and the cursor it started from, so a task
//! whose lease was taken over (its process was thought dead) or whose subscription was sent back
//! to an earlier notice meanwhile (a redelivery) changes nothing and stops.

use chrono::{DateTime, TimeZone, Utc};
use interview_projections::{on_db, Db};
use serde::Serialize;

fn micros(at: DateTime<Utc>) -> i64 {
    at.timestamp_micros()
}

fn at(us: i64) -> DateTime<Utc> {
    Utc.timestamp_micros(us).single().unwrap_or_default()
}

/// A subscription as researchers see it (its secret only when it is made).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Subscription {
    pub hook_id: String,
    pub study_id: String,
    pub url: String,
    /// The notice kinds delivered (`session.completed`, …).
    pub events: Vec<String>,
    /// Who made it.
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    /// The cursor: every notice of the study up to this position was delivered (or is of a kind
    /// not subscribed to).
    pub delivered_through: i64,
    /// The study's last notice.
    pub head: i64,
    /// When the oldest notice after the cursor happened: how far behind the receiver is.
    pub oldest_undelivered_at: Option<DateTime<Utc>>,
    /// Failed attempts at the next notice, and since when it has been retried.
    pub attempts: i64,
    pub retrying_since: Option<DateTime<Utc>>,
    pub next_attempt_at: DateTime<Utc>,
    /// Retried for the whole retry window without success: nothing is sent until a
    /// redelivery.
    pub failing: bool,
    pub last_error: Option<String>,
    #[serde(skip)]
    pub secret: String,
}

type Row = (
    String,
    String,
    String,
    String,
    String,
    String,
    i64,
    i64,
    i32,
    Option<i64>,
    i64,
    bool,
    Option<String>,
    i64,
    Option<i64>,
);

fn from_row(r: Row) -> Subscription {
    Subscription {
        hook_id: r.0,
        study_id: r.1,
        url: r.2,
        events: serde_json::from_str(&r.3).unwrap_or_default(),
        secret: r.4,
        created_by: r.5,
        created_at: at(r.6),
        delivered_through: r.7,
        attempts: i64::from(r.8),
        retrying_since: r.9.map(at),
        next_attempt_at: at(r.10),
        failing: r.11,
        last_error: r.12,
        head: r.13,
        oldest_undelivered_at: r.14.map(at),
    }
}

/// A new subscription: it delivers the notices after the study's head when it is made.
pub struct NewSubscription {
    pub hook_id: String,
    pub study_id: String,
    pub url: String,
    pub events: Vec<String>,
    pub secret: String,
    pub created_by: String,
}

#[tracing::instrument(skip(db, new), fields(study_id = %new.study_id))]
pub async fn create(db: &Db, new: NewSubscription) -> Result<Subscription, sqlx::Error> {
    let head = interview_projections::notices::head(db, &new.study_id).await?;
    let events = serde_json::to_string(&new.events).expect("strings serialize");
    on_db!(write(db), |pool| {
        sqlx::query(include_str!("sql/insert_hook.sql"))
            .bind(&new.hook_id)
            .bind(&new.study_id)
            .bind(&new.url)
            .bind(&events)
            .bind(&new.secret)
            .bind(&new.created_by)
            .bind(micros(Utc::now()))
            .bind(head)
            .execute(pool)
            .await?;
    });
    let made = of_study(db, &new.study_id, Some(&new.hook_id)).await?;
    made.into_iter().next().ok_or(sqlx::Error::RowNotFound)
}

/// The study's subscriptions (or the one named), oldest first.
#[tracing::instrument(skip(db))]
pub async fn of_study(
    db: &Db,
    study_id: &str,
    hook_id: Option<&str>,
) -> Result<Vec<Subscription>, sqlx::Error> {
    let rows: Vec<Row> = on_db!(read(db), |pool| {
        sqlx::query_as(include_str!("sql/hooks_of_study.sql"))
            .bind(study_id)
            .bind(hook_id)
            .fetch_all(pool)
            .await?
    });
    Ok(rows.into_iter().map(from_row).collect())
}

/// One subscription by id, whatever its study (the delivery task's read).
async fn by_id(db: &Db, hook_id: &str) -> Result<Option<Subscription>, sqlx::Error> {
    let study: Option<String> = on_db!(read(db), |pool| {
        sqlx::query_scalar("SELECT study_id FROM webhooks WHERE hook_id = $1")
            .bind(hook_id)
            .fetch_optional(pool)
            .await?
    });
    match study {
        Some(study) => Ok(of_study(db, &study, Some(hook_id)).await?.pop()),
        None => Ok(None),
    }
}

/// Deletes a subscription and its delivery history; false when the study has no such one.
#[tracing::instrument(skip(db))]
pub async fn delete(db: &Db, study_id: &str, hook_id: &str) -> Result<bool, sqlx::Error> {
    on_db!(write(db), |pool| {
        let mut tx = pool.begin().await?;
        let deleted = sqlx::query(include_str!("sql/delete_hook.sql"))
            .bind(study_id)
            .bind(hook_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if deleted > 0 {
            sqlx::query(include_str!("sql/delete_deliveries.sql"))
                .bind(hook_id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(deleted > 0)
    })
}

/// Sends the subscription back to deliver again from notice `from` (the cursor set just before
/// it), clears its failures and makes it due now; false when the study has no such one.
#[tracing::instrument(skip(db))]
pub async fn redeliver(
    db: &Db,
    study_id: &str,
    hook_id: &str,
    from: i64,
) -> Result<bool, sqlx::Error> {
    on_db!(write(db), |pool| {
        let changed = sqlx::query(include_str!("sql/redeliver.sql"))
            .bind(study_id)
            .bind(hook_id)
            .bind((from - 1).max(0))
            .bind(micros(Utc::now()))
            .execute(pool)
            .await?
            .rows_affected();
        Ok(changed > 0)
    })
}

/// One attempt at delivering a notice, as recorded.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Delivery {
    /// Numbered per subscription from 1.
    pub attempt: i64,
    /// The notice's position in the study.
    pub position: i64,
    #[serde(rename = "type")]
    pub kind: String,
    /// The `webhook-id` header: the same for every attempt at one notice.
    pub message_id: String,
    pub attempted_at: DateTime<Utc>,
    /// The receiver's HTTP status; none when it did not answer.
    pub status: Option<u16>,
    pub latency_ms: i64,
    /// Why the attempt failed (a non-2xx status, a timeout, a refused address, …).
    pub error: Option<String>,
    /// The first characters of the receiver's answer.
    pub response_excerpt: Option<String>,
}

/// Attempts kept per subscription; older ones are dropped.
const KEPT_ATTEMPTS: i64 = 1_000;

/// Records an attempt (by the lease holder: one writer per subscription).
pub async fn record(db: &Db, hook_id: &str, d: &Delivery) -> Result<(), sqlx::Error> {
    on_db!(write(db), |pool| {
        let mut tx = pool.begin().await?;
        sqlx::query(include_str!("sql/insert_delivery.sql"))
            .bind(hook_id)
            .bind(d.position)
            .bind(&d.kind)
            .bind(&d.message_id)
            .bind(micros(d.attempted_at))
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

type DeliveryRow = (
    i64,
    i64,
    String,
    String,
    i64,
    Option<i32>,
    i64,
    Option<String>,
    Option<String>,
);

/// A page of attempts, newest first, before attempt `before`.
pub async fn deliveries(
    db: &Db,
    hook_id: &str,
    before: i64,
    limit: i64,
) -> Result<Vec<Delivery>, sqlx::Error> {
    let rows: Vec<DeliveryRow> = on_db!(read(db), |pool| {
        sqlx::query_as(include_str!("sql/deliveries.sql"))
            .bind(hook_id)
            .bind(before)
            .bind(limit)
            .fetch_all(pool)
            .await?
    });
    Ok(rows
        .into_iter()
        .map(|r| Delivery {
            attempt: r.0,
            position: r.1,
            kind: r.2,
            message_id: r.3,
            attempted_at: at(r.4),
            status: r.5.and_then(|s| u16::try_from(s).ok()),
            latency_ms: r.6,
            error: r.7,
            response_excerpt: r.8,
        })
        .collect())
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
pub async fn due(
    db: &Db,
    lease: &Lease<'_>,
    now: DateTime<Utc>,
) -> Result<Vec<String>, sqlx::Error> {
    on_db!(read(db), |pool| {
        sqlx::query_scalar(include_str!("sql/due_hooks.sql"))
            .bind(micros(now))
            .bind(lease.holder)
            .bind(lease.dead_since)
            .fetch_all(pool)
            .await
    })
}

/// Takes (or renews) the lease on a subscription; the subscription when it is now this
/// process's.
pub async fn take_lease(
    db: &Db,
    hook_id: &str,
    lease: &Lease<'_>,
    now: DateTime<Utc>,
) -> Result<Option<Subscription>, sqlx::Error> {
    let taken = on_db!(write(db), |pool| {
        sqlx::query(include_str!("sql/take_lease.sql"))
            .bind(hook_id)
            .bind(lease.holder)
            .bind(micros(now + lease.length))
            .bind(micros(now))
            .bind(lease.dead_since)
            .execute(pool)
            .await?
            .rows_affected()
    });
    if taken == 0 {
        return Ok(None);
    }
    by_id(db, hook_id).await
}

/// Lets the lease go (the subscription has nothing more to deliver now).
pub async fn release(db: &Db, hook_id: &str, holder: &str) -> Result<(), sqlx::Error> {
    on_db!(write(db), |pool| {
        sqlx::query(include_str!("sql/release_lease.sql"))
            .bind(hook_id)
            .bind(holder)
            .execute(pool)
            .await
            .map(|_| ())
    })
}

/// Moves the cursor from `from` to `to` and renews the lease; false when the lease or the cursor
/// is no longer what the task held.
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
            .bind(micros(now + lease.length))
            .execute(pool)
            .await?
            .rows_affected();
        Ok(changed > 0)
    })
}

/// After a failed attempt at the notice after `cursor`: counts it, sets the next attempt (or
/// marks the subscription failing) and lets the lease go.
#[allow(clippy::too_many_arguments)]
pub async fn retry_later(
    db: &Db,
    hook_id: &str,
    holder: &str,
    cursor: i64,
    now: DateTime<Utc>,
    next: DateTime<Utc>,
    failing: bool,
    error: &str,
) -> Result<(), sqlx::Error> {
    on_db!(write(db), |pool| {
        sqlx::query(include_str!("sql/retry_later.sql"))
            .bind(hook_id)
            .bind(holder)
            .bind(cursor)
            .bind(micros(now))
            .bind(micros(next))
            .bind(failing)
            .bind(error)
            .execute(pool)
            .await
            .map(|_| ())
    })
}

/// Each subscription with when its oldest undelivered notice happened (none: caught up).
pub async fn oldest_undelivered(
    db: &Db,
) -> Result<Vec<(String, Option<DateTime<Utc>>)>, sqlx::Error> {
    let rows: Vec<(String, Option<i64>)> = on_db!(read(db), |pool| {
        sqlx::query_as(include_str!("sql/oldest_undelivered.sql"))
            .fetch_all(pool)
            .await?
    });
    Ok(rows.into_iter().map(|(id, us)| (id, us.map(at))).collect())
}
