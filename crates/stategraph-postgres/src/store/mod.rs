//! [`PostgresStore`]: LangGraph's Postgres `BaseStore`, in Rust, on LangGraph's own schema.

mod read;
mod schema;
mod sql;
#[cfg(test)]
mod tests;
mod ttl;
mod write;

use std::fmt;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use stategraph_checkpoint::store::{
    BatchStep, IndexConfig, Op, OpResult, ReadOp, Store, StoreError, TtlConfig, plan_batch,
};
use tokio_postgres::NoTls;

use crate::config::PostgresConfig;
use sql::{backend, client_of};

/// Default of [`PostgresStore::with_exact_search_limit`].
const DEFAULT_EXACT_SEARCH_LIMIT: u64 = 10_000;

/// A [`Store`] on PostgreSQL with LangGraph's own schema and row formats, so Python
/// LangGraph's `PostgresStore` and this one share a database.
///
/// # Schema
///
/// [`setup`](Self::setup) runs LangGraph's `store_migrations` v0–v3 (`store` with a JSONB
/// `value`, `created_at`/`updated_at`/`expires_at` TIMESTAMPTZ and an INT `ttl_minutes`;
/// `store_prefix_idx`; `idx_store_expires_at`) and, with an index, `vector_migrations` v0–v2
/// (the `vector` extension; `store_vectors` with one `vector(dims)` per embedded field,
/// cascading on delete; an HNSW index with `vector_cosine_ops`), recording versions as Python
/// does. Its one addition, `stategraph_store_ttl`, is versioned separately in
/// `stategraph_store_migrations`. A namespace is stored as its labels joined by `.`.
///
/// # Clock
///
/// Every timestamp (`created_at`, `updated_at`, `expires_at`, and the "now" that expiry is
/// compared with) comes from the store's clock ([`TtlConfig::clock`]: this process's system
/// clock unless set otherwise), passed to the server as a parameter, never from the server's
/// `NOW()`, so ordering and TTLs behave exactly as in
/// [`InMemoryStore`](stategraph_checkpoint::store::InMemoryStore) even when the clocks differ.
/// Expired items are never read, swept or not (Python's store returns them until a sweep
/// unless `omit_expired` is set), and putting an expired item again starts a new `created_at`.
///
/// # TTL precision
///
/// TTLs are fractional minutes, but LangGraph's `ttl_minutes` column is an INT. A put stores
/// `expires_at` exactly (put time + TTL, to the microsecond) and `ttl_minutes` rounded **up**
/// (so Python, which refreshes by `ttl_minutes`, never expires an item earlier than its TTL);
/// a fractional TTL is also kept exactly in `stategraph_store_ttl`, which refreshes use. That
/// row is tied to the put that wrote it (by `updated_at`): after a put by Python, refreshes use
/// the INT column, as Python's do.
///
/// # Filters
///
/// Filters are SQL with bound parameters: `{"k": v}` and `$eq` → `value->k = v::jsonb`;
/// `$ne` → `IS DISTINCT FROM` (a missing field differs); an object without operators →
/// `@>`; `$gt`/`$gte`/`$lt`/`$lte` with a number compare numerically, and only fields that are
/// numbers (`jsonb_typeof`); with a string, only string fields, byte-wise (`COLLATE "C"`).
/// **LangGraph's Postgres store compares these as text** (`value->>k > '6'`, so `10 > 6` is
/// false there); stategraph deliberately compares numbers as numbers, like every stategraph
/// store.
///
/// # Semantic search and the HNSW index
///
/// With a query and an index, an item's score is the best cosine similarity
/// (`1 - (embedding <=> query)`) of its vectors to the query (a zero vector scores 0). Scored
/// items come first (best first), then items without vectors (newest first); `offset` and
/// `limit` apply to that combined order. While `store_vectors` holds fewer vectors than
/// [`with_exact_search_limit`](Self::with_exact_search_limit) (by the planner's estimate,
/// default 10,000), the search is exact: every matching item is scored. Above it, the HNSW
/// index picks candidates (`ORDER BY embedding <=> query LIMIT n` with
/// `hnsw.iterative_scan = relaxed_order`, so namespace and value filters do not starve the
/// scan), the candidates are then scored exactly and ordered as above; if fewer candidates
/// than `offset + limit` come back, the search falls back to the exact path. Large stores
/// thus get approximate (HNSW) recall at index speed, small ones exact results. (Iterative
/// index scans need pgvector 0.8; older versions scan only `hnsw.ef_search` candidates, which
/// this store raises to cover the page, and fall back to the exact path when that is short.)
///
/// # Connections
///
/// A [`deadpool_postgres`] pool, as [`PostgresSaver`](crate::PostgresSaver)'s, with unnamed
/// statements only. A batch runs on one connection, its ops in order. A run of consecutive
/// puts (the last per address wins) plans its vectors against the stored items with
/// [`VectorPlan`](stategraph_checkpoint::store::VectorPlan) (only new or changed texts are
/// embedded), embeds all its new texts in one call outside any transaction, then writes rows
/// and vectors in one transaction, after locking the rows and checking the plan still holds;
/// if a concurrent writer changed a text meanwhile, it embeds the difference and tries again
/// (after a few tries it embeds while holding the locks, so it always completes). Rows are
/// locked in one order by every writer.
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    schema: Option<String>,
    /// Where it connects, password removed, for error messages.
    target: String,
    index: Option<IndexConfig>,
    ttl: TtlConfig,
    exact_search_limit: u64,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("schema", &self.schema)
            .field("target", &self.target)
            .field("index", &self.index)
            .field("ttl", &self.ttl)
            .field("exact_search_limit", &self.exact_search_limit)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Connects to the database a `postgres://` URL names and runs [`setup`](Self::setup)
    /// (without an index; to add one, use [`from_url`](Self::from_url), then
    /// [`with_index`](Self::with_index), then `setup`).
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let store = Self::from_url(url)?;
        store.setup().await?;
        Ok(store)
    }

    /// A store on the database a `postgres://` URL names (see [`PostgresConfig::from_url`]).
    /// Connects lazily: call [`setup`](Self::setup) before first use.
    pub fn from_url(url: &str) -> Result<Self, StoreError> {
        let config =
            PostgresConfig::from_url(url).map_err(|e| StoreError::InvalidConfig(e.to_string()))?;
        Self::from_config(&config)
    }

    /// A store with a [`PostgresConfig`]'s connection settings and pool size. With
    /// [`PostgresConfig::schema`], its tables live in that schema (created by `setup`) and the
    /// connections' `search_path` is that schema, then `public` (where the `vector` extension
    /// usually lives). Connects lazily: call [`setup`](Self::setup) before first use.
    pub fn from_config(config: &PostgresConfig) -> Result<Self, StoreError> {
        let mut pg = config.pg.clone();
        if let Some(schema) = &config.schema {
            pg.options(format!(
                "-c search_path=\"{}\",public",
                schema.replace('"', "")
            ));
        }
        let manager = Manager::from_config(
            pg.clone(),
            NoTls,
            ManagerConfig {
                // As the saver's: a connection the server dropped is replaced, not handed out.
                recycling_method: RecyclingMethod::Verified,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(config.pool_size)
            .build()
            .map_err(|e| backend("building the connection pool", e))?;
        let target = format!(
            "{:?}:{:?}/{}",
            pg.get_hosts(),
            pg.get_ports(),
            pg.get_dbname().unwrap_or_default()
        );
        let mut store = Self::from_pool(pool);
        store.schema = config.schema.clone();
        store.target = target;
        Ok(store)
    }

    /// A store on an existing pool (for example one shared with other code). Its connections'
    /// `search_path` decides where the tables are; `setup` creates no schema. Call
    /// [`setup`](Self::setup) before first use.
    pub fn from_pool(pool: Pool) -> Self {
        Self {
            pool,
            schema: None,
            target: "the pool's database".to_owned(),
            index: None,
            ttl: TtlConfig::default(),
            exact_search_limit: DEFAULT_EXACT_SEARCH_LIMIT,
        }
    }

    /// Embeds documents with `index` so `search` can rank by meaning (run
    /// [`setup`](Self::setup) afterwards: it creates the vector table for `index.dims`).
    pub fn with_index(mut self, index: IndexConfig) -> Self {
        self.index = Some(index);
        self
    }

    /// Uses `ttl` for default TTLs and read refresh.
    pub fn with_ttl(mut self, ttl: TtlConfig) -> Self {
        self.ttl = ttl;
        self
    }

    /// Semantic searches are exact while `store_vectors` holds fewer than `vectors` vectors
    /// (the planner's estimate); at or above it they use the HNSW index for candidates (see
    /// the type's docs). Default 10,000; `u64::MAX` keeps every search exact, `0` always uses
    /// the index.
    pub fn with_exact_search_limit(mut self, vectors: u64) -> Self {
        self.exact_search_limit = vectors;
        self
    }

    /// The connection pool.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(|e| match e {
            deadpool_postgres::PoolError::Backend(inner) => backend(
                "cannot connect to PostgreSQL",
                format!("{} ({inner})", self.target),
            ),
            other => backend("getting a connection from the pool", other),
        })
    }
}

#[async_trait]
impl Store for PostgresStore {
    async fn batch(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, StoreError> {
        let steps = plan_batch(ops, self.index.as_ref()).await?;
        if steps.is_empty() {
            return Ok(Vec::new());
        }
        let mut client = self.client().await?;
        let mut results = Vec::new();
        for step in steps {
            match step {
                BatchStep::Puts { ops, given } => {
                    self.put_run(&mut client, ops).await?;
                    results.extend((0..given).map(|_| OpResult::Put));
                }
                BatchStep::Reads(reads) => {
                    for read in reads {
                        let now = self.ttl.clock.now();
                        results.push(match &read {
                            ReadOp::Get(g) => {
                                OpResult::Get(self.get(client_of(&client), g, now).await?)
                            }
                            ReadOp::Search(s, query) => OpResult::Search(
                                self.search(&mut client, s, query.as_ref(), now).await?,
                            ),
                            ReadOp::ListNamespaces(l) => OpResult::ListNamespaces(
                                self.list_namespaces(client_of(&client), l, now).await?,
                            ),
                        });
                    }
                }
            }
        }
        Ok(results)
    }

    fn ttl_config(&self) -> &TtlConfig {
        &self.ttl
    }

    fn index_config(&self) -> Option<&IndexConfig> {
        self.index.as_ref()
    }

    async fn sweep_ttl(&self) -> Result<usize, StoreError> {
        let client = self.client().await?;
        ttl::sweep(&**client, self.ttl.clock.now()).await
    }
}
