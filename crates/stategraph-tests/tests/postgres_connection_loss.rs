//! A Postgres connection killed mid-run (`pg_terminate_backend`): the run either goes on over
//! a fresh connection or fails with a typed backend error — and in both cases every stored
//! checkpoint is whole, and resuming the thread finishes the work.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use stategraph::prelude::*;
use stategraph::{CheckpointSaver, GraphError};

#[derive(State, Clone, Debug, Default)]
struct Log {
    #[reducer(append)]
    log: Vec<String>,
}

/// Terminates every other session of this database (our saver's pooled connections).
async fn kill_other_sessions() -> u64 {
    let (client, conn) =
        tokio_postgres::connect(&stategraph_testkit::postgres::url(), tokio_postgres::NoTls)
            .await
            .unwrap();
    let task = tokio::spawn(conn);
    let rows = client
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid() \
             AND application_name = 'stategraph-loss-test'",
            &[],
        )
        .await
        .unwrap();
    drop(client);
    let _ = task.await;
    rows.len() as u64
}

#[tokio::test]
async fn connection_terminated_mid_run() {
    let (_, guard, url) = common::postgres_with_url(None).await;
    let url = format!("{url}&application_name=stategraph-loss-test");
    let saver: Arc<dyn CheckpointSaver> = Arc::new(
        stategraph_postgres::PostgresConfig::from_url(&url)
            .unwrap()
            .pool_size(2)
            .connect()
            .await
            .unwrap(),
    );
    let mut g = StateGraph::<Log>::new();
    g.add_node("first", |_s, _c| async {
        Ok(LogUpdate::default().log(["first"]))
    });
    let pooled = Arc::clone(&saver);
    g.add_node("killer", move |_s, _c| {
        let pooled = Arc::clone(&pooled);
        async move {
            // The run's saves go through a background writer that may not have connected
            // yet: a read makes sure the pool holds a connection to kill.
            pooled
                .get_tuple(&stategraph::CheckpointConfig::new("loss"))
                .await
                .unwrap();
            let killed = kill_other_sessions().await;
            assert!(killed > 0, "the saver's connections were open");
            Ok(LogUpdate::default().log(["killer"]))
        }
    });
    g.add_node("last", |_s, _c| async {
        Ok(LogUpdate::default().log(["last"]))
    });
    g.add_edge(START, "first")
        .add_edge("first", "killer")
        .add_edge("killer", "last");
    let g = g.compile().unwrap().with_checkpointer(Arc::clone(&saver));
    let config = RunConfig::thread("loss");
    let first = g.invoke_values(LogUpdate::default(), config.clone()).await;
    let failed = first.is_err();
    match first {
        Ok(out) => assert_eq!(out["log"], value!(["first", "killer", "last"])),
        // The write whose connection was ended says so; any other failure is a backend error.
        Err(GraphError::Checkpoint(
            stategraph::CheckpointError::ConnectionLost { backend, .. }
            | stategraph::CheckpointError::Backend { backend, .. },
        )) => {
            assert_eq!(backend, "postgres");
        }
        Err(other) => panic!("expected success or a typed backend error, got {other:?}"),
    }
    // Whatever happened, every stored checkpoint reads back whole, and the thread finishes.
    for t in saver.list(&ListOptions::thread("loss")).await.unwrap() {
        assert!(t.checkpoint.channel_versions.keys().all(|k| !k.is_empty()));
    }
    // Checkpoints are saved in the background while the next step runs (LangGraph's
    // `durability="async"`), so the killed connection may have been writing the input's own
    // checkpoint: the failed run then stored nothing, and the caller sends its input again.
    // Otherwise a failed run is resumed even when `next` is empty: as in LangGraph, a
    // checkpoint whose tasks all stored their writes shows them applied and no `next`, though
    // the checkpoint after them was never saved. The pool's other connection was killed too
    // and may not know it yet, so that attempt may itself lose its connection, typed; the
    // caller tries again.
    let mut failed = failed;
    for attempt in 1..=3 {
        let stored = saver
            .get_tuple(&stategraph::CheckpointConfig::new("loss"))
            .await
            .unwrap()
            .is_some();
        let outcome = if !stored {
            assert!(failed, "a run that succeeded stored its checkpoints");
            g.invoke_values(LogUpdate::default(), config.clone())
                .await
                .map(drop)
        } else if failed || !g.get_state(&config).await.unwrap().next.is_empty() {
            g.continue_values(config.clone()).await.map(drop)
        } else {
            Ok(())
        };
        match outcome {
            Ok(()) => break,
            Err(GraphError::Checkpoint(stategraph::CheckpointError::ConnectionLost { .. }))
                if attempt < 3 =>
            {
                failed = true;
            }
            Err(other) => panic!("recovering (attempt {attempt}): {other:?}"),
        }
    }
    let state = g.get_state(&config).await.unwrap();
    assert!(state.next.is_empty());
    assert_eq!(state.values["log"], value!(["first", "killer", "last"]));
    drop(guard);
}
