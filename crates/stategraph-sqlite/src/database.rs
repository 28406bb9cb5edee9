//! [`SqliteDatabase`]: one SQLite database opened once, and the saver, store and run queue
//! built from it.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use stategraph_runs::DatabaseId;

use crate::config::SqliteConfig;
use crate::pool::Writer;
use crate::runs::SqliteRunQueueConfig;
use crate::store::SqliteStoreConfig;

/// One SQLite database (a file, or one in memory), opened once: its connection settings and
/// its one writer connection (SQLite allows one writer at a time), which the
/// [`saver`](Self::saver), the [`store`](Self::store) and the [`run_queue`](Self::run_queue)
/// built from it share — their writes share group transactions and disk syncs, and a saver
/// fences a run's checkpoint writes by the lease of a run in the queue of the same handle.
///
/// Cheap to clone; clones are the same handle. Two handles opened on one file work as two
/// processes on it do (each with its own writer, taking turns through SQLite's lock). In
/// memory, the database lives as long as its handle and what was built from it.
///
/// ```
/// use stategraph_runs::{NewRun, RunQueue};
/// use stategraph_sqlite::SqliteDatabase;
///
/// # tokio::runtime::Builder::new_multi_thread().build().unwrap().block_on(async {
/// # let dir = tempfile::tempdir().unwrap();
/// # let url = format!("sqlite:{}", dir.path().join("app.sqlite").display());
/// let db = SqliteDatabase::from_url(&url)?; // e.g. "sqlite:app.sqlite"
/// let saver = db.saver().connect().await?;
/// let store = db.store().connect().await?;
/// let queue = db.run_queue().connect().await?;
/// queue.enqueue(NewRun::new("run-1", "thread-1")).await?;
/// # let _ = (saver, store);
/// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
/// ```
#[derive(Clone)]
pub struct SqliteDatabase {
    inner: Arc<Inner>,
}

struct Inner {
    /// The connection settings (location, durability, readers, busy timeout, mmap).
    config: SqliteConfig,
    writer: Arc<Writer>,
    id: DatabaseId,
}

impl fmt::Debug for SqliteDatabase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteDatabase")
            .field("location", &self.inner.config.location)
            .field("id", &self.inner.id)
            .finish_non_exhaustive()
    }
}

impl SqliteDatabase {
    /// Opens the database a `sqlite:` URL names, with the settings the URL carries
    /// ([`SqliteConfig::from_url`]); nothing is read or created until the first component
    /// connects.
    ///
    /// # Errors
    /// A URL [`SqliteConfig::from_url`] refuses.
    pub fn from_url(url: &str) -> stategraph_checkpoint::Result<Self> {
        Ok(SqliteConfig::from_url(url)?.open())
    }

    /// The database of `config`'s connection settings (its serializer and setup setting are
    /// the saver's, not the database's).
    pub(crate) fn new(mut config: SqliteConfig) -> Self {
        config.database = None;
        Self {
            inner: Arc::new(Inner {
                config,
                writer: Writer::new(),
                id: DatabaseId::new(),
            }),
        }
    }

    /// A checkpoint saver's configuration on this database (serializer, setup), to
    /// [`connect`](SqliteConfig::connect). Its connection settings are this database's.
    pub fn saver(&self) -> SqliteConfig {
        let mut config = self.inner.config.clone();
        config.database = Some(self.clone());
        config
    }

    /// A store's configuration on this database (index, TTLs, setup), to
    /// [`connect`](SqliteStoreConfig::connect).
    pub fn store(&self) -> SqliteStoreConfig {
        SqliteStoreConfig::from(self.saver())
    }

    /// A run queue's configuration on this database (lease, attempts), to
    /// [`connect`](SqliteRunQueueConfig::connect).
    pub fn run_queue(&self) -> SqliteRunQueueConfig {
        SqliteRunQueueConfig::from(self.saver())
    }

    /// A node cache in this database ([`SqliteCache`](crate::SqliteCache)), its table created
    /// if missing.
    pub async fn cache(&self) -> stategraph_checkpoint::Result<crate::SqliteCache> {
        crate::SqliteCache::open(self.saver()).await
    }

    /// This handle's id, which the fences of its run queue name.
    pub fn id(&self) -> DatabaseId {
        self.inner.id
    }

    /// The database file; `None` in memory.
    pub fn path(&self) -> Option<&Path> {
        self.inner.config.path()
    }

    /// The connection settings.
    pub(crate) fn config(&self) -> &SqliteConfig {
        &self.inner.config
    }

    /// The writer connection the components share.
    pub(crate) fn writer(&self) -> Arc<Writer> {
        Arc::clone(&self.inner.writer)
    }
}
