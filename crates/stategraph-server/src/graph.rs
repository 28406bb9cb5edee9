//! Graphs of any state type behind one object-safe trait, as the server serves them.

use futures_util::future::BoxFuture;
use futures_util::{Stream, StreamExt};
use serde_json::Value as Json;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use stategraph_checkpoint::{CheckpointConfig, CheckpointSaver, Map};
use stategraph_graph::{
    AsNode, CompiledGraph, GraphError, HistoryOptions, Interrupt, RunCommand, RunConfig, RunStream,
    State, StateSnapshot, StreamEvent, StreamMode, Topology, UpdatesEvent, Values, Xray,
};

/// How a run starts.
pub(crate) enum RunStart {
    /// New input: a graph's map of state keys, an entrypoint's argument.
    Input(Json),
    /// A command: answers to pending interrupts, an update, routing.
    Command(RunCommand<Map>),
    /// No input: carry on from the checkpoint.
    Continue,
}

/// One streamed event: its SSE name (`mode`, or `mode|ns…` for a subgraph's) and data.
pub(crate) type Event = (String, Json);

/// An event's data as the reference sends it: interrupts as LangGraph's `Interrupt` objects,
/// with all their fields.
fn event_data<S>(e: &StreamEvent<S>) -> Json {
    match e {
        StreamEvent::Updates(UpdatesEvent::Interrupt(list)) => serde_json::json!({
            "__interrupt__": list
                .iter()
                .map(Interrupt::to_object_json)
                .collect::<Vec<_>>()
        }),
        StreamEvent::Values(v) if !v.interrupts.is_empty() => {
            let mut out = v.to_json();
            if let Some(o) = out.as_object_mut() {
                o.insert(
                    "__interrupt__".into(),
                    v.interrupts.iter().map(Interrupt::to_object_json).collect(),
                );
            }
            out
        }
        StreamEvent::Subgraph(sub) => event_data(&sub.event),
        other => other.to_json(),
    }
}

/// A run's stream of events, with its state type erased.
pub(crate) trait ServedRun: Stream<Item = Result<Event, GraphError>> + Send + Unpin {
    /// Once the stream has ended: the final values of a run that completed (no task left
    /// to run), which are then its thread's latest state ([`RunStream::completed`]).
    fn completed(&self) -> Option<&Values>;
}

/// [`ServedRun`] of a graph's [`RunStream`].
struct Served<S>(RunStream<S>);

impl<S: State> Stream for Served<S> {
    type Item = Result<Event, GraphError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_next_unpin(cx).map(|item| {
            item.map(|event| {
                event.map(|e| {
                    let mode = e.mode().as_str();
                    // A subgraph's events are named `mode|ns…`, as the reference names them.
                    let name = match e.namespace() {
                        [] => mode.to_owned(),
                        ns => format!("{mode}|{}", ns.join("|")),
                    };
                    (name, event_data(&e))
                })
            })
        })
    }
}

impl<S: State> ServedRun for Served<S> {
    fn completed(&self) -> Option<&Values> {
        self.0.completed()
    }
}

/// A compiled graph with its state type erased.
pub(crate) trait ServedGraph: Send + Sync {
    fn stream(
        &self,
        start: RunStart,
        config: RunConfig,
        modes: &[StreamMode],
    ) -> Box<dyn ServedRun>;

    fn get_state<'a>(
        &'a self,
        config: &'a RunConfig,
        subgraphs: bool,
    ) -> BoxFuture<'a, Result<StateSnapshot, GraphError>>;

    fn history<'a>(
        &'a self,
        config: &'a RunConfig,
        options: HistoryOptions,
    ) -> BoxFuture<'a, Result<Vec<StateSnapshot>, GraphError>>;

    fn update_state<'a>(
        &'a self,
        config: &'a RunConfig,
        values: Option<Map>,
        as_node: AsNode,
    ) -> BoxFuture<'a, Result<CheckpointConfig, GraphError>>;

    /// Its drawing, subgraphs drawn in as deep as `xray` says.
    fn drawing(&self, xray: Xray) -> Topology;

    /// The one channel that is the graph's output as-is (an entrypoint's), if so
    /// ([`CompiledGraph::output_channel`]): its state values render as that channel's value.
    fn output_channel(&self) -> Option<&'static str>;

    /// Resolves once the runs dropped on `thread_id` have committed their queued saves.
    fn wait_for_saves<'a>(&'a self, thread_id: &'a str) -> BoxFuture<'a, ()>;

    /// The same graph saving its checkpoints with `saver` instead.
    fn with_saver(&self, saver: Arc<dyn CheckpointSaver>) -> Arc<dyn ServedGraph>;

    fn state_keys(&self) -> Vec<String>;

    /// The state type's JSON Schema, when it has one ([`State::json_schema`]).
    fn json_schema(&self) -> Option<Json>;

    /// The graph's input and output schemas where they narrow its state
    /// ([`CompiledGraph::input_schema`], [`CompiledGraph::output_schema`]): each its JSON
    /// Schema, or its keys.
    fn io_schemas(&self) -> [Option<(Vec<String>, Option<Json>)>; 2];

    fn subgraph_nodes(&self) -> Vec<(String, Vec<String>)>;
}

impl<S: State> ServedGraph for CompiledGraph<S> {
    fn stream(
        &self,
        start: RunStart,
        config: RunConfig,
        modes: &[StreamMode],
    ) -> Box<dyn ServedRun> {
        Box::new(Served(match start {
            RunStart::Input(input) => self.stream_input(input.into(), config, modes),
            RunStart::Command(command) => self.stream_command_values(command, config, modes),
            RunStart::Continue => self.stream_continue(config, modes),
        }))
    }

    fn get_state<'a>(
        &'a self,
        config: &'a RunConfig,
        subgraphs: bool,
    ) -> BoxFuture<'a, Result<StateSnapshot, GraphError>> {
        if subgraphs {
            Box::pin(self.get_state_with_subgraphs(config))
        } else {
            Box::pin(CompiledGraph::get_state(self, config))
        }
    }

    fn history<'a>(
        &'a self,
        config: &'a RunConfig,
        options: HistoryOptions,
    ) -> BoxFuture<'a, Result<Vec<StateSnapshot>, GraphError>> {
        Box::pin(self.get_state_history(config, options))
    }

    fn update_state<'a>(
        &'a self,
        config: &'a RunConfig,
        values: Option<Map>,
        as_node: AsNode,
    ) -> BoxFuture<'a, Result<CheckpointConfig, GraphError>> {
        Box::pin(self.update_state_values(config, values, as_node))
    }

    fn drawing(&self, xray: Xray) -> Topology {
        CompiledGraph::drawing(self, xray)
    }

    fn output_channel(&self) -> Option<&'static str> {
        CompiledGraph::output_channel(self)
    }

    fn wait_for_saves<'a>(&'a self, thread_id: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(CompiledGraph::wait_for_saves(self, thread_id))
    }

    fn with_saver(&self, saver: Arc<dyn CheckpointSaver>) -> Arc<dyn ServedGraph> {
        Arc::new(self.clone().with_checkpointer(saver))
    }

    fn state_keys(&self) -> Vec<String> {
        CompiledGraph::state_keys(self)
    }

    fn json_schema(&self) -> Option<Json> {
        S::json_schema()
    }

    fn io_schemas(&self) -> [Option<(Vec<String>, Option<Json>)>; 2] {
        [self.input_schema(), self.output_schema()]
            .map(|io| io.map(|io| (io.key_names().to_vec(), io.json_schema().cloned())))
    }

    fn subgraph_nodes(&self) -> Vec<(String, Vec<String>)> {
        CompiledGraph::subgraph_nodes(self)
    }
}
