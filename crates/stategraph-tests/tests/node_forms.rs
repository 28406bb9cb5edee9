//! The forms a node takes without annotations: a plain `async fn`, and closures whose
//! parameters and error type are inferred from `add_node` (with `?` on an interrupt, an early
//! `return Err`, a `Command`, no update, a block body capturing a counter). Compiling this file
//! is most of the test; running the graph checks that every form ran.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

use stategraph::prelude::*;

#[derive(State, Clone, Debug, Default)]
struct Seed {
    foo: String,
    #[reducer(append)]
    bar: Vec<String>,
}

/// A plain `async fn`, returning anything convertible into the node's output.
async fn named(
    state: Arc<Seed>,
    _ctx: NodeContext,
) -> Result<impl Into<NodeOutput<SeedUpdate>>, NodeError> {
    Ok(SeedUpdate::default()
        .foo(format!("{}a", state.foo))
        .bar(["named"]))
}

/// A plain `async fn` returning the update type, using `?` on the context.
async fn asks(state: Arc<Seed>, ctx: NodeContext) -> Result<SeedUpdate, NodeError> {
    if state.foo == "never" {
        ctx.interrupt("unreachable")?;
    }
    Ok(SeedUpdate::default().bar(["asks"]))
}

fn graph(calls: Arc<AtomicUsize>) -> StateGraph<Seed> {
    let mut graph = StateGraph::<Seed>::new();
    graph.add_node("named", named);
    graph.add_node("asks", asks);
    // Parameter types and the error type inferred; the state used through `s`.
    graph.add_node("closure", |s, _ctx| async move {
        Ok(SeedUpdate::default()
            .foo(format!("{}b", s.foo))
            .bar(["closure"]))
    });
    // `?` on an interrupt, and an early `return Err`.
    graph.add_node("fallible", |s, ctx| async move {
        if s.foo.starts_with("fail") {
            return Err(NodeError::new("asked to fail"));
        }
        if s.foo == "never" {
            ctx.interrupt("unreachable")?;
        }
        Ok(SeedUpdate::default().bar(["fallible"]))
    });
    // A block body (work before the future), capturing state of its own.
    graph.add_node("counted", move |_s, _ctx| {
        calls.fetch_add(1, SeqCst);
        async { Ok(NodeOutput::Empty) }
    });
    // A `Command` routing by name.
    graph.add_node("route", |_s, _ctx| async {
        Ok(Command::update_and_goto(
            SeedUpdate::default().bar(["route"]),
            [END],
        ))
    });
    graph
        .add_edge(START, "named")
        .add_edge("named", "asks")
        .add_edge("asks", "closure")
        .add_edge("closure", "fallible")
        .add_edge("fallible", "counted")
        .add_edge("counted", "route");
    graph
}

#[tokio::test]
async fn every_form_runs() {
    let calls = Arc::new(AtomicUsize::new(0));
    let graph = graph(Arc::clone(&calls)).compile().unwrap();
    let out = graph
        .invoke(SeedUpdate::default().foo("x"), RunConfig::default())
        .await
        .unwrap();
    assert_eq!(out.foo, "xab");
    assert_eq!(out.bar, ["named", "asks", "closure", "fallible", "route"]);
    assert_eq!(calls.load(SeqCst), 1);
}

#[tokio::test]
async fn an_early_err_fails_the_run() {
    let graph = graph(Arc::default()).compile().unwrap();
    let err = graph
        .invoke(SeedUpdate::default().foo("fail"), RunConfig::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("asked to fail"), "{err}");
}
