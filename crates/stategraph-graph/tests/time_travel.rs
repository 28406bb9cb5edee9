//! update_state, as_node, replay and forks: the branch tree LangGraph builds.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

use stategraph_checkpoint::{
    CheckpointSaver, CheckpointSource, InMemorySaver, ListOptions, Map, value,
};
use stategraph_graph::{
    AsNode, CompiledGraph, DynState, END, GraphError, HistoryOptions, Reducer, RunConfig, START,
    Schema, StateGraph, StateUpdate,
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
    g.add_node("node_a", move |_s, _c| {
        ca.fetch_add(1, SeqCst);
        async {
            Ok(Map::from_iter([
                ("foo", value!("a")),
                ("bar", value!(["a"])),
            ]))
        }
    });
    let cb = Arc::clone(&b);
    g.add_node("node_b", move |_s, _c| {
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

fn input() -> Map {
    Map::from_iter([("foo", value!("")), ("bar", value!([]))])
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
        .update_state(&config, update, AsNode::Inferred)
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
            .get_state_history(&config, HistoryOptions::new())
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
        .update_state(&config, update, "node_a")
        .await
        .unwrap();
    let state = s.graph.get_state(&config).await.unwrap();
    assert_eq!(state.next, ["node_b"]);
    assert_eq!(state.values["foo"], value!("x"));
    // Resuming runs node_b only.
    let out = s.graph.continue_run(config.clone()).await.unwrap();
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
        .update_state(
            &config,
            Map::from_iter([("foo", value!("i"))]),
            AsNode::Inferred,
        )
        .await
        .unwrap();
    assert_eq!(s.graph.get_state(&config).await.unwrap().next, ["node_a"]);
    let err = s
        .graph
        .update_state(&config, Map::new(), "nope")
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
        .get_state_history(&config, HistoryOptions::new())
        .await
        .unwrap();
    // newest first: step 2, 1, 0, -1; step 1's next is node_b.
    let middle = history[1].config.clone().unwrap();
    let old_head = history[0].config.clone().unwrap();
    assert_eq!(history[1].next, ["node_b"]);
    let replay = config
        .clone()
        .with_checkpoint_id(middle.checkpoint_id.clone().unwrap());
    let out = s.graph.continue_run(replay).await.unwrap();
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
        .get_state_history(&config, HistoryOptions::new())
        .await
        .unwrap();
    let step0 = history[2].config.clone().unwrap(); // next: node_a
    let at = config
        .clone()
        .with_checkpoint_id(step0.checkpoint_id.clone().unwrap());
    let new = s
        .graph
        .update_state(&at, Map::from_iter([("foo", value!("z"))]), "node_a")
        .await
        .unwrap();
    let forked = s.graph.get_state(&config).await.unwrap();
    assert_eq!(forked.config.as_ref(), Some(&new));
    assert_eq!(forked.parent_config.as_ref(), Some(&step0));
    assert_eq!(forked.next, ["node_b"]);
    assert_eq!(forked.values["bar"], value!([]));
    let out = s.graph.continue_run(config.clone()).await.unwrap();
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
        .get_state_history(&config, HistoryOptions::new())
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
                StateUpdate::new(Map::new(), AsNode::Inferred),
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
    inner.add_node("escalate", |_s, _c| async {
        Ok(stategraph_graph::Command::update_and_goto(
            Map::from_iter([("log", value!(["escalated"]))]),
            ["human"],
        )
        .to_parent())
    });
    inner.add_node("never", |_s, _c| async {
        Ok(Map::from_iter([("log", value!(["never"]))]))
    });
    inner
        .add_edge(START, "escalate")
        .add_edge("escalate", "never");
    let mut outer = StateGraph::<DynState>::with_schema(schema());
    outer.add_subgraph("sub", inner.compile().unwrap());
    for n in ["human", "bot"] {
        outer.add_node(n, move |_s, _c| async move {
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
            Map::from_iter([("log", value!([]))]),
            RunConfig::thread("p"),
        )
        .await
        .unwrap();
    assert_eq!(out["log"], value!(["escalated", "human"]));

    // At the root there is no parent to address.
    let mut root = StateGraph::<DynState>::with_schema(schema());
    root.add_node("n", |_s, _c| async {
        Ok(stategraph_graph::Command::<Map>::goto("x").to_parent())
    });
    root.add_edge(START, "n");
    let err = root
        .compile()
        .unwrap()
        .invoke(Map::new(), RunConfig::default())
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
    g.add_node("n", |_s, ctx: stategraph_graph::NodeContext| async move {
        let user = ctx
            .context::<Ctx>()
            .map(|c| c.user_id.clone())
            .unwrap_or_default();
        let tenant = ctx.configurable("tenant").cloned().unwrap_or_default();
        Ok(Map::from_iter([(
            "who",
            value!(format!("{user}@{}", tenant.as_str().unwrap_or(""))),
        )]))
    });
    g.add_edge(START, "n");
    let saver: Arc<dyn CheckpointSaver> = Arc::new(InMemorySaver::new());
    let g = g.compile().unwrap().with_checkpointer(Arc::clone(&saver));
    let config = RunConfig::thread("c")
        .with_configurable("tenant", "acme")
        .with_context(Ctx {
            user_id: "u-1".into(),
        });
    let out = g.invoke(Map::new(), config).await.unwrap();
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
async fn checkpoint_metadata_is_copied_into_every_checkpoint_as_is() {
    let mut g = StateGraph::<DynState>::with_schema(Schema::new().last_value("x"));
    g.add_node("n", |_s, _c| async {
        Ok(Map::from_iter([("x", value!(1))]))
    });
    g.add_edge(START, "n");
    let saver: Arc<dyn CheckpointSaver> = Arc::new(InMemorySaver::new());
    let g = g.compile().unwrap().with_checkpointer(Arc::clone(&saver));
    let mut config = RunConfig::thread("m")
        .with_checkpoint_metadata("thread_id", "m")
        .with_checkpoint_metadata("owner", serde_json::json!({"team": "a"}))
        .with_checkpoint_metadata("step", 99)
        .with_checkpoint_metadata("source", "mine")
        .with_configurable("tenant", "acme");
    config.metadata.insert("thread_id".into(), "other".into());
    config
        .metadata
        .insert("nested".into(), serde_json::json!({"a": 1}));
    g.invoke(Map::new(), config).await.unwrap();
    let all = saver.list(&ListOptions::thread("m")).await.unwrap();
    assert_eq!(all.len(), 3);
    for t in &all {
        let m = &t.metadata;
        // Kept as given (a `thread_id`, an object), never over the checkpoint's own keys.
        assert_eq!(m.extra["thread_id"], "m");
        assert_eq!(m.extra["owner"], serde_json::json!({"team": "a"}));
        assert_ne!(m.step, Some(99));
        assert!(!m.extra.contains_key("step") && !m.extra.contains_key("source"));
        // `metadata` keys keep LangGraph's filter: scalars only.
        assert!(!m.extra.contains_key("nested"));
        assert_eq!(m.extra["tenant"], "acme");
    }
}

#[tokio::test]
async fn get_state_with_subgraphs_nests_the_subgraph_state() {
    let schema = || Schema::new().reducer("log", Reducer::append());
    let mut inner = StateGraph::<DynState>::with_schema(schema());
    inner.add_node("one", |_s, _c| async {
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
        .invoke(Map::from_iter([("log", value!([]))]), config.clone())
        .await
        .unwrap();
    let history = outer
        .get_state_history(&config, HistoryOptions::new())
        .await
        .unwrap();
    let before_sub = history.iter().find(|h| h.next == ["sub"]).unwrap();
    let at = config
        .clone()
        .with_checkpoint_id(before_sub.config.clone().unwrap().checkpoint_id.unwrap());
    let flat = outer.get_state(&at).await.unwrap();
    assert!(flat.tasks[0].state.is_none());
    let nested = outer.get_state_with_subgraphs(&at).await.unwrap();
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
        parents.get("").map(String::as_str),
        before_sub.config.as_ref().unwrap().checkpoint_id.as_deref()
    );
}

#[tokio::test]
async fn durability_modes_save_what_langgraph_saves() {
    use stategraph_graph::Durability;
    let only_foo = || Map::from_iter([("foo", value!(""))]);
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
async fn history_is_of_the_configs_thread_and_namespace() {
    let s = seed();
    let config = RunConfig::thread("t");
    s.graph.invoke(input(), config.clone()).await.unwrap();
    s.graph
        .invoke(input(), RunConfig::thread("u"))
        .await
        .unwrap();
    let all = s
        .graph
        .get_state_history(&config, HistoryOptions::new())
        .await
        .unwrap();
    assert_eq!(all.len(), 4, "thread t only");
    assert!(
        all.iter()
            .all(|h| h.config.as_ref().unwrap().thread_id == "t")
    );
    let newest = s
        .graph
        .get_state_history(&config, HistoryOptions::new().limit(1))
        .await
        .unwrap();
    assert_eq!(newest, all[..1]);
    let before = all[1].config.clone().unwrap().checkpoint_id.unwrap();
    let older = s
        .graph
        .get_state_history(&config, HistoryOptions::new().before(before))
        .await
        .unwrap();
    assert_eq!(older, all[2..]);
    let inputs = s
        .graph
        .get_state_history(&config, HistoryOptions::new().filter("source", "input"))
        .await
        .unwrap();
    assert_eq!(inputs, all[3..]);
    // A pinned checkpoint narrows the history to it, as LangGraph's `list(config)` does.
    let pinned = config
        .clone()
        .with_checkpoint_id(all[2].config.clone().unwrap().checkpoint_id.unwrap());
    let one = s
        .graph
        .get_state_history(&pinned, HistoryOptions::new())
        .await
        .unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].config, all[2].config);
    // The namespace is the config's too: the root graph has no subgraph checkpoints.
    let mut sub = config.clone();
    sub.checkpoint_ns = "sub:1".to_owned();
    assert!(
        s.graph
            .get_state_history(&sub, HistoryOptions::new())
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn fork_copies_a_checkpoint_as_a_sibling() {
    let s = seed();
    let config = RunConfig::thread("t");
    s.graph.invoke(input(), config.clone()).await.unwrap();
    let history = s
        .graph
        .get_state_history(&config, HistoryOptions::new())
        .await
        .unwrap();
    let step0 = &history[2]; // next: node_a
    let at = config
        .clone()
        .with_checkpoint_id(step0.config.clone().unwrap().checkpoint_id.unwrap());
    let copy = s.graph.fork(&at).await.unwrap();
    let forked = s.graph.get_state(&config).await.unwrap();
    assert_eq!(forked.config.as_ref(), Some(&copy));
    assert_eq!(forked.parent_config, step0.parent_config, "a sibling");
    assert_eq!(forked.values, step0.values);
    assert_eq!(forked.next, step0.next);
    let meta = forked.metadata.unwrap();
    assert_eq!(meta.source, Some(CheckpointSource::Fork));
    assert_eq!(meta.step, Some(1));
    // Continuing from the copy runs what the original had next.
    let out = s.graph.continue_run(config.clone()).await.unwrap();
    assert_eq!(out["bar"], value!(["a", "b"]));
    assert_eq!((s.a.load(SeqCst), s.b.load(SeqCst)), (2, 2));
    // Nothing to copy on a new thread.
    let err = s.graph.fork(&RunConfig::thread("new")).await.unwrap_err();
    assert!(matches!(err, GraphError::NotFound { .. }), "{err}");
}

#[tokio::test]
async fn bulk_update_can_fork_then_update_the_copy() {
    let s = seed();
    let config = RunConfig::thread("t");
    s.graph.invoke(input(), config.clone()).await.unwrap();
    let head = s.graph.get_state(&config).await.unwrap().config.unwrap();
    let at = s
        .graph
        .bulk_update_state(
            &config,
            vec![
                vec![StateUpdate::fork()],
                vec![StateUpdate::new(
                    Map::from_iter([("foo", value!("f"))]),
                    "node_a",
                )],
            ],
        )
        .await
        .unwrap();
    let state = s.graph.get_state(&config).await.unwrap();
    assert_eq!(state.config.as_ref(), Some(&at));
    assert_eq!(state.values["foo"], value!("f"));
    assert_eq!(state.next, ["node_b"]);
    let copy = s
        .graph
        .get_state(&RunConfig {
            checkpoint_id: state.parent_config.unwrap().checkpoint_id,
            ..config.clone()
        })
        .await
        .unwrap();
    let copy_meta = copy.metadata.unwrap();
    assert_eq!(copy_meta.source, Some(CheckpointSource::Fork));
    assert_ne!(copy.config.as_ref(), Some(&head), "a new checkpoint");
    // A fork takes no values, and is alone in its super-step.
    let err = s
        .graph
        .update_state(&config, Map::new(), AsNode::Fork)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, GraphError::InvalidArgument { what, .. } if what == "fork"),
        "{err}"
    );
    let err = s
        .graph
        .bulk_update_state(
            &config,
            vec![vec![
                StateUpdate::fork(),
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
async fn an_update_without_values_follows_the_nodes_edges() {
    let s = seed();
    let config = RunConfig::thread("t");
    s.graph.invoke(input(), config.clone()).await.unwrap();
    let before = s.graph.get_state(&config).await.unwrap();
    s.graph
        .bulk_update_state(
            &config,
            vec![vec![StateUpdate::<Map>::without_values("node_a")]],
        )
        .await
        .unwrap();
    let state = s.graph.get_state(&config).await.unwrap();
    assert_eq!(state.values, before.values, "nothing written");
    assert_eq!(state.next, ["node_b"], "node_a's edge");
    assert_eq!(
        state.metadata.unwrap().source,
        Some(CheckpointSource::Update)
    );
}

#[tokio::test]
async fn as_node_start_applies_the_update_as_input() {
    assert_eq!(AsNode::from(START), AsNode::Start);
    assert_eq!(AsNode::from("node_a"), AsNode::Node("node_a".to_owned()));
    assert_eq!(AsNode::from(START.to_owned()).name(), Some(START));
    assert_eq!(AsNode::default(), AsNode::Inferred);
    let s = seed();
    let config = RunConfig::thread("t");
    s.graph.invoke(input(), config.clone()).await.unwrap();
    s.graph
        .update_state(&config, Map::from_iter([("foo", value!("s"))]), START)
        .await
        .unwrap();
    let state = s.graph.get_state(&config).await.unwrap();
    assert_eq!(state.next, ["node_a"], "START's edge");
    assert_eq!(state.values["foo"], value!("s"));
}

/// A graph routing from `pick` by a path map given in `map`'s form.
fn routed(
    map: impl FnOnce(stategraph_graph::ConditionalEdges<'_, DynState>),
) -> StateGraph<DynState> {
    let mut g =
        StateGraph::<DynState>::with_schema(Schema::new().reducer("log", Reducer::append()));
    for n in ["pick", "left", "right"] {
        g.add_node(n, move |_s, _c| async move {
            Ok(Map::from_iter([("log", value!([n]))]))
        });
    }
    g.add_edge(START, "pick");
    map(g.add_conditional_edges("pick", |s: &DynState| {
        let go = s.get("go").and_then(|v| v.as_str()).unwrap_or("left");
        Ok(vec![go.into()])
    }));
    g.add_edge("left", END).add_edge("right", END);
    g
}

#[tokio::test]
async fn path_maps_take_names_and_pairs() {
    let schema = Schema::new()
        .reducer("log", Reducer::append())
        .last_value("go");
    // The list form: each name is its own key.
    let mut g = routed(|edges| {
        edges.path_map(["left", "right"]);
    });
    g.add_node("unused", |_s, _c| async { Ok(Map::new()) });
    assert!(
        g.compile().is_err(),
        "with a path map, validation knows `unused` is unreachable"
    );
    // Pairs, and chaining on from the handle.
    let mut g = StateGraph::<DynState>::with_schema(schema.clone());
    for n in ["pick", "left", "right"] {
        g.add_node(n, move |_s, _c| async move {
            Ok(Map::from_iter([("log", value!([n]))]))
        });
    }
    g.add_edge(START, "pick")
        .add_conditional_edges("pick", |s: &DynState| {
            let go = s.get("go").and_then(|v| v.as_str()).unwrap_or("l");
            Ok(vec![go.into()])
        })
        .path_map([("l", "left"), ("r", "right"), ("done", END)])
        .add_edge("left", END)
        .add_edge("right", END);
    let graph = g.compile().unwrap();
    for (go, log) in [
        ("l", value!(["pick", "left"])),
        ("r", value!(["pick", "right"])),
        ("done", value!(["pick"])),
    ] {
        let out = graph
            .invoke_values(Map::from_iter([("go", value!(go))]), RunConfig::default())
            .await
            .unwrap();
        assert_eq!(out["log"], log, "{go}");
    }
    let err = graph
        .invoke_values(
            Map::from_iter([("go", value!("left"))]),
            RunConfig::default(),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not in its path map"), "{err}");
    // An unknown node in the map fails validation; without a map any node may follow.
    let mut g = StateGraph::<DynState>::with_schema(schema);
    g.add_node("pick", |_s, _c| async { Ok(Map::new()) });
    g.add_edge(START, "pick")
        .add_conditional_edges("pick", |_s: &DynState| Ok(vec![END.into()]))
        .path_map([("x", "nowhere")]);
    assert!(matches!(g.compile(), Err(GraphError::InvalidGraph(_))));
    // Without a path map, the handle derefs to the graph.
    let g = routed(|mut edges| {
        edges.add_edge("left", "right");
    });
    assert!(g.compile().is_ok());
}
