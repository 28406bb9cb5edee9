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
use stategraph::{CheckpointSaver, RetryPolicy};

/// The tasks that ran, in order (the side effects the tests count).
type Log = Arc<Mutex<Vec<String>>>;

#[derive(State, Clone, Debug, Default)]
struct NodeState {
    x: i64,
    y: i64,
}

/// A workflow of `functional.py`, built in Rust.
enum Flow {
    Entry(Entrypoint<Json, Json>),
    Graph(CompiledGraph<NodeState>),
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
/// the order they finish, on either side; the workflow's own result comes last.
fn in_any_order(streams: Vec<Vec<Json>>) -> Vec<Vec<Json>> {
    streams
        .into_iter()
        .map(|mut parts| {
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
            _ => panic!("no action {action}"),
        };
        let mut parts = Vec::new();
        while let Some(part) = stream.next().await {
            parts.push(part.unwrap());
        }
        streams.push(normalized(parts));
    }
    streams
}

/// `functional.py DB WORKFLOW THREAD ACTIONS…`, its log of tasks run into `log`.
fn python(db: &str, workflow: &str, thread: &str, actions: &[&str], log: &Log) -> Json {
    let file = tempfile::NamedTempFile::new().unwrap();
    let out = std::process::Command::new(stategraph_testkit::python::python_interpreter())
        .arg(stategraph_testkit::python::repo_root().join("scripts/interop/functional.py"))
        .args([db, workflow, thread])
        .args(actions)
        .env("FUNC_LOG", file.path())
        .output()
        .expect("running functional.py");
    assert!(
        out.status.success(),
        "functional.py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ran = std::fs::read_to_string(file.path()).unwrap();
    log.lock().unwrap().extend(ran.lines().map(str::to_owned));
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
async fn same_on_both(saver: Arc<dyn CheckpointSaver>, db: &str, workflow: &str, actions: &[&str]) {
    let (py_thread, rs_thread) = (format!("{workflow}-py"), format!("{workflow}-rs"));
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
    assert_eq!(
        *rs_log.lock().unwrap(),
        *py_log.lock().unwrap(),
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
];

async fn differential(saver: Arc<dyn CheckpointSaver>, db: &str) {
    for (workflow, actions) in CASES {
        same_on_both(Arc::clone(&saver), db, workflow, actions).await;
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
