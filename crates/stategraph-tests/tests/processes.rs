//! Real processes: a run killed with SIGKILL mid-step resumes in a fresh process without
//! re-running finished nodes, and two processes racing on one thread never interleave.
//!
//! The child processes are this test binary itself, re-run on `child_process_entry` (with
//! `--ignored --exact`) with `STATEGRAPH_TEST_CHILD` naming the role. That entry is ignored
//! in a normal test run, and fails when run without a role: it never passes having done
//! nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::child::{journal, result_of};

use stategraph::prelude::*;
use stategraph::{CheckpointSaver, Durability};

const ROLE: &str = "STATEGRAPH_TEST_CHILD";
const DIR: &str = "STATEGRAPH_TEST_DIR";

#[derive(State, Clone, Debug, Default)]
struct Log {
    #[reducer(append)]
    log: Vec<String>,
}

fn wait_for(path: &Path, timeout: Duration) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < timeout,
            "timed out waiting for {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// START → a, b, blocker (parallel) → join → end. `blocker` blocks forever when asked to.
fn crash_graph(dir: PathBuf, block: bool) -> StateGraph<Log> {
    let mut g = StateGraph::<Log>::new();
    for name in ["a", "b", "blocker"] {
        let dir = dir.clone();
        g.add_node(name, move |_s, _c| {
            let dir = dir.clone();
            async move {
                journal(&dir, name);
                if name == "blocker" && block {
                    std::fs::write(dir.join("blocking"), b"").unwrap();
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }
                Ok(LogUpdate::default().log([name]))
            }
        });
        g.add_edge(START, name);
    }
    g.add_join(["a", "b", "blocker"], "end");
    let d = dir.clone();
    g.add_node("end", move |s, _c| {
        journal(&d, "end");
        let n = s.log.len();
        async move { Ok(LogUpdate::default().log([format!("end after {n}")])) }
    });
    g
}

/// START → work (waits for the `go` file) → END; the input names the process.
fn race_graph(dir: PathBuf, role: String) -> StateGraph<Log> {
    let mut g = StateGraph::<Log>::new();
    g.add_node("work", move |_s, _c| {
        let (dir, role) = (dir.clone(), role.clone());
        async move {
            std::fs::write(dir.join(format!("{role}.ready")), b"").unwrap();
            wait_for(&dir.join("go"), Duration::from_secs(60));
            Ok(LogUpdate::default().log([format!("work by {role}")]))
        }
    });
    g.add_edge(START, "work");
    g
}

fn db_url(dir: &Path) -> String {
    format!("sqlite:{}", dir.join("threads.sqlite").display())
}

/// The child side: runs the role named in the environment, prints `RESULT <outcome>`.
#[tokio::test]
#[ignore = "the child side of the process tests, which run it with a role; not a test itself"]
async fn child_process_entry() {
    let (Ok(role), Ok(dir)) = (std::env::var(ROLE), std::env::var(DIR)) else {
        panic!("run only by the process tests, with {ROLE} and {DIR} set");
    };
    let dir = PathBuf::from(dir);
    let saver = stategraph::open_saver(&db_url(&dir)).await.unwrap();
    let config = RunConfig::thread("t").with_durability(Durability::Sync);
    let outcome = match role.as_str() {
        "crash" => {
            let g = crash_graph(dir, true)
                .compile()
                .unwrap()
                .with_checkpointer(saver);
            g.invoke_values(LogUpdate::default(), config)
                .await
                .map(drop)
        }
        "resume" => {
            let g = crash_graph(dir, false)
                .compile()
                .unwrap()
                .with_checkpointer(saver);
            g.continue_values(config).await.map(drop)
        }
        who => {
            let g = race_graph(dir, who.to_owned())
                .compile()
                .unwrap()
                .with_checkpointer(saver);
            let input = LogUpdate::default().log([format!("input by {who}")]);
            g.invoke_values(input, config).await.map(drop)
        }
    };
    match outcome {
        Ok(()) => println!("RESULT ok"),
        Err(e) if e.is_conflict() => println!("RESULT conflict"),
        Err(e) => println!("RESULT error {e}"),
    }
}

fn spawn_child(role: &str, dir: &Path) -> Child {
    common::child::spawn_entry(
        "child_process_entry",
        &[(ROLE, role.as_ref()), (DIR, dir.as_os_str())],
    )
}

fn journal_counts(dir: &Path) -> std::collections::BTreeMap<String, usize> {
    let mut m = std::collections::BTreeMap::new();
    for line in std::fs::read_to_string(dir.join("journal"))
        .unwrap_or_default()
        .lines()
    {
        *m.entry(line.to_owned()).or_default() += 1;
    }
    m
}

#[tokio::test]
async fn sigkill_mid_step_then_resume_in_a_fresh_process() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn_child("crash", dir.path());
    wait_for(&dir.path().join("blocking"), Duration::from_secs(60));
    // `a` and `b` finish almost at once; their writes are saved as each finishes.
    let start = Instant::now();
    while journal_counts(dir.path()).len() < 3 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let saver = stategraph::SqliteConfig::file(dir.path().join("threads.sqlite"))
        .connect()
        .await
        .unwrap();
    let before = saver
        .get_tuple(&stategraph::CheckpointConfig::new("t"))
        .await
        .unwrap()
        .unwrap();
    let finished: Vec<&str> = before
        .pending_writes
        .iter()
        .filter(|w| w.channel == "log")
        .map(|w| w.task_path.as_str())
        .collect();
    assert_eq!(
        finished,
        ["~__pregel_pull, a", "~__pregel_pull, b"],
        "the finished tasks' writes survived the kill"
    );

    assert_eq!(result_of(spawn_child("resume", dir.path())), "ok");
    let counts = journal_counts(dir.path());
    assert_eq!(counts["a"], 1, "{counts:?}");
    assert_eq!(counts["b"], 1, "{counts:?}");
    assert_eq!(
        counts["blocker"], 2,
        "the killed task ran again; {counts:?}"
    );
    assert_eq!(counts["end"], 1, "{counts:?}");

    // The same final state as an uninterrupted run.
    let clean_dir = tempfile::tempdir().unwrap();
    let clean = crash_graph(clean_dir.path().to_path_buf(), false)
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(InMemorySaver::new()));
    let expected = clean
        .invoke_values(LogUpdate::default(), RunConfig::thread("t"))
        .await
        .unwrap();
    let resumed = crash_graph(dir.path().to_path_buf(), false)
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(saver));
    let state = resumed.get_state(&RunConfig::thread("t")).await.unwrap();
    assert_eq!(state.values, expected);
}

#[tokio::test]
async fn two_processes_racing_on_one_thread() {
    let dir = tempfile::tempdir().unwrap();
    let first = spawn_child("first", dir.path());
    wait_for(&dir.path().join("first.ready"), Duration::from_secs(60));
    let second = spawn_child("second", dir.path());
    wait_for(&dir.path().join("second.ready"), Duration::from_secs(60));
    std::fs::write(dir.path().join("go"), b"").unwrap();
    // The second process started from the first one's latest checkpoint and saved after it,
    // so the first one's next save finds the thread moved on.
    assert_eq!(result_of(first), "conflict");
    assert_eq!(result_of(second), "ok");

    let saver = stategraph::SqliteConfig::file(dir.path().join("threads.sqlite"))
        .connect()
        .await
        .unwrap();
    let all = saver.list(&ListOptions::thread("t")).await.unwrap();
    let mut children = std::collections::BTreeMap::new();
    for t in &all {
        if let Some(p) = t
            .parent_config
            .as_ref()
            .and_then(|p| p.checkpoint_id.clone())
        {
            *children.entry(p).or_insert(0) += 1;
        }
    }
    assert!(
        children.values().all(|n| *n == 1),
        "no branch: {children:?}"
    );
    let g = race_graph(dir.path().to_path_buf(), String::new())
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(saver));
    let log = g.get_state(&RunConfig::thread("t")).await.unwrap().values["log"].clone();
    assert_eq!(
        log,
        value!(["input by first", "input by second", "work by second"])
    );
}
