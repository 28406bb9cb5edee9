//! `RemoteGraph` on the Rust client of the Agent Server API, driving the reference server
//! (`langgraph dev` serving the scenario's Python graphs) and stategraph's server (serving
//! the same graphs in Rust), the same steps on each, the answers compared: invoke, stream,
//! a thread's state and history, and the remote `chat` graph as a node of a local graph —
//! its interrupt stopping the local run, and the local run's answer going on in the remote
//! thread.
//!
//! Needs the reference server's environment (`scripts/test.sh` sets it up). Fails, never
//! skips, without it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::sync::Arc;

use common::reference::Reference;
use common::seed_server::serve_seed;
use futures_util::StreamExt;
use serde_json::{Value as Json, json};
use stategraph::client::{Client, ClientError, RemoteGraph};
use stategraph::prelude::*;
use stategraph::{Map, Message};

/// The steps, on the server at `url`: what each answered, without ids and times.
async fn scenario(url: &str) -> Json {
    let client = Client::new(url).unwrap();
    let seed = RemoteGraph::new("seed", client.clone());
    let input = json!({"foo": "", "bar": []});

    // Without a thread.
    let invoked = seed.invoke(input.clone(), None).await.unwrap();
    let mut updates = Vec::new();
    let mut events = seed.stream(input.clone(), None, &["updates"]);
    while let Some(part) = events.next().await {
        let part = part.unwrap();
        if part.mode() == "updates" {
            updates.push(part.data);
        }
    }

    // On a thread the run creates.
    let thread = stategraph::uuid4();
    seed.invoke(input, Some(&thread)).await.unwrap();
    let state = seed.get_state(&thread).await.unwrap();
    let history = seed.get_state_history(&thread, 10).await.unwrap();

    // The remote `chat` graph as a node: its interrupt stops the local run; the local
    // run's answer reaches the remote thread (the local thread's id), which goes on.
    let chat = RemoteGraph::new("chat", client.clone());
    let mut local = StateGraph::<DynState>::with_schema(
        Schema::new().reducer("messages", Reducer::add_messages()),
    );
    local.add_node("remote", chat.node::<DynState>());
    local.add_edge(START, "remote").add_edge("remote", END);
    let local = local
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(InMemorySaver::new()));
    let parent = stategraph::uuid4();
    let config = RunConfig::thread(&parent);
    let hi = Message::human("hi").with_id("h1").to_value();
    local
        .invoke_values(
            Map::from_iter([("messages", Value::from(vec![hi]))]),
            config.clone(),
        )
        .await
        .unwrap();
    let stopped = local.get_state(&config).await.unwrap();
    let asked = &stopped.tasks[0].interrupts[0];
    let remote_waits = chat.get_state(&parent).await.unwrap();
    assert_eq!(
        asked.id,
        remote_waits.interrupts()[0].id,
        "the local run stops on the remote interrupt, its id kept"
    );
    local
        .resume(Resume::Value(Value::from("yes")), config.clone())
        .await
        .unwrap();
    let done = local.get_state(&config).await.unwrap();
    let remote_done = chat.get_state(&parent).await.unwrap();
    let texts = |messages: &Json| -> Vec<String> {
        messages
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                format!(
                    "{}: {}",
                    m["type"].as_str().unwrap(),
                    m["content"].as_str().unwrap()
                )
            })
            .collect()
    };
    let local_messages = stategraph::stream::values_json(&done.values)["messages"].clone();

    // A local run streaming its subgraphs' events sees the remote graph's, under the node's
    // namespace (`remote:<task id>`, shown without the id).
    let mut streamed = StateGraph::<DynState>::with_schema(
        Schema::new()
            .last_value("foo")
            .reducer("bar", Reducer::append()),
    );
    streamed.add_node("remote", seed.node::<DynState>());
    streamed.add_edge(START, "remote").add_edge("remote", END);
    let streamed = streamed.compile().unwrap();
    let mut stream = streamed.stream_values(
        Map::from_iter([("foo", value!("")), ("bar", value!([]))]),
        RunConfig::default().with_subgraph_events(),
        &[StreamMode::Updates],
    );
    let mut forwarded = Vec::new();
    while let Some(event) = stream.next().await {
        let event = event.unwrap();
        let ns: Vec<&str> = event
            .namespace()
            .iter()
            .map(|n| n.split(':').next().unwrap())
            .collect();
        forwarded.push(json!([ns, event.to_json()]));
    }

    // A run that fails on the server is a typed error naming it.
    let missing = RemoteGraph::new("no-such-graph", client)
        .invoke(json!({}), None)
        .await
        .unwrap_err();
    let missing = match missing {
        ClientError::Status { status, .. } => json!(status),
        other => json!(other.to_string()),
    };

    json!({
        "invoked": invoked.values,
        "interrupts": invoked.interrupts.len(),
        "updates": updates,
        "state": {"values": state.values, "next": state.next},
        "history": history.len(),
        "asked": asked.value.to_json(),
        "remote_waits": {"next": remote_waits.next, "interrupt": remote_waits.interrupts()[0].value},
        "local_next_after": done.next,
        "local_messages": texts(&local_messages),
        "remote_messages": texts(&remote_done.values["messages"]),
        "remote_next_after": remote_done.next,
        "missing": missing,
        "forwarded": forwarded,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_graph_drives_the_reference_server_and_ours_alike() {
    let reference = tokio::task::spawn_blocking(|| Reference::start(&[]))
        .await
        .unwrap();
    let theirs = scenario(&reference.url()).await;
    drop(reference);

    let (base, serving, _dir) = serve_seed().await;
    let ours = scenario(&base).await;
    serving.abort();

    assert_eq!(ours, theirs, "ours: {ours:#}\n\nreference: {theirs:#}");
    // What both answered, spelled out.
    assert_eq!(ours["invoked"], json!({"foo": "b", "bar": ["a", "b"]}));
    assert_eq!(
        ours["updates"],
        json!([{"node_a": {"foo": "a", "bar": ["a"]}}, {"node_b": {"foo": "b", "bar": ["b"]}}])
    );
    assert_eq!(ours["state"]["next"], json!([]));
    assert_eq!(
        ours["asked"],
        json!({"question": "send?", "draft": "echo: hi"})
    );
    assert_eq!(ours["remote_waits"]["next"], json!(["approve"]));
    assert_eq!(
        ours["local_messages"],
        json!(["human: hi", "ai: echo: hi", "ai: sent"])
    );
    assert_eq!(ours["remote_messages"], ours["local_messages"]);
    assert_eq!(ours["local_next_after"], json!([]));
    assert_eq!(
        ours["forwarded"],
        json!([
            [["remote"], {"node_a": {"foo": "a", "bar": ["a"]}}],
            [["remote"], {"node_b": {"foo": "b", "bar": ["b"]}}],
            [[], {"remote": {"foo": "b", "bar": ["a", "b"]}}],
        ])
    );
}

/// What the reference server's metadata says of its deployment (stategraph's has none of it).
const DEPLOYMENT: [&str; 4] = [
    "langgraph_api_version",
    "langgraph_plan",
    "langgraph_host",
    "langgraph_api_url",
];

/// The `events` stream of a run of `graph` on `input` on the server at `url`: event, name,
/// nesting, tags, metadata (ids as `<id>`) and data, run ids as positions.
async fn events_of(url: &str, graph: &str, input: Json) -> Vec<Json> {
    let client = Client::new(url).unwrap();
    let run = stategraph::client::RunRequest::input(graph, input).stream_modes(["events"]);
    let mut events = client.stream_run(None, &run);
    let mut runs: Vec<String> = Vec::new();
    let mut out = Vec::new();
    while let Some(part) = events.next().await {
        let part = part.unwrap();
        if part.mode() != "events" {
            continue;
        }
        let e = part.data;
        let id = e["run_id"].as_str().unwrap().to_owned();
        if !runs.contains(&id) {
            runs.push(id);
        }
        let parents: Vec<usize> = e["parent_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                runs.iter()
                    .position(|r| Some(r.as_str()) == p.as_str())
                    .unwrap()
            })
            .collect();
        out.push(json!({
            "event": e["event"], "name": e["name"], "parents": parents, "tags": e["tags"],
            "metadata": comparable(&e["metadata"]), "data": e["data"],
        }));
    }
    out
}

/// Metadata as compared: without the reference's deployment keys, ids as `<id>`,
/// namespaces without task ids.
fn comparable(metadata: &Json) -> Json {
    metadata
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| !DEPLOYMENT.contains(&k.as_str()))
        .map(|(k, v)| {
            let v = match k.as_str() {
                "run_id" | "thread_id" => json!("<id>"),
                "langgraph_checkpoint_ns" | "checkpoint_ns" => {
                    json!(v.as_str().unwrap().split(':').next())
                }
                _ => v.clone(),
            };
            (k.clone(), v)
        })
        .collect()
}

/// The `messages-tuple` stream of a run of `graph` on `input` on the server at `url`: each
/// message's type and text, with its metadata as compared.
async fn messages_of(url: &str, graph: &str, input: Json) -> Vec<Json> {
    let client = Client::new(url).unwrap();
    let run = stategraph::client::RunRequest::input(graph, input).stream_modes(["messages-tuple"]);
    let mut events = client.stream_run(None, &run);
    let mut out = Vec::new();
    while let Some(part) = events.next().await {
        let part = part.unwrap();
        if part.mode() == "messages" {
            let (m, metadata) = (&part.data[0], &part.data[1]);
            out.push(json!([m["type"], m["content"], comparable(metadata)]));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_messages_stream_mode_is_the_reference_servers() {
    let input = json!({"messages": [{"type": "human", "content": "hi", "id": "h1"}]});
    let reference = tokio::task::spawn_blocking(|| Reference::start(&[]))
        .await
        .unwrap();
    let theirs = messages_of(&reference.url(), "chat", input.clone()).await;
    drop(reference);
    let (base, serving, _dir) = serve_seed().await;
    let ours = messages_of(&base, "chat", input).await;
    serving.abort();
    common::assert_same_events(&ours, &theirs);
    assert_eq!(ours[0][1], "echo: hi");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_events_stream_mode_is_the_reference_servers() {
    let input = json!({"foo": "", "bar": []});
    let reference = tokio::task::spawn_blocking(|| Reference::start(&[]))
        .await
        .unwrap();
    let theirs = events_of(&reference.url(), "seed", input.clone()).await;
    drop(reference);
    let (base, serving, _dir) = serve_seed().await;
    let ours = events_of(&base, "seed", input).await;
    serving.abort();
    common::assert_same_events(&ours, &theirs);
}
