//! Delta threads shared with Python LangGraph (the pinned packages): a chat whose `messages`
//! is a `DeltaChannel` in Python and a delta key (`delta_storage`) here. A 50-turn thread
//! stategraph writes is read by Python exactly as we read it — every checkpoint's values,
//! next, metadata (the delta counters included) and configs — and continued by Python; a
//! thread Python writes is read and continued by stategraph. On SQLite and Postgres.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::chat::{Chat, chat_graph, conversation, talk};
use serde_json::Value as Json;
use stategraph::prelude::*;
use stategraph::{CheckpointSaver, Durability, StateSnapshot};
use stategraph_testkit::python::seed_graph_py;

/// Our history in the script's shape (configs flattened to their `configurable`).
async fn ours(graph: &CompiledGraph<Chat>, thread: &str) -> Vec<Json> {
    graph
        .get_state_history(&RunConfig::thread(thread), Default::default())
        .await
        .unwrap()
        .iter()
        .map(|s: &StateSnapshot| {
            let mut j = s.to_json();
            for key in ["config", "parent_config"] {
                let flat = j[key]["configurable"].clone();
                j[key] = if flat.is_null() { Json::Null } else { flat };
            }
            j
        })
        .collect()
}

async fn check(saver: Arc<dyn CheckpointSaver>, db: &str) {
    // The script's DeltaChannel snapshots every 10 updates (DELTA_K, default 10).
    let graph = chat_graph(Arc::clone(&saver), Some(10));

    // Ours → Python: 50 turns, then Python reads every checkpoint as we do and goes on.
    talk(&graph, "rust", 50, Durability::Async).await;
    let mine = ours(&graph, "rust").await;
    assert_eq!(mine.len(), 150);
    let snapshots = saver
        .list(&stategraph::ListOptions::thread("rust"))
        .await
        .unwrap()
        .iter()
        .filter(|t| t.checkpoint.channel_values.contains_key("messages"))
        // Blob savers share a value among the checkpoints that have its version.
        .map(|t| t.checkpoint.channel_versions["messages"].to_string())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    assert_eq!(snapshots, 10, "100 updates, a snapshot every 10");
    let theirs = seed_graph_py(None, db, "dchat", "rust", &["history"]);
    assert_eq!(theirs["history"].as_array().unwrap(), &mine);
    seed_graph_py(None, db, "dchat", "rust", &["turns:5"]);
    let latest = graph.get_state(&RunConfig::thread("rust")).await.unwrap();
    assert_eq!(
        latest.values["messages"],
        Value::List(conversation(55).into_iter().map(Value::from).collect())
    );
    let theirs = seed_graph_py(None, db, "dchat", "rust", &["history"]);
    assert_eq!(
        theirs["history"].as_array().unwrap(),
        &ours(&graph, "rust").await
    );

    // Python → ours: 50 turns by Python, read by us as Python reads them, continued by us.
    let theirs = seed_graph_py(None, db, "dchat", "py", &["turns:50", "history"]);
    assert_eq!(
        theirs["history"].as_array().unwrap(),
        &ours(&graph, "py").await
    );
    talk(&graph, "py", 5, Durability::Async).await;
    let theirs = seed_graph_py(None, db, "dchat", "py", &["history"]);
    let mine = ours(&graph, "py").await;
    assert_eq!(theirs["history"].as_array().unwrap(), &mine);
    assert_eq!(
        mine[0]["values"]["messages"],
        serde_json::json!(conversation(55))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_delta_threads_are_shared_with_python() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("delta.sqlite");
    let saver = Arc::new(SqliteConfig::file(&db).connect().await.unwrap());
    check(saver, db.to_str().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_delta_threads_are_shared_with_python() {
    let (saver, _guard, url) = common::postgres_with_url(None).await;
    check(saver, &url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongodb_delta_threads_are_shared_with_python() {
    let (saver, database) = stategraph_testkit::mongodb::saver().await;
    check(Arc::new(saver), &database.url()).await;
}
