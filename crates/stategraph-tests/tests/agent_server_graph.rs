//! An assistant's graph as the Agent Server draws it: LangGraph's Python SDK
//! (`sdk/graphs_flow.py`) asks a stategraph server serving the scenario's graphs
//! (`common/seed_server.rs`) and the reference server (`langgraph dev`) serving the same
//! graphs in Python (`bench/agent-server/reference/graphs.py`) for each graph's drawing, with
//! `xray` off, on and at depth 1 (a subgraph drawn into its parent), and for its subgraphs:
//! the two transcripts must be equal.
//!
//! Needs the pinned Python environment and the reference server's (`scripts/test.sh` sets
//! both up). Fails, never skips, without them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use common::reference::{Reference, transcript_diffs};
use common::seed_server::{run_sdk_script, serve_seed};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drawings_match_the_reference_servers() {
    let (base, serving, _dir) = serve_seed().await;
    let ours = run_sdk_script("graphs_flow.py", vec![base]).await;
    serving.abort();

    let reference = tokio::task::spawn_blocking(|| Reference::start(&[]))
        .await
        .unwrap();
    let theirs = run_sdk_script("graphs_flow.py", vec![reference.url()]).await;
    drop(reference);

    let diffs = transcript_diffs(&ours, &theirs, &[]);
    assert!(
        diffs.is_empty(),
        "the drawings differ:\n{}\n\nours: {ours:#}\n\nreference: {theirs:#}",
        diffs.join("\n")
    );
    // What both say, spelled out: with xray, the subgraph's nodes replace its node.
    let nodes: Vec<&str> = ours["nested@True"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        nodes,
        [
            "__start__",
            "after",
            "__end__",
            "sub:inner_a",
            "sub:inner_b"
        ]
    );
    assert_eq!(ours["nested@False"]["nodes"][1]["id"], "sub");
}
