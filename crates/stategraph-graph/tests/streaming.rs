//! Stream modes: the same events, in the same order, as Python LangGraph streams for the
//! seeds' 2-node graph with every mode on (recorded from langgraph 1.2.22).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use stategraph_checkpoint::{InMemorySaver, Map, Value, value};
use stategraph_graph::{
    DynState, END, Reducer, RunConfig, START, Schema, StateGraph, StreamMode, StreamPart,
};

fn field<'a>(v: &'a Value, key: &str) -> &'a Value {
    v.as_map().and_then(|m| m.get(key)).unwrap_or(&Value::Null)
}

#[tokio::test]
async fn all_modes_in_langgraph_order() {
    let schema = Schema::new()
        .last_value("foo")
        .reducer("bar", Reducer::append());
    let mut g = StateGraph::<DynState>::with_schema(schema);
    g.add_node("node_a", |_s, ctx| async move {
        ctx.write_custom(value!({"progress": 1}));
        Ok(Map::from_iter([
            ("foo", value!("a")),
            ("bar", value!(["a"])),
        ]))
    });
    g.add_node("node_b", |_s, _c| async {
        Ok(Map::from_iter([
            ("foo", value!("b")),
            ("bar", value!(["b"])),
        ]))
    });
    g.add_edge(START, "node_a")
        .add_edge("node_a", "node_b")
        .add_edge("node_b", END);
    let g = g
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(InMemorySaver::new()));
    use StreamMode::*;
    let input = Map::from_iter([("foo", value!("")), ("bar", value!([]))]);
    let mut stream = g.stream(
        Some(input),
        RunConfig::thread("1"),
        &[Values, Updates, Checkpoints, Tasks, Debug, Custom],
    );
    let mut parts: Vec<StreamPart> = Vec::new();
    while let Some(p) = stream.next().await {
        parts.push(p);
    }
    let out = stream.result().await.unwrap();
    assert_eq!(out["bar"], value!(["a", "b"]));

    let modes: Vec<&str> = parts.iter().map(|p| p.mode.as_str()).collect();
    assert_eq!(
        modes,
        [
            "checkpoints",
            "debug",
            "values", // input checkpoint; __start__ runs
            "checkpoints",
            "debug",
            "tasks",
            "debug",
            "custom",
            "updates",
            "tasks",
            "debug",
            "values", // node_a
            "checkpoints",
            "debug",
            "tasks",
            "debug",
            "updates",
            "tasks",
            "debug",
            "values", // node_b
            "checkpoints",
            "debug", // final checkpoint
        ]
    );
    // Payloads.
    let first = &parts[0].data;
    assert_eq!(field(first, "values"), &value!({"bar": []}));
    assert_eq!(field(first, "next"), &value!(["__start__"]));
    assert_eq!(field(first, "parent_config"), &Value::Null);
    assert_eq!(field(field(first, "metadata"), "source"), &value!("input"));
    assert_eq!(parts[2].data, value!({"bar": [], "foo": ""}));
    assert_eq!(field(&parts[5].data, "name"), &value!("node_a"));
    assert_eq!(
        field(&parts[5].data, "triggers"),
        &value!(["branch:to:node_a"])
    );
    assert_eq!(
        field(&parts[5].data, "input"),
        &value!({"bar": [], "foo": ""})
    );
    assert_eq!(field(&parts[6].data, "type"), &value!("task"));
    assert_eq!(field(&parts[6].data, "step"), &value!(1));
    assert_eq!(parts[7].data, value!({"progress": 1}));
    assert_eq!(
        parts[8].data,
        value!({"node_a": {"foo": "a", "bar": ["a"]}})
    );
    assert_eq!(
        field(&parts[9].data, "result"),
        &value!({"foo": "a", "bar": ["a"]})
    );
    assert_eq!(field(&parts[9].data, "error"), &Value::Null);
    let last = &parts[20].data;
    assert_eq!(field(last, "next"), &value!([]));
    assert_eq!(field(field(last, "metadata"), "step"), &value!(2));
}

#[tokio::test]
async fn only_requested_modes_are_sent() {
    let schema = Schema::new().reducer("n", Reducer::add());
    let mut g = StateGraph::<DynState>::with_schema(schema);
    g.add_node("inc", |_s, ctx| async move {
        ctx.write_custom("ignored");
        Ok(Map::from_iter([("n", value!(1))]))
    });
    g.add_edge(START, "inc");
    let g = g.compile().unwrap();
    let mut stream = g.stream(
        Some(Map::from_iter([("n", value!(1))])),
        RunConfig::default(),
        &[StreamMode::Updates],
    );
    let mut parts = Vec::new();
    while let Some(p) = stream.next().await {
        parts.push(p.data);
    }
    assert_eq!(parts, [value!({"inc": {"n": 1}})]);
    assert_eq!(stream.result().await.unwrap()["n"], value!(2));
}
