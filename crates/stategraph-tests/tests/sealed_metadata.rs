//! Encrypted checkpoint metadata (`SealedMetadataSaver`) on every saver: what the database
//! holds, what the graph reads back, filters on sealed keys, and the wrong key.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use serde_json::json;
use stategraph::prelude::*;
use stategraph::{AesEaxCipher, CheckpointSaver, SEALED_KEY, SealedMetadataSaver};

#[derive(State, Clone, Debug, Default)]
struct Steps {
    #[reducer(append)]
    log: Vec<String>,
}

const KEY: &[u8] = b"0123456789abcdef";

fn sealed(inner: Arc<dyn CheckpointSaver>, key: &[u8]) -> Arc<dyn CheckpointSaver> {
    Arc::new(SealedMetadataSaver::new(
        inner,
        Arc::new(AesEaxCipher::new(key).unwrap()),
    ))
}

fn graph(saver: Arc<dyn CheckpointSaver>) -> CompiledGraph<Steps> {
    let mut g = StateGraph::<Steps>::new();
    g.add_node("a", |_s, _ctx| async {
        Ok(StepsUpdate::default().log(["a"]))
    });
    g.add_edge(START, "a").add_edge("a", END);
    g.compile().unwrap().with_checkpointer(saver)
}

async fn metadata_is_sealed_at_rest_and_filterable(inner: Arc<dyn CheckpointSaver>) {
    let saver = sealed(inner.clone(), KEY);
    let graph = graph(saver.clone());
    for (thread, user) in [("t1", "alice@example.com"), ("t2", "bob@example.com")] {
        let mut config = RunConfig::thread(thread);
        config.metadata.insert("user".into(), json!(user));
        config
            .metadata
            .insert("run_id".into(), json!(format!("run-{thread}")));
        graph
            .invoke(StepsUpdate::default().log(Vec::<String>::new()), config)
            .await
            .unwrap();
    }

    // At rest: structural keys and run_id readable, the user only inside the sealed entry.
    let raw = inner
        .list(&stategraph::ListOptions {
            thread_id: Some("t1".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(raw.len(), 3);
    for t in &raw {
        let m = t.metadata.to_json();
        assert!(m.get("user").is_none(), "{m}");
        assert!(m.get("step").is_some() && m.get("source").is_some(), "{m}");
        assert_eq!(m["run_id"], json!("run-t1"));
        let sealed = m[SEALED_KEY].as_str().unwrap();
        assert!(sealed.starts_with("aes:"), "{sealed}");
        assert!(!sealed.contains("alice"), "{sealed}");
    }

    // Through the wrapper: the keys are back, and the graph's history shows them.
    let history = graph
        .get_state_history(&RunConfig::thread("t1"), Default::default())
        .await
        .unwrap();
    assert_eq!(history.len(), 3);
    for s in &history {
        assert_eq!(
            s.metadata.as_ref().unwrap().extra["user"],
            json!("alice@example.com")
        );
    }

    // Filters on sealed keys work (applied after decryption), with limit; clear keys too.
    let by_user = |user: &str, limit: Option<usize>| stategraph::ListOptions {
        filter: serde_json::Map::from_iter([("user".to_owned(), json!(user))]),
        limit,
        ..Default::default()
    };
    let bob = saver.list(&by_user("bob@example.com", None)).await.unwrap();
    assert_eq!(bob.len(), 3);
    assert!(bob.iter().all(|t| t.config.thread_id == "t2"));
    assert_eq!(
        saver
            .list(&by_user("bob@example.com", Some(1)))
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        saver
            .list(&by_user("eve@example.com", None))
            .await
            .unwrap()
            .is_empty()
    );
    let mut mixed = by_user("alice@example.com", None);
    mixed.filter.insert("step".into(), json!(1));
    let hits = saver.list(&mixed).await.unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].config.thread_id, "t1");

    // The wrong key: a typed error naming the checkpoint's metadata.
    let wrong = sealed(inner.clone(), b"fedcba9876543210");
    let err = wrong
        .get_tuple(&stategraph::CheckpointConfig::new("t1"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, stategraph::CheckpointError::Serialization { .. }),
        "{err}"
    );
    let message = err.to_string();
    assert!(
        message.contains("t1") && message.contains("metadata"),
        "{message}"
    );
}

on_every_saver!(metadata_is_sealed_at_rest_and_filterable);
