//! A ReAct agent served over the Agent Server API, driven by LangGraph's own Python client
//! (`langgraph-sdk` 0.4.14): the run stops before the tools, the person inspects the pending
//! call and approves it (the run goes on, its model's tokens streamed as `messages-tuple`
//! events), then rejects the next one by answering for the tool (`update_state` as `tools`),
//! and the answer streams as `messages` events. The model is a loopback chat-completions
//! server answering in OpenAI's wire format (it calls `get_weather` after a question, and
//! repeats the tool's words after the tool).
//!
//! Needs the pinned Python environment (`scripts/python-env.sh`); fails, never skips,
//! without it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use common::seed_server::{run_sdk_script, serve};
use common::weather_agent::{weather_model, weather_tool};
use serde_json::{Value as Json, json};
use stategraph::agent::create_react_agent;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_approves_and_rejects_tool_calls_through_the_python_sdk() {
    let (_model_server, model) = weather_model("The tool says: ", "call_").await;
    let agent = create_react_agent(model, [weather_tool()])
        .interrupt_before(["tools"])
        .build()
        .unwrap();
    let (base, serving, _dir) = serve(|b| b.graph("agent", agent)).await;
    let out: Json = run_sdk_script("agent_approval.py", vec![base]).await;
    serving.abort();

    // Stopped before the tools, the call waiting for a person.
    assert_eq!(out["status"], "interrupted");
    assert_eq!(out["next"], json!(["tools"]));
    assert_eq!(out["pending"][0]["name"], "get_weather");
    assert_eq!(out["pending"][0]["args"], json!({"city": "Paris"}));
    assert_eq!(out["first"]["messages"].as_array().unwrap().len(), 2);

    // Approved: `metadata`, then the tool's message and the answer's tokens as
    // `messages-tuple` events (`messages` with `[message, metadata]`), with `values`.
    let events = out["approved"].as_array().unwrap();
    assert_eq!(events[0]["event"], "metadata");
    let tuples: Vec<&Json> = events
        .iter()
        .filter(|e| e["event"] == "messages")
        .map(|e| &e["data"])
        .collect();
    let tool_message = tuples
        .iter()
        .find(|t| t[0]["type"] == "tool")
        .expect("the tool's message");
    assert_eq!(tool_message[0]["content"], "Sunny in Paris");
    assert_eq!(tool_message[1]["langgraph_node"], "tools");
    let pieces: Vec<&&Json> = tuples
        .iter()
        .filter(|t| t[0]["type"] == "AIMessageChunk")
        .collect();
    assert!(pieces.len() > 3, "token by token: {}", pieces.len());
    let text: String = pieces
        .iter()
        .map(|t| t[0]["content"].as_str().unwrap())
        .collect();
    assert_eq!(text, "The tool says: Sunny in Paris");
    for t in &pieces {
        // The reference's metadata: the run's (graph, assistant, attempt), its configurable
        // run and thread ids, the task's, the model's.
        let m = &t[1];
        assert_eq!(m["langgraph_node"], "agent");
        assert_eq!(m["ls_provider"], "openai");
        assert_eq!(m["graph_id"], "agent");
        assert_eq!(m["run_attempt"], 1);
        assert!(m["run_id"].is_string() && m["thread_id"].is_string(), "{m}");
        assert!(m["assistant_id"].is_string());
    }
    assert!(events.iter().any(|e| e["event"] == "values"));
    let after = out["after_approval"].as_array().unwrap();
    assert_eq!(after.len(), 4);
    assert_eq!(after[3]["content"], "The tool says: Sunny in Paris");
    assert_eq!(out["status_after_approval"], "idle");

    // Rejected: the answer reads the person's words; streamed in `messages` mode as
    // `messages/metadata` then `messages/partial` with the answer so far.
    let events = out["rejected"].as_array().unwrap();
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(names[0], "metadata");
    assert_eq!(names[1], "messages/metadata");
    assert!(
        names[2..].iter().all(|n| *n == "messages/partial"),
        "{names:?}"
    );
    let last = &events.last().unwrap()["data"][0];
    assert_eq!(last["type"], "ai");
    assert_eq!(last["content"], "The tool says: the user declined");
    let final_messages = out["final"].as_array().unwrap();
    let kinds: Vec<&str> = final_messages
        .iter()
        .map(|m| m["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["human", "ai", "tool", "ai", "human", "ai", "tool", "ai"]
    );
    assert_eq!(final_messages[6]["content"], "the user declined");
}
