//! Node caches: where a graph keeps what its cached nodes and tasks wrote, keyed by their
//! input, so a later run (of any thread, in any process sharing the cache) with the same input
//! takes the writes instead of running the node again — LangGraph's `BaseCache`.
//!
//! A [`Cache`] maps a [`CacheKey`] (a namespace of labels and a key) to a [`Value`], each entry
//! with an optional time to live. The engine decides what goes in (the namespace names the node,
//! the key hashes its input; see `CachePolicy` in `stategraph-graph`); a cache only stores. Three
//! caches share LangGraph's layouts: [`InMemoryCache`] here, `SqliteCache` in
//! `stategraph-sqlite` (Python's `SqliteCache` table) and `RedisCache` in `stategraph-redis`
//! (Python's `RedisCache` keys), so a cache Python wrote is read by stategraph and the other way
//! round. The shared conformance suite (`stategraph-conformance`) specifies the behaviour every
//! cache has.
//!
//! ```
//! use std::time::Duration;
//! use stategraph_checkpoint::cache::{Cache, CacheEntry, CacheKey, InMemoryCache};
//! use stategraph_checkpoint::Value;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let cache = InMemoryCache::new();
//! let key = CacheKey::new(["__pregel_ns_writes", "app.summarize", "summarize"], "4f1c");
//! cache.set(vec![CacheEntry::new(key.clone(), Value::from("done"), Some(Duration::from_secs(60)))]).await?;
//! assert_eq!(cache.get(&[key.clone()]).await?, vec![(key, Value::from("done"))]);
//! # Ok::<(), stategraph_checkpoint::Error>(()) }).unwrap();
//! ```

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;

use crate::{Result, Value};

/// Where a cached value is: a namespace (its labels, outermost first) and a key in it —
/// LangGraph's `FullKey`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CacheKey {
    /// The namespace's labels.
    pub ns: Vec<String>,
    /// The key within the namespace.
    pub key: String,
}

impl CacheKey {
    /// The key `key` in the namespace `ns`.
    pub fn new<I, T>(ns: I, key: impl Into<String>) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        Self {
            ns: ns.into_iter().map(Into::into).collect(),
            key: key.into(),
        }
    }
}

/// A value to cache under `key`, for `ttl` (`None`: until cleared).
#[derive(Clone, Debug, PartialEq)]
pub struct CacheEntry {
    /// Where it goes.
    pub key: CacheKey,
    /// What is cached.
    pub value: Value,
    /// How long it is kept.
    pub ttl: Option<Duration>,
}

impl CacheEntry {
    /// An entry of `value` under `key`, kept for `ttl`.
    pub fn new(key: CacheKey, value: Value, ttl: Option<Duration>) -> Self {
        Self { key, value, ttl }
    }
}

/// A node cache (LangGraph's `BaseCache`): values under namespaced keys, each with an optional
/// time to live. An entry past its time is never returned.
#[async_trait]
pub trait Cache: Send + Sync + fmt::Debug {
    /// The live entries among `keys`, as `(key, value)` pairs in the order of `keys`; a key
    /// without one is left out.
    async fn get(&self, keys: &[CacheKey]) -> Result<Vec<(CacheKey, Value)>>;

    /// Stores each entry, replacing what its key held.
    async fn set(&self, entries: Vec<CacheEntry>) -> Result<()>;

    /// Deletes every entry of the given namespaces (each matched exactly), or of all when
    /// `None`.
    async fn clear(&self, namespaces: Option<&[Vec<String>]>) -> Result<()>;
}

/// Seconds since the Unix epoch, as the caches store expiry times (Python's
/// `datetime.now(timezone.utc).timestamp()`).
pub fn unix_seconds(at: SystemTime) -> f64 {
    match at.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    }
}

/// The in-memory [`Cache`] (LangGraph's `InMemoryCache`): entries live as long as the cache.
/// An expired entry is removed when read.
#[derive(Default)]
pub struct InMemoryCache {
    entries: Mutex<Entries>,
}

/// Namespace → key → value and expiry time.
type Entries = HashMap<Vec<String>, HashMap<String, (Value, Option<SystemTime>)>>;

impl fmt::Debug for InMemoryCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries = self.lock();
        f.debug_struct("InMemoryCache")
            .field("namespaces", &entries.len())
            .finish_non_exhaustive()
    }
}

impl InMemoryCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl Cache for InMemoryCache {
    async fn get(&self, keys: &[CacheKey]) -> Result<Vec<(CacheKey, Value)>> {
        let now = SystemTime::now();
        let mut entries = self.lock();
        let mut found = Vec::new();
        for key in keys {
            let Some(ns) = entries.get_mut(&key.ns) else {
                continue;
            };
            match ns.get(&key.key) {
                Some((value, expiry)) if expiry.is_none_or(|at| now < at) => {
                    found.push((key.clone(), value.clone()));
                }
                Some(_) => {
                    ns.remove(&key.key);
                }
                None => {}
            }
        }
        Ok(found)
    }

    async fn set(&self, entries: Vec<CacheEntry>) -> Result<()> {
        let now = SystemTime::now();
        let mut stored = self.lock();
        for CacheEntry { key, value, ttl } in entries {
            let expiry = ttl.map(|ttl| now + ttl);
            stored
                .entry(key.ns)
                .or_default()
                .insert(key.key, (value, expiry));
        }
        Ok(())
    }

    async fn clear(&self, namespaces: Option<&[Vec<String>]>) -> Result<()> {
        let mut stored = self.lock();
        match namespaces {
            None => stored.clear(),
            Some(namespaces) => {
                for ns in namespaces {
                    stored.remove(ns);
                }
            }
        }
        Ok(())
    }
}
