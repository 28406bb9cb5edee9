//! The shared conformance suite of [`Store`] backends: one `pub async fn` per behaviour,
//! run by every backend with [`store_conformance!`](crate::store_conformance).
//!
//! ```text
//! async fn make(options: StoreOptions) -> StoreFixture {
//!     StoreFixture::new(MyStore::connect(url, options.index, options.ttl).await.unwrap())
//! }
//! stategraph_checkpoint::store_conformance!(make);
//! ```
//!
//! Each case asks for a fresh store with the options it needs (an index, a TTL config) and
//! works under its own root label, so cases may share one database.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value as Json, json};

use crate::store::*;
use crate::uuid6;

/// What a case needs of its store (the same options users open stores with).
pub use crate::store::StoreOptions;

/// A store under test, plus anything that must live as long as it.
pub struct StoreFixture {
    store: Arc<dyn Store>,
    _guard: Option<Box<dyn std::any::Any + Send>>,
}

impl StoreFixture {
    /// A fixture around `store`.
    pub fn new(store: impl Store + 'static) -> Self {
        Self {
            store: Arc::new(store),
            _guard: None,
        }
    }

    /// Keeps `guard` alive until the fixture is dropped.
    pub fn with_guard(mut self, guard: impl std::any::Any + Send) -> Self {
        self._guard = Some(Box::new(guard));
        self
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }
}

/// How cases get stores: the backend's factory, boxed.
pub type MakeStore<'a> =
    &'a (dyn Fn(StoreOptions) -> Pin<Box<dyn Future<Output = StoreFixture> + Send>> + Sync);

/// Expands to one `#[tokio::test]` per store conformance case, each calling
/// `$factory(options).await` for a fresh [`StoreFixture`].
#[macro_export]
macro_rules! store_conformance {
    ($factory:path) => {
        $crate::__store_conformance_cases!($factory;
            put_get_roundtrip, get_missing_is_none, item_fields, put_updates_in_place,
            delete_removes, delete_missing_is_noop, namespaces_isolate_keys,
            rejects_bad_namespaces, rejects_non_object_values, batch_results_in_order,
            batch_last_put_wins, search_prefix_is_label_wise, search_orders_newest_first,
            search_limit_offset, search_filter_equality, search_filter_numeric,
            search_filter_strings, search_filter_ne_and_missing, search_filter_containment,
            search_filter_rejects_bad_operators, semantic_search_ranks_by_meaning,
            semantic_search_respects_prefix_and_filter, semantic_search_scores_descending,
            semantic_search_without_index_ignores_query, index_false_is_not_embedded,
            index_fields_override, index_array_paths_embed_each_element,
            reembeds_only_changed_text, reindex_after_text_change, delete_removes_vectors,
            list_namespaces_sorted, list_namespaces_max_depth, list_namespaces_suffix_and_wildcard,
            list_namespaces_limit_offset, ttl_expires_items, ttl_refresh_on_read,
            ttl_sweep_deletes_expired, ttl_default_from_config, clock_stamps_items,
            unicode_and_nested_values,
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_cases {
    ($factory:path; $($case:ident),* $(,)?) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let make = |o: $crate::conformance::store::StoreOptions|
                    -> ::std::pin::Pin<Box<dyn ::std::future::Future<
                        Output = $crate::conformance::store::StoreFixture> + Send>> {
                    Box::pin($factory(o))
                };
                $crate::conformance::store::$case(&make).await;
            }
        )*
    };
}

/// A root label no other case uses.
pub fn root() -> String {
    format!("t{}", uuid6(None).replace('-', ""))
}

/// An embedding that counts the texts it embeds (a real [`HashingEmbeddings`] underneath).
#[derive(Debug)]
pub struct CountingEmbeddings {
    inner: HashingEmbeddings,
    /// Texts embedded so far (documents only).
    pub documents: AtomicUsize,
}

#[async_trait]
impl Embeddings for CountingEmbeddings {
    async fn embed_documents(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        self.documents.fetch_add(texts.len(), Ordering::SeqCst);
        self.inner.embed_documents(texts).await
    }
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbeddingError> {
        Ok(self.inner.embed(text))
    }
    fn dims(&self) -> Option<usize> {
        Some(DIMS)
    }
}

/// The dimensions of the suite's index.
pub const DIMS: usize = 64;

fn counting() -> Arc<CountingEmbeddings> {
    Arc::new(CountingEmbeddings {
        inner: HashingEmbeddings::new(DIMS),
        documents: AtomicUsize::new(0),
    })
}

fn indexed(embed: Arc<CountingEmbeddings>, fields: &[&str]) -> StoreOptions {
    StoreOptions {
        index: Some(IndexConfig::new(DIMS, embed).with_fields(fields.iter().copied())),
        ttl: TtlConfig::default(),
    }
}

async fn plain(make: MakeStore<'_>) -> StoreFixture {
    make(StoreOptions::default()).await
}

/// The time the suite's manual clocks start at: long past, so that a store comparing expiry
/// with the database server's clock instead of its own sees every item as expired.
pub fn manual_start() -> Timestamp {
    Timestamp::parse("2001-02-03T04:05:06.789Z").expect("a valid timestamp")
}

/// A store without index whose clock is the returned manual clock (starting at
/// [`manual_start`]).
async fn clocked(make: MakeStore<'_>) -> (StoreFixture, ManualClock) {
    let clock = ManualClock::new(manual_start());
    let ttl = TtlConfig::default().with_clock(clock.clock());
    (make(StoreOptions::new().ttl(ttl)).await, clock)
}

fn keys(items: &[SearchItem]) -> Vec<&str> {
    items.iter().map(|i| i.key.as_str()).collect()
}

async fn search(s: &dyn Store, prefix: &[&str], o: SearchOptions) -> Vec<SearchItem> {
    s.search(prefix, o).await.expect("search")
}

pub async fn put_get_roundtrip(make: MakeStore<'_>) {
    let f = plain(make).await;
    let r = root();
    let v = json!({"food": "pizza", "n": 3, "tags": ["a", "b"], "nested": {"x": null}});
    f.store().put(&[&r, "m"], "k1", v.clone()).await.unwrap();
    let item = f.store().get(&[&r, "m"], "k1").await.unwrap().unwrap();
    assert_eq!(item.value, v);
    assert_eq!(item.key, "k1");
    assert_eq!(item.namespace, vec![r.clone(), "m".to_owned()]);
}

pub async fn get_missing_is_none(make: MakeStore<'_>) {
    let f = plain(make).await;
    let r = root();
    assert_eq!(f.store().get(&[&r], "nope").await.unwrap(), None);
}

pub async fn item_fields(make: MakeStore<'_>) {
    let f = plain(make).await;
    let r = root();
    let before = Timestamp::now();
    f.store()
        .put(&[&r, "a"], "k", json!({"x": 1}))
        .await
        .unwrap();
    let item = f.store().get(&[&r, "a"], "k").await.unwrap().unwrap();
    // Database clocks may differ from ours by a little; allow a minute either way.
    let slack = 60_000_000;
    assert!(item.created_at.unix_micros() > before.unix_micros() - slack);
    assert!(item.created_at.unix_micros() < Timestamp::now().unix_micros() + slack);
    assert_eq!(item.created_at, item.updated_at);
    let j = item.to_json();
    assert_eq!(j["namespace"], json!([r, "a"]));
    assert_eq!(j["key"], "k");
    assert!(j["created_at"].as_str().unwrap().ends_with("+00:00"));
}

pub async fn put_updates_in_place(make: MakeStore<'_>) {
    let (f, clock) = clocked(make).await;
    let r = root();
    let s = f.store();
    s.put(&[&r], "k", json!({"v": 1})).await.unwrap();
    let first = s.get(&[&r], "k").await.unwrap().unwrap();
    clock.advance(Duration::from_millis(5));
    s.put(&[&r], "k", json!({"v": 2})).await.unwrap();
    let second = s.get(&[&r], "k").await.unwrap().unwrap();
    assert_eq!(second.value, json!({"v": 2}));
    assert_eq!(
        second.created_at, first.created_at,
        "created_at is kept on update"
    );
    assert!(second.updated_at > first.updated_at);
    assert_eq!(
        search(s.as_ref(), &[&r], SearchOptions::new()).await.len(),
        1
    );
}

pub async fn delete_removes(make: MakeStore<'_>) {
    let f = plain(make).await;
    let r = root();
    f.store().put(&[&r], "k", json!({"v": 1})).await.unwrap();
    f.store().delete(&[&r], "k").await.unwrap();
    assert_eq!(f.store().get(&[&r], "k").await.unwrap(), None);
    assert!(
        search(f.store().as_ref(), &[&r], SearchOptions::new())
            .await
            .is_empty()
    );
}

pub async fn delete_missing_is_noop(make: MakeStore<'_>) {
    let f = plain(make).await;
    let r = root();
    f.store().delete(&[&r], "never").await.unwrap();
}

pub async fn namespaces_isolate_keys(make: MakeStore<'_>) {
    let f = plain(make).await;
    let r = root();
    let s = f.store();
    s.put(&[&r, "u1"], "k", json!({"who": 1})).await.unwrap();
    s.put(&[&r, "u2"], "k", json!({"who": 2})).await.unwrap();
    assert_eq!(
        s.get(&[&r, "u1"], "k").await.unwrap().unwrap().value["who"],
        1
    );
    assert_eq!(
        s.get(&[&r, "u2"], "k").await.unwrap().unwrap().value["who"],
        2
    );
    assert_eq!(s.get(&[&r], "k").await.unwrap(), None);
}

pub async fn rejects_bad_namespaces(make: MakeStore<'_>) {
    let f = plain(make).await;
    let s = f.store();
    let v = json!({"v": 1});
    for bad in [
        &[][..],
        &["langgraph", "x"][..],
        &["a", ""][..],
        &["a.b"][..],
    ] {
        let err = s.put(bad, "k", v.clone()).await.unwrap_err();
        assert!(
            matches!(err, StoreError::InvalidNamespace { .. }),
            "{bad:?}: {err}"
        );
    }
    let err = s.get(&["a", "b.c"], "k").await.unwrap_err();
    assert!(err.to_string().contains("contains `.`"), "{err}");
    let err = s
        .search(&["", "x"], SearchOptions::new())
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidNamespace { .. }), "{err}");
}

pub async fn rejects_non_object_values(make: MakeStore<'_>) {
    let f = plain(make).await;
    let r = root();
    for bad in [json!("text"), json!([1]), json!(3), json!(null)] {
        let err = f.store().put(&[&r], "k", bad).await.unwrap_err();
        assert!(
            matches!(err, StoreError::InvalidValue { ref key, .. } if key == "k"),
            "{err}"
        );
    }
    // A failed batch changes nothing, even its valid ops.
    let ops = vec![
        Op::Put(PutOp {
            namespace: ns(&[&r]),
            key: "good".into(),
            value: Some(json!({"v": 1})),
            index: IndexFields::Default,
            ttl: None,
        }),
        Op::Put(PutOp {
            namespace: ns(&[&r]),
            key: "bad".into(),
            value: Some(json!(1)),
            index: IndexFields::Default,
            ttl: None,
        }),
    ];
    assert!(f.store().batch(ops).await.is_err());
    assert_eq!(f.store().get(&[&r], "good").await.unwrap(), None);
}

fn put_op(ns_: &[&str], key: &str, value: Json) -> Op {
    Op::Put(PutOp {
        namespace: ns(ns_),
        key: key.into(),
        value: Some(value),
        index: IndexFields::Default,
        ttl: None,
    })
}

fn get_op(ns_: &[&str], key: &str) -> Op {
    Op::Get(GetOp {
        namespace: ns(ns_),
        key: key.into(),
        refresh_ttl: false,
    })
}

pub async fn batch_results_in_order(make: MakeStore<'_>) {
    let f = plain(make).await;
    let r = root();
    let results = f
        .store()
        .batch(vec![
            get_op(&[&r], "a"),
            put_op(&[&r], "a", json!({"v": 1})),
            get_op(&[&r], "a"),
            Op::ListNamespaces(ListNamespacesOp {
                match_conditions: vec![MatchCondition {
                    match_type: MatchType::Prefix,
                    path: vec![r.clone()],
                }],
                max_depth: None,
                limit: 10,
                offset: 0,
            }),
            Op::Search(SearchOp {
                namespace_prefix: ns(&[&r]),
                filter: None,
                limit: 10,
                offset: 0,
                query: None,
                refresh_ttl: false,
            }),
        ])
        .await
        .unwrap();
    assert_eq!(results.len(), 5);
    assert_eq!(results[0], OpResult::Get(None), "ops run in order");
    assert!(matches!(&results[1], OpResult::Put));
    assert!(matches!(&results[2], OpResult::Get(Some(i)) if i.value == json!({"v": 1})));
    assert_eq!(results[3], OpResult::ListNamespaces(vec![vec![r.clone()]]));
    assert!(matches!(&results[4], OpResult::Search(v) if v.len() == 1));
}

pub async fn batch_last_put_wins(make: MakeStore<'_>) {
    let f = plain(make).await;
    let r = root();
    f.store()
        .batch(vec![
            put_op(&[&r], "k", json!({"v": 1})),
            put_op(&[&r], "k", json!({"v": 2})),
            put_op(&[&r], "j", json!({"v": 3})),
        ])
        .await
        .unwrap();
    assert_eq!(
        f.store().get(&[&r], "k").await.unwrap().unwrap().value["v"],
        2
    );
    assert_eq!(
        f.store().get(&[&r], "j").await.unwrap().unwrap().value["v"],
        3
    );
}

pub async fn search_prefix_is_label_wise(make: MakeStore<'_>) {
    let f = plain(make).await;
    let r = root();
    let s = f.store();
    s.put(&[&r, "a"], "1", json!({})).await.unwrap();
    s.put(&[&r, "a", "deep"], "2", json!({})).await.unwrap();
    s.put(&[&r, "ab"], "3", json!({})).await.unwrap();
    s.put(&[&r, "a_"], "4", json!({})).await.unwrap();
    let mut got = keys(&search(s.as_ref(), &[&r, "a"], SearchOptions::new()).await)
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    got.sort();
    assert_eq!(got, ["1", "2"], "(a) matches a and a.deep, not ab or a_");
    assert_eq!(
        search(s.as_ref(), &[&r], SearchOptions::new()).await.len(),
        4
    );
}

pub async fn search_orders_newest_first(make: MakeStore<'_>) {
    let (f, clock) = clocked(make).await;
    let r = root();
    let s = f.store();
    for k in ["a", "b", "c"] {
        s.put(&[&r], k, json!({"k": k})).await.unwrap();
        clock.advance(Duration::from_millis(2));
    }
    s.put(&[&r], "a", json!({"k": "a2"})).await.unwrap();
    let got = search(s.as_ref(), &[&r], SearchOptions::new()).await;
    assert_eq!(keys(&got), ["a", "c", "b"]);
    assert!(got.iter().all(|i| i.score.is_none()));
}

pub async fn search_limit_offset(make: MakeStore<'_>) {
    let (f, clock) = clocked(make).await;
    let r = root();
    let s = f.store();
    for i in 0..7 {
        s.put(&[&r], &format!("k{i}"), json!({"i": i}))
            .await
            .unwrap();
        clock.advance(Duration::from_millis(2));
    }
    let page = search(s.as_ref(), &[&r], SearchOptions::new().limit(3).offset(2)).await;
    assert_eq!(keys(&page), ["k4", "k3", "k2"]);
    assert_eq!(
        search(s.as_ref(), &[&r], SearchOptions::new().offset(6))
            .await
            .len(),
        1
    );
    assert!(
        search(s.as_ref(), &[&r], SearchOptions::new().limit(0))
            .await
            .is_empty()
    );
    assert_eq!(
        search(s.as_ref(), &[&r], SearchOptions::new()).await.len(),
        7
    );
}

async fn filter_keys(s: &dyn Store, r: &str, filter: Json) -> Vec<String> {
    let mut got: Vec<String> = search(s, &[r], SearchOptions::new().filter(filter))
        .await
        .iter()
        .map(|i| i.key.clone())
        .collect();
    got.sort();
    got
}

async fn filter_fixture(make: MakeStore<'_>) -> (StoreFixture, String) {
    let f = plain(make).await;
    let r = root();
    let docs = [
        (
            "a",
            json!({"n": 10, "s": "apple", "kind": "fruit", "o": {"x": 1, "l": [1, 2]}}),
        ),
        (
            "b",
            json!({"n": 6, "s": "banana", "kind": "fruit", "o": {"x": 2}}),
        ),
        (
            "c",
            json!({"n": 2.5, "s": "carrot", "kind": "veg", "tags": ["x", "y"]}),
        ),
        ("d", json!({"s": "date", "kind": null})),
    ];
    for (k, v) in docs {
        f.store().put(&[&r, "docs"], k, v).await.unwrap();
    }
    (f, r)
}

pub async fn search_filter_equality(make: MakeStore<'_>) {
    let (f, r) = filter_fixture(make).await;
    let s = f.store().as_ref();
    assert_eq!(
        filter_keys(s, &r, json!({"kind": "fruit"})).await,
        ["a", "b"]
    );
    assert_eq!(
        filter_keys(s, &r, json!({"kind": {"$eq": "veg"}})).await,
        ["c"]
    );
    assert_eq!(
        filter_keys(s, &r, json!({"n": 10.0})).await,
        ["a"],
        "numbers by value"
    );
    assert_eq!(
        filter_keys(s, &r, json!({"kind": "fruit", "n": 6})).await,
        ["b"]
    );
    assert_eq!(filter_keys(s, &r, json!({"tags": ["x", "y"]})).await, ["c"]);
    assert!(
        filter_keys(s, &r, json!({"tags": ["x"]})).await.is_empty(),
        "arrays exactly"
    );
    assert_eq!(filter_keys(s, &r, json!({"kind": null})).await, ["d"]);
    assert!(filter_keys(s, &r, json!({"kind": "meat"})).await.is_empty());
}

pub async fn search_filter_numeric(make: MakeStore<'_>) {
    let (f, r) = filter_fixture(make).await;
    let s = f.store().as_ref();
    // LangGraph's Postgres store compares these as text; stategraph compares numbers.
    assert_eq!(filter_keys(s, &r, json!({"n": {"$gt": 6}})).await, ["a"]);
    assert_eq!(
        filter_keys(s, &r, json!({"n": {"$gte": 6}})).await,
        ["a", "b"]
    );
    assert_eq!(filter_keys(s, &r, json!({"n": {"$lt": 6}})).await, ["c"]);
    assert_eq!(
        filter_keys(s, &r, json!({"n": {"$lte": 10, "$gt": 2.5}})).await,
        ["a", "b"]
    );
    assert_eq!(
        filter_keys(s, &r, json!({"s": {"$gt": 5}})).await,
        Vec::<String>::new()
    );
}

pub async fn search_filter_strings(make: MakeStore<'_>) {
    let (f, r) = filter_fixture(make).await;
    let s = f.store().as_ref();
    assert_eq!(
        filter_keys(s, &r, json!({"s": {"$gt": "b"}})).await,
        ["b", "c", "d"]
    );
    assert_eq!(
        filter_keys(s, &r, json!({"s": {"$lte": "banana"}})).await,
        ["a", "b"]
    );
    assert_eq!(
        filter_keys(s, &r, json!({"n": {"$gt": "1"}})).await,
        Vec::<String>::new()
    );
}

pub async fn search_filter_ne_and_missing(make: MakeStore<'_>) {
    let (f, r) = filter_fixture(make).await;
    let s = f.store().as_ref();
    assert_eq!(
        filter_keys(s, &r, json!({"kind": {"$ne": "fruit"}})).await,
        ["c", "d"]
    );
    assert_eq!(
        filter_keys(s, &r, json!({"n": {"$ne": 10}})).await,
        ["b", "c", "d"]
    );
    assert_eq!(
        filter_keys(s, &r, json!({"missing": {"$ne": 1}}))
            .await
            .len(),
        4
    );
}

pub async fn search_filter_containment(make: MakeStore<'_>) {
    let (f, r) = filter_fixture(make).await;
    let s = f.store().as_ref();
    assert_eq!(filter_keys(s, &r, json!({"o": {"x": 1}})).await, ["a"]);
    assert_eq!(filter_keys(s, &r, json!({"o": {"l": [2]}})).await, ["a"]);
    assert!(filter_keys(s, &r, json!({"o": {"x": 3}})).await.is_empty());
    assert_eq!(
        filter_keys(s, &r, json!({"o": {"$eq": {"x": 2}}})).await,
        ["b"]
    );
}

pub async fn search_filter_rejects_bad_operators(make: MakeStore<'_>) {
    let (f, r) = filter_fixture(make).await;
    for bad in [
        json!({"n": {"$in": [1]}}),
        json!({"n": {"$gt": true}}),
        json!("n"),
    ] {
        let err = f
            .store()
            .search(&[&r], SearchOptions::new().filter(bad.clone()))
            .await
            .unwrap_err();
        assert!(
            matches!(err, StoreError::InvalidFilter { .. }),
            "{bad}: {err}"
        );
    }
}

async fn memories(make: MakeStore<'_>, embed: Arc<CountingEmbeddings>) -> (StoreFixture, String) {
    let f = make(indexed(embed, &["text"])).await;
    let r = root();
    let docs = [
        ("u1", "pizza", "I like pizza with extra cheese", 1),
        ("u1", "hike", "We went hiking in the mountains", 2),
        ("u1", "code", "Rust programming is my job", 3),
        ("u2", "pizza", "pizza is the worst food", 4),
        ("u2", "cat", "my cat sleeps all day", 5),
    ];
    for (user, key, text, n) in docs {
        f.store()
            .put(&[&r, user, "memories"], key, json!({"text": text, "n": n}))
            .await
            .unwrap();
    }
    (f, r)
}

pub async fn semantic_search_ranks_by_meaning(make: MakeStore<'_>) {
    let (f, r) = memories(make, counting()).await;
    let s = f.store().as_ref();
    let got = search(
        s,
        &[&r, "u1"],
        SearchOptions::new().query("cheese pizza").limit(2),
    )
    .await;
    assert_eq!(got[0].key, "pizza");
    assert_eq!(got[0].namespace, ns(&[&r, "u1", "memories"]));
    let got = search(
        s,
        &[&r, "u1"],
        SearchOptions::new().query("mountains hiking"),
    )
    .await;
    assert_eq!(got[0].key, "hike");
    assert_eq!(got.len(), 3);
}

pub async fn semantic_search_respects_prefix_and_filter(make: MakeStore<'_>) {
    let (f, r) = memories(make, counting()).await;
    let s = f.store().as_ref();
    let got = search(s, &[&r, "u2"], SearchOptions::new().query("pizza")).await;
    assert!(
        got.iter().all(|i| i.namespace[1] == "u2"),
        "only u2's memories"
    );
    assert_eq!(got[0].key, "pizza");
    let got = search(
        s,
        &[&r],
        SearchOptions::new()
            .query("pizza")
            .filter(json!({"n": {"$gte": 4}})),
    )
    .await;
    assert_eq!(keys(&got), ["pizza", "cat"]);
    assert_eq!(got[0].namespace[1], "u2");
}

pub async fn semantic_search_scores_descending(make: MakeStore<'_>) {
    let (f, r) = memories(make, counting()).await;
    let got = search(
        f.store().as_ref(),
        &[&r],
        SearchOptions::new().query("my cat"),
    )
    .await;
    assert_eq!(got.len(), 5);
    let scores: Vec<f64> = got.iter().map(|i| i.score.expect("scored")).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1] - 1e-6), "{scores:?}");
    assert!(scores[0] > 0.5 && scores[0] <= 1.0 + 1e-6, "{scores:?}");
    let page = search(
        f.store().as_ref(),
        &[&r],
        SearchOptions::new().query("my cat").offset(1).limit(2),
    )
    .await;
    assert_eq!(keys(&page), keys(&got[1..3]));
}

pub async fn semantic_search_without_index_ignores_query(make: MakeStore<'_>) {
    let f = plain(make).await;
    let r = root();
    f.store()
        .put(&[&r], "a", json!({"text": "pizza"}))
        .await
        .unwrap();
    let got = search(
        f.store().as_ref(),
        &[&r],
        SearchOptions::new().query("pizza"),
    )
    .await;
    assert_eq!(keys(&got), ["a"]);
    assert_eq!(got[0].score, None);
}

pub async fn index_false_is_not_embedded(make: MakeStore<'_>) {
    let embed = counting();
    let f = make(indexed(embed.clone(), &["text"])).await;
    let r = root();
    let s = f.store();
    s.put(&[&r], "yes", json!({"text": "green apples"}))
        .await
        .unwrap();
    let opts = PutOptions {
        index: IndexFields::Disabled,
        ttl: Ttl::Default,
    };
    s.put_with(&[&r], "no", json!({"text": "green apples"}), opts)
        .await
        .unwrap();
    assert_eq!(embed.documents.load(Ordering::SeqCst), 1);
    let got = search(
        s.as_ref(),
        &[&r],
        SearchOptions::new().query("green apples"),
    )
    .await;
    assert_eq!(
        keys(&got),
        ["yes", "no"],
        "unembedded items come after scored ones"
    );
    assert!(got[0].score.is_some());
    assert_eq!(got[1].score, None);
}

pub async fn index_fields_override(make: MakeStore<'_>) {
    let embed = counting();
    let f = make(indexed(embed.clone(), &["text"])).await;
    let r = root();
    let s = f.store();
    let opts = PutOptions {
        index: IndexFields::Fields(vec!["title".into()]),
        ttl: Ttl::Default,
    };
    s.put_with(
        &[&r],
        "a",
        json!({"title": "volcano facts", "text": "ocean"}),
        opts,
    )
    .await
    .unwrap();
    s.put(
        &[&r],
        "b",
        json!({"title": "ocean", "text": "volcano facts"}),
    )
    .await
    .unwrap();
    let got = search(
        s.as_ref(),
        &[&r],
        SearchOptions::new().query("volcano facts"),
    )
    .await;
    let top: Vec<&str> = keys(&got);
    assert_eq!(
        got[0].score, got[1].score,
        "both embed the text `volcano facts`: {top:?}"
    );
    let got = search(s.as_ref(), &[&r], SearchOptions::new().query("ocean")).await;
    assert!(
        got[0].score.unwrap() < 0.5,
        "neither embedded `ocean`: {:?}",
        got[0].score
    );
}

pub async fn index_array_paths_embed_each_element(make: MakeStore<'_>) {
    let embed = counting();
    let f = make(indexed(embed.clone(), &["notes[*].body"])).await;
    let r = root();
    let s = f.store();
    let doc = json!({"notes": [{"body": "tax return deadline"}, {"body": "buy oat milk"}]});
    s.put(&[&r], "a", doc).await.unwrap();
    s.put(
        &[&r],
        "b",
        json!({"notes": [{"body": "dentist appointment"}]}),
    )
    .await
    .unwrap();
    assert_eq!(embed.documents.load(Ordering::SeqCst), 3);
    let got = search(s.as_ref(), &[&r], SearchOptions::new().query("oat milk")).await;
    assert_eq!(got[0].key, "a", "the second element alone makes `a` match");
    assert!(got[0].score.unwrap() > 0.7);
}

pub async fn reembeds_only_changed_text(make: MakeStore<'_>) {
    let embed = counting();
    let f = make(indexed(embed.clone(), &["title", "body"])).await;
    let r = root();
    let s = f.store();
    let count = || embed.documents.load(Ordering::SeqCst);
    s.put(
        &[&r],
        "k",
        json!({"title": "t one", "body": "b one", "n": 1}),
    )
    .await
    .unwrap();
    assert_eq!(count(), 2);
    s.put(
        &[&r],
        "k",
        json!({"title": "t one", "body": "b one", "n": 2}),
    )
    .await
    .unwrap();
    assert_eq!(count(), 2, "unindexed change: nothing re-embedded");
    s.put(
        &[&r],
        "k",
        json!({"title": "t one", "body": "b two", "n": 2}),
    )
    .await
    .unwrap();
    assert_eq!(count(), 3, "only the changed field is re-embedded");
    let opts = PutOptions {
        index: IndexFields::Disabled,
        ttl: Ttl::Default,
    };
    s.put_with(&[&r], "k", json!({"title": "t one", "body": "b two"}), opts)
        .await
        .unwrap();
    assert_eq!(count(), 3);
    let got = search(s.as_ref(), &[&r], SearchOptions::new().query("t one")).await;
    assert_eq!(got[0].score, None, "index=false dropped the vectors");
    s.put(&[&r], "k", json!({"title": "t one", "body": "b two"}))
        .await
        .unwrap();
    assert_eq!(count(), 5, "vectors dropped earlier are computed again");
}

pub async fn reindex_after_text_change(make: MakeStore<'_>) {
    let (f, r) = memories(make, counting()).await;
    let s = f.store();
    s.put(
        &[&r, "u1", "memories"],
        "pizza",
        json!({"text": "I now prefer sushi rolls", "n": 1}),
    )
    .await
    .unwrap();
    let got = search(
        s.as_ref(),
        &[&r, "u1"],
        SearchOptions::new().query("sushi rolls"),
    )
    .await;
    assert_eq!(got[0].key, "pizza");
    assert!(got[0].score.unwrap() > 0.5);
    let got = search(
        s.as_ref(),
        &[&r, "u1"],
        SearchOptions::new().query("extra cheese"),
    )
    .await;
    assert!(
        got[0].score.unwrap() < 0.5,
        "the old text is no longer indexed"
    );
}

pub async fn delete_removes_vectors(make: MakeStore<'_>) {
    let (f, r) = memories(make, counting()).await;
    let s = f.store();
    s.delete(&[&r, "u1", "memories"], "pizza").await.unwrap();
    let got = search(
        s.as_ref(),
        &[&r],
        SearchOptions::new().query("pizza cheese"),
    )
    .await;
    assert_eq!(got.len(), 4);
    assert!(
        !got.iter()
            .any(|i| i.key == "pizza" && i.namespace[1] == "u1")
    );
    // Putting the key again embeds it again.
    s.put(
        &[&r, "u1", "memories"],
        "pizza",
        json!({"text": "pizza cheese"}),
    )
    .await
    .unwrap();
    let got = search(
        s.as_ref(),
        &[&r, "u1"],
        SearchOptions::new().query("pizza cheese"),
    )
    .await;
    assert_eq!(got[0].key, "pizza");
    assert!(got[0].score.unwrap() > 0.99);
}

async fn namespaces_fixture(make: MakeStore<'_>) -> (StoreFixture, String) {
    let f = plain(make).await;
    let r = root();
    for n in [
        vec!["users", "u2", "memories"],
        vec!["users", "u1", "memories"],
        vec!["users", "u1", "prefs"],
        vec!["docs", "x"],
        vec!["docs"],
        vec!["users-archive", "u9", "memories"],
    ] {
        let mut full = vec![r.as_str()];
        full.extend(n);
        f.store().put(&full, "k", json!({})).await.unwrap();
    }
    (f, r)
}

fn strip(r: &str, got: Vec<Namespace>) -> Vec<String> {
    got.into_iter()
        .map(|mut n| {
            assert_eq!(n[0], r);
            n.remove(0);
            n.join("/")
        })
        .collect()
}

pub async fn list_namespaces_sorted(make: MakeStore<'_>) {
    let (f, r) = namespaces_fixture(make).await;
    let got = f
        .store()
        .list_namespaces(ListNamespacesOptions::new().prefix(&[&r]))
        .await
        .unwrap();
    assert_eq!(
        strip(&r, got),
        [
            "docs",
            "docs/x",
            "users/u1/memories",
            "users/u1/prefs",
            "users/u2/memories",
            "users-archive/u9/memories"
        ],
        "sorted label by label"
    );
}

pub async fn list_namespaces_max_depth(make: MakeStore<'_>) {
    let (f, r) = namespaces_fixture(make).await;
    let opts = ListNamespacesOptions::new().prefix(&[&r]).max_depth(3);
    let got = f.store().list_namespaces(opts).await.unwrap();
    assert_eq!(
        strip(&r, got),
        ["docs", "docs/x", "users/u1", "users/u2", "users-archive/u9"]
    );
    let opts = ListNamespacesOptions::new().prefix(&[&r]).max_depth(2);
    let got = f.store().list_namespaces(opts).await.unwrap();
    assert_eq!(strip(&r, got), ["docs", "users", "users-archive"]);
}

pub async fn list_namespaces_suffix_and_wildcard(make: MakeStore<'_>) {
    let (f, r) = namespaces_fixture(make).await;
    let s = f.store();
    let opts = ListNamespacesOptions::new()
        .prefix(&[&r])
        .suffix(&["memories"]);
    assert_eq!(
        strip(&r, s.list_namespaces(opts).await.unwrap()),
        [
            "users/u1/memories",
            "users/u2/memories",
            "users-archive/u9/memories"
        ]
    );
    let opts = ListNamespacesOptions::new().prefix(&[&r, "users", "*", "memories"]);
    assert_eq!(
        strip(&r, s.list_namespaces(opts).await.unwrap()),
        ["users/u1/memories", "users/u2/memories"]
    );
    let opts = ListNamespacesOptions::new()
        .prefix(&[&r, "*", "u1"])
        .suffix(&["prefs"]);
    assert_eq!(
        strip(&r, s.list_namespaces(opts).await.unwrap()),
        ["users/u1/prefs"]
    );
}

pub async fn list_namespaces_limit_offset(make: MakeStore<'_>) {
    let (f, r) = namespaces_fixture(make).await;
    let opts = ListNamespacesOptions::new()
        .prefix(&[&r])
        .limit(2)
        .offset(1);
    assert_eq!(
        strip(&r, f.store().list_namespaces(opts).await.unwrap()),
        ["docs/x", "users/u1/memories"]
    );
}

/// TTL options with a manual clock (starting at [`manual_start`]) that the case moves past
/// expiry times instead of sleeping.
fn ttl_options(default_ttl: Option<f64>, refresh_on_read: bool) -> (StoreOptions, ManualClock) {
    let clock = ManualClock::new(manual_start());
    let ttl = TtlConfig {
        default_ttl,
        refresh_on_read,
        sweep_interval_minutes: None,
        clock: clock.clock(),
    };
    (StoreOptions::new().ttl(ttl), clock)
}

/// A short TTL, in minutes (fractional: LangGraph's Postgres column holds whole minutes).
const SHORT: f64 = 0.5;

pub async fn ttl_expires_items(make: MakeStore<'_>) {
    let (options, clock) = ttl_options(None, false);
    let f = make(options).await;
    let r = root();
    let s = f.store();
    let short = PutOptions {
        index: IndexFields::Default,
        ttl: Ttl::Minutes(SHORT),
    };
    s.put_with(&[&r], "short", json!({"v": 1}), short)
        .await
        .unwrap();
    s.put(&[&r], "forever", json!({"v": 2})).await.unwrap();
    clock.advance_minutes(SHORT * 0.9);
    assert!(
        s.get(&[&r], "short").await.unwrap().is_some(),
        "live until its TTL is over"
    );
    clock.advance_minutes(SHORT * 0.2);
    assert_eq!(
        s.get(&[&r], "short").await.unwrap(),
        None,
        "expired items are not read"
    );
    assert_eq!(
        keys(&search(s.as_ref(), &[&r], SearchOptions::new()).await),
        ["forever"]
    );
    let opts = ListNamespacesOptions::new().prefix(&[&r]);
    assert_eq!(s.list_namespaces(opts).await.unwrap().len(), 1);
    clock.advance_minutes(60.0 * 24.0 * 365.0);
    assert!(
        s.get(&[&r], "forever").await.unwrap().is_some(),
        "no TTL, no expiry"
    );
}

pub async fn ttl_refresh_on_read(make: MakeStore<'_>) {
    let (options, clock) = ttl_options(None, true);
    let f = make(options).await;
    let r = root();
    let s = f.store();
    let opts = PutOptions {
        index: IndexFields::Default,
        ttl: Ttl::Minutes(SHORT * 2.0),
    };
    s.put_with(&[&r], "k", json!({"v": 1}), opts.clone())
        .await
        .unwrap();
    s.put_with(&[&r], "idle", json!({"v": 1}), opts)
        .await
        .unwrap();
    for _ in 0..4 {
        clock.advance_minutes(SHORT * 2.0 / 3.0);
        assert!(
            s.get(&[&r], "k").await.unwrap().is_some(),
            "each read extends the TTL"
        );
    }
    assert_eq!(
        s.get(&[&r], "idle").await.unwrap(),
        None,
        "an unread item expired"
    );
    // A search refreshes what it returns, unless told not to.
    let hits = search(s.as_ref(), &[&r], SearchOptions::new()).await;
    assert_eq!(keys(&hits), ["k"]);
    clock.advance_minutes(SHORT * 1.5);
    let quiet = SearchOptions::new().refresh_ttl(false);
    assert_eq!(keys(&search(s.as_ref(), &[&r], quiet.clone()).await), ["k"]);
    clock.advance_minutes(SHORT);
    assert!(search(s.as_ref(), &[&r], quiet).await.is_empty());
}

pub async fn ttl_sweep_deletes_expired(make: MakeStore<'_>) {
    let (options, clock) = ttl_options(None, false);
    let f = make(options).await;
    let r = root();
    let s = f.store();
    let short = PutOptions {
        index: IndexFields::Default,
        ttl: Ttl::Minutes(SHORT),
    };
    s.put_with(&[&r], "a", json!({}), short.clone())
        .await
        .unwrap();
    s.put_with(&[&r], "b", json!({}), short).await.unwrap();
    s.put(&[&r], "c", json!({})).await.unwrap();
    assert_eq!(s.sweep_ttl().await.unwrap(), 0, "nothing has expired yet");
    clock.advance_minutes(SHORT * 1.1);
    assert_eq!(s.sweep_ttl().await.unwrap(), 2);
    assert_eq!(
        keys(&search(s.as_ref(), &[&r], SearchOptions::new()).await),
        ["c"]
    );
}

pub async fn ttl_default_from_config(make: MakeStore<'_>) {
    let (options, clock) = ttl_options(Some(SHORT), false);
    let f = make(options).await;
    let r = root();
    let s = f.store();
    s.put(&[&r], "default", json!({})).await.unwrap();
    let never = PutOptions {
        index: IndexFields::Default,
        ttl: Ttl::Never,
    };
    s.put_with(&[&r], "never", json!({}), never).await.unwrap();
    clock.advance_minutes(SHORT * 1.1);
    assert_eq!(s.get(&[&r], "default").await.unwrap(), None);
    assert!(s.get(&[&r], "never").await.unwrap().is_some());
}

/// Items are stamped by the store's clock, not the database server's.
pub async fn clock_stamps_items(make: MakeStore<'_>) {
    let (f, clock) = clocked(make).await;
    let r = root();
    let s = f.store();
    let before = clock.time();
    s.put(&[&r], "k", json!({"v": 1})).await.unwrap();
    let first = s.get(&[&r], "k").await.unwrap().unwrap();
    assert!(first.created_at >= before && first.created_at < clock.time());
    clock.advance_minutes(90.0);
    s.put(&[&r], "k", json!({"v": 2})).await.unwrap();
    let second = s.get(&[&r], "k").await.unwrap().unwrap();
    assert_eq!(second.created_at, first.created_at);
    let moved = second.updated_at.unix_micros() - first.updated_at.unix_micros();
    assert!(
        (90 * 60_000_000..91 * 60_000_000).contains(&moved),
        "updated_at moved by {moved} µs"
    );
}

pub async fn unicode_and_nested_values(make: MakeStore<'_>) {
    let f = plain(make).await;
    let r = root();
    let v = json!({"text": "我喜欢披萨 🍕", "deep": {"a": [1, {"b": [true, null, 1.5]}]},
                   "big": 9007199254740993u64, "neg": -3, "quote": "it's \"q\""});
    f.store().put(&[&r, "ü"], "键", v.clone()).await.unwrap();
    let got = f.store().get(&[&r, "ü"], "键").await.unwrap().unwrap();
    assert_eq!(got.value, v);
}
