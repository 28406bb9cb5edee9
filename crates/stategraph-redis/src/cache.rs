//! [`RedisCache`]: a node [`Cache`] in Redis, on the keys and values of LangGraph's
//! `RedisCache`, so a Python graph and a Rust graph share cached node results.

use std::sync::Arc;

use async_trait::async_trait;
use stategraph_checkpoint::backend::Timeouts;
use stategraph_checkpoint::cache::{Cache, CacheEntry, CacheKey};
use stategraph_checkpoint::{Error, JsonPlusSerializer, Result, Serializer, Value};

use crate::error::{BACKEND, db};

/// LangGraph's default key prefix of cache entries.
pub const DEFAULT_CACHE_PREFIX: &str = "langgraph:cache:";

/// A node [`Cache`] in Redis (LangGraph's `RedisCache`): an entry is the string key
/// `{prefix}{ns labels joined by ':'}:{key}` holding `{encoding}:{bytes}` (the serializer's
/// type tag and bytes), expiring with its TTL by Redis's own clock.
///
/// ```no_run
/// use std::sync::Arc;
/// use stategraph_redis::RedisCache;
///
/// # async fn demo() -> Result<(), stategraph_checkpoint::Error> {
/// let cache = RedisCache::connect("redis://127.0.0.1:6379/0").await?;
/// // graph.with_cache(Arc::new(cache)) — shared with Python's `RedisCache(redis)`.
/// # let _ = cache;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisCache {
    conn: redis::aio::MultiplexedConnection,
    prefix: String,
    serializer: Arc<dyn Serializer>,
    timeouts: Timeouts,
}

impl std::fmt::Debug for RedisCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisCache")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisCache {
    /// Connects to the server a `redis://` URL names (with [`RedisConfig::from_url`]'s
    /// timeout parameters), with LangGraph's prefix [`DEFAULT_CACHE_PREFIX`].
    ///
    /// [`RedisConfig::from_url`]: crate::RedisConfig::from_url
    pub async fn connect(url: &str) -> Result<Self> {
        let config = crate::RedisConfig::from_url(url)?;
        let timeouts = config.timeouts_value();
        let conn = config.open().await?;
        Ok(Self::from_connection(conn).timeouts(timeouts))
    }

    /// A cache on a multiplexed connection you own (cloned, not reopened).
    pub fn from_connection(conn: redis::aio::MultiplexedConnection) -> Self {
        Self {
            conn,
            prefix: DEFAULT_CACHE_PREFIX.to_owned(),
            serializer: Arc::new(JsonPlusSerializer::new()),
            timeouts: Timeouts::default(),
        }
    }

    /// Puts every key under `prefix` (taken as is: LangGraph's default ends in `:`).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Uses another serializer for the cached values.
    pub fn serializer(mut self, serializer: Arc<dyn Serializer>) -> Self {
        self.serializer = serializer;
        self
    }

    /// How long each command may take (the statement limit; see [`Timeouts`]).
    pub fn timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// The Redis key of `key`.
    fn redis_key(&self, key: &CacheKey) -> String {
        if key.ns.is_empty() {
            format!("{}{}", self.prefix, key.key)
        } else {
            format!("{}{}:{}", self.prefix, key.ns.join(":"), key.key)
        }
    }

    /// Runs `op` (what it does, for errors) within the statement limit.
    async fn within<T>(
        &self,
        operation: &str,
        op: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        self.timeouts.statement(BACKEND, operation, op).await
    }

    /// Every key under `pattern` (a `SCAN`, not a blocking `KEYS`).
    async fn scan(&self, pattern: &str) -> Result<Vec<String>> {
        let mut conn = self.conn.clone();
        let mut cursor: u64 = 0;
        let mut keys = Vec::new();
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut conn)
                .await
                .map_err(db("scanning the cache's keys"))?;
            keys.extend(batch);
            if next == 0 {
                return Ok(keys);
            }
            cursor = next;
        }
    }
}

/// `text` with Redis's glob characters escaped, to match itself in a `MATCH` pattern.
fn glob_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[async_trait]
impl Cache for RedisCache {
    async fn get(&self, keys: &[CacheKey]) -> Result<Vec<(CacheKey, Value)>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let redis_keys: Vec<String> = keys.iter().map(|k| self.redis_key(k)).collect();
        let mut conn = self.conn.clone();
        let raw: Vec<Option<Vec<u8>>> = self
            .within("reading cache entries", async {
                redis::cmd("MGET")
                    .arg(&redis_keys)
                    .query_async(&mut conn)
                    .await
                    .map_err(db("reading cache entries"))
            })
            .await?;
        let mut found = Vec::new();
        for ((key, redis_key), raw) in keys.iter().zip(&redis_keys).zip(raw) {
            let Some(raw) = raw else {
                continue;
            };
            let corrupt = |message: String| Error::Backend {
                backend: BACKEND,
                message: format!("cache entry `{redis_key}`: {message}"),
                source: None,
            };
            let split = raw
                .iter()
                .position(|&b| b == b':')
                .ok_or_else(|| corrupt("not `encoding:bytes`".to_owned()))?;
            let (encoding, data) = raw.split_at(split);
            let encoding = std::str::from_utf8(encoding)
                .map_err(|_| corrupt("its encoding is not UTF-8".to_owned()))?;
            let value = self
                .serializer
                .loads_typed(encoding, data.get(1..).unwrap_or_default())
                .map_err(|e| corrupt(e.to_string()))?;
            found.push((key.clone(), value));
        }
        Ok(found)
    }

    async fn set(&self, entries: Vec<CacheEntry>) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for CacheEntry { key, value, ttl } in &entries {
            let (encoding, data) = self.serializer.dumps_typed(value).map_err(|e| {
                Error::invalid("cache value", format!("{}: {e}", self.redis_key(key)))
            })?;
            let mut stored = Vec::with_capacity(encoding.len() + 1 + data.len());
            stored.extend_from_slice(encoding.as_bytes());
            stored.push(b':');
            stored.extend_from_slice(&data);
            let cmd = pipe.cmd("SET").arg(self.redis_key(key)).arg(stored);
            if let Some(ttl) = ttl {
                // Milliseconds, at least one: Python's whole seconds are a special case.
                cmd.arg("PX").arg(ttl.as_millis().max(1) as u64);
            }
            cmd.ignore();
        }
        let mut conn = self.conn.clone();
        self.within("writing cache entries", async {
            pipe.query_async::<()>(&mut conn)
                .await
                .map_err(db("writing cache entries"))
        })
        .await
    }

    async fn clear(&self, namespaces: Option<&[Vec<String>]>) -> Result<()> {
        let mut doomed = Vec::new();
        match namespaces {
            None => {
                doomed = self
                    .scan(&format!("{}*", glob_literal(&self.prefix)))
                    .await?
            }
            Some(namespaces) => {
                for ns in namespaces {
                    let base = format!("{}{}:", self.prefix, ns.join(":"));
                    let keys = self.scan(&format!("{}*", glob_literal(&base))).await?;
                    // Exactly this namespace: not the keys of namespaces below it.
                    doomed.extend(keys.into_iter().filter(|k| {
                        k.strip_prefix(&base)
                            .is_some_and(|rest| !rest.contains(':'))
                    }));
                }
            }
        }
        let mut conn = self.conn.clone();
        for chunk in doomed.chunks(500) {
            self.within("clearing cache entries", async {
                redis::cmd("DEL")
                    .arg(chunk)
                    .query_async::<()>(&mut conn)
                    .await
                    .map_err(db("clearing cache entries"))
            })
            .await?;
        }
        Ok(())
    }
}
