//! Delivering a study's notices to its subscriptions: at least once, in order, through crashes.
//!
//! Every process looks for due subscriptions every [`POLL`] and starts a task for each it can
//! lease. The task sends the notices after the cursor one at a time and moves the cursor only
//! after a 2xx, so a crash anywhere leaves the notice to be sent again, under the same
//! `webhook-id`. A failure (a non-2xx, a timeout, a refused address) ends the task: the next
//! attempt is due after a wait that doubles each time, with jitter, up to an hour; once a notice
//! has been retried for the whole retry window the subscription is marked failing and waits for
//! a redelivery. Head-of-line: a later notice never overtakes an earlier one, so each session's
//! notices arrive in the order they were committed.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::Utc;
use futures_util::StreamExt;
use interview_projections::notices::{self, Notice};
use interview_projections::Db;
use standardwebhooks::Webhook;

use super::subscriptions::{self, Delivery, Lease, Subscription};
use super::{address, payload, Policy, MAX_WAIT};

/// How often each process looks for due subscriptions.
pub const POLL: Duration = Duration::from_millis(250);

/// A process silent this long is dead: its leases are taken over at once (processes beat every
/// second, `interviewer::schedule::HEARTBEAT`).
const DEAD_AFTER: Duration = Duration::from_secs(5);

/// Subscriptions delivered at once by one process.
const AT_ONCE: usize = 16;

/// Notices read at a time.
const PAGE: i64 = 100;

/// The characters of a receiver's answer that are kept.
const EXCERPT_CHARS: usize = 200;

pub struct Deliverer {
    db: Db,
    policy: Policy,
    client: reqwest13::Client,
    process_id: String,
    /// Subscriptions this process is delivering now.
    running: Mutex<HashSet<String>>,
    slots: tokio::sync::Semaphore,
}

impl Deliverer {
    pub fn new(db: Db, policy: Policy, process_id: String) -> Arc<Self> {
        crate::tls::use_ring();
        let client = reqwest13::Client::builder()
            .dns_resolver(Arc::new(address::PublicOnly {
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
        Arc::new(Self {
            db,
            policy,
            client,
            process_id,
            running: Mutex::default(),
            slots: tokio::sync::Semaphore::new(AT_ONCE),
        })
    }

    /// Looks for due subscriptions every [`POLL`], and sets the lag gauges every few seconds.
    pub fn spawn(self: Arc<Self>) {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(POLL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut last_gauges = Instant::now() - Duration::from_secs(60);
            loop {
                tick.tick().await;
                if let Err(error) = self.start_due().await {
                    tracing::warn!(%error, "could not look for due webhooks; will retry");
                }
                if last_gauges.elapsed() >= Duration::from_secs(5) {
                    last_gauges = Instant::now();
                    if let Err(error) = self.set_gauges().await {
                        tracing::warn!(%error, "could not measure the webhooks' lag");
                    }
                }
            }
        });
    }

    fn lease(&self) -> Lease<'_> {
        Lease {
            holder: &self.process_id,
            // Renewed before each attempt, which lasts at most the timeout.
            length: chrono::Duration::from_std(self.policy.timeout + Duration::from_secs(15))
                .expect("small"),
            dead_since: Utc::now() - chrono::Duration::from_std(DEAD_AFTER).expect("small"),
        }
    }

    /// Starts a task for each due subscription this process is not delivering yet.
    pub async fn start_due(self: &Arc<Self>) -> Result<usize, sqlx::Error> {
        let due = subscriptions::due(&self.db, &self.lease(), Utc::now()).await?;
        let mut started = 0;
        for hook_id in due {
            if !self
                .running
                .lock()
                .expect("not poisoned")
                .insert(hook_id.clone())
            {
                continue;
            }
            started += 1;
            let this = self.clone();
            tokio::spawn(async move {
                let _slot = this.slots.acquire().await.expect("never closed");
                if let Err(error) = this.deliver(&hook_id).await {
                    tracing::warn!(%error, hook_id, "webhook delivery stopped; will retry");
                }
                this.running.lock().expect("not poisoned").remove(&hook_id);
            });
        }
        Ok(started)
    }

    /// Delivers the subscription's notices after its cursor while they succeed.
    #[tracing::instrument(skip(self))]
    async fn deliver(&self, hook_id: &str) -> Result<(), sqlx::Error> {
        let now = Utc::now();
        let Some(sub) = subscriptions::take_lease(&self.db, hook_id, &self.lease(), now).await?
        else {
            return Ok(());
        };
        if sub.next_attempt_at > now {
            return subscriptions::release(&self.db, hook_id, &self.process_id).await;
        }
        let mut cursor = sub.delivered_through;
        loop {
            let (batch, last) = notices::after(&self.db, &sub.study_id, cursor, PAGE).await?;
            if last == cursor {
                return subscriptions::release(&self.db, hook_id, &self.process_id).await;
            }
            for notice in batch
                .iter()
                .filter(|n| sub.events.iter().any(|e| e == n.kind.as_str()))
            {
                // Notices before it that the subscription does not take are passed over.
                let before = notice.position - 1;
                if before > cursor && !self.advance(hook_id, cursor, before).await? {
                    return Ok(());
                }
                cursor = cursor.max(before);
                match self.attempt(&sub, notice).await {
                    Ok(()) => {
                        if !self.advance(hook_id, cursor, notice.position).await? {
                            return Ok(());
                        }
                        cursor = notice.position;
                    }
                    Err(error) => return self.retry_later(&sub, cursor, &error).await,
                }
            }
            if last > cursor && !self.advance(hook_id, cursor, last).await? {
                return Ok(());
            }
            cursor = last;
        }
    }

    /// Moves the cursor; false when this task no longer holds the subscription as it was.
    async fn advance(&self, hook_id: &str, from: i64, to: i64) -> Result<bool, sqlx::Error> {
        let moved =
            subscriptions::advance(&self.db, hook_id, &self.lease(), from, to, Utc::now()).await?;
        if !moved {
            tracing::info!(
                hook_id,
                "the webhook was redelivered or taken over meanwhile"
            );
        }
        Ok(moved)
    }

    /// Schedules the next attempt after a failure, or marks the subscription failing once the
    /// notice has been retried for the whole window.
    async fn retry_later(
        &self,
        sub: &Subscription,
        cursor: i64,
        error: &str,
    ) -> Result<(), sqlx::Error> {
        let now = Utc::now();
        let attempts = sub.attempts + 1;
        let since = sub.retrying_since.unwrap_or(now);
        let failing = (now - since).to_std().unwrap_or_default() >= self.policy.retry_for;
        let next = now + chrono::Duration::from_std(wait(&self.policy, attempts)).expect("small");
        if failing {
            tracing::warn!(
                hook_id = sub.hook_id,
                attempts,
                "a webhook is failing: it waits for a redelivery"
            );
        }
        subscriptions::retry_later(
            &self.db,
            &sub.hook_id,
            &self.process_id,
            cursor,
            now,
            next,
            failing,
            error,
        )
        .await
    }

    /// One attempt at one notice, recorded; `Err` with why it failed.
    async fn attempt(&self, sub: &Subscription, notice: &Notice) -> Result<(), String> {
        let attempted_at = Utc::now();
        let started = Instant::now();
        let message_id = payload::message_id(&sub.hook_id, notice.position);
        let answer = self.send(sub, notice, &message_id).await;
        let (status, excerpt, error) = match answer {
            Ok((status, excerpt)) if (200..300).contains(&status) => (Some(status), excerpt, None),
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
            response_excerpt: excerpt,
        };
        if let Err(e) = subscriptions::record(&self.db, &sub.hook_id, &delivery).await {
            tracing::warn!(error = %e, "a webhook attempt could not be recorded");
        }
        match error {
            None => Ok(()),
            Some(error) => Err(error),
        }
    }

    /// Signs and posts the notice's body; the receiver's status and the start of its answer.
    async fn send(
        &self,
        sub: &Subscription,
        notice: &Notice,
        message_id: &str,
    ) -> Result<(u16, Option<String>), String> {
        // Checked again at each attempt: the operator may have changed what is allowed.
        let url = address::check(&sub.url, self.policy.allow_private_addresses)
            .map_err(|e| e.to_string())?;
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
        Ok((status, excerpt(response).await))
    }

    async fn set_gauges(&self) -> Result<(), sqlx::Error> {
        let now = Utc::now();
        for (hook_id, oldest) in subscriptions::oldest_undelivered(&self.db).await? {
            let age = oldest.map_or(0.0, |at| (now - at).num_milliseconds().max(0) as f64 / 1e3);
            metrics::gauge!("interview_webhook_oldest_undelivered_seconds", "hook_id" => hook_id)
                .set(age);
        }
        Ok(())
    }
}

/// The wait before attempt `attempts + 1`: the base doubled per failed attempt, at most
/// [`MAX_WAIT`], give or take a quarter (so receivers that failed together are not retried
/// together).
pub fn wait(policy: &Policy, attempts: i64) -> Duration {
    let doubled = policy
        .retry_base
        .saturating_mul(1u32 << (attempts - 1).clamp(0, 20) as u32)
        .min(MAX_WAIT);
    let mut random = [0u8; 2];
    getrandom::fill(&mut random).expect("the OS random source works");
    let jitter = 0.75 + f64::from(u16::from_le_bytes(random)) / f64::from(u16::MAX) / 2.0;
    doubled.mul_f64(jitter)
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

/// The first [`EXCERPT_CHARS`] characters of a receiver's answer; the rest is never read.
async fn excerpt(response: reqwest13::Response) -> Option<String> {
    let mut kept = Vec::new();
    let mut body = response.bytes_stream();
    while let Some(Ok(chunk)) = body.next().await {
        kept.extend_from_slice(&chunk);
        if kept.len() >= EXCERPT_CHARS * 4 {
            break;
        }
    }
    let text: String = String::from_utf8_lossy(&kept)
        .chars()
        .take(EXCERPT_CHARS)
        .collect();
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_with_jitter_up_to_an_hour() {
        let policy = Policy::default();
        for (attempts, secs) in [(1, 1.0), (2, 2.0), (3, 4.0), (10, 512.0), (30, 3600.0)] {
            let w = wait(&policy, attempts).as_secs_f64();
            assert!(w >= secs * 0.75 && w <= secs * 1.25, "{attempts}: {w}");
        }
    }
}
