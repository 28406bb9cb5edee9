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

    /// The payload as LangGraph streams it, e.g. `{"node_a": {"foo": "a"}}` for an update
    /// or `[message, metadata]` for a message.
    pub fn to_json(&self) -> Json {
        match self {
            StreamEvent::Values(v) => values_json(&v.values),
            StreamEvent::Updates(u) => u.to_json(),
            StreamEvent::Custom(v) => v.to_json(),
            StreamEvent::Messages(m) => m.to_json(),
            StreamEvent::Tasks(t) => t.to_json(),
            StreamEvent::Checkpoints(c) => c.to_json(),
            StreamEvent::Debug(d) => d.to_json(),
            StreamEvent::Subgraph(e) => e.event.to_json(),
        }
    }
}

/// A map of state values as JSON, each as [`value_json`] renders it (what the Agent Server
/// API sends for a thread's values).
pub fn values_json(values: &Values) -> Json {
    Json::Object(
        values
            .iter()
            .map(|(k, v)| (k.clone(), value_json(v)))
            .collect(),
    )
}

/// A value as JSON, as LangGraph's server renders it: Python objects stored with their fields
/// (LangChain messages, pydantic models, dataclasses; also inside lists and maps) as the dict
/// of those fields. What the Agent Server API sends for state values.
///
/// ```
/// use stategraph_checkpoint::{Message, value};
/// use stategraph_graph::stream::value_json;
/// let stored = Message::human("hi").with_id("1").to_value();
/// assert_eq!(value_json(&stored)["content"], "hi");
/// assert_eq!(value_json(&value!({"n": [1]})), serde_json::json!({"n": [1]}));
/// ```
pub fn value_json(value: &Value) -> Json {
    if let Value::Ext(ext) = value
        && let Ok(Some(object)) = ext.py_object()
        && let Value::Map(_) = object.data
    {
        return value_json(&object.data);
    }
    match value {
        Value::List(l) => Json::Array(l.iter().map(value_json).collect()),
        Value::Map(m) => Json::Object(
            m.iter()
                .map(|(k, v)| {
                    let key = k
                        .as_str()
                        .map_or_else(|| k.to_json().to_string(), str::to_owned);
                    (key, value_json(v))
                })
                .collect(),
        ),
        other => other.to_json(),
    }
}

/// A value as [`value_json`] renders it, written straight into a serializer: the same JSON,
/// without building a [`serde_json::Value`] tree first (no allocation per string, list or
/// map). For answers that carry many states (a thread's history).
///
/// ```
/// use stategraph_checkpoint::{Message, value};
/// use stategraph_graph::stream::{ValueJson, value_json};
/// let stored = value!({"messages": [Message::human("hi").with_id("1").to_value()]});
/// assert_eq!(
///     serde_json::to_string(&ValueJson(&stored)).unwrap(),
///     value_json(&stored).to_string()
/// );
/// ```
#[derive(Clone, Copy, Debug)]
pub struct ValueJson<'a>(pub &'a Value);

impl serde::Serialize for ValueJson<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self.0 {
            Value::Null => serializer.serialize_unit(),
            Value::Bool(b) => serializer.serialize_bool(*b),
            Value::Int(i) => serializer.serialize_i64(*i),
            Value::UInt(u) => serializer.serialize_u64(*u),
            // As `serde_json::Number::from_f64`: no JSON number for NaN or infinities.
            Value::Float(f) if f.is_finite() => serializer.serialize_f64(*f),
            Value::Float(_) => serializer.serialize_unit(),
            Value::Str(s) => serializer.serialize_str(s),
            Value::List(l) => {
                let mut seq = serializer.serialize_seq(Some(l.len()))?;
                for item in l.iter() {
                    seq.serialize_element(&ValueJson(item))?;
                }
                seq.end()
            }
            Value::Map(m) if string_keys_once(m) => {
                let mut map = serializer.serialize_map(Some(m.len()))?;
                for (k, v) in m.iter() {
                    map.serialize_entry(k.as_str().unwrap_or_default(), &ValueJson(v))?;
                }
                map.end()
            }
            Value::Ext(ext) => match ext.py_object() {
                Ok(Some(object)) if matches!(object.data, Value::Map(_)) => {
                    ValueJson(&object.data).serialize(serializer)
                }
                _ => self.0.to_json().serialize(serializer),
            },
            // Keys that are not strings (written as their JSON text), or the same key twice
            // (one entry, at the first one's place, with the last one's value): as the tree.
            other => value_json(other).serialize(serializer),
        }
    }
}

/// Whether every key of `m` is a string and none comes twice: then its JSON object has its
/// entries one for one.
fn string_keys_once(m: &Map) -> bool {
    const SMALL: usize = 16;
    let mut keys = Vec::with_capacity(m.len().min(SMALL));
    let mut seen = std::collections::HashSet::new();
    for (k, _) in m.iter() {
        let Some(k) = k.as_str() else {
            return false;
        };
        if m.len() <= SMALL {
            if keys.contains(&k) {
                return false;
            }
            keys.push(k);
        } else if !seen.insert(k) {
            return false;
        }
    }
    true
}

/// A map of state values as [`values_json`] renders it, written straight into a serializer
/// (see [`ValueJson`]).
#[derive(Clone, Copy, Debug)]
pub struct ValuesJson<'a>(pub &'a Values);

impl serde::Serialize for ValuesJson<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(k, v)| (k, ValueJson(v))))
    }
}

/// The state after a super-step: its values, readable as the typed state.
#[derive(Clone, Debug, PartialEq)]
pub struct ValuesEvent<S> {
    /// The state's values, by key.
    pub values: Values,
    state: PhantomData<fn() -> S>,
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
    },
    /// A step stopped on these interrupts (`{"__interrupt__": [...]}`).
    Interrupt(Vec<Interrupt>),
}

impl UpdatesEvent {
    fn to_json(&self) -> Json {
        match self {
            UpdatesEvent::Node { node, update } => {
                json!({ node.as_str(): update.as_ref().map_or(Json::Null, values_json) })
            }
            UpdatesEvent::Interrupt(list) => {
                json!({ "__interrupt__": list.iter().map(Interrupt::to_json).collect::<Vec<_>>() })
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
            TaskEvent::Start(t) => json!({
                "id": t.id, "name": t.name, "input": values_json(&t.input), "triggers": t.triggers,
            }),
            TaskEvent::Result(t) => json!({
                "id": t.id,
                "name": t.name,
                "error": t.error.as_ref().map_or(Json::Null, Value::to_json),
                "result": values_json(&t.result),
                "interrupts": t.interrupts.iter().map(Interrupt::to_json).collect::<Vec<_>>(),
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
    /// What the node is given (the state, or a `Send`'s argument).
    pub input: Values,
    /// The channels that triggered it.
    pub triggers: Vec<String>,
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

/// An event as the engine emits it, before it is typed for the stream's state.
pub(crate) type Raw = StreamEvent<()>;

impl Raw {
    /// Raw values as the values of state `S`.
    pub(crate) fn values(values: Values) -> Self {
        StreamEvent::Values(ValuesEvent {
            values,
            state: PhantomData,
        })
    }

    fn typed<S>(self) -> StreamEvent<S> {
        match self {
            StreamEvent::Values(v) => StreamEvent::Values(ValuesEvent {
                values: v.values,
                state: PhantomData,
            }),
            StreamEvent::Updates(u) => StreamEvent::Updates(u),
            StreamEvent::Custom(v) => StreamEvent::Custom(v),
            StreamEvent::Messages(m) => StreamEvent::Messages(m),
            StreamEvent::Tasks(t) => StreamEvent::Tasks(t),
            StreamEvent::Checkpoints(c) => StreamEvent::Checkpoints(c),
            StreamEvent::Debug(d) => StreamEvent::Debug(d),
            StreamEvent::Subgraph(e) => StreamEvent::Subgraph(e),
        }
    }
}

/// The queue between a run and its reader.
#[derive(Debug, Default)]
struct Queue {
    events: VecDeque<Raw>,
    /// The reader, waiting for an event.
    reader: Option<Waker>,
    /// The reader is gone: nothing waits for room any more.
    closed: bool,
}

#[derive(Debug, Default)]
struct Shared {
    queue: Mutex<Queue>,
    /// Signalled when the reader takes an event (or leaves).
    room: Notify,
    /// `messages` mode: the ids of the messages shown, or in the state when a task started
    /// (shared by the run, its nodes and its subgraphs, as LangGraph's one handler).
    seen: Mutex<std::collections::HashSet<String>>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Sends events of the requested modes.
#[derive(Clone, Debug)]
pub(crate) struct Emitter {
    modes: BTreeSet<StreamMode>,
    shared: Arc<Shared>,
    /// The namespace of the run emitting (empty: the streamed graph itself).
    namespace: Arc<[String]>,
    /// Whether subgraph runs stream their events too.
    subgraphs: bool,
}

impl Emitter {
    pub(crate) fn wants(&self, mode: StreamMode) -> bool {
        self.modes.contains(&mode)
    }

    /// Records a message id as shown; whether it was new.
    pub(crate) fn mark_seen(&self, id: &str) -> bool {
        let mut seen = self.shared.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.contains(id) {
            return false;
        }
        seen.insert(id.to_owned())
    }

    /// Queues an event of `mode` (built only when the mode is streamed).
    pub(crate) fn emit(&self, mode: StreamMode, event: impl FnOnce() -> Raw) {
        if self.wants(mode) {
            self.push(event());
        }
    }

    /// The emitter for a subgraph run in namespace `checkpoint_ns`, if subgraph events are
    /// streamed.
    pub(crate) fn nested(&self, checkpoint_ns: &str) -> Option<Emitter> {
        self.subgraphs.then(|| Emitter {
            modes: self.modes.clone(),
            shared: Arc::clone(&self.shared),
            namespace: checkpoint_ns.split('|').map(str::to_owned).collect(),
            subgraphs: true,
        })
    }

    fn push(&self, event: Raw) {
        let event = if self.namespace.is_empty() {
            event
        } else {
            StreamEvent::Subgraph(SubgraphEvent {
                namespace: self.namespace.to_vec(),
                event: Box::new(event.typed()),
            })
        };
        let reader = {
            let mut q = self.shared.lock();
            if q.closed {
                return;
            }
            q.events.push_back(event);
            q.reader.take()
        };
        if let Some(w) = reader {
            w.wake();
        }
    }

    /// Waits until the reader has room for more events (at once if it has, or left).
    pub(crate) async fn room(&self) {
        loop {
            let notified = self.shared.room.notified();
            {
                let q = self.shared.lock();
                if q.closed || q.events.len() < STREAM_CAPACITY {
                    return;
                }
            }
            notified.await;
        }
    }

    /// A checkpoint event, also wrapped for `debug`.
    pub(crate) fn checkpoint(&self, step: i64, event: impl FnOnce() -> CheckpointEvent) {
        self.debug_pair(
            StreamMode::Checkpoints,
            step,
            event,
            StreamEvent::Checkpoints,
            |c| DebugPayload::Checkpoint(Box::new(c)),
        );
    }

    /// A task start, also wrapped for `debug`.
    pub(crate) fn task_start(&self, step: i64, event: impl FnOnce() -> TaskStart) {
        self.debug_pair(
            StreamMode::Tasks,
            step,
            event,
            |t| StreamEvent::Tasks(TaskEvent::Start(t)),
            DebugPayload::Task,
        );
    }

    /// A task result, also wrapped for `debug`.
    pub(crate) fn task_result(&self, step: i64, event: impl FnOnce() -> TaskResult) {
        self.debug_pair(
            StreamMode::Tasks,
            step,
            event,
            |t| StreamEvent::Tasks(TaskEvent::Result(t)),
            DebugPayload::TaskResult,
        );
    }

    fn debug_pair<T: Clone>(
        &self,
        mode: StreamMode,
        step: i64,
        event: impl FnOnce() -> T,
        plain: impl FnOnce(T) -> Raw,
        wrapped: impl FnOnce(T) -> DebugPayload,
    ) {
        let (want_plain, want_debug) = (self.wants(mode), self.wants(StreamMode::Debug));
        if !want_plain && !want_debug {
            return;
        }
        let event = event();
        if want_plain {
            self.push(plain(event.clone()));
        }
        if want_debug {
            self.push(StreamEvent::Debug(DebugEvent {
                step,
                timestamp: now_iso(),
                payload: wrapped(event),
            }));
        }
    }
}

type RunFuture = Pin<Box<dyn Future<Output = Result<RunEnd, GraphError>> + Send + 'static>>;

/// How a streamed run ended: its final values (with `__interrupt__` when it stopped on
/// interrupts) and whether it completed (stopped because no task was left to run).
pub(crate) struct RunEnd {
    pub(crate) values: Values,
    pub(crate) complete: bool,
}

/// A running graph's events: a [`futures_core::Stream`] of `Result<StreamEvent<S>,
/// GraphError>` that drives the run as it is read.
///
/// Every item is an event until the run ends; if the run fails, its error is the last item.
/// [`result`](Self::result) reads what is left and returns the final values instead. It owns
/// what it needs (no borrow of the graph), so it can be moved into `tokio::spawn` or used
/// as an HTTP response body; see the [module docs](self) for backpressure.
#[must_use = "a stream does nothing unless read"]
pub struct RunStream<S> {
    shared: Arc<Shared>,
    run: Option<RunFuture>,
    /// How the run ended, once it has.
    outcome: Option<Result<Values, GraphError>>,
    /// The run ended with no task left to run.
    complete: bool,
    /// The run's error was returned as an item.
    error_taken: bool,
    state: PhantomData<fn() -> S>,
}

impl<S> std::fmt::Debug for RunStream<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunStream")
            .field("running", &self.run.is_some())
            .finish_non_exhaustive()
    }
}

impl<S> RunStream<S> {
    pub(crate) fn new(
        modes: &[StreamMode],
        subgraphs: bool,
        start: impl FnOnce(Emitter) -> RunFuture,
    ) -> Self {
        let shared = Arc::new(Shared::default());
        let emitter = Emitter {
            modes: modes.iter().copied().collect(),
            shared: Arc::clone(&shared),
            namespace: Arc::from([]),
            subgraphs,
        };
        Self {
            run: Some(start(emitter)),
            shared,
            outcome: None,
            complete: false,
            error_taken: false,
            state: PhantomData,
        }
    }

    /// A stream of a run that failed before it started.
    pub(crate) fn failed(error: GraphError) -> Self {
        Self {
            shared: Arc::new(Shared::default()),
            run: None,
            outcome: Some(Err(error)),
            complete: false,
            error_taken: false,
            state: PhantomData,
        }
    }

    /// Takes the next queued event, or registers the reader to be woken by the next one.
    fn take(&self, cx: &Context<'_>) -> Option<Raw> {
        let event = {
            let mut q = self.shared.lock();
            match q.events.pop_front() {
                Some(e) => Some(e),
                None => {
                    q.reader = Some(cx.waker().clone());
                    None
                }
            }
        };
        if event.is_some() {
            self.shared.room.notify_waiters();
        }
        event
    }

    fn poll_event(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<StreamEvent<S>, GraphError>>> {
        loop {
            if let Some(raw) = self.take(cx) {
                return Poll::Ready(Some(Ok(raw.typed())));
            }
            if let Some(run) = self.run.as_mut() {
                match run.as_mut().poll(cx) {
                    Poll::Ready(outcome) => {
                        self.run = None;
                        self.outcome = Some(outcome.map(|end| {
                            self.complete = end.complete;
                            end.values
                        }));
                    }
                    Poll::Pending => {
                        if self.shared.lock().events.is_empty() {
                            return Poll::Pending;
                        }
                    }
                }
                continue;
            }
            return Poll::Ready(match self.outcome.take() {
                Some(Err(e)) => {
                    self.error_taken = true;
                    Some(Err(e))
                }
                other => {
                    self.outcome = other;
                    None
                }
            });
        }
    }

    /// Once the stream has returned its last item: the final values of a run that
    /// *completed*, i.e. stopped because no task was left to run — not on an interrupt
    /// (raised by a node, or `interrupt_before`/`interrupt_after`), an error or a dropped
    /// stream. The thread's latest state ([`CompiledGraph::get_state`]) then holds exactly
    /// these values, with no next nodes, tasks or interrupts, so a caller that needs it
    /// (to record how a thread was left) need not read it back from the saver. `None`
    /// before the end and for a run that did not complete.
    ///
    /// [`CompiledGraph::get_state`]: crate::CompiledGraph::get_state
    pub fn completed(&self) -> Option<&Values> {
        match &self.outcome {
            Some(Ok(values))
                if self.complete && self.run.is_none() && self.shared.lock().events.is_empty() =>
            {
                Some(values)
            }
            _ => None,
        }
    }

    /// Reads the remaining events and returns the run's outcome: the final state values.
    /// (If the run's error was already read as the stream's last item, this is an
    /// [`GraphError::Internal`] saying so.)
    pub async fn result(mut self) -> Result<Values, GraphError> {
        while let Some(item) = std::future::poll_fn(|cx| self.poll_event(cx)).await {
            item?;
        }
        match self.outcome.take() {
            Some(outcome) => outcome,
            None if self.error_taken => Err(GraphError::Internal(
                "the run's error was already returned by the stream".into(),
            )),
            None => Err(GraphError::Internal(
                "the run ended without a result".into(),
            )),
        }
    }
}

impl<S> futures_core::Stream for RunStream<S> {
    type Item = Result<StreamEvent<S>, GraphError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().poll_event(cx)
    }
}

impl<S> Drop for RunStream<S> {
    fn drop(&mut self) {
        // Nobody reads any more: let a run waiting for room go on (and stop at its next
        // await, as its future is dropped with this stream).
        self.shared.lock().closed = true;
        self.shared.room.notify_waiters();
    }
}

#[cfg(test)]
mod value_json_tests {
    use super::*;
    use stategraph_checkpoint::{Ext, ExtCode, List};
    use stategraph_value::decode;

    /// Written straight, each value reads as the tree `value_json` builds, byte for byte.
    #[test]
    fn written_straight_as_the_tree() {
        let message = Message::human("hi").with_id("1").to_value();
        let model = Value::Ext(Ext::python(
            ExtCode::PydanticV2,
            "app",
            "Model",
            stategraph_checkpoint::value!({"x": [1, 2.5, null]}),
        ));
        let wrapped_scalar = Value::Ext(Ext::python(
            ExtCode::ConstructorSingleArg,
            "uuid",
            "UUID",
            Value::from("0123"),
        ));
        let delta = Value::Ext(Ext::delta_snapshot(&Value::from(vec![Value::from(1)])));
        let unknown = Value::Ext(Ext::from_raw(42, vec![1, 2, 3]));
        let mut odd_keys = Map::new();
        odd_keys.insert(Value::Int(1), "one");
        odd_keys.insert(Value::Bool(true), "yes");
        odd_keys.insert("s", Value::Float(f64::NAN));
        // The same key twice, as only decoded bytes can hold it: {"a": 1, "b": 0, "a": 2}.
        let twice = decode(&[0x83, 0xa1, b'a', 1, 0xa1, b'b', 0, 0xa1, b'a', 2]).unwrap();
        let mut big = Map::new();
        for i in 0..40 {
            big.insert(format!("k{i}"), i);
        }
        let big_twice = {
            let mut bytes = vec![0xde, 0, 41];
            for i in 0..41 {
                let key = format!("k{}", i % 40);
                bytes.push(0xa0 | u8::try_from(key.len()).unwrap());
                bytes.extend_from_slice(key.as_bytes());
                bytes.push(u8::try_from(i).unwrap());
            }
            decode(&bytes).unwrap()
        };
        let values = [
            Value::Null,
            Value::Bool(false),
            Value::Int(-7),
            Value::UInt(u64::MAX),
            Value::Float(0.1),
            Value::Float(1.0),
            Value::Float(f64::INFINITY),
            Value::from("quote \" and \u{1F600} and \n"),
            Value::Bytes(vec![0, 255]),
            Value::List(List::from(vec![message.clone(), model.clone()])),
            stategraph_checkpoint::value!({"nested": {"list": [[], {}], "s": "x"}}),
            message,
            model,
            wrapped_scalar,
            delta,
            unknown,
            Value::Map(odd_keys),
            twice,
            Value::Map(big),
            big_twice,
        ];
        for v in &values {
            let tree = value_json(v);
            assert_eq!(
                serde_json::to_string(&ValueJson(v)).unwrap(),
                tree.to_string(),
                "{v}"
            );
            assert_eq!(serde_json::to_value(ValueJson(v)).unwrap(), tree, "{v}");
        }
        let state: Values = values
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("key{i:02}"), v.clone()))
            .collect();
        assert_eq!(
            serde_json::to_string(&ValuesJson(&state)).unwrap(),
            values_json(&state).to_string()
        );
    }
}
