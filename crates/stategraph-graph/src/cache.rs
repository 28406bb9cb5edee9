//! Node caching (LangGraph's `CachePolicy`): a node with a cache policy, in a graph with a
//! [`Cache`], looks its input up before it runs; on a hit its cached writes are taken as its
//! own and the node does not run (the `updates` stream marks them `cached`), on a miss it runs
//! and its writes are cached once it succeeds.
//!
//! Entries are where LangGraph puts them: namespace `("__pregel_ns_writes", identifier, node)`,
//! key the 128-bit xxh3 hex digest of the bytes the policy's key function makes of the input,
//! value the task's writes as Python's `deque` of `(channel, value)` pairs. A cache a Python
//! graph filled is hit by a Rust graph whose node has the same identifier (Python's
//! `module.qualname` of the node's function; [`CachePolicy::identifier`]) and whose key
//! function makes the same bytes. Python's default key (a pickle of the input) has no Rust
//! equivalent, so sharing a cache across the two takes an explicit key function on both sides.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use stategraph_checkpoint::cache::{Cache, CacheEntry, CacheKey};
use stategraph_checkpoint::{Map, Value};
use stategraph_value::{Ext, ExtCode};

/// The namespace label every cached write entry starts with (LangGraph's `CACHE_NS_WRITES`).
pub const CACHE_NS_WRITES: &str = "__pregel_ns_writes";

/// Makes the bytes a cache key is hashed from, out of a node's input.
type KeyFn = Arc<dyn Fn(&Value) -> Vec<u8> + Send + Sync>;

/// How a node's (or task's) results are cached (LangGraph's `CachePolicy`): the key its
/// input is cached under, and for how long.
///
/// ```
/// use std::time::Duration;
/// use stategraph_graph::CachePolicy;
///
/// // Keyed by the `query` field only, kept for an hour.
/// let policy = CachePolicy::new()
///     .key(|input| {
///         let query = input.as_map().and_then(|m| m.get("query"));
///         query.and_then(|q| q.as_str()).unwrap_or_default().to_owned()
///     })
///     .ttl(Duration::from_secs(3600));
/// # let _ = policy;
/// ```
#[derive(Clone, Default)]
pub struct CachePolicy {
    key: Option<KeyFn>,
    ttl: Option<Duration>,
    identifier: Option<String>,
}

impl fmt::Debug for CachePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachePolicy")
            .field("key", &self.key.as_ref().map_or("default", |_| "custom"))
            .field("ttl", &self.ttl)
            .field("identifier", &self.identifier)
            .finish()
    }
}

impl CachePolicy {
    /// Entries kept until cleared, keyed by the whole input ([`default_key`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps entries for `ttl` (LangGraph's `ttl=`, in seconds there).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Keys entries by what `key` makes of the node's input (a `String` or bytes; LangGraph's
    /// `key_func`): the state values the node reads as a map, a `Send`'s argument, or a task's
    /// argument. Two inputs with the same key share an entry.
    pub fn key<K: Into<Vec<u8>>>(
        mut self,
        key: impl Fn(&Value) -> K + Send + Sync + 'static,
    ) -> Self {
        self.key = Some(Arc::new(move |input| key(input).into()));
        self
    }

    /// Names the node in the entries' namespace by `identifier` instead of its function's
    /// Rust path: to share a cache with a Python graph, Python's `module.qualname` of the
    /// node's function (e.g. `"app.nodes.summarize"`).
    pub fn identifier(mut self, identifier: impl Into<String>) -> Self {
        self.identifier = Some(identifier.into());
        self
    }

    /// How long entries are kept (`None`: until cleared).
    pub fn ttl_value(&self) -> Option<Duration> {
        self.ttl
    }

    /// The entry `input` is cached under, for node (or task) `name` whose function's path is
    /// `function`.
    pub(crate) fn cache_key(&self, function: &str, name: Option<&str>, input: &Value) -> CacheKey {
        let bytes = match &self.key {
            Some(key) => key(input),
            None => default_key(input),
        };
        CacheKey {
            ns: self.namespace(function, name),
            key: format!("{:032x}", xxhash_rust::xxh3::xxh3_128(&bytes)),
        }
    }

    /// The namespace of the node's (or task's) entries.
    pub(crate) fn namespace(&self, function: &str, name: Option<&str>) -> Vec<String> {
        let identifier = self
            .identifier
            .clone()
            .unwrap_or_else(|| function_identifier(function));
        let mut ns = vec![CACHE_NS_WRITES.to_owned(), identifier];
        ns.extend(name.map(str::to_owned));
        ns
    }
}

/// A Rust function's path as a dotted identifier, as Python names a function by its module and
/// qualified name: `app::nodes::summarize` → `app.nodes.summarize`.
pub(crate) fn function_identifier(path: &str) -> String {
    path.replace("::", ".")
}

/// The default cache key of an input: its msgpack bytes with every map's keys sorted, so
/// equal inputs key alike whatever order their keys were written in.
pub fn default_key(input: &Value) -> Vec<u8> {
    stategraph_value::encode(&canonical(input))
}

/// `value` with its maps' keys sorted, at every depth.
fn canonical(value: &Value) -> Value {
    match value {
        Value::Map(m) => {
            let mut entries: Vec<(Value, Value)> =
                m.iter().map(|(k, v)| (k.clone(), canonical(v))).collect();
            entries.sort_by_key(|e| key_order(&e.0));
            Value::Map(entries.into_iter().collect())
        }
        Value::List(l) => Value::List(l.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// How map keys sort: strings by text, anything else after them by its encoding.
fn key_order(key: &Value) -> (u8, Vec<u8>) {
    match key {
        Value::Str(s) => (0, s.as_bytes().to_vec()),
        other => (1, stategraph_value::encode(other)),
    }
}

/// A task's writes as a cache stores them: Python's `deque` of `(channel, value)` pairs.
pub(crate) fn writes_value(writes: &[(String, Value)]) -> Value {
    let pairs: Value = writes
        .iter()
        .map(|(c, v)| Value::List(vec![Value::from(c.as_str()), v.clone()].into()))
        .collect::<Vec<_>>()
        .into();
    Value::Ext(Ext::python(
        ExtCode::ConstructorSingleArg,
        "collections",
        "deque",
        pairs,
    ))
}

/// Cached writes read back: a `deque` or a list of `(channel, value)` pairs; `None` for
/// anything else (an entry of another shape is a miss, not an error).
pub(crate) fn writes_from_value(value: &Value) -> Option<Vec<(String, Value)>> {
    let list = match value {
        Value::Ext(e) => {
            let obj = e.py_object().ok()??;
            if (obj.module.as_str(), obj.class.as_str()) != ("collections", "deque") {
                return None;
            }
            obj.data
        }
        other => other.clone(),
    };
    let Value::List(items) = list else {
        return None;
    };
    items
        .iter()
        .map(|pair| match pair {
            Value::List(p) if p.len() == 2 => {
                let channel = p.first()?.as_str()?.to_owned();
                Some((channel, p.get(1)?.clone()))
            }
            _ => None,
        })
        .collect()
}

/// The writes `cache` holds under each of `keys` that it has: a cache that cannot be read
/// answers nothing (logged and counted), and an entry that is not a list of writes is left
/// out (logged), so the tasks run.
pub(crate) async fn cached_writes(
    cache: &dyn Cache,
    keys: &[CacheKey],
) -> Vec<(CacheKey, Vec<(String, Value)>)> {
    let found = match cache.get(keys).await {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(error = %e, "the node cache could not be read; running the tasks");
            metrics::counter!("stategraph_cache_errors_total", "op" => "get").increment(1);
            return Vec::new();
        }
    };
    found
        .into_iter()
        .filter_map(|(key, value)| match writes_from_value(&value) {
            Some(writes) => Some((key, writes)),
            None => {
                tracing::warn!(namespace = ?key.ns, key = %key.key, "a cache entry is not a list of writes; running the task");
                None
            }
        })
        .collect()
}

/// Leaves task `name`'s `writes` in `cache` under `key` for `ttl`; a failure is logged and
/// counted, never the run's.
pub(crate) async fn keep_writes(
    cache: &dyn Cache,
    key: CacheKey,
    ttl: Option<Duration>,
    writes: &[(String, Value)],
    name: &str,
) {
    let entry = CacheEntry::new(key, writes_value(writes), ttl);
    if let Err(e) = cache.set(vec![entry]).await {
        tracing::warn!(error = %e, task = name, "the node cache could not be written");
        metrics::counter!("stategraph_cache_errors_total", "op" => "set").increment(1);
    }
}

/// A node's input as its cache key function (and the `tasks` stream) sees it: the values it
/// reads, as a map.
pub(crate) fn input_map(values: &crate::state::Values) -> Value {
    Value::Map(
        values
            .iter()
            .map(|(k, v)| (Value::from(k.as_str()), v.clone()))
            .collect::<Map>(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use stategraph_checkpoint::value;

    #[test]
    fn default_keys_ignore_key_order() {
        let a = value!({"x": 1, "y": {"b": 2, "a": [1, {"d": 0, "c": 1}]}});
        let b = value!({"y": {"a": [1, {"c": 1, "d": 0}], "b": 2}, "x": 1});
        assert_eq!(default_key(&a), default_key(&b));
        assert_ne!(default_key(&a), default_key(&value!({"x": 2})));
    }

    #[test]
    fn keys_are_lowercase_xxh3_hex_under_the_node_namespace() {
        let policy = CachePolicy::new().key(|v| {
            let q = v.as_map().and_then(|m| m.get("q"));
            q.and_then(Value::as_str).unwrap_or("").to_owned()
        });
        let key = policy.cache_key("app::nodes::search", Some("search"), &value!({"q": "abc"}));
        assert_eq!(key.ns, ["__pregel_ns_writes", "app.nodes.search", "search"]);
        assert_eq!(
            key.key,
            format!("{:032x}", xxhash_rust::xxh3::xxh3_128(b"abc"))
        );
        let named = policy.identifier("__main__.search");
        assert_eq!(
            named.namespace("x", None),
            ["__pregel_ns_writes", "__main__.search"]
        );
    }

    #[test]
    fn writes_round_trip_through_the_stored_deque() {
        let writes = vec![
            ("count".to_owned(), value!(1)),
            ("branch:to:b".to_owned(), Value::Null),
        ];
        let stored = writes_value(&writes);
        assert!(matches!(stored, Value::Ext(_)));
        assert_eq!(writes_from_value(&stored), Some(writes.clone()));
        // Python's lists of pairs read too; other shapes are misses.
        assert_eq!(
            writes_from_value(&value!([["count", 1], ["branch:to:b", null]])),
            Some(writes)
        );
        assert_eq!(writes_from_value(&value!({"count": 1})), None);
        assert_eq!(writes_from_value(&value!([["count"]])), None);
    }
}
