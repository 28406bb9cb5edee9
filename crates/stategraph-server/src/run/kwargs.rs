//! A run's arguments as the run queue keeps them (LangGraph's run `kwargs`), typed: what the
//! request asked, resolved against its assistant and thread; the executor runs from them
//! alone, in whichever process claims the run.

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use stategraph_graph::{Durability, RunConfig, StreamMode};

use crate::error::ApiError;
use crate::graph::RunStart;
use crate::records::Object;
use crate::request::{LANGGRAPH_VERSION, node_list, run_command, stream_modes};

/// A run's `kwargs`, with LangGraph's field names and order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct RunKwargs {
    /// New input (a graph's map of state keys, an entrypoint's argument), or `null`.
    pub(crate) input: Json,
    /// A command (`resume`, `update`, `goto`), or `null`.
    pub(crate) command: Json,
    /// The assistant's config, the request's, the run's `configurable` and `metadata`.
    pub(crate) config: Object,
    /// The assistant's context and the request's.
    pub(crate) context: Object,
    /// The stream modes as the request named them (`values` by default).
    pub(crate) stream_mode: Vec<String>,
    pub(crate) interrupt_before: Json,
    pub(crate) interrupt_after: Json,
    pub(crate) webhook: Json,
    pub(crate) feedback_keys: Json,
    /// Whether the run's thread lives only as long as the run.
    pub(crate) temporary: bool,
    /// Whether subgraphs' events are streamed.
    pub(crate) subgraphs: bool,
    /// Whether its events are kept for clients that reconnect (`stream_resumable`).
    pub(crate) resumable: bool,
    pub(crate) checkpoint_during: bool,
    /// `sync`, `async` or `exit`.
    pub(crate) durability: String,
}

impl RunKwargs {
    /// As the queue keeps them.
    pub(crate) fn to_object(&self) -> Result<Object, ApiError> {
        match serde_json::to_value(self) {
            Ok(Json::Object(o)) => Ok(o),
            other => Err(ApiError::internal(format!(
                "a run's arguments did not serialize as an object: {other:?}"
            ))),
        }
    }

    /// As the queue kept them; `run_id` names the run in the error of ones that do not fit.
    pub(crate) fn from_object(run_id: &str, kwargs: &Object) -> Result<Self, ApiError> {
        serde_json::from_value(Json::Object(kwargs.clone())).map_err(|e| {
            ApiError::invalid(format!(
                "the queued arguments of run {run_id} do not fit: {e}"
            ))
        })
    }

    /// `config.configurable`.
    pub(crate) fn configurable(&self) -> Object {
        self.object_of("configurable")
    }

    /// `config.metadata`.
    pub(crate) fn metadata(&self) -> Object {
        self.object_of("metadata")
    }

    fn object_of(&self, key: &str) -> Object {
        self.config
            .get(key)
            .and_then(Json::as_object)
            .cloned()
            .unwrap_or_default()
    }

    /// The graph it runs.
    pub(crate) fn graph_id(&self) -> Option<String> {
        self.configurable()
            .get("graph_id")
            .and_then(Json::as_str)
            .map(str::to_owned)
    }

    /// How it starts: a command, new input, or on from the checkpoint.
    pub(crate) fn start(&self) -> Result<RunStart, ApiError> {
        if !self.command.is_null() {
            return Ok(RunStart::Command(run_command(&self.command)?));
        }
        Ok(match self.new_input() {
            Some(v) => RunStart::Input(v.clone()),
            None => RunStart::Continue,
        })
    }

    /// The new input it starts with ([`RunStart::Input`]), read in place: none when it
    /// starts with a command or goes on from the checkpoint.
    pub(crate) fn new_input(&self) -> Option<&Json> {
        (self.command.is_null() && !self.input.is_null()).then_some(&self.input)
    }

    /// The engine's stream modes and the names as given.
    pub(crate) fn modes(&self) -> Result<(Vec<StreamMode>, Vec<String>), ApiError> {
        stream_modes(Some(&Json::from(self.stream_mode.clone())))
    }

    /// Records its `attempt`-th start in `config.metadata`, as LangGraph's server does: the
    /// attempt and the version the engine runs with.
    pub(crate) fn started(&mut self, attempt: u32) {
        let mut metadata = self.metadata();
        metadata.insert("run_attempt".into(), Json::from(attempt));
        metadata.insert("langgraph_version".into(), Json::from(LANGGRAPH_VERSION));
        self.config
            .insert("metadata".into(), Json::Object(metadata));
    }

    /// The engine's config of the run on `thread_id` (after [`started`](Self::started)).
    pub(crate) fn engine_config(&self, thread_id: &str) -> Result<RunConfig, ApiError> {
        let mut config = RunConfig::thread(thread_id);
        for (k, v) in self.configurable() {
            match k.as_str() {
                "thread_id" => {}
                "checkpoint_id" => {
                    if let Some(id) = v.as_str() {
                        config = config.with_checkpoint_id(id);
                    }
                }
                "checkpoint_ns" => {
                    config.checkpoint_ns = v.as_str().unwrap_or_default().to_owned();
                }
                _ => config = config.with_configurable(k, v),
            }
        }
        if let Some(limit) = self.config.get("recursion_limit").filter(|l| !l.is_null()) {
            let limit = crate::input::integer_field(limit, "config.recursion_limit", 1)?;
            config = config.with_recursion_limit(limit);
        }
        config.interrupt_before = node_list(Some(&self.interrupt_before), "interrupt_before")?;
        config.interrupt_after = node_list(Some(&self.interrupt_after), "interrupt_after")?;
        let metadata = self.metadata();
        config.metadata.extend(metadata.clone());
        // As the reference's checkpointer: the run's metadata goes into every checkpoint's
        // metadata as it is (objects too), with the `thread_id` LangGraph propagates into it.
        config.checkpoint_metadata = metadata;
        config
            .checkpoint_metadata
            .insert("thread_id".into(), Json::from(thread_id));
        config.subgraph_events = self.subgraphs;
        // The `events` mode: the run's tags, and the graph's run named after the graph.
        config.tags = match self.config.get("tags") {
            Some(Json::Array(tags)) => tags
                .iter()
                .filter_map(|t| t.as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        };
        config.run_name = self
            .configurable()
            .get("graph_id")
            .and_then(Json::as_str)
            .map(str::to_owned);
        config.durability = match self.durability.as_str() {
            "" => Durability::Async,
            name => serde_json::from_value(Json::from(name)).map_err(|_| {
                ApiError::invalid(format!("durability `{name}` is not sync, async or exit"))
            })?,
        };
        if !self.context.is_empty() {
            config = config.with_context(Json::Object(self.context.clone()));
        }
        config.queue = true;
        Ok(config)
    }
}
