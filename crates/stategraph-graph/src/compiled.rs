//! `CompiledGraph`: a validated graph, ready to run, with its checkpointer.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;

use crate::trace::{self, Op};
use stategraph_checkpoint::cache::Cache;
use stategraph_checkpoint::{CheckpointSaver, CheckpointTuple, NULL_TASK_ID, Value, channels};
use stategraph_store::Store;

use crate::channel::ChannelSpec;
use crate::config::{HistoryOptions, PregelTask, RunConfig, StateSnapshot};
use crate::error::{GraphError, NodeError};
use crate::graph::{Branch, END, START, branch_channel};
use crate::node::{Goto, NodeFn, send_value};
use crate::state::{Schema, State, Values};
use crate::step::{
    self, Channels, INPUT, NodeTriggers, Stored, Task, apply_writes, channels_from_checkpoint,
    prepare_next_tasks,
};

mod nested;
mod state;
mod untracked;

pub use nested::SubgraphPersistence;

/// A node of the compiled graph: a user node, or the built-in `__start__` (`run: None`).
pub(crate) struct PregelNode<S: State> {
    pub(crate) name: String,
    /// Its trigger channels, sorted when the graph compiles; every pull task of the node
    /// shares them.
    pub(crate) triggers: Arc<[String]>,
    /// The path of its pull tasks, `(__pregel_pull, name)`, shared by all of them.
    pub(crate) pull_path: Arc<[String]>,
    pub(crate) run: Option<NodeFn<S>>,
    /// Set for subgraph nodes: reads the subgraph's state for
    /// `get_state_with_subgraphs`.
    pub(crate) subgraph: Option<Arc<dyn SubgraphView>>,
    /// How the node is tried and cached: its retry, timeout and cache policies.
    pub(crate) attempts: crate::attempts::Attempts,
    /// The Rust path of its function's type (its identifier in cache entries).
    pub(crate) function: &'static str,
    /// An entrypoint: reads what the run wrote to `__start__` (and `__previous__`), and
    /// returns one value (its `__end__` write).
    pub(crate) entrypoint: bool,
    /// The error handler node its failures go to, if any.
    pub(crate) error_handler: Option<String>,
}

/// Reads a subgraph's state, whatever its state type.
pub(crate) trait SubgraphView: Send + Sync {
    fn state<'a>(
        &'a self,
        saver: Arc<dyn CheckpointSaver>,
        config: RunConfig,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<StateSnapshot, GraphError>> + Send + 'a>,
    >;

    /// The subgraph's state keys.
    fn keys(&self) -> Vec<String>;

    /// The subgraph's drawing.
    fn drawing(&self, xray: crate::topology::Xray) -> crate::topology::Topology;
}

impl<S: State> SubgraphView for CompiledGraph<S> {
    fn state<'a>(
        &'a self,
        saver: Arc<dyn CheckpointSaver>,
        config: RunConfig,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<StateSnapshot, GraphError>> + Send + 'a>,
    > {
        Box::pin(async move {
            // A per-thread subgraph's state is where it stores it, not under the task.
            let mut config = config;
            config.checkpoint_ns = self.nested_ns(&config.checkpoint_ns);
            self.state_with(&saver, &config, true).await
        })
    }

    fn keys(&self) -> Vec<String> {
        self.state_keys()
    }

    fn drawing(&self, xray: crate::topology::Xray) -> crate::topology::Topology {
        CompiledGraph::drawing(self, xray)
    }
}

/// What a node writes besides its state update: edge triggers, join marks, branches.
pub(crate) struct Edges<S: State> {
    /// `(channel, value)`: `None` writes a null (`branch:to:X`), `Some(name)` a join mark.
    pub(crate) writes: Vec<(String, Option<String>)>,
    pub(crate) branches: Vec<Branch<S>>,
}

impl<S: State> Default for Edges<S> {
    fn default() -> Self {
        Self {
            writes: Vec::new(),
            branches: Vec::new(),
        }
    }
}

/// A compiled graph: run it with [`invoke`](Self::invoke), inspect and edit its threads with
/// [`get_state`](Self::get_state), [`get_state_history`](Self::get_state_history) and
/// [`update_state`](Self::update_state).
///
/// Cloning is cheap (the compiled nodes and edges are shared) and gives the same graph: clones
/// share its per-thread run locks and state cache, so a clone can be moved into a spawned task
/// or a server's handler.
pub struct CompiledGraph<S: State> {
    pub(crate) schema: Arc<Schema>,
    pub(crate) channel_specs: Arc<Vec<(Arc<str>, ChannelSpec)>>,
    /// The untracked channels (never saved), found once for `untracked_writes`.
    pub(crate) untracked: Arc<[Arc<str>]>,
    pub(crate) nodes: Arc<Vec<PregelNode<S>>>,
    pub(crate) edges: Arc<HashMap<String, Edges<S>>>,
    pub(crate) checkpointer: Option<Arc<dyn CheckpointSaver>>,
    pub(crate) store: Option<Arc<dyn Store>>,
    /// Where nodes with a cache policy keep their results.
    pub(crate) cache: Option<Arc<dyn Cache>>,
    /// The graph's input and output schemas, when not its whole state.
    pub(crate) io: Arc<crate::graph::InputOutput>,
    pub(crate) trigger_channels: Arc<BTreeSet<String>>,
    pub(crate) trigger_to_nodes: Arc<HashMap<String, Vec<String>>>,
    /// Node name → its index in `nodes`.
    pub(crate) node_index: Arc<HashMap<String, usize>>,
    /// Stop before these nodes run (`*`: any node).
    pub(crate) interrupt_before: Arc<[String]>,
    /// Stop after these nodes ran (`*`: any node).
    pub(crate) interrupt_after: Arc<[String]>,
    /// Per-thread locks for runs that asked to queue.
    pub(crate) run_locks: RunLocks,
    /// What this graph's runs ended on, per thread (see [`with_state_cache`](Self::with_state_cache)).
    pub(crate) head: Arc<crate::head::HeadCache<S>>,
    /// How it keeps checkpoints when run inside another graph's task.
    pub(crate) persistence: SubgraphPersistence,
    /// What drawing it needs beyond its nodes and edges.
    pub(crate) drawn: Arc<crate::topology::Declared>,
    /// Its name in its runs' events (`None`: `LangGraph`).
    pub(crate) name: Option<Arc<str>>,
}

/// Threads whose last checkpoint a graph remembers by default.
pub const DEFAULT_STATE_CACHE: usize = 64;

/// thread id → the lock queued runs on that thread take.
pub(crate) type RunLocks = Arc<std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>;

impl<S: State> Clone for CompiledGraph<S> {
    fn clone(&self) -> Self {
        Self {
            schema: Arc::clone(&self.schema),
            channel_specs: Arc::clone(&self.channel_specs),
            untracked: Arc::clone(&self.untracked),
            nodes: Arc::clone(&self.nodes),
            edges: Arc::clone(&self.edges),
            checkpointer: self.checkpointer.clone(),
            store: self.store.clone(),
            cache: self.cache.clone(),
            io: Arc::clone(&self.io),
            trigger_channels: Arc::clone(&self.trigger_channels),
            trigger_to_nodes: Arc::clone(&self.trigger_to_nodes),
            node_index: Arc::clone(&self.node_index),
            interrupt_before: Arc::clone(&self.interrupt_before),
            interrupt_after: Arc::clone(&self.interrupt_after),
            run_locks: Arc::clone(&self.run_locks),
            head: Arc::clone(&self.head),
            persistence: self.persistence,
            drawn: Arc::clone(&self.drawn),
            name: self.name.clone(),
        }
    }
}

impl<S: State> fmt::Debug for CompiledGraph<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledGraph")
            .field(
                "nodes",
                &self.nodes.iter().map(|n| &n.name).collect::<Vec<_>>(),
            )
            .field("checkpointer", &self.checkpointer)
            .finish_non_exhaustive()
    }
}

impl<S: State> CompiledGraph<S> {
    pub(crate) fn new(
        schema: Schema,
        channel_specs: Vec<(String, ChannelSpec)>,
        mut nodes: Vec<PregelNode<S>>,
        edges: HashMap<String, Edges<S>>,
    ) -> Self {
        // Sorted once here: a task's triggers are its node's, in order (its id hashes them).
        for n in &mut nodes {
            if !n.triggers.is_sorted() {
                let mut sorted = n.triggers.to_vec();
                sorted.sort();
                n.triggers = sorted.into();
            }
        }
        let triggers: Vec<NodeTriggers<'_>> = nodes
            .iter()
            .map(|n| NodeTriggers {
                name: &n.name,
                triggers: &n.triggers,
                pull_path: &n.pull_path,
            })
            .collect();
        let trigger_to_nodes = step::trigger_map(&triggers);
        let trigger_channels = trigger_to_nodes.keys().cloned().collect();
        let node_index = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.clone(), i))
            .collect();
        // Sorted by name: restoring channels appends in order, and stored reads search.
        let mut specs: Vec<(Arc<str>, ChannelSpec)> = channel_specs
            .into_iter()
            .map(|(k, spec)| (Arc::from(k), spec))
            .collect();
        specs.sort_by(|a, b| a.0.cmp(&b.0));
        let untracked = untracked::channels(&specs);
        Self {
            schema: Arc::new(schema),
            channel_specs: Arc::new(specs),
            untracked,
            nodes: Arc::new(nodes),
            edges: Arc::new(edges),
            checkpointer: None,
            store: None,
            cache: None,
            io: Arc::default(),
            trigger_channels: Arc::new(trigger_channels),
            trigger_to_nodes: Arc::new(trigger_to_nodes),
            node_index: Arc::new(node_index),
            interrupt_before: Arc::from([]),
            interrupt_after: Arc::from([]),
            run_locks: Arc::default(),
            head: Arc::new(crate::head::HeadCache::new(DEFAULT_STATE_CACHE)),
            persistence: SubgraphPersistence::default(),
            drawn: Arc::default(),
            name: None,
        }
    }

    /// The same graph, named `name` in its runs' events (LangGraph's
    /// `compile(name=...)`; the default is `LangGraph`).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(Arc::from(name.into()));
        self
    }

    /// Its name in its runs' events: `LangGraph` unless [`with_name`](Self::with_name)
    /// named it.
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("LangGraph")
    }

    /// The lock runs on `thread` take when they ask to queue.
    pub(crate) fn run_lock(&self, thread: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.run_locks.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(locks.entry(thread.to_owned()).or_default())
    }

    /// Waits until the queued runs of this graph on `thread_id` (`RunConfig::queue`) have
    /// committed what they saved: a run that was dropped (cancelled) keeps its background
    /// writer, and the thread's turn, until its queued checkpoints are written. Call it before
    /// deleting what such a run wrote.
    pub async fn wait_for_saves(&self, thread_id: &str) {
        drop(self.run_lock(thread_id).lock().await);
    }

    /// Stops every run before any of `nodes` runs (`"*"`: before any node), leaving the
    /// thread at the checkpoint where they are next; [`continue_run`](Self::continue_run) runs
    /// them.
    pub fn with_interrupt_before<I, T>(mut self, nodes: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        self.interrupt_before = nodes.into_iter().map(Into::into).collect();
        self
    }

    /// Stops every run after any of `nodes` ran (`"*"`: after any node), once the step's
    /// checkpoint is saved.
    pub fn with_interrupt_after<I, T>(mut self, nodes: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        self.interrupt_after = nodes.into_iter().map(Into::into).collect();
        self
    }

    /// How many threads this graph remembers the last checkpoint of (default
    /// [`DEFAULT_STATE_CACHE`]; 0 turns it off). A run that continues a thread from the
    /// checkpoint this graph's previous run on it ended on — the next turn of a conversation —
    /// then takes from memory what reading would rebuild: the values of delta keys (otherwise
    /// rebuilt from the thread's history) and the typed state the last node saw (from which
    /// only what changed is converted). Entries are tied to one checkpoint id, so a thread
    /// moved on by anyone else is read from the database as usual; nothing is served that
    /// the checkpointer would not return.
    pub fn with_state_cache(mut self, threads: usize) -> Self {
        self.head = Arc::new(crate::head::HeadCache::new(threads));
        self
    }

    /// Attaches a checkpointer: every super-step of every run is then saved to its thread.
    pub fn with_checkpointer(mut self, saver: Arc<dyn CheckpointSaver>) -> Self {
        self.checkpointer = Some(saver);
        // What the cache remembers came from the previous checkpointer.
        self.head = Arc::new(crate::head::HeadCache::new(self.head.capacity()));
        self
    }

    /// Attaches a cross-thread memory store (LangGraph's `compile(store=…)`): every node sees
    /// it through [`NodeContext::store`](crate::NodeContext::store), in every thread, next to
    /// the run's typed context (e.g. the `user_id` whose memories to read). Each call is a
    /// `tracing` span (`store.get`, `store.put`, `store.delete`, `store.list_namespaces`,
    /// `store.batch`, and `store.search` with OpenInference's `RETRIEVER` kind; namespace,
    /// op count and results found, never keys, values or queries).
    pub fn with_store(mut self, store: Arc<dyn Store>) -> Self {
        // Every call its nodes make is a span (`store.get`, `store.search`, …).
        self.store = Some(Arc::new(crate::trace_store::TracedStore::new(store)));
        self
    }

    /// Attaches a node cache (LangGraph's `compile(cache=…)`): nodes with a cache policy
    /// ([`StateGraph::set_cache`](crate::StateGraph::set_cache)) take their writes from it
    /// when their input was seen before, in any thread. [`InMemoryCache`] lives with the
    /// process; `stategraph-sqlite` and `stategraph-redis` have caches that outlive it and that
    /// Python LangGraph shares.
    ///
    /// [`InMemoryCache`]: stategraph_checkpoint::cache::InMemoryCache
    pub fn with_cache(mut self, cache: Arc<dyn Cache>) -> Self {
        self.cache = Some(cache);
        self
    }

    /// The graph's input schema (LangGraph's `input_schema`), if it narrows the state.
    pub fn input_schema(&self) -> Option<&crate::graph::IoSchema> {
        self.io.input.as_ref()
    }

    /// The graph's output schema (LangGraph's `output_schema`), if it narrows the state.
    pub fn output_schema(&self) -> Option<&crate::graph::IoSchema> {
        self.io.output.as_ref()
    }

    /// The node cache, if one is attached.
    pub fn cache(&self) -> Option<&Arc<dyn Cache>> {
        self.cache.as_ref()
    }

    /// Deletes the cached results of `nodes` (all nodes when `None`), as LangGraph's
    /// `clear_cache` does: every entry of each node's namespace, whatever its input.
    ///
    /// # Errors
    /// [`GraphError::InvalidGraph`] without a cache; the cache's own error otherwise.
    pub async fn clear_cache(&self, nodes: Option<&[&str]>) -> Result<(), GraphError> {
        let Some(cache) = &self.cache else {
            return Err(GraphError::InvalidGraph(
                "no cache is set for this graph, so there is no cache to clear".to_owned(),
            ));
        };
        let namespaces: Vec<Vec<String>> = self
            .nodes
            .iter()
            .filter(|n| n.run.is_some())
            .filter(|n| nodes.is_none_or(|names| names.contains(&n.name.as_str())))
            .map(|n| {
                let policy = n.attempts.cache.clone().unwrap_or_default();
                policy.namespace(n.function, Some(&n.name))
            })
            .collect();
        cache.clear(Some(&namespaces)).await?;
        Ok(())
    }

    /// The store, if one is attached.
    pub fn store(&self) -> Option<&Arc<dyn Store>> {
        self.store.as_ref()
    }

    /// The checkpointer, if one is attached.
    pub fn checkpointer(&self) -> Option<&Arc<dyn CheckpointSaver>> {
        self.checkpointer.as_ref()
    }

    pub(crate) fn node_triggers(&self) -> Vec<NodeTriggers<'_>> {
        self.nodes
            .iter()
            .map(|n| NodeTriggers {
                name: &n.name,
                triggers: &n.triggers,
                pull_path: &n.pull_path,
            })
            .collect()
    }

    pub(crate) fn saver(&self) -> Result<&Arc<dyn CheckpointSaver>, GraphError> {
        self.checkpointer.as_ref().ok_or(GraphError::NoCheckpointer)
    }

    pub(crate) fn thread_of<'a>(&self, config: &'a RunConfig) -> Result<&'a str, GraphError> {
        config
            .thread_id
            .as_deref()
            .ok_or(GraphError::MissingThreadId)
    }

    /// Whether node `name` is an entrypoint.
    pub(crate) fn is_entrypoint(&self, name: &str) -> bool {
        self.node_index
            .get(name)
            .and_then(|&i| self.nodes.get(i))
            .is_some_and(|n| n.entrypoint)
    }

    /// The one channel whose value is the graph's output as-is, when it has one: `__end__`
    /// for an entrypoint ([`crate::functional`]), whose state, `values` stream and output
    /// are the value it returned (LangGraph's `stream_channels_asis`); `None` for a graph,
    /// whose output is the map of its state keys.
    pub fn output_channel(&self) -> Option<&'static str> {
        self.nodes
            .iter()
            .any(|n| n.entrypoint)
            .then_some(crate::graph::END)
    }

    /// The state keys' current values.
    /// Whether `key` is part of the graph's output (its output schema, else its state): the
    /// keys `invoke_values` returns. (Streams show the whole state, as LangGraph's do.)
    pub(crate) fn is_output(&self, key: &str) -> bool {
        match &self.io.output {
            Some(o) => o.keys.iter().any(|k| k == key),
            None => self.schema.contains(key),
        }
    }

    /// Whether the graph's input takes `key` (its input schema, else its state).
    pub(crate) fn is_input(&self, key: &str) -> bool {
        match &self.io.input {
            Some(i) => i.keys.iter().any(|k| k == key),
            None => true,
        }
    }

    pub(crate) fn read_values(&self, channels: &impl step::ChannelRead) -> Values {
        // Inserted one by one: collecting would buffer and sort them first.
        let mut values = Values::new();
        for k in self.schema.keys() {
            if let Some(v) = channels.value(k) {
                values.insert(k.to_owned(), v);
            }
        }
        values
    }

    /// The writes a node produces besides its update: edge triggers and joins, then
    /// branches evaluated on the state with `own` (its state writes) applied.
    pub(crate) fn edge_writes(
        &self,
        node: &str,
        channels: &Channels,
        own: &[(String, Value)],
        step_and_stop: Option<(i64, i64)>,
        runs: &crate::stream::RunTree,
    ) -> Result<Vec<(String, Value)>, NodeError> {
        let Some(edges) = self.edges.get(node) else {
            return Ok(Vec::new());
        };
        let mut out: Vec<(String, Value)> = edges
            .writes
            .iter()
            .map(|(ch, v)| (ch.clone(), v.clone().map_or(Value::Null, Value::from)))
            .collect();
        if edges.branches.is_empty() {
            return Ok(out);
        }
        // A fresh view: this node's own writes applied to copies of the channels it wrote.
        let mut fresh = channels.clone();
        let mut grouped: Vec<(&str, Vec<Value>)> = Vec::new();
        for (ch, v) in own {
            match grouped.iter_mut().find(|(c, _)| c == ch) {
                Some((_, vals)) => vals.push(v.clone()),
                None => grouped.push((ch, vec![v.clone()])),
            }
        }
        for (ch, vals) in grouped {
            if let Some(c) = fresh.get_mut(ch) {
                c.update(ch, vals).map_err(NodeError::from)?;
            }
        }
        let mut values = self.read_values(&fresh);
        if let Some((step, stop)) = step_and_stop {
            self.schema.add_managed(&mut values, step, stop);
        }
        let state = S::from_values(&values).map_err(NodeError::from)?;
        for (k, branch) in edges.branches.iter().enumerate() {
            let run = crate::stream::run_tree::branch_run(runs, branch.name.as_deref(), k, &values);
            let routes = (branch.path)(&state)?;
            // Only when reported (nothing is built otherwise).
            let names = run
                .is_on()
                .then(|| crate::stream::run_tree::route_names(&routes));
            let writes = self.goto_writes(node, routes, branch.path_map.as_ref())?;
            run.end(|| crate::stream::run_tree::routes_value(names.unwrap_or_default(), &writes));
            out.extend(writes);
        }
        Ok(out)
    }

    /// Writes for routes: `branch:to:X` for a node (through `path_map` if given; nothing for
    /// `END`), a `__pregel_tasks` packet for a `Send`.
    pub(crate) fn goto_writes(
        &self,
        from: &str,
        routes: Vec<Goto<S::Update>>,
        path_map: Option<&BTreeMap<String, String>>,
    ) -> Result<Vec<(String, Value)>, NodeError> {
        let mut out = Vec::new();
        for route in routes {
            match route {
                Goto::Node(key) => {
                    let dest = match path_map {
                        Some(m) => m.get(&key).cloned().ok_or_else(|| {
                            NodeError::new(format!(
                                "conditional edge from `{from}` returned `{key}`, which is not in \
                                 its path map"
                            ))
                        })?,
                        None => key,
                    };
                    if dest == END {
                        continue;
                    }
                    self.check_node(from, &dest)?;
                    out.push((branch_channel(&dest), Value::Null));
                }
                Goto::Send(send) => {
                    self.check_node(from, &send.node)?;
                    let writes = S::into_writes(send.arg).map_err(NodeError::from)?;
                    let arg = match <[_; 1]>::try_from(writes) {
                        Ok([(key, arg)]) if key == crate::node::SEND_ARG => arg,
                        Ok(one) => Value::Map(one.into_iter().collect()),
                        Err(writes) => Value::Map(writes.into_iter().collect()),
                    };
                    out.push((channels::TASKS.to_owned(), send_value(&send.node, arg)));
                }
            }
        }
        Ok(out)
    }

    /// Whether `name` is a node of this graph.
    pub(crate) fn has_node(&self, name: &str) -> bool {
        self.nodes.iter().any(|n| n.name == name)
    }

    /// The names of the graph's nodes, in the order they were added.
    pub(crate) fn node_names(&self) -> Vec<&str> {
        self.nodes.iter().map(|n| n.name.as_str()).collect()
    }

    fn check_node(&self, from: &str, dest: &str) -> Result<(), NodeError> {
        if dest == START || !self.has_node(dest) {
            return Err(NodeError::new(format!(
                "`{from}` routed to unknown node `{dest}`"
            )));
        }
        Ok(())
    }

    /// Validates a node's state writes: every key must be a state key.
    pub(crate) fn check_state_writes(&self, writes: &[(String, Value)]) -> Result<(), GraphError> {
        for (k, _) in writes {
            if !self.schema.contains(k) {
                return Err(GraphError::InvalidUpdate {
                    channel: k.clone(),
                    message: format!(
                        "not a key of the state (keys: {})",
                        self.schema.keys().collect::<Vec<_>>().join(", ")
                    ),
                });
            }
        }
        Ok(())
    }
}
