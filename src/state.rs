//! Shared application state handed to every handler: the domain services (store, interviewer,
//! projections, the hub) and what the server keeps about its callers. The HTTP layer's own
//! guards (rate limits, caps) are `crate::http::guards::Guards`.

use std::collections::HashSet;
use std::sync::Arc;

use interview_projections::{Db, Projector};

use crate::command::store::SessionStore;
use crate::interviewer::Interviewer;
use crate::live::stream_hub::StreamHub;
use crate::settings::Settings;

pub struct AppState {
    pub db: Db,
    pub store: Arc<SessionStore>,
    pub interviewer: Arc<Interviewer>,
    pub projector: Arc<Projector>,
    pub hub: Arc<StreamHub>,
    pub settings: Settings,
    /// SHA-256 digests of the researcher tokens.
    pub researcher_token_digests: HashSet<String>,
    /// Single sign-on's provider keys, when `OIDC_*` is set.
    pub sso: Option<Arc<crate::access::sso::Sso>>,
    /// The key-encryption key that wraps new sessions' data keys.
    pub data_kek: std::sync::Arc<interview_projections::keys::Kek>,
    /// Participant token digests already read, by session: a session's token never changes,
    /// so the check on every participant request need not read the database each time.
    pub participant_token_digests: std::sync::Mutex<hashlink::LruCache<uuid::Uuid, String>>,
    /// Serializes a study's place checks with the create or consent that follows each, in this
    /// process: one lock per stripe of studies, so a flood on one study does not queue another's
    /// (`crate::http::routes::join`).
    pub study_locks: StudyLocks,
    /// The last readiness check (`/readyz`) and when it ran: probes are outside the request
    /// cap, so they share one database round trip per [`crate::http::routes::health::READY_FOR`].
    pub readiness: tokio::sync::Mutex<Option<(std::time::Instant, bool)>>,
    /// Set once the process is stopping (SIGTERM/SIGINT): event streams close at once with a
    /// retry hint, so clients reconnect elsewhere, and new requests answer 503.
    pub draining: tokio::sync::watch::Sender<bool>,
}

impl AppState {
    /// What an erasure reaches in this process.
    pub fn erasing(&self) -> crate::command::erasure::Erasing<'_> {
        crate::command::erasure::Erasing {
            db: &self.db,
            store: &self.store,
            copies: &*self.interviewer,
        }
    }
}

/// Striped in-process locks, one stripe per study id's hash.
pub struct StudyLocks([tokio::sync::Mutex<()>; 64]);

impl Default for StudyLocks {
    fn default() -> Self {
        Self(std::array::from_fn(|_| tokio::sync::Mutex::new(())))
    }
}

impl StudyLocks {
    /// The lock of `study_id`'s stripe.
    pub fn of(&self, study_id: &str) -> &tokio::sync::Mutex<()> {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        study_id.hash(&mut hasher);
        &self.0[(hasher.finish() % 64) as usize]
    }
}
