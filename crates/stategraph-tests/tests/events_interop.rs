//! `astream_events(version="v2")` compared with Python: LangGraph's prebuilt ReAct agent,
//! with LangChain's `ChatOpenAI`, and stategraph's, with its `ChatOpenAi`, both asking the
//! same scripted OpenAI-compatible server about the weather (a tool call, the tool, the
//! answer), streamed with the same metadata and tags. The events must be the same: names,
//! kinds and order; run nesting (`parent_ids`, as positions); tags; LangGraph's metadata;
//! and what each carries (messages by type, text and tool calls; the rest as it is).
//!
//! Needs the pinned Python environment (`scripts/python-env.sh`); fails, never skips,
//! without it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use common::weather_agent::{weather_model, weather_tool};
use futures_util::StreamExt;
use serde_json::{Value as Json, json};
use stategraph::agent::{MessagesUpdate, create_react_agent};
use stategraph::prelude::*;
use stategraph::{InMemorySaver, Message};
use stategraph_testkit::python::{repo_root, run_python_json};

/// The metadata keys compared (the rest are the SDKs' own: `lc_versions`, ...).
const METADATA: [&str; 13] = [
    "m",
    "thread_id",
    "ls_integration",
    "langgraph_step",
    "langgraph_node",
    "langgraph_triggers",
    "langgraph_path",
    "langgraph_checkpoint_ns",
    "checkpoint_ns",
    "ls_provider",
    "ls_model_type",
    "ls_model_name",
    "ls_temperature",
];

/// A message as compared: its type, text and tool calls (ids, response metadata and
/// usage are each side's own).
fn message(m: &serde_json::Map<String, Json>) -> Json {
    let calls = |key: &str| {
        m.get(key)
            .and_then(Json::as_array)
            .map(|calls| {
                calls
                    .iter()
                    .map(|c| json!([c["name"], c["args"]]))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    let kind = m["type"].as_str().unwrap_or_default();
    json!({
        "type": kind.trim_end_matches("Chunk").to_lowercase().replace("aimessage", "ai"),
        "content": m["content"],
        "tool_calls": calls("tool_calls"),
        "tool_call_chunks": calls("tool_call_chunks"),
        "name": m.get("name").cloned().unwrap_or(Json::Null),
        "tool_call_id": m.get("tool_call_id").map(|_| "<id>"),
    })
}

/// Data as compared: messages as [`message`]; a checkpoint namespace's task id and
/// interrupt ids dropped; and `remaining_steps`, which Python's agent state declares as a
/// managed value (stategraph's agent reads it from the node's context instead).
fn data(v: &Json) -> Json {
    match v {
        Json::Object(m) if m.contains_key("type") && m.contains_key("content") => message(m),
        Json::Object(m) => Json::Object(
            m.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "id" | "remaining_steps"))
                .map(|(k, v)| (k.clone(), data(v)))
                .collect(),
        ),
        Json::Array(items) => Json::Array(items.iter().map(data).collect()),
        Json::String(s) if s.contains(':') && s.len() > 36 => {
            Json::String(s.split(':').next().unwrap_or_default().to_owned())
        }
        other => other.clone(),
    }
}

/// The events as compared: run ids and parent ids as the position of the run's first
/// event; metadata restricted to [`METADATA`] (namespaces without task ids).
fn normalized(events: &[Json]) -> Vec<Json> {
    let mut runs: HashMap<String, usize> = HashMap::new();
    events
        .iter()
        .map(|e| {
            let n = runs.len();
            let run = *runs
                .entry(e["run_id"].as_str().unwrap().to_owned())
                .or_insert(n);
            let parents: Vec<Json> = e["parent_ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| json!(runs.get(p.as_str().unwrap())))
                .collect();
            let metadata: serde_json::Map<String, Json> = METADATA
                .iter()
                .filter_map(|k| e["metadata"].get(*k).map(|v| ((*k).to_owned(), data(v))))
                .collect();
            json!({
                "event": e["event"],
                "name": e["name"],
                "run": run,
                "parents": parents,
                "tags": e["tags"],
                "metadata": metadata,
                "data": data(&e["data"]),
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn react_agent_events_equal_pythons_astream_events_v2() {
    let (server, model) = weather_model("", "call_").await;
    let agent = create_react_agent(model, [weather_tool()])
        .checkpointer(Arc::new(InMemorySaver::new()))
        .build()
        .unwrap();
    let mut config = RunConfig::thread("events").with_tags(["mytag"]);
    config.metadata.insert("m".into(), json!(1));
    let question = MessagesUpdate::messages([Message::human("Weather in Paris?").with_id("q1")]);
    let mut stream = agent.stream(question, config, &[StreamMode::Events]);
    let mut ours = Vec::new();
    while let Some(event) = stream.next().await {
        let event = event.unwrap();
        assert_eq!(event.mode(), StreamMode::Events, "{event:?}");
        ours.push(event.to_json());
    }

    let script = repo_root().join("scripts/interop/events.py");
    let theirs = run_python_json([script.as_os_str(), server.base_url().as_ref()], "");
    let theirs = theirs.as_array().unwrap();

    let (ours, theirs) = (normalized(&ours), normalized(theirs));
    common::assert_same_events(&ours, &theirs);
    // The run went as scripted: the tool was called, and the answer streamed.
    let names: Vec<&str> = ours.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert!(names.contains(&"on_tool_end"), "{names:?}");
    assert!(names.contains(&"on_chat_model_stream"), "{names:?}");
}
