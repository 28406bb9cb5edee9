//! Interop with Python LangGraph's `PostgresStore` on one database schema, both directions
//! (`scripts/interop/pg_store.py`):
//!
//! - `reads_items_python_put`: Python runs its `setup()` and puts items (no index); we read
//!   them back (value, key, namespace, created_at and updated_at) with `get` and `search`, on
//!   tables Python created (our `setup()` on top adds only our own table).
//! - `python_reads_items_we_put`: we set up (with an index) and put items; Python's `setup()`
//!   with an index finds every migration recorded and does nothing, and Python's `get` and
//!   `search` (plain, filtered, and semantic on our vectors) read what we stored.
//!
//! Needs the pinned Python environment (`scripts/python-env.sh`, which `scripts/test.sh`
//! runs; or `STATEGRAPH_PYTHON`), PostgreSQL and pgvector; fails, never skips, without them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value as Json, json};
use stategraph_postgres::PostgresStoreConfig;
use stategraph_store::*;
use stategraph_testkit::postgres::{connect, drop_schema, require_pgvector, scratch_name, url};
use stategraph_testkit::python::run_python_json;

/// Runs `pg_store.py URL SCHEMA ACTION` with `input` on stdin; returns its JSON output.
fn py(schema: &str, action: &str, input: &Json) -> Json {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/interop/pg_store.py");
    let args = [
        script.into_os_string(),
        url().into(),
        schema.into(),
        action.into(),
    ];
    run_python_json(args, &input.to_string())
}

/// A fresh schema (pgvector required), dropped when the guard (field 1, held only for its
/// `Drop`) goes away.
struct Scratch(String, #[allow(dead_code)] stategraph_testkit::Cleanup);

impl Scratch {
    async fn new() -> Self {
        require_pgvector().await;
        let name = scratch_name("sg_store_py");
        connect()
            .await
            .batch_execute(&format!("CREATE SCHEMA \"{name}\""))
            .await
            .unwrap();
        let guard = drop_schema(name.clone());
        Self(name, guard)
    }
}

/// The configuration of a store on `schema`.
fn store_on(schema: &str) -> PostgresStoreConfig {
    PostgresStoreConfig::from_url(&url())
        .unwrap()
        .schema(schema)
        .pool_size(2)
}

fn ts(j: &Json) -> Timestamp {
    Timestamp::parse(j.as_str().unwrap()).unwrap_or_else(|| panic!("timestamp {j}"))
}

/// Asserts that Python's `Item.dict()` and ours describe the same item (timestamps compared
/// as instants: Python writes them in the session's time zone).
fn assert_same_item(python: &Json, ours: &Item) {
    assert_eq!(python["namespace"], json!(ours.namespace), "{python}");
    assert_eq!(python["key"], ours.key, "{python}");
    assert_eq!(python["value"], ours.value, "{python}");
    assert_eq!(ts(&python["created_at"]), ours.created_at, "{python}");
    assert_eq!(ts(&python["updated_at"]), ours.updated_at, "{python}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_items_python_put() {
    let scratch = Scratch::new().await;
    let theirs = py(&scratch.0, "put", &json!({}));
    let items = theirs["items"].as_array().unwrap();
    assert_eq!(items.len(), 3);

    // Our clock, moved by hand for the TTL check below.
    let clock = ManualClock::starting_now();
    let store = store_on(&scratch.0)
        .ttl(TtlConfig::default().with_clock(clock.clock()))
        .connect()
        .await
        .unwrap();
    for it in items {
        let ns: Vec<String> = serde_json::from_value(it["namespace"].clone()).unwrap();
        let ns: Vec<&str> = ns.iter().map(String::as_str).collect();
        let ours = store
            .get(&ns, it["key"].as_str().unwrap())
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("we read {it}"));
        assert_same_item(it, &ours);
    }
    // Python's update kept created_at.
    assert!(ts(&items[0]["created_at"]) < ts(&items[0]["updated_at"]));
    assert_eq!(items[0]["value"]["n"], 4);

    let found = store
        .search(&["interop", "py"], SearchOptions::new())
        .await
        .unwrap();
    let keys: Vec<&str> = found.iter().map(|i| i.key.as_str()).collect();
    assert_eq!(keys, ["k1", "k3", "k2"], "newest first");
    for f in &found {
        let it = items.iter().find(|i| i["key"] == f.key).unwrap();
        assert_same_item(it, f);
    }
    let found = store
        .search(
            &["interop"],
            SearchOptions::new().filter(json!({"n": {"$gt": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].key, "k1");
    let namespaces = store
        .list_namespaces(ListNamespacesOptions::new().prefix(&["interop"]))
        .await
        .unwrap();
    assert_eq!(
        namespaces,
        vec![ns(&["interop", "py"]), ns(&["interop", "py", "prefs"])]
    );

    // Python's TTL row (ttl_minutes 5, no exact row of ours) refreshes by its INT column.
    let client = connect().await;
    let q = format!(
        "SELECT extract(epoch FROM expires_at - $1::timestamptz)::float8 \
         FROM \"{}\".store WHERE key = 'k3'",
        scratch.0
    );
    let soon = clock.time().plus(Duration::from_secs(10));
    client
        .execute(
            &format!(
                "UPDATE \"{}\".store SET expires_at = $1 WHERE key = 'k3'",
                scratch.0
            ),
            &[&soon.to_system_time()],
        )
        .await
        .unwrap();
    clock.advance(Duration::from_secs(1));
    let read_at = clock.time();
    store
        .get(&["interop", "py", "prefs"], "k3")
        .await
        .unwrap()
        .unwrap();
    let left: f64 = client
        .query_one(&q, &[&read_at.to_system_time()])
        .await
        .unwrap()
        .get(0);
    assert!((left - 300.0).abs() < 1e-3, "{left}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_reads_items_we_put() {
    let scratch = Scratch::new().await;
    let index = IndexConfig::new(64, Arc::new(HashingEmbeddings::new(64))).with_fields(["text"]);
    let store = store_on(&scratch.0).index(index).connect().await.unwrap();
    let docs = [
        (
            vec!["mem", "u1"],
            "pizza",
            json!({"text": "I like pizza with extra cheese", "kind": "food", "n": 10}),
        ),
        (
            vec!["mem", "u1"],
            "hike",
            json!({"text": "We went hiking in the mountains", "kind": "trip", "n": 6}),
        ),
        (
            vec!["mem", "u2"],
            "cat",
            json!({"text": "my cat sleeps all day", "kind": "pet", "deep": {"a": [1, null]}}),
        ),
        (
            vec!["mem", "u2"],
            "uni",
            json!({"text": "我喜欢披萨 🍕", "kind": "food", "big": 9_007_199_254_740_993u64}),
        ),
    ];
    for (ns_, key, value) in &docs {
        store.put(ns_, key, value.clone()).await.unwrap();
    }
    let opts = PutOptions {
        index: IndexFields::Default,
        ttl: Ttl::After(Duration::from_secs(450)),
    };
    store
        .put_with(&["mem", "u1"], "ttl", json!({"text": "short lived"}), opts)
        .await
        .unwrap();

    // The fractional TTL: ttl_minutes (what Python refreshes by) rounded up, the expiry exact.
    let client = connect().await;
    let row = client
        .query_one(
            &format!(
                "SELECT ttl_minutes, extract(epoch FROM expires_at - updated_at)::float8 \
                 FROM \"{}\".store WHERE key = 'ttl'",
                scratch.0
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i32>(0), 8);
    assert_eq!(row.get::<_, f64>(1), 450.0);

    let gets: Vec<Json> = docs
        .iter()
        .map(|(n, k, _)| json!([n, k]))
        .chain([json!([["mem", "u1"], "missing"])])
        .collect();
    let request = json!({
        "gets": gets,
        "searches": [
            {"prefix": ["mem"]},
            {"prefix": ["mem"], "filter": {"kind": "food"}},
            {"prefix": ["mem", "u1"], "query": "pizza cheese", "limit": 1},
            {"prefix": ["mem"], "limit": 2, "offset": 1},
        ],
    });
    let theirs = py(&scratch.0, "read", &request);
    assert_eq!(
        theirs["versions"],
        json!({"store_migrations": [0, 1, 2, 3], "vector_migrations": [0, 1, 2]}),
        "Python's setup found our migrations and added none"
    );
    let gets = theirs["gets"].as_array().unwrap();
    for ((n, k, _), python) in docs.iter().zip(gets) {
        let ours = store.get(n, k).await.unwrap().unwrap();
        assert_same_item(python, &ours);
    }
    assert_eq!(gets[docs.len()], Json::Null);

    let searches = theirs["searches"].as_array().unwrap();
    let ours = store.search(&["mem"], SearchOptions::new()).await.unwrap();
    let theirs_all = searches[0].as_array().unwrap();
    assert_eq!(theirs_all.len(), ours.len());
    for (t, o) in theirs_all.iter().zip(&ours) {
        assert_same_item(t, o);
    }
    let food: Vec<&str> = searches[1]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["key"].as_str().unwrap())
        .collect();
    assert_eq!(food, ["uni", "pizza"]);
    let semantic = searches[2].as_array().unwrap();
    assert_eq!(semantic[0]["key"], "pizza", "Python ranks our vectors");
    let ours = store
        .search(
            &["mem", "u1"],
            SearchOptions::new().query("pizza cheese").limit(1),
        )
        .await
        .unwrap();
    let (a, b) = (
        semantic[0]["score"].as_f64().unwrap(),
        ours[0].score.unwrap(),
    );
    assert!((a - b).abs() < 1e-6, "python {a}, ours {b}");
    let page: Vec<&str> = searches[3]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["key"].as_str().unwrap())
        .collect();
    assert_eq!(page, ["uni", "cat"]);
}
