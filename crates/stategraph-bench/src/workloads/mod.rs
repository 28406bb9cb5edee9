//! The workloads of `bench/WORKLOADS.md`, each the same graph as its Python twin in
//! `bench/python/run.py`.

use std::sync::Arc;

use stategraph::{CompiledGraph, GraphError, RunConfig, State};

use crate::{Backend, BenchError, Workload};

mod agent;
mod basic;
mod chat;
mod functional;
mod react;
mod subgraph;
mod wide;

/// Every workload's name, in the order `bench/compare` runs them.
pub const NAMES: &[&str] = &[
    "linear",
    "fanout",
    "chat",
    "history",
    "sequential_1000",
    "wide_state_15x600",
    "react_agent_100x",
    "fanout_to_subgraph_100x",
    "functional_50",
    "create_agent_20x",
    "commit_floor",
];

/// The workload called `name`.
pub fn by_name(name: &str) -> Result<Box<dyn Workload>, BenchError> {
    Ok(match name {
        "linear" => Box::new(basic::Linear),
        "fanout" => Box::new(basic::Fanout),
        "sequential_1000" => Box::new(basic::Sequential),
        "chat" => Box::new(chat::ChatTurns),
        "history" => Box::new(chat::History),
        "wide_state_15x600" => Box::new(wide::WideState),
        "react_agent_100x" => Box::new(react::ReactAgent),
        "fanout_to_subgraph_100x" => Box::new(subgraph::FanoutToSubgraph),
        "functional_50" => Box::new(functional::Functional),
        "create_agent_20x" => Box::new(agent::CreateAgent),
        "commit_floor" => Box::new(crate::floor::CommitFloor),
        other => return Err(BenchError::UnknownWorkload(other.to_owned())),
    })
}

/// The graph with the backend's checkpointer (if it has one).
fn attach<S: State>(graph: CompiledGraph<S>, backend: &Backend) -> CompiledGraph<S> {
    match backend.saver() {
        Some(saver) => graph.with_checkpointer(saver),
        None => graph,
    }
}

/// A run's config: a fresh thread where there is a checkpointer, and a recursion limit that
/// never triggers (both sides use 10^9).
fn fresh_config(backend: &Backend) -> RunConfig {
    let config = match backend.saver() {
        Some(_) => RunConfig::thread(stategraph::uuid6(None)),
        None => RunConfig::default(),
    };
    config.with_recursion_limit(1_000_000_000)
}

/// `n` random lowercase letters.
fn letters(n: usize) -> String {
    (0..n)
        .map(|_| char::from(b'a' + fastrand::u8(0..26)))
        .collect()
}

/// A graph error, as the workload's error.
fn failed(workload: &'static str) -> impl Fn(GraphError) -> BenchError {
    move |e| BenchError::Run {
        workload,
        message: e.to_string(),
    }
}

/// A result the workload did not expect.
fn unexpected(workload: &'static str, what: String) -> BenchError {
    BenchError::Run {
        workload,
        message: what,
    }
}

/// Checks that list key `key` of a run's output holds `want` items.
fn expect_len(
    workload: &'static str,
    values: &stategraph::Values,
    key: &str,
    want: usize,
) -> Result<(), BenchError> {
    match list_len(values, key) {
        len if len == want => Ok(()),
        len => Err(unexpected(workload, format!("{len} {key}, not {want}"))),
    }
}

/// Checks that a run's `key` holds `want` items (`have` counted from its typed output).
fn expect_count(
    workload: &'static str,
    key: &str,
    have: usize,
    want: usize,
) -> Result<(), BenchError> {
    if have == want {
        Ok(())
    } else {
        Err(unexpected(workload, format!("{have} {key}, not {want}")))
    }
}

/// The length of list key `key` in a run's output.
fn list_len(values: &stategraph::Values, key: &str) -> usize {
    values
        .get(key)
        .and_then(stategraph::Value::as_list)
        .map_or(0, <[stategraph::Value]>::len)
}

/// Keeps graphs `Arc`-shared between runs.
type Shared<S> = Arc<CompiledGraph<S>>;
