//! Connecting a Postgres store: the connection (a URL, a saver's [`PostgresConfig`] or an
//! existing pool), the index, TTLs and the exact-search limit.

use deadpool_postgres::Pool;
use stategraph_store::{IndexConfig, StoreError, TtlConfig};

use super::PostgresStore;
use super::sql::backend;
use crate::config::PostgresConfig;

/// Default of [`PostgresStoreConfig::exact_search_limit`].
const DEFAULT_EXACT_SEARCH_LIMIT: u64 = 10_000;

/// Builds a [`PostgresStore`]: the connection (a `postgres://` URL with the settings of
/// [`PostgresConfig`], or an existing pool), semantic search, TTLs;
/// [`connect`](Self::connect) connects and, unless [`without_setup`](Self::without_setup),
/// creates or upgrades the store's tables.
///
/// ```no_run
/// use std::sync::Arc;
/// use std::time::Duration;
/// use stategraph_store::*;
/// use stategraph_postgres::PostgresStoreConfig;
///
/// # async fn demo() -> Result<(), StoreError> {
/// let store = PostgresStoreConfig::from_url("postgres://postgres@127.0.0.1:5432/test")?
///     .schema("memories")
///     .index(IndexConfig::new(64, Arc::new(HashingEmbeddings::new(64))))
///     .ttl(TtlConfig::default().default_ttl(Duration::from_secs(24 * 60 * 60)))
///     .connect()
///     .await?;
/// # let _ = store;
/// # Ok(()) }
/// ```
///
/// A saver and a store on one database share its pool when built from one
/// [`PostgresDatabase`](crate::PostgresDatabase):
///
/// ```no_run
/// use stategraph_postgres::PostgresConfig;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let db = PostgresConfig::from_url("postgres://postgres@127.0.0.1:5432/test")?
///     .schema("app")
///     .open()?;
/// let saver = db.saver().connect().await?;
/// let store = db.store().connect().await?;
/// # let _ = (saver, store);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct PostgresStoreConfig {
    /// The connection settings, or the database they were made from.
    pg: PostgresConfig,
    index: Option<IndexConfig>,
    ttl: TtlConfig,
    exact_search_limit: u64,
    setup: bool,
}

impl PostgresStoreConfig {
    /// Parses a `postgres://` / `postgresql://` URL (or a libpq key=value string) as
    /// [`PostgresConfig::from_url`] does. A URL it refuses is [`StoreError::InvalidConfig`].
    pub fn from_url(url: &str) -> Result<Self, StoreError> {
        PostgresConfig::from_url(url)
            .map(Self::from)
            .map_err(|e| StoreError::InvalidConfig(e.to_string()))
    }

    /// A store on an existing pool, for example one shared with other code: shorthand for
    /// [`PostgresDatabase::from_pool`](crate::PostgresDatabase::from_pool)`(pool).store()`.
    /// The pool's connections' `search_path` decides where the tables are.
    pub fn from_pool(pool: Pool) -> Self {
        crate::PostgresDatabase::from_pool(pool).store()
    }

    fn with_settings(pg: PostgresConfig) -> Self {
        Self {
            pg,
            index: None,
            ttl: TtlConfig::default(),
            exact_search_limit: DEFAULT_EXACT_SEARCH_LIMIT,
            setup: true,
        }
    }

    /// Keeps the store's tables in this schema (created by the setup if missing) instead of
    /// the connection's default `search_path`: the connections' `search_path` is that schema,
    /// then `public` (where the `vector` extension usually lives). A connection setting: not
    /// for a configuration made from a [`PostgresDatabase`](crate::PostgresDatabase).
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.pg = self.pg.schema(schema);
        self
    }

    /// Connections kept in the pool (default 8; a connection setting, as
    /// [`schema`](Self::schema)).
    pub fn pool_size(mut self, n: usize) -> Self {
        self.pg = self.pg.pool_size(n);
        self
    }

    /// Embeds documents with `index` so `search` can rank by meaning (the setup creates the
    /// vector table for `index.dims`). Checked when connecting.
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

    /// Semantic searches are exact while `store_vectors` holds fewer than `vectors` vectors
    /// (the planner's estimate); at or above it they use the HNSW index for candidates (see
    /// [`PostgresStore`]). Default 10,000; `u64::MAX` keeps every search exact, `0` always
    /// uses the index.
    pub fn exact_search_limit(mut self, vectors: u64) -> Self {
        self.exact_search_limit = vectors;
        self
    }

    /// Connects without creating or changing anything: no schema, table or migration is
    /// created, and the tables reads need must be there — `store` and `store_migrations`,
    /// and with an index `store_vectors` and `vector_migrations` (so a database Python's
    /// `setup()` created passes). Missing tables are [`StoreError::MissingTables`] naming
    /// them. (stategraph's own `stategraph_store_ttl`, which refreshing TTLs and putting
    /// fractional TTLs use, is created by the setup.) For tools that only read.
    pub fn without_setup(mut self) -> Self {
        self.setup = false;
        self
    }

    /// Connects and, unless [`without_setup`](Self::without_setup), creates or upgrades the
    /// tables: LangGraph's store migrations, with an index its vector migrations, and
    /// stategraph's own (idempotent; concurrent setups, from several processes too, take
    /// turns on an advisory lock). An invalid index, or one whose dimensions differ from an
    /// existing `store_vectors` table's, is [`StoreError::InvalidConfig`].
    pub async fn connect(self) -> Result<PostgresStore, StoreError> {
        if let Some(index) = &self.index {
            index.validate()?;
        }
        let db = self
            .pg
            .open()
            .map_err(|e| backend("opening the database", e))?;
        let store = PostgresStore {
            pool: db.pool().clone(),
            schema: db.schema().map(str::to_owned),
            target: db.target().to_owned(),
            index: self.index,
            ttl: self.ttl,
            exact_search_limit: self.exact_search_limit,
        };
        if self.setup {
            store.setup().await?;
        } else {
            store.check_tables().await?;
        }
        Ok(store)
    }
}

/// A saver's connection settings and pool size (its serializer and
/// [`prepared_statements`](PostgresConfig::prepared_statements) do not apply: the store sends
/// unnamed statements); with [`PostgresConfig::without_setup`], the store connects without
/// setup too.
impl From<PostgresConfig> for PostgresStoreConfig {
    fn from(config: PostgresConfig) -> Self {
        let setup = config.run_setup;
        Self {
            setup,
            ..Self::with_settings(config)
        }
    }
}
