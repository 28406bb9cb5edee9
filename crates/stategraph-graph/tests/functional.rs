//! The Functional API's own behaviour (its checkpoints are compared with Python LangGraph's in
//! `stategraph-tests`' `functional_interop`): saved calls are not run again, failures reach
//! the caller, nested calls, `previous`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use stategraph_checkpoint::{InMemorySaver, Value};
use stategraph_graph::functional::{Outcome, entrypoint, task};
use stategraph_graph::{NodeError, Resume, RunConfig};

fn counter() -> Arc<AtomicUsize> {
    Arc::new(AtomicUsize::new(0))
}

#[tokio::test]
async fn a_resumed_workflow_gets_saved_results_back() {
    let runs = counter();
    let counted = Arc::clone(&runs);
    let work = task("work", move |x: i64, _ctx| {
        counted.fetch_add(1, Ordering::SeqCst);
        async move { Ok(x + 1) }
    });
    let wf = entrypoint("wf", move |n: i64, ctx| {
        let work = work.clone();
        async move {
            let a: i64 = work.call(&ctx, n).await?;
            let b: i64 = work.call(&ctx, a).await?;
            let answer = ctx.interrupt("ok?")?;
            Ok(format!("{b} {}", answer.as_str().unwrap_or_default()))
        }
    })
    .with_checkpointer(Arc::new(InMemorySaver::new()));
    let config = RunConfig::thread("t");
    let first = wf.invoke(1, config.clone()).await.unwrap();
    assert!(matches!(first, Outcome::Interrupted(ref i) if i.len() == 1));
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    let done = wf
        .resume(Resume::Value(Value::from("yes")), config)
        .await
        .unwrap();
    assert_eq!(done, Outcome::Done("3 yes".to_owned()));
    // Both calls were answered from their saved results.
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_failed_task_reaches_its_caller_which_may_recover() {
    let fails = task("fails", |_: i64, _ctx| async {
        Err::<i64, _>(NodeError::new("ValueError('no')"))
    });
    let wf = entrypoint("wf", move |n: i64, ctx| {
        let call = fails.call(&ctx, n);
        async move {
            match call.await {
                Ok(v) => Ok(v),
                Err(e) => {
                    assert!(e.message.contains("ValueError('no')"), "{}", e.message);
                    Ok(-1)
                }
            }
        }
    })
    .with_checkpointer(Arc::new(InMemorySaver::new()));
    let out = wf.invoke(5, RunConfig::thread("t")).await.unwrap();
    assert_eq!(out, Outcome::Done(-1));
}

#[tokio::test]
async fn an_unhandled_task_failure_fails_the_run() {
    let fails = task("fails", |_: i64, _ctx| async {
        Err::<i64, _>(NodeError::new("ValueError('no')"))
    });
    let wf = entrypoint("wf", move |n: i64, ctx| fails.call(&ctx, n))
        .with_checkpointer(Arc::new(InMemorySaver::new()));
    let err = wf.invoke(5, RunConfig::thread("t")).await.unwrap_err();
    assert!(err.to_string().contains("ValueError('no')"), "{err}");
}

#[tokio::test]
async fn tasks_call_tasks_and_previous_carries_over() {
    let inner = task("inner", |x: i64, _ctx| async move { Ok(x * 10) });
    let outer = task("outer", move |x: i64, ctx| {
        let call = inner.call(&ctx, x);
        async move { Ok(call.await? + 1) }
    });
    let wf = entrypoint("wf", move |n: i64, ctx| {
        let call = outer.call(&ctx, n);
        async move {
            let previous: Option<i64> = ctx.previous()?;
            Ok(call.await? + previous.unwrap_or(0))
        }
    })
    .with_checkpointer(Arc::new(InMemorySaver::new()));
    let config = RunConfig::thread("t");
    assert_eq!(
        wf.invoke(1, config.clone()).await.unwrap(),
        Outcome::Done(11)
    );
    assert_eq!(wf.invoke(2, config).await.unwrap(), Outcome::Done(32));
}

/// An entrypoint's `values` stream is what it returned (nothing at a fresh thread's input,
/// the interrupts alone when it stops, the last value when resumed), and its `tasks` stream
/// reports a call's argument as Python's `(args, kwargs)`, as LangGraph 1.2 streams them.
#[tokio::test]
async fn an_entrypoint_streams_its_output_as_is() {
    use futures_util::StreamExt;
    use stategraph_graph::{StreamEvent, StreamMode, TaskEvent};
    let double = task("double", |x: i64, _ctx| async move { Ok(x * 2) });
    let wf = entrypoint("wf", move |n: i64, ctx| {
        let call = double.call(&ctx, n);
        async move {
            let d = call.await?;
            ctx.interrupt("ok?")?;
            Ok(d)
        }
    })
    .with_checkpointer(Arc::new(InMemorySaver::new()));
    let config = RunConfig::thread("t");
    let modes = [StreamMode::Values, StreamMode::Tasks];
    let first: Vec<_> = wf.stream(21, config.clone(), &modes).collect().await;
    let first: Vec<StreamEvent<_>> = first.into_iter().map(Result::unwrap).collect();
    let values: Vec<_> = first
        .iter()
        .filter(|e| matches!(e, StreamEvent::Values(_)))
        .map(StreamEvent::to_json)
        .collect();
    assert_eq!(values.len(), 1, "{values:?}");
    assert_eq!(values[0]["__interrupt__"][0]["value"], "ok?");
    assert_eq!(values[0].as_object().unwrap().len(), 1);
    let call_start = first
        .iter()
        .find_map(|e| match e {
            StreamEvent::Tasks(TaskEvent::Start(s)) if s.name == "double" => Some(s),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        StreamEvent::<stategraph_graph::DynState>::Tasks(TaskEvent::Start(call_start.clone()))
            .to_json()["input"],
        serde_json::json!([[21], {}])
    );
    let resumed: Vec<_> = wf
        .stream_resume(
            Resume::Value(Value::from("yes")),
            config,
            &[StreamMode::Values],
        )
        .map(|e| e.unwrap().to_json())
        .collect()
        .await;
    // The value saved before (none yet: null), then what it returned.
    assert_eq!(resumed, [serde_json::Value::Null, serde_json::json!(42)]);
}

/// A graph's untyped input must be a map of state keys; an entrypoint takes any value.
#[tokio::test]
async fn untyped_input_is_checked_by_kind() {
    use futures_util::StreamExt;
    use stategraph_graph::{GraphError, START, StateGraph, StreamMode};
    let mut g = StateGraph::<stategraph_graph::DynState>::new();
    g.add_node("n", |_s, _c| async {
        Ok(stategraph_checkpoint::Map::new())
    });
    g.add_edge(START, "n");
    let graph = g.compile().unwrap();
    let mut stream =
        graph.stream_input(Value::from(7), RunConfig::default(), &[StreamMode::Values]);
    let err = stream.next().await.unwrap().unwrap_err();
    assert!(
        matches!(&err, GraphError::InvalidArgument { what, .. } if what == "input"),
        "{err}"
    );
    assert_eq!(graph.output_channel(), None);
    let wf = entrypoint("wf", |n: i64, _ctx| async move { Ok(n + 1) });
    assert_eq!(wf.graph().output_channel(), Some("__end__"));
    let out: Vec<_> = wf
        .graph()
        .stream_input(Value::from(1), RunConfig::default(), &[StreamMode::Values])
        .map(|e| e.unwrap().to_json())
        .collect()
        .await;
    assert_eq!(out, [serde_json::json!(2)]);
}
