//! A study's webhook subscriptions and their deliveries, as stored (`webhooks`,
//! `webhook_deliveries`, migration 0020; SQL in `sql/`). Times are whole microseconds since the
//! epoch on both stores.
//!
//! What a delivery task writes is `leases.rs`'s.

use chrono::{DateTime, Utc};
use interview_projections::micros::from_micros;
use interview_projections::{on_db, Db};
use serde::Serialize;

/// A subscription as researchers see it (its secret only when it is made). No `Debug`: it holds
/// the secret.
#[derive(Clone, Serialize, utoipa::ToSchema)]
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

/// A subscription's row as `sql/hooks_of_study.sql` reads it.
#[derive(sqlx::FromRow)]
struct Stored {
    hook_id: String,
    study_id: String,
    url: String,
    events: String,
    secret: String,
    created_by: String,
    created_micros: i64,
    delivered_through: i64,
    attempts: i32,
    retrying_since: Option<i64>,
    next_attempt_micros: i64,
    failing: bool,
    last_error: Option<String>,
    head: i64,
    oldest_undelivered: Option<i64>,
}

impl From<Stored> for Subscription {
    fn from(r: Stored) -> Self {
        Subscription {
            hook_id: r.hook_id,
            study_id: r.study_id,
            url: r.url,
            events: serde_json::from_str(&r.events).unwrap_or_default(),
            secret: r.secret,
            created_by: r.created_by,
            created_at: from_micros(r.created_micros),
            delivered_through: r.delivered_through,
            attempts: i64::from(r.attempts),
            retrying_since: r.retrying_since.map(from_micros),
            next_attempt_at: from_micros(r.next_attempt_micros),
            failing: r.failing,
            last_error: r.last_error,
            head: r.head,
            oldest_undelivered_at: r.oldest_undelivered.map(from_micros),
        }
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
            .bind(Utc::now().timestamp_micros())
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
    let rows: Vec<Stored> = on_db!(read(db), |pool| {
        sqlx::query_as(include_str!("sql/hooks_of_study.sql"))
            .bind(study_id)
            .bind(hook_id)
            .fetch_all(pool)
            .await?
    });
    Ok(rows.into_iter().map(Subscription::from).collect())
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
            .bind(Utc::now().timestamp_micros())
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
#[tracing::instrument(skip(db))]
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
            attempted_at: from_micros(r.4),
            status: r.5.and_then(|s| u16::try_from(s).ok()),
            latency_ms: r.6,
            error: r.7,
            response_excerpt: r.8,
        })
        .collect())
}
