//! Streaming a run: LangGraph's stream modes, as typed events, as the run happens.
//!
//! [`CompiledGraph::stream`](crate::CompiledGraph::stream) returns a [`RunStream`]: an owned
//! [`futures_core::Stream`] of [`StreamEvent`]s that drives the run as it is read. It borrows
//! nothing (move it into a spawned task, or make it an HTTP response body), and it is bounded:
//! when [`STREAM_CAPACITY`] events wait unread, the run waits for the reader before its next
//! step, task result or custom write. Dropping the stream stops the run at its next wait; what
//! was checkpointed so far stays.

use std::collections::{BTreeSet, VecDeque};
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use serde_json::{Value as Json, json};
use stategraph_checkpoint::{CheckpointConfig, CheckpointMetadata, Map, Value, now_iso};
use stategraph_messages::Message;
use tokio::sync::Notify;

use crate::error::GraphError;
use crate::interrupt::Interrupt;
use crate::state::{State, Values};

mod json;
mod machinery;
pub mod run_tree;
pub use json::*;
pub use machinery::*;
pub use run_tree::{ChildRun, RunEvent, RunKind, RunPhase, RunTree};

/// How many events may wait unread before the run waits for the reader.
pub const STREAM_CAPACITY: usize = 256;

/// What a stream carries (several modes can be asked for at once).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum StreamMode {
    /// The whole state after each super-step.
    Values,
    /// `{node: update}` as each task finishes.
    Updates,
    /// Each checkpoint as it is saved: `{config, parent_config, values, metadata, next, tasks}`.
    Checkpoints,
    /// Task starts `{id, name, input, triggers}` and results `{id, name, error, result,
    /// interrupts}`.
    Tasks,
    /// Checkpoints and tasks wrapped as `{step, timestamp, type, payload}`.
    Debug,
    /// Whatever nodes write with [`NodeContext::write_custom`](crate::NodeContext::write_custom).
    Custom,
    /// LangChain messages that nodes return in their updates, each with the metadata of the
    /// task that produced it (`langgraph_node`, `langgraph_step`, …), once per message id.
    Messages,
    /// LangChain's `astream_events` (v2) events of the run and of every runnable inside it
    /// (LangGraph's `astream_events`; the Agent Server's `events` mode): see [`run_tree`].
    Events,
}

impl StreamMode {
    /// LangGraph's name of the mode.
    pub fn as_str(self) -> &'static str {
        match self {
            StreamMode::Values => "values",
            StreamMode::Updates => "updates",
            StreamMode::Checkpoints => "checkpoints",
            StreamMode::Tasks => "tasks",
            StreamMode::Debug => "debug",
            StreamMode::Custom => "custom",
            StreamMode::Messages => "messages",
            StreamMode::Events => "events",
        }
    }

    /// The mode LangGraph names `name` (`messages-tuple`, the Agent Server's name for
    /// `messages`, included).
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "values" => StreamMode::Values,
            "updates" => StreamMode::Updates,
            "checkpoints" => StreamMode::Checkpoints,
            "tasks" => StreamMode::Tasks,
            "debug" => StreamMode::Debug,
            "custom" => StreamMode::Custom,
            "messages" | "messages-tuple" => StreamMode::Messages,
            "events" => StreamMode::Events,
            _ => return None,
        })
    }
}

/// One event of a run's stream.
///
/// Each variant is one [`StreamMode`]; [`to_json`](Self::to_json) renders the payload as
/// LangGraph streams it (`stream_mode=…` in Python, the `data` of the Agent Server's
/// server-sent events).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum StreamEvent<S> {
    /// The state after a super-step (and, on resume, the state resumed from).
    Values(ValuesEvent<S>),
    /// A task's update, or the interrupts a step raised.
    Updates(UpdatesEvent),
    /// A value a node wrote with [`NodeContext::write_custom`](crate::NodeContext::write_custom).
    Custom(Value),
    /// A message a node returned, with its task's metadata.
    Messages(MessageEvent),
    /// A task started or finished.
    Tasks(TaskEvent),
    /// A checkpoint was saved.
    Checkpoints(CheckpointEvent),
    /// A checkpoint or task event, with its step and time.
    Debug(DebugEvent),
    /// A runnable started, streamed or ended (subgraphs' runnables included, never wrapped
    /// in [`StreamEvent::Subgraph`]: their `parent_ids` say where they ran).
    Events(RunEvent),
    /// An event of a subgraph's run, streamed when the run config asks for subgraph events
    /// ([`RunConfig::with_subgraph_events`](crate::RunConfig::with_subgraph_events); LangGraph's
    /// `stream(subgraphs=True)`).
    Subgraph(SubgraphEvent),
}

/// An event from inside a subgraph: where it comes from and the event itself.
#[derive(Clone, Debug, PartialEq)]
pub struct SubgraphEvent {
    /// The subgraph run's namespace, outermost first (LangGraph's `ns` tuple): its
    /// `checkpoint_ns` split at `|`, e.g. `["sub:<task_id>"]`.
    pub namespace: Vec<String>,
    /// The event, with the subgraph's state untyped.
    pub event: Box<StreamEvent<crate::state::DynState>>,
}

impl<S> StreamEvent<S> {
    /// The mode this event belongs to.
    pub fn mode(&self) -> StreamMode {
        match self {
            StreamEvent::Values(_) => StreamMode::Values,
            StreamEvent::Updates(_) => StreamMode::Updates,
            StreamEvent::Custom(_) => StreamMode::Custom,
            StreamEvent::Messages(_) => StreamMode::Messages,
            StreamEvent::Tasks(_) => StreamMode::Tasks,
            StreamEvent::Checkpoints(_) => StreamMode::Checkpoints,
            StreamEvent::Debug(_) => StreamMode::Debug,
            StreamEvent::Events(_) => StreamMode::Events,
            StreamEvent::Subgraph(e) => e.event.mode(),
        }
    }

    /// The namespace of the run the event comes from: empty for the streamed graph's own
    /// events, the subgraph's (outermost first) for a [`StreamEvent::Subgraph`].
    pub fn namespace(&self) -> &[String] {
        match self {
            StreamEvent::Subgraph(e) => &e.namespace,
            _ => &[],
        }
    }

    /// The event as LangGraph's version 2 stream part (`stream(..., version="v2")`):
    /// `{"type": mode, "ns": [...], "data": payload}`, a `values` part's interrupts moved out
    /// of its data into `"interrupts"`.
    pub fn to_part_json(&self) -> Json {
        let mut data = self.to_json();
        let mut part = serde_json::Map::new();
        part.insert("type".into(), json!(self.mode().as_str()));
        part.insert("ns".into(), json!(self.namespace()));
        if self.mode() == StreamMode::Values {
            let interrupts = match &mut data {
                Json::Object(o) => o.remove("__interrupt__"),
                _ => None,
            };
            part.insert("interrupts".into(), interrupts.unwrap_or_else(|| json!([])));
        }
        part.insert("data".into(), data);
        Json::Object(part)
    }

    /// The payload as LangGraph streams it, e.g. `{"node_a": {"foo": "a"}}` for an update
    /// or `[message, metadata]` for a message.
    pub fn to_json(&self) -> Json {
        match self {
            StreamEvent::Values(v) => v.to_json(),
            StreamEvent::Updates(u) => u.to_json(),
            StreamEvent::Custom(v) => v.to_json(),
            StreamEvent::Messages(m) => m.to_json(),
            StreamEvent::Tasks(t) => t.to_json(),
            StreamEvent::Checkpoints(c) => c.to_json(),
            StreamEvent::Debug(d) => d.to_json(),
            StreamEvent::Events(e) => e.to_json(),
            StreamEvent::Subgraph(e) => e.event.to_json(),
        }
    }
}

/// The state after a super-step: its values, readable as the typed state. Also sent when a
/// task stops on interrupts, with those interrupts (as LangGraph 1.2's `values` mode does).
#[derive(Clone, Debug, PartialEq)]
pub struct ValuesEvent<S> {
    /// The state's values, by key.
    pub values: Values,
    /// The interrupts a task just stopped on (empty after a super-step).
    pub interrupts: Vec<Interrupt>,
    /// The one channel that is the graph's output as-is (an entrypoint's), if so.
    output: Option<&'static str>,
    state: PhantomData<fn() -> S>,
}

impl<S> ValuesEvent<S> {
    /// The state's `values`, with the `interrupts` a task just stopped on (none after a
    /// super-step): e.g. an event of a remote graph, read from its server's stream.
    pub fn new(values: Values, interrupts: Vec<Interrupt>) -> Self {
        Self {
            values,
            interrupts,
            output: None,
            state: PhantomData,
        }
    }

    /// The payload as LangGraph streams it: the state's values (for an entrypoint, the
    /// value it returned, `null` before it returned one), with `__interrupt__` listing the
    /// interrupts when there are — for an entrypoint, the interrupts alone.
    pub fn to_json(&self) -> Json {
        let interrupts = || Json::Array(self.interrupts.iter().map(Interrupt::to_json).collect());
        match (self.output, self.interrupts.is_empty()) {
            (_, true) => output_json(&self.values, self.output),
            (Some(_), false) => json!({ "__interrupt__": interrupts() }),
            (None, false) => {
                let mut out = values_json(&self.values);
                if let Json::Object(o) = &mut out {
                    o.insert("__interrupt__".into(), interrupts());
                }
                out
            }
        }
    }
}

impl<S: State> ValuesEvent<S> {
    /// The values as the typed state.
    pub fn state(&self) -> Result<S, GraphError> {
        S::from_values(&self.values)
    }
}

/// What the `updates` mode reports.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum UpdatesEvent {
    /// A task finished with this update of the state (`None`: it wrote no state key).
    Node {
        /// The node.
        node: String,
        /// The state keys it wrote.
        update: Option<Values>,
        /// Its writes came from the node cache (or were saved by an earlier try of the
        /// step): `{"__metadata__": {"cached": true}}` in LangGraph's output.
        cached: bool,
    },
    /// A step stopped on these interrupts (`{"__interrupt__": [...]}`).
    Interrupt(Vec<Interrupt>),
    /// A task called with [`Task::call`](crate::functional::Task::call) returned `value`,
    /// or an entrypoint returned it to its caller (`{"name": value}`).
    Returned {
        /// The task or entrypoint.
        node: String,
        /// What it returned.
        value: Value,
        /// It came from the node cache.
        cached: bool,
    },
}

impl UpdatesEvent {
    /// The payload as a value (`{node: update}`, messages kept typed): the chunk the
    /// graph's run streams in [`StreamMode::Events`].
    pub(crate) fn to_value(&self) -> Value {
        let (key, value, cached) = match self {
            UpdatesEvent::Node {
                node,
                update,
                cached,
            } => {
                let update = update.as_ref().map_or(Value::Null, crate::cache::input_map);
                (node.as_str(), update, *cached)
            }
            UpdatesEvent::Interrupt(list) => (
                "__interrupt__",
                Value::List(list.iter().map(Interrupt::to_value).collect()),
                false,
            ),
            UpdatesEvent::Returned {
                node,
                value,
                cached,
            } => (node.as_str(), value.clone(), *cached),
        };
        let mut out = Map::from_iter([(key, value)]);
        if cached {
            let note = Map::from_iter([("cached", Value::Bool(true))]);
            out.insert("__metadata__", Value::Map(note));
        }
        Value::Map(out)
    }

    fn to_json(&self) -> Json {
        match self {
            UpdatesEvent::Node {
                node,
                update,
                cached,
            } => {
                let update = update.as_ref().map_or(Json::Null, values_json);
                if *cached {
                    json!({ node.as_str(): update, "__metadata__": {"cached": true} })
                } else {
                    json!({ node.as_str(): update })
                }
            }
            UpdatesEvent::Interrupt(list) => {
                json!({ "__interrupt__": list.iter().map(Interrupt::to_json).collect::<Vec<_>>() })
            }
            UpdatesEvent::Returned {
                node,
                value,
                cached,
            } => {
                if *cached {
                    json!({ node.as_str(): value_json(value), "__metadata__": {"cached": true} })
                } else {
                    json!({ node.as_str(): value_json(value) })
                }
            }
        }
    }
}

/// A message a node returned, with the metadata of its task.
#[derive(Clone, Debug, PartialEq)]
pub struct MessageEvent {
    /// The message.
    pub message: Message,
    /// `langgraph_step`, `langgraph_node`, `langgraph_triggers`, `langgraph_path`,
    /// `langgraph_checkpoint_ns`, `checkpoint_ns`, and the run's `thread_id`.
    pub metadata: Map,
}

impl MessageEvent {
    fn to_json(&self) -> Json {
        json!([
            value_json(&self.message.to_value()),
            Value::Map(self.metadata.clone()).to_json()
        ])
    }
}

/// A task starting or finishing.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum TaskEvent {
    /// A task starts.
    Start(TaskStart),
    /// A task finished (or failed, or interrupted).
    Result(TaskResult),
}

impl TaskEvent {
    fn to_json(&self) -> Json {
        match self {
            TaskEvent::Start(t) => {
                let mut out = json!({
                    "id": t.id, "name": t.name, "input": value_json(&t.input), "triggers": t.triggers,
                });
                if !t.metadata.is_empty()
                    && let Some(o) = out.as_object_mut()
                {
                    o.insert(
                        "metadata".into(),
                        value_json(&Value::Map(t.metadata.clone())),
                    );
                }
                out
            }
            TaskEvent::Result(t) => json!({
                "id": t.id,
                "name": t.name,
                "error": t.error.as_ref().map_or(Json::Null, Value::to_json),
                "result": values_json(&t.result),
                "interrupts": t.interrupts.iter().map(Interrupt::to_object_json).collect::<Vec<_>>(),
            }),
        }
    }
}

/// A task that starts.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskStart {
    /// The task id.
    pub id: String,
    /// The node.
    pub name: String,
    /// What the node is given, as LangGraph reports it: the state (a map of its keys), a
    /// `Send`'s argument, an entrypoint's argument, or — for a called task — its arguments
    /// as Python's `(args, kwargs)`: `[[input], {}]`.
    pub input: Value,
    /// The channels that triggered it.
    pub triggers: Vec<String>,
    /// The run's metadata (the run config's `metadata`), without the keys its other fields
    /// repeat; empty when there is none, and then left out of its JSON, as LangGraph does.
    pub metadata: Map,
}

/// A task that finished.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskResult {
    /// The task id.
    pub id: String,
    /// The node.
    pub name: String,
    /// The stored error, if the node failed.
    pub error: Option<Value>,
    /// The state keys it wrote.
    pub result: Values,
    /// The interrupts it raised.
    pub interrupts: Vec<Interrupt>,
}

/// A saved checkpoint, with the tasks that run next.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckpointEvent {
    /// Its address.
    pub config: CheckpointConfig,
    /// Its parent's address.
    pub parent_config: Option<CheckpointConfig>,
    /// The state's values.
    pub values: Values,
    /// Its metadata.
    pub metadata: CheckpointMetadata,
    /// The nodes that run next.
    pub next: Vec<String>,
    /// The tasks that run next: (id, node).
    pub tasks: Vec<(String, String)>,
}

impl CheckpointEvent {
    fn to_json(&self) -> Json {
        json!({
            "config": self.config.to_json(),
            "parent_config": self.parent_config.as_ref().map_or(Json::Null, CheckpointConfig::to_json),
            "values": values_json(&self.values),
            "metadata": self.metadata.to_json(),
            "next": self.next,
            "tasks": self.tasks.iter().map(|(id, name)| json!({
                "id": id, "name": name, "interrupts": [], "state": null,
            })).collect::<Vec<_>>(),
        })
    }
}

/// A checkpoint or task event, wrapped with its step and time (`debug` mode).
#[derive(Clone, Debug, PartialEq)]
pub struct DebugEvent {
    /// The step.
    pub step: i64,
    /// When, as an ISO 8601 timestamp.
    pub timestamp: String,
    /// What happened.
    pub payload: DebugPayload,
}

/// What a [`DebugEvent`] reports.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum DebugPayload {
    /// A checkpoint was saved (`type: "checkpoint"`).
    Checkpoint(Box<CheckpointEvent>),
    /// A task starts (`type: "task"`).
    Task(TaskStart),
    /// A task finished (`type: "task_result"`).
    TaskResult(TaskResult),
}

impl DebugEvent {
    fn to_json(&self) -> Json {
        let (kind, payload) = match &self.payload {
            DebugPayload::Checkpoint(c) => ("checkpoint", c.to_json()),
            DebugPayload::Task(t) => ("task", TaskEvent::Start(t.clone()).to_json()),
            DebugPayload::TaskResult(t) => ("task_result", TaskEvent::Result(t.clone()).to_json()),
        };
        json!({ "step": self.step, "timestamp": self.timestamp, "type": kind, "payload": payload })
    }
}

#[cfg(test)]
mod tests;
