//! `exit` durability stores one checkpoint per run, as Python LangGraph does: its parent is
//! the checkpoint the run started from (none on a new thread), never a checkpoint that was
//! not stored; and a run with nothing to do stores nothing — a stored checkpoint is never
//! rewritten under its own id.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use stategraph::prelude::*;
use stategraph::{CheckpointSaver, CheckpointTuple, Durability, ListOptions};

#[derive(State, Clone, Debug, Default)]
struct Seed {
    foo: String,
    #[reducer(append)]
    bar: Vec<String>,
}

fn seed_graph(saver: Arc<dyn CheckpointSaver>) -> CompiledGraph<Seed> {
    let mut g = StateGraph::<Seed>::new();
    g.add_node("node_a", |_s, _c| async {
        Ok(SeedUpdate::default().foo("a").bar(["a"]))
    });
    g.add_node("node_b", |_s, _c| async {
        Ok(SeedUpdate::default().foo("b").bar(["b"]))
    });
    g.add_edge(START, "node_a")
        .add_edge("node_a", "node_b")
        .add_edge("node_b", END);
    g.compile().unwrap().with_checkpointer(saver)
}

fn exit(thread: &str) -> RunConfig {
    let mut config = RunConfig::thread(thread);
    config.durability = Durability::Exit;
    config
}

async fn stored(saver: &Arc<dyn CheckpointSaver>, thread: &str) -> Vec<CheckpointTuple> {
    saver.list(&ListOptions::thread(thread)).await.unwrap()
}

/// Every stored checkpoint's parent is stored too.
fn parents_are_stored(tuples: &[CheckpointTuple]) {
    for t in tuples {
        if let Some(parent) = &t.parent_config {
            let id = parent.checkpoint_id.as_deref().unwrap();
            assert!(
                tuples.iter().any(|p| p.checkpoint.id == id),
                "{} names parent {id}, which was never stored",
                t.checkpoint.id
            );
            assert_ne!(id, t.checkpoint.id, "a checkpoint is not its own parent");
        }
    }
}

async fn one_checkpoint_per_run_with_a_stored_parent(saver: Arc<dyn CheckpointSaver>) {
    let g = seed_graph(Arc::clone(&saver));
    g.invoke_values(SeedUpdate::default().foo(""), exit("t"))
        .await
        .unwrap();
    let first = stored(&saver, "t").await;
    assert_eq!(first.len(), 1);
    assert_eq!(
        first[0].parent_config, None,
        "a new thread's first checkpoint has no parent"
    );
    assert_eq!(first[0].metadata.step, Some(2));

    g.invoke_values(SeedUpdate::default().foo("x"), exit("t"))
        .await
        .unwrap();
    let second = stored(&saver, "t").await;
    assert_eq!(second.len(), 2);
    assert_eq!(
        second[0]
            .parent_config
            .as_ref()
            .and_then(|p| p.checkpoint_id.as_deref()),
        Some(first[0].checkpoint.id.as_str()),
        "the run's checkpoint follows the one it started from"
    );
    parents_are_stored(&second);
}

async fn a_run_with_nothing_to_do_rewrites_nothing(saver: Arc<dyn CheckpointSaver>) {
    let g = seed_graph(Arc::clone(&saver));
    g.invoke_values(SeedUpdate::default().foo(""), exit("done"))
        .await
        .unwrap();
    let before = stored(&saver, "done").await;
    // The thread has finished: continuing it runs nothing, under any durability.
    for d in [Durability::Exit, Durability::Async, Durability::Sync] {
        let mut config = RunConfig::thread("done");
        config.durability = d;
        let out = g.continue_values(config).await.unwrap();
        assert_eq!(out["bar"], value!(["a", "b"]));
    }
    let after = stored(&saver, "done").await;
    assert_eq!(
        after, before,
        "the finished thread's checkpoint is untouched"
    );
    parents_are_stored(&after);
    assert_eq!(
        after[0].metadata.source,
        Some(stategraph::CheckpointSource::Loop)
    );
    assert_eq!(after[0].metadata.step, Some(2));
}

async fn an_interrupted_exit_run_resumes_onto_its_checkpoint(saver: Arc<dyn CheckpointSaver>) {
    let g = seed_graph(Arc::clone(&saver)).with_interrupt_before(["node_b"]);
    g.invoke_values(SeedUpdate::default().foo(""), exit("hitl"))
        .await
        .unwrap();
    assert_eq!(stored(&saver, "hitl").await.len(), 1);
    let out = g.continue_values(exit("hitl")).await.unwrap();
    assert_eq!(out["bar"], value!(["a", "b"]));
    let all = stored(&saver, "hitl").await;
    assert_eq!(all.len(), 2);
    parents_are_stored(&all);
}

on_every_saver!(
    one_checkpoint_per_run_with_a_stored_parent,
    a_run_with_nothing_to_do_rewrites_nothing,
    an_interrupted_exit_run_resumes_onto_its_checkpoint,
);
