//! [`PostgresStore`]: LangGraph's Postgres `BaseStore`, in Rust, on LangGraph's own schema.

mod config;
mod nul_char;
mod read;
mod schema;
mod sql;
#[cfg(test)]
mod tests;
mod ttl;
mod write;

use std::fmt;

use async_trait::async_trait;
use deadpool_postgres::Pool;
use stategraph_store::{
    BatchStep, IndexConfig, Op, OpResult, ReadOp, Store, StoreError, TtlConfig, plan_batch,
};

use sql::{backend, client_of};

pub use config::PostgresStoreConfig;

/// A [`Store`] on PostgreSQL with LangGraph's own schema and row formats, so Python
/// LangGraph's `PostgresStore` and this one share a database.
///
/// Connect with [`PostgresStore::connect`]`(url)` or, with an index, TTLs, a schema or other
/// settings, [`PostgresStoreConfig`].
///
/// # Schema
///
/// The setup ([`PostgresStoreConfig::connect`], unless
/// [`without_setup`](PostgresStoreConfig::without_setup)) runs LangGraph's `store_migrations`
/// v0–v3 (`store` with a JSONB `value`, `created_at`/`updated_at`/`expires_at` TIMESTAMPTZ
/// and an INT `ttl_minutes`; `store_prefix_idx`; `idx_store_expires_at`) and, with an index,
/// `vector_migrations` v0–v2 (the `vector` extension; `store_vectors` with one `vector(dims)`
/// per embedded field, cascading on delete; an HNSW index with `vector_cosine_ops`),
/// recording versions as Python does. Its one addition, `stategraph_store_ttl`, is versioned
/// separately in `stategraph_store_migrations`. A namespace is stored as its labels joined by
/// `.`.
///
/// # Clock
///
/// Every timestamp (`created_at`, `updated_at`, `expires_at`, and the "now" that expiry is
/// compared with) comes from the store's clock ([`TtlConfig::clock`]: this process's system
/// clock unless set otherwise), passed to the server as a parameter, never from the server's
/// `NOW()`, so ordering and TTLs behave exactly as in
/// [`InMemoryStore`](stategraph_store::InMemoryStore) even when the clocks differ.
/// Expired items are never read, swept or not (Python's store returns them until a sweep
/// unless `omit_expired` is set), and putting an expired item again starts a new `created_at`.
///
/// # TTL precision
///
/// TTLs are [`Duration`](std::time::Duration)s, stored in LangGraph's unit, fractional
/// minutes; but LangGraph's `ttl_minutes` column is an INT. A put stores
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
/// [`exact_search_limit`](PostgresStoreConfig::exact_search_limit) (by the planner's estimate,
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
/// [`VectorPlan`](stategraph_store::VectorPlan) (only new or changed texts are
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
    /// Connects to the database a `postgres://` URL names and creates or upgrades the store's
    /// tables, without an index or TTLs: shorthand for
    /// [`PostgresStoreConfig::from_url`]`(url)?.`[`connect`](PostgresStoreConfig::connect)`()`.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        PostgresStoreConfig::from_url(url)?.connect().await
    }

    /// The connection pool (another store can share it:
    /// [`PostgresStoreConfig::from_pool`]).
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        let client = self.pool.get().await.map_err(|e| match e {
            deadpool_postgres::PoolError::Backend(inner) => backend(
                "cannot connect to PostgreSQL",
                format!("{} ({inner})", self.target),
            ),
            other => backend("getting a connection from the pool", other),
        })?;
        crate::error::record_pool(&self.pool, "store");
        Ok(client)
    }
}

#[async_trait]
impl Store for PostgresStore {
    /// Runs the batch on a pooled connection; when the connection turns out to be gone (the
    /// server ended it), the whole batch is sent again on another (its puts and deletes are
    /// idempotent, its reads have no effect), up to one try per pooled connection plus a new
    /// one, as the saver's reads are.
    async fn batch(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, StoreError> {
        nul_char::refuse_nul(&ops)?;
        let mut tries = self.pool.status().max_size + 1;
        loop {
            match self.batch_once(ops.clone()).await {
                Err(StoreError::Backend { source, .. })
                    if tries > 1 && crate::error::lost_in(source.as_ref()) =>
                {
                    tries -= 1;
                }
                other => return other,
            }
        }
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

impl PostgresStore {
    /// One try of [`Store::batch`].
    async fn batch_once(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, StoreError> {
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
                    let mut reads = reads.iter().peekable();
                    while let Some(read) = reads.next() {
                        let now = self.ttl.clock.now();
                        let result = match read {
                            ReadOp::Get(g) => {
                                // Consecutive gets are read together.
                                let mut gets = vec![g];
                                while let Some(ReadOp::Get(next)) = reads.peek() {
                                    gets.push(next);
                                    reads.next();
                                }
                                let items = self.get_many(client_of(&client), &gets, now).await?;
                                results.extend(items.into_iter().map(OpResult::Get));
                                continue;
                            }
                            ReadOp::Search(s, query) => OpResult::Search(
                                self.search(&mut client, s, query.as_ref(), now).await?,
                            ),
                            ReadOp::ListNamespaces(l) => OpResult::ListNamespaces(
                                self.list_namespaces(client_of(&client), l, now).await?,
                            ),
                        };
                        results.push(result);
                    }
                }
            }
        }
        Ok(results)
    }
}
