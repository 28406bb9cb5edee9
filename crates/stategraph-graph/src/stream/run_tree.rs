//! LangChain's run tree and its `astream_events` (version 2) events: the
//! [`StreamMode::Events`] mode.
//!
//! A run streamed with [`StreamMode::Events`] reports every runnable that starts, streams
//! and ends inside it, each as a [`RunEvent`] naming its run and the runs around it
//! (`parent_ids`, outermost first), as LangChain's callbacks do:
//!
//! - the graph (`on_chain_start` with its input, `on_chain_stream` with each chunk of its
//!   `updates` stream, `on_chain_end` with its final values; named `LangGraph` unless
//!   [`CompiledGraph::with_name`](crate::CompiledGraph::with_name) names it);
//! - each task (`on_chain_start` with what the node is given, `on_chain_stream` and
//!   `on_chain_end` with its update, tagged `graph:step:N`); a task that stops on an
//!   interrupt or fails has no end event, as in LangGraph;
//! - each conditional edge it takes (`on_chain_start` with the state, `on_chain_end` with
//!   where it routes; tagged `seq:step:3` for a node's first edge, `seq:step:4` for its
//!   second, …; named with [`ConditionalEdges::name`](crate::ConditionalEdges::name));
//! - whatever a node reports through its [`RunTree`]
//!   ([`NodeContext::run_tree`](crate::NodeContext::run_tree)): a chat model's
//!   `on_chat_model_start` / `_stream` / `_end`, a tool's `on_tool_start` / `_end`, or a
//!   chain of its own.
//!
//! Without the mode a [`RunTree`] is off: starting a run on it is a branch, and none of its
//! inputs or outputs is built.

use std::sync::Arc;

use serde_json::{Map as JsonMap, Value as Json, json};
use stategraph_checkpoint::{Map, Value};

use super::machinery::Emitter;
use super::{StreamEvent, StreamMode, value_json};

/// What kind of runnable a run is: the middle of its event names (`on_<kind>_start`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RunKind {
    /// A chain: a graph, a task, a conditional edge, any composition (`chain`).
    Chain,
    /// A chat model (`chat_model`).
    ChatModel,
    /// A completion model (`llm`).
    Llm,
    /// A tool (`tool`).
    Tool,
    /// A retriever (`retriever`).
    Retriever,
    /// A prompt template (`prompt`).
    Prompt,
    /// An output parser (`parser`).
    Parser,
}

impl RunKind {
    /// LangChain's name of the kind, as in its event names.
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Chain => "chain",
            RunKind::ChatModel => "chat_model",
            RunKind::Llm => "llm",
            RunKind::Tool => "tool",
            RunKind::Retriever => "retriever",
            RunKind::Prompt => "prompt",
            RunKind::Parser => "parser",
        }
    }
}

/// Where in its run an event is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RunPhase {
    /// The run starts (`data.input`).
    Start,
    /// The run produced a piece of its output (`data.chunk`).
    Stream,
    /// The run ended (`data.output`, and `data.input` but for the graph's own run).
    End,
}

impl RunPhase {
    /// The suffix of the event's name.
    pub fn as_str(self) -> &'static str {
        match self {
            RunPhase::Start => "start",
            RunPhase::Stream => "stream",
            RunPhase::End => "end",
        }
    }
}

/// One event of LangChain's `astream_events(version="v2")`.
#[derive(Clone, Debug, PartialEq)]
pub struct RunEvent {
    /// The kind of runnable.
    pub kind: RunKind,
    /// Start, stream or end.
    pub phase: RunPhase,
    /// The runnable's name (`LangGraph`, a node's, `ChatOpenAI`, a tool's, …).
    pub name: String,
    /// Its run's id.
    pub run_id: String,
    /// The ids of the runs it runs inside, outermost first.
    pub parent_ids: Vec<String>,
    /// Its tags: its place in the run around it (`graph:step:2`, `seq:step:1`), then the
    /// run config's tags.
    pub tags: Vec<String>,
    /// Its metadata: the run's, and what LangGraph adds for a task (`langgraph_node`, …)
    /// and a model (`ls_provider`, …).
    pub metadata: Map,
    /// What it was given (start and end events).
    pub input: Option<Value>,
    /// A piece of its output (stream events).
    pub chunk: Option<Value>,
    /// What it returned (end events).
    pub output: Option<Value>,
}

impl RunEvent {
    /// The event's name, e.g. `on_chat_model_stream`.
    pub fn event(&self) -> String {
        format!("on_{}_{}", self.kind.as_str(), self.phase.as_str())
    }

    /// The event as LangChain's dict: `{event, name, run_id, parent_ids, tags, metadata,
    /// data}`, `data` holding `input`, `chunk` and `output` as the phase has them.
    pub fn to_json(&self) -> Json {
        let mut data = JsonMap::new();
        for (key, v) in [
            ("chunk", &self.chunk),
            ("output", &self.output),
            ("input", &self.input),
        ] {
            if let Some(v) = v {
                data.insert(key.into(), value_json(v));
            }
        }
        json!({
            "event": self.event(),
            "name": self.name,
            "run_id": self.run_id,
            "parent_ids": self.parent_ids,
            "tags": self.tags,
            "metadata": value_json(&Value::Map(self.metadata.clone())),
            "data": data,
        })
    }
}

/// A place in the run tree where runs start: a task, or a run started inside one.
///
/// Cheap to clone. [`RunTree::off`] (and every tree of a run that does not stream
/// [`StreamMode::Events`]) does nothing.
#[derive(Clone, Debug, Default)]
pub struct RunTree(Option<Arc<Place>>);

#[derive(Debug)]
struct Place {
    emitter: Emitter,
    /// This run and the runs around it, outermost first: the `parent_ids` of its children,
    /// its own id last (none for the place a graph's run starts from).
    lineage: Vec<String>,
    /// Tags every run below carries (the run config's).
    tags: Arc<[String]>,
    /// Metadata the runs started here carry.
    metadata: Map,
    /// Metadata a runnable invoked by a node's own code adds (LangChain copies a config's
    /// plain `configurable` keys into its metadata): `checkpoint_ns`.
    configured: Arc<Map>,
}

impl RunTree {
    /// A tree that records nothing.
    pub fn off() -> Self {
        Self(None)
    }

    /// Whether runs started here are reported (the run streams [`StreamMode::Events`]).
    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// Starts a run invoked by code inside a node (a model, a tool, a chain of the node's
    /// own): its events carry this place's metadata, the node's `checkpoint_ns`, and
    /// `metadata`; `tag` is its place in the run around it (`seq:step:2`).
    pub fn child(
        &self,
        kind: RunKind,
        name: &str,
        tag: Option<&str>,
        metadata: &Map,
        input: impl FnOnce() -> Value,
    ) -> ChildRun {
        let Some(place) = &self.0 else {
            return ChildRun::off();
        };
        let mut all = place.metadata.clone();
        for (k, v) in place.configured.iter().chain(metadata.iter()) {
            all.insert(k.clone(), v.clone());
        }
        place.start(kind, name, tag, all, Arc::new(Map::new()), input())
    }

    /// Starts a chain that is a step of what runs here, as LangGraph's own steps of a node
    /// are (the node's callable, a conditional edge): its events carry this place's
    /// metadata only, and what it invokes adds the `configurable` keys.
    pub fn step(&self, name: &str, tag: Option<&str>, input: impl FnOnce() -> Value) -> ChildRun {
        let Some(place) = &self.0 else {
            return ChildRun::off();
        };
        place.start(
            RunKind::Chain,
            name,
            tag,
            place.metadata.clone(),
            Arc::clone(&place.configured),
            input(),
        )
    }

    /// The run of a graph, named `name` (with id `run_id`, if given): under `parent` (a
    /// subgraph's task) or at the root.
    pub(crate) fn graph(
        emitter: &Emitter,
        parent: &RunTree,
        (name, run_id): (&str, Option<&str>),
        tags: &[String],
        metadata: Map,
        input: Value,
    ) -> ChildRun {
        if !emitter.wants(StreamMode::Events) {
            return ChildRun::off();
        }
        let lineage = parent
            .0
            .as_ref()
            .map(|p| p.lineage.clone())
            .unwrap_or_default();
        let root = Place {
            emitter: emitter.clone(),
            lineage,
            tags: tags.into(),
            metadata: Map::new(),
            configured: Arc::new(Map::new()),
        };
        root.start_as(
            run_id.map_or_else(stategraph_checkpoint::uuid4, str::to_owned),
            (RunKind::Chain, name, None),
            metadata,
            Arc::new(Map::new()),
            input,
        )
    }

    /// The run of a task, under the graph's run: tagged `graph:step:N`, with the task's
    /// `metadata`; what its node invokes adds `configured`.
    pub(crate) fn task(
        &self,
        name: &str,
        step: i64,
        metadata: Map,
        configured: Map,
        input: impl FnOnce() -> Value,
    ) -> ChildRun {
        let Some(place) = &self.0 else {
            return ChildRun::off();
        };
        place.start(
            RunKind::Chain,
            name,
            Some(&format!("graph:step:{step}")),
            metadata,
            Arc::new(configured),
            input(),
        )
    }
}

impl Place {
    fn start(
        &self,
        kind: RunKind,
        name: &str,
        tag: Option<&str>,
        metadata: Map,
        configured: Arc<Map>,
        input: Value,
    ) -> ChildRun {
        let run_id = stategraph_checkpoint::uuid4();
        self.start_as(run_id, (kind, name, tag), metadata, configured, input)
    }

    fn start_as(
        &self,
        run_id: String,
        (kind, name, tag): (RunKind, &str, Option<&str>),
        metadata: Map,
        configured: Arc<Map>,
        input: Value,
    ) -> ChildRun {
        let tags: Vec<String> = tag
            .map(str::to_owned)
            .into_iter()
            .chain(self.tags.iter().cloned())
            .collect();
        let mut lineage = self.lineage.clone();
        lineage.push(run_id);
        // The run's place is where its children start; its id, parents and metadata are
        // read from there.
        let place = Arc::new(Place {
            emitter: self.emitter.clone(),
            lineage,
            tags: Arc::clone(&self.tags),
            metadata,
            configured,
        });
        let run = Run {
            kind,
            name: name.to_owned(),
            tags,
            input,
        };
        run.emit(&place, RunPhase::Start, None, None);
        ChildRun(Some((place, run)))
    }
}

/// What a started run's events repeat besides what its place holds.
#[derive(Debug)]
struct Run {
    kind: RunKind,
    name: String,
    tags: Vec<String>,
    input: Value,
}

impl Run {
    /// Emits an event of this run, which starts its children at `place`.
    fn emit(&self, place: &Place, phase: RunPhase, chunk: Option<Value>, out: Option<Out>) {
        let (output, input) = match out {
            Some(Out::WithInput(o)) => (Some(o), Some(self.input.clone())),
            Some(Out::Alone(o)) => (Some(o), None),
            None => (None, (phase == RunPhase::Start).then(|| self.input.clone())),
        };
        place.emitter.emit(StreamMode::Events, || {
            let (run_id, parent_ids) = match place.lineage.split_last() {
                Some((id, parents)) => (id.clone(), parents.to_vec()),
                None => (String::new(), Vec::new()),
            };
            StreamEvent::Events(RunEvent {
                kind: self.kind,
                phase,
                name: self.name.clone(),
                run_id,
                parent_ids,
                tags: self.tags.clone(),
                metadata: place.metadata.clone(),
                input,
                chunk,
                output,
            })
        });
    }
}

enum Out {
    WithInput(Value),
    Alone(Value),
}

/// A run that started: stream pieces of its output, then end it. Dropped without
/// [`end`](Self::end) (it failed, or stopped on an interrupt), it reports nothing more.
#[derive(Debug, Default)]
#[must_use = "a run reports its end only when ended"]
pub struct ChildRun(Option<(Arc<Place>, Run)>);

impl ChildRun {
    /// A run that reports nothing.
    pub fn off() -> Self {
        Self(None)
    }

    /// Whether it reports anything (the run streams [`StreamMode::Events`]).
    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// Where runs inside this one start.
    pub fn tree(&self) -> RunTree {
        RunTree(self.0.as_ref().map(|(place, _)| Arc::clone(place)))
    }

    /// Reports a piece of its output (`on_<kind>_stream`).
    pub fn stream(&self, chunk: impl FnOnce() -> Value) {
        if let Some((place, run)) = &self.0 {
            run.emit(place, RunPhase::Stream, Some(chunk()), None);
        }
    }

    /// Reports its end with what it returned (`on_<kind>_end`, with its input too).
    pub fn end(self, output: impl FnOnce() -> Value) {
        self.finish(|| Out::WithInput(output()));
    }

    /// Reports the end of a graph's run: its output alone, as LangGraph's.
    pub(crate) fn end_graph(self, output: impl FnOnce() -> Value) {
        self.finish(|| Out::Alone(output()));
    }

    fn finish(self, out: impl FnOnce() -> Out) {
        if let Some((place, run)) = &self.0 {
            run.emit(place, RunPhase::End, None, Some(out()));
        }
    }
}

/// Where a conditional edge routed (`names`: the node it named, or `None` for a `Send`,
/// in order; `writes`: what that wrote), as its run's output: a node's name, or a list of
/// names and `Send`s when it routed to several or sent.
pub(crate) fn routes_value(names: Vec<Option<String>>, writes: &[(String, Value)]) -> Value {
    let mut sends = writes
        .iter()
        .filter(|(c, _)| c == stategraph_checkpoint::channels::TASKS)
        .filter_map(|(_, v)| crate::node::parse_send(v))
        .map(|(node, arg)| Value::Map(Map::from_iter([("node", Value::from(node)), ("arg", arg)])));
    let mut all: Vec<Value> = names
        .into_iter()
        .map(|n| n.map_or_else(|| sends.next().unwrap_or(Value::Null), Value::from))
        .collect();
    match all.len() {
        1 if matches!(all.first(), Some(Value::Str(_))) => all.pop().unwrap_or(Value::Null),
        _ => Value::List(all.into_iter().collect()),
    }
}

/// The run of a node's `k`-th conditional edge (named `name`), given the state `values`:
/// the node's step after its callable and its writer (`seq:step:{k + 3}`), as in LangGraph.
pub(crate) fn branch_run(
    runs: &RunTree,
    name: Option<&str>,
    k: usize,
    values: &crate::state::Values,
) -> ChildRun {
    if !runs.is_on() {
        return ChildRun::off();
    }
    runs.step(
        name.unwrap_or("Unnamed"),
        Some(&format!("seq:step:{}", k + 3)),
        || crate::cache::input_map(values),
    )
}

/// The nodes `routes` name, in order (`None` for a `Send`), for [`routes_value`].
pub(crate) fn route_names<U>(routes: &[crate::node::Goto<U>]) -> Vec<Option<String>> {
    routes
        .iter()
        .map(|g| match g {
            crate::node::Goto::Node(n) => Some(n.clone()),
            crate::node::Goto::Send(_) => None,
        })
        .collect()
}
