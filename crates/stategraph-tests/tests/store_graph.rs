//! Graph integration of the cross-thread store: nodes reach it through their context, next
//! to the run's typed context; every thread (and every subgraph) sees the same memories.

use std::sync::Arc;

use serde_json::json;
use stategraph::prelude::*;
use stategraph::store::{HashingEmbeddings, InMemoryStore, IndexConfig, SearchOptions, Store};

#[derive(State, Clone, Debug, Default)]
struct Chat {
    #[reducer(append)]
    said: Vec<String>,
    #[reducer(append)]
    recalled: Vec<String>,
}

/// The run's typed context: whose memories to use.
struct User {
    id: String,
}

fn memory_node() -> StateGraph<Chat> {
    let mut g = StateGraph::<Chat>::new();
    g.add_node("remember_or_recall", |s, ctx: NodeContext| async move {
        let user = ctx
            .context::<User>()
            .ok_or_else(|| NodeError::new("no user"))?;
        let store = ctx.store().ok_or_else(|| NodeError::new("no store"))?;
        let ns = [user.id.as_str(), "memories"];
        let last = s.said.last().cloned().unwrap_or_default();
        if let Some(fact) = last.strip_prefix("remember: ") {
            let key = format!("m{}", s.said.len());
            store.put(&ns, &key, json!({"data": fact})).await?;
            return Ok(ChatUpdate::default());
        }
        let hits = store
            .search(&ns, SearchOptions::new().query(last).limit(1))
            .await?;
        let found: Vec<String> = hits
            .iter()
            .filter_map(|h| h.value["data"].as_str().map(str::to_owned))
            .collect();
        Ok(ChatUpdate::default().recalled(found))
    });
    g.add_edge(START, "remember_or_recall");
    g
}

fn store() -> Arc<dyn Store> {
    let index = IndexConfig::new(128, Arc::new(HashingEmbeddings::new(128)));
    Arc::new(InMemoryStore::new().with_index(index))
}

fn turn(text: &str) -> ChatUpdate {
    ChatUpdate::default().said([text])
}

#[tokio::test]
async fn a_new_thread_of_the_same_user_finds_the_memory() {
    let store = store();
    let graph = memory_node()
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(InMemorySaver::new()))
        .with_store(store.clone());
    let as_user = |thread: &str, user: &str| {
        RunConfig::thread(thread).with_context(User {
            id: user.to_owned(),
        })
    };
    graph
        .invoke_values(turn("remember: I like pizza"), as_user("t1", "u1"))
        .await
        .unwrap();
    graph
        .invoke_values(turn("remember: I like chess"), as_user("t9", "u2"))
        .await
        .unwrap();
    let out = graph
        .invoke_values(turn("what about pizza"), as_user("t2", "u1"))
        .await
        .unwrap();
    assert_eq!(out["recalled"], value!(["I like pizza"]));
    // Another user's thread sees only that user's memories.
    let out = graph
        .invoke_values(turn("what about pizza"), as_user("t3", "u2"))
        .await
        .unwrap();
    assert_eq!(out["recalled"], value!(["I like chess"]));
    let stored = store.get(&["u1", "memories"], "m1").await.unwrap().unwrap();
    assert_eq!(stored.value, json!({"data": "I like pizza"}));
}

#[tokio::test]
async fn subgraphs_inherit_the_parents_store() {
    let store = store();
    let inner = memory_node().compile().unwrap();
    let mut outer = StateGraph::<Chat>::new();
    outer.add_subgraph("inner", inner);
    outer.add_edge(START, "inner");
    let graph = outer
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(InMemorySaver::new()))
        .with_store(store.clone());
    let cfg = |t: &str| RunConfig::thread(t).with_context(User { id: "u7".into() });
    graph
        .invoke_values(turn("remember: tea not coffee"), cfg("a"))
        .await
        .unwrap();
    let out = graph.invoke_values(turn("coffee"), cfg("b")).await.unwrap();
    assert_eq!(out["recalled"], value!(["tea not coffee"]));
}

#[tokio::test]
async fn a_node_without_a_store_fails_with_a_clear_error() {
    let graph = memory_node().compile().unwrap();
    let err = graph
        .invoke_values(
            turn("hello"),
            RunConfig::default().with_context(User { id: "u".into() }),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no store"), "{err}");
}

#[tokio::test]
async fn store_errors_inside_a_node_name_the_problem() {
    let graph = memory_node().compile().unwrap().with_store(store());
    // `.` is not allowed in a namespace label: the node's put fails with the store's error.
    let cfg = RunConfig::default().with_context(User { id: "a.b".into() });
    let err = graph
        .invoke_values(turn("remember: x"), cfg)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("contains `.`"), "{err}");
}
