//! LangGraph's JS client (`@langchain/langgraph-sdk` 1.15.0) against a stategraph Agent
//! Server serving the seed graph: create a thread, stream a run, read the state.
//!
//! Needs Node.js and the pinned package (`scripts/js-sdk.sh`, which `scripts/test.sh` runs and
//! which prints the directory to put in `STATEGRAPH_JS_SDK_DIR`). Fails, never skips, without
//! them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::path::PathBuf;

use serde_json::{Value as Json, json};

/// The directory where the pinned JS client is installed.
fn js_sdk_dir() -> PathBuf {
    let dir = std::env::var_os("STATEGRAPH_JS_SDK_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/stategraph/js-sdk"))
        })
        .unwrap_or_default();
    assert!(
        dir.join("node_modules/@langchain/langgraph-sdk").is_dir(),
        "the JS client is not installed in {}: run scripts/js-sdk.sh (scripts/test.sh does) and \
         set STATEGRAPH_JS_SDK_DIR to the directory it prints",
        dir.display()
    );
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_sdk_streams_a_run_and_reads_the_state() {
    let sdk = js_sdk_dir();
    let (base, serving, _db) = common::seed_server::serve_seed().await;

    // Node resolves the package from the script's own directory: run a copy placed there.
    let script = sdk.join(format!("seed_flow-{}.mjs", std::process::id()));
    std::fs::copy(
        stategraph_testkit::python::repo_root()
            .join("crates/stategraph-tests/tests/sdk/seed_flow.mjs"),
        &script,
    )
    .unwrap();
    let run = script.clone();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new("node")
            .arg(&run)
            .arg(&base)
            .output()
    })
    .await
    .unwrap();
    let _ = std::fs::remove_file(&script);
    serving.abort();
    let output = output.expect("node (Node.js 18 or newer) must be installed");
    assert!(
        output.status.success(),
        "the JS client failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let out: Json = serde_json::from_slice(&output.stdout).unwrap();

    assert_eq!(
        out["assistant_ids"],
        json!(["67d4dc3a-8f38-599c-bcc6-8bb8840dec76"])
    );
    assert_eq!(out["thread_metadata"], json!({"from": "js"}));
    assert_eq!(
        out["events"],
        json!([
            ["metadata", ["attempt", "run_id"]],
            ["values", {"foo": "", "bar": []}],
            ["updates", {"node_a": {"foo": "a", "bar": ["a"]}}],
            ["values", {"foo": "a", "bar": ["a"]}],
            ["updates", {"node_b": {"foo": "b", "bar": ["b"]}}],
            ["values", {"foo": "b", "bar": ["a", "b"]}],
        ])
    );
    assert_eq!(out["values"], json!({"foo": "b", "bar": ["a", "b"]}));
    assert_eq!(out["next"], json!([]));
    assert!(
        out["checkpoint_id"]
            .as_str()
            .is_some_and(|id| id.len() == 36)
    );
    assert_eq!(out["status"], "idle");
}
