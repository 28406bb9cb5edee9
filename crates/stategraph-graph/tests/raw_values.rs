//! Runs and updates from LangGraph's raw values (a map of state keys, as a client sends it):
//! `stream_values` and `update_state_values` validate keys as typed input is.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use futures_util::StreamExt;
use serde_json::json;
use stategraph_checkpoint::{InMemorySaver, Map, value};
use stategraph_graph::{
    CompiledGraph, DynState, END, GraphError, Reducer, RunConfig, START, Schema, StateGraph,
    StreamMode,
};

fn seed() -> CompiledGraph<DynState> {
    let schema = Schema::new()
        .last_value("foo")
        .reducer("bar", Reducer::append());
    let mut g = StateGraph::<DynState>::with_schema(schema);
    g.add_node("node_a", |_s, _ctx| async {
        Ok(Map::from_iter([
            ("foo", value!("a")),
            ("bar", value!(["a"])),
        ]))
    });
    g.add_node("node_b", |_s, _ctx| async {
        Ok(Map::from_iter([
            ("foo", value!("b")),
            ("bar", value!(["b"])),
        ]))
    });
    g.add_edge(START, "node_a")
        .add_edge("node_a", "node_b")
        .add_edge("node_b", END);
    g.compile()
        .unwrap()
        .with_checkpointer(Arc::new(InMemorySaver::new()))
}

#[tokio::test]
async fn stream_values_runs_raw_input_and_rejects_unknown_keys() {
    let graph = seed();
    let config = RunConfig::thread("raw");
    let input = Map::from_iter([("foo", value!("")), ("bar", value!([]))]);
    let mut stream = graph.stream_values(input, config.clone(), &[StreamMode::Values]);
    let mut last = None;
    while let Some(event) = stream.next().await {
        last = Some(event.unwrap().to_json());
    }
    assert_eq!(last.unwrap(), json!({"foo": "b", "bar": ["a", "b"]}));
    assert_eq!(
        graph
            .get_state_history(&config, Default::default())
            .await
            .unwrap()
            .len(),
        4
    );

    let bad = Map::from_iter([("nope", value!(1))]);
    let mut stream = graph.stream_values(bad, RunConfig::thread("bad"), &[StreamMode::Values]);
    let first = stream.next().await.unwrap();
    assert!(matches!(first, Err(GraphError::InvalidUpdate { channel, .. }) if channel == "nope"));
}

#[tokio::test]
async fn update_state_values_applies_through_reducers_as_node() {
    let graph = seed();
    let config = RunConfig::thread("upd");
    let input = Map::from_iter([("foo", value!("")), ("bar", value!([]))]);
    graph.invoke(input, config.clone()).await.unwrap();

    let values = Map::from_iter([("foo", value!("x")), ("bar", value!(["x"]))]);
    let at = graph
        .update_state_values(&config, Some(values), "node_a")
        .await
        .unwrap();
    assert!(at.checkpoint_id.is_some());
    let state = graph.get_state(&config).await.unwrap();
    assert_eq!(state.values["foo"], value!("x"));
    assert_eq!(state.values["bar"], value!(["a", "b", "x"]));
    assert_eq!(state.next, vec!["node_b".to_owned()]);

    let bad = Map::from_iter([("nope", value!(1))]);
    let err = graph
        .update_state_values(&config, Some(bad), "node_a")
        .await
        .unwrap_err();
    assert!(matches!(err, GraphError::InvalidUpdate { channel, .. } if channel == "nope"));
}
