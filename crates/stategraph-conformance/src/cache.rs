//! The shared conformance suite of node [`Cache`]s: one `pub async fn` per behaviour, run by
//! every cache with [`cache_conformance!`](crate::cache_conformance).
//!
//! ```text
//! async fn make() -> CacheFixture {
//!     let scratch = MyScratchPrefix::new();      // dropped when the fixture is
//!     CacheFixture::new(MyCache::connect(URL).await.unwrap().prefix(scratch.name()))
//!         .with_guard(scratch)
//! }
//! stategraph_conformance::cache_conformance!(make);
//! ```
//!
//! Each call of the factory must give a cache no other call shares (a key prefix, a database
//! file of its own): a case clears *everything* in its cache.

use std::sync::Arc;
use std::time::Duration;

use stategraph_checkpoint::cache::{Cache, CacheEntry, CacheKey};
use stategraph_checkpoint::{Value, uuid6, value};

/// A cache under test, plus anything that must live as long as it (a scratch prefix, a
/// temporary directory).
pub struct CacheFixture {
    cache: Arc<dyn Cache>,
    _guard: Option<Box<dyn std::any::Any + Send>>,
}

impl CacheFixture {
    /// A fixture around `cache`.
    pub fn new(cache: impl Cache + 'static) -> Self {
        Self {
            cache: Arc::new(cache),
            _guard: None,
        }
    }

    /// Keeps `guard` alive until the fixture is dropped.
    pub fn with_guard(mut self, guard: impl std::any::Any + Send) -> Self {
        self._guard = Some(Box::new(guard));
        self
    }

    /// The cache.
    pub fn cache(&self) -> Arc<dyn Cache> {
        Arc::clone(&self.cache)
    }
}

/// Expands to one `#[tokio::test]` per cache conformance case, each calling `$factory().await`
/// for the [`CacheFixture`] under test.
#[macro_export]
macro_rules! cache_conformance {
    ($factory:path) => {
        $crate::__cache_conformance_cases!($factory;
            cache_get_returns_what_was_set, cache_get_misses_unknown_keys,
            cache_set_replaces, cache_namespaces_isolate_keys, cache_ttl_expires,
            cache_clear_namespaces, cache_clear_all_of_a_case, cache_rich_values_read_back,
            cache_empty_calls_are_noops,
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __cache_conformance_cases {
    ($factory:path; $($case:ident),* $(,)?) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let fixture: $crate::cache::CacheFixture = $factory().await;
                $crate::cache::$case(fixture.cache()).await;
            }
        )*
    };
}

/// A namespace no other case uses, ending in `label`.
fn ns(label: &str) -> Vec<String> {
    vec![
        "__pregel_ns_writes".to_owned(),
        format!("case{}", uuid6(None).replace('-', "")),
        label.to_owned(),
    ]
}

fn key(ns: &[String], key: &str) -> CacheKey {
    CacheKey::new(ns.iter().cloned(), key)
}

/// Sets every one of `keys` to `writes(1)`, kept until cleared.
async fn set_all(cache: &Arc<dyn Cache>, keys: &[CacheKey]) {
    let entries = keys
        .iter()
        .map(|k| CacheEntry::new(k.clone(), writes(1), None))
        .collect();
    cache.set(entries).await.unwrap();
}

/// The writes a cached node leaves, as the engine stores them.
fn writes(n: i64) -> Value {
    value!([["count", n], ["log", ["ran"]]])
}

pub async fn cache_get_returns_what_was_set(cache: Arc<dyn Cache>) {
    let ns = ns("node");
    let (a, b) = (key(&ns, "a1"), key(&ns, "b2"));
    cache
        .set(vec![
            CacheEntry::new(a.clone(), writes(1), None),
            CacheEntry::new(b.clone(), writes(2), Some(Duration::from_secs(600))),
        ])
        .await
        .unwrap();
    let got = cache.get(&[b.clone(), a.clone()]).await.unwrap();
    assert_eq!(
        got,
        vec![(b, writes(2)), (a, writes(1))],
        "in the order asked"
    );
}

pub async fn cache_get_misses_unknown_keys(cache: Arc<dyn Cache>) {
    let ns = ns("node");
    let known = key(&ns, "known");
    cache
        .set(vec![CacheEntry::new(known.clone(), writes(1), None)])
        .await
        .unwrap();
    let got = cache
        .get(&[key(&ns, "unknown"), known.clone(), key(&ns[..2], "known")])
        .await
        .unwrap();
    assert_eq!(got, vec![(known, writes(1))]);
}

pub async fn cache_set_replaces(cache: Arc<dyn Cache>) {
    let ns = ns("node");
    let k = key(&ns, "k");
    for n in [1, 2] {
        cache
            .set(vec![CacheEntry::new(k.clone(), writes(n), None)])
            .await
            .unwrap();
    }
    assert_eq!(
        cache.get(std::slice::from_ref(&k)).await.unwrap(),
        vec![(k, writes(2))]
    );
}

pub async fn cache_namespaces_isolate_keys(cache: Arc<dyn Cache>) {
    let (one, two) = (ns("one"), ns("two"));
    cache
        .set(vec![
            CacheEntry::new(key(&one, "k"), writes(1), None),
            CacheEntry::new(key(&two, "k"), writes(2), None),
        ])
        .await
        .unwrap();
    assert_eq!(
        cache.get(&[key(&two, "k")]).await.unwrap(),
        vec![(key(&two, "k"), writes(2))]
    );
}

pub async fn cache_ttl_expires(cache: Arc<dyn Cache>) {
    let ns = ns("node");
    let (short, long) = (key(&ns, "short"), key(&ns, "long"));
    cache
        .set(vec![
            CacheEntry::new(short.clone(), writes(1), Some(Duration::from_secs(1))),
            CacheEntry::new(long.clone(), writes(2), Some(Duration::from_secs(600))),
        ])
        .await
        .unwrap();
    assert_eq!(
        cache.get(std::slice::from_ref(&short)).await.unwrap().len(),
        1
    );
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert_eq!(
        cache.get(&[short.clone(), long.clone()]).await.unwrap(),
        vec![(long, writes(2))],
        "an expired entry is never returned"
    );
    // Setting it again brings it back.
    cache
        .set(vec![CacheEntry::new(short.clone(), writes(3), None)])
        .await
        .unwrap();
    assert_eq!(
        cache.get(std::slice::from_ref(&short)).await.unwrap(),
        vec![(short, writes(3))]
    );
}

pub async fn cache_clear_namespaces(cache: Arc<dyn Cache>) {
    let (one, two, three) = (ns("one"), ns("two"), ns("three"));
    let keys = [key(&one, "k"), key(&two, "k"), key(&three, "k")];
    set_all(&cache, &keys).await;
    cache
        .clear(Some(&[one.clone(), three.clone()]))
        .await
        .unwrap();
    let left: Vec<CacheKey> = cache
        .get(&keys)
        .await
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(left, vec![keys[1].clone()]);
}

/// Clearing everything leaves nothing.
pub async fn cache_clear_all_of_a_case(cache: Arc<dyn Cache>) {
    let (one, two) = (ns("one"), ns("two"));
    let keys = [key(&one, "k"), key(&two, "k")];
    set_all(&cache, &keys).await;
    cache.clear(None).await.unwrap();
    assert!(cache.get(&keys).await.unwrap().is_empty());
}

pub async fn cache_rich_values_read_back(cache: Arc<dyn Cache>) {
    let ns = ns("node");
    let k = key(&ns, "rich");
    let mut rich = stategraph_checkpoint::Map::new();
    rich.insert("text", "héllo ✓ \u{0}");
    rich.insert("bytes", Value::Bytes(vec![0, 255, 7]));
    rich.insert("nested", value!([1.5, -7, null, true, {"deep": [[]]}]));
    rich.insert("big", i64::MAX);
    rich.insert("huge", Value::UInt(u64::MAX));
    let rich = Value::Map(rich);
    cache
        .set(vec![CacheEntry::new(k.clone(), rich.clone(), None)])
        .await
        .unwrap();
    assert_eq!(
        cache.get(std::slice::from_ref(&k)).await.unwrap(),
        vec![(k, rich)]
    );
}

pub async fn cache_empty_calls_are_noops(cache: Arc<dyn Cache>) {
    assert!(cache.get(&[]).await.unwrap().is_empty());
    cache.set(Vec::new()).await.unwrap();
    cache.clear(Some(&[])).await.unwrap();
}
