//! One attempt at delivering one notice: the body read now, signed as Standard Webhooks specify,
//! posted through a client that only reaches the addresses `address.rs` allows, and recorded
//! with its outcome.

use std::sync::Arc;
use std::time::Instant;

use chrono::Utc;
use futures_util::StreamExt;
use interview_projections::notices::Notice;
use interview_projections::Db;
use standardwebhooks::Webhook;

use super::leases;
use super::subscriptions::{Delivery, Subscription};
use super::{address, payload, Policy};

/// The characters of a failed attempt's answer that are kept.
const EXCERPT_CHARS: usize = 200;

/// The bytes of an answer read at most (enough for [`EXCERPT_CHARS`] characters).
const EXCERPT_BYTES: usize = EXCERPT_CHARS * 4;

/// Makes attempts: the client, and what it may reach.
pub struct Sender {
    db: Db,
    client: reqwest13::Client,
    allow_private: bool,
}

impl Sender {
    pub fn new(db: Db, policy: &Policy) -> Self {
        crate::tls::use_ring();
        let client = reqwest13::Client::builder()
            .dns_resolver(Arc::new(address::CheckingResolver {
                allow_private: policy.allow_private_addresses,
            }))
            .redirect(reqwest13::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(policy.timeout)
            .timeout(policy.timeout)
            .user_agent(concat!(
                "interview-runtime-webhooks/",
                env!("CARGO_PKG_VERSION")
            ))
            .build()
            .expect("the webhook client builds");
        Self {
            db,
            client,
            allow_private: policy.allow_private_addresses,
        }
    }

    /// One attempt at one notice, recorded; `Err` with why it failed.
    #[tracing::instrument(skip_all, fields(hook_id = sub.hook_id, position = notice.position))]
    pub async fn attempt(&self, sub: &Subscription, notice: &Notice) -> Result<(), String> {
        let attempted_at = Utc::now();
        let started = Instant::now();
        let message_id = payload::message_id(&sub.hook_id, notice.position);
        let (status, response_excerpt, error) = match self.send(sub, notice, &message_id).await {
            Ok((status, _)) if (200..300).contains(&status) => (Some(status), None, None),
            // Kept only for a failure, where it says why (a receiver's own words, which should
            // not echo what it was sent).
            Ok((status, excerpt)) => (
                Some(status),
                excerpt,
                Some(format!("the receiver answered {status}")),
            ),
            Err(error) => (None, None, Some(error)),
        };
        let outcome = if error.is_none() {
            "delivered"
        } else {
            "failed"
        };
        metrics::counter!("interview_webhook_deliveries_total", "outcome" => outcome).increment(1);
        let delivery = Delivery {
            attempt: 0,
            position: notice.position,
            kind: notice.kind.as_str().to_string(),
            message_id,
            attempted_at,
            status,
            latency_ms: started.elapsed().as_millis() as i64,
            error: error.clone(),
            response_excerpt,
        };
        if let Err(e) = leases::record(&self.db, &sub.hook_id, &delivery).await {
            tracing::warn!(error = %e, "a webhook attempt could not be recorded");
        }
        error.map_or(Ok(()), Err)
    }

    /// Signs and posts the notice's body; the receiver's status and the start of its answer.
    async fn send(
        &self,
        sub: &Subscription,
        notice: &Notice,
        message_id: &str,
    ) -> Result<(u16, Option<String>), String> {
        // Checked again at each attempt: the operator may have changed what is allowed.
        let url = address::check(&sub.url, self.allow_private).map_err(|e| e.to_string())?;
        let body = payload::body(&self.db, notice)
            .await
            .map_err(|e| format!("the notice could not be read: {e}"))?;
        let body = serde_json::to_vec(&body).expect("JSON serializes");
        let timestamp = Utc::now().timestamp();
        let signature = Webhook::new(&sub.secret)
            .and_then(|hook| hook.sign(message_id, timestamp, &body))
            .map_err(|e| format!("the subscription's secret cannot sign: {e}"))?;
        let response = self
            .client
            .post(url)
            .header("content-type", "application/json")
            .header("webhook-id", message_id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(body)
            .send()
            .await
            .map_err(|e| describe(&e.without_url()))?;
        let status = response.status().as_u16();
        let excerpt = if (200..300).contains(&status) {
            None
        } else {
            excerpt(response).await
        };
        Ok((status, excerpt))
    }
}

/// An error and its causes in one line (the resolver's refusal is a cause).
fn describe(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// The first [`EXCERPT_CHARS`] characters of a receiver's answer; reading stops once
/// [`EXCERPT_BYTES`] are in.
async fn excerpt(response: reqwest13::Response) -> Option<String> {
    let mut kept = Vec::new();
    let mut body = response.bytes_stream();
    while let Some(Ok(chunk)) = body.next().await {
        let room = EXCERPT_BYTES - kept.len();
        kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if kept.len() >= EXCERPT_BYTES {
            break;
        }
    }
    let text: String = String::from_utf8_lossy(&kept)
        .chars()
        .take(EXCERPT_CHARS)
        .collect();
    (!text.is_empty()).then_some(text)
}
