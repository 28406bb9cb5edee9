//! [`SqliteCache`]: a node [`Cache`] in a SQLite database, on the table of LangGraph's
//! `SqliteCache`, so a Python graph and a Rust graph share cached node results in one file.

use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use rusqlite::params_from_iter;
use rusqlite::types::Value as SqlValue;
use stategraph_checkpoint::cache::{Cache, CacheEntry, CacheKey, unix_seconds};
use stategraph_checkpoint::{Error, Result, Serializer, Value};

use crate::config::{SqliteConfig, retry_busy};
use crate::error::BACKEND;
use crate::pool::Pool;

/// The table, as Python's `SqliteCache` creates it.
const CACHE_TABLE: &str = "CREATE TABLE IF NOT EXISTS cache (
    ns TEXT,
    key TEXT,
    expiry REAL,
    encoding TEXT NOT NULL,
    val BLOB NOT NULL,
    PRIMARY KEY (ns, key)
)";

/// Keys looked up per statement (each takes two parameters).
const KEYS_PER_READ: usize = 400;

/// A node [`Cache`] in SQLite (LangGraph's `SqliteCache`): table `cache`, one row per entry,
/// its namespace's labels joined by `,` in `ns`, the serializer's type tag and bytes in
/// `encoding` and `val`, and its expiry in `expiry` (Unix seconds, `NULL` for never). An
/// expired row is deleted when read.
///
/// Built on the database's shared writer like the saver and the store, so it may live in the
/// same file as the checkpoints.
///
/// ```
/// use std::sync::Arc;
/// use stategraph_checkpoint::cache::{Cache, CacheEntry, CacheKey};
/// use stategraph_checkpoint::value;
/// use stategraph_sqlite::SqliteCache;
///
/// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
/// # let dir = tempfile::tempdir().unwrap();
/// # let url = format!("sqlite:{}", dir.path().join("cache.sqlite").display());
/// let cache = SqliteCache::connect(&url).await?; // e.g. "sqlite:cache.sqlite"
/// let key = CacheKey::new(["__pregel_ns_writes", "app.node", "node"], "ab12");
/// cache.set(vec![CacheEntry::new(key.clone(), value!([["x", 1]]), None)]).await?;
/// assert_eq!(cache.get(&[key.clone()]).await?, vec![(key, value!([["x", 1]]))]);
/// // graph.with_cache(Arc::new(cache)) — shared with Python's `SqliteCache(path=…)`.
/// # Ok::<(), stategraph_checkpoint::Error>(()) }).unwrap();
/// ```
#[derive(Clone)]
pub struct SqliteCache {
    pool: Arc<Pool>,
    serializer: Arc<dyn Serializer>,
}

impl std::fmt::Debug for SqliteCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteCache")
            .field("location", &self.pool.config().location)
            .finish_non_exhaustive()
    }
}

/// Wraps a rusqlite error with what we were doing.
fn db(doing: &'static str) -> impl Fn(rusqlite::Error) -> Error {
    move |e| Error::backend(BACKEND, doing, e)
}

impl SqliteCache {
    /// Opens the database a `sqlite:` URL names ([`SqliteConfig::from_url`]) and creates the
    /// cache's table if it is missing.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::open(SqliteConfig::from_url(url)?).await
    }

    /// Opens a cache with `config`'s connection settings and serializer (a configuration
    /// from [`SqliteDatabase::saver`](crate::SqliteDatabase::saver) shares the database's
    /// writer); creates the table unless the configuration is
    /// [`without_setup`](SqliteConfig::without_setup).
    pub async fn open(config: SqliteConfig) -> Result<Self> {
        let serializer = Arc::clone(&config.serializer);
        let setup = config.run_setup;
        let pool = Arc::new(Pool::new(config, |_| Ok(())));
        let cache = Self { pool, serializer };
        if setup {
            let pool = Arc::clone(&cache.pool);
            tokio::task::spawn_blocking(move || {
                let busy = pool.config().busy_timeout;
                pool.exclusive(|conn| {
                    retry_busy(busy, || conn.execute_batch(CACHE_TABLE))
                        .map_err(db("creating the cache table"))
                })
            })
            .await
            .map_err(|e| Error::backend(BACKEND, "creating the cache table", e))??;
        }
        Ok(cache)
    }

    /// Runs `f` with the pool on tokio's blocking pool.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Pool) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let pool = Arc::clone(&self.pool);
        tokio::task::spawn_blocking(move || f(&pool))
            .await
            .map_err(|e| Error::backend(BACKEND, "running a cache operation", e))?
    }
}

/// A stored row: namespace, key, expiry, encoding, bytes.
type Row = (String, String, Option<f64>, String, Vec<u8>);

#[async_trait]
impl Cache for SqliteCache {
    async fn get(&self, keys: &[CacheKey]) -> Result<Vec<(CacheKey, Value)>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let asked: Vec<(String, String)> = keys
            .iter()
            .map(|k| (k.ns.join(","), k.key.clone()))
            .collect();
        let rows: Vec<Row> = self
            .blocking(move |pool| {
                let now = unix_seconds(SystemTime::now());
                let mut live = Vec::new();
                let mut expired = Vec::new();
                pool.read(|conn| {
                    for chunk in asked.chunks(KEYS_PER_READ) {
                        let tuples = vec!["(?, ?)"; chunk.len()].join(", ");
                        let sql = format!(
                            "SELECT ns, key, expiry, encoding, val FROM cache \
                             WHERE (ns, key) IN (VALUES {tuples})"
                        );
                        let params = chunk
                            .iter()
                            .flat_map(|(ns, key)| [ns.as_str(), key.as_str()]);
                        let mut stmt =
                            conn.prepare_cached(&sql).map_err(db("reading the cache"))?;
                        let found = stmt
                            .query_map(params_from_iter(params), |r| {
                                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                            })
                            .map_err(db("reading the cache"))?;
                        for row in found {
                            let row: Row = row.map_err(db("reading the cache"))?;
                            if row.2.is_some_and(|expiry| now > expiry) {
                                expired.push((row.0, row.1));
                            } else {
                                live.push(row);
                            }
                        }
                    }
                    Ok::<(), Error>(())
                })?;
                if !expired.is_empty() {
                    pool.write(|conn| {
                        let mut stmt = conn
                            .prepare_cached(
                                "DELETE FROM cache WHERE ns = ? AND key = ? AND expiry < ?",
                            )
                            .map_err(db("deleting expired cache entries"))?;
                        for (ns, key) in &expired {
                            stmt.execute(rusqlite::params![ns, key, now])
                                .map_err(db("deleting expired cache entries"))?;
                        }
                        Ok::<(), Error>(())
                    })?;
                }
                Ok(live)
            })
            .await?;
        let mut by_key = std::collections::HashMap::new();
        for (ns, key, _, encoding, bytes) in rows {
            let value = self
                .serializer
                .loads_typed(&encoding, &bytes)
                .map_err(|e| Error::Backend {
                    backend: BACKEND,
                    message: format!("cache entry ({ns:?}, {key:?}) cannot be decoded: {e}"),
                    source: None,
                })?;
            by_key.insert((ns, key), value);
        }
        Ok(keys
            .iter()
            .filter_map(|k| {
                let value = by_key.get(&(k.ns.join(","), k.key.clone()))?;
                Some((k.clone(), value.clone()))
            })
            .collect())
    }

    async fn set(&self, entries: Vec<CacheEntry>) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let now = unix_seconds(SystemTime::now());
        let mut rows = Vec::with_capacity(entries.len());
        for CacheEntry { key, value, ttl } in entries {
            let (encoding, bytes) = self.serializer.dumps_typed(&value).map_err(|e| {
                Error::invalid("cache value", format!("({:?}, {:?}): {e}", key.ns, key.key))
            })?;
            let expiry = ttl.map(|ttl| now + ttl.as_secs_f64());
            rows.push((key.ns.join(","), key.key, expiry, encoding, bytes));
        }
        self.blocking(move |pool| {
            pool.write(|conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "INSERT OR REPLACE INTO cache (ns, key, expiry, encoding, val) \
                         VALUES (?, ?, ?, ?, ?)",
                    )
                    .map_err(db("writing the cache"))?;
                for (ns, key, expiry, encoding, bytes) in &rows {
                    stmt.execute(rusqlite::params![ns, key, expiry, encoding, bytes])
                        .map_err(db("writing the cache"))?;
                }
                Ok(())
            })
        })
        .await
    }

    async fn clear(&self, namespaces: Option<&[Vec<String>]>) -> Result<()> {
        let namespaces: Option<Vec<String>> =
            namespaces.map(|all| all.iter().map(|ns| ns.join(",")).collect());
        if namespaces.as_ref().is_some_and(Vec::is_empty) {
            return Ok(());
        }
        self.blocking(move |pool| {
            pool.write(|conn| {
                match &namespaces {
                    None => conn.execute("DELETE FROM cache", []),
                    Some(list) => {
                        let marks = vec!["?"; list.len()].join(", ");
                        conn.execute(
                            &format!("DELETE FROM cache WHERE ns IN ({marks})"),
                            params_from_iter(list.iter().map(|ns| SqlValue::Text(ns.clone()))),
                        )
                    }
                }
                .map_err(db("clearing the cache"))?;
                Ok(())
            })
        })
        .await
    }
}
