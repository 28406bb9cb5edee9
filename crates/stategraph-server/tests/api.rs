//! The HTTP API through `Router::oneshot` (no socket): records, status codes, runs in the
//! background, interrupts and resumes, failures as `error` events, invalid bodies.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::{Value as Json, json};
use stategraph_checkpoint::{CheckpointSaver, InMemorySaver, ListOptions, Map, value};
use stategraph_graph::{DynState, END, IoSchema, NodeError, Reducer, START, Schema, StateGraph};
use stategraph_server::{NAMESPACE_ROOT, Server};
use stategraph_store::{InMemoryStore, Store};
use tower::ServiceExt;

mod common;
use common::{call, json_call};

fn server() -> (Router, Arc<InMemoryStore>) {
    let (server, store) = build();
    (server.router(), store)
}

fn build() -> (Server, Arc<InMemoryStore>) {
    let schema = || {
        Schema::new()
            .last_value("foo")
            .reducer("bar", Reducer::append())
    };
    let mut seed = StateGraph::<DynState>::with_schema(schema());
    seed.add_node("node_a", |_s, _c| async {
        Ok(Map::from_iter([
            ("foo", value!("a")),
            ("bar", value!(["a"])),
        ]))
    });
    seed.add_node("node_b", |_s, _c| async {
        Ok(Map::from_iter([
            ("foo", value!("b")),
            ("bar", value!(["b"])),
        ]))
    });
    seed.add_edge(START, "node_a")
        .add_edge("node_a", "node_b")
        .add_edge("node_b", END);

    let mut ask = StateGraph::<DynState>::with_schema(schema());
    ask.add_node("ask", |_s, ctx| async move {
        let answer = ctx.interrupt(value!("name?"))?;
        Ok(Map::from_iter([("foo", answer)]))
    });
    ask.add_edge(START, "ask").add_edge("ask", END);

    let mut boom = StateGraph::<DynState>::with_schema(schema());
    boom.add_node("fail", |_s, _c| async {
        Err::<Map, _>(NodeError::new("boom"))
    });
    boom.add_edge(START, "fail").add_edge("fail", END);

    let mut slow = StateGraph::<DynState>::with_schema(schema());
    slow.add_node("wait", |_s, _c| async {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        Ok(Map::from_iter([("bar", value!(["slow"]))]))
    });
    slow.add_edge(START, "wait").add_edge("wait", END);

    let mut hold = StateGraph::<DynState>::with_schema(schema());
    hold.add_node("first", |_s, _c| async {
        Ok(Map::from_iter([("bar", value!(["first"]))]))
    });
    hold.add_node("long", |_s, _c| async {
        tokio::time::sleep(std::time::Duration::from_secs(60)).await;
        Ok(Map::from_iter([("bar", value!(["long"]))]))
    });
    hold.add_edge(START, "first")
        .add_edge("first", "long")
        .add_edge("long", END);

    let store = Arc::new(InMemoryStore::new());
    let server = Server::builder()
        .graph("seed", seed.compile().unwrap())
        .graph("ask", ask.compile().unwrap())
        .graph("boom", boom.compile().unwrap())
        .graph("slow", slow.compile().unwrap())
        .graph("hold", hold.compile().unwrap())
        .checkpointer(Arc::new(InMemorySaver::new()))
        .store(store.clone())
        .build()
        .unwrap();
    (server, store)
}

/// The id of graph `graph`'s default assistant (LangGraph's `uuid5(NAMESPACE_GRAPH, graph)`).
fn assistant_of(graph: &str) -> String {
    let namespace = uuid::Uuid::from_u128(0x6ba7b821_9dad_11d1_80b4_00c04fd430c8);
    uuid::Uuid::new_v5(&namespace, graph.as_bytes()).to_string()
}

/// A UUID no record has.
const UNKNOWN: &str = "3f1c0a52-9a0e-4b6e-8d3c-2f5a1b7c9d09";

async fn new_thread(app: &Router) -> String {
    let (_, t) = json_call(app, Method::POST, "/threads", Some(json!({}))).await;
    t["thread_id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn records_live_in_the_store_and_unknowns_are_404() {
    const T1: &str = "1ef7a6d0-0000-6000-8000-0000000000a1";
    let (app, store) = server();
    let (status, body) = json_call(&app, Method::GET, "/ok", None).await;
    assert_eq!((status, body), (StatusCode::OK, json!({"ok": true})));

    let (status, list) = json_call(
        &app,
        Method::POST,
        "/assistants/search",
        Some(json!({"graph_id": "ask"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list.as_array().unwrap().len(), 1);
    let uri = format!("/assistants/{}", assistant_of("ask"));
    let (status, ask) = json_call(&app, Method::GET, &uri, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ask["assistant_id"], list[0]["assistant_id"]);

    // Path ids are UUIDs (a graph's name only on `/graph`), as LangGraph's server has them.
    for (uri, what) in [
        ("/assistants/ask".to_owned(), "assistant"),
        ("/threads/nope/state".to_owned(), "thread"),
        (format!("/threads/{UNKNOWN}/runs/r1"), "run"),
    ] {
        let (status, body) = json_call(&app, Method::GET, &uri, None).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{uri}");
        let detail = format!("Invalid {what} ID: must be a UUID");
        assert_eq!(body, json!({ "detail": detail }), "{uri}");
    }
    let (status, _) = json_call(&app, Method::GET, "/assistants/ask/graph", None).await;
    assert_eq!(status, StatusCode::OK);
    for uri in [
        format!("/assistants/{UNKNOWN}"),
        format!("/threads/{UNKNOWN}/state"),
        format!("/threads/{UNKNOWN}/runs/{UNKNOWN}"),
    ] {
        let (status, body) = json_call(&app, Method::GET, &uri, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{uri}");
        assert!(body["detail"].is_string());
    }

    let (status, t) = json_call(
        &app,
        Method::POST,
        "/threads",
        Some(json!({"thread_id": "not-a-uuid"})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(t["detail"], "Invalid thread ID: must be a UUID");
    let (status, t) = json_call(
        &app,
        Method::POST,
        "/threads",
        Some(json!({"thread_id": T1.to_uppercase(), "metadata": {"k": "v"}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(t["status"], "idle");
    assert_eq!(t["thread_id"], T1, "ids are kept in their canonical form");
    let (status, _) = json_call(
        &app,
        Method::POST,
        "/threads",
        Some(json!({ "thread_id": T1 })),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, same) = json_call(
        &app,
        Method::POST,
        "/threads",
        Some(json!({"thread_id": T1, "if_exists": "do_nothing"})),
    )
    .await;
    assert_eq!(
        (status, same["metadata"].clone()),
        (StatusCode::OK, json!({"k": "v"}))
    );
    let item = store.get(&[NAMESPACE_ROOT, "threads"], T1).await.unwrap();
    assert!(item.is_some(), "the thread is a store document");

    let (status, patched) = json_call(
        &app,
        Method::PATCH,
        &format!("/threads/{T1}"),
        Some(json!({"metadata": {"x": 1}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(patched["metadata"], json!({"k": "v", "x": 1}));
    let (status, _) = call(&app, Method::DELETE, &format!("/threads/{T1}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = json_call(&app, Method::GET, &format!("/threads/{T1}"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn invalid_bodies_are_422() {
    let (app, _) = server();
    let thread = new_thread(&app).await;
    let uri = format!("/threads/{thread}/runs/wait");
    let (status, _) = call(&app, Method::POST, &uri, None).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "no assistant_id");
    let (status, _) = call(
        &app,
        Method::POST,
        "/threads/search",
        Some(json!({"limit": "x"})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let body = json!({"assistant_id": "seed", "input": [1]});
    let (status, _) = call(&app, Method::POST, &uri, Some(body)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let body = json!({"assistant_id": "seed", "input": {}, "stream_mode": "nope"});
    let (status, _) = call(&app, Method::POST, &uri, Some(body)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let state_uri = format!("/threads/{thread}/state");
    let body = json!({"values": {"nope": 1}, "as_node": "node_a"});
    let (status, _) = call(&app, Method::POST, &state_uri, Some(body)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, _) = call(&app, Method::POST, "/threads", Some(json!("not an object"))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
}

/// The steps of a history answer's states, in its order.
fn steps_of(states: &Json) -> Vec<Json> {
    states
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["metadata"]["step"].clone())
        .collect()
}

#[tokio::test]
async fn background_run_then_join_and_history_paging() {
    let (app, _) = server();
    let thread = new_thread(&app).await;
    let body = json!({"assistant_id": "seed", "input": {"foo": "", "bar": []}});
    let (status, run) = json_call(
        &app,
        Method::POST,
        &format!("/threads/{thread}/runs"),
        Some(body),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let run_id = run["run_id"].as_str().unwrap();
    let (status, joined) = json_call(
        &app,
        Method::GET,
        &format!("/threads/{thread}/runs/{run_id}/join"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(joined, json!({"foo": "b", "bar": ["a", "b"]}));
    let (_, run) = json_call(
        &app,
        Method::GET,
        &format!("/threads/{thread}/runs/{run_id}"),
        None,
    )
    .await;
    assert_eq!(run["status"], "success");

    let uri = format!("/threads/{thread}/history");
    let (_, page) = json_call(&app, Method::POST, &uri, Some(json!({"limit": 2}))).await;
    let page = page.as_array().unwrap();
    assert_eq!(page.len(), 2);
    assert_eq!(page[0]["metadata"]["step"], 2);
    let before = page[1]["checkpoint"].clone();
    let (_, rest) = json_call(
        &app,
        Method::POST,
        &uri,
        Some(json!({"before": before, "limit": 10})),
    )
    .await;
    assert_eq!(steps_of(&rest), [json!(0), json!(-1)]);

    // The reference's query-string form: `limit` defaults to 1, `before` pages.
    let (status, newest) = json_call(&app, Method::GET, &uri, None).await;
    assert_eq!(status, StatusCode::OK, "{newest}");
    let newest = newest.as_array().unwrap();
    assert_eq!(newest.len(), 1);
    assert_eq!(newest[0], page[0]);
    let (_, two) = json_call(&app, Method::GET, &format!("{uri}?limit=2"), None).await;
    assert_eq!(two.as_array().unwrap(), page);
    let before_id = page[1]["checkpoint"]["checkpoint_id"].as_str().unwrap();
    let (_, rest) = json_call(
        &app,
        Method::GET,
        &format!("{uri}?limit=10&before={before_id}"),
        None,
    )
    .await;
    assert_eq!(steps_of(&rest), [json!(0), json!(-1)]);
    let (status, error) = json_call(&app, Method::GET, &format!("{uri}?limit=ten"), None).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(error["detail"], "Invalid limit ten");
}

#[tokio::test]
async fn interrupts_leave_the_thread_interrupted_until_resumed() {
    let (app, _) = server();
    let thread = new_thread(&app).await;
    let uri = format!("/threads/{thread}/runs/wait");
    let body = json!({"assistant_id": "ask", "input": {"foo": ""}});
    let (status, out) = json_call(&app, Method::POST, &uri, Some(body)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(out["__interrupt__"][0]["value"], "name?");
    let (_, t) = json_call(&app, Method::GET, &format!("/threads/{thread}"), None).await;
    assert_eq!(t["status"], "interrupted");
    assert_eq!(t["interrupts"].as_object().unwrap().len(), 1);

    let body = json!({"assistant_id": "ask", "command": {"resume": "Ada"}});
    let (_, out) = json_call(&app, Method::POST, &uri, Some(body)).await;
    assert_eq!(out, json!({"foo": "Ada", "bar": []}));
    let (_, t) = json_call(&app, Method::GET, &format!("/threads/{thread}"), None).await;
    assert_eq!(t["status"], "idle");

    // A breakpoint: the run stops before node_b; a run without input carries on.
    let thread = new_thread(&app).await;
    let uri = format!("/threads/{thread}/runs/wait");
    let body = json!({"assistant_id": "seed", "input": {"foo": "", "bar": []},
                      "interrupt_before": ["node_b"]});
    let (_, out) = json_call(&app, Method::POST, &uri, Some(body)).await;
    assert_eq!(out, json!({"foo": "a", "bar": ["a"]}));
    let (_, state) = json_call(&app, Method::GET, &format!("/threads/{thread}/state"), None).await;
    assert_eq!(state["next"], json!(["node_b"]));
    let (_, out) = json_call(
        &app,
        Method::POST,
        &uri,
        Some(json!({"assistant_id": "seed"})),
    )
    .await;
    assert_eq!(out, json!({"foo": "b", "bar": ["a", "b"]}));
}

#[tokio::test]
async fn commands_update_route_send_and_answer() {
    let (app, _) = server();
    let thread = new_thread(&app).await;
    let uri = format!("/threads/{thread}/runs/wait");
    let body = json!({"assistant_id": "seed", "input": {"foo": "", "bar": []}});
    json_call(&app, Method::POST, &uri, Some(body)).await;
    // `update` as a map and `goto` a node: node_b runs again after the update.
    let body = json!({"assistant_id": "seed",
                      "command": {"update": {"bar": ["u"]}, "goto": "node_b"}});
    let (status, out) = json_call(&app, Method::POST, &uri, Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out, json!({"foo": "b", "bar": ["a", "b", "u", "b"]}));
    // `update` as [key, value] pairs and a Send with its own input.
    let body = json!({"assistant_id": "seed",
                      "command": {"update": [["foo", "pairs"]],
                                  "goto": [{"node": "node_a", "input": {"foo": "sent"}}]}});
    let (_, out) = json_call(&app, Method::POST, &uri, Some(body)).await;
    assert_eq!(out["bar"], json!(["a", "b", "u", "b", "a", "b"]));
    // resume and update together.
    let asked = new_thread(&app).await;
    let uri = format!("/threads/{asked}/runs/wait");
    let ask = json!({"assistant_id": "ask", "input": {"foo": ""}});
    json_call(&app, Method::POST, &uri, Some(ask.clone())).await;
    let body =
        json!({"assistant_id": "ask", "command": {"resume": "Ada", "update": {"bar": ["x"]}}});
    let (_, out) = json_call(&app, Method::POST, &uri, Some(body)).await;
    assert_eq!(out, json!({"foo": "Ada", "bar": ["x"]}));
    // Resume by interrupt id.
    json_call(&app, Method::POST, &uri, Some(ask)).await;
    let (_, t) = json_call(&app, Method::GET, &format!("/threads/{asked}"), None).await;
    let id = t["interrupts"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let body = json!({"assistant_id": "ask", "command": {"resume": {id: "Bo"}}});
    let (_, out) = json_call(&app, Method::POST, &uri, Some(body)).await;
    assert_eq!(out["foo"], "Bo");
    // Bad commands: named field and reason; nothing runs.
    for (command, says) in [
        (json!({"goto": "nowhere"}), "`nowhere` is not a node"),
        (json!({"update": {"nope": 1}}), "nope"),
        (json!({"update": [["foo"]]}), "command.update[0]"),
        (json!({"resume": "x", "bogus": 1}), "command.bogus"),
        (json!({"goto": [{"input": {}}]}), "command.goto[0]"),
    ] {
        let body = json!({"assistant_id": "seed", "command": command});
        let (status, body) = call(
            &app,
            Method::POST,
            &format!("/threads/{thread}/runs/wait"),
            Some(body),
        )
        .await;
        assert!(body.contains(says), "{command}: {status} {body}");
    }
}

#[tokio::test]
async fn failures_stream_an_error_event_and_mark_the_thread() {
    let (app, _) = server();
    let thread = new_thread(&app).await;
    let body = json!({"assistant_id": "boom", "input": {"foo": ""}, "stream_mode": "updates"});
    let (status, text) = call(
        &app,
        Method::POST,
        &format!("/threads/{thread}/runs/stream"),
        Some(body),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(text.starts_with("event: metadata\ndata: {"), "{text}");
    assert!(text.contains("event: error\ndata: {\"error\":"), "{text}");
    let (_, t) = json_call(&app, Method::GET, &format!("/threads/{thread}"), None).await;
    assert_eq!(t["status"], "error");

    let body = json!({"assistant_id": "boom", "input": {"foo": ""}});
    let (status, out) = json_call(&app, Method::POST, "/runs/wait", Some(body)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        out["__error__"]["message"]
            .as_str()
            .unwrap()
            .contains("boom")
    );
}

#[tokio::test]
async fn the_store_api_hides_the_servers_records() {
    let (app, _) = server();
    new_thread(&app).await;
    let put = json!({"namespace": ["docs"], "key": "a", "value": {"n": 1}});
    let (status, _) = call(&app, Method::PUT, "/store/items", Some(put)).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, item) =
        json_call(&app, Method::GET, "/store/items?namespace=docs&key=a", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(item["value"], json!({"n": 1}));

    let (_, all) = json_call(&app, Method::POST, "/store/items/search", Some(json!({}))).await;
    assert_eq!(all["items"].as_array().unwrap().len(), 1);
    let (_, ns) = json_call(&app, Method::POST, "/store/namespaces", Some(json!({}))).await;
    assert_eq!(ns["namespaces"], json!([["docs"]]));

    let reserved = json!({"namespace": [NAMESPACE_ROOT, "threads"], "key": "x", "value": {}});
    let (status, _) = call(&app, Method::PUT, "/store/items", Some(reserved)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let uri = format!("/store/items?namespace={NAMESPACE_ROOT}.threads&key=x");
    let (status, _) = call(&app, Method::GET, &uri, None).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let bad = json!({"namespace": ["a.b"], "key": "x", "value": {}});
    let (status, _) = call(&app, Method::PUT, "/store/items", Some(bad)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
}

#[tokio::test]
async fn runs_on_unknown_threads_are_404_unless_created() {
    let (app, _) = server();
    let ghost = format!("/threads/{UNKNOWN}");
    let body = json!({"assistant_id": "seed", "input": {"foo": "", "bar": []}});
    // As LangGraph's server: a thread id that is not a UUID, an assistant that is neither a
    // graph nor a UUID (422, naming the graphs), an assistant UUID nobody has (404).
    let (status, out) = json_call(
        &app,
        Method::POST,
        "/threads/ghost/runs/wait",
        Some(body.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(out["detail"], "Invalid thread ID");
    let wait = format!("{ghost}/runs/wait");
    let (status, out) = json_call(
        &app,
        Method::POST,
        &wait,
        Some(json!({"assistant_id": "nope", "if_not_exists": "create"})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let detail = out["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("Invalid assistant: 'nope'. Must be either:")
            && detail.ends_with("- One of the registered graphs: ask, boom, hold, seed, slow"),
        "{detail}"
    );
    let (status, out) = json_call(
        &app,
        Method::POST,
        &wait,
        Some(json!({"assistant_id": UNKNOWN, "if_not_exists": "create"})),
    )
    .await;
    assert_eq!(
        (status, out),
        (
            StatusCode::NOT_FOUND,
            json!({"detail": "Thread or assistant not found."})
        )
    );
    let (status, _) = json_call(&app, Method::POST, &wait, Some(body.clone())).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let mut create = body.clone();
    create["if_not_exists"] = json!("create");
    let (status, out) = json_call(&app, Method::POST, &wait, Some(create)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(out, json!({"foo": "b", "bar": ["a", "b"]}));
    let (_, t) = json_call(&app, Method::GET, &ghost, None).await;
    assert_eq!(t["metadata"]["graph_id"], "seed");
    assert_eq!(t["values"], out);

    let (status, text) = call(&app, Method::POST, "/runs/stream", Some(body)).await;
    assert_eq!(status, StatusCode::OK);
    let events: Vec<_> = text
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(events, ["metadata", "values", "values", "values"]);
}

#[tokio::test]
async fn a_thread_an_earlier_version_left_reads_as_it_was_and_unknown_paths_are_json_404() {
    let (server, store) = build();
    const OLD: &str = "1ef7a6d0-0000-6000-8000-0000000000b1";
    // An earlier version kept the thread's state in its document: here `busy`, as a process
    // that died mid-run left it.
    let thread = json!({"thread_id": OLD, "status": "busy", "metadata": {},
                        "values": {"foo": "x", "bar": ["x"]}, "interrupts": {}, "error": null,
                        "created_at": "2020-01-01T00:00:00+00:00",
                        "updated_at": "2020-01-01T00:00:00+00:00"});
    store
        .put(&[NAMESPACE_ROOT, "threads"], OLD, thread)
        .await
        .unwrap();
    server.start().await.unwrap();
    let app = server.router();
    let (_, t) = json_call(&app, Method::GET, &format!("/threads/{OLD}"), None).await;
    assert_eq!(t["status"], "idle", "no run of it is in the queue");
    assert_eq!(t["values"], json!({"foo": "x", "bar": ["x"]}));
    let (_, found) = json_call(
        &app,
        Method::POST,
        "/threads/search",
        Some(json!({"values": {"foo": "x"}})),
    )
    .await;
    assert_eq!(found.as_array().map(Vec::len), Some(1), "{found}");

    let (status, body) = json_call(&app, Method::GET, "/nowhere", None).await;
    assert_eq!(
        (status, body),
        (StatusCode::NOT_FOUND, json!({"detail": "Not Found"}))
    );
    let (status, body) = json_call(
        &app,
        Method::GET,
        &format!("/threads/{OLD}/runs?limit=x"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(body["detail"].is_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_on_a_busy_thread_queue_by_default_and_reject_on_request() {
    let (app, _) = server();
    let thread = new_thread(&app).await;
    let runs = format!("/threads/{thread}/runs");
    let body = json!({"assistant_id": "slow", "input": {"bar": []}, "metadata": {"n": 1}});
    let (status, first) = json_call(&app, Method::POST, &runs, Some(body)).await;
    assert_eq!(status, StatusCode::OK);
    // Created `pending`, with the reference's defaults.
    assert_eq!(first["status"], "pending");
    assert_eq!(first["multitask_strategy"], "enqueue");
    assert_eq!(first["langsmith_session_name"], Json::Null);
    assert_eq!(first["metadata"]["n"], 1);
    assert_eq!(first["metadata"]["graph_id"], "slow");
    assert_eq!(first["metadata"]["created_by"], "system");
    assert_eq!(first["kwargs"]["durability"], "async");
    assert_eq!(
        first["kwargs"]["config"]["configurable"]["thread_id"],
        thread
    );
    let (_, t) = json_call(&app, Method::GET, &format!("/threads/{thread}"), None).await;
    assert_eq!(t["status"], "busy");

    // `reject` fails while the thread is busy.
    let reject = json!({"assistant_id": "slow", "multitask_strategy": "reject"});
    let (status, _) = json_call(&app, Method::POST, &runs, Some(reject)).await;
    assert_eq!(status, StatusCode::CONFLICT);

    // The default waits for the first run, then runs on its state.
    let (status, second) = json_call(
        &app,
        Method::POST,
        &format!("{runs}/wait"),
        Some(json!({"assistant_id": "slow", "input": {"bar": []}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(second["bar"], json!(["slow", "slow"]));
    let first_id = first["run_id"].as_str().unwrap();
    let (_, first) = json_call(&app, Method::GET, &format!("{runs}/{first_id}"), None).await;
    assert_eq!(first["status"], "success");
    let (_, all) = json_call(&app, Method::GET, &runs, None).await;
    let statuses: Vec<_> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].clone())
        .collect();
    assert_eq!(statuses, [json!("success"), json!("success")]);
    let (_, t) = json_call(&app, Method::GET, &format!("/threads/{thread}"), None).await;
    assert_eq!(t["status"], "idle");
    assert_eq!(t["config"], json!({"configurable": {}}));
    assert_eq!(t["error"], Json::Null);
}

/// Waits until `thread`'s checkpoint says node `long` of the `hold` graph runs next.
async fn until_long_runs(app: &Router, thread: &str) {
    for _ in 0..200 {
        let (_, state) =
            json_call(app, Method::GET, &format!("/threads/{thread}/state"), None).await;
        if state["next"] == json!(["long"]) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the run never reached node `long`");
}

async fn history_len(app: &Router, thread: &str) -> usize {
    let (_, h) = json_call(
        app,
        Method::POST,
        &format!("/threads/{thread}/history"),
        Some(json!({"limit": 100})),
    )
    .await;
    h.as_array().unwrap().len()
}

#[tokio::test]
async fn cancel_interrupts_or_rolls_back_a_running_run() {
    let (app, _) = server();
    let thread = new_thread(&app).await;
    let runs = format!("/threads/{thread}/runs");
    let hold = json!({"assistant_id": "hold", "input": {"bar": []}});

    // interrupt: the run stops in node `long`; what it checkpointed stays.
    let (_, run) = json_call(&app, Method::POST, &runs, Some(hold.clone())).await;
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    until_long_runs(&app, &thread).await;
    let (status, body) = call(
        &app,
        Method::POST,
        &format!("{runs}/{run_id}/cancel?wait=0&action=interrupt"),
        None,
    )
    .await;
    assert_eq!((status, body.as_str()), (StatusCode::ACCEPTED, ""));
    let (_, run) = json_call(&app, Method::GET, &format!("{runs}/{run_id}"), None).await;
    assert_eq!(run["status"], "interrupted");
    let (_, t) = json_call(&app, Method::GET, &format!("/threads/{thread}"), None).await;
    assert_eq!(t["status"], "interrupted");
    assert_eq!(t["values"], json!({"bar": ["first"]}));
    assert_eq!(t["error"]["error"], "UserInterrupt");
    let kept = history_len(&app, &thread).await;
    assert!(kept >= 2, "{kept}");

    // Finished, unknown and malformed runs.
    let (status, body) =
        json_call(&app, Method::POST, &format!("{runs}/{run_id}/cancel"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .starts_with("No matching runs to cancel.")
    );
    let unknown = "1ef00000-0000-6000-8000-000000000000";
    let (status, body) = json_call(
        &app,
        Method::POST,
        &format!("{runs}/{unknown}/cancel"),
        None,
    )
    .await;
    assert_eq!(
        (status, body),
        (
            StatusCode::NOT_FOUND,
            json!({"detail": "No runs found to cancel."})
        )
    );
    let (status, body) = json_call(&app, Method::POST, &format!("{runs}/nope/cancel"), None).await;
    assert_eq!(
        (status, body),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({"detail": "Invalid run ID: must be a UUID"})
        )
    );

    // rollback (waited): the run and its checkpoints go; the thread is back where it was.
    let (_, run) = json_call(
        &app,
        Method::POST,
        &runs,
        Some(json!({"assistant_id": "hold", "input": {"bar": ["x"]}})),
    )
    .await;
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    for _ in 0..200 {
        if history_len(&app, &thread).await > kept + 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let (status, values) = json_call(
        &app,
        Method::POST,
        &format!("{runs}/{run_id}/cancel?wait=1&action=rollback"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    // What the run sent after the cancel: nothing (LangGraph's server answers the same).
    assert_eq!(values, json!({}));
    let (status, _) = json_call(&app, Method::GET, &format!("{runs}/{run_id}"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(history_len(&app, &thread).await, kept);
    let (_, state) = json_call(&app, Method::GET, &format!("/threads/{thread}/state"), None).await;
    assert_eq!(state["values"], json!({"bar": ["first"]}));
    assert_eq!(state["next"], json!(["long"]));
    let (_, t) = json_call(&app, Method::GET, &format!("/threads/{thread}"), None).await;
    assert_eq!(t["status"], "interrupted");
    assert_eq!(t["error"]["error"], "UserRollback");
    let (_, all) = json_call(&app, Method::GET, &runs, None).await;
    assert_eq!(all.as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn cancel_a_pending_run_and_stream_ends_when_cancelled() {
    let (app, _) = server();
    let thread = new_thread(&app).await;
    let runs = format!("/threads/{thread}/runs");
    let hold = json!({"assistant_id": "hold", "input": {"bar": []}});
    let (_, first) = json_call(&app, Method::POST, &runs, Some(hold.clone())).await;
    let (_, second) = json_call(&app, Method::POST, &runs, Some(hold.clone())).await;
    let (_, third) = json_call(&app, Method::POST, &runs, Some(hold.clone())).await;
    until_long_runs(&app, &thread).await;
    let second_id = second["run_id"].as_str().unwrap();
    let third_id = third["run_id"].as_str().unwrap();
    let (_, r) = json_call(&app, Method::GET, &format!("{runs}/{second_id}"), None).await;
    assert_eq!(r["status"], "pending");
    let (status, _) = call(
        &app,
        Method::POST,
        &format!("{runs}/{second_id}/cancel"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (_, r) = json_call(&app, Method::GET, &format!("{runs}/{second_id}"), None).await;
    assert_eq!(r["status"], "interrupted");
    let uri = format!("{runs}/{third_id}/cancel?action=rollback");
    let (status, _) = call(&app, Method::POST, &uri, None).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (status, _) = json_call(&app, Method::GET, &format!("{runs}/{third_id}"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, t) = json_call(&app, Method::GET, &format!("/threads/{thread}"), None).await;
    assert_eq!(t["status"], "busy");

    let first_id = first["run_id"].as_str().unwrap();
    let (status, _) = call(
        &app,
        Method::POST,
        &format!("{runs}/{first_id}/cancel"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (_, t) = json_call(&app, Method::GET, &format!("/threads/{thread}"), None).await;
    assert_eq!(t["status"], "interrupted");

    // A stream of a cancelled run ends, without an error event.
    let canceller = {
        let app = app.clone();
        let runs = runs.clone();
        tokio::spawn(async move {
            loop {
                let (_, all) =
                    json_call(&app, Method::GET, &format!("{runs}?status=running"), None).await;
                if let Some(run) = all.as_array().unwrap().first() {
                    let id = run["run_id"].as_str().unwrap();
                    let (status, _) =
                        call(&app, Method::POST, &format!("{runs}/{id}/cancel"), None).await;
                    assert_eq!(status, StatusCode::ACCEPTED);
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        })
    };
    let (_, stream) = call(&app, Method::POST, &format!("{runs}/stream"), Some(hold)).await;
    canceller.await.unwrap();
    assert!(stream.contains("event: metadata"), "{stream}");
    assert!(!stream.contains("event: error"), "{stream}");
}

#[tokio::test]
async fn multitask_interrupt_and_rollback_cancel_the_run_in_flight() {
    let (app, _) = server();
    for strategy in ["interrupt", "rollback"] {
        let thread = new_thread(&app).await;
        let runs = format!("/threads/{thread}/runs");
        let (_, first) = json_call(
            &app,
            Method::POST,
            &runs,
            Some(json!({"assistant_id": "hold", "input": {"bar": []}})),
        )
        .await;
        until_long_runs(&app, &thread).await;
        let (status, second) = json_call(
            &app,
            Method::POST,
            &format!("{runs}/wait"),
            Some(json!({"assistant_id": "seed", "input": {"bar": ["s"]}, "multitask_strategy": strategy})),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{strategy}");
        let first_id = first["run_id"].as_str().unwrap();
        let (status, first) =
            json_call(&app, Method::GET, &format!("{runs}/{first_id}"), None).await;
        if strategy == "interrupt" {
            // The first run's checkpoints stay: the new input joins its state.
            assert_eq!(first["status"], "interrupted");
            assert_eq!(second["bar"], json!(["first", "s", "a", "b"]));
        } else {
            assert_eq!(status, StatusCode::NOT_FOUND);
            assert_eq!(second["bar"], json!(["s", "a", "b"]));
        }
        let (_, t) = json_call(&app, Method::GET, &format!("/threads/{thread}"), None).await;
        assert_eq!(t["status"], "idle");
        assert_eq!(t["error"], Json::Null);
    }
}

async fn raw(app: &Router, req: Request<Body>) -> axum::response::Response {
    app.clone().oneshot(req).await.unwrap()
}

#[tokio::test]
async fn cors_allows_any_origin_by_default_or_the_configured_ones() {
    let (app, _) = server();
    let preflight = |origin: &str| {
        Request::builder()
            .method(Method::OPTIONS)
            .uri("/threads")
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type,x-api-key")
            .body(Body::empty())
            .unwrap()
    };
    let res = raw(&app, preflight("http://example.com")).await;
    assert_eq!(res.status(), StatusCode::OK);
    let h = res.headers();
    assert_eq!(h["access-control-allow-origin"], "*");
    assert_eq!(h["access-control-allow-headers"], "content-type,x-api-key");
    assert!(
        h["access-control-allow-methods"]
            .to_str()
            .unwrap()
            .contains("PATCH")
    );
    assert_eq!(h["access-control-max-age"], "600");
    let req = Request::builder()
        .uri("/ok")
        .header("origin", "http://example.com")
        .body(Body::empty())
        .unwrap();
    let res = raw(&app, req).await;
    assert_eq!(res.headers()["access-control-allow-origin"], "*");
    assert!(
        res.headers()["access-control-expose-headers"]
            .to_str()
            .unwrap()
            .contains("content-location")
    );

    let mut graph = StateGraph::<DynState>::with_schema(Schema::new().last_value("foo"));
    graph.add_node("n", |_s, _c| async { Ok(Map::new()) });
    graph.add_edge(START, "n").add_edge("n", END);
    let app = Server::builder()
        .graph("g", graph.compile().unwrap())
        .checkpointer(Arc::new(InMemorySaver::new()))
        .cors(["https://app.example.com"])
        .build()
        .unwrap()
        .router();
    let res = raw(&app, preflight("https://app.example.com")).await;
    assert_eq!(
        res.headers()["access-control-allow-origin"],
        "https://app.example.com"
    );
    assert_eq!(res.headers()["access-control-allow-credentials"], "true");
    let res = raw(&app, preflight("https://evil.example.com")).await;
    assert!(res.headers().get("access-control-allow-origin").is_none());
}

#[tokio::test]
async fn an_api_key_guards_every_route_but_the_meta_ones() {
    let mut graph = StateGraph::<DynState>::with_schema(Schema::new().last_value("foo"));
    graph.add_node("n", |_s, _c| async {
        Ok(Map::from_iter([("foo", value!("n"))]))
    });
    graph.add_edge(START, "n").add_edge("n", END);
    let app = Server::builder()
        .graph("g", graph.compile().unwrap())
        .checkpointer(Arc::new(InMemorySaver::new()))
        .api_key("s3cret")
        .build()
        .unwrap()
        .router();
    let req = |uri: &str, key: Option<&str>| {
        let mut b = Request::builder()
            .method(Method::POST)
            .uri(uri)
            .header("content-type", "application/json");
        if let Some(k) = key {
            b = b.header("x-api-key", k);
        }
        b.body(Body::from("{}")).unwrap()
    };
    let body = |res: axum::response::Response| async move {
        let bytes = axum::body::to_bytes(res.into_body(), usize::MAX)
            .await
            .unwrap();
        serde_json::from_slice::<Json>(&bytes).unwrap()
    };
    let res = raw(&app, req("/threads", None)).await;
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        body(res).await,
        json!({"detail": "Missing authentication headers"})
    );
    let res = raw(&app, req("/threads", Some("wrong"))).await;
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    assert!(body(res).await["detail"].is_string());
    let res = raw(&app, req("/threads", Some("s3cret"))).await;
    assert_eq!(res.status(), StatusCode::OK);
    let thread = body(res).await["thread_id"].as_str().unwrap().to_owned();
    let res = raw(
        &app,
        req(&format!("/threads/{thread}/runs/wait"), Some("s3cret")),
    )
    .await;
    // The body lacks an assistant: past the key check, the request itself is refused.
    assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY);
    for open in ["/ok", "/info"] {
        let res = raw(
            &app,
            Request::builder().uri(open).body(Body::empty()).unwrap(),
        )
        .await;
        assert_eq!(res.status(), StatusCode::OK, "{open}");
    }
    // Preflight requests carry no key; CORS answers them first.
    let res = raw(
        &app,
        Request::builder()
            .method(Method::OPTIONS)
            .uri("/threads")
            .header("origin", "http://example.com")
            .header("access-control-request-method", "POST")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(res.status(), StatusCode::OK);
}

#[tokio::test]
async fn assistants_are_created_found_used_and_deleted() {
    let (app, store) = server();
    let id = "3f1c0a52-9a0e-4b6e-8d3c-2f5a1b7c9d01";
    let body = json!({
        "assistant_id": id,
        "graph_id": "seed",
        "context": {"model": "m1"},
        "metadata": {"team": "blue"},
        "name": "Blue seed",
        "description": "for tests",
    });
    let (status, a) = json_call(&app, Method::POST, "/assistants", Some(body.clone())).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(a["assistant_id"], id);
    assert_eq!(a["graph_id"], "seed");
    assert_eq!(a["version"], 1);
    assert_eq!(a["context"], json!({"model": "m1"}));
    assert_eq!(a["config"], json!({"configurable": {"model": "m1"}}));
    assert_eq!(a["description"], "for tests");
    let stored = store
        .get(&[NAMESPACE_ROOT, "assistants"], id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.value, a);

    // A taken id: 409 by default, the stored assistant with `do_nothing`.
    let (status, _) = json_call(&app, Method::POST, "/assistants", Some(body.clone())).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let mut again = body.clone();
    again["if_exists"] = json!("do_nothing");
    again["name"] = json!("other");
    let (status, same) = json_call(&app, Method::POST, "/assistants", Some(again)).await;
    assert_eq!((status, same), (StatusCode::OK, a.clone()));

    // An unknown graph is 404; configurable and context together 400; a bad id 422.
    let (status, _) = json_call(
        &app,
        Method::POST,
        "/assistants",
        Some(json!({"graph_id": "nope"})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = json_call(
        &app,
        Method::POST,
        "/assistants",
        Some(
            json!({"graph_id": "seed", "config": {"configurable": {"a": 1}}, "context": {"b": 2}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = json_call(
        &app,
        Method::POST,
        "/assistants",
        Some(json!({"graph_id": "seed", "assistant_id": "not-a-uuid"})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);

    // Without an id: a fresh uuid, named "Untitled".
    let (status, b) = json_call(
        &app,
        Method::POST,
        "/assistants",
        Some(json!({"graph_id": "seed", "metadata": {"team": "red"}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(b["name"], "Untitled");
    assert!(uuid::Uuid::parse_str(b["assistant_id"].as_str().unwrap()).is_ok());

    // Search and count honour graph_id, metadata and name.
    let (_, n) = json_call(
        &app,
        Method::POST,
        "/assistants/count",
        Some(json!({"graph_id": "seed"})),
    )
    .await;
    assert_eq!(n, json!(3));
    let (_, found) = json_call(
        &app,
        Method::POST,
        "/assistants/search",
        Some(json!({"metadata": {"team": "blue"}})),
    )
    .await;
    assert_eq!(found, json!([a.clone()]));
    let (_, n) = json_call(
        &app,
        Method::POST,
        "/assistants/count",
        Some(json!({"name": "blue"})),
    )
    .await;
    assert_eq!(n, json!(1));

    // A run with the assistant carries its context, under the request's.
    let thread = new_thread(&app).await;
    let (status, run) = json_call(
        &app,
        Method::POST,
        &format!("/threads/{thread}/runs/wait"),
        Some(json!({"assistant_id": id, "input": {"foo": "", "bar": []}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(run["foo"], "b");
    let (_, runs) = json_call(&app, Method::GET, &format!("/threads/{thread}/runs"), None).await;
    assert_eq!(runs[0]["assistant_id"], id);
    assert_eq!(runs[0]["kwargs"]["context"], json!({"model": "m1"}));

    // Delete: 204, then 404.
    let (status, _) = call(&app, Method::DELETE, &format!("/assistants/{id}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = call(&app, Method::DELETE, &format!("/assistants/{id}"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = call(&app, Method::GET, &format!("/assistants/{id}"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn assistant_updates_make_versions() {
    let (app, store) = server();
    let (_, a) = json_call(
        &app,
        Method::POST,
        "/assistants",
        Some(json!({"graph_id": "seed", "context": {"model": "m1"}, "metadata": {"a": 1}, "name": "one"})),
    )
    .await;
    let id = a["assistant_id"].as_str().unwrap().to_owned();
    let (status, b) = json_call(
        &app,
        Method::PATCH,
        &format!("/assistants/{id}"),
        Some(json!({"context": {"model": "m2"}, "metadata": {"b": 2}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(b["version"], 2);
    assert_eq!(b["name"], "one");
    assert_eq!(b["context"], json!({"model": "m2"}));
    assert_eq!(b["config"], json!({"configurable": {"model": "m2"}}));
    assert_eq!(b["metadata"], json!({"a": 1, "b": 2}));
    let (_, c) = json_call(
        &app,
        Method::PATCH,
        &format!("/assistants/{id}"),
        Some(json!({"name": "three"})),
    )
    .await;
    assert_eq!(
        (c["version"].clone(), c["name"].clone()),
        (json!(3), json!("three"))
    );
    let (status, _) = json_call(
        &app,
        Method::PATCH,
        &format!("/assistants/{id}"),
        Some(json!({"graph_id": "nope"})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Versions, newest first; paged; filtered by metadata.
    let (status, versions) = json_call(
        &app,
        Method::POST,
        &format!("/assistants/{id}/versions"),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let numbers: Vec<&Json> = versions
        .as_array()
        .unwrap()
        .iter()
        .map(|v| &v["version"])
        .collect();
    assert_eq!(numbers, [&json!(3), &json!(2), &json!(1)]);
    assert_eq!(versions[2]["context"], json!({"model": "m1"}));
    let (_, page) = json_call(
        &app,
        Method::POST,
        &format!("/assistants/{id}/versions"),
        Some(json!({"limit": 1, "offset": 1, "metadata": {"b": 2}})),
    )
    .await;
    assert_eq!(page.as_array().unwrap().len(), 1);
    assert_eq!(page[0]["version"], 2);
    assert!(
        store
            .get(&[NAMESPACE_ROOT, "assistant_versions"], &format!("{id}:2"))
            .await
            .unwrap()
            .is_some()
    );

    // Back to version 1; the next update is version 4.
    let (status, back) = json_call(
        &app,
        Method::POST,
        &format!("/assistants/{id}/latest"),
        Some(json!({"version": 1})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(back["version"], 1);
    assert_eq!(back["name"], "one");
    assert_eq!(back["context"], json!({"model": "m1"}));
    let (_, got) = json_call(&app, Method::GET, &format!("/assistants/{id}"), None).await;
    assert_eq!(got, back);
    let (status, _) = json_call(
        &app,
        Method::POST,
        &format!("/assistants/{id}/latest"),
        Some(json!({"version": 9})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, d) = json_call(
        &app,
        Method::PATCH,
        &format!("/assistants/{id}"),
        Some(json!({"description": "four"})),
    )
    .await;
    assert_eq!(d["version"], 4);

    // Default assistants have version 1 too; unknown ids are 404.
    let seed_id = assistant_of("seed");
    let (status, v) = json_call(
        &app,
        Method::POST,
        &format!("/assistants/{seed_id}/versions"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v[0]["version"], 1);
    let (status, _) = json_call(
        &app,
        Method::PATCH,
        &format!("/assistants/{UNKNOWN}"),
        Some(json!({"name": "x"})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (status, _) = call(&app, Method::DELETE, "/assistants/seed", None).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);

    // Deleting drops the versions.
    let (status, _) = call(&app, Method::DELETE, &format!("/assistants/{id}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = json_call(
        &app,
        Method::POST,
        &format!("/assistants/{id}/versions"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// A graph's input and output schemas are its assistant's: their keys (or their JSON Schema),
/// the state schema staying the whole state.
#[tokio::test]
async fn assistant_schemas_follow_input_and_output_schemas() {
    let schema = Schema::new()
        .last_value("question")
        .last_value("notes")
        .last_value("answer");
    let mut g = StateGraph::<DynState>::with_schema(schema);
    g.add_node("reply", |_s, _c| async { Ok(Map::new()) });
    g.add_edge(START, "reply")
        .set_input_schema(IoSchema::keys(["question"]))
        .set_output_schema(IoSchema::keys(["answer"]));
    let app = Server::builder()
        .graph("io", g.compile().unwrap())
        .checkpointer(Arc::new(InMemorySaver::new()))
        .build()
        .unwrap()
        .router();
    let uri = format!("/assistants/{}/schemas", assistant_of("io"));
    let (status, s) = json_call(&app, Method::GET, &uri, None).await;
    assert_eq!(status, StatusCode::OK);
    let object = |keys: &[&str]| {
        let properties: serde_json::Map<String, Json> =
            keys.iter().map(|k| ((*k).to_owned(), json!({}))).collect();
        json!({"type": "object", "properties": properties})
    };
    assert_eq!(s["input_schema"], object(&["question"]));
    assert_eq!(s["output_schema"], object(&["answer"]));
    assert_eq!(s["state_schema"], object(&["question", "notes", "answer"]));
}

#[tokio::test]
async fn assistant_schemas_and_subgraphs() {
    let (app, _) = server();
    let (status, s) = json_call(
        &app,
        Method::GET,
        &format!("/assistants/{}/schemas", assistant_of("seed")),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let object = json!({"type": "object", "properties": {"foo": {}, "bar": {}}});
    assert_eq!(s["graph_id"], "seed");
    assert_eq!(s["input_schema"], object);
    assert_eq!(s["output_schema"], object);
    assert_eq!(s["state_schema"], object);
    assert_eq!(s["config_schema"], json!({}));
    assert!(s["context_schema"].is_null());
    let (status, sub) = json_call(
        &app,
        Method::GET,
        &format!("/assistants/{}/subgraphs", assistant_of("seed")),
        None,
    )
    .await;
    assert_eq!((status, sub), (StatusCode::OK, json!({})));
    let uri = format!("/assistants/{UNKNOWN}/schemas");
    let (status, _) = json_call(&app, Method::GET, &uri, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let mut child = StateGraph::<DynState>::with_schema(Schema::new().last_value("foo"));
    child.add_node("inner", |_s, _c| async {
        Ok(Map::from_iter([("foo", value!("inner"))]))
    });
    child.add_edge(START, "inner").add_edge("inner", END);
    let mut parent =
        StateGraph::<DynState>::with_schema(Schema::new().last_value("foo").last_value("baz"));
    parent.add_subgraph("child", child.compile().unwrap());
    parent.add_edge(START, "child").add_edge("child", END);
    let app = Server::builder()
        .graph("parent", parent.compile().unwrap())
        .checkpointer(Arc::new(InMemorySaver::new()))
        .store(Arc::new(InMemoryStore::new()))
        .build()
        .unwrap()
        .router();
    let (status, sub) = json_call(
        &app,
        Method::GET,
        &format!("/assistants/{}/subgraphs", assistant_of("parent")),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        sub["child"]["state_schema"],
        json!({"type": "object", "properties": {"foo": {}}})
    );
    assert_eq!(sub.as_object().unwrap().len(), 1);
}

/// A server for the reconnect tests: `steps` runs five nodes of 30 ms each; `gate` runs
/// `first`, then `wait`, which waits until `gate` is notified; `hold` as in [`server`].
fn reconnect_server(gate: Arc<tokio::sync::Notify>) -> Router {
    let schema = || Schema::new().reducer("bar", Reducer::append());
    let mut steps = StateGraph::<DynState>::with_schema(schema());
    let names = ["s1", "s2", "s3", "s4", "s5"];
    for name in names {
        steps.add_node(name, move |_s, _c| async move {
            tokio::time::sleep(std::time::Duration::from_millis(30)).await;
            Ok(Map::from_iter([("bar", value!([name]))]))
        });
    }
    steps.add_edge(START, "s1");
    for pair in names.windows(2) {
        steps.add_edge(pair[0], pair[1]);
    }
    steps.add_edge("s5", END);

    let mut gated = StateGraph::<DynState>::with_schema(schema());
    gated.add_node("first", |_s, _c| async {
        Ok(Map::from_iter([("bar", value!(["first"]))]))
    });
    gated.add_node("wait", move |_s, _c| {
        let gate = Arc::clone(&gate);
        async move {
            gate.notified().await;
            Ok(Map::from_iter([("bar", value!(["done"]))]))
        }
    });
    gated
        .add_edge(START, "first")
        .add_edge("first", "wait")
        .add_edge("wait", END);

    let mut hold = StateGraph::<DynState>::with_schema(schema());
    hold.add_node("long", |_s, _c| async {
        tokio::time::sleep(std::time::Duration::from_secs(60)).await;
        Ok(Map::from_iter([("bar", value!(["long"]))]))
    });
    hold.add_edge(START, "long").add_edge("long", END);

    Server::builder()
        .graph("steps", steps.compile().unwrap())
        .graph("gate", gated.compile().unwrap())
        .graph("hold", hold.compile().unwrap())
        .checkpointer(Arc::new(InMemorySaver::new()))
        .build()
        .unwrap()
        .router()
}

/// Server-sent events as (event, data, id).
fn sse_events(text: &str) -> Vec<(String, Json, Option<String>)> {
    text.split("\n\n")
        .filter_map(|block| {
            let mut name = None;
            let mut data = String::new();
            let mut id = None;
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    name = Some(v.to_owned());
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data.push_str(v);
                } else if let Some(v) = line.strip_prefix("id: ") {
                    id = Some(v.to_owned());
                }
            }
            name.map(|n| (n, serde_json::from_str(&data).unwrap(), id))
        })
        .collect()
}

async fn get_with(
    app: &Router,
    uri: &str,
    last_event_id: Option<&str>,
) -> axum::response::Response {
    let mut req = Request::builder().method(Method::GET).uri(uri);
    if let Some(id) = last_event_id {
        req = req.header("last-event-id", id);
    }
    app.clone()
        .oneshot(req.body(Body::empty()).unwrap())
        .await
        .unwrap()
}

/// The whole body; fails (rather than hangs) if it does not end within 20 s.
async fn body_text(res: axum::response::Response) -> String {
    let read = axum::body::to_bytes(res.into_body(), usize::MAX);
    let bytes = tokio::time::timeout(std::time::Duration::from_secs(20), read)
        .await
        .expect("the stream did not end")
        .unwrap();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// Polls until the thread's next node is `node`.
async fn until_next(app: &Router, thread: &str, node: &str) {
    for _ in 0..500 {
        let (_, s) = json_call(app, Method::GET, &format!("/threads/{thread}/state"), None).await;
        if s["next"] == json!([node]) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the run never reached `{node}`");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumable_run_is_replayed_after_last_event_id() {
    let app = reconnect_server(Arc::new(tokio::sync::Notify::new()));
    let thread = new_thread(&app).await;
    let runs = format!("/threads/{thread}/runs");
    let body = json!({"assistant_id": "steps", "input": {"bar": []},
                      "stream_mode": ["values", "updates"], "stream_resumable": true});
    let (status, text) = call(&app, Method::POST, &format!("{runs}/stream"), Some(body)).await;
    assert_eq!(status, StatusCode::OK);
    let full = sse_events(&text);
    // metadata, the first values, then updates + values for each of the five nodes.
    assert_eq!(full.len(), 12, "{text}");
    assert_eq!(full[0].0, "metadata");
    let run_id = full[0].1["run_id"].as_str().unwrap().to_owned();
    let ids: Vec<&str> = full.iter().map(|e| e.2.as_deref().unwrap()).collect();
    let seqs: Vec<u64> = ids
        .iter()
        .map(|id| id.split_once('-').unwrap().1.parse().unwrap())
        .collect();
    assert_eq!(seqs, (1..=12).collect::<Vec<u64>>(), "{ids:?}");

    let join = format!("{runs}/{run_id}/stream");
    // After the fifth event: the rest, with the same ids.
    let res = get_with(&app, &join, Some(ids[4])).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        res.headers()["content-location"],
        format!("/threads/{thread}/runs/{run_id}").as_str()
    );
    assert_eq!(sse_events(&body_text(res).await), full[5..]);
    // `-1`: everything.
    let res = get_with(&app, &join, Some("-1")).await;
    assert_eq!(sse_events(&body_text(res).await), full);
    // Filtered by stream mode.
    let res = get_with(&app, &format!("{join}?stream_mode=updates"), Some("-1")).await;
    let updates = sse_events(&body_text(res).await);
    assert_eq!(updates.len(), 5);
    assert!(updates.iter().all(|e| e.0 == "updates"));
    let res = get_with(
        &app,
        &format!("{join}?stream_mode=%5B%22metadata%22%5D"),
        Some("-1"),
    )
    .await;
    let meta = sse_events(&body_text(res).await);
    assert_eq!(meta, full[..1]);
    // Without an id, a joiner gets the events from now on: none, the run has ended.
    let res = get_with(&app, &join, None).await;
    assert_eq!(sse_events(&body_text(res).await), []);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joiners_of_a_live_run_each_get_its_events_from_when_they_joined() {
    let gate = Arc::new(tokio::sync::Notify::new());
    let app = reconnect_server(Arc::clone(&gate));
    let thread = new_thread(&app).await;
    let runs = format!("/threads/{thread}/runs");
    let body = json!({"assistant_id": "gate", "input": {"bar": []},
                      "stream_mode": ["values", "updates"]});
    let (status, run) = json_call(&app, Method::POST, &runs, Some(body)).await;
    assert_eq!(status, StatusCode::OK);
    let run_id = run["run_id"].as_str().unwrap();
    until_next(&app, &thread, "wait").await;
    let join = format!("{runs}/{run_id}/stream");
    let all = get_with(&app, &join, None).await;
    let filtered = get_with(&app, &format!("{join}?stream_mode=updates"), None).await;
    // Not resumable: an id is ignored, and events carry none.
    let with_id = get_with(&app, &join, Some("-1")).await;
    gate.notify_one();
    let all = sse_events(&body_text(all).await);
    let names: Vec<&str> = all.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(names, ["updates", "values"], "{all:?}");
    assert_eq!(all[0].1, json!({"wait": {"bar": ["done"]}}));
    assert_eq!(all[1].1, json!({"bar": ["first", "done"]}));
    assert!(all.iter().all(|e| e.2.is_none()));
    assert_eq!(sse_events(&body_text(with_id).await), all);
    assert_eq!(sse_events(&body_text(filtered).await), all[..1]);
    // The stream ended once the run's records were final.
    let (_, r) = json_call(&app, Method::GET, &format!("{runs}/{run_id}"), None).await;
    assert_eq!(r["status"], "success");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joining_unknown_runs_and_cancelling_on_disconnect() {
    let app = reconnect_server(Arc::new(tokio::sync::Notify::new()));
    let thread = new_thread(&app).await;
    let other = new_thread(&app).await;
    let runs = format!("/threads/{thread}/runs");
    let (status, detail) = json_call(&app, Method::GET, &format!("{runs}/nope/stream"), None).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(detail, json!({"detail": "Invalid run ID: must be a UUID"}));
    let (status, detail) = json_call(
        &app,
        Method::GET,
        "/threads/nope/runs/1ef7a6d0-0000-6000-8000-000000000000/stream",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        detail,
        json!({"detail": "Invalid thread ID: must be a UUID"})
    );
    // An unknown run, as the reference answers it: one `error` event.
    let unknown = format!("{runs}/1ef7a6d0-0000-6000-8000-000000000000/stream");
    let res = get_with(&app, &unknown, None).await;
    assert_eq!(res.status(), StatusCode::OK);
    let events = sse_events(&body_text(res).await);
    assert_eq!(
        events,
        [(
            "error".to_owned(),
            json!({"error": "HTTPException", "message": "404: Run not found"}),
            None
        )]
    );

    let (_, run) = json_call(
        &app,
        Method::POST,
        &runs,
        Some(json!({"assistant_id": "hold", "input": {"bar": []}})),
    )
    .await;
    let run_id = run["run_id"].as_str().unwrap();
    until_next(&app, &thread, "long").await;
    // The run on another thread is unknown there.
    let res = get_with(
        &app,
        &format!("/threads/{other}/runs/{run_id}/stream"),
        None,
    )
    .await;
    assert_eq!(sse_events(&body_text(res).await)[0].0, "error");
    // A joiner that goes away leaves the run going…
    drop(get_with(&app, &format!("{runs}/{run_id}/stream"), None).await);
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let (_, r) = json_call(&app, Method::GET, &format!("{runs}/{run_id}"), None).await;
    assert_eq!(r["status"], "running");
    // …unless it asked to cancel it.
    let uri = format!("{runs}/{run_id}/stream?cancel_on_disconnect=true");
    drop(get_with(&app, &uri, None).await);
    for _ in 0..200 {
        let (_, r) = json_call(&app, Method::GET, &format!("{runs}/{run_id}"), None).await;
        if r["status"] == "interrupted" {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the run was not cancelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_cancel_by_ids_or_status() {
    let app = reconnect_server(Arc::new(tokio::sync::Notify::new()));
    let hold = json!({"assistant_id": "hold", "input": {"bar": []}});
    let (status, detail) = json_call(&app, Method::POST, "/runs/cancel", Some(json!({}))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{detail}");
    let (status, detail) = json_call(
        &app,
        Method::POST,
        "/runs/cancel",
        Some(json!({"status": "done"})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        detail["detail"],
        "Invalid status: must be 'pending', 'running', or 'all'"
    );
    let (status, _) = json_call(
        &app,
        Method::POST,
        "/runs/cancel",
        Some(json!({"status": "all", "thread_id": "1ef7a6d0-0000-6000-8000-000000000000"})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, detail) = json_call(
        &app,
        Method::POST,
        "/runs/cancel",
        Some(json!({"thread_id": "x", "run_ids": []})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(detail["detail"], "Invalid thread ID: must be a UUID");
    let (status, detail) = json_call(
        &app,
        Method::POST,
        "/runs/cancel",
        Some(json!({"status": "running"})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(detail["detail"], "No runs found to cancel.");

    // Three runs on two threads: one cancelled by id (rolled back), then the rest by status.
    let a = new_thread(&app).await;
    let b = new_thread(&app).await;
    let (_, a1) = json_call(
        &app,
        Method::POST,
        &format!("/threads/{a}/runs"),
        Some(hold.clone()),
    )
    .await;
    let (_, a2) = json_call(
        &app,
        Method::POST,
        &format!("/threads/{a}/runs"),
        Some(hold.clone()),
    )
    .await;
    let (_, b1) = json_call(
        &app,
        Method::POST,
        &format!("/threads/{b}/runs"),
        Some(hold.clone()),
    )
    .await;
    until_next(&app, &a, "long").await;
    until_next(&app, &b, "long").await;
    let id = |r: &Json| r["run_id"].as_str().unwrap().to_owned();
    let (status, _) = call(
        &app,
        Method::POST,
        "/runs/cancel?action=rollback",
        Some(json!({"thread_id": a, "run_ids": [id(&a2)]})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = call(
        &app,
        Method::GET,
        &format!("/threads/{a}/runs/{}", id(&a2)),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, r) = json_call(
        &app,
        Method::GET,
        &format!("/threads/{a}/runs/{}", id(&a1)),
        None,
    )
    .await;
    assert_eq!(r["status"], "running");
    // Ids of another thread match nothing.
    let (status, _) = call(
        &app,
        Method::POST,
        "/runs/cancel",
        Some(json!({"thread_id": a, "run_ids": [id(&b1)]})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = call(
        &app,
        Method::POST,
        "/runs/cancel",
        Some(json!({"status": "all"})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    for (t, r) in [(&a, &a1), (&b, &b1)] {
        let (_, r) = json_call(
            &app,
            Method::GET,
            &format!("/threads/{t}/runs/{}", id(r)),
            None,
        )
        .await;
        assert_eq!(r["status"], "interrupted");
    }
    // Runs that have ended are found but not cancelable.
    let (status, detail) = json_call(
        &app,
        Method::POST,
        "/runs/cancel",
        Some(json!({"thread_id": b, "run_ids": [id(&b1)]})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        detail["detail"]
            .as_str()
            .unwrap()
            .starts_with("No matching runs to cancel.")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_an_assistant_cancels_its_runs_and_may_delete_its_threads() {
    let app = reconnect_server(Arc::new(tokio::sync::Notify::new()));
    let (_, assistant) = json_call(
        &app,
        Method::POST,
        "/assistants",
        Some(json!({"graph_id": "hold", "name": "holder"})),
    )
    .await;
    let aid = assistant["assistant_id"].as_str().unwrap().to_owned();
    let (_, steps_assistant) = json_call(
        &app,
        Method::POST,
        "/assistants",
        Some(json!({"graph_id": "steps"})),
    )
    .await;
    let sid = steps_assistant["assistant_id"].as_str().unwrap().to_owned();
    // Thread `used`: a finished run of `steps_assistant`; thread `held`: a run of the
    // holder in flight; thread `other`: a finished run of the default `steps`.
    let used = new_thread(&app).await;
    let held = new_thread(&app).await;
    let other = new_thread(&app).await;
    let (status, _) = call(
        &app,
        Method::POST,
        &format!("/threads/{used}/runs/wait"),
        Some(json!({"assistant_id": sid, "input": {"bar": []}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, run) = json_call(
        &app,
        Method::POST,
        &format!("/threads/{held}/runs"),
        Some(json!({"assistant_id": aid, "input": {"bar": []}})),
    )
    .await;
    let held_run = run["run_id"].as_str().unwrap().to_owned();
    let (status, _) = call(
        &app,
        Method::POST,
        &format!("/threads/{other}/runs/wait"),
        Some(json!({"assistant_id": "steps", "input": {"bar": []}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    until_next(&app, &held, "long").await;

    // Without `delete_threads`: the run in flight is cancelled, the thread kept.
    let (status, _) = call(&app, Method::DELETE, &format!("/assistants/{aid}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, r) = json_call(
        &app,
        Method::GET,
        &format!("/threads/{held}/runs/{held_run}"),
        None,
    )
    .await;
    assert_eq!(r["status"], "interrupted");
    let (status, _) = call(&app, Method::GET, &format!("/threads/{held}"), None).await;
    assert_eq!(status, StatusCode::OK);

    // With it: the threads whose latest run was the assistant's go, with their runs.
    let (status, _) = call(
        &app,
        Method::DELETE,
        &format!("/assistants/{sid}?delete_threads=true"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = call(&app, Method::GET, &format!("/threads/{used}"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = call(&app, Method::GET, &format!("/threads/{used}/state"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    for t in [&held, &other] {
        let (status, _) = call(&app, Method::GET, &format!("/threads/{t}"), None).await;
        assert_eq!(status, StatusCode::OK);
    }
    let (status, _) = call(&app, Method::GET, &format!("/assistants/{sid}"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn stateless_runs_keep_their_thread_on_request() {
    let (app, _) = server();
    let request = |body: Json| {
        Request::builder()
            .method(Method::POST)
            .uri("/runs/wait")
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap()
    };
    let input = json!({"assistant_id": "seed", "input": {"foo": "", "bar": []}});
    // The default deletes the temporary thread: the answer names only the run.
    let gone = raw(&app, request(input.clone())).await;
    assert_eq!(gone.status(), StatusCode::OK);
    let location = gone.headers()["content-location"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(location.starts_with("/runs/"), "{location}");
    // `on_completion: "keep"`: a thread like any other, with the run's state.
    let mut keep = input.clone();
    keep["on_completion"] = json!("keep");
    let kept = raw(&app, request(keep)).await;
    assert_eq!(kept.status(), StatusCode::OK);
    let location = kept.headers()["content-location"]
        .to_str()
        .unwrap()
        .to_owned();
    let thread = location
        .strip_prefix("/threads/")
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("{location}"))
        .to_owned();
    let out = axum::body::to_bytes(kept.into_body(), usize::MAX)
        .await
        .unwrap();
    let out: Json = serde_json::from_slice(&out).unwrap();
    assert_eq!(out, json!({"foo": "b", "bar": ["a", "b"]}));
    let (status, state) =
        json_call(&app, Method::GET, &format!("/threads/{thread}/state"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(state["values"], json!({"foo": "b", "bar": ["a", "b"]}));
    let (_, t) = json_call(&app, Method::GET, &format!("/threads/{thread}"), None).await;
    assert_eq!(t["status"], "idle");
    // Anything else is refused before the run starts.
    let mut bad = input;
    bad["on_completion"] = json!("archive");
    let (status, body) = call(&app, Method::POST, "/runs/wait", Some(bad)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(body.contains("on_completion"), "{body}");
}

#[tokio::test]
async fn deleting_a_thread_stops_and_deletes_its_runs() {
    let (app, _) = server();
    let thread = new_thread(&app).await;
    let uri = format!("/threads/{thread}/runs");
    let (_, done) = json_call(
        &app,
        Method::POST,
        &format!("{uri}/wait"),
        Some(json!({"assistant_id": "seed", "input": {"foo": "", "bar": []}})),
    )
    .await;
    assert_eq!(done["foo"], "b");
    let (_, running) = json_call(
        &app,
        Method::POST,
        &uri,
        Some(json!({"assistant_id": "hold", "input": {"foo": "", "bar": []}})),
    )
    .await;
    until_long_runs(&app, &thread).await;
    let (status, _) = call(&app, Method::DELETE, &format!("/threads/{thread}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let run = running["run_id"].as_str().unwrap();
    let (status, _) = call(
        &app,
        Method::GET,
        &format!("/threads/{thread}/runs/{run}"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = call(&app, Method::GET, &uri, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Nothing of the thread is left: its run was stopped (and settled) before the delete.
    let (status, _) = call(&app, Method::GET, &format!("/threads/{thread}/state"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn deleting_a_run_deletes_its_checkpoints() {
    let (app, _) = server();
    let thread = new_thread(&app).await;
    let uri = format!("/threads/{thread}/runs");
    let input = json!({"assistant_id": "seed", "input": {"foo": "", "bar": []}});
    let (_, first) = json_call(&app, Method::POST, &uri, Some(input.clone())).await;
    let first = first["run_id"].as_str().unwrap().to_owned();
    json_call(&app, Method::GET, &format!("{uri}/{first}/join"), None).await;
    let after_first = history_len(&app, &thread).await;
    let (_, second) = json_call(&app, Method::POST, &uri, Some(input)).await;
    let second = second["run_id"].as_str().unwrap().to_owned();
    json_call(&app, Method::GET, &format!("{uri}/{second}/join"), None).await;
    assert!(history_len(&app, &thread).await > after_first);
    let (status, _) = call(&app, Method::DELETE, &format!("{uri}/{second}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    // The run and its checkpoints are gone; the first run's are kept.
    let (status, _) = call(&app, Method::GET, &format!("{uri}/{second}"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(history_len(&app, &thread).await, after_first);
    let (_, runs) = json_call(&app, Method::GET, &uri, None).await;
    assert_eq!(runs.as_array().unwrap().len(), 1);
    // Unknown and malformed ids.
    let (status, _) = call(&app, Method::DELETE, &format!("{uri}/{second}"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = call(&app, Method::DELETE, &format!("{uri}/not-a-uuid"), None).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
}

#[tokio::test]
async fn a_stateless_run_writes_no_checkpoint_to_the_database() {
    let started = Arc::new(tokio::sync::Notify::new());
    let release = Arc::new(tokio::sync::Notify::new());
    let mut gate = StateGraph::<DynState>::with_schema(
        Schema::new()
            .last_value("foo")
            .reducer("bar", Reducer::append()),
    );
    let (s, r) = (Arc::clone(&started), Arc::clone(&release));
    gate.add_node("gate", move |_s, _c| {
        let (s, r) = (Arc::clone(&s), Arc::clone(&r));
        async move {
            s.notify_one();
            r.notified().await;
            Ok(Map::from_iter([("bar", value!(["through"]))]))
        }
    });
    gate.add_edge(START, "gate").add_edge("gate", END);
    let saver = Arc::new(InMemorySaver::new());
    let app = Server::builder()
        .graph("gate", gate.compile().unwrap())
        .checkpointer(saver.clone())
        .store(Arc::new(InMemoryStore::new()))
        .build()
        .unwrap()
        .router();
    let body = json!({"assistant_id": "gate", "input": {"foo": "", "bar": []}});
    let waiting = {
        let app = app.clone();
        tokio::spawn(async move { json_call(&app, Method::POST, "/runs/wait", Some(body)).await })
    };
    // The run is inside its node (its input checkpoint made): the database has none of it.
    started.notified().await;
    let stored = saver.list(&ListOptions::default()).await.unwrap();
    assert!(
        stored.is_empty(),
        "{} checkpoints in the database",
        stored.len()
    );
    release.notify_one();
    let (status, out) = waiting.await.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(out, json!({"foo": "", "bar": ["through"]}));
    assert!(
        saver
            .list(&ListOptions::default())
            .await
            .unwrap()
            .is_empty()
    );
}

/// An event's SSE id is the same whether a join reads it from the queue's log (the run was
/// not executing here yet) or from the run's hub, so a client's `Last-Event-ID` and its
/// de-duplication hold across reconnects wherever they land.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_ids_are_the_same_from_the_queue_log_and_the_hub() {
    let (app, _) = server();
    let thread = new_thread(&app).await;
    let runs = format!("/threads/{thread}/runs");
    let first = json!({"assistant_id": "slow", "input": {"foo": "", "bar": []}});
    let (status, _) = json_call(&app, Method::POST, &runs, Some(first)).await;
    assert_eq!(status, StatusCode::OK);
    let queued = json!({"assistant_id": "seed", "input": {"foo": "", "bar": []},
                        "stream_resumable": true, "stream_mode": ["values"]});
    let (_, run) = json_call(&app, Method::POST, &runs, Some(queued)).await;
    let join = format!("{runs}/{}/stream", run["run_id"].as_str().unwrap());
    // Pending behind `slow`: nothing of it runs here yet, so this join follows the log.
    let from_log = sse_events(&body_text(get_with(&app, &join, Some("-1")).await).await);
    let from_hub = sse_events(&body_text(get_with(&app, &join, Some("-1")).await).await);
    let names: Vec<&str> = from_log.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(names, ["metadata", "values", "values", "values"]);
    assert!(from_log.iter().all(|e| e.2.is_some()), "{from_log:?}");
    assert_eq!(from_log, from_hub);
}
