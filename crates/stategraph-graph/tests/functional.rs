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
