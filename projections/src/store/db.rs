//! The database handle shared by the server, the projections and `replay`.
//!
//! PostgreSQL gets one pool. SQLite gets two: a single-connection write pool, so writes are
//! serialized in the process and never meet `SQLITE_BUSY`, and a pool of read-only connections
//! that WAL lets read while the writer writes.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

/// `on_db!(write(db), |pool| body)` runs `body` with `pool` bound to the backend's pool (the
/// `write` or `read` side for SQLite).
/// The body is compiled once per backend, so one query text serves both when it is portable.
#[macro_export]
macro_rules! on_db {
    (write($db:expr), |$pool:ident| $body:expr) => {
        match $db {
            $crate::store::db::Db::Postgres($pool) => $body,
            $crate::store::db::Db::Sqlite(sqlite) => {
                let $pool = &sqlite.write;
                $body
            }
        }
    };
    (read($db:expr), |$pool:ident| $body:expr) => {
        match $db {
            $crate::store::db::Db::Postgres($pool) => $body,
            $crate::store::db::Db::Sqlite(sqlite) => {
                let $pool = &sqlite.read;
                $body
            }
        }
    };
}

#[derive(Clone, Debug)]
pub struct SqliteStore {
    pub write: SqlitePool,
    pub read: SqlitePool,
}

#[derive(Clone, Debug)]
pub enum Db {
    Postgres(PgPool),
    Sqlite(SqliteStore),
}

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("DATABASE_URL must start with postgres:// or sqlite:// (got {0:?})")]
    UnsupportedUrl(String),
    #[error("cannot create the data directory {path}: {source}")]
    DataDir {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot open the database: {0}")]
    Connect(#[source] sqlx::Error),
    #[error("cannot apply the database migrations: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The database holds a migration this build does not know: a newer build wrote it, in a
    /// format this one may not read (README, "Upgrading").
    #[error(
        "the database was migrated by a newer build (its migration {0} is not one this build \
         knows): run that build or a newer one"
    )]
    NewerDatabase(i64),
}

impl DbError {
    /// A failed migration, told apart when a newer build migrated the database.
    fn migrating(error: sqlx::migrate::MigrateError) -> Self {
        match error {
            sqlx::migrate::MigrateError::VersionMissing(version) => Self::NewerDatabase(version),
            other => Self::Migrate(other),
        }
    }
}

/// Pool sizes and timeouts.
#[derive(Clone, Debug)]
pub struct PoolSettings {
    pub max_connections: u32,
    pub acquire_timeout: Duration,
}

impl Default for PoolSettings {
    fn default() -> Self {
        Self {
            max_connections: 16,
            acquire_timeout: Duration::from_secs(3),
        }
    }
}

impl Db {
    /// Opens (and for SQLite creates) the database named by `url` and applies the migrations.
    pub async fn connect(url: &str, settings: &PoolSettings) -> Result<Self, DbError> {
        let db = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let options = PgConnectOptions::from_str(url).map_err(DbError::Connect)?;
            let pool = untested_on_acquire(PgPoolOptions::new())
                .max_connections(settings.max_connections)
                .acquire_timeout(settings.acquire_timeout)
                .connect_with(options)
                .await
                .map_err(DbError::Connect)?;
            Db::Postgres(pool)
        } else if let Some(path) = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
        {
            Db::Sqlite(open_sqlite(path, settings).await?)
        } else {
            return Err(DbError::UnsupportedUrl(url.to_string()));
        };
        db.migrate().await?;
        Ok(db)
    }

    /// Opens an existing database without changing it (no migrations; SQLite read-only).
    /// For tools such as `replay` that must only read the log.
    pub async fn open_read_only(url: &str) -> Result<Self, DbError> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let pool = PgPoolOptions::new()
                .max_connections(4)
                .acquire_timeout(Duration::from_secs(5))
                .connect(url)
                .await
                .map_err(DbError::Connect)?;
            return Ok(Db::Postgres(pool));
        }
        let path = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
            .ok_or_else(|| DbError::UnsupportedUrl(url.to_string()))?;
        let options = SqliteConnectOptions::new()
            .filename(path)
            .read_only(true)
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            .max_connections(2)
            .connect_with(options)
            .await
            .map_err(DbError::Connect)?;
        Ok(Db::Sqlite(SqliteStore {
            write: pool.clone(),
            read: pool,
        }))
    }

    async fn migrate(&self) -> Result<(), DbError> {
        let applied = match self {
            Db::Postgres(pool) => sqlx::migrate!("../migrations/postgres").run(pool).await,
            Db::Sqlite(s) => sqlx::migrate!("../migrations/sqlite").run(&s.write).await,
        };
        applied.map_err(DbError::migrating)
    }

    pub fn backend(&self) -> &'static str {
        match self {
            Db::Postgres(_) => "postgres",
            Db::Sqlite(_) => "sqlite",
        }
    }

    pub fn is_postgres(&self) -> bool {
        matches!(self, Db::Postgres(_))
    }

    /// One round trip to the database (readiness).
    pub async fn ping(&self) -> Result<(), sqlx::Error> {
        on_db!(write(self), |pool| sqlx::query(include_str!(
            "sql/ping.sql"
        ))
        .execute(pool)
        .await
        .map(|_| ()))
    }

    pub async fn close(&self) {
        match self {
            Db::Postgres(pool) => pool.close().await,
            Db::Sqlite(s) => {
                s.read.close().await;
                s.write.close().await;
            }
        }
    }
}

/// How long an SQLite statement waits for a lock before it fails.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(10);

async fn open_sqlite(path: &str, settings: &PoolSettings) -> Result<SqliteStore, DbError> {
    if let Some(dir) = Path::new(path)
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
    {
        let data_dir_error = |source| DbError::DataDir {
            path: dir.display().to_string(),
            source,
        };
        if !dir.exists() {
            std::fs::create_dir_all(dir).map_err(data_dir_error)?;
            // A folder this process made holds participants' data: only its owner may enter.
            owner_only(dir, 0o700).map_err(data_dir_error)?;
        }
    }
    // The database, and the WAL and shared-memory files SQLite creates with its permissions:
    // readable and writable by the owner only.
    create_owner_only(Path::new(path)).map_err(|source| DbError::DataDir {
        path: path.to_string(),
        source,
    })?;
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        // Deleted and overwritten content is zeroed in the file, not left in free space: an
        // erased participant's words must not stay in the database's bytes (docs/privacy.md).
        .pragma("secure_delete", "ON")
        .journal_mode(SqliteJournalMode::Wal)
        // WAL + NORMAL: a commit survives the process being killed; only a power cut can lose
        // the last transactions.
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(SQLITE_BUSY_TIMEOUT)
        .foreign_keys(true);
    // An SQLite connection is a file handle in this process: nothing can hang up on it, so it
    // is never pinged before it is handed out (each ping is a hop to its worker thread).
    let write = SqlitePoolOptions::new()
        .test_before_acquire(false)
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(30))
        .connect_with(options.clone())
        .await
        .map_err(DbError::Connect)?;
    // Migrations must run before read-only connections can open the file's schema.
    sqlx::migrate!("../migrations/sqlite")
        .run(&write)
        .await
        .map_err(DbError::migrating)?;
    let read = SqlitePoolOptions::new()
        .test_before_acquire(false)
        .max_connections(settings.max_connections.clamp(1, 8))
        .acquire_timeout(settings.acquire_timeout)
        .connect_with(options.read_only(true))
        .await
        .map_err(DbError::Connect)?;
    Ok(SqliteStore { write, read })
}

/// Sets `mode` on a file or folder (Unix; elsewhere nothing to do).
fn owner_only(path: &Path, mode: u32) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
    }
    #[cfg(not(unix))]
    {
        let _ = (path, mode);
        Ok(())
    }
}

/// Creates the database file with mode 600 if it is missing, else narrows it to 600.
fn create_owner_only(path: &Path) -> std::io::Result<()> {
    if path.exists() {
        return owner_only(path, 0o600);
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => owner_only(path, 0o600),
        Err(e) => Err(e),
    }
}

impl Db {
    /// On SQLite, copies the WAL into the database and empties it (`wal_checkpoint(TRUNCATE)`):
    /// pages an erasure overwrote must not live on in the log file. Nothing to do on PostgreSQL
    /// (`docs/privacy.md` says what its WAL and dead rows keep).
    #[tracing::instrument(skip(self), err)]
    /// Answers whether the WAL was emptied: a reader in the middle of a transaction holds its
    /// frames (the checkpoint then says busy), so it is tried a few times.
    pub async fn truncate_wal(&self) -> Result<bool, sqlx::Error> {
        let Db::Sqlite(s) = self else {
            return Ok(true);
        };
        // The checkpoint waits for readers through the busy handler, holding the one writer
        // connection meanwhile: it waits briefly here, between tries, rather than the writer's
        // usual ten seconds.
        let mut conn = s.write.acquire().await?;
        sqlx::query(include_str!("sql/sqlite_short_busy_timeout.sql"))
            .execute(&mut *conn)
            .await?;
        let mut emptied = Ok(false);
        for attempt in 0..5 {
            // (busy, frames in the WAL, frames checkpointed)
            let checkpoint: Result<(i64, i64, i64), _> =
                sqlx::query_as(include_str!("sql/sqlite_truncate_wal.sql"))
                    .fetch_one(&mut *conn)
                    .await;
            match checkpoint {
                Ok((0, _, _)) => emptied = Ok(true),
                Ok(_) => {
                    tokio::time::sleep(Duration::from_millis(20 << attempt)).await;
                    continue;
                }
                Err(e) => emptied = Err(e),
            }
            break;
        }
        // Back to the writer's usual patience, whatever happened.
        sqlx::query(&format!(
            "PRAGMA busy_timeout = {}",
            SQLITE_BUSY_TIMEOUT.as_millis()
        ))
        .execute(&mut *conn)
        .await?;
        emptied
    }
}

/// A PostgreSQL connection idle for longer than this is pinged before it is handed out.
pub(crate) const PING_AFTER_IDLE: Duration = Duration::from_secs(1);

/// sqlx pings every pooled connection before handing it out, by default: a round trip that
/// wakes a PostgreSQL backend before every statement the server sends, on the path of every
/// command. A connection in steady use has just answered, so only one that sat idle for a
/// while — long enough for the server to have restarted or a firewall to have dropped it — is
/// pinged; a connection that broke while in use fails its statement, the caller sees the
/// database unavailable (503 or a retry, as for any outage), and sqlx discards it when it comes
/// back (sqlx tests every connection on release).
fn untested_on_acquire(options: PgPoolOptions) -> PgPoolOptions {
    options
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for >= PING_AFTER_IDLE {
                    sqlx::Connection::ping(conn).await?;
                }
                Ok(true)
            })
        })
}

/// A committer's own PostgreSQL connection, kept from one batch to the next. Every statement
/// sent through the pool costs a second round trip: sqlx tests each connection when it goes
/// back (a `Sync` the backend must answer). A committer sends a statement per batch, all day:
/// holding its connection halves the round trips of the commit path. It goes back to the pool —
/// which tests it, and drops it if it broke — after a batch that failed, after a second unused
/// (the committer's wait for work gives it back in the group commit), after
/// [`HOLD_AT_MOST`], before a batch goes through the transaction path, and when the pool closes.
#[derive(Default)]
pub(crate) struct KeptConnection(Option<HeldConnection>);

struct HeldConnection {
    conn: sqlx::pool::PoolConnection<sqlx::Postgres>,
    since: std::time::Instant,
    used: std::time::Instant,
}

/// How long a committer keeps one connection at most, however busy: the pool's own lifetime
/// limit (sqlx's default, 30 minutes) is checked only when a connection comes back.
const HOLD_AT_MOST: Duration = Duration::from_secs(30 * 60);

impl KeptConnection {
    /// The held connection, or a new one from the pool; the pool's error when it has none to
    /// give (closed, or the database unreachable within the acquire timeout).
    pub(crate) async fn get(
        &mut self,
        pool: &sqlx::PgPool,
    ) -> Result<&mut sqlx::PgConnection, sqlx::Error> {
        if pool.is_closed() {
            self.release();
            return Err(sqlx::Error::PoolClosed);
        }
        if self.0.as_ref().is_some_and(|held| {
            held.used.elapsed() >= PING_AFTER_IDLE || held.since.elapsed() >= HOLD_AT_MOST
        }) {
            self.release();
        }
        let now = std::time::Instant::now();
        let held = match &mut self.0 {
            Some(held) => held,
            empty => empty.insert(HeldConnection {
                conn: pool.acquire().await?,
                since: now,
                used: now,
            }),
        };
        held.used = now;
        Ok(&mut held.conn)
    }

    pub(crate) fn is_held(&self) -> bool {
        self.0.is_some()
    }

    pub(crate) fn release(&mut self) {
        self.0 = None;
    }
}

/// Whether an error means the database could not be reached (as opposed to a bad query).
pub fn is_unavailable(err: &sqlx::Error) -> bool {
    matches!(
        err,
        sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
    ) || matches!(err, sqlx::Error::Database(e) if e.code().is_some_and(|c| c.starts_with("08") || c == "57P01" || c == "57P03"))
}
