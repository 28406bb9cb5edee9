//! `linear`, `fanout` and LangGraph's `sequential_1000`.

use std::sync::Arc;

use stategraph::{END, NodeOutput, START, StateGraph, Value};

use super::{Shared, attach, expect_count, failed, fresh_config, unexpected};
use crate::{Backend, BenchError, Measurement, Params, Spec, Unit, Workload, repeat};

/// START → node_0 → … → node_{n-1} → END.
fn chain<S: stategraph::State>(g: &mut StateGraph<S>, n: usize) {
    let names: Vec<String> = (0..n).map(|i| format!("node_{i}")).collect();
    let from = std::iter::once(START.to_owned()).chain(names.clone());
    let to = names.into_iter().chain([END.to_owned()]);
    for (a, b) in from.zip(to) {
        g.add_edge(a, b);
    }
}

#[derive(stategraph::State, Clone, Debug, Default)]
struct Chain {
    #[reducer(append)]
    items: Vec<String>,
    counter: i64,
}

/// `linear`: n nodes in a chain, each appending to a list and setting a counter.
pub(super) struct Linear;

#[async_trait::async_trait]
impl Workload for Linear {
    fn spec(&self) -> Spec {
        Spec::new("linear", 100, 10, Unit::Step)
    }
    async fn measure(
        &self,
        backend: &Backend,
        n: usize,
        runs: usize,
        _: &Params,
    ) -> Result<Measurement, BenchError> {
        let mut g = StateGraph::<Chain>::new();
        for i in 0..n {
            let counter = i64::try_from(i).unwrap_or(i64::MAX);
            g.add_node(format!("node_{i}"), move |_s, _c| async move {
                Ok(ChainUpdate::default()
                    .items([format!("item {i}")])
                    .counter(counter))
            });
        }
        chain(&mut g, n);
        let graph: Shared<Chain> = Arc::new(attach(
            g.compile().map_err(failed(self.spec().name))?,
            backend,
        ));
        let samples = repeat(runs, || {
            let graph = Arc::clone(&graph);
            async move {
                let out = graph
                    .invoke(ChainUpdate::default().counter(0), fresh_config(backend))
                    .await
                    .map_err(failed("linear"))?;
                expect_count("linear", "items", out.items.len(), n)
            }
        })
        .await?;
        Ok(Measurement {
            samples_ms: samples,
            steps: Some(n),
            ..Measurement::default()
        })
    }
}

#[derive(stategraph::State, Clone, Debug, Default)]
struct Fan {
    topic: String,
    #[reducer(append)]
    results: Vec<String>,
}

/// `fanout`: one node to n parallel workers (static edges), then a join.
pub(super) struct Fanout;

#[async_trait::async_trait]
impl Workload for Fanout {
    fn spec(&self) -> Spec {
        Spec::new("fanout", 50, 10, Unit::Invoke)
    }
    async fn measure(
        &self,
        backend: &Backend,
        n: usize,
        runs: usize,
        _: &Params,
    ) -> Result<Measurement, BenchError> {
        let mut g = StateGraph::<Fan>::new();
        g.add_node("fan", |_s, _c| async {
            Ok(FanUpdate::default().topic("fanned"))
        });
        g.add_edge(START, "fan");
        let workers: Vec<String> = (0..n).map(|i| format!("worker_{i}")).collect();
        for (i, w) in workers.iter().enumerate() {
            g.add_node(w.clone(), move |_s, _c| async move {
                Ok(FanUpdate::default().results([format!("result {i}")]))
            });
            g.add_edge("fan", w.clone());
        }
        g.add_node("join", |s, _c| async move {
            Ok(FanUpdate::default().topic(format!("joined {}", s.results.len())))
        });
        g.add_join(workers, "join").add_edge("join", END);
        let graph: Shared<Fan> = Arc::new(attach(
            g.compile().map_err(failed(self.spec().name))?,
            backend,
        ));
        let expect = format!("joined {n}");
        let samples = repeat(runs, || {
            let graph = Arc::clone(&graph);
            let expect = expect.clone();
            async move {
                let out = graph
                    .invoke(FanUpdate::default().topic("t"), fresh_config(backend))
                    .await
                    .map_err(failed("fanout"))?;
                if out.topic == expect {
                    Ok(())
                } else {
                    Err(unexpected("fanout", format!("topic {:?}", out.topic)))
                }
            }
        })
        .await?;
        Ok(Measurement {
            samples_ms: samples,
            steps: Some(3),
            ..Measurement::default()
        })
    }
}

#[derive(stategraph::State, Clone, Debug, Default)]
struct Messages {
    #[reducer(add_messages)]
    messages: Vec<Value>,
}

/// LangGraph's `sequential`: n no-op nodes in a chain over `MessagesState`.
pub(super) struct Sequential;

#[async_trait::async_trait]
impl Workload for Sequential {
    fn spec(&self) -> Spec {
        Spec::new("sequential_1000", 1000, 10, Unit::Step)
    }
    async fn measure(
        &self,
        backend: &Backend,
        n: usize,
        runs: usize,
        _: &Params,
    ) -> Result<Measurement, BenchError> {
        let mut g = StateGraph::<Messages>::new();
        for i in 0..n {
            g.add_node(format!("node_{i}"), |_s, _c| async {
                Ok(NodeOutput::<MessagesUpdate>::Empty)
            });
        }
        chain(&mut g, n);
        let graph: Shared<Messages> = Arc::new(attach(
            g.compile().map_err(failed(self.spec().name))?,
            backend,
        ));
        let samples = repeat(runs, || {
            let graph = Arc::clone(&graph);
            async move {
                graph
                    .invoke(
                        MessagesUpdate::default().messages(Vec::<Value>::new()),
                        fresh_config(backend),
                    )
                    .await
                    .map_err(failed("sequential_1000"))
                    .map(drop)
            }
        })
        .await?;
        Ok(Measurement {
            samples_ms: samples,
            steps: Some(n),
            ..Measurement::default()
        })
    }
}
