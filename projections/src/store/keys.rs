//! Data keys (`docs/privacy.md`): every session has its own random key that encrypts its
//! personal content in `events` (`encrypted.rs`), kept in `session_keys` wrapped by a
//! key-encryption key (KEK). An erasure deletes the session's row here, so whatever copy of the
//! encrypted events outlives it — a dead page, a backup of the log — can no longer be read.
//!
//! The KEK comes from `DATA_KEY` or `DATA_KEY_FILE`; failing both, the embedded store generates
//! one into `DATA_DIR/data.key` (mode 600), and PostgreSQL keeps a generated one in the
//! database (`kept_key_encryption_keys`) and says so at start-up. Each wrapped key names its
//! KEK by id, so a KEK can be replaced: the start-up moves every session key under the current
//! one, unwrapping with any KEK named in `DATA_KEYS_RETIRED` (or kept in the database).
//!
//! KEKs are registered process-wide by id ([`register`]): a process may open stores written
//! under different KEKs (the tests run many servers in one process), and a wrapped key says
//! which one it needs. Which KEK wraps new keys is each server's own ([`Kek`] in its store).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, RwLock};

use base64::Engine as _;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hashlink::LruCache;
use sha2::{Digest, Sha256};

use crate::on_db;
use crate::store::backend::{Backend, Statement};
use crate::store::db::Db;

const KEY_BYTES: usize = 32;
const NONCE_BYTES: usize = 24;

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{0} must be 32 bytes written as 64 hex digits or in base64")]
    Malformed(&'static str),
    #[error("cannot read or create the data key file {path}: {source}")]
    File {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "the data key file {path} can be read by other users (mode {mode:o}): \
         run `chmod 600 {path}`"
    )]
    ReadableByOthers { path: String, mode: u32 },
    #[error(
        "{count} session key(s) are wrapped by the key-encryption key {key_id}, which is not \
         configured: set DATA_KEY (or DATA_KEY_FILE) to it, or name it in DATA_KEYS_RETIRED \
         (docs/privacy.md)"
    )]
    NotConfigured { key_id: String, count: usize },
    #[error(
        "the key of session {session_id} does not unwrap under the key-encryption key \
         {key_id}: the key or the table was changed"
    )]
    Unwrap { session_id: String, key_id: String },
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
}

/// Encrypts `plaintext` under `cipher` with a fresh random nonce: `nonce ‖ ciphertext ‖ tag`.
/// `aad` is bound to it unencrypted (what the sealed bytes belong to).
fn seal(cipher: &XChaCha20Poly1305, aad: &[u8], plaintext: &[u8]) -> Vec<u8> {
    let mut nonce = [0u8; NONCE_BYTES];
    getrandom::fill(&mut nonce).expect("the operating system gives random bytes");
    let sealed = cipher
        .encrypt(
            XNonce::from_slice(&nonce),
            Payload {
                msg: plaintext,
                aad,
            },
        )
        .expect("XChaCha20-Poly1305 encrypts any message this size");
    [nonce.as_slice(), &sealed].concat()
}

/// The plaintext [`seal`] sealed, or `None` when `sealed` was not sealed by this key for `aad`.
fn open(cipher: &XChaCha20Poly1305, aad: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
    if sealed.len() < NONCE_BYTES {
        return None;
    }
    let (nonce, ciphertext) = sealed.split_at(NONCE_BYTES);
    cipher
        .decrypt(
            XNonce::from_slice(nonce),
            Payload {
                msg: ciphertext,
                aad,
            },
        )
        .ok()
}

fn random_key() -> [u8; KEY_BYTES] {
    let mut key = [0u8; KEY_BYTES];
    getrandom::fill(&mut key).expect("the operating system gives random bytes");
    key
}

/// A session's data key.
#[derive(Clone)]
pub struct DataKey(XChaCha20Poly1305);

impl DataKey {
    pub fn from_bytes(key: &[u8; KEY_BYTES]) -> Self {
        Self(XChaCha20Poly1305::new(key.into()))
    }

    pub fn seal(&self, aad: &[u8], plaintext: &[u8]) -> Vec<u8> {
        seal(&self.0, aad, plaintext)
    }

    pub fn open(&self, aad: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
        open(&self.0, aad, sealed)
    }
}

/// A key-encryption key. Its id is a digest of it: it names the key without revealing it.
pub struct Kek {
    id: String,
    cipher: XChaCha20Poly1305,
}

impl std::fmt::Debug for Kek {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Kek({})", self.id)
    }
}

impl Kek {
    pub fn from_bytes(key: &[u8; KEY_BYTES]) -> Self {
        let digest = Sha256::new()
            .chain_update(b"interview-runtime key-encryption key\n")
            .chain_update(key)
            .finalize();
        Self {
            id: interview_session::hash::to_hex(&digest[..8]),
            cipher: XChaCha20Poly1305::new(key.into()),
        }
    }

    /// A key written as 64 hex digits or in base64 (standard or URL-safe, padded or not).
    pub fn parse(text: &str, what: &'static str) -> Result<Self, KeyError> {
        let text = text.trim();
        let bytes = if text.len() == 2 * KEY_BYTES && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            interview_session::codec::hex_to_bytes(&text.to_ascii_lowercase())
        } else {
            let engines = [
                base64::engine::general_purpose::STANDARD,
                base64::engine::general_purpose::STANDARD_NO_PAD,
                base64::engine::general_purpose::URL_SAFE,
                base64::engine::general_purpose::URL_SAFE_NO_PAD,
            ];
            engines.iter().find_map(|e| e.decode(text).ok())
        };
        let key: [u8; KEY_BYTES] = bytes
            .and_then(|b| b.try_into().ok())
            .ok_or(KeyError::Malformed(what))?;
        Ok(Self::from_bytes(&key))
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    fn aad(session_id: &str) -> Vec<u8> {
        format!("session key\n{session_id}").into_bytes()
    }

    fn wrap(&self, session_id: &str, key: &[u8; KEY_BYTES]) -> Vec<u8> {
        seal(&self.cipher, &Self::aad(session_id), key)
    }

    fn unwrap(&self, session_id: &str, wrapped: &[u8]) -> Result<[u8; KEY_BYTES], KeyError> {
        open(&self.cipher, &Self::aad(session_id), wrapped)
            .and_then(|k| k.try_into().ok())
            .ok_or_else(|| KeyError::Unwrap {
                session_id: session_id.into(),
                key_id: self.id.clone(),
            })
    }
}

/// Every KEK this process was given, by id.
static KEKS: LazyLock<RwLock<HashMap<String, Arc<Kek>>>> = LazyLock::new(Default::default);

/// Makes `kek` available to unwrap the session keys that name it.
pub fn register(kek: Arc<Kek>) {
    KEKS.write()
        .expect("never poisoned")
        .insert(kek.id.clone(), kek);
}

fn registered(id: &str) -> Option<Arc<Kek>> {
    KEKS.read().expect("never poisoned").get(id).cloned()
}

/// Session keys recently used, unwrapped (an erasure forgets its session's: [`forget`]).
static DATA_KEYS: LazyLock<Mutex<LruCache<String, DataKey>>> =
    LazyLock::new(|| Mutex::new(LruCache::new(16_384)));

fn cached(session_id: &str) -> Option<DataKey> {
    DATA_KEYS
        .lock()
        .expect("never poisoned")
        .get(session_id)
        .cloned()
}

fn keep(session_id: &str, key: DataKey) {
    if ERASED
        .lock()
        .expect("never poisoned")
        .contains_key(session_id)
    {
        return;
    }
    DATA_KEYS
        .lock()
        .expect("never poisoned")
        .insert(session_id.to_string(), key);
}

/// Sessions this process erased lately: their keys are never kept again, whatever a reader
/// that read the key row before the erasure committed does next.
static ERASED: LazyLock<Mutex<LruCache<String, ()>>> =
    LazyLock::new(|| Mutex::new(LruCache::new(16_384)));

/// Drops a session's key from memory (its row is being deleted).
pub fn forget(session_id: &str) {
    DATA_KEYS.lock().expect("never poisoned").remove(session_id);
}

/// A session's erasure is committed: its key is dropped from memory and never kept again.
pub fn erased(session_id: &str) {
    ERASED
        .lock()
        .expect("never poisoned")
        .insert(session_id.to_string(), ());
    forget(session_id);
}

/// A stored key as a reader takes it: one that does not unwrap here (its KEK is not
/// configured, or the row was changed) is no key — what it encrypted stays encrypted and fails
/// to decode, saying so — rather than an error that would hide which events are affected.
fn readable(session_id: &str, key_id: &str, wrapped: &[u8]) -> Option<DataKey> {
    match unwrapped(session_id, key_id, wrapped) {
        Ok(key) => {
            keep(session_id, key.clone());
            Some(key)
        }
        Err(error) => {
            tracing::warn!(%error, "a session key does not unwrap");
            None
        }
    }
}

/// A stored wrapped key, unwrapped with the KEK it names.
fn unwrapped(session_id: &str, key_id: &str, wrapped: &[u8]) -> Result<DataKey, KeyError> {
    let kek = registered(key_id).ok_or_else(|| KeyError::NotConfigured {
        key_id: key_id.into(),
        count: 1,
    })?;
    Ok(DataKey::from_bytes(&kek.unwrap(session_id, wrapped)?))
}

/// The session's data key, if it has one (a session written before keys, or erased, has none).
#[tracing::instrument(skip(db), err)]
pub async fn for_reading(db: &Db, session_id: &str) -> Result<Option<DataKey>, KeyError> {
    if let Some(key) = cached(session_id) {
        return Ok(Some(key));
    }
    let row: Option<(String, Vec<u8>)> = on_db!(read(db), |pool| {
        sqlx::query_as(include_str!("sql/session_key.sql"))
            .bind(session_id)
            .fetch_optional(pool)
            .await?
    });
    Ok(row.and_then(|(key_id, wrapped)| readable(session_id, &key_id, &wrapped)))
}

/// The session's data key, created (wrapped under `kek`) when it has none yet. Two processes
/// creating one at once agree on the first stored.
#[tracing::instrument(skip(db, kek), err)]
pub async fn for_writing(db: &Db, session_id: &str, kek: &Kek) -> Result<DataKey, KeyError> {
    if let Some(key) = for_reading(db, session_id).await? {
        return Ok(key);
    }
    let wrapped = kek.wrap(session_id, &random_key());
    on_db!(write(db), |pool| {
        sqlx::query(include_str!("sql/insert_session_key.sql"))
            .bind(session_id)
            .bind(kek.id())
            .bind(&wrapped)
            .bind(chrono::Utc::now())
            .execute(pool)
            .await?;
    });
    // Read back through the write side, which sees the row just stored on either store.
    let (key_id, wrapped): (String, Vec<u8>) = on_db!(write(db), |pool| {
        sqlx::query_as(include_str!("sql/session_key.sql"))
            .bind(session_id)
            .fetch_one(pool)
            .await?
    });
    let key = unwrapped(session_id, &key_id, &wrapped)?;
    keep(session_id, key.clone());
    Ok(key)
}

/// The keys of `session_ids` that have one (a bulk rebuild's batch), in one query.
pub async fn for_sessions(
    db: &Db,
    session_ids: &[&str],
) -> Result<HashMap<String, DataKey>, KeyError> {
    let mut found = HashMap::new();
    let mut missing = Vec::new();
    for id in session_ids {
        match cached(id) {
            Some(key) => {
                found.insert(id.to_string(), key);
            }
            None => missing.push(*id),
        }
    }
    for chunk in missing.chunks(500) {
        let rows: Vec<(String, String, Vec<u8>)> = on_db!(read(db), |pool| {
            let mut q = sqlx::QueryBuilder::new(
                "SELECT aggregate_id, key_id, wrapped FROM session_keys WHERE aggregate_id IN (",
            );
            let mut list = q.separated(", ");
            for id in chunk {
                list.push_bind(*id);
            }
            q.push(")");
            q.build_query_as().fetch_all(pool).await?
        });
        for (id, key_id, wrapped) in rows {
            if let Some(key) = readable(&id, &key_id, &wrapped) {
                found.insert(id, key);
            }
        }
    }
    Ok(found)
}

/// The session's data key as the transaction sees it.
pub(crate) async fn in_transaction<'c, DB: Backend>(
    tx: &mut sqlx::Transaction<'c, DB>,
    session_id: &str,
) -> Result<Option<DataKey>, KeyError> {
    use crate::store::backend::ReadColumn;
    if let Some(key) = cached(session_id) {
        return Ok(Some(key));
    }
    let row = sqlx::query(include_str!("sql/session_key.sql"))
        .arg(session_id)
        .fetch_optional_in(tx)
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let (key_id, wrapped): (String, Option<Vec<u8>>) = (row.read(0)?, row.read(1)?);
    Ok(readable(session_id, &key_id, &wrapped.unwrap_or_default()))
}

/// Deletes the session's key in the erasure's transaction: what it encrypted is unreadable once
/// that commits.
pub(crate) async fn delete_in_transaction<'c, DB: Backend>(
    tx: &mut sqlx::Transaction<'c, DB>,
    session_id: &str,
) -> Result<(), sqlx::Error> {
    forget(session_id);
    sqlx::query(include_str!("sql/delete_session_key.sql"))
        .arg(session_id)
        .execute_in(tx)
        .await?;
    Ok(())
}

/// Where a process finds its KEKs.
#[derive(Debug, Default, Clone)]
pub struct KeySource {
    /// `DATA_KEY`.
    pub configured: Option<String>,
    /// `DATA_KEY_FILE`.
    pub file: Option<PathBuf>,
    /// The embedded store's generated key file (`DATA_DIR/data.key`), used when neither is set.
    pub default_file: Option<PathBuf>,
    /// `DATA_KEYS_RETIRED`: earlier KEKs, to unwrap keys not yet moved under the current one.
    pub retired: Vec<String>,
}

pub mod setup;
pub use setup::{open_for_reading, start};

/// The permission bits of a secret's file when its group or other users may use it (a secret
/// other users can read is one they have), `None` when only its owner can.
pub fn open_to_others(path: &Path) -> std::io::Result<Option<u32>> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path)?.permissions().mode() & 0o777;
        Ok((mode & 0o077 != 0).then_some(mode))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(None)
    }
}

/// Reads a key file, refusing one other users can read.
fn read_key_file(path: &Path, what: &'static str) -> Result<Kek, KeyError> {
    let fail = |source| KeyError::File {
        path: path.display().to_string(),
        source,
    };
    let text = std::fs::read_to_string(path).map_err(fail)?;
    if let Some(mode) = open_to_others(path).map_err(fail)? {
        return Err(KeyError::ReadableByOthers {
            path: path.display().to_string(),
            mode,
        });
    }
    Kek::parse(&text, what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrapped_key_opens_only_for_its_session_under_its_kek() {
        let kek = Kek::from_bytes(&[7; 32]);
        let other = Kek::from_bytes(&[8; 32]);
        let wrapped = kek.wrap("s1", &[1; 32]);
        assert_eq!(kek.unwrap("s1", &wrapped).unwrap(), [1; 32]);
        assert!(
            kek.unwrap("s2", &wrapped).is_err(),
            "moved to another session"
        );
        assert!(other.unwrap("s1", &wrapped).is_err(), "another KEK");
        let mut changed = wrapped.clone();
        changed[30] ^= 1;
        assert!(kek.unwrap("s1", &changed).is_err(), "changed bytes");
    }

    #[test]
    fn a_kek_is_read_from_hex_or_base64_and_named_by_a_digest() {
        let hex = "00".repeat(31) + "ff";
        let a = Kek::parse(&hex, "DATA_KEY").unwrap();
        let mut bytes = [0u8; 32];
        bytes[31] = 0xff;
        let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
        let b = Kek::parse(&b64, "DATA_KEY").unwrap();
        assert_eq!(a.id(), b.id());
        assert_eq!(a.id().len(), 16);
        assert!(!hex.starts_with(a.id()), "the id does not show the key");
        for bad in ["", "abc", &"0".repeat(63), &"zz".repeat(32)] {
            assert!(Kek::parse(bad, "DATA_KEY").is_err(), "{bad:?}");
        }
    }
}
