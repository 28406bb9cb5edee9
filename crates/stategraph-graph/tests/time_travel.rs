//! update_state, as_node, replay and forks: the branch tree LangGraph builds.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

use stategraph_checkpoint::{
    CheckpointSaver, CheckpointSource, InMemorySaver, ListOptions, Map, value,
};
use stategraph_graph::{
    CompiledGraph, DynState, END, GraphError, Reducer, RunConfig, START, Schema, StateGraph,
    StateUpdate,
};

struct Counted {
    graph: CompiledGraph<DynState>,
    saver: Arc<dyn CheckpointSaver>,
    a: Arc<AtomicUsize>,
    b: Arc<AtomicUsize>,
}

fn seed() -> Counted {
    let saver: Arc<dyn CheckpointSaver> = Arc::new(InMemorySaver::new());
    let (a, b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let schema = Schema::new()
        .last_value("foo")
        .reducer("bar", Reducer::append());
    let mut g = StateGraph::<DynState>::with_schema(schema);
    let ca = Arc::clone(&a);
    g.add_node("node_a", move |_s: Arc<DynState>, _c| {
        ca.fetch_add(1, SeqCst);
        async {
            Ok(Map::from_iter([
                ("foo", value!("a")),
                ("bar", value!(["a"])),
            ]))
        }
    });
    let cb = Arc::clone(&b);
    g.add_node("node_b", move |_s: Arc<DynState>, _c| {
        cb.fetch_add(1, SeqCst);
        async {
            Ok(Map::from_iter([
                ("foo", value!("b")),
                ("bar", value!(["b"])),
            ]))
        }
    });
    g.add_edge(START, "node_a")
        .add_edge("node_a", "node_b")
        .add_edge("node_b", END);
    let graph = g.compile().unwrap().with_checkpointer(Arc::clone(&saver));
    Counted { graph, saver, a, b }
}

fn input() -> Option<Map> {
    Some(Map::from_iter([("foo", value!("")), ("bar", value!([]))]))
}

#[tokio::test]
async fn update_state_goes_through_the_reducers() {
    let s = seed();
    let config = RunConfig::thread("t");
    s.graph.invoke(input(), config.clone()).await.unwrap();
    let before = s.graph.get_state(&config).await.unwrap();
    let update = Map::from_iter([("foo", value!(2)), ("bar", value!(["b"]))]);
    let at = s
        .graph
        .update_state(&config, Some(update), None)
        .await
        .unwrap();
    let state = s.graph.get_state(&config).await.unwrap();
    assert_eq!(state.values["foo"], value!(2), "last value: overwritten");
    assert_eq!(
        state.values["bar"],
        value!(["a", "b", "b"]),
        "append: appended"
    );
    assert!(
        state.next.is_empty(),
        "as node_b (the default), whose edge goes to END"
    );
    let meta = state.metadata.unwrap();
    assert_eq!(meta.source, Some(CheckpointSource::Update));
    assert_eq!(meta.step, Some(3));
    assert_eq!(state.config.unwrap(), at);
    assert_eq!(state.parent_config, before.config);
    assert_eq!(
        s.graph
            .get_state_history(&config, ListOptions::default())
            .await
            .unwrap()
            .len(),
        5
    );
}

#[tokio::test]
async fn as_node_decides_what_runs_next() {
    let s = seed();
    let config = RunConfig::thread("t");
    s.graph.invoke(input(), config.clone()).await.unwrap();
    let update = Map::from_iter([("foo", value!("x"))]);
    s.graph
        .update_state(&config, Some(update), Some("node_a"))
        .await
        .unwrap();
    let state = s.graph.get_state(&config).await.unwrap();
    assert_eq!(state.next, ["node_b"]);
    assert_eq!(state.values["foo"], value!("x"));
    // Resuming runs node_b only.
    let out = s.graph.invoke(None, config.clone()).await.unwrap();
    assert_eq!((s.a.load(SeqCst), s.b.load(SeqCst)), (1, 2));
    assert_eq!(out["foo"], value!("b"));
    assert_eq!(out["bar"], value!(["a", "b", "b"]));
}

#[tokio::test]
async fn default_as_node_rules() {
    let s = seed();
    let config = RunConfig::thread("fresh");
    // A thread no node ran on: the update is applied as graph input (START's edges).
    s.graph
        .update_state(&config, Some(Map::from_iter([("foo", value!("i"))])), None)
        .await
        .unwrap();
    assert_eq!(s.graph.get_state(&config).await.unwrap().next, ["node_a"]);
    let err = s
        .graph
        .update_state(&config, Some(Map::new()), Some("nope"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, GraphError::InvalidArgument { what, .. } if what == "as_node"),
        "{err}"
    );
}

#[tokio::test]
async fn replay_from_the_middle_reruns_only_later_nodes_and_branches() {
    let s = seed();
    let config = RunConfig::thread("t");
    s.graph.invoke(input(), config.clone()).await.unwrap();
    let history = s
        .graph
        .get_state_history(&config, ListOptions::default())
        .await
        .unwrap();
    // newest first: step 2, 1, 0, -1; step 1's next is node_b.
    let middle = history[1].config.clone().unwrap();
    let old_head = history[0].config.clone().unwrap();
    assert_eq!(history[1].next, ["node_b"]);
    let replay = config
        .clone()
        .with_checkpoint_id(middle.checkpoint_id.clone().unwrap());
    let out = s.graph.invoke(None, replay).await.unwrap();
    assert_eq!(
        (s.a.load(SeqCst), s.b.load(SeqCst)),
        (1, 2),
        "only node_b ran again"
    );
    assert_eq!(out["bar"], value!(["a", "b"]));

    // The branch tree: middle ┬→ old head (kept)
    //                         └→ fork → new loop checkpoint (latest)
    let all = s.saver.list(&ListOptions::thread("t")).await.unwrap();
    assert_eq!(all.len(), 6);
    let children: Vec<_> = all
        .iter()
        .filter(|t| t.parent_config.as_ref() == Some(&middle))
        .collect();
    assert_eq!(children.len(), 2);
    assert!(children.iter().any(|c| c.config == old_head));
    let fork = children.iter().find(|c| c.config != old_head).unwrap();
    assert_eq!(fork.metadata.source, Some(CheckpointSource::Fork));
    assert_eq!(fork.metadata.step, Some(2));
    let latest = s.graph.get_state(&config).await.unwrap();
    assert_eq!(latest.parent_config.as_ref(), Some(&fork.config));
    assert_eq!(latest.metadata.unwrap().step, Some(3));
    assert_eq!(latest.values["foo"], value!("b"));
}

#[tokio::test]
async fn updating_an_old_checkpoint_forks_the_thread() {
    let s = seed();
    let config = RunConfig::thread("t");
    s.graph.invoke(input(), config.clone()).await.unwrap();
    let history = s
        .graph
        .get_state_history(&config, ListOptions::default())
        .await
        .unwrap();
    let step0 = history[2].config.clone().unwrap(); // next: node_a
    let at = config
        .clone()
        .with_checkpoint_id(step0.checkpoint_id.clone().unwrap());
    let new = s
        .graph
        .update_state(
            &at,
            Some(Map::from_iter([("foo", value!("z"))])),
            Some("node_a"),
        )
        .await
        .unwrap();
    let forked = s.graph.get_state(&config).await.unwrap();
    assert_eq!(forked.config.as_ref(), Some(&new));
    assert_eq!(forked.parent_config.as_ref(), Some(&step0));
    assert_eq!(forked.next, ["node_b"]);
    assert_eq!(forked.values["bar"], value!([]));
    let out = s.graph.invoke(None, config.clone()).await.unwrap();
    assert_eq!(out["bar"], value!(["b"]));
    assert_eq!((s.a.load(SeqCst), s.b.load(SeqCst)), (1, 2));
}

#[tokio::test]
async fn bulk_update_applies_supersteps_in_order() {
    let s = seed();
    let config = RunConfig::thread("t");
    s.graph.invoke(input(), config.clone()).await.unwrap();
    let at = s
        .graph
        .bulk_update_state(
            &config,
            vec![
                vec![
                    StateUpdate::new(Map::from_iter([("foo", value!("x"))]), "node_a"),
                    StateUpdate::new(Map::from_iter([("bar", value!(["y"]))]), "node_b"),
                ],
                vec![StateUpdate::new(
                    Map::from_iter([("foo", value!("z"))]),
                    "node_b",
                )],
            ],
        )
        .await
        .unwrap();
    let state = s.graph.get_state(&config).await.unwrap();
    assert_eq!(state.config.as_ref(), Some(&at));
    assert_eq!(state.values["foo"], value!("z"));
    assert_eq!(state.values["bar"], value!(["a", "b", "y"]));
    assert_eq!(state.metadata.unwrap().step, Some(4));
    assert!(
        state.next.is_empty(),
        "node_b's edge goes to END; node_a's trigger was superseded"
    );
    let history = s
        .graph
        .get_state_history(&config, ListOptions::default())
        .await
        .unwrap();
    assert_eq!(history.len(), 6);
    assert_eq!(
        history[1].next,
        ["node_b"],
        "the first super-step ran node_a's edge"
    );
    // Several updates in one super-step need their nodes.
    let err = s
        .graph
        .bulk_update_state(
            &config,
            vec![vec![
                StateUpdate {
                    values: Some(Map::new()),
                    as_node: None,
                    task_id: None,
                },
                StateUpdate::new(Map::new(), "node_a"),
            ]],
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, GraphError::InvalidArgument { what, .. } if what == "as_node"),
        "{err}"
    );
}

#[tokio::test]
async fn command_to_parent_routes_the_parent_graph() {
    let schema = || Schema::new().reducer("log", Reducer::append());
    let mut inner = StateGraph::<DynState>::with_schema(schema());
    inner.add_node("escalate", |_s: Arc<DynState>, _c| async {
        Ok(stategraph_graph::Command::update_and_goto(
            Map::from_iter([("log", value!(["escalated"]))]),
            ["human".into()],
        )
        .to_parent())
    });
    inner.add_node("never", |_s: Arc<DynState>, _c| async {
        Ok(Map::from_iter([("log", value!(["never"]))]))
    });
    inner
        .add_edge(START, "escalate")
        .add_edge("escalate", "never");
    let mut outer = StateGraph::<DynState>::with_schema(schema());
    outer.add_subgraph("sub", inner.compile().unwrap());
    for n in ["human", "bot"] {
        outer.add_node(n, move |_s: Arc<DynState>, _c| async move {
            Ok(Map::from_iter([("log", value!([n]))]))
        });
    }
    outer
        .add_edge(START, "sub")
        .add_destinations("sub", ["human", "bot"]);
    let saver: Arc<dyn CheckpointSaver> = Arc::new(InMemorySaver::new());
    let outer = outer
        .compile()
        .unwrap()
        .with_checkpointer(Arc::clone(&saver));
    let out = outer
        .invoke(
            Some(Map::from_iter([("log", value!([]))])),
            RunConfig::thread("p"),
        )
        .await
        .unwrap();
    assert_eq!(out["log"], value!(["escalated", "human"]));

    // At the root there is no parent to address.
    let mut root = StateGraph::<DynState>::with_schema(schema());
    root.add_node("n", |_s: Arc<DynState>, _c| async {
        Ok(stategraph_graph::Command::<Map>::goto("x").to_parent())
    });
    root.add_edge(START, "n");
    let err = root
        .compile()
        .unwrap()
        .invoke(Some(Map::new()), RunConfig::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, GraphError::NoParentGraph { ref node } if node == "n"),
        "{err}"
    );
}

#[tokio::test]
async fn nodes_see_config_keys_and_typed_context() {
    #[derive(Debug)]
    struct Ctx {
        user_id: String,
    }
    let mut g = StateGraph::<DynState>::with_schema(Schema::new().last_value("who"));
    g.add_node(
        "n",
        |_s: Arc<DynState>, ctx: stategraph_graph::NodeContext| async move {
            let user = ctx
                .context::<Ctx>()
                .map(|c| c.user_id.clone())
                .unwrap_or_default();
            let tenant = ctx.configurable("tenant").cloned().unwrap_or_default();
            Ok(Map::from_iter([(
                "who",
                value!(format!("{user}@{}", tenant.as_str().unwrap_or(""))),
            )]))
        },
    );
    g.add_edge(START, "n");
    let saver: Arc<dyn CheckpointSaver> = Arc::new(InMemorySaver::new());
    let g = g.compile().unwrap().with_checkpointer(Arc::clone(&saver));
    let config = RunConfig::thread("c")
        .with_configurable("tenant", "acme")
        .with_context(Ctx {
            user_id: "u-1".into(),
        });
    let out = g.invoke(Some(Map::new()), config).await.unwrap();
    assert_eq!(out["who"], value!("u-1@acme"));
    // Scalar config keys are copied into checkpoint metadata, as LangGraph does.
    let latest = saver
        .get_tuple(&stategraph_checkpoint::CheckpointConfig::new("c"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(latest.metadata.extra["tenant"], "acme");
}

#[tokio::test]
async fn get_state_with_subgraphs_nests_the_subgraph_state() {
    let schema = || Schema::new().reducer("log", Reducer::append());
    let mut inner = StateGraph::<DynState>::with_schema(schema());
    inner.add_node("one", |_s: Arc<DynState>, _c| async {
        Ok(Map::from_iter([("log", value!(["one"]))]))
    });
    inner.add_edge(START, "one");
    let mut outer = StateGraph::<DynState>::with_schema(schema());
    outer.add_subgraph("sub", inner.compile().unwrap());
    outer.add_edge(START, "sub");
    let outer = outer
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(InMemorySaver::new()));
    let config = RunConfig::thread("s");
    outer
        .invoke(Some(Map::from_iter([("log", value!([]))])), config.clone())
        .await
        .unwrap();
    let history = outer
        .get_state_history(&config, ListOptions::default())
        .await
        .unwrap();
    let before_sub = history.iter().find(|h| h.next == ["sub"]).unwrap();
    let at = config
        .clone()
        .with_checkpoint_id(before_sub.config.clone().unwrap().checkpoint_id.unwrap());
    let flat = outer.get_state(&at).await.unwrap();
    assert!(flat.tasks[0].state.is_none());
    let nested = outer.get_state_with(&at, true).await.unwrap();
    let sub = nested.tasks[0]
        .state
        .as_ref()
        .expect("the subgraph's state");
    assert_eq!(sub.values["log"], value!(["one"]));
    let sub_config = sub.config.as_ref().unwrap();
    assert_eq!(
        sub_config.checkpoint_ns,
        format!("sub:{}", nested.tasks[0].id)
    );
    let parents = sub.metadata.as_ref().unwrap().parents.clone().unwrap();
    assert_eq!(
        parents.get(""),
        before_sub.config.as_ref().unwrap().checkpoint_id.as_ref()
    );
}

#[tokio::test]
async fn durability_modes_save_what_langgraph_saves() {
    use stategraph_graph::Durability;
    let only_foo = || Some(Map::from_iter([("foo", value!(""))]));
    for (mode, checkpoints, writes, steps) in [
        (Durability::Sync, 8, 14, vec![6, 5, 4, 3, 2, 1, 0, -1]),
        (Durability::Async, 8, 14, vec![6, 5, 4, 3, 2, 1, 0, -1]),
        (Durability::Exit, 2, 0, vec![6, 2]),
    ] {
        let s = seed();
        let config = RunConfig::thread("d").with_durability(mode);
        s.graph.invoke(only_foo(), config.clone()).await.unwrap();
        let out = s.graph.invoke(only_foo(), config.clone()).await.unwrap();
        assert_eq!(out["bar"], value!(["a", "b", "a", "b"]), "{mode:?}");
        let all = s.saver.list(&ListOptions::thread("d")).await.unwrap();
        assert_eq!(all.len(), checkpoints, "{mode:?}");
        let n_writes: usize = all.iter().map(|t| t.pending_writes.len()).sum();
        assert_eq!(n_writes, writes, "{mode:?}");
        let got: Vec<i64> = all.iter().map(|t| t.metadata.step.unwrap()).collect();
        assert_eq!(got, steps, "{mode:?}");
        // Each checkpoint's parent is the previous one saved.
        for pair in all.windows(2) {
            assert_eq!(
                pair[0].parent_config.as_ref(),
                Some(&pair[1].config),
                "{mode:?}"
            );
        }
        let state = s.graph.get_state(&RunConfig::thread("d")).await.unwrap();
        assert_eq!(state.values["foo"], value!("b"));
    }
}

#[tokio::test]
async fn history_options_naming_another_thread_are_refused() {
    let s = seed();
    let config = RunConfig::thread("t");
    s.graph.invoke(input(), config.clone()).await.unwrap();
    let same = ListOptions::thread("t").limit(1);
    assert_eq!(
        s.graph
            .get_state_history(&config, same)
            .await
            .unwrap()
            .len(),
        1
    );
    for other in [ListOptions::thread("u"), ListOptions::default().ns("sub:1")] {
        let err = s.graph.get_state_history(&config, other).await.unwrap_err();
        assert!(
            matches!(&err, GraphError::InvalidArgument { what, .. } if what.starts_with("history options")),
            "{err}"
        );
    }
}
