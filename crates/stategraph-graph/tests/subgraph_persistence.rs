//! How a subgraph keeps its checkpoints (LangGraph's `compile(checkpointer=None|True|False)`
//! for subgraphs): per invocation, per thread, or not at all.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use stategraph_checkpoint::{CheckpointSaver, InMemorySaver, ListOptions, Map, Value, value};
use stategraph_graph::{
    CompiledGraph, DynState, Reducer, RunConfig, START, Schema, StateGraph, SubgraphPersistence,
};

/// A parent whose node `child` is a subgraph that appends `n` to its own `seen` and asks
/// for approval when `n` is 0.
fn parent(persistence: SubgraphPersistence, saver: Arc<InMemorySaver>) -> CompiledGraph<DynState> {
    let mut inner = StateGraph::<DynState>::with_schema(
        Schema::new()
            .last_value("n")
            .reducer("seen", Reducer::append()),
    );
    inner.add_node("remember", |s, ctx| {
        let n = s.get("n").cloned().unwrap_or(Value::Null);
        let asked = (n == value!(0)).then(|| ctx.interrupt(value!("zero?")));
        async move {
            if let Some(answer) = asked {
                answer?;
            }
            Ok(Map::from_iter([("seen", Value::List(vec![n].into()))]))
        }
    });
    inner.add_edge(START, "remember");
    let inner = inner
        .compile()
        .unwrap()
        .with_subgraph_persistence(persistence);
    let mut g = StateGraph::<DynState>::with_schema(Schema::new().last_value("n"));
    g.add_subgraph("child", inner);
    g.add_edge(START, "child");
    g.compile().unwrap().with_checkpointer(saver)
}

/// The namespaces the thread's checkpoints are stored under, sorted and deduplicated.
async fn namespaces(saver: &InMemorySaver) -> Vec<String> {
    let all = saver
        .list(&ListOptions {
            thread_id: Some("t".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut ns: Vec<String> = all
        .iter()
        .map(|t| t.config.checkpoint_ns.split(':').next().unwrap().to_owned())
        .collect();
    ns.sort();
    ns.dedup();
    ns
}

async fn run(g: &CompiledGraph<DynState>, n: i64) {
    g.invoke(Map::from_iter([("n", value!(n))]), RunConfig::thread("t"))
        .await
        .unwrap();
}

/// The state of the subgraph the parent's interrupted task runs.
async fn interrupted_subgraph(g: &CompiledGraph<DynState>) -> stategraph_graph::StateSnapshot {
    let state = g
        .get_state_with_subgraphs(&RunConfig::thread("t"))
        .await
        .unwrap();
    *state.tasks[0].state.clone().expect("the subgraph's state")
}

#[tokio::test]
async fn a_per_thread_subgraph_remembers_its_state_and_shows_it_while_interrupted() {
    let saver = Arc::new(InMemorySaver::new());
    let g = parent(SubgraphPersistence::PerThread, Arc::clone(&saver));
    run(&g, 1).await;
    run(&g, 2).await;
    // Interrupted in the third run: the parent's task shows the subgraph's state, which
    // carries the first two runs.
    run(&g, 0).await;
    let sub = interrupted_subgraph(&g).await;
    assert_eq!(sub.values["seen"], value!([1, 2]));
    assert_eq!(sub.config.as_ref().unwrap().checkpoint_ns, "child");
    assert_eq!(namespaces(&saver).await, ["", "child"]);
}

#[tokio::test]
async fn a_per_invocation_subgraph_starts_afresh_and_one_without_checkpoints_stores_none() {
    let saver = Arc::new(InMemorySaver::new());
    let g = parent(SubgraphPersistence::PerInvocation, Arc::clone(&saver));
    run(&g, 1).await;
    run(&g, 0).await;
    let sub = interrupted_subgraph(&g).await;
    assert_eq!(sub.values.get("seen"), Some(&value!([])));
    assert_eq!(namespaces(&saver).await, ["", "child"]);

    let saver = Arc::new(InMemorySaver::new());
    let g = parent(SubgraphPersistence::Off, Arc::clone(&saver));
    run(&g, 1).await;
    run(&g, 2).await;
    assert_eq!(namespaces(&saver).await, [""]);
}
