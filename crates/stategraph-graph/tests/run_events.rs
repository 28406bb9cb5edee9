//! `StreamMode::Events` (LangGraph's `astream_events(version="v2")`) of a graph with a node
//! that returns nothing, one that returns a `Command`, one with two conditional edges (one
//! named, one not) and one that interrupts: the events Python LangGraph 1.2.22 streams for
//! the same graph, in order, with their nesting, tags and data.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::sync::Arc;

use futures_util::StreamExt;
use serde_json::{Value as Json, json};
use stategraph_checkpoint::{InMemorySaver, Map, value};
use stategraph_graph::{
    Command, DynState, END, Goto, NodeOutput, Reducer, Resume, RunConfig, START, Schema,
    StateGraph, StreamMode,
};

async fn events(mut stream: stategraph_graph::RunStream<DynState>) -> Vec<Json> {
    let mut out = Vec::new();
    while let Some(event) = stream.next().await {
        out.push(event.unwrap().to_json());
    }
    out
}

/// `(event, name, parents as their runs' positions in order of first event, tags)`.
fn shape(events: &[Json]) -> Vec<(String, String, Vec<usize>, Json)> {
    let mut runs: Vec<&str> = Vec::new();
    events
        .iter()
        .map(|e| {
            let id = e["run_id"].as_str().unwrap();
            if !runs.contains(&id) {
                runs.push(id);
            }
            let parents = e["parent_ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| runs.iter().position(|r| Some(*r) == p.as_str()).unwrap())
                .collect();
            (
                e["event"].as_str().unwrap().to_owned(),
                e["name"].as_str().unwrap().to_owned(),
                parents,
                e["tags"].clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_graphs_events_are_pythons() {
    let schema = Schema::new().reducer("log", Reducer::append());
    let mut g = StateGraph::<DynState>::with_schema(schema);
    g.add_node("a", |_s, _c| async { Ok(NodeOutput::Empty) });
    g.add_node("b", |_s, _c| async {
        Ok(NodeOutput::Command(Command::update_and_goto(
            Map::from_iter([("log", value!(["b"]))]),
            ["c"],
        )))
    });
    g.add_node("c", |_s, _c| async {
        Ok(Map::from_iter([("log", value!(["c"]))]))
    });
    g.add_node("d", |_s, ctx| async move {
        let answer = ctx.interrupt("q?")?;
        Ok(Map::from_iter([("log", value!([answer]))]))
    });
    g.add_edge(START, "a").add_edge("a", "b");
    g.add_conditional_edges("c", |_s: &DynState| Ok(vec![Goto::from("d")]))
        .name("route");
    g.add_conditional_edges("c", |_s: &DynState| Ok(vec![Goto::from(END)]));
    g.add_destinations("b", ["c"]);
    let g = g
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(InMemorySaver::new()));
    let config = RunConfig::thread("t");

    let first = events(g.stream_values(
        Map::from_iter([("log", value!([]))]),
        config.clone(),
        &[StreamMode::Events],
    ))
    .await;
    let lg = "LangGraph";
    let graph = |e: &str| (e.to_owned(), lg.to_owned(), vec![], json!([]));
    let task = |e: &str, n: &str, step: i64| {
        (
            e.to_owned(),
            n.to_owned(),
            vec![0],
            json!([format!("graph:step:{step}")]),
        )
    };
    let edge = |e: &str, n: &str, k: usize| {
        (
            e.to_owned(),
            n.to_owned(),
            vec![0, 3],
            json!([format!("seq:step:{k}")]),
        )
    };
    assert_eq!(
        shape(&first),
        vec![
            graph("on_chain_start"),
            task("on_chain_start", "a", 1),
            task("on_chain_stream", "a", 1),
            task("on_chain_end", "a", 1),
            graph("on_chain_stream"),
            task("on_chain_start", "b", 2),
            task("on_chain_stream", "b", 2),
            task("on_chain_end", "b", 2),
            graph("on_chain_stream"),
            task("on_chain_start", "c", 3),
            edge("on_chain_start", "route", 3),
            edge("on_chain_end", "route", 3),
            edge("on_chain_start", "Unnamed", 4),
            edge("on_chain_end", "Unnamed", 4),
            task("on_chain_stream", "c", 3),
            task("on_chain_end", "c", 3),
            graph("on_chain_stream"),
            task("on_chain_start", "d", 4),
            graph("on_chain_stream"),
            graph("on_chain_end"),
        ]
    );
    assert_eq!(first[0]["data"], json!({"input": {"log": []}}));
    assert_eq!(first[2]["data"], json!({"chunk": null}));
    assert_eq!(first[4]["data"], json!({"chunk": {"a": null}}));
    assert_eq!(first[8]["data"]["chunk"], json!({"b": {"log": ["b"]}}));
    assert_eq!(first[10]["data"], json!({"input": {"log": ["b", "c"]}}));
    assert_eq!(first[11]["data"]["output"], json!("d"));
    assert_eq!(first[13]["data"]["output"], json!("__end__"));
    assert_eq!(
        first[15]["data"],
        json!({"output": {"log": ["c"]}, "input": {"log": ["b"]}})
    );
    assert_eq!(
        first[18]["data"]["chunk"]["__interrupt__"][0]["value"],
        json!("q?")
    );
    assert_eq!(first[19]["data"], json!({"output": {"log": ["b", "c"]}}));
    assert_eq!(first[1]["metadata"]["langgraph_node"], json!("a"));
    assert_eq!(first[1]["metadata"]["ls_integration"], json!("langgraph"));
    assert_eq!(first[0]["metadata"]["thread_id"], json!("t"));

    let second =
        events(g.stream_resume(Resume::Value("yes".into()), config, &[StreamMode::Events])).await;
    assert_eq!(
        shape(&second),
        vec![
            graph("on_chain_start"),
            task("on_chain_start", "d", 4),
            task("on_chain_stream", "d", 4),
            task("on_chain_end", "d", 4),
            graph("on_chain_stream"),
            graph("on_chain_end"),
        ]
    );
    assert_eq!(
        second[5]["data"],
        json!({"output": {"log": ["b", "c", "yes"]}})
    );
}
