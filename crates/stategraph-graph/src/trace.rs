//! The engine's `tracing` spans: a run is a tree of them — the graph (`LangGraph`), each
//! super-step, each task (named after its node), and the checkpointer calls under the step
//! that made them — with OpenInference's span kinds and attributes, so that an
//! OpenTelemetry backend that renders LangChain traces (Phoenix, Langfuse, …) renders
//! these. Without a subscriber every span is disabled: building one is a check of a cached
//! flag, and none of its fields is computed.
//!
//! Span names (the `otel.name` field names the exported span where it differs):
//!
//! | span | `otel.name` | fields |
//! | --- | --- | --- |
//! | `graph` | `LangGraph` | `openinference.span.kind` `CHAIN`, `session.id` and `thread_id` (the thread), `checkpoint_ns`, `run_id`, `subgraph` |
//! | `step` | `step N` | `langgraph.step`, `langgraph.tasks` |
//! | `task` | the node's name | `openinference.span.kind` `CHAIN`, `langgraph.node`, `langgraph.task_id`, `langgraph.triggers`, `langgraph.step`; retries are `retry` events; a failed node sets `otel.status_code` `ERROR` and `error` |
//! | `checkpoint.get_tuple`, `checkpoint.put`, `checkpoint.put_writes`, `checkpoint.list` | | `db.system` (the saver's name: `sqlite`, `postgres`, …), `rows` |
//!
//! Interrupts are `interrupt` events on the step.

use std::future::Future;
use std::time::Instant;

use stategraph_checkpoint::CheckpointSaver;
use tracing::Instrument;
use tracing::field::Empty;

use crate::config::RunConfig;

/// The span of a graph run (`subgraph`: a subgraph's run inside a parent's task).
pub(crate) fn run_span(config: &RunConfig, subgraph: bool) -> tracing::Span {
    tracing::info_span!(
        "graph",
        otel.name = "LangGraph",
        openinference.span.kind = "CHAIN",
        session.id = config.thread_id.as_deref(),
        thread_id = config.thread_id.as_deref(),
        checkpoint_ns = config.checkpoint_ns.as_str(),
        run_id = config.configurable.get("run_id").and_then(|v| v.as_str()),
        subgraph,
        otel.status_code = Empty,
        error = Empty,
    )
}

/// The span of super-step `step`, running `tasks` tasks.
pub(crate) fn step_span(step: i64, tasks: usize) -> tracing::Span {
    tracing::info_span!(
        "step",
        otel.name = format_args!("step {step}"),
        langgraph.step = step,
        langgraph.tasks = i64::try_from(tasks).unwrap_or(i64::MAX),
    )
}

/// The span of a task running node `node`.
pub(crate) fn task_span(
    node: &str,
    task_id: &str,
    triggers: &[String],
    step: i64,
) -> tracing::Span {
    tracing::info_span!(
        "task",
        otel.name = node,
        openinference.span.kind = "CHAIN",
        langgraph.node = node,
        langgraph.task_id = task_id,
        langgraph.triggers = ?triggers,
        langgraph.step = step,
        otel.status_code = Empty,
        error = Empty,
    )
}

/// Counts a graph run that ended with `outcome` after starting at `started`, in
/// `stategraph_graph_runs_total` (label `status`: `success`, `interrupted` — it stopped on
/// an interrupt —, `error`) and `stategraph_graph_run_duration_seconds`.
pub(crate) fn run_ended<S: crate::state::State>(
    outcome: &Result<crate::run::RunOutcome<S>, crate::error::GraphError>,
    started: Instant,
) {
    let status = match outcome {
        Ok(o) if !o.interrupts.is_empty() => "interrupted",
        Ok(_) => "success",
        Err(_) => "error",
    };
    metrics::counter!("stategraph_graph_runs_total", "status" => status).increment(1);
    metrics::histogram!("stategraph_graph_run_duration_seconds")
        .record(started.elapsed().as_secs_f64());
}

/// Marks the current span (a run's or a task's) failed with `error`.
pub(crate) fn record_error(error: &dyn std::fmt::Display) {
    let span = tracing::Span::current();
    if !span.is_disabled() {
        span.record("otel.status_code", "ERROR");
        span.record("error", tracing::field::display(error));
    }
}

/// A checkpointer call.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Op {
    GetTuple,
    Put,
    PutWrites,
    List,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::GetTuple => "get_tuple",
            Op::Put => "put",
            Op::PutWrites => "put_writes",
            Op::List => "list",
        }
    }

    /// Its span (`rows`: the checkpoints or writes it carries, when known).
    fn span(self, saver: &dyn CheckpointSaver, rows: Option<usize>) -> tracing::Span {
        let backend = saver.name();
        // As a signed integer: exporters keep those as numbers.
        let rows = rows.and_then(|n| i64::try_from(n).ok());
        match self {
            Op::GetTuple => tracing::info_span!("checkpoint.get_tuple", db.system = backend, rows),
            Op::Put => tracing::info_span!("checkpoint.put", db.system = backend, rows),
            Op::PutWrites => {
                tracing::info_span!("checkpoint.put_writes", db.system = backend, rows)
            }
            Op::List => tracing::info_span!("checkpoint.list", db.system = backend, rows),
        }
    }
}

/// `call` (checkpointer call `op` on `saver`, carrying `rows` checkpoints or writes) in its
/// span, its duration recorded in `stategraph_checkpoint_call_duration_seconds` (labels
/// `backend`, `op`).
pub(crate) async fn saver_call<T>(
    saver: &dyn CheckpointSaver,
    op: Op,
    rows: Option<usize>,
    call: impl Future<Output = T>,
) -> T {
    let started = Instant::now();
    let out = call.instrument(op.span(saver, rows)).await;
    metrics::histogram!(
        "stategraph_checkpoint_call_duration_seconds",
        "backend" => saver.name(),
        "op" => op.name(),
    )
    .record(started.elapsed().as_secs_f64());
    out
}
