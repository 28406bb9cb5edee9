//! Two servers on one SQLite file, as two processes have (each its own checkpointer, store
//! and run queue handle): one that starts while the other executes a run leaves that run
//! alone — it stays `running`, its thread `busy`, and it ends `success` where it runs — and
//! either one answers for the other's runs and threads.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use common::json_call;
use serde_json::json;
use stategraph_checkpoint::{Map, value};
use stategraph_graph::{DynState, END, Reducer, START, Schema, StateGraph};
use stategraph_server::Server;
use stategraph_sqlite::SqliteDatabase;
use tokio::sync::Notify;

/// A server on `url` serving `gate` (START → wait for `gate` → END).
async fn server_on(url: &str, gate: Arc<Notify>) -> Server {
    let mut g =
        StateGraph::<DynState>::with_schema(Schema::new().reducer("bar", Reducer::append()));
    g.add_node("wait", move |_s, _c| {
        let gate = Arc::clone(&gate);
        async move {
            gate.notified().await;
            Ok(Map::from_iter([("bar", value!(["done"]))]))
        }
    });
    g.add_edge(START, "wait").add_edge("wait", END);
    let db = SqliteDatabase::from_url(url).unwrap();
    Server::builder()
        .graph("gate", g.compile().unwrap())
        .fencing_checkpointer(Arc::new(db.saver().connect().await.unwrap()))
        .store(Arc::new(db.store().connect().await.unwrap()))
        .run_queue(db.run_queue().connect().await.unwrap())
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_starts_leaves_the_others_runs_alone() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("two.sqlite").display());
    let gate = Arc::new(Notify::new());
    let first = server_on(&url, Arc::clone(&gate)).await;
    first.start().await.unwrap();
    let a = first.router();
    let (status, thread) = json_call(&a, Method::POST, "/threads", Some(json!({}))).await;
    assert_eq!(status, StatusCode::OK);
    let thread_id = thread["thread_id"].as_str().unwrap().to_owned();
    let body = json!({"assistant_id": "gate", "input": {"bar": []}});
    let runs = format!("/threads/{thread_id}/runs");
    let (status, run) = json_call(&a, Method::POST, &runs, Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{run}");
    let run_path = format!("{runs}/{}", run["run_id"].as_str().unwrap());
    for _ in 0..100 {
        let (_, run) = json_call(&a, Method::GET, &run_path, None).await;
        if run["status"] == "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The second server starts (a process joining, or replacing, the first).
    let second = server_on(&url, Arc::new(Notify::new())).await;
    second.start().await.unwrap();
    let b = second.router();
    let (_, run) = json_call(&b, Method::GET, &run_path, None).await;
    assert_eq!(run["status"], "running", "{run}");
    let (_, thread) = json_call(&b, Method::GET, &format!("/threads/{thread_id}"), None).await;
    assert_eq!(thread["status"], "busy", "{thread}");

    // The run ends where it runs; both servers see it so.
    gate.notify_one();
    let (status, values) = json_call(&b, Method::GET, &format!("{run_path}/join"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(values["bar"], json!(["done"]));
    for app in [&a, &b] {
        let (_, run) = json_call(app, Method::GET, &run_path, None).await;
        assert_eq!(run["status"], "success", "{run}");
        let (_, thread) = json_call(app, Method::GET, &format!("/threads/{thread_id}"), None).await;
        assert_eq!(thread["status"], "idle", "{thread}");
    }
}
