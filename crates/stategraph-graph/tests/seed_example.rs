//! The seeds' 2-node example, as a golden test on every saver: exactly the 4 checkpoints
//! LangGraph writes (input step −1, then one per super-step), with LangGraph's values,
//! versions, versions_seen, updated_channels, parents and per-task writes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use stategraph_checkpoint::{
    CheckpointSaver, CheckpointSource, InMemorySaver, ListOptions, Map, Value, value,
};
use stategraph_graph::{
    CompiledGraph, DynState, END, HistoryOptions, Reducer, RunConfig, START, Schema, StateGraph,
};
use stategraph_sqlite::SqliteConfig;

fn seed_graph(saver: Arc<dyn CheckpointSaver>) -> CompiledGraph<DynState> {
    let schema = Schema::new()
        .last_value("foo")
        .reducer("bar", Reducer::append());
    let mut g = StateGraph::<DynState>::with_schema(schema);
    g.add_node("node_a", |_s, _c| async {
        Ok(Map::from_iter([
            ("foo", value!("a")),
            ("bar", value!(["a"])),
        ]))
    });
    g.add_node("node_b", |_s, _c| async {
        Ok(Map::from_iter([
            ("foo", value!("b")),
            ("bar", value!(["b"])),
        ]))
    });
    g.add_edge(START, "node_a")
        .add_edge("node_a", "node_b")
        .add_edge("node_b", END);
    g.compile().unwrap().with_checkpointer(saver)
}

fn input() -> Map {
    Map::from_iter([("foo", value!("")), ("bar", value!([]))])
}

fn keys<'a, T: 'a>(m: impl IntoIterator<Item = (&'a str, &'a T)>) -> Vec<&'a str> {
    m.into_iter().map(|(k, _)| k).collect()
}

async fn golden(saver: Arc<dyn CheckpointSaver>) {
    let graph = seed_graph(Arc::clone(&saver));
    let config = RunConfig::thread("seed");
    let out = graph.invoke(input(), config.clone()).await.unwrap();
    assert_eq!(out["foo"], value!("b"));
    assert_eq!(out["bar"], value!(["a", "b"]));

    let mut tuples = saver.list(&ListOptions::thread("seed")).await.unwrap();
    tuples.reverse(); // oldest first
    assert_eq!(tuples.len(), 4, "input + 3 super-steps");
    let sources: Vec<_> = tuples
        .iter()
        .map(|t| (t.metadata.source, t.metadata.step))
        .collect();
    use CheckpointSource::*;
    assert_eq!(
        sources,
        [
            (Some(Input), Some(-1)),
            (Some(Loop), Some(0)),
            (Some(Loop), Some(1)),
            (Some(Loop), Some(2))
        ]
    );
    for (i, t) in tuples.iter().enumerate() {
        assert_eq!(t.metadata.parents, Some(Default::default()));
        let parent = t
            .parent_config
            .as_ref()
            .and_then(|p| p.checkpoint_id.clone());
        let expected = i.checked_sub(1).map(|j| tuples[j].checkpoint.id.clone());
        assert_eq!(parent, expected, "parent chain");
        assert_eq!(t.checkpoint.v, 4);
        // uuid6 clock sequence = step
        let step = t.metadata.step.unwrap();
        assert_eq!(
            &t.checkpoint.id[19..23],
            format!("{:04x}", 0x8000 | (step as u64 & 0x3fff))
        );
    }

    // #1 input, step -1
    let cp = &tuples[0].checkpoint;
    assert_eq!(
        cp.channel_values,
        [("__start__".to_owned(), value!({"foo": "", "bar": []}))].into()
    );
    assert_eq!(keys(&cp.channel_versions), ["__start__"]);
    assert_eq!(keys(&cp.versions_seen), ["__input__"]);
    assert!(cp.versions_seen["__input__"].is_empty());
    assert_eq!(
        cp.updated_channels.as_deref(),
        Some(&["__start__".to_owned()][..])
    );
    let v1 = cp.channel_versions["__start__"].clone();
    assert_eq!(v1.counter(), 1);
    let w: Vec<_> = tuples[0]
        .pending_writes
        .iter()
        .map(|w| {
            (
                w.channel.as_str(),
                w.value.clone(),
                w.idx,
                w.task_path.as_str(),
            )
        })
        .collect();
    assert_eq!(
        w,
        [
            ("foo", value!(""), 0, "~__pregel_pull, __start__"),
            ("bar", value!([]), 1, "~__pregel_pull, __start__"),
            (
                "branch:to:node_a",
                Value::Null,
                2,
                "~__pregel_pull, __start__"
            ),
        ]
    );

    // #2 loop step 0
    let cp = &tuples[1].checkpoint;
    assert_eq!(
        cp.channel_values,
        [
            ("bar".to_owned(), value!([])),
            ("branch:to:node_a".to_owned(), Value::Null),
            ("foo".to_owned(), value!("")),
        ]
        .into()
    );
    assert_eq!(
        keys(&cp.channel_versions),
        ["__start__", "bar", "branch:to:node_a", "foo"]
    );
    assert!(cp.channel_versions.values().all(|v| v.counter() == 2));
    assert_eq!(cp.versions_seen["__start__"]["__start__"], v1);
    assert_eq!(
        cp.updated_channels.clone().unwrap(),
        ["bar", "branch:to:node_a", "foo"]
    );
    let w: Vec<_> = tuples[1]
        .pending_writes
        .iter()
        .map(|w| (w.channel.as_str(), w.value.clone(), w.task_path.as_str()))
        .collect();
    assert_eq!(
        w,
        [
            ("foo", value!("a"), "~__pregel_pull, node_a"),
            ("bar", value!(["a"]), "~__pregel_pull, node_a"),
            ("branch:to:node_b", Value::Null, "~__pregel_pull, node_a"),
        ]
    );

    // #3 loop step 1
    let cp = &tuples[2].checkpoint;
    assert_eq!(
        cp.channel_values,
        [
            ("bar".to_owned(), value!(["a"])),
            ("branch:to:node_b".to_owned(), Value::Null),
            ("foo".to_owned(), value!("a")),
        ]
        .into()
    );
    for ch in ["foo", "bar", "branch:to:node_a", "branch:to:node_b"] {
        assert_eq!(cp.channel_versions[ch].counter(), 3, "{ch}");
    }
    assert_eq!(cp.channel_versions["__start__"].counter(), 2);
    assert_eq!(cp.versions_seen["node_a"]["branch:to:node_a"].counter(), 2);
    assert_eq!(
        cp.updated_channels.clone().unwrap(),
        ["bar", "branch:to:node_b", "foo"]
    );
    assert_eq!(
        tuples[2].pending_writes.len(),
        2,
        "node_b → END writes no edge"
    );
    assert_eq!(
        tuples[2].pending_writes[0].task_path,
        "~__pregel_pull, node_b"
    );

    // #4 loop step 2
    let cp = &tuples[3].checkpoint;
    assert_eq!(
        cp.channel_values,
        [
            ("bar".to_owned(), value!(["a", "b"])),
            ("foo".to_owned(), value!("b"))
        ]
        .into()
    );
    for ch in ["foo", "bar", "branch:to:node_b"] {
        assert_eq!(cp.channel_versions[ch].counter(), 4, "{ch}");
    }
    assert_eq!(cp.versions_seen["node_b"]["branch:to:node_b"].counter(), 3);
    assert_eq!(cp.updated_channels.clone().unwrap(), ["bar", "foo"]);
    assert!(tuples[3].pending_writes.is_empty());

    // Task ids are LangGraph's: xxh3 over the checkpoint the task started from.
    let history = graph
        .get_state_history(&config, HistoryOptions::new())
        .await
        .unwrap();
    let next: Vec<Vec<String>> = history.iter().map(|s| s.next.clone()).collect();
    assert_eq!(
        next,
        [
            vec![],
            vec!["node_b".to_owned()],
            vec!["node_a".to_owned()],
            vec!["__start__".to_owned()]
        ]
    );
    for (snap, t) in history.iter().zip(tuples.iter().rev()) {
        for task in &snap.tasks {
            let w = t.pending_writes.iter().find(|w| w.task_id == task.id);
            assert!(
                w.is_some(),
                "task {} of {} has its writes stored under its id",
                task.name,
                t.checkpoint.id
            );
        }
    }

    let state = graph.get_state(&config).await.unwrap();
    assert_eq!(
        state.values,
        [
            ("bar".to_owned(), value!(["a", "b"])),
            ("foo".to_owned(), value!("b"))
        ]
        .into()
    );
    assert!(state.next.is_empty());
    assert_eq!(
        state.config.unwrap().checkpoint_id,
        Some(tuples[3].checkpoint.id.clone())
    );
}

#[tokio::test]
async fn seed_example_on_memory() {
    golden(Arc::new(InMemorySaver::new())).await;
}

#[tokio::test]
async fn seed_example_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    golden(Arc::new(
        SqliteConfig::file(dir.path().join("seed.sqlite"))
            .connect()
            .await
            .unwrap(),
    ))
    .await;
}
