//! Durable functions under SIGKILL: a workflow of ten parallel tasks, killed at spread-out
//! points, twenty times per durability mode, each time continued by a new process. Every
//! task's side effect is counted. A task whose result was saved when the process died never
//! runs again. Under `sync` durability a task whose result was not saved runs once more at
//! most. Every task runs at least once, and every workflow finishes with the right value.
//!
//! The child processes are this test binary itself, re-run on `child_entry` (with
//! `--ignored --exact`) with `STATEGRAPH_FUNC_ROLE` naming the role. That entry is ignored in
//! a normal test run, and fails when run without a role.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use common::child::{journal, result_of};

use stategraph::functional::{Entrypoint, Outcome, entrypoint, task};
use stategraph::prelude::*;
use stategraph::{CheckpointSaver, Durability};

const ROLE: &str = "STATEGRAPH_FUNC_ROLE";
const DIR: &str = "STATEGRAPH_FUNC_DIR";
const THREAD: &str = "STATEGRAPH_FUNC_THREAD";
const DURABILITY: &str = "STATEGRAPH_FUNC_DURABILITY";
const ITEMS: u32 = 10;

/// How often each item's task ran on `thread`.
fn runs(dir: &Path, thread: &str) -> BTreeMap<u32, usize> {
    let text = std::fs::read_to_string(dir.join("journal")).unwrap_or_default();
    let mut counts = BTreeMap::new();
    for line in text.lines() {
        if let Some((t, item)) = line.split_once(' ')
            && t == thread
        {
            *counts.entry(item.parse().unwrap()).or_default() += 1;
        }
    }
    counts
}

/// Ten tasks started at once; task `i` journals, takes a while and returns `i * i`.
fn workflow(dir: PathBuf, thread: String) -> Entrypoint<u32, u32> {
    let work = task("work", move |i: u32, _ctx| {
        journal(&dir, &format!("{thread} {i}"));
        async move {
            tokio::time::sleep(Duration::from_millis(u64::from(30 + (i * 17) % 70))).await;
            Ok(i * i)
        }
    });
    entrypoint("workflow", move |n: u32, ctx| {
        let calls: Vec<_> = (1..=n).map(|i| work.call(&ctx, i)).collect();
        async move {
            let mut sum = 0;
            for c in calls {
                sum += c.await?;
            }
            Ok(sum)
        }
    })
}

fn db_url(dir: &Path) -> String {
    format!("sqlite:{}", dir.join("threads.sqlite").display())
}

/// The child side: starts or continues the workflow, prints `RESULT <outcome>`.
#[tokio::test]
#[ignore = "the child side of the kill trial, which runs it with a role; not a test itself"]
async fn child_entry() {
    let (Ok(role), Ok(dir), Ok(thread), Ok(durability)) = (
        std::env::var(ROLE),
        std::env::var(DIR),
        std::env::var(THREAD),
        std::env::var(DURABILITY),
    ) else {
        panic!("run only by the kill trial, with {ROLE}, {DIR}, {THREAD} and {DURABILITY} set");
    };
    let dir = PathBuf::from(dir);
    let saver = stategraph::open_saver(&db_url(&dir)).await.unwrap();
    let durability = match durability.as_str() {
        "sync" => Durability::Sync,
        _ => Durability::Async,
    };
    let wf = workflow(dir, thread.clone()).with_checkpointer(saver);
    let config = RunConfig::thread(thread).with_durability(durability);
    let outcome = match role.as_str() {
        "start" => wf.invoke(ITEMS, config).await,
        _ => wf.continue_run(config).await,
    };
    match outcome {
        Ok(Outcome::Done(v)) => println!("RESULT done {v}"),
        Ok(Outcome::Interrupted(_)) => println!("RESULT interrupted"),
        Err(e) => println!("RESULT error {e}"),
    }
}

fn spawn_child(role: &str, dir: &Path, thread: &str, durability: &str) -> Child {
    common::child::spawn_entry(
        "child_entry",
        &[
            (ROLE, role.as_ref()),
            (DIR, dir.as_os_str()),
            (THREAD, thread.as_ref()),
            (DURABILITY, durability.as_ref()),
        ],
    )
}

/// The items whose result is saved on `thread` (a `__return__` write of `i * i`).
async fn saved_items(saver: &dyn CheckpointSaver, thread: &str) -> Vec<u32> {
    let mut items = Vec::new();
    for t in saver.list(&ListOptions::thread(thread)).await.unwrap() {
        for w in &t.pending_writes {
            if w.channel == "__return__" {
                let square = w.value.as_i64().unwrap();
                items.extend((1..=ITEMS).filter(|i| i64::from(i * i) == square));
            }
        }
    }
    items.sort_unstable();
    items.dedup();
    items
}

/// Twenty kills at spread-out points of one durability mode; what was saved at each kill.
async fn trial(durability: &str) {
    let dir = tempfile::tempdir().unwrap();
    let saver = stategraph::open_saver(&db_url(dir.path())).await.unwrap();
    let mut midway = 0;
    // Per trial: results saved at the kill, tasks run before it, tasks run again after it.
    let mut counted = Vec::new();
    for n in 0..20u64 {
        let thread = format!("{durability}-{n}");
        let mut child = spawn_child("start", dir.path(), &thread, durability);
        // Once the tasks have started (their side effects come first), at offsets spread
        // over the 30–99 ms they take to finish; a few trials kill before they start.
        if n % 5 != 0 {
            let started = std::time::Instant::now();
            while runs(dir.path(), &thread).is_empty() {
                assert!(
                    started.elapsed() < Duration::from_secs(20),
                    "{thread}: no task started"
                );
                std::thread::sleep(Duration::from_millis(2));
            }
            std::thread::sleep(Duration::from_millis(25 + (n * 37) % 85));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let before = runs(dir.path(), &thread);
        let saved = saved_items(saver.as_ref(), &thread).await;
        if !saved.is_empty() && saved.len() < ITEMS as usize {
            midway += 1;
        }
        // Continue in a new process (start again if the kill came before the input was
        // saved).
        let mut result = result_of(spawn_child("continue", dir.path(), &thread, durability));
        if result.starts_with("error") {
            assert!(saved.is_empty(), "{thread}: continuing failed: {result}");
            result = result_of(spawn_child("start", dir.path(), &thread, durability));
        }
        assert_eq!(result, "done 385", "{thread}");
        let after = runs(dir.path(), &thread);
        counted.push((
            saved.len(),
            before.len(),
            (1..=ITEMS)
                .filter(|i| {
                    after[i] > before.get(i).copied().unwrap_or(0) && before.contains_key(i)
                })
                .count(),
        ));
        for i in 1..=ITEMS {
            let (b, a) = (before.get(&i).copied().unwrap_or(0), after[&i]);
            if saved.contains(&i) {
                assert_eq!(
                    (b, a),
                    (1, 1),
                    "{thread}: item {i}'s result was saved, yet it ran again"
                );
            } else if durability == "sync" {
                assert!(
                    a <= b + 1,
                    "{thread}: item {i} ran {a} times ({b} before the kill)"
                );
            }
            assert!(a >= 1, "{thread}: item {i} never ran");
        }
    }
    eprintln!("{durability}: (saved at the kill, run before it, run again) per trial: {counted:?}");
    // The kills did land while tasks were finishing, not only before or after.
    assert!(
        midway >= 8,
        "{durability}: only {midway} of 20 kills landed midway"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_workflows_never_rerun_saved_tasks_sync() {
    trial("sync").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_workflows_never_rerun_saved_tasks_async() {
    trial("async").await;
}
