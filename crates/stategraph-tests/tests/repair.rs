//! `CompiledGraph::plan_repair` / `apply_repair` through the library: a checkpoint whose
//! values were lost is rebuilt from its parent plus the writes stored against the parent,
//! with the graph's own reducers — which is what makes a summing reducer come out right where
//! the default merge (used by a graph-less reader) could only take the last write.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use stategraph::graph::inspect::reader_graph;
use stategraph::prelude::*;
use stategraph::{ChannelRepair, CheckpointConfig};

#[derive(State, Clone, Debug, Default)]
struct Tally {
    #[reducer(add)]
    count: i64,
    #[reducer(append)]
    log: Vec<String>,
}

/// START → {two, three} in parallel, both adding to `count` in the same step.
fn graph(saver: Arc<dyn CheckpointSaver>) -> CompiledGraph<Tally> {
    let mut g = StateGraph::<Tally>::new();
    g.add_node("two", |_s, _c| async {
        Ok(TallyUpdate::default().count(2).log(["two"]))
    });
    g.add_node("three", |_s, _c| async {
        Ok(TallyUpdate::default().count(3).log(["three"]))
    });
    g.add_edge(START, "two").add_edge(START, "three");
    g.compile().unwrap().with_checkpointer(saver)
}

#[tokio::test]
async fn lost_values_come_back_through_the_graphs_reducers() {
    let dir = tempfile::tempdir().unwrap();
    let saver: Arc<dyn CheckpointSaver> = Arc::new(
        SqliteConfig::file(dir.path().join("repair.sqlite"))
            .connect()
            .await
            .unwrap(),
    );
    let g = graph(Arc::clone(&saver));
    let config = RunConfig::thread("t");
    g.invoke(TallyUpdate::default().count(1), config.clone())
        .await
        .unwrap();
    let original = g.get_state(&config).await.unwrap();
    assert_eq!(original.values["count"], Value::from(6));

    // Lose the last checkpoint's values: the record stays, the values go.
    let latest = saver
        .get_tuple(&CheckpointConfig::new("t"))
        .await
        .unwrap()
        .unwrap();
    let bare = latest.checkpoint.without_values();
    saver
        .put(
            latest.parent_config.as_ref().unwrap(),
            &bare,
            &latest.metadata,
            &stategraph::ChannelVersions::new(),
        )
        .await
        .unwrap();
    let stored = saver
        .get_tuple(&CheckpointConfig::new("t"))
        .await
        .unwrap()
        .unwrap();
    assert!(!stored.checkpoint.channel_values.contains_key("count"));
    // Reads rebuild a reducer key with a version but no value from its history (as LangGraph
    // does for keys written as delta channels), so the state still reads right; the storage
    // stays damaged until the repair.
    assert_eq!(g.get_state(&config).await.unwrap().values, original.values);

    // The graph's reducers: 1 + 2 + 3.
    let plan = g.plan_repair(&config).await.unwrap();
    assert_eq!(
        plan.channels["count"],
        ChannelRepair::Restore(Value::from(6))
    );
    assert!(plan.is_needed());
    // Without the graph, the default merge can only keep one of the two writes.
    let reader = reader_graph(&latest.checkpoint)
        .unwrap()
        .with_checkpointer(Arc::clone(&saver));
    let guess = reader.plan_repair(&config).await.unwrap();
    assert_ne!(guess.channels["count"], plan.channels["count"]);

    g.apply_repair(&plan).await.unwrap();
    let repaired = g.get_state(&config).await.unwrap();
    assert_eq!(repaired.values, original.values);
    assert_eq!(repaired.config, original.config, "same checkpoint, same id");
    assert_eq!(repaired.metadata, original.metadata);
    let again = g.plan_repair(&config).await.unwrap();
    assert!(!again.is_needed());
    assert!(
        again
            .channels
            .values()
            .all(|c| matches!(c, ChannelRepair::Intact))
    );

    // The first checkpoint of a thread has nothing to be rebuilt from.
    let first = g
        .get_state_history(&config, Default::default())
        .await
        .unwrap()
        .pop()
        .unwrap();
    let err = g
        .plan_repair(&RunConfig {
            checkpoint_id: first.config.unwrap().checkpoint_id,
            ..config.clone()
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no parent"), "{err}");
}
