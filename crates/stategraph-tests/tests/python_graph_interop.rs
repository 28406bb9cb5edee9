//! Graph-level interop with Python LangGraph 1.2.22 on one SQLite file:
//! Python's `get_state_history` over a thread stategraph wrote is exactly what stategraph
//! reports (ids, task ids, values, next, metadata, parents), has the same shape as Python's
//! own run of the same graph, and each side continues the other's thread.
//!
//! Needs the pinned Python environment (`scripts/python-env.sh`; `scripts/test.sh` sets it
//! up). Fails, never skips, without it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use serde_json::{Value as Json, json};
use stategraph::graph::{Command, Send};
use stategraph::prelude::*;
use stategraph::{CheckpointSaver, StateSnapshot, Value};

#[derive(State, Clone, Debug, Default)]
struct Seed {
    foo: String,
    #[reducer(append)]
    bar: Vec<String>,
}

#[derive(State, Clone, Debug, Default)]
struct Route {
    #[reducer(append)]
    log: Vec<String>,
    go_left: bool,
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

fn route_graph(saver: Arc<dyn CheckpointSaver>) -> CompiledGraph<Route> {
    let mut g = StateGraph::<Route>::new();
    for n in ["decide", "left", "right"] {
        g.add_node(n, move |_s, _c| async move {
            Ok(RouteUpdate::default().log([n]))
        });
    }
    g.add_edge(START, "decide");
    g.add_conditional_edges("decide", |s: &Route| {
        Ok(vec![if s.go_left { "l".into() } else { "r".into() }])
    })
    .path_map([("l", "left"), ("r", "right")]);
    g.add_edge("left", END).add_edge("right", END);
    g.compile().unwrap().with_checkpointer(saver)
}

#[derive(State, Clone, Debug, Default)]
struct Work {
    items: Vec<i64>,
    #[reducer(append)]
    done: Vec<i64>,
    item: i64,
}

fn sends_graph(saver: Arc<dyn CheckpointSaver>) -> CompiledGraph<Work> {
    let mut g = StateGraph::<Work>::new();
    g.add_node("worker", |s, _c| async move {
        Ok(WorkUpdate::default().done([s.item * 10]))
    });
    g.add_conditional_edges(START, |s: &Work| {
        Ok(s.items
            .iter()
            .map(|i| Send::new("worker", WorkUpdate::default().item(*i)).into())
            .collect())
    });
    g.compile().unwrap().with_checkpointer(saver)
}

fn command_graph(saver: Arc<dyn CheckpointSaver>) -> CompiledGraph<Route> {
    let mut g = StateGraph::<Route>::new();
    g.add_node("router", |_s, _c| async {
        Ok(Command::update_and_goto(
            RouteUpdate::default().log(["router"]),
            ["right"],
        ))
    });
    for n in ["left", "right"] {
        g.add_node(n, move |_s, _c| async move {
            Ok(RouteUpdate::default().log([n]))
        });
    }
    g.add_edge(START, "router")
        .add_destinations("router", ["left", "right"]);
    g.compile().unwrap().with_checkpointer(saver)
}

/// START → a, b in parallel → c: a and c append their names to `log`, b overwrites it.
fn overwrite_graph(saver: Arc<dyn CheckpointSaver>) -> CompiledGraph<Route> {
    let mut g = StateGraph::<Route>::new();
    for n in ["a", "c"] {
        g.add_node(n, move |_s, _c| async move {
            Ok(RouteUpdate::default().log([n]))
        });
    }
    g.add_node("b", |_s, _c| async {
        let reset = stategraph::graph::Overwrite::new(vec![Value::from("b")]);
        Ok(NodeOutput::<RouteUpdate>::Writes(vec![(
            "log".to_owned(),
            reset.into(),
        )]))
    });
    g.add_edge(START, "a")
        .add_edge(START, "b")
        .add_edge("a", "c")
        .add_edge("b", "c");
    g.compile().unwrap().with_checkpointer(saver)
}

/// LangGraph's managed values as fields: computed for each step, never stored.
#[derive(State, Clone, Debug, Default)]
struct Steps {
    #[reducer(append)]
    log: Vec<String>,
    #[managed(remaining_steps)]
    remaining: i64,
    #[managed(is_last_step)]
    last: bool,
}

/// START → count, looping while `remaining` is above 10002 (the default recursion limit
/// leaves 10006 at the first step; the conditional edge reads it too);
/// `count` logs `remaining:last` as Python spells it.
fn steps_graph(saver: Arc<dyn CheckpointSaver>) -> CompiledGraph<Steps> {
    let mut g = StateGraph::<Steps>::new();
    g.add_node("count", |s: Arc<Steps>, _c| async move {
        let last = if s.last { "True" } else { "False" };
        Ok(StepsUpdate::default().log([format!("{}:{last}", s.remaining)]))
    });
    g.add_edge(START, "count");
    g.add_conditional_edges("count", |s: &Steps| {
        Ok(vec![if s.remaining > 10_002 {
            "count".into()
        } else {
            END.into()
        }])
    });
    g.compile().unwrap().with_checkpointer(saver)
}

/// START → a → b → b2 and a → c; b2 and c lead to `d`, deferred: by two edges, or (`join`)
/// by one join edge. `d` runs once, after the longer branch.
fn defer_graph(saver: Arc<dyn CheckpointSaver>, join: bool) -> CompiledGraph<Route> {
    let mut g = StateGraph::<Route>::new();
    for n in ["a", "b", "b2", "c", "d"] {
        g.add_node(n, move |_s, _c| async move {
            Ok(RouteUpdate::default().log([n]))
        });
    }
    g.add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("a", "c")
        .add_edge("b", "b2")
        .add_edge("d", END)
        .set_defer("d");
    if join {
        g.add_join(["b2", "c"], "d");
    } else {
        g.add_edge("b2", "d").add_edge("c", "d");
    }
    g.compile().unwrap().with_checkpointer(saver)
}

fn sub_graph(saver: Arc<dyn CheckpointSaver>) -> CompiledGraph<Route> {
    let mut inner = StateGraph::<Route>::new();
    for (n, log) in [("one", "sub-one"), ("two", "sub-two")] {
        inner.add_node(n, move |_s, _c| async move {
            Ok(RouteUpdate::default().log([log]))
        });
    }
    inner.add_edge(START, "one").add_edge("one", "two");
    let mut g = StateGraph::<Route>::new();
    g.add_subgraph("sub", inner.compile().unwrap());
    g.add_node("after", |_s, _c| async {
        Ok(RouteUpdate::default().log(["after"]))
    });
    g.add_edge(START, "sub").add_edge("sub", "after");
    g.compile().unwrap().with_checkpointer(saver)
}

fn hitl_graph(saver: Arc<dyn CheckpointSaver>) -> CompiledGraph<Route> {
    let mut g = StateGraph::<Route>::new();
    g.add_node("ask", |_s, ctx| async move {
        let answer = ctx.interrupt(stategraph::value!({"question": "approve?"}))?;
        Ok(RouteUpdate::default().log([format!("answer: {}", answer.as_str().unwrap_or("?"))]))
    });
    g.add_edge(START, "ask");
    g.compile().unwrap().with_checkpointer(saver)
}

/// Runs `scripts/interop/seed_graph.py DB GRAPH THREAD ACTIONS…`.
fn py(
    db: &(impl AsRef<std::ffi::OsStr> + ?Sized),
    graph: &str,
    thread: &str,
    actions: &[&str],
) -> Json {
    py_with_key(None, db, graph, thread, actions)
}

use stategraph_testkit::python::seed_graph_py as py_with_key;

/// Our snapshots in the script's shape (configs flattened, tasks without interrupts).
fn ours(history: &[StateSnapshot]) -> Vec<Json> {
    history
        .iter()
        .map(|s| {
            let mut j = s.to_json();
            for key in ["config", "parent_config"] {
                let flat = j[key]["configurable"].clone();
                j[key] = if flat.is_null() { Json::Null } else { flat };
            }
            j
        })
        .collect()
}

/// Every checkpoint of a thread, all namespaces, newest first, without what depends on time
/// or randomness: namespace (task id removed), metadata, values, writes per channel.
async fn all_namespaces(saver: &dyn CheckpointSaver, thread: &str) -> Vec<Json> {
    saver
        .list(&stategraph::ListOptions::thread(thread))
        .await
        .unwrap()
        .iter()
        .map(|t| {
            let ns = t.config.checkpoint_ns.split(':').next().unwrap_or_default().to_owned();
            let mut meta = (*t.metadata).clone();
            let parents = meta.parents.take().unwrap_or_default();
            json!({
                "ns": ns,
                "metadata": meta.to_json(),
                "parent_namespaces": parents.keys().collect::<Vec<_>>(),
                "values": Value::Map(t.checkpoint.channel_values.clone().into_iter().collect()).to_json(),
                "versions": t.checkpoint.channel_versions.iter().map(|(k, v)| (k, v.counter())).collect::<std::collections::BTreeMap<_, _>>(),
                "updated": t.checkpoint.updated_channels,
                "writes": t.pending_writes.iter().map(|w| {
                    let mut value = w.value.to_json();
                    if w.channel == "__interrupt__" {
                        // Interrupt ids hash the task id, which differs between threads.
                        for i in value.as_array_mut().into_iter().flatten() {
                            i["data"]["id"] = json!("<id>");
                        }
                    }
                    json!([w.channel, w.idx, w.task_path, value])
                }).collect::<Vec<_>>(),
            })
        })
        .collect()
}

/// What does not depend on time or randomness: values, next, metadata, task names.
fn shape(history: &[Json]) -> Vec<Json> {
    history
        .iter()
        .map(|s| {
            json!({
                "values": s["values"],
                "next": s["next"],
                "metadata": s["metadata"],
                "tasks": s["tasks"].as_array().unwrap().iter().map(|t| t["name"].clone()).collect::<Vec<_>>(),
                "has_parent": !s["parent_config"].is_null(),
            })
        })
        .collect()
}

/// One database both sides use: our saver, and what to hand Python to open the same data.
struct Backend {
    saver: Arc<dyn CheckpointSaver>,
    python_db: String,
    /// Both sides encrypt with this AES key.
    aes_key: Option<&'static str>,
    _keep: Box<dyn std::any::Any + std::marker::Send>,
}

async fn sqlite_backend() -> Backend {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.sqlite");
    Backend {
        saver: Arc::new(SqliteConfig::file(&db).connect().await.unwrap()),
        python_db: db.display().to_string(),
        aes_key: None,
        _keep: Box::new(dir),
    }
}

async fn postgres_backend() -> Backend {
    let (saver, guard, url) = common::postgres_with_url(None).await;
    Backend {
        saver,
        python_db: url,
        aes_key: None,
        _keep: Box::new(guard),
    }
}

/// A scratch database on the MongoDB test server; Python's `MongoDBSaver` opens the same
/// collections from the URL naming it.
async fn mongodb_backend(aes_key: Option<&'static str>) -> Backend {
    let (saver, database) = stategraph_testkit::mongodb::saver_with(|config| match aes_key {
        Some(key) => config.serializer(Arc::new(
            stategraph::EncryptedSerializer::aes(key.as_bytes()).unwrap(),
        )),
        None => config,
    })
    .await;
    Backend {
        saver: Arc::new(saver),
        python_db: database.url(),
        aes_key,
        _keep: Box::new(database),
    }
}

/// The AES key both sides use in the encrypted interop tests (raw bytes, as
/// `LANGGRAPH_AES_KEY` holds them).
const AES_KEY: &str = "0123456789abcdef0123456789abcdef";

async fn encrypted_postgres_backend() -> Backend {
    let serde = stategraph::EncryptedSerializer::aes(AES_KEY.as_bytes()).unwrap();
    let (saver, guard, url) = common::postgres_with_url(Some(Arc::new(serde))).await;
    Backend {
        saver,
        python_db: url,
        aes_key: Some(AES_KEY),
        _keep: Box::new(guard),
    }
}

async fn check<S: stategraph::State>(
    graph_name: &str,
    build: impl Fn(Arc<dyn CheckpointSaver>) -> CompiledGraph<S>,
    input: impl Fn() -> S::Update,
    history_len_after_two_runs: usize,
) {
    check_on(
        &sqlite_backend().await,
        graph_name,
        build,
        input,
        history_len_after_two_runs,
    )
    .await;
}

async fn check_on<S: stategraph::State>(
    backend: &Backend,
    graph_name: &str,
    build: impl Fn(Arc<dyn CheckpointSaver>) -> CompiledGraph<S>,
    input: impl Fn() -> S::Update,
    history_len_after_two_runs: usize,
) {
    let (ours_after, ours_py) = shared_both_ways(
        backend,
        graph_name,
        build,
        input,
        history_len_after_two_runs,
    )
    .await;
    // Without the graph's code, a reader graph inferred from the checkpoints gives the same
    // history, on our thread and on Python's — except that it cannot know which keys are
    // aggregates, whose empty value (`[]`) the real graph shows before the first write.
    for (thread, expected) in [("rust", &ours_after), ("py", &ours_py)] {
        assert_eq!(
            read_without_the_graph(&backend.saver, thread).await,
            without_unwritten_aggregates(expected),
            "{graph_name}: {thread}"
        );
    }
}

/// Two runs of the graph on each of two threads, taking turns with Python: each side reads
/// exactly what the other wrote, and Python's own run has the same shape. The histories of
/// our thread (after Python continued it) and of Python's (after we continued it).
async fn shared_both_ways<S: stategraph::State>(
    backend: &Backend,
    graph_name: &str,
    build: impl Fn(Arc<dyn CheckpointSaver>) -> CompiledGraph<S>,
    input: impl Fn() -> S::Update,
    history_len_after_two_runs: usize,
) -> (Vec<Json>, Vec<Json>) {
    let db = backend.python_db.clone();
    let py = |db: &str, graph: &str, thread: &str, actions: &[&str]| {
        py_with_key(backend.aes_key, db, graph, thread, actions)
    };
    let graph = build(Arc::clone(&backend.saver));
    let rust = RunConfig::thread("rust");
    graph.invoke_values(input(), rust.clone()).await.unwrap();
    let our_history = ours(
        &graph
            .get_state_history(&rust, Default::default())
            .await
            .unwrap(),
    );

    // Python reads our thread exactly as we do (ids, task ids, ts, values, next, metadata).
    let theirs = py(&db, graph_name, "rust", &["history"]);
    assert_eq!(theirs["history"].as_array().unwrap(), &our_history);

    // Python's own run of the same graph has the same shape.
    let own = py(&db, graph_name, "py", &["run", "history"]);
    assert_eq!(
        shape(own["history"].as_array().unwrap()),
        shape(&our_history)
    );

    // Python continues our thread; we read what it wrote.
    let continued = py(&db, graph_name, "rust", &["run", "history"]);
    let ours_after = ours(
        &graph
            .get_state_history(&rust, Default::default())
            .await
            .unwrap(),
    );
    assert_eq!(ours_after.len(), history_len_after_two_runs);
    assert_eq!(continued["history"].as_array().unwrap(), &ours_after);

    // We continue Python's thread; Python reads what we wrote.
    let py_thread = RunConfig::thread("py");
    graph
        .invoke_values(input(), py_thread.clone())
        .await
        .unwrap();
    let ours_py = ours(
        &graph
            .get_state_history(&py_thread, Default::default())
            .await
            .unwrap(),
    );
    let theirs_py = py(&db, graph_name, "py", &["history"]);
    assert_eq!(theirs_py["history"].as_array().unwrap(), &ours_py);
    assert_eq!(
        shape(&ours_py),
        shape(&ours_after),
        "both threads went through the same steps"
    );
    (ours_after, ours_py)
}

/// `history` with the empty lists that unwritten aggregate channels show removed.
fn without_unwritten_aggregates(history: &[Json]) -> Vec<Json> {
    history
        .iter()
        .map(|s| {
            let mut s = s.clone();
            if let Some(values) = s["values"].as_object_mut() {
                values.retain(|_, v| v.as_array().is_none_or(|a| !a.is_empty()));
            }
            s
        })
        .collect()
}

/// `get_state_history` of `thread` through `inspect::reader_graph`.
async fn read_without_the_graph(saver: &Arc<dyn CheckpointSaver>, thread: &str) -> Vec<Json> {
    let latest = saver
        .get_tuple(&stategraph::CheckpointConfig::new(thread))
        .await
        .unwrap()
        .unwrap()
        .checkpoint;
    let reader = stategraph::graph::inspect::reader_graph(&latest)
        .unwrap()
        .with_checkpointer(Arc::clone(saver));
    without_unwritten_aggregates(&ours(
        &reader
            .get_state_history(&RunConfig::thread(thread), Default::default())
            .await
            .unwrap(),
    ))
}

#[tokio::test]
async fn seed_graph_threads_are_shared_with_python() {
    check(
        "seed",
        seed_graph,
        || SeedUpdate::default().foo("").bar(Vec::<String>::new()),
        8,
    )
    .await;
}

#[tokio::test]
async fn conditional_edge_threads_are_shared_with_python() {
    check(
        "route",
        route_graph,
        || {
            RouteUpdate::default()
                .log(Vec::<String>::new())
                .go_left(true)
        },
        8,
    )
    .await;
}

#[tokio::test]
async fn send_fan_out_threads_are_shared_with_python() {
    check(
        "sends",
        sends_graph,
        || {
            WorkUpdate::default()
                .items([1, 2, 3])
                .done(Vec::<i64>::new())
        },
        6,
    )
    .await;
}

#[tokio::test]
async fn command_threads_are_shared_with_python() {
    check(
        "command",
        command_graph,
        || {
            RouteUpdate::default()
                .log(Vec::<String>::new())
                .go_left(false)
        },
        8,
    )
    .await;
}

#[tokio::test]
async fn overwrite_threads_are_shared_with_python() {
    check(
        "overwrite",
        overwrite_graph,
        || {
            RouteUpdate::default()
                .log(Vec::<String>::new())
                .go_left(false)
        },
        8,
    )
    .await;
}

/// `RemainingSteps` and `IsLastStep` read by a node and a conditional edge: the same loop,
/// the same history, threads shared both ways.
#[tokio::test]
async fn managed_value_threads_are_shared_with_python() {
    let backend = sqlite_backend().await;
    check_on(
        &backend,
        "steps",
        steps_graph,
        || StepsUpdate::default().log(Vec::<String>::new()),
        14,
    )
    .await;
    let graph = steps_graph(Arc::clone(&backend.saver));
    let state = graph.get_state(&RunConfig::thread("rust")).await.unwrap();
    let one_run = [
        "10006:False",
        "10005:False",
        "10004:False",
        "10003:False",
        "10002:False",
    ];
    assert_eq!(
        state.values["log"].to_json(),
        json!([one_run, one_run].concat()),
        "the managed values are not stored, and each run counts from its own limit"
    );
    assert!(!state.values.contains_key("remaining") && !state.values.contains_key("last"));
}

/// A deferred node after branches of uneven length, by edges and by a join: the same
/// history as Python's, read and continued both ways, and the same stored channels
/// (LangGraph's after-finish channels) step by step.
#[tokio::test]
async fn deferred_node_threads_are_shared_with_python() {
    for (name, join) in [("defer", false), ("defer_join", true)] {
        let backend = sqlite_backend().await;
        // Not read by a reader graph: it sees a deferred node only in a checkpoint holding
        // its pending edge, which a finished thread's last checkpoint does not.
        shared_both_ways(
            &backend,
            name,
            |saver| defer_graph(saver, join),
            || {
                RouteUpdate::default()
                    .log(Vec::<String>::new())
                    .go_left(false)
            },
            12,
        )
        .await;
        let graph = defer_graph(Arc::clone(&backend.saver), join);
        let state = graph.get_state(&RunConfig::thread("rust")).await.unwrap();
        let log: Vec<Json> = ["a", "b", "c", "b2", "d"]
            .iter()
            .map(|n| json!(n))
            .collect();
        assert_eq!(
            state.values["log"].to_json(),
            Json::Array([log.clone(), log].concat()),
            "{name}: `d` ran once a run, after `b2`"
        );
        // Python stores a join channel's set of sources as the live set, which later steps
        // of the run grow before a background save encodes it: its intermediate checkpoints
        // show sources that wrote only later (seen: `{b2, c}` stored for the step where only
        // `c` had written). The join's stored channels are therefore not compared.
        if join {
            continue;
        }
        // A node's edge writes are in Python in the order of a set of edges (by string
        // hashes, different in each process): compared as sets, without their indexes.
        let unordered = |checkpoints: Vec<Json>| {
            checkpoints
                .into_iter()
                .map(|mut c| {
                    if let Some(writes) = c["writes"].as_array_mut() {
                        for w in writes.iter_mut() {
                            w[1] = json!(null);
                        }
                        writes.sort_by_key(Json::to_string);
                    }
                    c
                })
                .collect::<Vec<_>>()
        };
        let (py, rust) = (
            unordered(all_namespaces(backend.saver.as_ref(), "py").await),
            unordered(all_namespaces(backend.saver.as_ref(), "rust").await),
        );
        assert_eq!(py.len(), rust.len(), "{name}");
        for (i, (p, r)) in py.iter().zip(&rust).enumerate() {
            assert_eq!(
                p.to_string(),
                r.to_string(),
                "{name}: checkpoint {i}, newest first"
            );
        }
    }
}

#[tokio::test]
async fn subgraph_threads_are_shared_with_python() {
    check(
        "sub",
        sub_graph,
        || {
            RouteUpdate::default()
                .log(Vec::<String>::new())
                .go_left(true)
        },
        8,
    )
    .await;
}

/// The `hitl`/`route` graphs' standard input: an empty log, going left.
fn left_input() -> RouteUpdate {
    RouteUpdate::default()
        .log(Vec::<String>::new())
        .go_left(true)
}

#[tokio::test]
async fn update_state_matches_python() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.sqlite");
    let graph = seed_graph(Arc::new(SqliteConfig::file(&db).connect().await.unwrap()));
    let rust = RunConfig::thread("rust");
    let input = || SeedUpdate::default().foo("").bar(Vec::<String>::new());
    graph.invoke_values(input(), rust.clone()).await.unwrap();
    graph
        .update_state(
            &rust,
            SeedUpdate::default().foo("upd").bar(["u"]),
            AsNode::Inferred,
        )
        .await
        .unwrap();
    graph
        .update_state(&rust, SeedUpdate::default().foo("x"), "node_a")
        .await
        .unwrap();
    graph.continue_values(rust.clone()).await.unwrap();
    py(
        &db,
        "seed",
        "py",
        &["run", "update", "update_as_a", "resume"],
    );

    let saver = SqliteConfig::file(&db).connect().await.unwrap();
    assert_eq!(
        all_namespaces(&saver, "py").await,
        all_namespaces(&saver, "rust").await
    );
    let ours = ours(
        &graph
            .get_state_history(&rust, Default::default())
            .await
            .unwrap(),
    );
    let theirs = py(&db, "seed", "rust", &["history"]);
    assert_eq!(theirs["history"].as_array().unwrap(), &ours);
    // The updates' writes are stored on the checkpoints they were applied to, under
    // LangGraph's update task ids.
    let all = saver
        .list(&stategraph::ListOptions::thread("rust"))
        .await
        .unwrap();
    let update_writes: Vec<_> = all
        .iter()
        .flat_map(|t| t.pending_writes.iter())
        .filter(|w| w.task_path == "~__interrupt__, 0000000000")
        .collect();
    assert_eq!(
        update_writes.len(),
        4,
        "foo+bar of the first update, foo+branch of the second"
    );
}

#[tokio::test]
async fn interrupted_threads_are_shared_with_python() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.sqlite");
    let graph = hitl_graph(Arc::new(SqliteConfig::file(&db).connect().await.unwrap()));
    let input = left_input;
    let (rust, rust2) = (RunConfig::thread("rust"), RunConfig::thread("rust2"));

    // Interrupted by us: Python sees the same pending interrupt (id included) as we do.
    let out = graph.invoke_values(input(), rust.clone()).await.unwrap();
    assert!(out.contains_key("__interrupt__"));
    let ours_now = ours(
        &graph
            .get_state_history(&rust, Default::default())
            .await
            .unwrap(),
    );
    let theirs_now = py(&db, "hitl", "rust", &["history"]);
    assert_eq!(theirs_now["history"].as_array().unwrap(), &ours_now);
    let state = graph.get_state(&rust).await.unwrap();
    assert_eq!(state.interrupts.len(), 1);
    assert_eq!(
        state.interrupts[0].value,
        stategraph::value!({"question": "approve?"})
    );

    // Python's own run interrupts the same way, and answers its own interrupt.
    py(&db, "hitl", "py", &["run", "resume_yes"]);
    // We answer ours: the same checkpoints and writes as Python's.
    graph
        .resume_values(stategraph::graph::Resume::Value("yes".into()), rust.clone())
        .await
        .unwrap();
    let saver = SqliteConfig::file(&db).connect().await.unwrap();
    assert_eq!(
        all_namespaces(&saver, "py").await,
        all_namespaces(&saver, "rust").await
    );

    // Python answers an interrupt we raised; we answer one Python raised.
    graph.invoke_values(input(), rust2.clone()).await.unwrap();
    py(&db, "hitl", "rust2", &["resume_yes"]);
    py(&db, "hitl", "py2", &["run"]);
    graph
        .resume_values(
            stategraph::graph::Resume::Value("yes".into()),
            RunConfig::thread("py2"),
        )
        .await
        .unwrap();
    assert_eq!(
        all_namespaces(&saver, "rust2").await,
        all_namespaces(&saver, "rust").await
    );
    assert_eq!(
        all_namespaces(&saver, "py2").await,
        all_namespaces(&saver, "rust").await
    );
    let done = graph.get_state(&RunConfig::thread("py2")).await.unwrap();
    assert_eq!(done.values["log"], stategraph::value!(["answer: yes"]));
}

/// `update_state(None, as_node=END)` on an interrupted thread clears its pending task: the
/// same checkpoint as Python's, nothing next, no interrupt, and the thread takes new input.
#[tokio::test]
async fn clearing_an_interrupt_matches_python() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.sqlite");
    let graph = hitl_graph(Arc::new(SqliteConfig::file(&db).connect().await.unwrap()));
    let input = left_input;
    let rust = RunConfig::thread("rust");
    graph.invoke_values(input(), rust.clone()).await.unwrap();
    graph
        .update_state_values(&rust, None, stategraph::graph::END)
        .await
        .unwrap();
    let state = graph.get_state(&rust).await.unwrap();
    assert!(state.next.is_empty(), "{state:#?}");
    assert!(state.interrupts.is_empty(), "{state:#?}");
    py(&db, "hitl", "py", &["run", "end"]);
    let saver = SqliteConfig::file(&db).connect().await.unwrap();
    assert_eq!(
        all_namespaces(&saver, "py").await,
        all_namespaces(&saver, "rust").await
    );
    let theirs = py(&db, "hitl", "rust", &["history"]);
    let history = graph
        .get_state_history(&rust, Default::default())
        .await
        .unwrap();
    assert_eq!(theirs["history"].as_array().unwrap(), &ours(&history));
    // Several updates cannot clear tasks together.
    let e = graph
        .bulk_update_state(
            &rust,
            vec![vec![
                stategraph::graph::StateUpdate::without_values(stategraph::graph::END),
                stategraph::graph::StateUpdate::without_values("ask"),
            ]],
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("Cannot clear tasks"), "{e}");
    // A new run starts afresh.
    let out = graph.invoke_values(input(), rust.clone()).await.unwrap();
    assert!(out.contains_key("__interrupt__"));
}

/// After an interrupt is answered and the run resumed, the history still shows it on the
/// checkpoint where it was raised (on the task and in the snapshot's `interrupts`), exactly as
/// Python's `get_state_history` does; only the latest state drops answered interrupts.
async fn answered_interrupts_stay_in_history(backend: &Backend) {
    let graph = hitl_graph(Arc::clone(&backend.saver));
    let py = |thread: &str, actions: &[&str]| {
        py_with_key(backend.aes_key, &backend.python_db, "hitl", thread, actions)
    };
    let input = left_input;
    let rust = RunConfig::thread("rust");
    graph.invoke_values(input(), rust.clone()).await.unwrap();
    graph
        .resume_values(stategraph::graph::Resume::Value("yes".into()), rust.clone())
        .await
        .unwrap();
    let history = graph
        .get_state_history(&rust, Default::default())
        .await
        .unwrap();
    // input, the step that asked (and was answered), the end.
    assert_eq!(history.len(), 3, "{history:#?}");
    let asked = &history[1];
    assert_eq!(asked.tasks.len(), 1);
    assert_eq!(asked.tasks[0].interrupts.len(), 1, "{asked:#?}");
    assert_eq!(
        asked.tasks[0].interrupts[0].value,
        stategraph::value!({"question": "approve?"})
    );
    assert_eq!(asked.interrupts, asked.tasks[0].interrupts);
    // The latest state has nothing pending.
    assert!(graph.get_state(&rust).await.unwrap().interrupts.is_empty());
    // Python reads our thread's history the same way…
    let theirs = py("rust", &["history"]);
    assert_eq!(theirs["history"].as_array().unwrap(), &ours(&history));
    // …and its own run's history reads the same to us as to Python.
    let own = py("py", &["run", "resume_yes", "history"]);
    let ours_of_python = ours(
        &graph
            .get_state_history(&RunConfig::thread("py"), Default::default())
            .await
            .unwrap(),
    );
    assert_eq!(own["history"].as_array().unwrap(), &ours_of_python);
    assert_eq!(shape(&ours_of_python), shape(&ours(&history)));
}

#[tokio::test]
async fn answered_interrupts_stay_in_history_as_in_python() {
    answered_interrupts_stay_in_history(&sqlite_backend().await).await;
}

#[tokio::test]
async fn answered_interrupts_stay_in_history_as_in_python_on_postgres() {
    answered_interrupts_stay_in_history(&postgres_backend().await).await;
}

#[tokio::test]
async fn command_inputs_match_python() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.sqlite");
    let saver: Arc<dyn CheckpointSaver> =
        Arc::new(SqliteConfig::file(&db).connect().await.unwrap());
    let input = |left: bool| {
        RouteUpdate::default()
            .log(Vec::<String>::new())
            .go_left(left)
    };

    // `Command(update=…, goto="left")` on a finished thread: the writes are stored without a
    // task on its last checkpoint, then `left` runs with the update applied.
    let route = route_graph(Arc::clone(&saver));
    let rust = RunConfig::thread("rust");
    route
        .invoke_values(input(true), rust.clone())
        .await
        .unwrap();
    let command = RunCommand::update(RouteUpdate::default().log(["cmd"])).with_goto("left");
    let done = route.invoke_command(command, rust.clone()).await.unwrap();
    assert_eq!(done.log, ["decide", "left", "cmd", "left"]);
    py(&db, "route", "py", &["run", "command_left"]);
    assert_eq!(
        all_namespaces(saver.as_ref(), "py").await,
        all_namespaces(saver.as_ref(), "rust").await
    );
    let ours_now = ours(
        &route
            .get_state_history(&rust, Default::default())
            .await
            .unwrap(),
    );
    let theirs = py(&db, "route", "rust", &["history"]);
    assert_eq!(theirs["history"].as_array().unwrap(), &ours_now);

    // `Command(resume="yes", update=…)`: the answer and the update in one command.
    let hitl = hitl_graph(Arc::clone(&saver));
    let asked = RunConfig::thread("rust-hitl");
    hitl.invoke_values(input(true), asked.clone())
        .await
        .unwrap();
    let command = RunCommand::resume(stategraph::graph::Resume::Value("yes".into()))
        .with_update(RouteUpdate::default().log(["cmd"]));
    let done = hitl.invoke_command(command, asked.clone()).await.unwrap();
    assert_eq!(done.log, ["cmd", "answer: yes"]);
    py(&db, "hitl", "py-hitl", &["run", "resume_yes_logged"]);
    assert_eq!(
        all_namespaces(saver.as_ref(), "py-hitl").await,
        all_namespaces(saver.as_ref(), "rust-hitl").await
    );
}

#[tokio::test]
async fn seed_graph_threads_are_shared_with_python_on_postgres() {
    check_on(
        &postgres_backend().await,
        "seed",
        seed_graph,
        || SeedUpdate::default().foo("").bar(Vec::<String>::new()),
        8,
    )
    .await;
}

/// Our set-up gives the blob columns lz4 compression (the server has it): large blobs that
/// either side writes are compressed with it by the server, and the other side reads them.
#[tokio::test]
async fn large_blobs_on_lz4_columns_are_shared_with_python_on_postgres() {
    let backend = postgres_backend().await;
    let (client, conn) = tokio_postgres::connect(&backend.python_db, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    for table in ["checkpoint_blobs", "checkpoint_writes"] {
        let compression: String = client
            .query_one(
                "SELECT attcompression::text FROM pg_attribute \
                 WHERE attrelid = to_regclass($1) AND attname = 'blob'",
                &[&table],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(compression, "l", "{table}.blob");
    }

    // We write a thread whose list holds 200 KB of text; Python reads it as we do.
    let graph = seed_graph(Arc::clone(&backend.saver));
    let big = "lz4 ".repeat(50_000);
    let rust = RunConfig::thread("big");
    graph
        .invoke_values(
            SeedUpdate::default().foo("x").bar([big.clone()]),
            rust.clone(),
        )
        .await
        .unwrap();
    let history = |g: &CompiledGraph<Seed>| {
        let rust = rust.clone();
        let g = g.clone();
        async move {
            ours(
                &g.get_state_history(&rust, Default::default())
                    .await
                    .unwrap(),
            )
        }
    };
    let theirs = py(&backend.python_db, "seed", "big", &["history"]);
    assert_eq!(
        theirs["history"].as_array().unwrap(),
        &history(&graph).await
    );

    // Python continues it (its checkpoints carry the large list again); we read what it wrote.
    let continued = py(&backend.python_db, "seed", "big", &["run", "history"]);
    let after = history(&graph).await;
    assert_eq!(continued["history"].as_array().unwrap(), &after);
    let state: Seed = graph.get_state(&rust).await.unwrap().state().unwrap();
    assert_eq!(state.bar.first(), Some(&big));

    // The large values are stored lz4-compressed, ours and Python's.
    let rows: Vec<(String, Option<String>)> = client
        .query(
            "SELECT version, pg_column_compression(blob) FROM checkpoint_blobs \
             WHERE thread_id = 'big' AND channel = 'bar' AND length(blob) > 100000",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert!(rows.len() >= 2, "{rows:?}");
    assert!(
        rows.iter().all(|(_, c)| c.as_deref() == Some("lz4")),
        "{rows:?}"
    );
}

/// Python's `EncryptedSerializer.from_pycryptodome_aes()` and ours share encrypted threads on
/// Postgres in both directions; what stays in the clear is exactly what LangGraph leaves in
/// the clear; a wrong key or no key is a typed error naming the thread and channel.
#[tokio::test]
async fn encrypted_threads_are_shared_with_python_on_postgres() {
    let backend = encrypted_postgres_backend().await;
    check_on(
        &backend,
        "seed",
        seed_graph,
        || SeedUpdate::default().foo("").bar(Vec::<String>::new()),
        8,
    )
    .await;

    // At rest: every serialized blob and write is `<tag>+aes` (only "empty" markers are not
    // serialized at all); inline primitives (`foo`) stay in the checkpoint JSONB, as in
    // Python.
    let (client, conn) = tokio_postgres::connect(&backend.python_db, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    for table in ["checkpoint_blobs", "checkpoint_writes"] {
        let types: Vec<String> = client
            .query(&format!("SELECT DISTINCT type FROM {table}"), &[])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert!(!types.is_empty(), "{table} is empty");
        for t in &types {
            assert!(t == "empty" || t.ends_with("+aes"), "{table} holds `{t}`");
        }
    }
    let inline: Json = client
        .query_one(
            "SELECT checkpoint -> 'channel_values' FROM checkpoints \
             WHERE thread_id = 'rust' ORDER BY checkpoint_id DESC LIMIT 1",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        inline["foo"],
        json!("b"),
        "inline primitives stay plaintext"
    );
    assert!(inline.get("bar").is_none(), "lists live in encrypted blobs");

    // The wrong key, or no key, is a typed error that names where the bytes are.
    let schema = backend.python_db.rsplit("search_path%3D").next().unwrap();
    let reader = |serde: Option<Arc<dyn stategraph::Serializer>>| {
        let mut config =
            stategraph_postgres::PostgresConfig::from_url(&stategraph_testkit::postgres::url())
                .unwrap()
                .schema(schema)
                .pool_size(1)
                .without_setup();
        if let Some(serde) = serde {
            config = config.serializer(serde);
        }
        config
    };
    let wrong = stategraph::EncryptedSerializer::aes(b"fedcba9876543210fedcba9876543210").unwrap();
    for (config, what) in [
        (reader(Some(Arc::new(wrong))), "a wrong key"),
        (reader(None), "no key"),
    ] {
        let saver = config.connect().await.unwrap();
        let err = saver
            .get_tuple(&stategraph::CheckpointConfig::new("rust"))
            .await
            .expect_err(what);
        assert!(
            matches!(err, stategraph::CheckpointError::Serialization { .. }),
            "{what}: {err}"
        );
        let message = err.to_string();
        assert!(
            message.contains("rust") && message.contains("bar"),
            "{what}: {message}"
        );
    }

    // `encrypt_inline_values`: nothing is left in the checkpoint JSON, and Python still reads
    // exactly what we read.
    let private = stategraph::EncryptedSerializer::aes(AES_KEY.as_bytes())
        .unwrap()
        .encrypt_inline_values();
    let saver = reader(Some(Arc::new(private))).connect().await.unwrap();
    let graph = seed_graph(Arc::new(saver));
    let config = RunConfig::thread("private");
    graph
        .invoke_values(
            SeedUpdate::default().foo("").bar(Vec::<String>::new()),
            config.clone(),
        )
        .await
        .unwrap();
    let inline: Vec<Json> = client
        .query(
            "SELECT checkpoint -> 'channel_values' FROM checkpoints WHERE thread_id = 'private'",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(inline.len(), 4);
    for values in &inline {
        assert_eq!(values, &json!({}), "no value stays inline");
    }
    let foo_blobs: i64 = client
        .query_one(
            "SELECT count(*) FROM checkpoint_blobs WHERE thread_id = 'private' \
             AND channel = 'foo' AND type = 'msgpack+aes'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(foo_blobs >= 2, "foo went to encrypted blobs ({foo_blobs})");
    let ours = ours(
        &graph
            .get_state_history(&config, Default::default())
            .await
            .unwrap(),
    );
    let theirs = py_with_key(
        Some(AES_KEY),
        &backend.python_db,
        "seed",
        "private",
        &["history"],
    );
    assert_eq!(theirs["history"].as_array().unwrap(), &ours);
}

#[tokio::test]
async fn subgraph_threads_are_shared_with_python_on_postgres() {
    check_on(
        &postgres_backend().await,
        "sub",
        sub_graph,
        || {
            RouteUpdate::default()
                .log(Vec::<String>::new())
                .go_left(true)
        },
        8,
    )
    .await;
}

#[derive(State, Clone, Debug, Default)]
struct Chat {
    #[reducer(add_messages)]
    messages: Vec<stategraph::Message>,
}

fn chat_graph(saver: Arc<dyn CheckpointSaver>) -> CompiledGraph<Chat> {
    let mut g = StateGraph::<Chat>::new();
    g.add_node("agent", |s, _c| async move {
        let last = s
            .messages
            .last()
            .and_then(|m| m.text())
            .unwrap_or_default()
            .to_owned();
        let n = s
            .messages
            .iter()
            .filter(|m| matches!(m, stategraph::Message::Ai { .. }))
            .count();
        let reply = stategraph::Message::ai(format!("echo: {last}"), Vec::new())
            .with_id(format!("a{}", n + 1));
        Ok(ChatUpdate::default().messages([reply]))
    });
    g.add_edge(START, "agent");
    g.compile().unwrap().with_checkpointer(saver)
}

#[tokio::test]
async fn chat_threads_with_langchain_messages_are_shared_with_python() {
    let backend = sqlite_backend().await;
    let db = backend.python_db.clone();
    let graph = chat_graph(Arc::clone(&backend.saver));
    // Python starts the conversation; we continue it; Python reads real message classes back.
    py(&db, "chat", "py", &["run"]);
    let state = graph.get_state(&RunConfig::thread("py")).await.unwrap();
    let msgs: Vec<stategraph::Message> =
        stategraph::graph::from_value("messages", &state.values["messages"]).unwrap();
    assert_eq!(msgs.len(), 2);
    assert!(matches!(msgs[1], stategraph::Message::Ai { .. }));
    let again = stategraph::Message::human("again").with_id("h9");
    graph
        .invoke_values(
            ChatUpdate::default().messages([again]),
            RunConfig::thread("py"),
        )
        .await
        .unwrap();
    let theirs = py(&db, "chat", "py", &["messages"]);
    assert_eq!(
        theirs["messages"],
        json!([
            ["HumanMessage", "hi", "h1"],
            ["AIMessage", "echo: hi", "a1"],
            ["HumanMessage", "again", "h9"],
            ["AIMessage", "echo: again", "a2"]
        ])
    );
    // And the other way: we start, Python continues, we read Python's message back typed.
    graph
        .invoke_values(
            ChatUpdate::default().messages([stategraph::Message::human("hello").with_id("r1")]),
            RunConfig::thread("rust"),
        )
        .await
        .unwrap();
    py(&db, "chat", "rust", &["run"]);
    let state = graph.get_state(&RunConfig::thread("rust")).await.unwrap();
    let msgs: Vec<stategraph::Message> =
        stategraph::graph::from_value("messages", &state.values["messages"]).unwrap();
    let texts: Vec<_> = msgs
        .iter()
        .map(|m| m.text().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(texts, ["hello", "echo: hello", "hi", "echo: hi"]);
}

/// A thread whose metadata we sealed (`SealedMetadataSaver`): Python reads it (seeing the
/// sealed entry, not the keys) and continues it; we read Python's new checkpoints and our
/// sealed ones alike.
#[tokio::test]
async fn python_continues_a_thread_with_sealed_metadata() {
    let backend = sqlite_backend().await;
    let cipher = Arc::new(stategraph::AesEaxCipher::new(b"0123456789abcdef").unwrap());
    let saver: Arc<dyn CheckpointSaver> = Arc::new(stategraph::SealedMetadataSaver::new(
        Arc::clone(&backend.saver),
        cipher,
    ));
    let graph = seed_graph(Arc::clone(&saver));
    let mut config = RunConfig::thread("sealed");
    config
        .metadata
        .insert("user".into(), json!("alice@example.com"));
    graph
        .invoke_values(
            SeedUpdate::default().foo("").bar(Vec::<String>::new()),
            config.clone(),
        )
        .await
        .unwrap();

    let theirs = py(&backend.python_db, "seed", "sealed", &["history"]);
    let theirs = theirs["history"].as_array().unwrap();
    assert_eq!(theirs.len(), 4);
    for s in theirs {
        let m = &s["metadata"];
        assert!(m.get("user").is_none(), "{m}");
        assert!(m[stategraph::SEALED_KEY].is_string(), "{m}");
    }

    let continued = py(&backend.python_db, "seed", "sealed", &["run", "history"]);
    assert_eq!(continued["history"].as_array().unwrap().len(), 8);
    let ours = graph
        .get_state_history(&RunConfig::thread("sealed"), Default::default())
        .await
        .unwrap();
    assert_eq!(ours.len(), 8);
    let with_user = ours
        .iter()
        .filter(|s| {
            s.metadata
                .as_ref()
                .is_some_and(|m| m.extra.get("user") == Some(&json!("alice@example.com")))
        })
        .count();
    assert_eq!(
        with_user, 4,
        "our four checkpoints unseal; Python's four have no user"
    );
    assert_eq!(
        ours[0].values["bar"],
        stategraph::value!(["a", "b", "a", "b"])
    );
}

/// Python's `langgraph-checkpoint-mongodb` and our MongoDB saver share threads on one server
/// in both directions: each reads the other's history exactly and continues it.
#[tokio::test]
async fn seed_graph_threads_are_shared_with_python_on_mongodb() {
    check_on(
        &mongodb_backend(None).await,
        "seed",
        seed_graph,
        || SeedUpdate::default().foo("").bar(Vec::<String>::new()),
        8,
    )
    .await;
}

/// Subgraph namespaces on MongoDB, both directions.
#[tokio::test]
async fn subgraph_threads_are_shared_with_python_on_mongodb() {
    check_on(
        &mongodb_backend(None).await,
        "sub",
        sub_graph,
        || {
            RouteUpdate::default()
                .log(Vec::<String>::new())
                .go_left(true)
        },
        8,
    )
    .await;
}

/// Encrypted threads (`LANGGRAPH_AES_KEY` on both sides) on MongoDB, both directions; the
/// metadata values are encrypted one by one, as Python stores them.
#[tokio::test]
async fn encrypted_threads_are_shared_with_python_on_mongodb() {
    check_on(
        &mongodb_backend(Some(AES_KEY)).await,
        "seed",
        seed_graph,
        || SeedUpdate::default().foo("").bar(Vec::<String>::new()),
        8,
    )
    .await;
}
