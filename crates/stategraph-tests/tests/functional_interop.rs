//! The Functional API against Python LangGraph 1.2.22, on one database: the same workflows
//! (same entrypoint and task names, same inputs) run by both sides leave the same
//! checkpoints and writes (ids aside) and stream the same `updates`, and each side
//! continues the other's interrupted thread without running finished tasks again (their side
//! effects are counted).
//!
//! The Python side is `scripts/interop/functional.py`; it also prints both threads'
//! checkpoints, so that one reader compares them. Needs the pinned Python environment
//! (`scripts/python-env.sh`; `scripts/test.sh` sets it up). Fails, never skips, without it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use serde_json::{Value as Json, json};
use stategraph::functional::{Entrypoint, Final, entrypoint, entrypoint_final, task};
use stategraph::prelude::*;
use stategraph::{
    Cache, CachePolicy, CheckpointSaver, Interrupt, IoSchema, Map, RedisCache, RetryPolicy,
    SqliteCache,
};

/// The tasks that ran, in order (the side effects the tests count).
type Log = Arc<Mutex<Vec<String>>>;

#[derive(State, Clone, Debug, Default)]
struct NodeState {
    x: i64,
    y: i64,
}

#[derive(State, Clone, Debug, Default)]
struct PairState {
    #[reducer(append)]
    done: Vec<String>,
}

/// A workflow of `functional.py`, built in Rust.
enum Flow {
    Entry(Entrypoint<Json, Json>),
    Graph(CompiledGraph<NodeState>),
    Pair(CompiledGraph<PairState>),
    Dyn(CompiledGraph<DynState>),
}

/// `functional.py`'s `pair` graph: START → a, b; `b` fails on its first run.
fn pair_graph(saver: Arc<dyn CheckpointSaver>, log: &Log) -> Flow {
    let mut g = StateGraph::<PairState>::new();
    for name in ["a", "b"] {
        let log = Arc::clone(log);
        g.add_node(name, move |_s, _ctx| {
            let first = {
                let mut log = log.lock().unwrap();
                let first = !log.iter().any(|n| n == name);
                log.push(name.to_owned());
                first
            };
            async move {
                if name == "b" && first {
                    return Err(NodeError::from_repr("ConnectionError('flaky upstream')"));
                }
                Ok(PairStateUpdate::default().done([name]))
            }
        });
    }
    // One branch to both (LangGraph orders two plain edges' writes by a set, which differs
    // between Python processes).
    g.add_conditional_edges(START, |_s| {
        Ok(vec![
            stategraph::graph::Goto::Node("a".into()),
            stategraph::graph::Goto::Node("b".into()),
        ])
    });
    Flow::Pair(g.compile().unwrap().with_checkpointer(saver))
}

/// `functional.py`'s `handled` graph: START → a, b; `a` fails and its error handler writes
/// `handled a` and goes to `fallback`; `flaky`: the handler fails its first run.
fn handled_graph(saver: Arc<dyn CheckpointSaver>, log: &Log, flaky: bool) -> Flow {
    let mut g = StateGraph::<PairState>::new();
    for name in ["a", "b", "fallback"] {
        let log = Arc::clone(log);
        g.add_node(name, move |_s, _ctx| {
            log.lock().unwrap().push(name.to_owned());
            async move {
                if name == "a" {
                    return Err(NodeError::from_repr("ValueError('a broke')"));
                }
                Ok(PairStateUpdate::default().done([name]))
            }
        });
    }
    g.add_conditional_edges(START, |_s| {
        Ok(vec![
            stategraph::graph::Goto::Node("a".into()),
            stategraph::graph::Goto::Node("b".into()),
        ])
    });
    let log = Arc::clone(log);
    g.set_error_handler("a", move |_s, ctx| {
        let first = {
            let mut log = log.lock().unwrap();
            let first = !log.iter().any(|n| n == "handler");
            log.push("handler".to_owned());
            first
        };
        let failure = ctx.node_failure().cloned().unwrap();
        async move {
            if flaky && first {
                return Err(NodeError::from_repr("ConnectionError('handler flaked')"));
            }
            Ok(NodeOutput::Command(Command::update_and_goto(
                PairStateUpdate::default().done([format!("handled {}", failure.node)]),
                ["fallback"],
            )))
        }
    });
    g.add_destinations(stategraph::graph::error_handler_node("a"), ["fallback"]);
    Flow::Pair(g.compile().unwrap().with_checkpointer(saver))
}

/// `functional.py`'s subgraph workflows: `sub_task` / `sub_thread` / `sub_off` (a subgraph
/// node kept per invocation, per thread, or not at all), `sub_call` (a subgraph invoked in a
/// node's code, interrupting).
fn subgraph_flow(name: &str, saver: Arc<dyn CheckpointSaver>, log: &Log) -> Flow {
    use stategraph::graph::SubgraphPersistence;
    let outer_schema = || Schema::new().last_value("n").last_value("total");
    let int = |s: &DynState, k: &str| s.get(k).and_then(Value::as_i64).unwrap_or_default();
    let mut g = StateGraph::<DynState>::with_schema(outer_schema());
    if name == "sub_call" {
        let mut inner = StateGraph::<DynState>::with_schema(outer_schema());
        let inner_log = Arc::clone(log);
        inner.add_node("ask", move |s, ctx| {
            inner_log.lock().unwrap().push("ask".to_owned());
            let answer = ctx.interrupt(value!({"n": int(&s, "n")}));
            async move { Ok(Map::from_iter([("total", answer?)])) }
        });
        inner.add_edge(START, "ask");
        let inner = inner.compile().unwrap();
        let log = Arc::clone(log);
        g.add_node("outer", move |s, ctx| {
            log.lock().unwrap().push("outer".to_owned());
            let inner = inner.clone();
            let n = int(&s, "n");
            async move {
                let out = inner
                    .invoke_in(&ctx, Map::from_iter([("n", value!(n))]))
                    .await?;
                Ok(Map::from_iter([("total", out["total"].clone())]))
            }
        });
        g.add_edge(START, "outer");
    } else {
        let mut inner = StateGraph::<DynState>::with_schema(
            Schema::new()
                .last_value("n")
                .reducer("seen", stategraph::Reducer::append())
                .last_value("total"),
        );
        let log = Arc::clone(log);
        inner.add_node("remember", move |s, _ctx| {
            log.lock().unwrap().push("remember".to_owned());
            let n = int(&s, "n");
            let seen: i64 = match s.get("seen") {
                Some(Value::List(l)) => l.iter().filter_map(Value::as_i64).sum(),
                _ => 0,
            };
            async move {
                Ok(Map::from_iter([
                    ("seen", value!([n])),
                    ("total", value!(seen + n)),
                ]))
            }
        });
        inner.add_edge(START, "remember");
        let persistence = match name {
            "sub_thread" => SubgraphPersistence::PerThread,
            "sub_off" => SubgraphPersistence::Off,
            _ => SubgraphPersistence::PerInvocation,
        };
        g.add_subgraph(
            "child",
            inner
                .compile()
                .unwrap()
                .with_subgraph_persistence(persistence),
        );
        g.add_edge(START, "child");
    }
    Flow::Dyn(g.compile().unwrap().with_checkpointer(saver))
}

fn logged<I, O, F>(log: &Log, name: &'static str, f: F) -> stategraph::functional::Task<I, O>
where
    I: serde::de::DeserializeOwned + serde::Serialize + std::marker::Send + 'static,
    O: serde::Serialize + serde::de::DeserializeOwned + std::marker::Send + 'static,
    F: Fn(I) -> Result<O, NodeError> + std::marker::Send + Sync + 'static,
{
    let log = Arc::clone(log);
    let f = Arc::new(f);
    task(name, move |x: I, _ctx| {
        log.lock().unwrap().push(name.to_owned());
        let out = f(x);
        async move { out }
    })
}

fn flow(name: &str, saver: Arc<dyn CheckpointSaver>, log: &Log) -> Flow {
    let add_one = logged(log, "add_one", |x: i64| Ok(x + 1));
    let double = logged(log, "double", |x: i64| Ok(x * 2));
    let tries = Arc::new(Mutex::new(0));
    let flaky = logged(log, "flaky", move |x: i64| {
        let mut n = tries.lock().unwrap();
        *n += 1;
        if *n == 1 {
            return Err(NodeError::new("ConnectionError('first try fails')"));
        }
        Ok(x + 100)
    })
    .with_retry(RetryPolicy {
        max_attempts: 2,
        initial_interval: std::time::Duration::from_millis(10),
        jitter: false,
        ..RetryPolicy::default()
    });
    // Two policies: the first applies to ValueErrors only; the second, with the default
    // filter (which retries a ConnectionError) and three tries, decides.
    let tries = Arc::new(Mutex::new(0));
    let stubborn = logged(log, "stubborn", move |x: i64| {
        let mut n = tries.lock().unwrap();
        *n += 1;
        if *n < 3 {
            return Err(NodeError::from_repr("ConnectionError('not yet')"));
        }
        Ok(x * 3)
    })
    .with_retry([
        RetryPolicy {
            max_attempts: 5,
            initial_interval: std::time::Duration::from_millis(10),
            jitter: false,
            retry_on: Some(Arc::new(|e: &NodeError| {
                e.message.starts_with("ValueError(")
            })),
            ..RetryPolicy::default()
        },
        RetryPolicy {
            max_attempts: 3,
            initial_interval: std::time::Duration::from_millis(10),
            jitter: false,
            ..RetryPolicy::default()
        },
    ]);
    // A task whose first try outlives its 200 ms run timeout; the retry (a second try)
    // returns at once.
    let tries = Arc::new(Mutex::new(0));
    let sleepy = {
        let log = Arc::clone(log);
        task("sleepy", move |x: i64, _ctx| {
            log.lock().unwrap().push("sleepy".to_owned());
            let first = {
                let mut n = tries.lock().unwrap();
                *n += 1;
                *n == 1
            };
            async move {
                if first {
                    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
                }
                Ok(x + 1)
            }
        })
        .with_timeout(std::time::Duration::from_millis(200))
        .with_retry(quick_retry(2))
    };
    // A task that asks a human (its body runs again when resumed, and gets the answer).
    let ask = {
        let log = Arc::clone(log);
        task("ask", move |x: i64, ctx: NodeContext| {
            log.lock().unwrap().push("ask".to_owned());
            let answer = ctx.interrupt(value!({"q": x}));
            async move { Ok(answer?.to_json()) }
        })
    };
    let wf: Entrypoint<Json, Json> = match name {
        "seq" => entrypoint("wf", move |n: Json, ctx| {
            let (add_one, double) = (add_one.clone(), double.clone());
            async move {
                let a: i64 = add_one.call(&ctx, n.as_i64().unwrap()).await?;
                Ok(json!(double.call(&ctx, a).await?))
            }
        }),
        "par" => entrypoint("wf", move |n: Json, ctx| {
            let calls: Vec<_> = (0..n.as_i64().unwrap())
                .map(|i| double.call(&ctx, i))
                .collect();
            async move {
                let mut sum = 0i64;
                for c in calls {
                    sum += c.await?;
                }
                Ok(json!(sum))
            }
        }),
        "retry" => entrypoint("wf", move |n: Json, ctx| {
            let call = flaky.call(&ctx, n.as_i64().unwrap());
            async move { Ok(json!(call.await?)) }
        }),
        "task_timeout" => entrypoint("wf", move |n: Json, ctx| {
            let call = sleepy.call(&ctx, n.as_i64().unwrap());
            async move { Ok(json!(call.await?)) }
        }),
        "retry_list" => entrypoint("wf", move |n: Json, ctx| {
            let call = stubborn.call(&ctx, n.as_i64().unwrap());
            async move { Ok(json!(call.await?)) }
        }),
        "hitl" => entrypoint("wf", move |n: Json, ctx| {
            let (add_one, double) = (add_one.clone(), double.clone());
            async move {
                let a: i64 = double.call(&ctx, n.as_i64().unwrap()).await?;
                let answer = ctx.interrupt(value!({"question": "approve?", "a": a}))?;
                let b: i64 = add_one.call(&ctx, a).await?;
                Ok(json!({"a": a, "answer": answer.to_json(), "b": b}))
            }
        }),
        "task_hitl" => entrypoint("wf", move |n: Json, ctx| {
            ask.call(&ctx, n.as_i64().unwrap())
        }),
        "prev" => entrypoint_final("wf", |n: Json, ctx| async move {
            let previous: Option<i64> = ctx.previous()?;
            Ok(Final::new(
                json!(previous),
                previous.unwrap_or(0) + n.as_i64().unwrap(),
            ))
        }),
        "pair" => return pair_graph(saver, log),
        "handled" => return handled_graph(saver, log, false),
        "sub_task" | "sub_thread" | "sub_off" | "sub_call" => {
            return subgraph_flow(name, saver, log);
        }
        "handled_flaky" => return handled_graph(saver, log, true),
        "node" => {
            let mut g = StateGraph::<NodeState>::new();
            g.add_node("work", move |s, ctx| {
                let call = double.call(&ctx, s.x);
                async move { Ok(NodeStateUpdate::default().y(call.await?)) }
            });
            g.add_edge(START, "work");
            return Flow::Graph(g.compile().unwrap().with_checkpointer(saver));
        }
        "timeout" => {
            // The node's first try outlives its 200 ms run timeout and is cancelled; the
            // retry returns at once.
            let mut g = StateGraph::<NodeState>::new();
            let log = Arc::clone(log);
            let tries = Arc::new(Mutex::new(0));
            g.add_node("slow", move |s, _ctx| {
                log.lock().unwrap().push("slow".to_owned());
                let first = {
                    let mut n = tries.lock().unwrap();
                    *n += 1;
                    *n == 1
                };
                async move {
                    if first {
                        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
                    }
                    Ok(NodeStateUpdate::default().y(s.x * 2))
                }
            });
            g.add_edge(START, "slow")
                .set_timeout("slow", std::time::Duration::from_millis(200))
                .set_retry("slow", quick_retry(2));
            return Flow::Graph(g.compile().unwrap().with_checkpointer(saver));
        }
        other => panic!("no workflow {other}"),
    };
    Flow::Entry(wf.with_checkpointer(saver))
}

/// `max_attempts` tries, 10 ms apart, without jitter.
fn quick_retry(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        initial_interval: std::time::Duration::from_millis(10),
        jitter: false,
        ..RetryPolicy::default()
    }
}

/// Stream parts as JSON, interrupt ids replaced by ordinals (they hash checkpoint ids).
fn normalized(parts: Vec<Json>) -> Vec<Json> {
    let mut ids: Vec<String> = Vec::new();
    parts
        .into_iter()
        .map(|mut p| {
            // `[mode, chunk]`: the interrupts are in the chunk.
            if let Some(list) = p
                .get_mut(1)
                .and_then(|chunk| chunk.get_mut("__interrupt__"))
                .and_then(Json::as_array_mut)
            {
                for i in list {
                    let id = i["id"].as_str().unwrap().to_owned();
                    let n = ids.iter().position(|x| *x == id).unwrap_or_else(|| {
                        ids.push(id);
                        ids.len() - 1
                    });
                    i["id"] = json!(format!("i{n}"));
                }
            }
            p
        })
        .collect()
}

/// Streams with the parts before each one's last sorted: tasks running in parallel report in
/// the order they finish, on either side; the workflow's own result comes last. A run that
/// failed is its error alone: what Python streamed before the error depends on which of its
/// threads finished first.
fn in_any_order(streams: Vec<Vec<Json>>) -> Vec<Vec<Json>> {
    streams
        .into_iter()
        .map(|mut parts| {
            if let Some(error) = parts.last().filter(|p| p[0] == "error") {
                return vec![error.clone()];
            }
            let last = parts.pop();
            parts.sort_by_key(Json::to_string);
            parts.extend(last);
            parts
        })
        .collect()
}

/// Runs `actions` (as `functional.py` spells them) on `thread`; the `updates` and `values` streams, each part `[mode, chunk]`.
async fn ours(flow: &Flow, thread: &str, actions: &[&str]) -> Vec<Vec<Json>> {
    let mut streams = Vec::new();
    for action in actions {
        let (verb, arg) = action.split_once(':').unwrap();
        let arg: Json = serde_json::from_str(arg).unwrap();
        let config = RunConfig::thread(thread);
        let modes = [StreamMode::Updates, StreamMode::Values];
        let mut stream = match (flow, verb) {
            (Flow::Entry(wf), "stream") => wf
                .stream(arg, config, &modes)
                .map(|e| e.map(|e| json!([e.mode().as_str(), e.to_json()])))
                .boxed(),
            (Flow::Entry(wf), "stream_resume") => wf
                .stream_resume(Resume::Value(Value::from(arg)), config, &modes)
                .map(|e| e.map(|e| json!([e.mode().as_str(), e.to_json()])))
                .boxed(),
            (Flow::Graph(g), "stream") => {
                let Json::Object(m) = arg else {
                    panic!("a graph's input is a map")
                };
                let input = m.into_iter().map(|(k, v)| (k, Value::from(v))).collect();
                g.stream_values(input, config, &modes)
                    .map(|e| e.map(|e| json!([e.mode().as_str(), e.to_json()])))
                    .boxed()
            }
            (Flow::Dyn(g), "stream") => {
                let Json::Object(m) = arg else {
                    panic!("a graph's input is a map")
                };
                let input = m.into_iter().map(|(k, v)| (k, Value::from(v))).collect();
                g.stream(input, config, &modes)
                    .map(|e| e.map(|e| json!([e.mode().as_str(), e.to_json()])))
                    .boxed()
            }
            (Flow::Dyn(g), "stream_resume") => g
                .stream_resume(Resume::Value(Value::from(arg)), config, &modes)
                .map(|e| e.map(|e| json!([e.mode().as_str(), e.to_json()])))
                .boxed(),
            (Flow::Pair(g), "stream") => g
                .stream_values(Default::default(), config, &modes)
                .map(|e| e.map(|e| json!([e.mode().as_str(), e.to_json()])))
                .boxed(),
            (Flow::Pair(g), "stream_continue") => g
                .stream_continue(config, &modes)
                .map(|e| e.map(|e| json!([e.mode().as_str(), e.to_json()])))
                .boxed(),
            (Flow::Pair(g), "tasks" | "tasks_continue") => {
                let tasks = [StreamMode::Tasks];
                let stream = if verb == "tasks" {
                    g.stream_values(Default::default(), config, &tasks)
                } else {
                    g.stream_continue(config, &tasks)
                };
                stream
                    .map(|e| {
                        e.map(|e| match e {
                            StreamEvent::Tasks(stategraph::stream::TaskEvent::Start(t)) => {
                                json!(["start", t.name])
                            }
                            StreamEvent::Tasks(stategraph::stream::TaskEvent::Result(r)) => {
                                json!(["result", r.name, r.error.is_some()])
                            }
                            other => panic!("not a tasks event: {other:?}"),
                        })
                    })
                    .boxed()
            }
            _ => panic!("no action {action}"),
        };
        let mut parts = Vec::new();
        while let Some(part) = stream.next().await {
            match part {
                Ok(part) => parts.push(part),
                // A failed run ends its parts with the error, as `functional.py` prints it.
                Err(GraphError::NodeFailed { message, .. }) => {
                    parts.push(json!(["error", message]));
                }
                Err(e) => panic!("{action}: {e}"),
            }
        }
        streams.push(normalized(parts));
    }
    streams
}

/// `functional.py DB WORKFLOW THREAD ACTIONS…`, its log of tasks run into `log`.
fn python(db: &str, workflow: &str, thread: &str, actions: &[&str], log: &Log) -> Json {
    python_env(db, workflow, thread, actions, log, &[])
}

/// [`python`] with more environment variables (`FUNC_CACHE`, …).
fn python_env(
    db: &str,
    workflow: &str,
    thread: &str,
    actions: &[&str],
    log: &Log,
    env: &[(&str, &str)],
) -> Json {
    let file = tempfile::NamedTempFile::new().unwrap();
    // Python's nodes see what ran before, on either side (a flaky node fails only once).
    let before: Vec<String> = log.lock().unwrap().clone();
    let seed: String = before.iter().map(|n| format!("{n}\n")).collect();
    std::fs::write(file.path(), seed).unwrap();
    let out = std::process::Command::new(stategraph_testkit::python::python_interpreter())
        .arg(stategraph_testkit::python::repo_root().join("scripts/interop/functional.py"))
        .args([db, workflow, thread])
        .args(actions)
        .env("FUNC_LOG", file.path())
        .envs(env.iter().copied())
        .output()
        .expect("running functional.py");
    assert!(
        out.status.success(),
        "functional.py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ran = std::fs::read_to_string(file.path()).unwrap();
    log.lock()
        .unwrap()
        .extend(ran.lines().skip(before.len()).map(str::to_owned));
    serde_json::from_slice(&out.stdout).expect("functional.py printed no JSON")
}

/// The thread's checkpoints and writes, as Python reads them (normalized by
/// `functional.py`).
fn dump(db: &str, workflow: &str, thread: &str) -> Json {
    let dump = python(db, workflow, thread, &["dump"], &Log::default())["dump"].clone();
    let checkpoints = dump.as_array().map_or(0, Vec::len);
    assert!(
        checkpoints >= 2,
        "thread {thread} has {checkpoints} checkpoints: {dump}"
    );
    dump
}

/// A workflow run by both sides on one database: same streams, same checkpoints, same tasks
/// run.
async fn same_on_both(
    saver: Arc<dyn CheckpointSaver>,
    db: &str,
    case: usize,
    workflow: &str,
    actions: &[&str],
) {
    let (py_thread, rs_thread) = (
        format!("{workflow}-{case}-py"),
        format!("{workflow}-{case}-rs"),
    );
    let py_log = Log::default();
    let py = python(db, workflow, &py_thread, actions, &py_log);
    let rs_log = Log::default();
    let flow = flow(workflow, saver, &rs_log);
    let rs_streams = ours(&flow, &rs_thread, actions).await;
    let py_streams: Vec<Vec<Json>> = serde_json::from_value(py["streams"].clone()).unwrap();
    assert_eq!(
        in_any_order(rs_streams),
        in_any_order(py_streams),
        "{workflow}: the updates streams differ"
    );
    assert_eq!(
        dump(db, workflow, &rs_thread),
        dump(db, workflow, &py_thread),
        "{workflow}: the checkpoints differ"
    );
    // Tasks of one step finish in any order (Python runs them on threads).
    let sorted = |log: &Log| {
        let mut log = log.lock().unwrap().clone();
        log.sort();
        log
    };
    assert_eq!(
        sorted(&rs_log),
        sorted(&py_log),
        "{workflow}: different tasks ran"
    );
}

/// Thread `thread` run by the two sides in turn (`rust_first`: Rust runs the first action),
/// checkpoints compared with a run by Python alone; the tasks that ran on both sides.
async fn taking_turns(
    saver: Arc<dyn CheckpointSaver>,
    db: &str,
    workflow: &str,
    actions: &[&str],
    rust_first: bool,
) -> Vec<String> {
    let log = Log::default();
    let flow = flow(workflow, saver, &log);
    let thread = &format!(
        "{workflow}-{}",
        if rust_first {
            "rust-first"
        } else {
            "python-first"
        }
    );
    for (i, action) in actions.iter().enumerate() {
        if (i % 2 == 0) == rust_first {
            ours(&flow, thread, &[action]).await;
        } else {
            python(db, workflow, thread, &[action], &log);
        }
    }
    let alone = format!("alone-{thread}");
    python(db, workflow, &alone, actions, &Log::default());
    assert_eq!(
        dump(db, workflow, thread),
        dump(db, workflow, &alone),
        "{workflow}: a thread the two sides took turns on differs from Python's own"
    );
    log.lock().unwrap().clone()
}

const CASES: &[(&str, &[&str])] = &[
    ("seq", &["stream:3"]),
    ("par", &["stream:4"]),
    ("retry", &["stream:5"]),
    ("retry_list", &["stream:5"]),
    ("hitl", &["stream:3", "stream_resume:\"yes\""]),
    ("prev", &["stream:1", "stream:2", "stream:3"]),
    ("node", &["stream:{\"x\": 3}"]),
    ("timeout", &["stream:{\"x\": 3}"]),
    ("task_timeout", &["stream:4"]),
    ("task_hitl", &["stream:3", "stream_resume:\"yes\""]),
    // The continued step streams `a`'s saved update again, marked cached (LangGraph 1.2).
    ("pair", &["stream:{}", "stream_continue:null"]),
    // `a` fails and is handed to its error handler, which routes to `fallback`.
    ("handled", &["stream:{}"]),
    // The handler fails: continuing the thread runs it again, not `a`.
    ("handled_flaky", &["stream:{}", "stream_continue:null"]),
    // A continued step announces every task (LangGraph's tick), also those whose writes are
    // reused and a handler scheduled again; a handler scheduled while the step runs is not.
    ("pair", &["tasks:{}", "tasks_continue:null"]),
    ("handled", &["tasks:{}"]),
    ("handled_flaky", &["tasks:{}", "tasks_continue:null"]),
    // A subgraph node kept per invocation, per thread (it remembers the first run in the
    // second), or not at all.
    ("sub_task", &["stream:{\"n\": 1}", "stream:{\"n\": 2}"]),
    ("sub_thread", &["stream:{\"n\": 1}", "stream:{\"n\": 2}"]),
    ("sub_off", &["stream:{\"n\": 1}", "stream:{\"n\": 2}"]),
    // A subgraph invoked in a node's code interrupts; the answer resumes it.
    ("sub_call", &["stream:{\"n\": 4}", "stream_resume:7"]),
];

async fn differential(saver: Arc<dyn CheckpointSaver>, db: &str) {
    for (case, (workflow, actions)) in CASES.iter().enumerate() {
        same_on_both(Arc::clone(&saver), db, case, workflow, actions).await;
    }
    // An interrupted workflow resumed by the other side: the task that finished before the
    // interrupt does not run again; the one after it runs once.
    for rust_first in [true, false] {
        let ran = taking_turns(
            Arc::clone(&saver),
            db,
            "hitl",
            &["stream:3", "stream_resume:\"yes\""],
            rust_first,
        )
        .await;
        assert_eq!(ran, ["double", "add_one"], "rust first: {rust_first}");
    }
    // A handled failure whose handler failed, continued by the other side: the handler runs
    // again there, the failed node never does.
    for rust_first in [true, false] {
        let mut ran = taking_turns(
            Arc::clone(&saver),
            db,
            "handled_flaky",
            &["stream:{}", "stream_continue:null"],
            rust_first,
        )
        .await;
        ran.sort();
        assert_eq!(
            ran,
            ["a", "b", "fallback", "handler", "handler"],
            "rust first: {rust_first}"
        );
    }
    let ran = taking_turns(
        Arc::clone(&saver),
        db,
        "prev",
        &["stream:1", "stream:2", "stream:3"],
        true,
    )
    .await;
    assert!(ran.is_empty());
}

/// `functional.py`'s `cache` graph in Rust: `expensive` writes `y = 2x`, cached by `x` under
/// Python's identifier of the function, for 600 s.
fn cache_graph(saver: Arc<dyn CheckpointSaver>, cache: Arc<dyn Cache>, log: &Log) -> Flow {
    let mut g = StateGraph::<NodeState>::new();
    let log = Arc::clone(log);
    g.add_node("expensive", move |s, _ctx| {
        log.lock().unwrap().push("expensive".to_owned());
        async move { Ok(NodeStateUpdate::default().y(s.x * 2)) }
    });
    let by_x = |input: &Value| {
        let x = input
            .as_map()
            .and_then(|m| m.get("x"))
            .and_then(Value::as_i64);
        x.unwrap_or_default().to_string()
    };
    g.add_edge(START, "expensive").set_cache(
        "expensive",
        CachePolicy::new()
            .key(by_x)
            .ttl(std::time::Duration::from_secs(600))
            .identifier("__main__.expensive"),
    );
    let graph = g.compile().unwrap().with_checkpointer(saver);
    Flow::Graph(graph.with_cache(cache))
}

/// `functional.py`'s `task_cache` workflow in Rust: `wf(n) = costly(n)`, the task cached by
/// its argument under Python's identifier of its function, for 600 s.
fn task_cache_flow(saver: Arc<dyn CheckpointSaver>, cache: Arc<dyn Cache>, log: &Log) -> Flow {
    let costly = logged(log, "costly", |x: i64| Ok(x * 10)).with_cache(
        CachePolicy::new()
            .key(|n: &Value| n.as_i64().unwrap_or_default().to_string())
            .ttl(std::time::Duration::from_secs(600))
            .identifier("__main__.costly"),
    );
    let wf = entrypoint("wf", move |n: Json, ctx| {
        let call = costly.call(&ctx, n.as_i64().unwrap());
        async move { Ok(json!(call.await?)) }
    });
    Flow::Entry(wf.with_checkpointer(saver).with_cache(cache))
}

/// A cached node (`cache`) or task (`task_cache`) and what runs it.
struct Cached {
    workflow: &'static str,
    /// The name it logs when it runs.
    runs: &'static str,
    /// The action running the workflow on input `x`.
    action: fn(i64) -> String,
    build: BuildCached,
}

/// Builds a cached workflow on a saver and a cache, logging what runs.
type BuildCached = fn(Arc<dyn CheckpointSaver>, Arc<dyn Cache>, &Log) -> Flow;

const CACHED: [Cached; 2] = [
    Cached {
        workflow: "cache",
        runs: "expensive",
        action: |x| format!("stream:{{\"x\": {x}}}"),
        build: cache_graph,
    },
    Cached {
        workflow: "task_cache",
        runs: "costly",
        action: |x| format!("stream:{x}"),
        build: task_cache_flow,
    },
];

/// One node cache shared by the two sides, each process (each Rust graph) opening it anew:
/// an entry either side wrote is hit by the other and by itself after a restart, with the
/// same stream (the update marked cached), the same checkpoints and nothing run.
async fn cache_is_shared_with_python(
    saver: Arc<dyn CheckpointSaver>,
    db: &str,
    env: &[(&str, &str)],
    open: impl AsyncFn() -> Arc<dyn Cache>,
) {
    for c in CACHED {
        let wf = c.workflow;
        let thread = |t: &str| format!("{wf}-{t}");
        let rust = async |t: &str, x: i64, log: &Log| {
            let flow = (c.build)(Arc::clone(&saver), open().await, log);
            ours(&flow, &thread(t), &[&(c.action)(x)]).await
        };
        let py = |t: &str, x: i64, log: &Log| -> Vec<Vec<Json>> {
            let out = python_env(db, wf, &thread(t), &[&(c.action)(x)], log, env);
            serde_json::from_value(out["streams"].clone()).unwrap()
        };
        let same_checkpoints = |a: &str, b: &str| {
            assert_eq!(
                dump(db, wf, &thread(a)),
                dump(db, wf, &thread(b)),
                "{wf}: {a} and {b} differ"
            );
        };
        // Python fills the entry of 3; Rust takes it, and so does Python after a restart.
        let py_log = Log::default();
        py("py-fills", 3, &py_log);
        assert_eq!(*py_log.lock().unwrap(), [c.runs]);
        let rs_log = Log::default();
        let rs = rust("rs-takes", 3, &rs_log).await;
        assert!(
            rs_log.lock().unwrap().is_empty(),
            "{wf}: Rust ran what Python cached"
        );
        let marked = |s: &[Vec<Json>]| {
            s[0].iter()
                .any(|p| p[1]["__metadata__"] == json!({"cached": true}))
        };
        assert!(marked(&rs), "{wf}: {rs:?}");
        let py_log = Log::default();
        let py_streams = py("py-takes", 3, &py_log);
        assert!(
            py_log.lock().unwrap().is_empty(),
            "{wf}: Python ran it again"
        );
        assert_eq!(rs, py_streams, "{wf}: a cache hit streams differently");
        same_checkpoints("rs-takes", "py-takes");
        // Rust fills the entry of 5; Python takes it, and so does Rust after a restart.
        let rs_log = Log::default();
        rust("rs-fills", 5, &rs_log).await;
        assert_eq!(*rs_log.lock().unwrap(), [c.runs]);
        let py_log = Log::default();
        let py_streams = py("py-takes-5", 5, &py_log);
        assert!(
            py_log.lock().unwrap().is_empty(),
            "{wf}: Python ran what Rust cached"
        );
        let rs = rust("rs-takes-5", 5, &rs_log).await;
        assert_eq!(*rs_log.lock().unwrap(), [c.runs], "{wf}: Rust ran it again");
        assert_eq!(rs, py_streams);
        same_checkpoints("rs-takes-5", "py-takes-5");
        // A miss on both sides (7, the cache cleared before each) streams and saves alike.
        let (py_log, rs_log) = (Log::default(), Log::default());
        open().await.clear(None).await.unwrap();
        let py_streams = py("py-7", 7, &py_log);
        open().await.clear(None).await.unwrap();
        let rs = rust("rs-7", 7, &rs_log).await;
        assert_eq!(*py_log.lock().unwrap(), [c.runs]);
        assert_eq!(*rs_log.lock().unwrap(), [c.runs]);
        assert!(!marked(&rs));
        assert_eq!(rs, py_streams);
        same_checkpoints("rs-7", "py-7");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_cache_is_shared_with_python_in_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("functional.sqlite");
    let saver: Arc<dyn CheckpointSaver> =
        Arc::new(SqliteConfig::file(&db).connect().await.unwrap());
    let cache_file = dir.path().join("cache.sqlite").display().to_string();
    let url = format!("sqlite:{cache_file}");
    cache_is_shared_with_python(
        saver,
        &db.display().to_string(),
        &[("FUNC_CACHE", &cache_file)],
        async || -> Arc<dyn Cache> {
            let cache: Arc<dyn Cache> = Arc::new(SqliteCache::connect(&url).await.unwrap());
            cache
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_cache_is_shared_with_python_in_redis() {
    let (saver, _guard, db) = common::postgres_with_url(None).await;
    let prefix = stategraph_testkit::redis::ScratchPrefix::new("sg_node_cache");
    let cache_prefix = format!("{}:", prefix.name());
    let url = stategraph_testkit::redis::url();
    cache_is_shared_with_python(
        saver,
        &db,
        &[("FUNC_CACHE", &url), ("FUNC_CACHE_PREFIX", &cache_prefix)],
        async || -> Arc<dyn Cache> {
            let cache = RedisCache::connect(&url).await.unwrap();
            let cache: Arc<dyn Cache> = Arc::new(cache.prefix(cache_prefix.clone()));
            cache
        },
    )
    .await;
}

/// `functional.py`'s `ask` graph: `ask` interrupts with `{"x": x}` and writes the answer to
/// `y`.
fn ask_graph(saver: Arc<dyn CheckpointSaver>) -> CompiledGraph<DynState> {
    let mut g = StateGraph::<DynState>::with_schema(Schema::new().last_value("x").last_value("y"));
    g.add_node("ask", |s, ctx| {
        let x = s.get("x").cloned().unwrap_or_default();
        async move {
            let answer = ctx.interrupt(Value::Map(stategraph::Map::from_iter([("x", x)])))?;
            Ok(stategraph::Map::from_iter([("y", answer)]))
        }
    });
    g.add_edge(START, "ask");
    g.compile().unwrap().with_checkpointer(saver)
}

/// Interrupt ids (hashes of checkpoint-derived task ids) replaced by ordinals, at any depth:
/// every `{"value", "id"}` object is an interrupt.
fn interrupt_ordinals(v: &mut Json, ids: &mut Vec<String>) {
    match v {
        Json::Object(o) => {
            if o.len() == 2
                && o.contains_key("value")
                && let Some(id) = o.get("id").and_then(Json::as_str).map(str::to_owned)
            {
                let n = ids.iter().position(|x| *x == id).unwrap_or_else(|| {
                    ids.push(id);
                    ids.len() - 1
                });
                o.insert("id".into(), json!(format!("i{n}")));
            }
            o.values_mut().for_each(|x| interrupt_ordinals(x, ids));
        }
        Json::Array(a) => a.iter_mut().for_each(|x| interrupt_ordinals(x, ids)),
        _ => {}
    }
}

/// LangGraph's version 2 output on both sides: `invoke(..., version="v2")`'s value and
/// interrupts, and `stream(..., version="v2")`'s typed parts, the values parts carrying the
/// interrupts; then the same checkpoints.
async fn v2_output_matches_python(saver: Arc<dyn CheckpointSaver>, db: &str) {
    let graph = ask_graph(saver);
    let input = || stategraph::Map::from_iter([("x", value!(3))]);
    // invoke
    let mut ids = Vec::new();
    let py = python(
        db,
        "ask",
        "ask-v2-py",
        &["invoke_v2:{\"x\": 3}", "resume_v2:7"],
        &Log::default(),
    );
    let config = RunConfig::thread("ask-v2-rs");
    let mut outputs = Vec::new();
    for out in [
        graph.invoke_output(input(), config.clone()).await.unwrap(),
        graph
            .command_output(RunCommand::resume(Resume::Value(value!(7))), config)
            .await
            .unwrap(),
    ] {
        let mut out = json!({
            "value": Value::Map(out.value.0.iter().map(|(k, v)| (Value::from(k.as_str()), v.clone())).collect()).to_json(),
            "interrupts": out.interrupts.iter().map(Interrupt::to_json).collect::<Vec<_>>(),
        });
        interrupt_ordinals(&mut out, &mut ids);
        outputs.push(out);
    }
    assert_eq!(
        json!(outputs),
        py["outputs"],
        "invoke(version=\"v2\") differs"
    );
    // stream
    let py = python(
        db,
        "ask",
        "ask-v2s-py",
        &["stream_v2:{\"x\": 3}", "stream_resume_v2:7"],
        &Log::default(),
    );
    let config = RunConfig::thread("ask-v2s-rs");
    let modes = [StreamMode::Updates, StreamMode::Values];
    let mut ids = Vec::new();
    let mut streams = Vec::new();
    for mut stream in [
        graph.stream(input(), config.clone(), &modes),
        graph.stream_command(RunCommand::resume(Resume::Value(value!(7))), config, &modes),
    ] {
        let mut parts = Vec::new();
        while let Some(e) = stream.next().await {
            let mut part = e.unwrap().to_part_json();
            interrupt_ordinals(&mut part, &mut ids);
            parts.push(part);
        }
        streams.push(parts);
    }
    assert_eq!(
        json!(streams),
        py["streams"],
        "stream(version=\"v2\") differs"
    );
    assert_eq!(dump(db, "ask", "ask-v2-rs"), dump(db, "ask", "ask-v2-py"));
    assert_eq!(dump(db, "ask", "ask-v2s-rs"), dump(db, "ask", "ask-v2s-py"));
}

/// `functional.py`'s `io` graph: state `question`, `notes`, `answer`; input schema
/// `question`, output schema `answer`.
fn io_graph(saver: Arc<dyn CheckpointSaver>) -> CompiledGraph<DynState> {
    let schema = Schema::new()
        .last_value("question")
        .last_value("notes")
        .last_value("answer");
    let mut g = StateGraph::<DynState>::with_schema(schema);
    g.add_node("think", |s, _ctx| {
        let q = s
            .get("question")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        async move {
            Ok(stategraph::Map::from_iter([(
                "notes",
                Value::from(format!("thought about {q}")),
            )]))
        }
    });
    g.add_node("reply", |s, _ctx| {
        let notes = s
            .get("notes")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_uppercase();
        async move { Ok(stategraph::Map::from_iter([("answer", Value::from(notes))])) }
    });
    g.add_edge(START, "think").add_edge("think", "reply");
    g.set_input_schema(IoSchema::keys(["question"]))
        .set_output_schema(IoSchema::keys(["answer"]));
    g.compile().unwrap().with_checkpointer(saver)
}

/// Input and output schemas on both sides: an input key outside the input schema is dropped;
/// `invoke` returns only the output schema's keys, while the streams and the checkpoints
/// hold the whole state.
async fn io_schemas_match_python(saver: Arc<dyn CheckpointSaver>, db: &str) {
    let graph = io_graph(saver);
    let input = r#"{"question": "why", "notes": "dropped"}"#;
    let py = python(
        db,
        "io",
        "io-py",
        &[&format!("invoke:{input}")],
        &Log::default(),
    );
    let streamed = python(
        db,
        "io",
        "io-py-s",
        &[&format!("stream:{input}")],
        &Log::default(),
    );
    let as_map = |j: &str| -> stategraph::Map {
        let Json::Object(m) = serde_json::from_str::<Json>(j).unwrap() else {
            unreachable!()
        };
        m.into_iter().map(|(k, v)| (k, Value::from(v))).collect()
    };
    let out = graph
        .invoke_values(as_map(input), RunConfig::thread("io-rs"))
        .await
        .unwrap();
    let out: serde_json::Map<String, Json> =
        out.into_iter().map(|(k, v)| (k, v.to_json())).collect();
    assert_eq!(json!([out]), py["outputs"], "invoke's output differs");
    let flow = Flow::Dyn(graph);
    let rs = ours(&flow, "io-rs-stream", &[&format!("stream:{input}")]).await;
    let py_streams: Vec<Vec<Json>> = serde_json::from_value(streamed["streams"].clone()).unwrap();
    assert_eq!(rs, py_streams, "the streams differ");
    assert_eq!(dump(db, "io", "io-rs"), dump(db, "io", "io-py"));
    assert_eq!(dump(db, "io", "io-rs-stream"), dump(db, "io", "io-py-s"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn io_schemas_match_python_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("io.sqlite");
    let saver: Arc<dyn CheckpointSaver> =
        Arc::new(SqliteConfig::file(&db).connect().await.unwrap());
    io_schemas_match_python(saver, &db.display().to_string()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_output_matches_python_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("v2.sqlite");
    let saver: Arc<dyn CheckpointSaver> =
        Arc::new(SqliteConfig::file(&db).connect().await.unwrap());
    v2_output_matches_python(saver, &db.display().to_string()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn functional_workflows_match_python_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("functional.sqlite");
    let saver: Arc<dyn CheckpointSaver> =
        Arc::new(SqliteConfig::file(&db).connect().await.unwrap());
    differential(saver, &db.display().to_string()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn functional_workflows_match_python_on_postgres() {
    let (saver, _guard, url) = common::postgres_with_url(None).await;
    differential(saver, &url).await;
}
