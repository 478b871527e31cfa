//! One lock per session with a command in flight in this process, so commands on one session
//! queue while commands on different sessions never wait for each other.
//!
//! It replaced 256 striped locks: with 16 sessions busy at once, two of them shared a stripe
//! about four runs in ten (the birthday bound), and one session's command then waited for the
//! other's commit — the tail the 16-client AG-UI bench showed (`docs/benchmarks.md`). An entry
//! lives only while a command holds or waits for it, so memory stays bounded by the commands in
//! flight.

use std::collections::HashMap;
use std::sync::{Arc, Mutex as MapMutex};

use tokio::sync::{Mutex, OwnedMutexGuard};

#[derive(Default)]
pub(crate) struct SessionLocks(MapMutex<HashMap<String, Arc<Mutex<()>>>>);

/// A session's lock, held; dropping it lets the next command on the session go, and forgets the
/// entry when no other command waits for it.
pub(crate) struct Held<'a> {
    locks: &'a SessionLocks,
    id: String,
    lock: Arc<Mutex<()>>,
    guard: Option<OwnedMutexGuard<()>>,
}

impl SessionLocks {
    /// Waits until no other command of this process holds session `id`'s lock, and takes it.
    pub(crate) async fn lock(&self, id: &str) -> Held<'_> {
        let lock = self.entries().entry(id.to_string()).or_default().clone();
        // Made before waiting: a caller that goes away while waiting (a client hanging up)
        // drops it, and the entry is forgotten as after a command.
        let mut held = Held {
            locks: self,
            id: id.to_string(),
            lock,
            guard: None,
        };
        held.guard = Some(held.lock.clone().lock_owned().await);
        held
    }

    /// Sessions with a command holding or waiting for their lock.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries().len()
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Mutex<()>>>> {
        // The map is only read and written in these few lines, none of which panics.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.guard = None;
        let mut entries = self.locks.entries();
        // Counted under the map's lock, where every other command takes its copy: the map's and
        // this one mean nobody else holds or waits.
        if Arc::strong_count(&self.lock) == 2 {
            entries.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn commands_on_one_session_queue_and_others_do_not_wait() {
        let locks = SessionLocks::default();
        let first = locks.lock("a").await;
        // Another session goes at once.
        let other = tokio::time::timeout(Duration::from_millis(100), locks.lock("b")).await;
        assert!(other.is_ok(), "a different session waited");
        drop(other);
        // The same session waits until the first lets go.
        let waiting = tokio::time::timeout(Duration::from_millis(50), locks.lock("a")).await;
        assert!(
            waiting.is_err(),
            "a second command on the session did not wait"
        );
        drop(first);
        let second = tokio::time::timeout(Duration::from_millis(100), locks.lock("a")).await;
        assert!(second.is_ok());
        drop(second);
        assert_eq!(locks.len(), 0, "entries outlived their commands");
    }

    #[tokio::test]
    async fn a_waiter_that_goes_away_leaves_nothing_behind() {
        let locks = SessionLocks::default();
        let first = locks.lock("a").await;
        // Gives up waiting (its future dropped) while the first still holds the lock.
        let gave_up = tokio::time::timeout(Duration::from_millis(20), locks.lock("a")).await;
        assert!(gave_up.is_err());
        assert_eq!(locks.len(), 1);
        drop(first);
        assert_eq!(locks.len(), 0, "the waiter that went away left its entry");
    }
}
