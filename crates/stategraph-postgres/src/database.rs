//! [`PostgresDatabase`]: one PostgreSQL database opened once — one connection pool — and the
//! saver, store and run queue built from it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Hook, HookError, Manager, ManagerConfig, Pool, RecyclingMethod};
use stategraph_checkpoint::backend::Timeouts;
use stategraph_checkpoint::{Error, Result};
use stategraph_runs::DatabaseId;
use tokio_postgres::NoTls;

use crate::config::PostgresConfig;
use crate::error::BACKEND;
use crate::runs::RunQueueConfig;
use crate::store::PostgresStoreConfig;

/// One PostgreSQL database, opened once: a pool of connections and the settings they share
/// (schema, timeouts, prepared statements), from which the [`saver`](Self::saver), the
/// [`store`](Self::store) and the [`run_queue`](Self::run_queue) of the database are built —
/// one set of connections for all three, and a saver that fences a run's checkpoint writes
/// by the lease of a run in the queue of the same handle.
///
/// Open one from a URL ([`from_url`](Self::from_url), or [`PostgresConfig::open`] for every
/// setting) or from a pool you own ([`from_pool`](Self::from_pool)). Cheap to clone; clones
/// are the same handle. A connection is handed out without a health query (that would cost
/// a round trip per operation): one the server ended (restart, failover,
/// `pg_terminate_backend`) is seen as closed by the driver and replaced, and one idle for
/// longer than the idle timeout is replaced instead of reused.
///
/// ```no_run
/// use stategraph_postgres::PostgresDatabase;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let db = PostgresDatabase::from_url("postgres://postgres@127.0.0.1:5432/test")?;
/// let saver = db.saver().connect().await?;
/// let store = db.store().connect().await?;
/// let queue = db.run_queue().connect().await?;
/// # let _ = (saver, store, queue);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PostgresDatabase {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    /// The connection settings, for connections outside the pool (a run queue's listener);
    /// `None` for a pool of the user's opened without them.
    connect: Option<tokio_postgres::Config>,
    /// Where it connects, password removed, for messages.
    target: String,
    /// The schema of the tables (first on the connections' `search_path`), if set.
    schema: Option<String>,
    timeouts: Timeouts,
    prepared_statements: bool,
    id: DatabaseId,
}

impl fmt::Debug for PostgresDatabase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresDatabase")
            .field("target", &self.inner.target)
            .field("schema", &self.inner.schema)
            .field("id", &self.inner.id)
            .finish_non_exhaustive()
    }
}

impl PostgresDatabase {
    /// Opens the database a `postgres://` URL names, with the settings the URL carries
    /// ([`PostgresConfig::from_url`]). No connection is made until one is needed.
    ///
    /// # Errors
    /// A URL [`PostgresConfig::from_url`] refuses; a pool that cannot be built.
    pub fn from_url(url: &str) -> Result<Self> {
        PostgresConfig::from_url(url)?.open()
    }

    /// The database of a pool you own (its connections' `search_path` decides where the
    /// tables are), with the default [`Timeouts`] and prepared statements. A run queue needs
    /// the connection settings too, for the listener's connection of its own:
    /// [`listen_with`](Self::listen_with).
    pub fn from_pool(pool: Pool) -> Self {
        Self::assemble(
            pool,
            None,
            "the pool's database".to_owned(),
            None,
            Timeouts::default(),
            true,
        )
    }

    /// This database with the connection settings a run queue's listener connects with (for
    /// a database made [`from_pool`](Self::from_pool)); they also name the database in
    /// messages. The same database: what was built from the handle before fences with what
    /// is built after.
    #[must_use]
    pub fn listen_with(self, connect: tokio_postgres::Config) -> Self {
        let inner = &self.inner;
        Self {
            inner: Arc::new(Inner {
                pool: inner.pool.clone(),
                target: crate::saver::describe(&connect),
                connect: Some(connect),
                schema: inner.schema.clone(),
                timeouts: inner.timeouts,
                prepared_statements: inner.prepared_statements,
                // The same database: what was built from it fences with what will be.
                id: inner.id,
            }),
        }
    }

    /// The database of `config`'s connection settings: a pool of `pool_size` connections
    /// whose `search_path` is the schema (if set), then `public`.
    pub(crate) fn open(config: &PostgresConfig) -> Result<Self> {
        let mut pg = config.pg.clone();
        if let Some(schema) = &config.schema {
            pg.options(format!(
                "-c search_path=\"{}\",public",
                schema.replace('"', "")
            ));
        }
        let pool = build_pool(&pg, config.pool_size, config.timeouts.idle)?;
        Ok(Self::assemble(
            pool,
            Some(pg.clone()),
            crate::saver::describe(&pg),
            config.schema.clone(),
            config.timeouts,
            config.prepared_statements,
        ))
    }

    fn assemble(
        pool: Pool,
        connect: Option<tokio_postgres::Config>,
        target: String,
        schema: Option<String>,
        timeouts: Timeouts,
        prepared_statements: bool,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                pool,
                connect,
                target,
                schema,
                timeouts,
                prepared_statements,
                id: DatabaseId::new(),
            }),
        }
    }

    /// A checkpoint saver's configuration on this database (serializer, compression, setup),
    /// to [`connect`](PostgresConfig::connect). Its connection settings are this database's.
    pub fn saver(&self) -> PostgresConfig {
        PostgresConfig::on(self.clone())
    }

    /// A store's configuration on this database (index, TTLs, setup), to
    /// [`connect`](PostgresStoreConfig::connect).
    pub fn store(&self) -> PostgresStoreConfig {
        PostgresStoreConfig::from(self.saver())
    }

    /// A run queue's configuration on this database (lease, attempts, setup), to
    /// [`connect`](RunQueueConfig::connect).
    pub fn run_queue(&self) -> RunQueueConfig {
        RunQueueConfig::from(self.saver())
    }

    /// The connection pool.
    pub fn pool(&self) -> &Pool {
        &self.inner.pool
    }

    /// This handle's id, which the fences of its run queue name.
    pub fn id(&self) -> DatabaseId {
        self.inner.id
    }

    pub(crate) fn connect_settings(&self) -> Option<&tokio_postgres::Config> {
        self.inner.connect.as_ref()
    }

    pub(crate) fn target(&self) -> &str {
        &self.inner.target
    }

    pub(crate) fn schema(&self) -> Option<&str> {
        self.inner.schema.as_deref()
    }

    pub(crate) fn timeouts(&self) -> Timeouts {
        self.inner.timeouts
    }

    pub(crate) fn prepared_statements(&self) -> bool {
        self.inner.prepared_statements
    }
}

/// A pool of at most `size` connections to `pg`, replacing a connection idle for longer than
/// `idle` instead of reusing it.
fn build_pool(pg: &tokio_postgres::Config, size: usize, idle: Option<Duration>) -> Result<Pool> {
    let manager = Manager::from_config(
        pg.clone(),
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(size)
        .pre_recycle(Hook::sync_fn(move |_, metrics| match idle {
            Some(limit) if metrics.last_used() > limit => {
                Err(HookError::Message("idle for too long".into()))
            }
            _ => Ok(()),
        }))
        .build()
        .map_err(|e| Error::backend(BACKEND, "building the connection pool", e))
}
