//! An Agent Server killed with SIGKILL mid-run, restarted on the same SQLite file: the run is
//! `error` (a run left running by a process that ended failed; LangGraph's Postgres-backed
//! server would retry it, its in-memory one keeps nothing), the thread is not stuck `busy`,
//! and the checkpoints the run committed before the kill read fine.
//!
//! The server processes are this test binary itself, re-run on `server_process_entry` (with
//! `--ignored --exact`) with `STATEGRAPH_TEST_SERVER_DIR` set. That entry is ignored in a
//! normal test run, and fails when run without it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use stategraph::prelude::*;
use stategraph::server::Server;

#[path = "common/http.rs"]
mod http;
use http::call;

const DIR: &str = "STATEGRAPH_TEST_SERVER_DIR";

#[derive(State, Clone, Debug, Default)]
struct Log {
    #[reducer(append)]
    bar: Vec<String>,
}

/// START → first → slow (sleeps an hour) → END.
fn graph() -> CompiledGraph<Log> {
    let mut g = StateGraph::<Log>::new();
    g.add_node("first", |_s, _c| async {
        Ok(LogUpdate::default().bar(["first"]))
    });
    g.add_node("slow", |_s, _c| async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
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
    let saver = stategraph::open_saver(&db).await.unwrap();
    let store = stategraph::open_store(&db, StoreOptions::new())
        .await
        .unwrap();
    let server = Server::builder()
        .graph("slow", graph())
        .checkpointer(saver)
        .store(store)
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let tmp = dir.join("port.tmp");
    std::fs::write(&tmp, port.to_string()).unwrap();
    std::fs::rename(tmp, dir.join("port")).unwrap();
    server.serve(listener).await.unwrap();
}

/// Starts a server process on `dir`; it and its port.
fn spawn_server(dir: &Path) -> (Killed, u16) {
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

/// Polls `f` until it answers `Some`, for up to 10 seconds.
fn poll<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
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
fn a_server_killed_mid_run_restarts_with_the_run_failed_and_the_checkpoints_intact() {
    let dir = tempfile::tempdir().unwrap();
    let (mut first, port) = spawn_server(dir.path());

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

    // SIGKILL (`Child::kill` on Unix), then a new server on the same file.
    first.0.kill().unwrap();
    first.0.wait().unwrap();
    let (_second, port) = spawn_server(dir.path());

    let (status, run) = call(port, "GET", &run_path, None);
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["status"], "error", "{run}");
    let (_, thread) = call(port, "GET", &format!("/threads/{thread_id}"), None);
    assert_ne!(thread["status"], "busy", "{thread}");
    let (status, state) = call(port, "GET", &state_path, None);
    assert_eq!(status, 200, "{state}");
    assert_eq!(state["values"]["bar"], json!(["first"]), "{state}");
    assert_eq!(state["next"], json!(["slow"]), "{state}");
    let (status, history) = call(
        port,
        "POST",
        &format!("/threads/{thread_id}/history"),
        Some(json!({"limit": 10})),
    );
    assert_eq!(status, 200, "{history}");
    // The run's input, `first`'s step and the checkpoint before `slow`.
    assert!(history.as_array().unwrap().len() >= 2, "{history}");
    // The thread takes a new run: nothing is left holding it.
    let (status, run) = call(
        port,
        "POST",
        &format!("/threads/{thread_id}/runs"),
        Some(json!({"assistant_id": "slow", "input": {}})),
    );
    assert_eq!(status, 200, "{run}");
}
