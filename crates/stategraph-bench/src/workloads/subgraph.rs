//! LangGraph's `fanout_to_subgraph` benchmark: a `Send` per subject to a compiled subgraph
//! that edits, generates and bumps a joke ten times.

use std::sync::Arc;

use stategraph::{
    DynState, END, Map, Reducer, START, Schema, StateGraph, Value, graph::Goto, graph::Send,
};

use super::{Shared, attach, expect_len, failed, fresh_config, letters};
use crate::{Backend, BenchError, Measurement, Params, Spec, Unit, Workload, repeat};

#[derive(stategraph::State, Clone, Debug, Default)]
struct Joke {
    subject: String,
    jokes: Vec<String>,
}

/// `fanout_to_subgraph_100x`.
pub(super) struct FanoutToSubgraph;

#[async_trait::async_trait]
impl Workload for FanoutToSubgraph {
    fn spec(&self) -> Spec {
        Spec::new("fanout_to_subgraph_100x", 100, 5, Unit::Invoke)
    }
    async fn measure(
        &self,
        backend: &Backend,
        n: usize,
        runs: usize,
        _: &Params,
    ) -> Result<Measurement, BenchError> {
        let mut sub = StateGraph::<Joke>::new();
        sub.add_node("edit", |s, _c| async move {
            Ok(JokeUpdate::default().subject(format!("{} - hohoho", s.subject)))
        })
        .add_node("generate", |s, _c| async move {
            Ok(JokeUpdate::default().jokes([format!("Joke about {}", s.subject)]))
        })
        .add_node("bump", |s, _c| async move {
            let first = s.jokes.first().cloned().unwrap_or_default();
            Ok(JokeUpdate::default().jokes([first + " a"]))
        });
        let done = " a".repeat(10);
        sub.add_edge(START, "edit")
            .add_edge("edit", "generate")
            .add_edge("generate", "bump")
            .add_edge("generate", END)
            .add_conditional_edges("bump", move |s: &Joke| {
                let finished = s.jokes.first().is_some_and(|j| j.ends_with(&done));
                Ok(vec![Goto::from(if finished { END } else { "bump" })])
            });

        let mut g = StateGraph::<DynState>::with_schema(
            Schema::new()
                .last_value("subjects")
                .reducer("jokes", Reducer::append()),
        );
        g.add_subgraph(
            "generate_joke",
            sub.compile().map_err(failed(self.spec().name))?,
        );
        g.add_conditional_edges(START, |s: &DynState| {
            Ok(s.get("subjects")
                .and_then(Value::as_list)
                .unwrap_or_default()
                .iter()
                .map(|subject| {
                    Send::new(
                        "generate_joke",
                        Map::from_iter([("subject", subject.clone())]),
                    )
                    .into()
                })
                .collect())
        })
        .add_edge("generate_joke", END);
        let graph: Shared<DynState> = Arc::new(attach(
            g.compile().map_err(failed(self.spec().name))?,
            backend,
        ));
        let subjects: Vec<Value> = (0..n).map(|_| Value::from(letters(1000))).collect();
        let samples = repeat(runs, || {
            let graph = Arc::clone(&graph);
            let input = Map::from_iter([("subjects", Value::from(subjects.clone()))]);
            async move {
                let out = graph
                    .invoke(input, fresh_config(backend))
                    .await
                    .map_err(failed("fanout_to_subgraph_100x"))?;
                expect_len("fanout_to_subgraph_100x", &out.0, "jokes", n)
            }
        })
        .await?;
        Ok(Measurement {
            samples_ms: samples,
            ..Measurement::default()
        })
    }
}
