//! Retrieval quality of the memory store with the local all-MiniLM-L6-v2 model, on every store
//! backend: 32 memories of four users (`tests/fixtures/memories.json`), 17 natural-language
//! questions, each asked in the namespace of the user it is about. The memory that answers it
//! must be among the top 3 results for at least 90% of the questions (recall@3 ≥ 0.9), and no
//! result may ever come from another user's namespace.
//!
//! Needs the model (`scripts/install-model.sh`) and, for the Postgres case, pgvector
//! (`scripts/install-pgvector.sh`); both missing is a failure, not a skip.

#![cfg(feature = "minilm")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use serde_json::{Value as Json, json};
use stategraph::prelude::*;
use stategraph::store::StoreError;

/// The fixture: memories per user, and `[user, question, expected key]` triples.
#[derive(serde::Deserialize)]
struct Fixture {
    memories: serde_json::Map<String, Json>,
    queries: Vec<(String, String, String)>,
}

fn fixture() -> Fixture {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/memories.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn options() -> StoreOptions {
    let model = stategraph::embed::MiniLm::shared()
        .unwrap_or_else(|e| panic!("the local embedding model is required: {e}"));
    StoreOptions::new().index(IndexConfig::new(384, model).with_fields(["text"]))
}

/// Loads the memories, asks every question and checks recall and namespace isolation.
async fn recall(store: Arc<dyn Store>) -> Result<f64, StoreError> {
    let fx = fixture();
    let mut memories = 0;
    for (user, items) in &fx.memories {
        for (key, text) in items.as_object().unwrap() {
            store
                .put(&["users", user, "memories"], key, json!({ "text": text }))
                .await?;
            memories += 1;
        }
    }
    assert!(
        memories >= 30 && fx.memories.len() >= 3,
        "fixture too small"
    );
    assert!(fx.queries.len() >= 10, "fixture has too few queries");

    let mut found = 0;
    let mut misses = Vec::new();
    for (user, question, expected) in &fx.queries {
        let hits = store
            .search(
                &["users", user],
                SearchOptions::new().query(question).limit(3),
            )
            .await?;
        assert_eq!(hits.len(), 3, "{question:?}: expected 3 results");
        for hit in &hits {
            assert_eq!(
                hit.namespace,
                ["users", user, "memories"],
                "{question:?} for {user} returned {}'s memory {}",
                hit.namespace[1],
                hit.key
            );
            assert!(
                hit.score.is_some(),
                "{question:?}: a semantic hit carries a score"
            );
        }
        let scores: Vec<f64> = hits.iter().map(|h| h.score.unwrap()).collect();
        assert!(
            scores.windows(2).all(|w| w[0] >= w[1]),
            "{question:?}: results not ordered by score: {scores:?}"
        );
        if hits.iter().any(|h| &h.key == expected) {
            found += 1;
        } else {
            let keys: Vec<&str> = hits.iter().map(|h| h.key.as_str()).collect();
            misses.push(format!(
                "{user}: {question:?} wanted {expected}, got {keys:?}"
            ));
        }
    }
    let recall = found as f64 / fx.queries.len() as f64;
    eprintln!("recall@3 = {recall:.3} ({found}/{})", fx.queries.len());
    for miss in &misses {
        eprintln!("  miss: {miss}");
    }
    assert!(
        recall >= 0.9,
        "recall@3 {recall:.3} < 0.9; misses: {misses:#?}"
    );
    Ok(recall)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_memory() {
    let store = stategraph::open_store("memory:", options()).await.unwrap();
    recall(store).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("memories.sqlite").display());
    let store = stategraph::open_store(&url, options()).await.unwrap();
    recall(store).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres() {
    let schema = stategraph_testkit::postgres::ScratchSchema::new("sg_recall");
    let StoreOptions { index, ttl } = options();
    let store =
        stategraph_postgres::PostgresStoreConfig::from_url(&stategraph_testkit::postgres::url())
            .unwrap()
            .schema(schema.name())
            .pool_size(2)
            .index(index.unwrap())
            .ttl(ttl)
            .connect()
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "PostgreSQL with pgvector at {} is required (scripts/install-pgvector.sh): {e}",
                    stategraph_testkit::postgres::url()
                )
            });
    recall(Arc::new(store)).await.unwrap();
}
