//! `SqliteStore`: LangGraph's SQLite store (`langgraph.store.sqlite.SqliteStore`), in Rust.
//!
//! The schema is exactly the one Python's `SqliteStore.setup()` creates (tables `store`,
//! `store_migrations`, and with an index `store_vectors` and `vector_migrations`), with the
//! migrations recorded the same way, so both can open one file. The semantics are those of
//! [`InMemoryStore`](stategraph_store::InMemoryStore), which the shared
//! conformance suite checks:
//!
//! - values are JSON text in `value` (Python's orjson BLOBs are read too); the namespace is
//!   the `prefix` column, its labels joined by `.`;
//! - timestamps come from the store's clock ([`TtlConfig::clock`]), never from SQLite's, and
//!   are written as `YYYY-MM-DD HH:MM:SS.ffffff` (UTC), so that text order is time order and
//!   writes made one after the other order the same way; Python's `CURRENT_TIMESTAMP` text
//!   (`YYYY-MM-DD HH:MM:SS`) is read too;
//! - filters are evaluated by a Rust SQL function (`sg_store_filter`) that runs the shared
//!   [`filter::matches`](stategraph_store::filter::matches), so they mean exactly
//!   what they mean on every other store;
//! - vectors are little-endian `f32` blobs (`sqlite_vec.serialize_float32`), scored with the
//!   sqlite-vec extension's `vec_distance_cosine`, registered on each connection.

mod config;
mod conn;
mod read;
mod schema;
mod ttl;
mod vec;
mod write;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use stategraph_store::{
    BatchStep, IndexConfig, Op, OpResult, PutOp, ReadOp, Store, StoreError, TtlConfig, plan_batch,
};

use crate::config::{Location, retry_busy};
use crate::error::BACKEND;
use crate::pool::Pool;
use conn::db;
use read::run_reads;
use schema::{
    STORE_MIGRATIONS, STORE_TABLES, VECTOR_MIGRATIONS, VECTOR_TABLES, migrate, missing_tables,
};
use ttl::{apply_refreshes, sweep};
use write::{MAX_PUT_ATTEMPTS, PutTask, RunOutcome, write_put_run};

pub use config::SqliteStoreConfig;

/// A [`Store`] in a SQLite database, on LangGraph's SQLite store schema: JSON documents under
/// hierarchical namespaces, with TTLs and (with an index) semantic search.
///
/// Like [`SqliteSaver`](crate::SqliteSaver): one writer connection and a small pool of reader
/// connections (WAL lets them read while the writer writes); every database call runs on
/// tokio's blocking pool. Embedding happens outside any lock or transaction; the rows and
/// vectors of a put are then written in one transaction, so a failure never half-writes.
///
/// Open one with [`SqliteStore::connect`]`(url)` or, with an index, TTLs or other settings,
/// [`SqliteStoreConfig`]: both create the database and the store's tables as needed;
/// [`SqliteStoreConfig::without_setup`] changes nothing while opening (for tools that only
/// read, it refuses a missing file or a database without the tables,
/// [`StoreError::MissingTables`]).
///
/// ```
/// use std::sync::Arc;
/// use serde_json::json;
/// use stategraph_store::*;
/// use stategraph_sqlite::SqliteStoreConfig;
///
/// # tokio::runtime::Builder::new_multi_thread().build().unwrap().block_on(async {
/// # let dir = tempfile::tempdir().unwrap();
/// let index = IndexConfig::new(64, Arc::new(HashingEmbeddings::new(64))).with_fields(["text"]);
/// let store = SqliteStoreConfig::file(dir.path().join("store.sqlite"))
///     .index(index)
///     .connect()
///     .await?;
/// let ns = ["user-1", "memories"];
/// store.put(&ns, "m1", json!({"text": "I like pizza"})).await?;
/// store.put(&ns, "m2", json!({"text": "I climb on weekends"})).await?;
///
/// let hits = store.search(&["user-1"], SearchOptions::new().query("pizza").limit(1)).await?;
/// assert_eq!(hits[0].key, "m1");
/// assert_eq!(store.get(&ns, "m2").await?.unwrap().value["text"], "I climb on weekends");
/// # Ok::<(), StoreError>(()) }).unwrap();
/// ```
#[derive(Clone)]
pub struct SqliteStore {
    db: Arc<Pool>,
    index: Option<IndexConfig>,
    ttl: TtlConfig,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("location", &self.db.config().location)
            .field("index", &self.index)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens the database a `sqlite:` URL names (`sqlite::memory:` for a private in-memory
    /// one), creating it and the store's tables as needed, without an index or TTLs:
    /// shorthand for
    /// [`SqliteStoreConfig::from_url`]`(url)?.`[`connect`](SqliteStoreConfig::connect)`()`.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        SqliteStoreConfig::from_url(url)?.connect().await
    }

    /// Creates or upgrades the store's tables (LangGraph's store migrations, and with an index
    /// its vector migrations), recording them as Python's `SqliteStore.setup()` does.
    /// Idempotent.
    fn setup(&self) -> Result<(), StoreError> {
        let busy_timeout = self.db.config().busy_timeout;
        self.db.exclusive(|conn| {
            // Processes setting up one file at once take turns (each migration run re-checks
            // the recorded version in its `IMMEDIATE` transaction).
            retry_busy(busy_timeout, || {
                migrate(conn, "store_migrations", &STORE_MIGRATIONS)
            })
            .map_err(db("creating the store tables"))?;
            if self.index.is_some() {
                retry_busy(busy_timeout, || {
                    migrate(conn, "vector_migrations", &VECTOR_MIGRATIONS)
                })
                .map_err(db("creating the store_vectors table"))?;
            }
            Ok(())
        })
    }

    /// [`StoreError::MissingTables`] unless the store's tables (with an index, also the
    /// vector tables) exist; changes nothing.
    fn check_tables(&self) -> Result<(), StoreError> {
        let mut tables = STORE_TABLES.to_vec();
        if self.index.is_some() {
            tables.extend(VECTOR_TABLES);
        }
        let database = match &self.db.config().location {
            Location::Memory => "the in-memory SQLite database".to_owned(),
            Location::File(path) if !path.exists() => {
                return Err(StoreError::MissingTables {
                    database: format!("the SQLite file {} (which does not exist)", path.display()),
                    tables: tables.iter().map(|t| (*t).to_owned()).collect(),
                });
            }
            Location::File(path) => format!("the SQLite file {}", path.display()),
        };
        let missing = self
            .db
            .read(|conn| missing_tables(conn, &tables).map_err(db("reading the schema")))?;
        if missing.is_empty() {
            Ok(())
        } else {
            Err(StoreError::MissingTables {
                database,
                tables: missing,
            })
        }
    }

    /// Runs `f` with the database on tokio's blocking pool.
    async fn blocking<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Pool) -> Result<T, StoreError> + Send + 'static,
    {
        let db = Arc::clone(&self.db);
        tokio::task::spawn_blocking(move || f(&db))
            .await
            .map_err(|e| StoreError::backend(BACKEND, e))?
    }

    /// Runs consecutive non-put ops in one read transaction, then applies the TTL refreshes
    /// they asked for on the writer.
    async fn read_segment(&self, ops: Vec<ReadOp>) -> Result<Vec<OpResult>, StoreError> {
        let dims = self.index.as_ref().map_or(0, |i| i.dims);
        let clock = self.ttl.clock.clone();
        self.blocking(move |db| {
            let (results, refreshes) = db.read(|conn| run_reads(conn, &ops, dims, &clock))?;
            if !refreshes.is_empty() {
                db.write(|conn| apply_refreshes(conn, &refreshes))?;
            }
            Ok(results)
        })
        .await
    }

    /// Applies a run of consecutive puts (one per address, see [`BatchStep::Puts`]): one
    /// embedding call for all new texts, one transaction for every row and vector.
    async fn put_run(&self, order: Vec<PutOp>) -> Result<(), StoreError> {
        let mut tasks = Vec::with_capacity(order.len());
        for op in order {
            let paths = match (&self.index, &op.value) {
                (Some(index), Some(_)) => index.paths_for(&op.index)?,
                _ => Vec::new(),
            };
            tasks.push(PutTask {
                prefix: op.namespace.join("."),
                op,
                paths,
            });
        }
        let tasks = Arc::new(tasks);
        let indexed = self.index.is_some();
        // Plan and write in one transaction; when texts need embedding, the transaction is
        // abandoned, the texts are embedded with no lock held, and the run is planned again
        // (only texts that are still missing are embedded on a later attempt).
        let mut vectors: BTreeMap<String, Vec<f32>> = BTreeMap::new();
        for _ in 0..MAX_PUT_ATTEMPTS {
            let t = Arc::clone(&tasks);
            let clock = self.ttl.clock.clone();
            let arrival = self.db.arrival();
            let (outcome, back) = self
                .blocking(move |db| {
                    db.write_arrived(arrival, |conn| {
                        write_put_run(conn, &t, indexed, &vectors, &clock)
                    })
                    .map(|o| (o, vectors))
                })
                .await?;
            vectors = back;
            match outcome {
                RunOutcome::Done => return Ok(()),
                RunOutcome::Missing(texts) => {
                    let index = self.index.as_ref().ok_or_else(|| {
                        StoreError::Internal("vectors planned without an index".into())
                    })?;
                    vectors.extend(index.embed_texts(&texts).await?);
                }
            }
        }
        Err(StoreError::backend(
            BACKEND,
            format!(
                "other writers kept changing the items of a put while their texts were \
                 embedded; gave up after {MAX_PUT_ATTEMPTS} attempts"
            ),
        ))
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn batch(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, StoreError> {
        let mut results = Vec::new();
        for step in plan_batch(ops, self.index.as_ref()).await? {
            match step {
                BatchStep::Puts { ops, given } => {
                    self.put_run(ops).await?;
                    results.extend((0..given).map(|_| OpResult::Put));
                }
                BatchStep::Reads(reads) => results.extend(self.read_segment(reads).await?),
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
        let clock = self.ttl.clock.clone();
        self.blocking(move |db| db.write(|conn| sweep(conn, clock.now())))
            .await
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
