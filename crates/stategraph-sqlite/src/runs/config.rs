//! Opening a run queue: where its file is, its lease and attempts, connection settings.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use stategraph_checkpoint::Result;
use stategraph_runs::{DEFAULT_LEASE, DEFAULT_MAX_ATTEMPTS};

use super::{Shared, SqliteRunQueue, no_preparation, notify, schema};
use crate::config::{SqliteConfig, Synchronous, retry_busy};
use crate::error::{db, join};
use crate::pool::Pool;

/// Builds a [`SqliteRunQueue`]: the database (a `sqlite:` URL or a path, with the connection
/// settings of [`SqliteConfig`]), the lease a claim grants and the claims a run gets;
/// [`connect`](Self::connect) opens it, creating the file and the queue's tables as needed.
///
/// ```
/// use std::time::Duration;
/// use stategraph_sqlite::SqliteRunQueueConfig;
///
/// # tokio::runtime::Builder::new_multi_thread().build().unwrap().block_on(async {
/// # let dir = tempfile::tempdir().unwrap();
/// # let url = format!("sqlite:{}", dir.path().join("threads.sqlite").display());
/// let queue = SqliteRunQueueConfig::from_url(&url)? // e.g. "sqlite:threads.sqlite"
///     .lease(Duration::from_secs(10))
///     .max_attempts(5)
///     .connect()
///     .await?;
/// # let _ = queue;
/// # Ok::<(), stategraph_checkpoint::Error>(()) }).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct SqliteRunQueueConfig {
    db: SqliteConfig,
    lease: Duration,
    max_attempts: u32,
}

impl SqliteRunQueueConfig {
    /// Parses a `sqlite:` URL, as [`SqliteConfig::from_url`] does (`sqlite:PATH`,
    /// `sqlite:///abs/path`, `sqlite::memory:` for a queue of one handle, `?synchronous=…`).
    pub fn from_url(url: &str) -> Result<Self> {
        SqliteConfig::from_url(url).map(Self::from)
    }

    /// A database file at `path` (created if missing); for paths a URL cannot spell.
    pub fn file(path: impl AsRef<Path>) -> Self {
        Self::from(SqliteConfig::file(path))
    }

    /// The lease a claim or heartbeat grants (default
    /// [`DEFAULT_LEASE`]; at least a millisecond).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_millis(1));
        self
    }

    /// How many claims a run gets (default
    /// [`DEFAULT_MAX_ATTEMPTS`]; at least 1).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// How long to wait for another process's lock before failing (default 5 s).
    pub fn busy_timeout(mut self, wait: Duration) -> Self {
        self.db = self.db.busy_timeout(wait);
        self
    }

    /// Sets the `synchronous` level (default [`Synchronous::Full`]; see
    /// [`SqliteConfig::synchronous`]).
    pub fn synchronous(mut self, level: Synchronous) -> Self {
        self.db = self.db.synchronous(level);
        self
    }

    /// Opens the queue (on tokio's blocking pool): creates the file if it is missing, switches
    /// it to WAL, and brings the queue's tables up to date (any number of processes may do
    /// so at once). Runs in flight are left as they are.
    pub async fn connect(self) -> Result<SqliteRunQueue> {
        let busy_timeout = self.db.busy_timeout;
        let pool = Pool::new(self.db, no_preparation);
        let pool = tokio::task::spawn_blocking(move || {
            pool.exclusive(|conn| {
                retry_busy(busy_timeout, || schema::migrate(conn))
                    .map_err(db("creating the run queue tables"))
            })
            .map(|()| pool)
        })
        .await
        .map_err(join)??;
        Ok(SqliteRunQueue {
            shared: Arc::new(Shared {
                pool: Arc::new(pool),
                lease: self.lease,
                max_attempts: self.max_attempts,
                hub: notify::Hub::default(),
                claims: AtomicU64::new(0),
            }),
        })
    }
}

/// The connection settings of a saver's configuration (its serializer is not used); the
/// queue's tables are created whatever its setup setting.
impl From<SqliteConfig> for SqliteRunQueueConfig {
    fn from(db: SqliteConfig) -> Self {
        Self {
            db,
            lease: DEFAULT_LEASE,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
        }
    }
}
