//! Times stored as whole microseconds since the epoch (`BIGINT`): one form on both stores, and
//! one that compares as numbers in SQL — the access log, the studies' notices and the webhooks'
//! tables keep their times so. Writers use `DateTime::timestamp_micros`.

use chrono::{DateTime, TimeZone, Utc};

/// A stored time read back (the epoch for a value out of range, which no writer stores).
pub fn from_micros(us: i64) -> DateTime<Utc> {
    Utc.timestamp_micros(us).single().unwrap_or_default()
}
