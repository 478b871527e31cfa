//! Finding a process's key-encryption keys at start-up, and moving session keys under the
//! current one.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use super::{random_key, read_key_file, register, Kek, KeyError, KeySource};
use crate::on_db;
use crate::store::db::Db;

/// The server's start: registers every KEK it is given, picks the current one (generating it
/// where none is configured), moves every session key under it, and forgets KEKs the database
/// kept once no key needs them. Refuses to start when a stored key names a KEK it was not given:
/// new sessions would be written under another KEK than the old ones, and the old ones could
/// not be read.
// Long by design: the steps of one start in order: gather the KEKs given and kept, pick the current
// one by a priority list (DATA_KEY, DATA_KEY_FILE, the default key file, then the one the database
// keeps or a new one), register them all, move every session key under the current one, and only
// then forget kept KEKs no key names; the order is the behaviour, keys being moved only once every
// KEK that may have wrapped them is registered.
pub async fn start(db: &Db, source: &KeySource) -> Result<Arc<Kek>, KeyError> {
    // What this start was given, apart from what other servers in this process registered.
    let mut given: HashMap<String, Arc<Kek>> = HashMap::new();
    for text in &source.retired {
        let kek = Arc::new(Kek::parse(text, "DATA_KEYS_RETIRED")?);
        given.insert(kek.id().to_string(), kek);
    }
    let kept = kept(db).await?;
    for kek in &kept {
        given.insert(kek.id().to_string(), kek.clone());
    }
    let current = if let Some(text) = &source.configured {
        Arc::new(Kek::parse(text, "DATA_KEY")?)
    } else if let Some(path) = &source.file {
        Arc::new(read_key_file(path, "DATA_KEY_FILE")?)
    } else if let Some(path) = &source.default_file {
        let kek = Arc::new(read_or_create_key_file(path)?);
        tracing::info!(path = %path.display(), key_id = kek.id(), "data key file (DATA_KEY is unset)");
        kek
    } else {
        let kek = match kept.first() {
            Some(kek) => kek.clone(),
            // Keys stored under a KEK that was configured before: say so rather than generate
            // another one that reads none of them.
            None => match key_groups(db).await?.into_iter().next() {
                Some((key_id, count)) => {
                    return Err(KeyError::NotConfigured {
                        key_id,
                        count: count as usize,
                    })
                }
                None => keep_new(db).await?,
            },
        };
        // Said at every start, but not as a warning: this is the default, and it works.
        tracing::info!(
            key_id = kek.id(),
            "DATA_KEY is unset: the key-encryption key is kept in the database itself, so a copy \
             of the database is readable without it; set DATA_KEY to keep it apart (docs/privacy.md)"
        );
        kek
    };
    given.insert(current.id().to_string(), current.clone());
    for kek in given.values() {
        register(kek.clone());
    }
    let moved = move_keys_under(db, &current, &given).await?;
    if moved > 0 {
        tracing::info!(
            moved,
            key_id = current.id(),
            "session keys moved under the current key-encryption key"
        );
    }
    on_db!(write(db), |pool| {
        // Only one no session key names any more: a server still running under it (an older
        // process on this database) may have wrapped keys with it since the move.
        let forgotten = sqlx::query(include_str!("../sql/delete_unused_kept_keks.sql"))
            .bind(current.id())
            .execute(pool)
            .await?
            .rows_affected();
        if forgotten > 0 {
            tracing::info!(
                "the key-encryption key kept in the database is deleted: DATA_KEY replaces it"
            );
        }
    });
    Ok(current)
}

/// A reader's start (`replay`): registers every KEK it can find, creating none and moving
/// nothing. Sessions whose KEK is missing fail to decode, saying so.
pub async fn open_for_reading(db: &Db, source: &KeySource) -> Result<(), KeyError> {
    for text in &source.retired {
        register(Arc::new(Kek::parse(text, "DATA_KEYS_RETIRED")?));
    }
    if let Some(text) = &source.configured {
        register(Arc::new(Kek::parse(text, "DATA_KEY")?));
    }
    if let Some(path) = &source.file {
        register(Arc::new(read_key_file(path, "DATA_KEY_FILE")?));
    }
    if let Some(path) = source.default_file.as_ref().filter(|p| p.exists()) {
        register(Arc::new(read_key_file(path, "the data key file")?));
    }
    // A database from before data keys has no such table, and nothing encrypted.
    for kek in kept(db).await.unwrap_or_default() {
        register(kek);
    }
    Ok(())
}

/// The KEKs the database keeps (PostgreSQL without `DATA_KEY`).
async fn kept(db: &Db) -> Result<Vec<Arc<Kek>>, KeyError> {
    let rows: Vec<(Vec<u8>,)> = on_db!(read(db), |pool| {
        sqlx::query_as(include_str!("../sql/kept_keks.sql"))
            .fetch_all(pool)
            .await?
    });
    rows.into_iter()
        .map(|(bytes,)| {
            let key: [u8; 32] = bytes
                .try_into()
                .map_err(|_| KeyError::Malformed("a key kept in kept_key_encryption_keys"))?;
            Ok(Arc::new(Kek::from_bytes(&key)))
        })
        .collect()
}

/// Generates a KEK and keeps it in the database; two processes starting at once agree on the
/// first stored.
async fn keep_new(db: &Db) -> Result<Arc<Kek>, KeyError> {
    let key = random_key();
    let kek = Kek::from_bytes(&key);
    on_db!(write(db), |pool| {
        // Only when none is kept yet: the first process's wins.
        sqlx::query(include_str!("../sql/keep_kek.sql"))
            .bind(kek.id())
            .bind(key.as_slice())
            .bind(chrono::Utc::now())
            .execute(pool)
            .await?;
    });
    kept(db)
        .await?
        .into_iter()
        .next()
        .ok_or(KeyError::Malformed(
            "a key kept in kept_key_encryption_keys",
        ))
}

/// How many session keys each KEK wraps.
async fn key_groups(db: &Db) -> Result<Vec<(String, i64)>, KeyError> {
    Ok(on_db!(read(db), |pool| {
        sqlx::query_as(include_str!("../sql/session_keys_per_kek.sql"))
            .fetch_all(pool)
            .await?
    }))
}

/// Rewraps every session key not under `current`; refuses when one names a KEK not `given`.
async fn move_keys_under(
    db: &Db,
    current: &Kek,
    given: &HashMap<String, Arc<Kek>>,
) -> Result<u64, KeyError> {
    let by_kek = key_groups(db).await?;
    if let Some((key_id, count)) = by_kek.iter().find(|(id, _)| !given.contains_key(id)) {
        return Err(KeyError::NotConfigured {
            key_id: key_id.clone(),
            count: *count as usize,
        });
    }
    let mut moved = 0;
    loop {
        let batch: Vec<(String, String, Vec<u8>)> = on_db!(read(db), |pool| {
            sqlx::query_as(include_str!("../sql/session_keys_under_other_keks.sql"))
                .bind(current.id())
                .fetch_all(pool)
                .await?
        });
        if batch.is_empty() {
            return Ok(moved);
        }
        for (session_id, key_id, wrapped) in batch {
            let old = given.get(&key_id).ok_or_else(|| KeyError::NotConfigured {
                key_id: key_id.clone(),
                count: 1,
            })?;
            let key = old.unwrap(&session_id, &wrapped)?;
            let rewrapped = current.wrap(&session_id, &key);
            on_db!(write(db), |pool| {
                sqlx::query(include_str!("../sql/rewrap_session_key.sql"))
                    .bind(current.id())
                    .bind(&rewrapped)
                    .bind(&session_id)
                    .bind(&key_id)
                    .execute(pool)
                    .await?;
            });
            moved += 1;
        }
    }
}

/// Reads the embedded store's key file, or creates it (mode 600) with a new key: written whole
/// and synced under a temporary name, then linked into place only if no other process did so
/// first (a reader never meets a half-written key, and two starts agree on one), and the
/// folder synced, so the key is on disk before any session key it wraps.
fn read_or_create_key_file(path: &Path) -> Result<Kek, KeyError> {
    let fail = |source| KeyError::File {
        path: path.display().to_string(),
        source,
    };
    if path.exists() {
        return read_key_file(path, "the data key file");
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(fail)?;
    let key = random_key();
    let temporary = dir.join(format!(
        ".data.key.{}",
        interview_session::hash::to_hex(&random_key()[..8])
    ));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options.open(&temporary).and_then(|mut file| {
        let text = format!("{}\n", interview_session::hash::to_hex(&key));
        std::io::Write::write_all(&mut file, text.as_bytes())?;
        file.sync_all()
    });
    let linked = written.and_then(|()| match std::fs::hard_link(&temporary, path) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    });
    let _ = std::fs::remove_file(&temporary);
    linked.map_err(fail)?;
    #[cfg(unix)]
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(fail)?;
    read_key_file(path, "the data key file")
}
