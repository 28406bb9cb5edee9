//! Error handlers (LangGraph's `error_handler=` and its default): a node that fails for good
//! is handed to its handler in the same step; the thread records the failure as handled, and
//! a continued run runs the handler again, never the failed node.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use stategraph_checkpoint::{CheckpointSaver, InMemorySaver, Map, Value, value};
use stategraph_graph::{
    Command, DynState, GraphError, NodeDefaults, NodeError, NodeOutput, Reducer, RetryPolicy,
    RunConfig, START, Schema, Send, StateGraph, error_handler_node,
};

fn schema() -> Schema {
    Schema::new()
        .last_value("x")
        .reducer("log", Reducer::append())
}

fn log(entry: impl Into<String>) -> Map {
    Map::from_iter([("log", Value::List(vec![Value::from(entry.into())].into()))])
}

fn failing(
    name: &'static str,
) -> impl Fn(Arc<DynState>, stategraph_graph::NodeContext) -> std::future::Ready<Result<Map, NodeError>>
+ Clone {
    move |_s, _ctx| {
        std::future::ready(Err(NodeError::from_repr(format!(
            "ValueError('{name} broke')"
        ))))
    }
}

/// Every write saved on the thread's checkpoints: (task id, task path, channel, value).
async fn writes_of(saver: &InMemorySaver, thread: &str) -> Vec<(String, String, String, Value)> {
    let tuples = saver
        .list(&stategraph_checkpoint::ListOptions {
            thread_id: Some(thread.to_owned()),
            ..Default::default()
        })
        .await
        .unwrap();
    tuples
        .iter()
        .flat_map(|t| t.pending_writes.iter())
        .map(|w| {
            (
                w.task_id.clone(),
                w.task_path.clone(),
                w.channel.clone(),
                w.value.clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_failed_node_is_handed_to_its_handler_which_routes_on() {
    let mut g = StateGraph::<DynState>::with_schema(schema());
    g.add_node("fetch", failing("fetch"));
    g.add_node("fallback", |_s, _ctx| async { Ok(log("fallback")) });
    g.add_edge(START, "fetch");
    g.set_error_handler("fetch", |_s, ctx| {
        let f = ctx
            .node_failure()
            .cloned()
            .expect("a handler knows the failure");
        async move {
            Ok(NodeOutput::Command(Command::update_and_goto(
                log(format!("handled {}: {}", f.node, f.error)),
                ["fallback"],
            )))
        }
    });
    g.add_destinations(error_handler_node("fetch"), ["fallback"]);
    let saver = Arc::new(InMemorySaver::new());
    let graph = g.compile().unwrap().with_checkpointer(saver.clone());
    let out = graph
        .invoke(Map::new(), RunConfig::thread("t"))
        .await
        .unwrap();
    assert_eq!(
        out["log"],
        value!(["handled fetch: ValueError('fetch broke')", "fallback"])
    );
    let writes = writes_of(&saver, "t").await;
    let channels: Vec<(&str, &str)> = writes
        .iter()
        .map(|(_, path, ch, _)| (path.as_str(), ch.as_str()))
        .collect();
    assert!(
        channels.contains(&("~__pregel_pull, fetch", "__error__")),
        "{channels:?}"
    );
    assert!(
        channels.contains(&("~__pregel_pull, fetch", "__error_source_node__")),
        "{channels:?}"
    );
    assert!(
        channels.contains(&(
            "~__pregel_pull, fetch, node_error_handler, 0000000000",
            "branch:to:fallback"
        )),
        "{channels:?}"
    );
    // The handled failure is the thread's record of the node, not an error of the run.
    let source = writes
        .iter()
        .find(|w| w.2 == "__error_source_node__")
        .unwrap();
    assert_eq!(source.3, value!("fetch"));
}

#[tokio::test]
async fn the_default_handler_takes_every_node_but_a_failing_handler_fails_the_run() {
    let mut g = StateGraph::<DynState>::with_schema(schema());
    g.add_node("a", failing("a"));
    g.add_node("b", failing("b"));
    g.add_edge(START, "a").add_edge("a", "b");
    let handled = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&handled);
    g.set_default_error_handler(move |_s, ctx| {
        count.fetch_add(1, Ordering::SeqCst);
        let node = ctx.node_failure().unwrap().node.clone();
        async move {
            // `b`'s handler fails in turn; nothing handles a handler.
            if node == "b" {
                return Err(NodeError::from_repr("RuntimeError('no way back')"));
            }
            Ok(NodeOutput::Command(Command::update_and_goto(
                log(format!("handled {node}")),
                ["b"],
            )))
        }
    });
    let err = g
        .compile()
        .unwrap()
        .invoke(Map::new(), RunConfig::default())
        .await
        .unwrap_err();
    let GraphError::NodeFailed { node, message, .. } = err else {
        panic!("{err}")
    };
    assert_eq!(node, "__default_error_handler__");
    assert_eq!(message, "RuntimeError('no way back')");
    assert_eq!(handled.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_continued_run_runs_the_handler_again_and_never_the_failed_node() {
    let ran = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut g = StateGraph::<DynState>::with_schema(schema());
    let r = Arc::clone(&ran);
    g.add_node("a", move |_s, _ctx| {
        r.lock().unwrap().push("a".into());
        async { Err::<Map, _>(NodeError::from_repr("ValueError('bad')")) }
    });
    let r = Arc::clone(&ran);
    g.add_node("b", move |_s, _ctx| {
        r.lock().unwrap().push("b".into());
        async { Ok(log("b")) }
    });
    g.add_conditional_edges(START, |_s| Ok(vec!["a".into(), "b".into()]));
    let r = Arc::clone(&ran);
    g.set_error_handler("a", move |_s, ctx| {
        let first = {
            let mut ran = r.lock().unwrap();
            ran.push("handler".into());
            ran.iter().filter(|n| *n == "handler").count() == 1
        };
        let f = ctx.node_failure().unwrap().clone();
        async move {
            if first {
                return Err(NodeError::from_repr("ConnectionError('handler flaked')"));
            }
            Ok(log(format!("recovered {}", f.error)))
        }
    });
    let graph = g
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(InMemorySaver::new()));
    let config = RunConfig::thread("t");
    let err = graph.invoke(Map::new(), config.clone()).await.unwrap_err();
    assert!(err.to_string().contains("handler flaked"), "{err}");
    let out = graph.continue_values(config).await.unwrap();
    let mut logged: Vec<Value> = match &out["log"] {
        Value::List(l) => l.to_vec(),
        other => panic!("{other:?}"),
    };
    logged.sort_by_key(|v| format!("{v:?}"));
    assert_eq!(
        logged,
        vec![value!("b"), value!("recovered ValueError('bad')")]
    );
    let mut ran = ran.lock().unwrap().clone();
    ran.sort();
    assert_eq!(ran, ["a", "b", "handler", "handler"]);
}

#[tokio::test]
async fn a_handler_gets_the_failed_sends_argument_after_its_retries() {
    let tries = Arc::new(AtomicUsize::new(0));
    let mut g = StateGraph::<DynState>::with_schema(schema());
    let t = Arc::clone(&tries);
    g.add_node("work", move |s, _ctx| {
        t.fetch_add(1, Ordering::SeqCst);
        let x = s.get("x").cloned();
        async move { Err::<Map, _>(NodeError::from_repr(format!("ValueError('{x:?}')"))) }
    });
    g.add_conditional_edges(START, |_s| {
        Ok(vec![stategraph_graph::Goto::Send(Send::new(
            "work",
            Map::from_iter([("x", value!(7))]),
        ))])
    });
    g.set_node_defaults(NodeDefaults::new().retry(RetryPolicy {
        max_attempts: 3,
        initial_interval: std::time::Duration::from_millis(1),
        jitter: false,
        retry_on: Some(Arc::new(|_| true)),
        ..RetryPolicy::default()
    }));
    g.set_error_handler("work", |s, _ctx| {
        let x = s.get("x").cloned().unwrap_or(Value::Null);
        async move { Ok(Map::from_iter([("x", x)])) }
    });
    let out = g
        .compile()
        .unwrap()
        .invoke(Map::new(), RunConfig::default())
        .await
        .unwrap();
    assert_eq!(out["x"], value!(7), "the handler read the Send's argument");
    assert_eq!(
        tries.load(Ordering::SeqCst),
        3,
        "the node's retries ran first"
    );
}

#[tokio::test]
async fn an_interrupt_is_not_a_failure() {
    let mut g = StateGraph::<DynState>::with_schema(schema());
    g.add_node("ask", |_s, ctx| {
        let answer = ctx.interrupt(value!("ok?"));
        async move { Ok(Map::from_iter([("x", answer?)])) }
    });
    g.add_edge(START, "ask");
    g.set_default_error_handler(|_s, _ctx| async { Ok(log("handled")) });
    let graph = g
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(InMemorySaver::new()));
    let out = graph
        .invoke(Map::new(), RunConfig::thread("t"))
        .await
        .unwrap();
    assert_eq!(out.get("log"), Some(&value!([])), "nothing was handled");
    let state = graph.get_state(&RunConfig::thread("t")).await.unwrap();
    assert_eq!(state.interrupts.len(), 1);
}

#[test]
fn handlers_are_validated() {
    let mut g = StateGraph::<DynState>::with_schema(schema());
    g.add_node("a", |_s, _ctx| async { Ok(Map::new()) });
    g.add_edge(START, "a");
    g.set_error_handler("nope", |_s, _ctx| async { Ok(Map::new()) });
    let Err(GraphError::InvalidGraph(m)) = g.compile() else {
        panic!("compiled")
    };
    assert_eq!(m, "error handler for unknown node `nope`");

    let mut g = StateGraph::<DynState>::with_schema(schema());
    g.add_node("a", |_s, _ctx| async { Ok(Map::new()) });
    g.add_node("__error_handler__a", |_s, _ctx| async { Ok(Map::new()) });
    g.add_edge(START, "a").add_edge("a", "__error_handler__a");
    g.set_error_handler("a", |_s, _ctx| async { Ok(Map::new()) });
    let Err(GraphError::InvalidGraph(m)) = g.compile() else {
        panic!("compiled")
    };
    assert_eq!(
        m,
        "node name `__error_handler__a` is taken by the error handler of `a`"
    );
}
