//! Webhooks (`docs/webhooks.md`): a study's results and changes pushed to the research team's
//! own systems, signed as Standard Webhooks specify, at least once, in order, through crashes.
//!
//! The log is the outbox. The commit that records a fact writes the study's notice of it in
//! the same transaction (`interview_projections::notices`); each subscription keeps a cursor in
//! the database, its last notice answered with a 2xx, and a delivery task reads the notices
//! after it and sends them one at a time, advancing the cursor only after each 2xx
//! (`delivery.rs`). A process that dies mid-delivery leaves the cursor where it was: the notice
//! goes again, under the same `webhook-id`. One process delivers a subscription at a time (a
//! lease in its row, taken over at once from a process that stopped beating). What a delivery
//! carries is read when it is sent (`payload.rs`), so an erased session's content is never sent
//! after its erasure, redeliveries included. Receivers are checked before each connection
//! (`address.rs`): https to public addresses only, unless the operator allows private ones.

pub mod address;
pub mod attempt;
pub mod delivery;
pub mod leases;
pub mod payload;
pub mod subscriptions;

use std::time::Duration;

/// How webhooks are delivered (`WEBHOOK_*` settings).
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Loopback, private and link-local receivers, and plain http, are allowed.
    pub allow_private_addresses: bool,
    /// How long a receiver has to answer one delivery.
    pub timeout: Duration,
    /// The wait before the first retry; each retry waits twice as long, at most [`MAX_WAIT`].
    pub retry_base: Duration,
    /// How long a failing notice is retried before the subscription is marked failing.
    pub retry_for: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            allow_private_addresses: false,
            timeout: Duration::from_secs(10),
            retry_base: Duration::from_secs(1),
            retry_for: Duration::from_secs(24 * 3600),
        }
    }
}

/// The longest wait between two attempts.
pub const MAX_WAIT: Duration = Duration::from_secs(3600);

/// The webhooks' errors, mapped into the HTTP error at the routes.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("{0}")]
    Database(#[from] sqlx::Error),
    /// The receiver's URL may not be used (its scheme, its address, its form).
    #[error("{0}")]
    UrlRefused(#[from] address::UrlRefused),
    /// The request names something invalid (an event kind, a secret, a `from`).
    #[error("{message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
    #[error("no webhook {0} on this study")]
    NotFound(String),
}
