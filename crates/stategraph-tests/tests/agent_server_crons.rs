//! Crons with three Agent Server processes on one PostgreSQL schema (saver, store and run
//! queue): a thread cron every second for about forty seconds, one process killed with
//! SIGKILL and started again halfway. Every tick of the schedule created one run, whichever
//! processes saw it due: the ticks claimed are consecutive seconds (none lost), the runs are
//! as many as the ticks (none twice), and each run appended its entry to the thread once.
//!
//! The server processes are this test binary itself, re-run on `cron_server_process` (with
//! `--ignored --exact`) with `STATEGRAPH_TEST_CRON_URL` set, as in `agent_server_scale.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value as Json, json};
use stategraph::prelude::*;
use stategraph::server::Server;
use stategraph_testkit::postgres::ScratchSchema;

#[path = "common/http.rs"]
mod http;
#[path = "common/procs.rs"]
mod procs;
use http::call;
use procs::{Killed, serve_announced, spawn_entry};

const URL: &str = "STATEGRAPH_TEST_CRON_URL";
const SCHEMA: &str = "STATEGRAPH_TEST_CRON_SCHEMA";
const PORT_FILE: &str = "STATEGRAPH_TEST_CRON_PORT_FILE";

const PROCESSES: usize = 3;

#[derive(State, Clone, Debug, Default)]
struct Log {
    #[reducer(append)]
    log: Vec<String>,
}

/// START → tick → END: appends the run's id.
fn graph() -> CompiledGraph<Log> {
    let mut g = StateGraph::<Log>::new();
    g.add_node("tick", |_s, c| {
        let run = c
            .configurable("run_id")
            .and_then(Json::as_str)
            .unwrap_or("?")
            .to_owned();
        async move { Ok(LogUpdate::default().log([run])) }
    });
    g.add_edge(START, "tick").add_edge("tick", END);
    g.compile().unwrap()
}

/// The server side: serves `graph` as `ticks` with the Postgres queue, looking for due crons
/// every 100 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a server process of the cron test, run by it"]
async fn cron_server_process() {
    let (Ok(url), Ok(schema), Ok(port_file)) = (
        std::env::var(URL),
        std::env::var(SCHEMA),
        std::env::var(PORT_FILE),
    ) else {
        panic!("run only by the cron test, with {URL} set");
    };
    // Saver, store and queue built from one database handle (one pool; fenced writes).
    let db = stategraph::PostgresConfig::from_url(&url)
        .unwrap()
        .schema(&schema)
        .open()
        .unwrap();
    let saver = Arc::new(db.saver().connect().await.unwrap());
    let store = Arc::new(db.store().connect().await.unwrap());
    let queue = db
        .run_queue()
        .lease(Duration::from_secs(2))
        .connect()
        .await
        .unwrap();
    let server = Server::builder()
        .graph("ticks", graph())
        .fencing_checkpointer(saver)
        .store(store)
        .run_queue(queue)
        .workers(2)
        .cron_poll(Duration::from_millis(100))
        .build()
        .unwrap();
    serve_announced(server, &PathBuf::from(port_file)).await;
}

fn spawn_server(dir: &Path, url: &str, schema: &str, i: usize) -> (Killed, u16) {
    let port_file = dir.join(format!("port-{i}"));
    let env = [
        (URL, url),
        (SCHEMA, schema),
        (PORT_FILE, port_file.to_str().unwrap()),
    ];
    spawn_entry("cron_server_process", &env, &port_file)
}

#[test]
fn an_every_second_cron_fires_each_tick_once_across_three_processes_and_a_kill() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let schema = rt.block_on(ScratchSchema::create("crons"));
    let (url, name) = (schema.url(), schema.name().to_owned());
    let dir = tempfile::tempdir().unwrap();
    let mut servers: Vec<(Killed, u16)> = (0..PROCESSES)
        .map(|i| spawn_server(dir.path(), &url, &name, i))
        .collect();
    let port = servers[0].1;

    let (status, thread) = call(port, "POST", "/threads", Some(json!({})));
    assert_eq!(status, 200, "{thread}");
    let thread_id = thread["thread_id"].as_str().unwrap().to_owned();
    let (status, cron) = call(
        servers[1].1,
        "POST",
        &format!("/threads/{thread_id}/runs/crons"),
        Some(json!({
            "assistant_id": "ticks",
            "schedule": "* * * * * *",
            "input": {"log": []},
        })),
    );
    assert_eq!(status, 200, "{cron}");
    let cron_id = cron["cron_id"].as_str().unwrap().to_owned();

    std::thread::sleep(Duration::from_secs(20));
    // Kill one process (not the one the test talks to) and start it again.
    let killed = servers.remove(2);
    drop(killed);
    std::thread::sleep(Duration::from_secs(3));
    servers.push(spawn_server(dir.path(), &url, &name, 2));
    std::thread::sleep(Duration::from_secs(17));

    // Stop the schedule, then let the last runs finish.
    let (status, patched) = call(
        port,
        "PATCH",
        &format!("/runs/crons/{cron_id}"),
        Some(json!({"enabled": false})),
    );
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["enabled"], false);
    std::thread::sleep(Duration::from_secs(3));

    let db = rt.block_on(stategraph_testkit::postgres::in_schema(&name));
    let ticks: Vec<i64> = rt
        .block_on(db.query(
            "SELECT split_part(key, ':', 3)::bigint FROM stategraph_run_claims \
             WHERE key LIKE 'cron:' || $1 || ':%' ORDER BY 1",
            &[&cron_id],
        ))
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(ticks.len() >= 35, "about forty ticks: {}", ticks.len());
    for pair in ticks.windows(2) {
        assert_eq!(
            pair[1] - pair[0],
            1_000_000,
            "consecutive seconds: {ticks:?}"
        );
    }
    let runs: Vec<(String, String)> = rt
        .block_on(db.query(
            "SELECT run_id, status FROM stategraph_runs WHERE thread_id = $1 ORDER BY seq",
            &[&thread_id],
        ))
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(runs.len(), ticks.len(), "one run a tick");
    assert!(
        runs.iter().all(|(_, s)| s == "success"),
        "every run succeeded: {runs:?}"
    );
    let (status, state) = call(port, "GET", &format!("/threads/{thread_id}/state"), None);
    assert_eq!(status, 200, "{state}");
    let mut logged: Vec<String> = state["values"]["log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(logged.len(), runs.len(), "each run's node once");
    logged.sort();
    let mut ids: Vec<String> = runs.into_iter().map(|(id, _)| id).collect();
    ids.sort();
    assert_eq!(logged, ids);
    // The runs carry the cron's id, as the reference's do.
    let (status, listed) = call(
        port,
        "GET",
        &format!("/threads/{thread_id}/runs?limit=1"),
        None,
    );
    assert_eq!(status, 200);
    assert_eq!(
        listed[0]["kwargs"]["config"]["configurable"]["cron_id"],
        json!(cron_id)
    );
    drop(servers);
}
