//! A Functional API workflow served as an assistant: LangGraph's Python SDK
//! (`sdk/entrypoint_flow.py`) streams a run up to its interrupt, reads the interrupted
//! thread, answers the interrupt (waited and streamed), carries `previous` to the next runs,
//! reads the history and makes a stateless run — against a stategraph server serving the
//! Rust `workflow` (`common/seed_server.rs`) and against the reference server (`langgraph
//! dev`) serving the same workflow in Python (`bench/agent-server/reference/graphs.py`), in
//! the same test: the two transcripts must be equal.
//!
//! Needs the pinned Python environment and the reference server's (`scripts/test.sh` sets
//! both up). Fails, never skips, without them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use common::reference::{Reference, transcript_diffs};
use common::seed_server::{run_sdk_script, serve, workflow};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entrypoint_served_through_the_sdk_matches_the_reference_server() {
    let (base, serving, _dir) = serve(|b| b.entrypoint("workflow", workflow())).await;
    let ours = run_sdk_script("entrypoint_flow.py", vec![base]).await;
    serving.abort();

    let reference = tokio::task::spawn_blocking(|| Reference::start(&[]))
        .await
        .unwrap();
    let theirs = run_sdk_script(
        "entrypoint_flow.py",
        vec![format!("http://127.0.0.1:{}", reference.port)],
    )
    .await;
    drop(reference);

    let diffs = transcript_diffs(&ours, &theirs, &[]);
    assert!(
        diffs.is_empty(),
        "the transcripts differ:\n{}\n\nours: {ours:#}\n\nreference: {theirs:#}",
        diffs.join("\n")
    );

    // What both say, spelled out: the run stops on the question with nothing returned yet.
    assert_eq!(ours["thread_interrupted"]["status"], "interrupted");
    assert_eq!(ours["thread_interrupted"]["values"], json!(null));
    assert_eq!(
        ours["state_interrupted"]["interrupts"][0]["value"],
        json!({"question": "publish?", "drafts": ["draft about rust", "draft about graphs"]})
    );
    // The answer returns the workflow's value as the run's output and the thread's values.
    let first = json!({"published": ["DRAFT ABOUT RUST", "DRAFT ABOUT GRAPHS"], "count": 1});
    assert_eq!(ours["resumed"], first);
    assert_eq!(ours["thread_done"]["values"], first);
    // `previous` carries the saved count across runs; a rejection keeps it.
    assert_eq!(ours["state_second"]["values"]["count"], 2);
    assert_eq!(ours["rejected"], json!({"published": [], "count": 2}));
    assert_eq!(ours["history"].as_array().unwrap().len(), 6);
    // A stateless run answers with the interrupt it stopped on.
    assert!(ours["stateless"]["__interrupt__"].is_array());
}
