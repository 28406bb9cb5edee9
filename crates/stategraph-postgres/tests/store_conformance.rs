//! The shared store conformance suite against `PostgresStore`, each case in a fresh schema of
//! the database `STATEGRAPH_TEST_POSTGRES_URL` names (default: the local test server), plus
//! Postgres-specific checks (schema and migration rows, concurrent setup, TTL precision, the
//! HNSW search path). A server that cannot be reached, or one without the pgvector extension
//! (`scripts/install-pgvector.sh`), fails the tests.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use stategraph_conformance::store::{StoreFixture, StoreOptions};
use stategraph_postgres::{PostgresStore, PostgresStoreConfig};
use stategraph_store::*;

use stategraph_testkit::Cleanup;
use stategraph_testkit::postgres::{
    connect, drop_schema, in_schema, require_pgvector, scratch_name, url,
};

/// The configuration of a store on a scratch schema.
async fn config(schema: &str) -> PostgresStoreConfig {
    require_pgvector().await;
    PostgresStoreConfig::from_url(&url())
        .unwrap()
        .schema(schema)
        .pool_size(2)
}

async fn fresh(options: StoreOptions) -> (PostgresStore, Cleanup, String) {
    let schema = scratch_name("sg_store");
    let guard = drop_schema(schema.clone());
    let mut config = config(&schema).await.ttl(options.ttl);
    if let Some(index) = options.index {
        config = config.index(index);
    }
    let store = config
        .connect()
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL at {} is required for these tests: {e}", url()));
    (store, guard, schema)
}

async fn make(options: StoreOptions) -> StoreFixture {
    let (store, guard, _) = fresh(options).await;
    StoreFixture::new(store).with_guard(guard)
}

stategraph_conformance::store_conformance!(make);

fn index(dims: usize) -> IndexConfig {
    IndexConfig::new(dims, Arc::new(HashingEmbeddings::new(dims))).with_fields(["text"])
}

async fn versions(c: &tokio_postgres::Client, table: &str) -> Vec<i32> {
    c.query(&format!("SELECT v FROM {table} ORDER BY v"), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_records_langgraph_migrations_and_is_concurrent_safe() {
    let schema = scratch_name("sg_store");
    let _guard = drop_schema(schema.clone());
    let indexed = config(&schema).await.index(index(16));
    // Several setups at once (as from several processes): none fails.
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let c = indexed.clone();
        tasks.push(tokio::spawn(async move { c.connect().await }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    indexed.connect().await.unwrap();
    let c = in_schema(&schema).await;
    assert_eq!(versions(&c, "store_migrations").await, [0, 1, 2, 3]);
    assert_eq!(versions(&c, "vector_migrations").await, [0, 1, 2]);
    assert_eq!(versions(&c, "stategraph_store_migrations").await, [0]);
    let cols: Vec<(String, String)> = c
        .query(
            "SELECT column_name::text, data_type::text FROM information_schema.columns \
             WHERE table_schema = $1 AND table_name = 'store' ORDER BY ordinal_position",
            &[&schema],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let expect = [
        ("prefix", "text"),
        ("key", "text"),
        ("value", "jsonb"),
        ("created_at", "timestamp with time zone"),
        ("updated_at", "timestamp with time zone"),
        ("expires_at", "timestamp with time zone"),
        ("ttl_minutes", "integer"),
    ];
    assert_eq!(
        cols,
        expect.map(|(a, b)| (a.to_owned(), b.to_owned())).to_vec()
    );
    let indexes: Vec<String> = c
        .query(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = $1 ORDER BY indexname",
            &[&schema],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let all = indexes.join("\n");
    assert!(all.contains("store_prefix_idx ON"), "{all}");
    assert!(all.contains("text_pattern_ops"), "{all}");
    assert!(all.contains("idx_store_expires_at"), "{all}");
    assert!(
        all.contains("USING hnsw (embedding vector_cosine_ops)"),
        "{all}"
    );
    let valid: Vec<bool> = c
        .query(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
             JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1",
            &[&schema],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(valid.iter().all(|v| *v), "every index is valid");
    let typ: String = c
        .query_one(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute \
             WHERE attrelid = 'store_vectors'::regclass AND attname = 'embedding'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(typ, "vector(16)");

    // Another dimension on the same tables is refused.
    let other = config(&schema).await.index(index(8));
    let err = other.connect().await.unwrap_err();
    assert!(matches!(err, StoreError::InvalidConfig(_)), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fractional_ttls_are_exact_and_rounded_up_for_python() {
    let clock = ManualClock::starting_now();
    let ttl = TtlConfig::default().with_clock(clock.clock());
    let (store, _guard, schema) = fresh(StoreOptions::new().ttl(ttl)).await;
    let opts = |secs| PutOptions {
        index: IndexFields::Default,
        ttl: Ttl::After(Duration::from_secs(secs)),
    };
    store
        .put_with(&["t"], "frac", json!({"v": 1}), opts(15))
        .await
        .unwrap();
    store
        .put_with(&["t"], "whole", json!({"v": 1}), opts(120))
        .await
        .unwrap();
    let c = in_schema(&schema).await;
    let rows = c
        .query(
            "SELECT key, ttl_minutes, \
               extract(epoch FROM expires_at - updated_at)::float8 FROM store ORDER BY key",
            &[],
        )
        .await
        .unwrap();
    let got: Vec<(String, i32, f64)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(got[0].0, "frac");
    assert_eq!(got[0].1, 1, "ttl_minutes rounded up");
    assert!((got[0].2 - 15.0).abs() < 1e-6, "exact expiry: {}", got[0].2);
    assert_eq!((got[1].1, got[1].2), (2, 120.0));
    let exact: Vec<(String, f64)> = c
        .query("SELECT key, ttl_minutes FROM stategraph_store_ttl", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(exact, [("frac".to_owned(), 0.25)]);

    // A refresh uses the exact TTL: read 5 s on, the item expires 15 s after the read.
    let left_at = |at: Timestamp| {
        let c = &c;
        async move {
            c.query_one(
                "SELECT extract(epoch FROM expires_at - $1::timestamptz)::float8 FROM store \
                 WHERE key = 'frac'",
                &[&at.to_system_time()],
            )
            .await
            .unwrap()
            .get::<_, f64>(0)
        }
    };
    clock.advance(Duration::from_secs(5));
    let read_at = clock.time();
    store.get(&["t"], "frac").await.unwrap().unwrap();
    let left = left_at(read_at).await;
    assert!((left - 15.0).abs() < 1e-3, "{left}");

    // Once another writer (Python) replaces the row, its INT ttl_minutes rules.
    c.batch_execute(
        "UPDATE store SET updated_at = updated_at + interval '1 second', ttl_minutes = 3 \
         WHERE key = 'frac'",
    )
    .await
    .unwrap();
    clock.advance(Duration::from_secs(5));
    let read_at = clock.time();
    store.get(&["t"], "frac").await.unwrap().unwrap();
    let left = left_at(read_at).await;
    assert!((left - 180.0).abs() < 1e-3, "{left}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_backed_search_finds_the_same_best_matches() {
    let dims = 32;
    let schema = scratch_name("sg_store");
    let _guard = drop_schema(schema.clone());
    let exact = config(&schema)
        .await
        .index(index(dims))
        .exact_search_limit(u64::MAX)
        .connect()
        .await
        .unwrap();
    let ann = config(&schema)
        .await
        .index(index(dims))
        .exact_search_limit(0)
        .without_setup()
        .connect()
        .await
        .unwrap();
    let words = [
        "pizza", "cheese", "mountain", "river", "rust", "python", "cat", "dog", "sushi", "tea",
        "coffee", "violin", "guitar", "chess", "tennis", "garden", "winter", "summer",
    ];
    let mut ops = Vec::new();
    for i in 0..300usize {
        let text = format!(
            "{} {} {}",
            words[i % words.len()],
            words[(i * 7 + 3) % words.len()],
            words[(i * 13 + 5) % words.len()]
        );
        let user = format!("u{}", i % 3);
        ops.push(Op::Put(PutOp {
            namespace: ns(&["docs", &user]),
            key: format!("k{i}"),
            value: Some(json!({"text": text, "i": i})),
            index: IndexFields::Default,
            ttl: None,
        }));
    }
    exact.batch(ops).await.unwrap();
    for (query, prefix) in [
        ("pizza cheese", vec!["docs"]),
        ("violin chess", vec!["docs", "u1"]),
    ] {
        let opts = SearchOptions::new().query(query).limit(5);
        let a = exact.search(&prefix, opts.clone()).await.unwrap();
        let b = ann.search(&prefix, opts).await.unwrap();
        assert_eq!(a.len(), 5);
        assert_eq!(b.len(), 5);
        let (sa, sb): (Vec<f64>, Vec<f64>) = (
            a.iter().map(|i| i.score.unwrap()).collect(),
            b.iter().map(|i| i.score.unwrap()).collect(),
        );
        assert!((sa[0] - sb[0]).abs() < 1e-9, "{sa:?} {sb:?}");
        assert!(sb.windows(2).all(|w| w[0] >= w[1]), "{sb:?}");
    }
    // A filter the candidates cannot fill falls back to the exact search.
    let opts = SearchOptions::new()
        .query("pizza")
        .filter(json!({"i": {"$lt": 3}}))
        .limit(10);
    let b = ann.search(&["docs"], opts).await.unwrap();
    let mut keys: Vec<&str> = b.iter().map(|i| i.key.as_str()).collect();
    keys.sort();
    assert_eq!(keys, ["k0", "k1", "k2"]);

    // The planner can serve the candidate query from the HNSW index.
    let c = in_schema(&schema).await;
    c.batch_execute("ANALYZE store; ANALYZE store_vectors; SET enable_seqscan = off")
        .await
        .unwrap();
    let q = format!("[{}]", vec!["0.1"; dims].join(","));
    let plan: Vec<String> = c
        .query(
            &format!(
                "EXPLAIN SELECT sv.prefix, sv.key FROM store_vectors sv JOIN store s \
                 ON s.prefix = sv.prefix AND s.key = sv.key \
                 ORDER BY sv.embedding <=> '{q}'::vector LIMIT 11"
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let plan = plan.join("\n");
    assert!(plan.contains("store_vectors_embedding_idx"), "{plan}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_puts_keep_vectors_in_step_with_values() {
    let schema = scratch_name("sg_store");
    let _guard = drop_schema(schema.clone());
    let store = config(&schema)
        .await
        .index(index(32))
        .connect()
        .await
        .unwrap();
    // Two writers (as two processes would) rewrite the same items with different texts.
    let texts = ["alpha bravo", "charlie delta", "echo foxtrot", "golf hotel"];
    let mut tasks = Vec::new();
    for w in 0..2usize {
        let s = config(&schema)
            .await
            .index(index(32))
            .without_setup()
            .connect()
            .await
            .unwrap();
        tasks.push(tokio::spawn(async move {
            for round in 0..30usize {
                let ops = (0..3)
                    .map(|k| {
                        let text = texts[(round / (w + 1) + k) % 2];
                        Op::Put(PutOp {
                            namespace: ns(&["c"]),
                            key: format!("k{k}"),
                            value: Some(json!({"text": text, "w": w, "extra": round % 2})),
                            index: IndexFields::Default,
                            ttl: None,
                        })
                    })
                    .rev()
                    .collect::<Vec<_>>();
                s.batch(ops).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let c = in_schema(&schema).await;
    for k in 0..3 {
        let item = store.get(&["c"], &format!("k{k}")).await.unwrap().unwrap();
        let text = item.value["text"].as_str().unwrap();
        let stored: String = c
            .query_one(
                "SELECT embedding::text FROM store_vectors WHERE key = $1 AND field_name = 'text'",
                &[&item.key],
            )
            .await
            .unwrap()
            .get(0);
        let stored: Vec<f32> = stored
            .trim_matches(['[', ']'])
            .split(',')
            .map(|x| x.parse().unwrap())
            .collect();
        assert_eq!(
            stored,
            HashingEmbeddings::new(32).embed(text),
            "{}'s vector is of its current text {text:?}",
            item.key
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_setup_names_what_is_missing_and_creates_nothing() {
    let schema = scratch_name("sg_store");
    let _guard = drop_schema(schema.clone());
    require_pgvector().await;
    let c = connect().await;
    c.batch_execute(&format!("CREATE SCHEMA \"{schema}\""))
        .await
        .unwrap();
    // Only the scratch schema on the search path: `public` may hold other tests' tables.
    let base = url();
    let sep = if base.contains('?') { '&' } else { '?' };
    let own_only = format!("{base}{sep}options=-c%20search_path%3D{schema}");
    let tables = || async {
        c.query_one(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1",
            &[&schema],
        )
        .await
        .unwrap()
        .get::<_, i64>(0)
    };
    let missing = |err: StoreError| match err {
        StoreError::MissingTables { tables, .. } => tables,
        other => panic!("expected MissingTables, got {other}"),
    };

    let plain = PostgresStoreConfig::from_url(&own_only)
        .unwrap()
        .without_setup();
    let indexed = plain.clone().index(index(8));
    let err = plain.clone().connect().await.unwrap_err();
    assert!(err.to_string().contains("store, store_migrations"), "{err}");
    assert_eq!(missing(err), ["store", "store_migrations"]);
    assert_eq!(
        missing(indexed.clone().connect().await.unwrap_err()),
        [
            "store",
            "store_migrations",
            "store_vectors",
            "vector_migrations"
        ]
    );
    assert_eq!(tables().await, 0, "checking created nothing");

    config(&schema).await.connect().await.unwrap();
    plain.connect().await.unwrap();
    assert_eq!(
        missing(indexed.clone().connect().await.unwrap_err()),
        ["store_vectors", "vector_migrations"]
    );
    config(&schema)
        .await
        .index(index(8))
        .connect()
        .await
        .unwrap();
    indexed.connect().await.unwrap();
}
