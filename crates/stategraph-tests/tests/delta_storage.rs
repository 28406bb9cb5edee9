//! Delta storage (LangGraph's `DeltaChannel`): a conversation stored as deltas reads exactly
//! like the same conversation stored in full — every checkpoint of its history — while the
//! database grows with what the turns add, not with the history times the turns.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::chat::{Chat, ChatUpdate, chat_graph, conversation, talk};
use stategraph::prelude::*;
use stategraph::{CheckpointSaver, Durability};

/// Every snapshot of the history: values, next, metadata step and source.
async fn history_values(graph: &CompiledGraph<Chat>, thread: &str) -> Vec<serde_json::Value> {
    graph
        .get_state_history(&RunConfig::thread(thread), Default::default())
        .await
        .unwrap()
        .iter()
        .map(|s| {
            let j = s.to_json();
            serde_json::json!([
                j["values"],
                j["next"],
                j["metadata"]["step"],
                j["metadata"]["source"]
            ])
        })
        .collect()
}

async fn same_as_full_storage(saver: Arc<dyn CheckpointSaver>) {
    let full = chat_graph(Arc::clone(&saver), None);
    let delta = chat_graph(Arc::clone(&saver), Some(4));
    for d in [Durability::Sync, Durability::Async, Durability::Exit] {
        let name = format!("{d:?}");
        talk(&full, &format!("full-{name}"), 12, d).await;
        talk(&delta, &format!("delta-{name}"), 12, d).await;
        assert_eq!(
            history_values(&delta, &format!("delta-{name}")).await,
            history_values(&full, &format!("full-{name}")).await,
            "{name}: the delta thread reads like the full one, checkpoint by checkpoint"
        );
        let latest = delta
            .get_state(&RunConfig::thread(format!("delta-{name}")))
            .await
            .unwrap();
        assert_eq!(
            latest.values["messages"],
            Value::List(conversation(12).into_iter().map(Value::from).collect())
        );
    }
    // Stored: most checkpoints leave `messages` out; the others hold a `_DeltaSnapshot`.
    let tuples = saver
        .list(&stategraph::ListOptions::thread("delta-Sync"))
        .await
        .unwrap();
    let stored: Vec<&Value> = tuples
        .iter()
        .filter_map(|t| t.checkpoint.channel_values.get("messages"))
        .collect();
    assert!(
        !stored.is_empty() && stored.len() * 3 < tuples.len(),
        "{} of {}",
        stored.len(),
        tuples.len()
    );
    assert!(stored.iter().all(
        |v| matches!(v, Value::Ext(e) if e.ext_code() == Some(stategraph::ExtCode::DeltaSnapshot))
    ));
    assert!(tuples.iter().any(|t| {
        t.metadata
            .extra
            .contains_key("counters_since_delta_snapshot")
    }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_delta_threads_read_like_full_ones() {
    let dir = tempfile::tempdir().unwrap();
    let saver = Arc::new(
        SqliteConfig::file(dir.path().join("delta.sqlite"))
            .connect()
            .await
            .unwrap(),
    );
    same_as_full_storage(saver).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_delta_threads_read_like_full_ones() {
    let (saver, _guard, _url) = common::postgres_with_url(None).await;
    same_as_full_storage(saver).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_delta_threads_read_like_full_ones() {
    same_as_full_storage(Arc::new(InMemorySaver::new())).await;
}

/// The bytes of a SQLite database file, WAL folded in.
fn sqlite_bytes(path: &std::path::Path) -> u64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    conn.execute_batch("VACUUM").unwrap();
    let (checkpoints, checkpoint_bytes, writes, write_bytes): (i64, i64, i64, i64) = conn
        .query_row(
            "SELECT (SELECT count(*) FROM checkpoints), \
             (SELECT sum(length(checkpoint) + length(metadata)) FROM checkpoints), \
             (SELECT count(*) FROM writes), (SELECT sum(length(value)) FROM writes)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    println!(
        "  {checkpoints} checkpoints ({checkpoint_bytes} bytes of checkpoint and metadata), \
         {writes} writes ({write_bytes} bytes of values)"
    );
    let pages: i64 = conn
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .unwrap();
    let size: i64 = conn
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .unwrap();
    u64::try_from(pages * size).unwrap()
}

const TURNS: usize = 1000;
/// Two ~200-byte messages a turn.
const RAW: u64 = TURNS as u64 * 400;

/// 1,000 turns stored as deltas (LangGraph's default cadence, a snapshot every 100 updates):
/// the last state is the whole conversation, and the database holds a small multiple of
/// the raw message bytes (printed) where full storage holds about 1,500 times them.
async fn thousand_turns(saver: Arc<dyn CheckpointSaver>, durability: Durability) {
    let graph = chat_graph(saver, Some(100));
    talk(&graph, "long", TURNS, durability).await;
    let latest = graph.get_state(&RunConfig::thread("long")).await.unwrap();
    let all: Vec<Value> = conversation(TURNS).into_iter().map(Value::from).collect();
    assert_eq!(latest.values["messages"], Value::from(all));
}

fn report(backend: &str, durability: Durability, bytes: u64) -> f64 {
    #[allow(clippy::cast_precision_loss)]
    let ratio = bytes as f64 / RAW as f64;
    println!(
        "{backend} {durability:?}: {TURNS} turns, {bytes} bytes = {ratio:.2}x the raw messages"
    );
    ratio
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_thousand_turns() {
    for (durability, bound) in [(Durability::Async, 25.0), (Durability::Exit, 16.0)] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("long.sqlite");
        let saver = Arc::new(SqliteConfig::file(&path).connect().await.unwrap());
        thousand_turns(saver, durability).await;
        let ratio = report("sqlite", durability, sqlite_bytes(&path));
        assert!(ratio < bound, "{ratio:.2}x");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_thousand_turns() {
    for (durability, bound) in [(Durability::Async, 30.0), (Durability::Exit, 20.0)] {
        let (saver, _guard, url) = common::postgres_with_url(None).await;
        thousand_turns(saver, durability).await;
        let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        client
            .batch_execute("VACUUM FULL checkpoints, checkpoint_blobs, checkpoint_writes")
            .await
            .unwrap();
        let bytes: i64 = client
            .query_one(
                "SELECT pg_total_relation_size('checkpoints') + pg_total_relation_size('checkpoint_blobs') \
                 + pg_total_relation_size('checkpoint_writes')",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        let ratio = report("postgres", durability, u64::try_from(bytes).unwrap());
        assert!(ratio < bound, "{ratio:.2}x");
    }
}

/// `prune_keep_latest` on a delta thread with a branch: the saver alone refuses (the kept
/// checkpoint is rebuilt from the history it would delete); through the graph the latest
/// checkpoint is re-snapshotted first, and what remains reads the same and goes on.
async fn prune_keeps_delta_threads_readable(saver: Arc<dyn CheckpointSaver>) {
    let graph = chat_graph(Arc::clone(&saver), Some(4));
    talk(&graph, "p", 5, Durability::Async).await;
    let history = graph
        .get_state_history(&RunConfig::thread("p"), Default::default())
        .await
        .unwrap();
    // Two branches: updates of the same past checkpoint, each followed by a turn (the first
    // branch and the original continuation are left behind).
    let mut past = RunConfig::thread("p");
    past.checkpoint_id = history[6].config.clone().unwrap().checkpoint_id;
    for _ in 0..2 {
        graph
            .update_state(
                &past,
                ChatUpdate::default().messages(["on a branch"]),
                "reply",
            )
            .await
            .unwrap();
        talk(&graph, "p", 1, Durability::Async).await;
    }
    let before = graph.get_state(&RunConfig::thread("p")).await.unwrap();
    assert!(
        before.values["messages"]
            .as_list()
            .unwrap()
            .contains(&Value::from("on a branch"))
    );
    let refused = saver
        .prune(&["p".to_owned()], stategraph::PruneStrategy::KeepLatest)
        .await;
    assert!(
        matches!(
            refused,
            Err(stategraph::CheckpointError::InvalidInput { .. })
        ),
        "{refused:?}"
    );
    saver.copy_thread("p", "p-copy").await.unwrap();
    other_strategies_keep_values(&graph, &saver, "p").await;
    graph.prune_keep_latest("p").await.unwrap();
    let left = saver
        .list(&stategraph::ListOptions::thread("p"))
        .await
        .unwrap();
    assert_eq!(left.len(), 1);
    for t in &left {
        let mut at = RunConfig::thread("p");
        at.checkpoint_id = Some(t.checkpoint.id.clone());
        assert_eq!(graph.get_state(&at).await.unwrap().values, before.values);
    }
    // The pruned thread goes on exactly as an unpruned copy does.
    talk(&graph, "p", 1, Durability::Async).await;
    talk(&graph, "p-copy", 1, Durability::Async).await;
    let after = graph.get_state(&RunConfig::thread("p")).await.unwrap();
    let control = graph.get_state(&RunConfig::thread("p-copy")).await.unwrap();
    assert_eq!(after.values, control.values);
    assert!(
        after.values["messages"].as_list().unwrap().len()
            > before.values["messages"].as_list().unwrap().len()
    );
}

/// `KeepLast` and `AbandonedBranches` on copies of `thread`: every checkpoint left reads as it
/// did before the prune (those whose history went are re-snapshotted first).
async fn other_strategies_keep_values(
    graph: &CompiledGraph<Chat>,
    saver: &Arc<dyn CheckpointSaver>,
    thread: &str,
) {
    let before: std::collections::BTreeMap<stategraph::CheckpointId, stategraph::Values> = {
        let mut m = std::collections::BTreeMap::new();
        for s in graph
            .get_state_history(&RunConfig::thread(thread), Default::default())
            .await
            .unwrap()
        {
            m.insert(s.config.unwrap().checkpoint_id.unwrap(), s.values);
        }
        m
    };
    for (name, strategy) in [
        ("keep4", stategraph::PruneStrategy::KeepLast(4)),
        ("abandoned", stategraph::PruneStrategy::AbandonedBranches),
    ] {
        let copy = format!("{thread}-{name}");
        saver.copy_thread(thread, &copy).await.unwrap();
        graph.prune(&copy, strategy).await.unwrap();
        let left = graph
            .get_state_history(&RunConfig::thread(&copy), Default::default())
            .await
            .unwrap();
        assert!(left.len() < before.len(), "{name}: something went");
        for s in &left {
            let id = s.config.clone().unwrap().checkpoint_id.unwrap();
            assert_eq!(s.values, before[&id], "{name}: checkpoint {id}");
        }
        if name == "keep4" {
            assert_eq!(left.len(), 4);
        }
    }
    // The saver alone refuses: the kept checkpoints need the history it would delete.
    let refused = saver
        .prune(&[thread.to_owned()], stategraph::PruneStrategy::KeepLast(4))
        .await;
    assert!(
        matches!(
            refused,
            Err(stategraph::CheckpointError::InvalidInput { .. })
        ),
        "{refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_prune_keeps_delta_threads_readable() {
    let dir = tempfile::tempdir().unwrap();
    let saver = Arc::new(
        SqliteConfig::file(dir.path().join("prune.sqlite"))
            .connect()
            .await
            .unwrap(),
    );
    prune_keeps_delta_threads_readable(saver).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_prune_keeps_delta_threads_readable() {
    let (saver, _guard, _url) = common::postgres_with_url(None).await;
    prune_keeps_delta_threads_readable(saver).await;
}
