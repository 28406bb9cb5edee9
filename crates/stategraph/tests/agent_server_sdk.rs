//! LangGraph's own Python client (`langgraph-sdk` 0.4.14) against a stategraph Agent Server
//! serving the seed graph on one SQLite file: assistants, threads, waited and streamed runs,
//! state, history, state updates, search and errors, exactly as the client expects them.
//!
//! Needs the pinned Python environment (`scripts/python-env.sh`; `scripts/test.sh` sets it
//! up). Fails, never skips, without it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use serde_json::{Value as Json, json};
use stategraph::prelude::*;
use stategraph::server::Server;

#[derive(State, Clone, Debug, Default)]
struct Seed {
    foo: String,
    #[reducer(append)]
    bar: Vec<String>,
}

fn seed_graph() -> CompiledGraph<Seed> {
    let mut g = StateGraph::<Seed>::new();
    g.add_node("node_a", |_s, _c| async {
        Ok(SeedUpdate::default().foo("a").bar(["a"]))
    });
    g.add_node("node_b", |_s, _c| async {
        Ok(SeedUpdate::default().foo("b").bar(["b"]))
    });
    g.add_edge(START, "node_a")
        .add_edge("node_a", "node_b")
        .add_edge("node_b", END);
    g.compile().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_drives_the_seed_graph() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("server.sqlite").display());
    let server = Server::builder()
        .graph("seed", seed_graph())
        .checkpointer(stategraph::open_saver(&url).await.unwrap())
        .store(
            stategraph::open_store(&url, StoreOptions::new())
                .await
                .unwrap(),
        )
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let serving = tokio::spawn(server.serve(listener));

    let script =
        stategraph_testkit::python::repo_root().join("crates/stategraph/tests/sdk/seed_flow.py");
    let out: Json = tokio::task::spawn_blocking(move || {
        stategraph_testkit::python::run_python_json([script.as_os_str(), base.as_ref()], "")
    })
    .await
    .unwrap();
    serving.abort();

    // The default assistant, with LangGraph's id: `uuid5(NAMESPACE_GRAPH, "seed")`.
    assert_eq!(
        out["assistants"],
        json!([{"assistant_id": "67d4dc3a-8f38-599c-bcc6-8bb8840dec76",
                "graph_id": "seed", "name": "seed"}])
    );
    assert_eq!(out["assistant_get"], "seed");
    assert_eq!(
        out["graph"],
        json!({
            "nodes": ["__start__", "node_a", "node_b", "__end__"],
            "edges": [["__start__", "node_a"], ["node_a", "node_b"], ["node_b", "__end__"]],
        })
    );
    assert_eq!(
        out["thread_created"],
        json!({"status": "idle", "metadata": {"owner": "sdk-test", "n": 1}})
    );
    assert_eq!(out["wait"], json!({"foo": "b", "bar": ["a", "b"]}));

    let state = &out["state"];
    assert_eq!(state["values"], json!({"foo": "b", "bar": ["a", "b"]}));
    assert_eq!(state["next"], json!([]));
    assert!(
        state["checkpoint_id"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );
    assert_eq!(state["step"], 2);

    // LangGraph's four checkpoints, newest first.
    let history = out["history"].as_array().unwrap();
    let steps: Vec<_> = history.iter().map(|h| h["step"].clone()).collect();
    assert_eq!(steps, [json!(2), json!(1), json!(0), json!(-1)]);
    let sources: Vec<_> = history.iter().map(|h| h["source"].clone()).collect();
    assert_eq!(
        sources,
        [json!("loop"), json!("loop"), json!("loop"), json!("input")]
    );
    assert_eq!(history[0]["checkpoint_id"], state["checkpoint_id"]);
    assert_eq!(history[1]["next"], json!(["node_b"]));
    assert_eq!(history[3]["values"], json!({"bar": []})); // as LangGraph: an append channel starts empty

    // A stream: metadata first, then values/updates as LangGraph orders them.
    let stream = out["stream"].as_array().unwrap();
    let names: Vec<_> = stream
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "metadata", "values", "updates", "values", "updates", "values"
        ],
        "{stream:#?}"
    );
    assert!(stream[0]["data"]["run_id"].is_string());
    assert_eq!(stream[0]["data"]["attempt"], 1);
    assert_eq!(stream[1]["data"], json!({"foo": "", "bar": []}));
    assert_eq!(
        stream[2]["data"],
        json!({"node_a": {"foo": "a", "bar": ["a"]}})
    );
    assert_eq!(stream[5]["data"], json!({"foo": "b", "bar": ["a", "b"]}));

    assert_eq!(out["thread_after"], "idle");
    assert_eq!(out["search"], json!([true]));
    assert_eq!(out["search_all"], 2);
    assert_eq!(out["update_state"], true);
    assert_eq!(
        out["after_update"],
        json!({"foo": "edited", "bar": ["a", "b"]})
    );
    assert_eq!(
        out["stateless"],
        json!({"foo": "b", "bar": ["x", "a", "b"]})
    );
    assert_eq!(out["missing_thread"], 404);
}
