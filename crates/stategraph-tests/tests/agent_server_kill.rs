//! An Agent Server killed with SIGKILL mid-run, restarted on the same SQLite file: the run
//! queue in the file still has the run; once the dead process's lease on it ran out, the new
//! process takes it over from its last checkpoint (the step that finished before the kill is
//! not run again) and it succeeds, as LangGraph's Postgres-backed server retries it. The
//! thread reads `busy` meanwhile, then `idle` with the run's values.
//!
//! The server processes are this test binary itself, re-run on `server_process_entry` (with
//! `--ignored --exact`) with `STATEGRAPH_TEST_SERVER_DIR` set. That entry is ignored in a
//! normal test run, and fails when run without it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use stategraph::prelude::*;
use stategraph::server::Server;

#[path = "common/http.rs"]
mod http;
use http::call;

const DIR: &str = "STATEGRAPH_TEST_SERVER_DIR";
/// How long the `slow` node sleeps in a server process, in milliseconds (an hour unless
/// set).
const SLOW_MS: &str = "STATEGRAPH_TEST_SLOW_MS";

/// The lease of the server processes' run queue: a dead process's run is taken over this
/// long after its last heartbeat.
const LEASE: Duration = Duration::from_secs(1);

#[derive(State, Clone, Debug, Default)]
struct Log {
    #[reducer(append)]
    bar: Vec<String>,
}

/// START → first → slow (sleeps `STATEGRAPH_TEST_SLOW_MS`) → END.
fn graph() -> CompiledGraph<Log> {
    let mut g = StateGraph::<Log>::new();
    g.add_node("first", |_s, _c| async {
        Ok(LogUpdate::default().bar(["first"]))
    });
    g.add_node("slow", |_s, _c| async {
        let ms = std::env::var(SLOW_MS).map_or(3_600_000, |v| v.parse().unwrap());
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(LogUpdate::default().bar(["slow"]))
    });
    g.add_edge(START, "first")
        .add_edge("first", "slow")
        .add_edge("slow", END);
    g.compile().unwrap()
}

/// The server side: serves `graph` as `slow` on the directory's SQLite file, on a free port
/// it writes to the file `port`.
#[tokio::test]
#[ignore = "the server side of the kill test, which runs it; not a test itself"]
async fn server_process_entry() {
    let Ok(dir) = std::env::var(DIR) else {
        panic!("run only by the kill test, with {DIR} set");
    };
    let dir = PathBuf::from(dir);
    let db = format!("sqlite:{}", dir.join("server.sqlite").display());
    // Saver, store and queue built from one database handle (one writer; fenced writes).
    let db = stategraph::SqliteDatabase::from_url(&db).unwrap();
    let saver = Arc::new(db.saver().connect().await.unwrap());
    let store = Arc::new(db.store().connect().await.unwrap());
    let queue = db.run_queue().lease(LEASE).connect().await.unwrap();
    let server = Server::builder()
        .graph("slow", graph())
        .fencing_checkpointer(saver)
        .store(store)
        .run_queue(queue)
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let tmp = dir.join("port.tmp");
    std::fs::write(&tmp, port.to_string()).unwrap();
    std::fs::rename(tmp, dir.join("port")).unwrap();
    server.serve(listener).await.unwrap();
}

/// Starts a server process on `dir` whose `slow` node sleeps `slow`; it and its port.
fn spawn_server(dir: &Path, slow: Duration) -> (Killed, u16) {
    let _ = std::fs::remove_file(dir.join("port"));
    let child = Killed(
        Command::new(std::env::current_exe().unwrap())
            .args([
                "server_process_entry",
                "--ignored",
                "--exact",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(DIR, dir)
            .env(SLOW_MS, slow.as_millis().to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(p) = std::fs::read_to_string(dir.join("port")) {
            return (child, p.trim().parse().unwrap());
        }
        assert!(Instant::now() < deadline, "the server did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Polls `f` until it answers `Some`, for up to 20 seconds.
fn poll<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kills the child on drop, so a failing test leaves no server behind.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_run_whose_server_was_killed_is_taken_over_by_the_next_one_from_its_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let (mut first, port) = spawn_server(dir.path(), Duration::from_secs(3600));

    let (status, thread) = call(port, "POST", "/threads", Some(json!({})));
    assert_eq!(status, 200, "{thread}");
    let thread_id = thread["thread_id"].as_str().unwrap().to_owned();
    let (status, run) = call(
        port,
        "POST",
        &format!("/threads/{thread_id}/runs"),
        Some(json!({"assistant_id": "slow", "input": {}})),
    );
    assert_eq!(status, 200, "{run}");
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    let run_path = format!("/threads/{thread_id}/runs/{run_id}");
    let state_path = format!("/threads/{thread_id}/state");
    // Running, with `first`'s checkpoint committed (next: `slow`).
    poll("the run to be running past `first`", || {
        let (_, run) = call(port, "GET", &run_path, None);
        let (_, state) = call(port, "GET", &state_path, None);
        (run["status"] == "running" && state["next"] == json!(["slow"])).then_some(())
    });

    // SIGKILL (`Child::kill` on Unix), then a new server on the same file, whose `slow` is
    // quick.
    first.0.kill().unwrap();
    first.0.wait().unwrap();
    let (_second, port) = spawn_server(dir.path(), Duration::ZERO);
    let (_, thread) = call(port, "GET", &format!("/threads/{thread_id}"), None);
    assert_eq!(
        thread["status"], "busy",
        "the run is still the queue's: {thread}"
    );

    // Once the dead process's lease ran out, the new one carries the run on.
    let run = poll("the run to be taken over and to succeed", || {
        let (_, run) = call(port, "GET", &run_path, None);
        (run["status"] != "running" && run["status"] != "pending").then_some(run)
    });
    assert_eq!(run["status"], "success", "{run}");
    assert_eq!(
        run["kwargs"]["config"]["metadata"]["run_attempt"], 2,
        "{run}"
    );
    let (_, thread) = call(port, "GET", &format!("/threads/{thread_id}"), None);
    assert_eq!(thread["status"], "idle", "{thread}");
    // `first` ran once: the takeover went on from its checkpoint.
    assert_eq!(
        thread["values"]["bar"],
        json!(["first", "slow"]),
        "{thread}"
    );
    let (status, state) = call(port, "GET", &state_path, None);
    assert_eq!(status, 200, "{state}");
    assert_eq!(state["next"], json!([]), "{state}");
    // The thread takes a new run: nothing is left holding it.
    let (status, run) = call(
        port,
        "POST",
        &format!("/threads/{thread_id}/runs/wait"),
        Some(json!({"assistant_id": "slow", "input": {}})),
    );
    assert_eq!(status, 200, "{run}");
    assert_eq!(
        run["bar"],
        json!(["first", "slow", "first", "slow"]),
        "{run}"
    );
}
