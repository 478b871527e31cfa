//! Delivering a study's notices to its subscriptions: at least once, in order, through crashes.
//!
//! Every process looks for due subscriptions every [`POLL`] and starts a task for each it can
//! lease. The task sends the notices after the cursor one at a time (`attempt.rs`) and moves the
//! cursor only after a 2xx, so a crash anywhere leaves the notice to be sent again, under the same
//! `webhook-id`. A failure (a non-2xx, a timeout, a refused address) ends the task: the next
//! attempt is due after a wait that doubles each time, with jitter, up to an hour; once a notice
//! has been retried for the whole retry window the subscription is marked failing and waits for
//! a redelivery. Head-of-line: a later notice never overtakes an earlier one, so each session's
//! notices arrive in the order they were committed.
//!
//! Fair shares: a task gives its slot back after [`TURN`] notices or [`TURN_TIME`] (its
//! subscription is due again behind those that waited longer), and one study runs at most
//! [`PER_STUDY`] of a process's [`AT_ONCE`] tasks, so slow receivers of one study do not hold
//! up another study's deliveries.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::Utc;
use interview_projections::notices;
use interview_projections::Db;

use super::attempt::Sender;
use super::leases::{self, Failure, Lease};
use super::subscriptions::Subscription;
use super::{Policy, MAX_WAIT};

/// How often each process looks for due subscriptions.
pub const POLL: Duration = Duration::from_millis(250);

/// A process silent this long is dead: its leases are taken over at once (processes beat every
/// second, `interviewer::schedule::HEARTBEAT`).
const DEAD_AFTER: Duration = Duration::from_secs(5);

/// Subscriptions delivered at once by one process, and of one study.
const AT_ONCE: usize = 16;
const PER_STUDY: usize = 4;

/// Notices, and time, a task delivers before it gives its slot back.
const TURN: usize = 100;
const TURN_TIME: Duration = Duration::from_secs(30);

/// Notices read at a time.
const PAGE: i64 = 100;

pub struct Deliverer {
    db: Db,
    policy: Policy,
    sender: Sender,
    process_id: String,
    /// Subscriptions this process is delivering now, and how many of each study's.
    running: Mutex<(HashSet<String>, HashMap<String, usize>)>,
    slots: tokio::sync::Semaphore,
    /// Subscriptions whose lag gauge is set, to zero it once one is deleted.
    gauged: Mutex<HashSet<String>>,
}

impl Deliverer {
    pub fn new(db: Db, policy: Policy, process_id: String) -> Arc<Self> {
        Arc::new(Self {
            sender: Sender::new(db.clone(), &policy),
            db,
            policy,
            process_id,
            running: Mutex::default(),
            slots: tokio::sync::Semaphore::new(AT_ONCE),
            gauged: Mutex::default(),
        })
    }

    /// Looks for due subscriptions every [`POLL`], and sets the lag gauges every few seconds.
    pub fn spawn(self: Arc<Self>) {
        tokio::spawn(async move {
            // The embedded store is one process's: leases left by a killed one are free now.
            if !self.db.is_postgres() {
                if let Err(error) = leases::free_all(&self.db).await {
                    tracing::warn!(%error, "could not free the webhooks' leases");
                }
            }
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
                .expect("a timeout of at most an hour"),
            dead_since: Utc::now() - chrono::Duration::from_std(DEAD_AFTER).expect("small"),
        }
    }

    /// Starts a task for each due subscription this process is not delivering yet, within the
    /// study's share.
    #[tracing::instrument(skip(self))]
    pub async fn start_due(self: &Arc<Self>) -> Result<usize, sqlx::Error> {
        let due = leases::due(&self.db, &self.lease(), Utc::now()).await?;
        let mut started = 0;
        for (hook_id, study_id) in due {
            {
                let mut running = self.running.lock().expect("not poisoned");
                let (hooks, studies) = &mut *running;
                let of_study = studies.entry(study_id.clone()).or_default();
                if *of_study >= PER_STUDY || !hooks.insert(hook_id.clone()) {
                    continue;
                }
                *of_study += 1;
            }
            started += 1;
            let this = self.clone();
            tokio::spawn(async move {
                let _slot = this.slots.acquire().await.expect("never closed");
                if let Err(error) = this.deliver(&hook_id).await {
                    tracing::warn!(%error, hook_id, "webhook delivery stopped; will retry");
                }
                let mut running = this.running.lock().expect("not poisoned");
                let (hooks, studies) = &mut *running;
                hooks.remove(&hook_id);
                if let Some(n) = studies.get_mut(&study_id) {
                    *n -= 1;
                    if *n == 0 {
                        studies.remove(&study_id);
                    }
                }
            });
        }
        Ok(started)
    }

    /// Delivers the subscription's notices after its cursor while they succeed, for one turn.
    // Long by design: one loop over pages of notices with its ways out in order — nothing left, a
    // notice only a newer build can say, the turn used up, a failed attempt, the subscription
    // changed under the task — and the cursor moved past what the subscription does not take;
    // split, the cursor the task holds would travel between functions.
    #[tracing::instrument(skip(self))]
    async fn deliver(&self, hook_id: &str) -> Result<(), sqlx::Error> {
        let now = Utc::now();
        let Some(sub) = leases::take_lease(&self.db, hook_id, &self.lease(), now).await? else {
            return Ok(());
        };
        let release = || leases::release(&self.db, hook_id, &self.process_id, Utc::now());
        if sub.next_attempt_at > now {
            return release().await;
        }
        let (started, mut sent) = (Instant::now(), 0);
        let mut cursor = sub.delivered_through;
        loop {
            let page = notices::after(&self.db, &sub.study_id, cursor, PAGE).await?;
            let Some(last) = page.last().map(|read| match read {
                Ok(notice) => notice.position,
                Err(unknown) => unknown.position,
            }) else {
                return release().await;
            };
            for read in page {
                let notice = match read {
                    Ok(notice) if sub.events.iter().any(|e| e == notice.kind.as_str()) => notice,
                    // Not taken by this subscription: the cursor moves past it with the next move.
                    Ok(_) => continue,
                    Err(unknown) if !sub.events.contains(&unknown.kind) => continue,
                    // Taken, but only a newer build can say it: left for a newer process.
                    Err(unknown) => {
                        tracing::warn!(
                            hook_id,
                            kind = unknown.kind,
                            "a notice only a newer build can deliver"
                        );
                        self.advance_to(hook_id, cursor, unknown.position - 1)
                            .await?;
                        return release().await;
                    }
                };
                let before = notice.position - 1;
                if sent >= TURN || started.elapsed() >= TURN_TIME {
                    self.advance_to(hook_id, cursor, before).await?;
                    return release().await;
                }
                if !self.advance_to(hook_id, cursor, before).await? {
                    return Ok(());
                }
                cursor = cursor.max(before);
                match self.sender.attempt(&sub, &notice).await {
                    Ok(()) if self.advance_to(hook_id, cursor, notice.position).await? => {
                        cursor = notice.position;
                        sent += 1;
                    }
                    Ok(()) => return Ok(()),
                    Err(error) => return self.retry_later(&sub, cursor, &error).await,
                }
            }
            // What is left of the page is not taken by this subscription.
            if !self.advance_to(hook_id, cursor, last).await? {
                return Ok(());
            }
            cursor = cursor.max(last);
        }
    }

    /// Moves the cursor from `from` to `to` (nothing to do when it is there); false when this
    /// task no longer holds the subscription as it was (a redelivery, a takeover, a delete).
    async fn advance_to(&self, hook_id: &str, from: i64, to: i64) -> Result<bool, sqlx::Error> {
        if to <= from {
            return Ok(true);
        }
        let moved = leases::advance(&self.db, hook_id, &self.lease(), from, to, Utc::now()).await?;
        if !moved {
            tracing::info!(
                hook_id,
                "the webhook was redelivered, taken over or deleted meanwhile"
            );
        }
        Ok(moved)
    }

    /// Schedules the next attempt after a failure; the subscription is marked failing once the
    /// notice has been retried for the whole window.
    async fn retry_later(
        &self,
        sub: &Subscription,
        cursor: i64,
        error: &str,
    ) -> Result<(), sqlx::Error> {
        let now = Utc::now();
        let attempts = sub.attempts + 1;
        let failure = Failure {
            cursor,
            at: now,
            next: now + chrono::Duration::from_std(wait(&self.policy, attempts)).expect("small"),
            window_start: chrono::Duration::from_std(self.policy.retry_for)
                .ok()
                .and_then(|window| now.checked_sub_signed(window))
                .unwrap_or(chrono::DateTime::<Utc>::MIN_UTC),
            error,
        };
        let failing =
            leases::retry_later(&self.db, &sub.hook_id, &self.process_id, &failure).await?;
        if failing == Some(true) {
            tracing::warn!(
                hook_id = sub.hook_id,
                attempts,
                "a webhook is failing: it waits for a redelivery"
            );
        }
        Ok(())
    }

    #[tracing::instrument(skip(self))]
    async fn set_gauges(&self) -> Result<(), sqlx::Error> {
        let now = Utc::now();
        let hooks = leases::oldest_undelivered(&self.db).await?;
        let mut gauged = self.gauged.lock().expect("not poisoned");
        let present: HashSet<String> = hooks.iter().map(|(id, _)| id.clone()).collect();
        // A deleted subscription's series stays at zero rather than at its last lag.
        for gone in gauged.difference(&present) {
            metrics::gauge!("interview_webhook_oldest_undelivered_seconds", "hook_id" => gone.clone())
                .set(0.0);
        }
        for (hook_id, oldest) in hooks {
            let age = oldest.map_or(0.0, |at| (now - at).num_milliseconds().max(0) as f64 / 1e3);
            metrics::gauge!("interview_webhook_oldest_undelivered_seconds", "hook_id" => hook_id)
                .set(age);
        }
        *gauged = present;
        Ok(())
    }
}

/// The wait before attempt `attempts + 1`: the base doubled per failed attempt, give or take a
/// quarter (so receivers that failed together are not retried together), at most [`MAX_WAIT`].
pub fn wait(policy: &Policy, attempts: i64) -> Duration {
    let doubled = policy
        .retry_base
        .saturating_mul(1u32 << (attempts - 1).clamp(0, 20) as u32);
    let mut random = [0u8; 2];
    getrandom::fill(&mut random).expect("the OS random source works");
    let jitter = 0.75 + f64::from(u16::from_le_bytes(random)) / f64::from(u16::MAX) / 2.0;
    doubled.mul_f64(jitter).min(MAX_WAIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_with_jitter_up_to_an_hour() {
        let policy = Policy::default();
        for (attempts, secs) in [(1, 1.0), (2, 2.0), (3, 4.0), (10, 512.0)] {
            let w = wait(&policy, attempts).as_secs_f64();
            assert!(w >= secs * 0.75 && w <= secs * 1.25, "{attempts}: {w}");
        }
        for attempts in [13, 30, 1000] {
            assert!(wait(&policy, attempts) <= MAX_WAIT);
            assert!(wait(&policy, attempts) >= MAX_WAIT.mul_f64(0.75));
        }
    }
}
