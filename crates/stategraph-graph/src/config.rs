//! Run configuration and state snapshots.

use serde_json::{Value as Json, json};
use stategraph_checkpoint::{CheckpointConfig, CheckpointId, CheckpointMetadata};

use crate::state::Values;

/// LangGraph's default recursion limit (super-steps per run): 10007 in langgraph 1.2 (it was
/// 25 in older versions).
pub const DEFAULT_RECURSION_LIMIT: usize = 10_007;

/// When a run's checkpoints are saved (LangGraph's `durability`; serialized by LangGraph's
/// names, `"sync"`, `"async"`, `"exit"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// Each checkpoint is saved before the next step starts.
    Sync,
    /// Checkpoints are saved in the background while the next step runs (in order); the run
    /// waits for them before it returns. LangGraph's default.
    #[default]
    Async,
    /// Only the final checkpoint is saved, when the run ends (plus the last step's writes if
    /// it stopped on an error or an interrupt). Cheapest; a crash loses the whole run.
    Exit,
}

impl Durability {
    /// LangGraph's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Sync => "sync",
            Durability::Async => "async",
            Durability::Exit => "exit",
        }
    }
}

/// A typed value handed to every node of a run (LangGraph's runtime `context`), e.g. the
/// user id and the clients a node needs. Never stored in checkpoints.
#[derive(Clone)]
pub struct Context(pub(crate) std::sync::Arc<dyn std::any::Any + Send + Sync>);

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Context(..)")
    }
}

impl PartialEq for Context {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

/// The config of one run or state query: which thread and checkpoint, plus free keys.
#[derive(Clone, Debug, PartialEq)]
pub struct RunConfig {
    /// The thread (required when a checkpointer is attached).
    pub thread_id: Option<String>,
    /// The namespace (`""` for the root graph).
    pub checkpoint_ns: String,
    /// A checkpoint to start from / read (default: the latest).
    pub checkpoint_id: Option<CheckpointId>,
    /// Other `configurable` keys, visible to nodes; str/int/float/bool ones are copied into
    /// checkpoint metadata, as LangGraph does.
    pub configurable: serde_json::Map<String, Json>,
    /// Run metadata, copied into checkpoint metadata like `configurable`.
    pub metadata: serde_json::Map<String, Json>,
    /// Keys copied as they are (any JSON value, none excluded) into the metadata of every
    /// checkpoint the run saves, as LangGraph's Agent Server's checkpointer copies the run's
    /// metadata; they never override the checkpoint's own keys (`source`, `step`, `parents`,
    /// `writes`, …). See [`RunConfig::with_checkpoint_metadata`].
    pub checkpoint_metadata: serde_json::Map<String, Json>,
    /// Maximum super-steps per run.
    pub recursion_limit: usize,
    /// The run's typed context (see [`RunConfig::with_context`]).
    pub context: Option<Context>,
    /// Overrides the graph's `interrupt_before` for this run.
    pub interrupt_before: Option<Vec<String>>,
    /// Overrides the graph's `interrupt_after` for this run.
    pub interrupt_after: Option<Vec<String>>,
    /// Wait for other runs of this graph on the same thread (in this process) to finish,
    /// instead of failing with a conflict. Runs in other processes always conflict.
    pub queue: bool,
    /// When checkpoints are saved.
    pub durability: Durability,
    /// Streams also carry the events of subgraph runs, as [`StreamEvent::Subgraph`]
    /// (LangGraph's `stream(subgraphs=True)`).
    ///
    /// [`StreamEvent::Subgraph`]: crate::StreamEvent::Subgraph
    pub subgraph_events: bool,
    /// Tags of the run: every runnable's [`RunEvent`](crate::stream::RunEvent) carries
    /// them after its own (LangChain's inheritable `tags`).
    pub tags: Vec<String>,
    /// The name of the graph's run in its [`RunEvent`](crate::stream::RunEvent)s
    /// (LangChain's `run_name`; default: the graph's
    /// [`name`](crate::CompiledGraph::name)).
    pub run_name: Option<String>,
}

impl Default for RunConfig {
    fn default() -> Self {
        Self {
            thread_id: None,
            checkpoint_ns: String::new(),
            checkpoint_id: None,
            configurable: serde_json::Map::new(),
            metadata: serde_json::Map::new(),
            checkpoint_metadata: serde_json::Map::new(),
            recursion_limit: DEFAULT_RECURSION_LIMIT,
            context: None,
            interrupt_before: None,
            interrupt_after: None,
            queue: false,
            durability: Durability::default(),
            subgraph_events: false,
            tags: Vec::new(),
            run_name: None,
        }
    }
}

/// Config keys LangGraph keeps out of checkpoint metadata and out of the metadata a task
/// reports: the checkpoint's address and the task's own fields (its `EXCLUDED_METADATA_KEYS`).
pub(crate) const EXCLUDED_METADATA: [&str; 9] = [
    "thread_id",
    "checkpoint_id",
    "checkpoint_ns",
    "checkpoint_map",
    "langgraph_step",
    "langgraph_node",
    "langgraph_triggers",
    "langgraph_path",
    "langgraph_checkpoint_ns",
];

impl RunConfig {
    /// A config for `thread_id`.
    pub fn thread(thread_id: impl Into<String>) -> Self {
        Self {
            thread_id: Some(thread_id.into()),
            ..Self::default()
        }
    }

    /// The same config with `tags` (see [`tags`](RunConfig::tags)).
    pub fn with_tags(mut self, tags: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.tags = tags.into_iter().map(Into::into).collect();
        self
    }

    /// Streams subgraph events too (see [`subgraph_events`](RunConfig::subgraph_events)).
    pub fn with_subgraph_events(mut self) -> Self {
        self.subgraph_events = true;
        self
    }

    /// Pins a checkpoint.
    pub fn with_checkpoint_id(mut self, id: impl Into<CheckpointId>) -> Self {
        self.checkpoint_id = Some(id.into());
        self
    }

    /// Adds a `configurable` key.
    pub fn with_configurable(mut self, key: impl Into<String>, value: impl Into<Json>) -> Self {
        self.configurable.insert(key.into(), value.into());
        self
    }

    /// Adds `key` to the metadata of every checkpoint the run saves, as it is: unlike
    /// [`metadata`](RunConfig::metadata) and `configurable` keys (LangGraph's
    /// `get_checkpoint_metadata`: scalars only, `thread_id` and other address keys left out),
    /// any JSON value and any key but the checkpoint's own (`source`, `step`, `parents`, …).
    ///
    /// ```
    /// use stategraph_graph::RunConfig;
    /// let config = RunConfig::thread("1").with_checkpoint_metadata("thread_id", "1");
    /// assert_eq!(config.checkpoint_metadata["thread_id"], "1");
    /// ```
    pub fn with_checkpoint_metadata(
        mut self,
        key: impl Into<String>,
        value: impl Into<Json>,
    ) -> Self {
        self.checkpoint_metadata.insert(key.into(), value.into());
        self
    }

    /// Hands `context` to every node of the run ([`NodeContext::context`]).
    ///
    /// [`NodeContext::context`]: crate::NodeContext::context
    pub fn with_context<C: std::any::Any + Send + Sync>(mut self, context: C) -> Self {
        self.context = Some(Context(std::sync::Arc::new(context)));
        self
    }

    /// Sets when checkpoints are saved.
    pub fn with_durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Sets the recursion limit.
    pub fn with_recursion_limit(mut self, limit: usize) -> Self {
        self.recursion_limit = limit;
        self
    }

    /// Overrides the graph's `interrupt_before` for this run (`"*"`: before any node; none:
    /// no breakpoint this time).
    ///
    /// ```
    /// use stategraph_graph::RunConfig;
    /// let config = RunConfig::thread("1").with_interrupt_before(["review"]);
    /// assert_eq!(config.interrupt_before, Some(vec!["review".to_owned()]));
    /// let free = RunConfig::thread("2").with_interrupt_before(Vec::<String>::new());
    /// assert_eq!(free.interrupt_before, Some(Vec::new()));
    /// ```
    pub fn with_interrupt_before<I>(mut self, nodes: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.interrupt_before = Some(nodes.into_iter().map(Into::into).collect());
        self
    }

    /// Overrides the graph's `interrupt_after` for this run (`"*"`: after any node; none: no
    /// breakpoint this time).
    pub fn with_interrupt_after<I>(mut self, nodes: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.interrupt_after = Some(nodes.into_iter().map(Into::into).collect());
        self
    }

    /// The checkpoint address this config names.
    pub(crate) fn checkpoint_config(&self, thread_id: &str) -> CheckpointConfig {
        CheckpointConfig {
            thread_id: thread_id.to_owned(),
            checkpoint_ns: self.checkpoint_ns.clone(),
            checkpoint_id: self.checkpoint_id.clone(),
        }
    }

    /// LangGraph's `get_checkpoint_metadata`: config keys merged into checkpoint metadata.
    pub(crate) fn merge_into_metadata(&self, metadata: &mut CheckpointMetadata) {
        let taken = ["source", "step", "parents"];
        for (k, v) in &self.checkpoint_metadata {
            if !taken.contains(&k.as_str()) && k != "writes" && !metadata.extra.contains_key(k) {
                metadata.extra.insert(k.clone(), v.clone());
            }
        }
        for (k, v) in self.metadata.iter().chain(self.configurable.iter()) {
            if taken.contains(&k.as_str())
                || metadata.extra.contains_key(k)
                || k.starts_with("__")
                || EXCLUDED_METADATA.contains(&k.as_str())
            {
                continue;
            }
            let v = match v {
                Json::String(s) => Json::String(s.replace('\u{0}', "")),
                Json::Number(_) | Json::Bool(_) => v.clone(),
                _ => continue,
            };
            metadata.extra.insert(k.clone(), v);
        }
    }
}

/// Which checkpoints [`get_state_history`](crate::CompiledGraph::get_state_history) returns,
/// besides the thread and namespace its [`RunConfig`] names. The default: all of them.
///
/// ```
/// use stategraph_graph::HistoryOptions;
/// let options = HistoryOptions::new().filter("source", "loop").before("1ef").limit(5);
/// assert_eq!(options.limit, Some(5));
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HistoryOptions {
    /// Metadata keys that must all be equal (a `null` also matches a missing key).
    pub filter: serde_json::Map<String, Json>,
    /// Only checkpoints older than this one (by id).
    pub before: Option<CheckpointId>,
    /// At most this many, newest first.
    pub limit: Option<usize>,
}

impl HistoryOptions {
    /// Every checkpoint.
    pub fn new() -> Self {
        Self::default()
    }

    /// Only checkpoints whose metadata `key` equals `value` (LangGraph's `filter={key: value}`;
    /// several keys must all match).
    pub fn filter(mut self, key: impl Into<String>, value: impl Into<Json>) -> Self {
        self.filter.insert(key.into(), value.into());
        self
    }

    /// Only checkpoints older than `checkpoint_id`.
    pub fn before(mut self, checkpoint_id: impl Into<CheckpointId>) -> Self {
        self.before = Some(checkpoint_id.into());
        self
    }

    /// At most `n` checkpoints, newest first.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }
}

/// A task of a snapshot: a node scheduled to run from that checkpoint.
#[derive(Clone, Debug, PartialEq)]
pub struct PregelTask {
    /// Task id.
    pub id: String,
    /// Node name.
    pub name: String,
    /// Task path, e.g. `("__pregel_pull", "node_a")` (a pull task's is shared with every
    /// other task of its node).
    pub path: std::sync::Arc<[String]>,
    /// The error the task failed with, if it did.
    pub error: Option<String>,
    /// The task's writes, mapped to state keys, if it finished.
    pub result: Option<Values>,
    /// For a subgraph node, the subgraph's own state (with
    /// [`get_state_with_subgraphs`](crate::CompiledGraph::get_state_with_subgraphs)).
    pub state: Option<Box<StateSnapshot>>,
    /// Interrupts the task raised and that are waiting for an answer.
    pub interrupts: Vec<crate::interrupt::Interrupt>,
}

/// The state of a thread at one checkpoint (LangGraph's `StateSnapshot`).
#[derive(Clone, Debug, PartialEq)]
pub struct StateSnapshot {
    /// State values.
    pub values: Values,
    /// Nodes that will run next.
    pub next: Vec<String>,
    /// The checkpoint's address.
    pub config: Option<CheckpointConfig>,
    /// Its metadata (shared with the checkpoint's tuple: reading a history copies no
    /// metadata).
    pub metadata: Option<std::sync::Arc<CheckpointMetadata>>,
    /// When it was written.
    pub created_at: Option<String>,
    /// Its parent's address.
    pub parent_config: Option<CheckpointConfig>,
    /// The tasks of the next step.
    pub tasks: Vec<PregelTask>,
    /// Every pending interrupt of those tasks.
    pub interrupts: Vec<crate::interrupt::Interrupt>,
}

impl StateSnapshot {
    /// The values as the graph's typed state (what a node would read at this checkpoint).
    ///
    /// # Errors
    /// [`GraphError::Decode`](crate::GraphError::Decode) naming the key whose value does not
    /// fit its field.
    pub fn state<S: crate::state::State>(&self) -> Result<S, crate::error::GraphError> {
        S::from_values(&self.values)
    }

    /// LangGraph's JSON shape: `values, next, config, metadata, created_at, parent_config,
    /// tasks[{id, name, error, interrupts}]`.
    pub fn to_json(&self) -> Json {
        json!({
            "values": self.values.iter()
                .map(|(k, v)| (k.clone(), v.to_json()))
                .collect::<serde_json::Map<_, _>>(),
            "next": self.next,
            "config": self.config.as_ref().map(CheckpointConfig::to_json),
            "metadata": self.metadata.as_deref().map(CheckpointMetadata::to_json),
            "created_at": self.created_at,
            "parent_config": self.parent_config.as_ref().map(CheckpointConfig::to_json),
            "tasks": self.tasks.iter().map(|t| {
                let mut task = json!({
                    "id": t.id,
                    "name": t.name,
                    "error": t.error,
                    "interrupts": t.interrupts.iter().map(crate::interrupt::Interrupt::to_json).collect::<Vec<_>>(),
                });
                if let (Some(state), Some(task)) = (&t.state, task.as_object_mut()) {
                    task.insert("state".to_owned(), state.to_json());
                }
                task
            }).collect::<Vec<_>>(),
            "interrupts": self.interrupts.iter().map(crate::interrupt::Interrupt::to_json).collect::<Vec<_>>(),
        })
    }
}
