//! `/mcp/`: the official MCP Python client (`mcp`, pinned; `sdk/mcp_flow.py`) connects to a
//! stategraph server with an API key over streamable HTTP, lists one tool per assistant —
//! each with its graph's input schema, a state deriving `JsonSchema` described by its own
//! JSON Schema — and calls them: a run's output comes back as JSON text, a failed run as an
//! error result, an unknown tool as a protocol error; without the key the endpoint is refused.
//!
//! Needs the pinned Python environment (`scripts/python-env.sh`; `scripts/test.sh` runs it).
//! Fails, never skips, without it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use common::seed_server::{chat_graph, run_sdk_script, seed_graph, serve};
use serde_json::{Value as Json, json};
use stategraph::prelude::*;

/// A state that derives `JsonSchema` as well as `State`.
#[derive(State, schemars::JsonSchema, Clone, Debug, Default)]
struct Quiz {
    /// The question asked.
    question: String,
    #[reducer(append)]
    answers: Vec<String>,
}

fn quiz_graph() -> CompiledGraph<Quiz> {
    let mut g = StateGraph::<Quiz>::new();
    g.add_node("answer", |s: std::sync::Arc<Quiz>, _c| async move {
        Ok(QuizUpdate::default().answers([format!("re: {}", s.question)]))
    });
    g.add_edge(START, "answer").add_edge("answer", END);
    g.compile().unwrap()
}

fn boom_graph() -> CompiledGraph<DynState> {
    let mut g = StateGraph::<DynState>::with_schema(Schema::new().last_value("x"));
    g.add_node("fail", |_s, _c| async {
        Err::<stategraph::Map, _>(NodeError::new("negative x"))
    });
    g.add_edge(START, "fail").add_edge("fail", END);
    g.compile().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_client_lists_and_calls_assistants_as_tools() {
    let (base, serving, _dir) = serve(|b| {
        b.graph("seed", seed_graph())
            .graph("chat", chat_graph())
            .graph("quiz", quiz_graph())
            .graph("boom", boom_graph())
            .api_key("mcp-secret")
    })
    .await;
    let out = run_sdk_script("mcp_flow.py", vec![base, "mcp-secret".into()]).await;
    serving.abort();

    assert_eq!(out["server"], "stategraph", "{out:#}");
    let tools = out["tools"].as_object().unwrap();
    let mut names: Vec<&str> = tools.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, ["boom", "chat", "quiz", "seed"], "{out:#}");
    assert_eq!(tools["seed"]["title"], "seed");
    assert_eq!(
        tools["seed"]["description"],
        "Tool based on the seed assistant"
    );
    // A state without a JSON Schema: its channels; `messages` offered as the user's text.
    assert_eq!(
        tools["seed"]["input_schema"],
        json!({"type": "object", "properties": {"foo": {}, "bar": {}}})
    );
    assert_eq!(
        tools["chat"]["input_schema"]["properties"]["messages"]["type"],
        "string"
    );
    // A state deriving JsonSchema: its own schema, field docs included.
    let quiz = &tools["quiz"]["input_schema"];
    assert_eq!(quiz["title"], "Quiz");
    assert_eq!(quiz["properties"]["question"]["type"], "string");
    assert_eq!(
        quiz["properties"]["question"]["description"],
        "The question asked."
    );
    assert_eq!(quiz["properties"]["answers"]["items"]["type"], "string");

    // Calls: the run's output values as JSON text.
    assert_eq!(out["seed"]["is_error"], false);
    let seed: Json = serde_json::from_str(out["seed"]["text"][0].as_str().unwrap()).unwrap();
    assert_eq!(seed, json!({"foo": "b", "bar": ["a", "b"]}));
    let chat: Json = serde_json::from_str(out["chat"]["text"][0].as_str().unwrap()).unwrap();
    let messages = chat["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{chat:#}");
    assert_eq!(messages[0]["type"], "human");
    assert_eq!(messages[0]["content"], "hello");
    assert_eq!(messages[1]["content"], "echo: hello");
    // A failed run is an error result naming the error.
    assert_eq!(out["boom"]["is_error"], true);
    let boom = out["boom"]["text"][0].as_str().unwrap();
    assert!(boom.contains("negative x"), "{boom}");
    // An unknown tool is a JSON-RPC error.
    assert!(
        out["unknown"]
            .as_str()
            .unwrap()
            .contains("Unknown tool: nobody"),
        "{out:#}"
    );
    assert_eq!(out["without_key"], 403);
}
