//! One run per thread at a time: concurrent runs on one thread never interleave. Each run
//! saves its checkpoints on condition that the thread has not moved on since it last looked
//! (`CheckpointSaver::put_if_latest`); the loser gets a `Conflict`. Runs that ask to queue
//! wait for each other instead (within one process).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use stategraph::prelude::*;
use stategraph::{CheckpointSaver, CheckpointTuple};

#[derive(State, Clone, Debug, Default)]
struct Log {
    #[reducer(append)]
    log: Vec<String>,
}

fn graph(saver: Arc<dyn CheckpointSaver>) -> CompiledGraph<Log> {
    let mut g = StateGraph::<Log>::new();
    for (name, next) in [("one", "two"), ("two", END)] {
        g.add_node(name, move |_s, ctx| async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            let who = ctx
                .configurable("who")
                .and_then(|v| v.as_str())
                .unwrap_or("?")
                .to_owned();
            Ok(LogUpdate::default().log([format!("{name} by {who}")]))
        });
        g.add_edge(name, next);
    }
    g.add_edge(START, "one");
    g.compile().unwrap().with_checkpointer(saver)
}

/// The thread's checkpoints form one chain: no checkpoint has two children.
async fn assert_linear(saver: &dyn CheckpointSaver, thread: &str) -> Vec<CheckpointTuple> {
    let all = saver.list(&ListOptions::thread(thread)).await.unwrap();
    let mut children: BTreeMap<CheckpointId, usize> = BTreeMap::new();
    for t in &all {
        if let Some(p) = t
            .parent_config
            .as_ref()
            .and_then(|p| p.checkpoint_id.clone())
        {
            *children.entry(p).or_default() += 1;
        }
    }
    assert!(
        children.values().all(|n| *n == 1),
        "the history branched: {children:?}"
    );
    all
}

on_every_saver!(
    racing_runs_one_wins_the_other_conflicts,
    queued_runs_take_turns
);

async fn racing_runs_one_wins_the_other_conflicts(saver: Arc<dyn CheckpointSaver>) {
    let g = graph(Arc::clone(&saver));
    let config = |who: &str| RunConfig::thread("race").with_configurable("who", who);
    let input = |who: &str| LogUpdate::default().log([format!("input by {who}")]);
    let (a, b) = tokio::join!(
        g.invoke(input("a"), config("a")),
        g.invoke(input("b"), config("b"))
    );
    let outcomes = [&a, &b];
    assert_eq!(
        outcomes.iter().filter(|r| r.is_ok()).count(),
        1,
        "{a:?} {b:?}"
    );
    let loser = outcomes.iter().find_map(|r| r.as_ref().err()).unwrap();
    assert!(loser.is_conflict(), "{loser}");

    // The thread went through each step once: a single chain, and the winner's nodes ran
    // once each in the final state.
    assert_linear(saver.as_ref(), "race").await;
    let winner = if a.is_ok() { "a" } else { "b" };
    let log = g
        .get_state(&RunConfig::thread("race"))
        .await
        .unwrap()
        .values["log"]
        .clone();
    let entries: Vec<String> = log
        .as_list()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    for node in ["one", "two"] {
        let ran: Vec<_> = entries.iter().filter(|e| e.starts_with(node)).collect();
        assert_eq!(ran, [&format!("{node} by {winner}")], "{entries:?}");
    }
}

async fn queued_runs_take_turns(saver: Arc<dyn CheckpointSaver>) {
    let g = graph(Arc::clone(&saver));
    let config = |who: &str| {
        let mut c = RunConfig::thread("queue").with_configurable("who", who);
        c.queue = true;
        c
    };
    let input = |who: &str| LogUpdate::default().log([format!("input by {who}")]);
    let (a, b) = tokio::join!(
        g.invoke(input("a"), config("a")),
        g.invoke(input("b"), config("b"))
    );
    a.unwrap();
    b.unwrap();
    let all = assert_linear(saver.as_ref(), "queue").await;
    assert_eq!(all.len(), 8, "two complete runs, one after the other");
    let log = g
        .get_state(&RunConfig::thread("queue"))
        .await
        .unwrap()
        .values["log"]
        .clone();
    assert_eq!(log.as_list().unwrap().len(), 6);
}
