//! Requests read as LangGraph's server reads them, through `Router::oneshot`: what its schema
//! admits is accepted (integral floats as integers, every stream mode of its enum), what the
//! client got wrong is a 4xx naming the field (never a 500 or a panic), and the rest follows
//! what the reference server does.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::sync::Arc;

use axum::Router;
use axum::http::{Method, StatusCode};
use serde_json::{Value as Json, json};
use stategraph_checkpoint::{CheckpointSaver, InMemorySaver, Map, value};
use stategraph_graph::{DynState, END, Reducer, START, Schema, StateGraph};
use stategraph_server::Server;
use stategraph_store::{InMemoryStore, ManualClock, Store, TtlConfig};
mod common;
use common::{call, json_call};

/// Graphs `seed` (`node_a` then `node_b`) and `hold` (`long`, which sleeps a minute).
fn server_with(saver: Arc<dyn CheckpointSaver>, store: Arc<dyn Store>) -> Router {
    let schema = || {
        Schema::new()
            .last_value("foo")
            .reducer("bar", Reducer::append())
    };
    let mut seed = StateGraph::<DynState>::with_schema(schema());
    for (node, value) in [("node_a", "a"), ("node_b", "b")] {
        seed.add_node(node, move |_s, _c| async move {
            Ok(Map::from_iter([
                ("foo", value!(value)),
                ("bar", value!([value])),
            ]))
        });
    }
    seed.add_edge(START, "node_a")
        .add_edge("node_a", "node_b")
        .add_edge("node_b", END);
    let mut hold = StateGraph::<DynState>::with_schema(schema());
    hold.add_node("long", |_s, _c| async {
        tokio::time::sleep(std::time::Duration::from_secs(60)).await;
        Ok(Map::from_iter([("bar", value!(["long"]))]))
    });
    hold.add_edge(START, "long").add_edge("long", END);
    Server::builder()
        .graph("seed", seed.compile().unwrap())
        .graph("hold", hold.compile().unwrap())
        .checkpointer(saver)
        .store(store)
        // One process: its runs in its memory, whatever the database.
        .run_queue(stategraph_runs::InMemoryRunQueue::new())
        .build()
        .unwrap()
        .router()
}

fn server() -> Router {
    server_with(
        Arc::new(InMemorySaver::new()),
        Arc::new(InMemoryStore::new()),
    )
}

/// The server over SQLite (in memory), as `stategraph serve` runs by default.
async fn sqlite_server() -> Router {
    let saver = stategraph_sqlite::SqliteConfig::memory()
        .connect()
        .await
        .unwrap();
    let store = stategraph_sqlite::SqliteStoreConfig::memory()
        .connect()
        .await
        .unwrap();
    server_with(Arc::new(saver), Arc::new(store))
}

/// Asserts a 422 whose `detail` names `field`.
async fn refused(app: &Router, method: Method, uri: &str, body: Json, field: &str) {
    let (status, out) = json_call(app, method, uri, Some(body.clone())).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {out}");
    let detail = out["detail"].as_str().unwrap();
    assert!(
        detail.contains(field),
        "{body}: {detail} does not name `{field}`"
    );
}

async fn new_thread(app: &Router) -> String {
    let (_, t) = json_call(app, Method::POST, "/threads", Some(json!({}))).await;
    t["thread_id"].as_str().unwrap().to_owned()
}

async fn seed_thread(app: &Router) -> String {
    let thread = new_thread(app).await;
    let (status, _) = call(
        app,
        Method::POST,
        &format!("/threads/{thread}/runs/wait"),
        Some(json!({"assistant_id": "seed", "input": {"foo": "x"}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    thread
}

#[tokio::test]
async fn a_huge_store_ttl_is_clamped_and_a_bad_one_named() {
    for app in [server(), sqlite_server().await] {
        let put =
            |ttl: Json| json!({"namespace": ["a"], "key": "k", "value": {"v": 1}, "ttl": ttl});
        // Minutes far past any calendar (the reference takes them): stored, readable.
        for ttl in [json!(3.07e17), json!(f64::MAX), json!(0.5), json!(null)] {
            let (status, out) =
                call(&app, Method::PUT, "/store/items", Some(put(ttl.clone()))).await;
            assert_eq!(status, StatusCode::NO_CONTENT, "ttl {ttl}: {out}");
            let (status, item) =
                json_call(&app, Method::GET, "/store/items?namespace=a&key=k", None).await;
            assert_eq!((status, &item["value"]), (StatusCode::OK, &json!({"v": 1})));
            let (status, found) = json_call(
                &app,
                Method::POST,
                "/store/items/search",
                Some(json!({"namespace_prefix": ["a"], "refresh_ttl": true})),
            )
            .await;
            assert_eq!(status, StatusCode::OK);
            assert_eq!(found["items"].as_array().unwrap().len(), 1, "{found}");
        }
        for ttl in [json!(0), json!(-1), json!(-1e300), json!("5")] {
            refused(&app, Method::PUT, "/store/items", put(ttl), "ttl").await;
        }
    }
}

#[tokio::test]
async fn an_empty_store_namespace_is_refused_on_put_and_deletes_nothing() {
    let app = server();
    let (status, out) = json_call(
        &app,
        Method::PUT,
        "/store/items",
        Some(json!({"namespace": [], "key": "k", "value": {}})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{out}");
    assert_eq!(out["detail"], "Namespace cannot be empty.");
    let (status, out) = call(
        &app,
        Method::DELETE,
        "/store/items",
        Some(json!({"namespace": [], "key": "k"})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{out}");
}

#[tokio::test]
async fn a_store_get_refreshes_the_ttl_when_asked() {
    let clock = ManualClock::starting_now();
    let ttl = TtlConfig::default()
        .refresh_on_read(false)
        .with_clock(clock.clock());
    let app = server_with(
        Arc::new(InMemorySaver::new()),
        Arc::new(InMemoryStore::new().with_ttl(ttl)),
    );
    let (status, _) = call(
        &app,
        Method::PUT,
        "/store/items",
        Some(json!({"namespace": ["a"], "key": "k", "value": {"v": 1}, "ttl": 10})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let get = |flag: &str| {
        let uri = format!("/store/items?namespace=a&key=k{flag}");
        let app = app.clone();
        async move { json_call(&app, Method::GET, &uri, None).await.1["key"].clone() }
    };
    let minutes = |m: u64| std::time::Duration::from_secs(m * 60);
    clock.advance(minutes(8));
    // As the reference reads the flag: `true` in any case refreshes, anything else does not.
    assert_eq!(get("&refresh_ttl=TRUE").await, "k");
    clock.advance(minutes(8));
    assert_eq!(
        get("&refresh_ttl=no").await,
        "k",
        "the get did not refresh the ttl"
    );
    clock.advance(minutes(3));
    assert_eq!(
        get("").await,
        Json::Null,
        "a get without the flag refreshed the ttl"
    );
}

#[tokio::test]
async fn copying_a_thread_without_checkpoints_copies_its_record() {
    let app = server();
    let (_, thread) = json_call(
        &app,
        Method::POST,
        "/threads",
        Some(json!({"metadata": {"owner": "me"}})),
    )
    .await;
    let id = thread["thread_id"].as_str().unwrap();
    let (status, copy) = json_call(&app, Method::POST, &format!("/threads/{id}/copy"), None).await;
    assert_eq!(status, StatusCode::OK, "{copy}");
    let copy_id = copy["thread_id"].as_str().unwrap();
    assert_ne!(copy_id, id);
    assert_eq!(copy["metadata"]["owner"], "me");
    assert_eq!(copy["status"], "idle");
    let (status, _) = call(&app, Method::GET, &format!("/threads/{copy_id}"), None).await;
    assert_eq!(status, StatusCode::OK);
    // The copy takes runs as any thread.
    let (status, out) = json_call(
        &app,
        Method::POST,
        &format!("/threads/{copy_id}/runs/wait"),
        Some(json!({"assistant_id": "seed", "input": {"foo": "x"}})),
    )
    .await;
    assert_eq!((status, &out["foo"]), (StatusCode::OK, &json!("b")));
}

#[tokio::test]
async fn checkpointer_errors_of_the_request_are_4xx() {
    let app = sqlite_server().await;
    let thread = seed_thread(&app).await;
    let history = format!("/threads/{thread}/history");
    // The SQLite saver cannot filter on an empty metadata key: the request's fault.
    refused(
        &app,
        Method::POST,
        &history,
        json!({"metadata": {"": 1}}),
        "metadata",
    )
    .await;
    let (status, states) = json_call(
        &app,
        Method::POST,
        &history,
        Some(json!({"metadata": {"step": 1}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(states.as_array().unwrap().len(), 1, "{states}");
    // A thread without checkpoints copies on SQLite too.
    let empty = new_thread(&app).await;
    let (status, _) = call(&app, Method::POST, &format!("/threads/{empty}/copy"), None).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn history_needs_a_body_and_bounds_its_limit() {
    let app = server();
    let thread = seed_thread(&app).await;
    let history = format!("/threads/{thread}/history");
    let (status, out) = json_call(&app, Method::POST, &history, None).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
    assert!(out["detail"].as_str().unwrap().contains("JSON"), "{out}");
    // Without a limit, one state: the reference's default.
    let (status, states) = json_call(&app, Method::POST, &history, Some(json!({}))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(states.as_array().unwrap().len(), 1, "{states}");
    let (_, states) = json_call(&app, Method::POST, &history, Some(json!({"limit": 10}))).await;
    assert_eq!(states.as_array().unwrap().len(), 4, "{states}");
    for limit in [json!(0), json!(1001), json!(2.5), json!(-1)] {
        refused(
            &app,
            Method::POST,
            &history,
            json!({"limit": limit}),
            "limit",
        )
        .await;
    }
}

#[tokio::test]
async fn integral_floats_are_integers_everywhere() {
    let app = server();
    let thread = seed_thread(&app).await;
    let search = Some(json!({"graph_id": "seed"}));
    let (_, found) = json_call(&app, Method::POST, "/assistants/search", search).await;
    let assistant_id = found[0]["assistant_id"].as_str().unwrap();
    let (status, _) = call(
        &app,
        Method::PUT,
        "/store/items",
        Some(json!({"namespace": ["a"], "key": "k", "value": {"v": 1}})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    for (uri, body, found) in [
        (
            "/threads/search".to_owned(),
            json!({"limit": 196.0, "offset": 0.0}),
            1,
        ),
        ("/assistants/search".to_owned(), json!({"limit": 196.0}), 2),
        (
            format!("/threads/{thread}/history"),
            json!({"limit": 2.0}),
            2,
        ),
        (
            format!("/assistants/{assistant_id}/versions"),
            json!({"limit": 5.0}),
            1,
        ),
        (
            "/store/items/search".to_owned(),
            json!({"namespace_prefix": ["a"], "limit": 196.0}),
            1,
        ),
    ] {
        let (status, out) = json_call(&app, Method::POST, &uri, Some(body.clone())).await;
        assert_eq!(status, StatusCode::OK, "{uri} {body}: {out}");
        let items = out.get("items").unwrap_or(&out);
        assert_eq!(
            items.as_array().unwrap().len(),
            found,
            "{uri} {body}: {out}"
        );
    }
    let (status, namespaces) = json_call(
        &app,
        Method::POST,
        "/store/namespaces",
        Some(json!({"limit": 10.0, "offset": 0.0, "max_depth": 1.0})),
    )
    .await;
    assert_eq!(
        (status, namespaces),
        (StatusCode::OK, json!({"namespaces": [["a"]]}))
    );
    let (status, runs) = json_call(
        &app,
        Method::GET,
        &format!("/threads/{thread}/runs?limit=196.0&offset=0"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{runs}");
    assert_eq!(runs.as_array().unwrap().len(), 1);
    // `config.recursion_limit` too: 1.0 is a limit of one step, which `seed` needs two of.
    let (status, out) = json_call(
        &app,
        Method::POST,
        "/runs/wait",
        Some(json!({"assistant_id": "seed", "input": {}, "config": {"recursion_limit": 1.0}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(out["__error__"]["error"], "GraphRecursionError", "{out}");
}

#[tokio::test]
async fn integers_that_do_not_fit_are_named() {
    let app = server();
    let thread = seed_thread(&app).await;
    for (uri, body, field) in [
        ("/threads/search", json!({"limit": 0}), "limit"),
        ("/threads/search", json!({"offset": -3}), "offset"),
        ("/assistants/search", json!({"limit": 1e6}), "limit"),
        ("/store/items/search", json!({"limit": 1.5}), "limit"),
        ("/store/namespaces", json!({"max_depth": -1}), "max_depth"),
        (
            "/runs/wait",
            json!({"assistant_id": "seed", "config": {"recursion_limit": 0}}),
            "recursion_limit",
        ),
    ] {
        refused(&app, Method::POST, uri, body, field).await;
    }
    let (status, out) = json_call(
        &app,
        Method::GET,
        &format!("/threads/{thread}/runs?limit=-1"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{out}");
    assert!(out["detail"].as_str().unwrap().contains("limit"), "{out}");
}

#[tokio::test]
async fn run_choices_outside_their_enum_are_named() {
    let app = server();
    let thread = new_thread(&app).await;
    let runs = format!("/threads/{thread}/runs");
    for field in [
        "multitask_strategy",
        "if_not_exists",
        "on_completion",
        "on_disconnect",
        "durability",
    ] {
        let body = json!({"assistant_id": "seed", "input": {}, field: "AAA"});
        refused(&app, Method::POST, &runs, body, field).await;
    }
    // Nothing was run or recorded.
    let (_, listed) = json_call(&app, Method::GET, &runs, None).await;
    assert_eq!(listed, json!([]));
    let (status, run) = json_call(
        &app,
        Method::POST,
        &runs,
        Some(json!({"assistant_id": "seed", "input": {}, "multitask_strategy": "rollback"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(run["multitask_strategy"], "rollback");
}

#[tokio::test]
async fn stream_mode_events_streams_the_graph_and_its_tasks() {
    let app = server();
    let (status, text) = call(
        &app,
        Method::POST,
        "/runs/stream",
        Some(json!({"assistant_id": "seed", "input": {"foo": "x"}, "stream_mode": "events"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let events: Vec<Json> = text
        .split("\n\n")
        .filter_map(|block| {
            let (head, data) = block.split_once("\ndata: ")?;
            (head == "event: events").then(|| serde_json::from_str(data).unwrap())
        })
        .collect();
    let seen: Vec<(String, String)> = events
        .iter()
        .map(|e| {
            let field = |k: &str| e[k].as_str().unwrap().to_owned();
            (field("event"), field("name"))
        })
        .collect();
    let expected = [
        ("on_chain_start", "seed"),
        ("on_chain_start", "node_a"),
        ("on_chain_stream", "node_a"),
        ("on_chain_end", "node_a"),
        ("on_chain_start", "node_b"),
        ("on_chain_stream", "node_b"),
        ("on_chain_end", "node_b"),
        ("on_chain_end", "seed"),
    ]
    .map(|(e, n)| (e.to_owned(), n.to_owned()));
    assert_eq!(seen, expected, "{text}");
    assert_eq!(events[0]["data"]["input"], json!({"foo": "x"}));
    assert_eq!(events[1]["tags"], json!(["graph:step:1"]));
    assert_eq!(events[1]["metadata"]["langgraph_node"], "node_a");
    assert_eq!(events[1]["parent_ids"], json!([events[0]["run_id"]]));
    assert_eq!(
        events[3]["data"]["output"],
        json!({"foo": "a", "bar": ["a"]})
    );
    assert_eq!(
        events[2]["data"]["chunk"],
        json!({"foo": "a", "bar": ["a"]})
    );
    assert_eq!(
        events[7]["data"]["output"],
        json!({"foo": "b", "bar": ["a", "b"]})
    );
    // The graph's run is the server's run.
    let run_id = text
        .split("\n\n")
        .find_map(|b| b.strip_prefix("event: metadata\ndata: "))
        .map(|d| serde_json::from_str::<Json>(d).unwrap()["run_id"].clone())
        .unwrap();
    assert_eq!(events[0]["run_id"], run_id);
    // Only the modes asked for: no `values` events.
    assert!(!text.contains("event: values"), "{text}");
}

#[tokio::test]
async fn latest_without_a_version_finds_none() {
    let app = server();
    let search = Some(json!({"graph_id": "seed"}));
    let (_, found) = json_call(&app, Method::POST, "/assistants/search", search).await;
    let id = found[0]["assistant_id"].as_str().unwrap();
    let latest = format!("/assistants/{id}/latest");
    let (status, out) = json_call(&app, Method::POST, &latest, Some(json!({}))).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    let (status, out) = json_call(&app, Method::POST, &latest, Some(json!({"version": 1.0}))).await;
    assert_eq!(
        (status, &out["version"]),
        (StatusCode::OK, &json!(1)),
        "{out}"
    );
    let unknown = "/assistants/3f1c0a52-9a0e-4b6e-8d3c-2f5a1b7c9d09/latest";
    let (status, _) = call(&app, Method::POST, unknown, Some(json!({}))).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_by_status_alone_cancels_the_runs_with_that_status() {
    let app = server();
    let thread = new_thread(&app).await;
    let runs = format!("/threads/{thread}/runs");
    let hold = json!({"assistant_id": "hold", "input": {}});
    let (_, running) = json_call(&app, Method::POST, &runs, Some(hold.clone())).await;
    let (_, pending) = json_call(&app, Method::POST, &runs, Some(hold)).await;
    let status_of = |run: &Json| {
        let uri = format!("{runs}/{}", run["run_id"].as_str().unwrap());
        let app = app.clone();
        async move { json_call(&app, Method::GET, &uri, None).await.1["status"].clone() }
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while status_of(&running).await != "running" {
        assert!(
            std::time::Instant::now() < deadline,
            "the first run never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (status, out) = call(
        &app,
        Method::POST,
        "/runs/cancel",
        Some(json!({"status": "pending"})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{out}");
    assert_eq!(status_of(&pending).await, "interrupted");
    assert_eq!(status_of(&running).await, "running");
    let (status, _) = call(
        &app,
        Method::POST,
        "/runs/cancel",
        Some(json!({"status": "running"})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(status_of(&running).await, "interrupted");
}

#[tokio::test]
async fn the_state_query_flag_reads_as_the_reference_reads_it() {
    let app = server();
    let thread = seed_thread(&app).await;
    for flag in ["True", "true", "false", "1", "x"] {
        let uri = format!("/threads/{thread}/state?subgraphs={flag}");
        let (status, state) = json_call(&app, Method::GET, &uri, None).await;
        assert_eq!(status, StatusCode::OK, "{flag}: {state}");
        assert_eq!(state["values"]["foo"], "b");
    }
}

#[tokio::test]
async fn the_graph_query_xray_is_checked_as_the_reference_checks_it() {
    let app = server();
    for ok in ["", "?xray=", "?xray=true", "?xray=False", "?xray=2"] {
        let (status, out) = json_call(
            &app,
            Method::GET,
            &format!("/assistants/seed/graph{ok}"),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{ok}: {out}");
    }
    for bad in ["null", "0", "-1", "AAA", "1.5"] {
        let (status, out) = json_call(
            &app,
            Method::GET,
            &format!("/assistants/seed/graph?xray={bad}"),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {out}");
        assert_eq!(out["detail"], "Invalid xray value");
    }
}

#[tokio::test]
async fn info_names_the_langgraph_version_as_a_string() {
    let (status, info) = json_call(&server(), Method::GET, "/info", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(info["langgraph_py_version"].is_string(), "{info}");
}

#[tokio::test]
async fn an_offset_beyond_64_bits_is_an_empty_page() {
    let app = server();
    new_thread(&app).await;
    // 2^72, a JSON integer too large for 64 bits (the reference answers an empty page).
    let body = r#"{"offset": 4722366482869645213696}"#;
    for uri in ["/threads/search", "/assistants/search"] {
        let req = axum::http::Request::post(uri)
            .header("content-type", "application/json")
            .body(axum::body::Body::from(body))
            .unwrap();
        let res = tower::ServiceExt::oneshot(app.clone(), req).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{uri}");
        let bytes = axum::body::to_bytes(res.into_body(), usize::MAX)
            .await
            .unwrap();
        assert_eq!(serde_json::from_slice::<Json>(&bytes).unwrap(), json!([]));
    }
    refused(
        &app,
        Method::POST,
        "/threads/search",
        json!({"limit": 4.7e21}),
        "limit",
    )
    .await;
}

#[tokio::test]
async fn a_null_store_search_prefix_searches_everything() {
    let app = server();
    let put = json!({"namespace": ["a", "b"], "key": "k", "value": {"v": 1}});
    call(&app, Method::PUT, "/store/items", Some(put)).await;
    let (status, found) = json_call(
        &app,
        Method::POST,
        "/store/items/search",
        Some(json!({"namespace_prefix": null})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{found}");
    assert_eq!(found["items"].as_array().unwrap().len(), 1, "{found}");
}

#[tokio::test]
async fn namespaces_cut_to_depth_0_show_no_server_records() {
    for app in [server(), sqlite_server().await] {
        // The server's own records exist (threads, assistants), the user's store is empty.
        new_thread(&app).await;
        let depth0 = Some(json!({"max_depth": 0}));
        let (status, out) =
            json_call(&app, Method::POST, "/store/namespaces", depth0.clone()).await;
        assert_eq!((status, out), (StatusCode::OK, json!({"namespaces": []})));
        let put = json!({"namespace": ["a", "b"], "key": "k", "value": {"v": 1}});
        call(&app, Method::PUT, "/store/items", Some(put)).await;
        let (_, out) = json_call(&app, Method::POST, "/store/namespaces", depth0).await;
        assert_eq!(out, json!({"namespaces": [[]]}));
    }
}
