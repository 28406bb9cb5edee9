//! A node's failure, as the caller sees it: matchable, with the error it came from.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::error::Error as _;
use std::sync::Arc;

use stategraph_checkpoint::{InMemorySaver, Map, value};
use stategraph_graph::{DynState, GraphError, NodeError, RunConfig, START, Schema, StateGraph};

async fn read_config(path: &str) -> Result<Map, NodeError> {
    let text = std::fs::read_to_string(path)?; // io::Error converts with `?`
    let parsed: serde_json::Value = serde_json::from_str(&text)?; // so does serde_json::Error
    Ok(Map::from_iter([("x", value!(parsed.to_string()))]))
}

#[tokio::test]
async fn a_failed_node_keeps_its_source_error() {
    let mut g = StateGraph::<DynState>::with_schema(Schema::new().last_value("x"));
    g.add_node("load", |_s, _ctx| async {
        read_config("/definitely/not/here.json").await
    });
    g.add_edge(START, "load");
    let g = g
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(InMemorySaver::new()));
    let err = g
        .invoke_values(Map::from_iter([("x", value!(""))]), RunConfig::thread("t"))
        .await
        .unwrap_err();
    let GraphError::NodeFailed { node, message, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(node, "load");
    assert!(message.starts_with("Error('No such file"), "{message}");
    // The io::Error itself is the failure's source, for callers that branch on it.
    let io = err
        .source()
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .expect("the io::Error is kept as the source");
    assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
    // The thread stores it as LangGraph stores an exception.
    let state = g.get_state(&RunConfig::thread("t")).await.unwrap();
    assert_eq!(state.tasks[0].error.as_deref(), Some(message.as_str()));
}
