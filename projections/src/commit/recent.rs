//! The views of recently written sessions, kept in memory so a command's fold starts from them.

use std::sync::Mutex;

use hashlink::LruCache;

use crate::read_side::views::SessionStateView;

/// The `session_state` view of recently written sessions, as committed. A command's fold
/// starts from it instead of reading and decoding the row; the write is guarded by the view's
/// `last_seq`, so a stale entry (views rebuilt, another process) only costs the slow path.
/// Bounded: the least recently used entry goes first.
pub(crate) struct RecentViews(Mutex<LruCache<String, SessionStateView>>);

impl Default for RecentViews {
    fn default() -> Self {
        Self(Mutex::new(LruCache::new(RECENT_VIEWS)))
    }
}

impl std::fmt::Debug for RecentViews {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecentViews")
    }
}

/// How many sessions' views the projector keeps in memory.
const RECENT_VIEWS: usize = 2048;

impl RecentViews {
    /// The `last_seq` of the view kept for `session_id`, leaving the order of use as it is.
    pub(crate) fn kept_seq(&self, session_id: &str) -> Option<u64> {
        self.0
            .lock()
            .expect("the view cache is never poisoned")
            .peek(session_id)
            .map(|view| view.last_seq)
    }

    pub(crate) fn take(&self, session_id: &str) -> Option<SessionStateView> {
        self.0
            .lock()
            .expect("the view cache is never poisoned")
            .remove(session_id)
    }

    pub(crate) fn keep(&self, view: SessionStateView) {
        self.0
            .lock()
            .expect("the view cache is never poisoned")
            .insert(view.session_id.clone(), view);
    }
}
