//! Pending writes and retries: a failed super-step resumes without re-running the nodes that
//! succeeded — on every saver (memory, SQLite, Postgres, MySQL, Redis).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use stategraph::graph::RetryPolicy;
use stategraph::prelude::*;
use stategraph::{CheckpointSaver, GraphError};

#[derive(State, Clone, Debug, Default)]
struct Work {
    #[reducer(append)]
    done: Vec<String>,
}

struct Counters {
    runs: Vec<Arc<AtomicUsize>>,
}

impl Counters {
    fn get(&self) -> Vec<usize> {
        self.runs.iter().map(|c| c.load(SeqCst)).collect()
    }
}

/// START → a, b, c in parallel → join; `b` fails on its first attempt only.
fn graph(
    saver: Arc<dyn CheckpointSaver>,
    retry: Option<RetryPolicy>,
) -> (CompiledGraph<Work>, Counters) {
    let mut g = StateGraph::<Work>::new();
    let mut runs = Vec::new();
    for name in ["a", "b", "c"] {
        let count = Arc::new(AtomicUsize::new(0));
        runs.push(Arc::clone(&count));
        g.add_node(name, move |_s, _c| {
            let n = count.fetch_add(1, SeqCst) + 1;
            async move {
                if name == "b" && n == 1 {
                    return Err(NodeError::from_repr("ConnectionError('flaky upstream')"));
                }
                Ok(WorkUpdate::default().done([name]))
            }
        });
        g.add_edge(START, name);
    }
    g.add_join(["a", "b", "c"], "join");
    g.add_node("join", |s, _c| async move {
        Ok(WorkUpdate::default().done([format!("join after {}", s.done.len())]))
    });
    if let Some(p) = retry {
        g.set_retry("b", p);
    }
    (
        g.compile().unwrap().with_checkpointer(saver),
        Counters { runs },
    )
}

on_every_saver!(
    failed_step_resumes_only_the_failed_task,
    retry_policy_recovers_within_the_run
);

async fn failed_step_resumes_only_the_failed_task(saver: Arc<dyn CheckpointSaver>) {
    let (g, counters) = graph(Arc::clone(&saver), None);
    let config = RunConfig::thread("ft");
    let err = g
        .invoke_values(WorkUpdate::default(), config.clone())
        .await
        .unwrap_err();
    match &err {
        GraphError::NodeFailed { node, message, .. } => {
            assert_eq!(node, "b");
            assert_eq!(message, "ConnectionError('flaky upstream')");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(counters.get(), [1, 1, 1]);
    // The successful tasks' writes are saved; the failure is recorded on its task.
    let state = g.get_state(&config).await.unwrap();
    assert_eq!(state.next, ["b"], "a and c already finished");
    let b = state.tasks.iter().find(|t| t.name == "b").unwrap();
    assert_eq!(
        b.error.as_deref(),
        Some("ConnectionError('flaky upstream')")
    );
    assert_eq!(state.values["done"], value!(["a", "c"]));

    // Resuming runs only `b`, then the join.
    let out = g.continue_values(config.clone()).await.unwrap();
    assert_eq!(counters.get(), [1, 2, 1], "a and c were not executed again");
    // The same final state as a clean run.
    let (clean, _) = graph(
        saver,
        Some(RetryPolicy {
            initial_interval: Duration::from_millis(1),
            jitter: false,
            ..RetryPolicy::default()
        }),
    );
    let clean_out = clean
        .invoke_values(WorkUpdate::default(), RunConfig::thread("clean"))
        .await
        .unwrap();
    assert_eq!(out, clean_out);
    assert_eq!(out["done"], value!(["a", "b", "c", "join after 3"]));
}

async fn retry_policy_recovers_within_the_run(saver: Arc<dyn CheckpointSaver>) {
    let policy = RetryPolicy {
        initial_interval: Duration::from_millis(5),
        jitter: false,
        ..RetryPolicy::default()
    };
    let (g, counters) = graph(saver, Some(policy));
    let out = g
        .invoke_values(WorkUpdate::default(), RunConfig::thread("retry"))
        .await
        .unwrap();
    assert_eq!(counters.get(), [1, 2, 1]);
    assert_eq!(out["done"], value!(["a", "b", "c", "join after 3"]));
    // Only the last attempt's outcome is recorded: no error write in the history.
    let history = g
        .get_state_history(&RunConfig::thread("retry"), Default::default())
        .await
        .unwrap();
    assert!(
        history
            .iter()
            .all(|s| s.tasks.iter().all(|t| t.error.is_none()))
    );
}
