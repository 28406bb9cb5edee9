//! Opening a SQLite store: where the database is, its connection settings, the index and the
//! TTL behaviour.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use stategraph_store::{IndexConfig, StoreError, TtlConfig};

use super::{SqliteStore, conn};
use crate::config::{SqliteConfig, Synchronous};
use crate::error::BACKEND;

/// Builds a [`SqliteStore`]: the database (a `sqlite:` URL or a path, with the connection
/// settings of [`SqliteConfig`]), semantic search, TTLs; [`connect`](Self::connect) opens it
/// and, unless [`without_setup`](Self::without_setup), creates or upgrades the store's tables.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use serde_json::json;
/// use stategraph_store::*;
/// use stategraph_sqlite::SqliteStoreConfig;
///
/// # tokio::runtime::Builder::new_multi_thread().build().unwrap().block_on(async {
/// # let dir = tempfile::tempdir().unwrap();
/// # let url = format!("sqlite:{}", dir.path().join("store.sqlite").display());
/// let store = SqliteStoreConfig::from_url(&url)? // e.g. "sqlite:store.sqlite"
///     .index(IndexConfig::new(64, Arc::new(HashingEmbeddings::new(64))))
///     .ttl(TtlConfig::default().default_ttl(Duration::from_secs(24 * 60 * 60)))
///     .connect()
///     .await?;
/// store.put(&["user-1"], "m1", json!({"text": "I like pizza"})).await?;
/// # Ok::<(), StoreError>(()) }).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct SqliteStoreConfig {
    db: SqliteConfig,
    index: Option<IndexConfig>,
    ttl: TtlConfig,
    setup: bool,
}

impl SqliteStoreConfig {
    /// Parses a `sqlite:` URL, as [`SqliteConfig::from_url`] does (`sqlite:PATH`,
    /// `sqlite:///abs/path`, `sqlite::memory:`, `?synchronous=…`). A URL it refuses is
    /// [`StoreError::InvalidConfig`].
    pub fn from_url(url: &str) -> Result<Self, StoreError> {
        SqliteConfig::from_url(url)
            .map(Self::from)
            .map_err(|e| StoreError::InvalidConfig(e.to_string()))
    }

    /// A database file at `path` (created if missing, unless
    /// [`without_setup`](Self::without_setup)); for paths a URL cannot spell.
    pub fn file(path: impl AsRef<Path>) -> Self {
        Self::from(SqliteConfig::file(path))
    }

    /// A private in-memory database.
    pub fn memory() -> Self {
        Self::from(SqliteConfig::memory())
    }

    /// Sets the `synchronous` level (default [`Synchronous::Full`]; see
    /// [`SqliteConfig::synchronous`]).
    pub fn synchronous(mut self, level: Synchronous) -> Self {
        self.db = self.db.synchronous(level);
        self
    }

    /// How many read connections may be kept open (default 4; at least 1).
    pub fn max_readers(mut self, n: usize) -> Self {
        self.db = self.db.max_readers(n);
        self
    }

    /// How long to wait for another process's lock before failing (default 5 s).
    pub fn busy_timeout(mut self, wait: Duration) -> Self {
        self.db = self.db.busy_timeout(wait);
        self
    }

    /// Embeds documents with `index` so `search` can rank by meaning (the setup also creates
    /// the `store_vectors` table). Checked when connecting.
    pub fn index(mut self, index: IndexConfig) -> Self {
        self.index = Some(index);
        self
    }

    /// Default TTLs, read refresh and the clock (default [`TtlConfig::default`]: no expiry,
    /// the system clock).
    pub fn ttl(mut self, ttl: TtlConfig) -> Self {
        self.ttl = ttl;
        self
    }

    /// Opens without creating or changing anything: no file is created, no table created or
    /// migrated, and the file is not switched to WAL mode until something is written (a put,
    /// a delete, or a read that refreshes TTLs). A missing file, or a database without the
    /// store's tables (with an index, also the vector tables), is
    /// [`StoreError::MissingTables`] naming them. For tools that only read.
    pub fn without_setup(mut self) -> Self {
        self.setup = false;
        self
    }

    /// Opens the database (on tokio's blocking pool) and, unless
    /// [`without_setup`](Self::without_setup), brings the store's tables up to date:
    /// LangGraph's store migrations and, with an index, its vector migrations, recorded as
    /// Python's `SqliteStore.setup()` records them. An invalid index is
    /// [`StoreError::InvalidConfig`].
    pub async fn connect(self) -> Result<SqliteStore, StoreError> {
        if let Some(index) = &self.index {
            index.validate()?;
        }
        let store = SqliteStore {
            db: Arc::new(conn::pool(self.db)),
            index: self.index,
            ttl: self.ttl,
        };
        let opened = store.clone();
        let setup = self.setup;
        tokio::task::spawn_blocking(move || {
            if setup {
                opened.setup()
            } else {
                opened.check_tables()
            }
        })
        .await
        .map_err(|e| StoreError::backend(BACKEND, e))??;
        Ok(store)
    }
}

/// The connection settings of a saver's configuration (its serializer is not used by the
/// store); a configuration [`without_setup`](SqliteConfig::without_setup) opens the store
/// without setup too.
impl From<SqliteConfig> for SqliteStoreConfig {
    fn from(db: SqliteConfig) -> Self {
        Self {
            setup: db.run_setup,
            db,
            index: None,
            ttl: TtlConfig::default(),
        }
    }
}
