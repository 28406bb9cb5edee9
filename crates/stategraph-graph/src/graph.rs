//! `StateGraph`: declaring nodes and edges, and compiling them into a runnable graph.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::Arc;

use crate::channel::ChannelSpec;
use crate::compiled::{CompiledGraph, Edges, PregelNode, SubgraphView};
use crate::error::{GraphError, NodeError};
use crate::node::{BranchFn, Goto, NodeContext, NodeFn, NodeOutput, node_fn};
use crate::state::{Schema, State};

/// The virtual first node: edges from `START` choose the entry nodes.
pub const START: &str = "__start__";
/// The virtual last node: an edge to `END` finishes that path.
pub const END: &str = "__end__";

/// A conditional edge: a routing function plus an optional map from its results to nodes.
pub(crate) struct Branch<S: State> {
    pub(crate) path: BranchFn<S>,
    pub(crate) path_map: Option<BTreeMap<String, String>>,
    /// The routing function's name in the run's events (`None`: `Unnamed`).
    pub(crate) name: Option<Arc<str>>,
}

impl<S: State> Clone for Branch<S> {
    fn clone(&self) -> Self {
        Self {
            path: Arc::clone(&self.path),
            path_map: self.path_map.clone(),
            name: self.name.clone(),
        }
    }
}

/// The conditional edge just added by [`StateGraph::add_conditional_edges`]: give it a path
/// map with [`path_map`](Self::path_map), or go on declaring (it derefs to the graph).
pub struct ConditionalEdges<'g, S: State> {
    graph: &'g mut StateGraph<S>,
    /// The edge's index in `graph.branches`.
    index: usize,
}

impl<'g, S: State> ConditionalEdges<'g, S> {
    /// Maps the routing function's results to nodes (LangGraph's `path_map`): each entry is
    /// a `(key, node)` pair (`("done", END)`), or a node name that is its own key (LangGraph's
    /// list form, `["a", "b"]`). A result not in the map fails the step, and validation then
    /// knows every node the edge can lead to. Returns the graph, to go on declaring.
    pub fn path_map<I>(self, entries: I) -> &'g mut StateGraph<S>
    where
        I: IntoIterator,
        I::Item: PathMapEntry,
    {
        let map = entries.into_iter().map(PathMapEntry::into_entry).collect();
        if let Some((_, branch)) = self.graph.branches.get_mut(self.index) {
            branch.path_map = Some(map);
        }
        self.graph
    }
}

impl<S: State> ConditionalEdges<'_, S> {
    /// Names the routing function, as its run is named in
    /// [`StreamMode::Events`](crate::StreamMode::Events) (Python names it after the
    /// function, e.g. `should_continue`; unnamed, it is `Unnamed`, as a Python lambda's).
    pub fn name(self, name: impl Into<String>) -> Self {
        if let Some((_, branch)) = self.graph.branches.get_mut(self.index) {
            branch.name = Some(Arc::from(name.into()));
        }
        self
    }
}

impl<S: State> std::ops::Deref for ConditionalEdges<'_, S> {
    type Target = StateGraph<S>;
    fn deref(&self) -> &StateGraph<S> {
        self.graph
    }
}

impl<S: State> std::ops::DerefMut for ConditionalEdges<'_, S> {
    fn deref_mut(&mut self) -> &mut StateGraph<S> {
        self.graph
    }
}

/// An entry of a conditional edge's [path map](ConditionalEdges::path_map): a node name that
/// is its own key (`"a"`), or a `(key, node)` pair (`("yes", "a")`, `("done", END)`).
pub trait PathMapEntry {
    /// The entry as `(key, node)`.
    fn into_entry(self) -> (String, String);
}

impl PathMapEntry for &str {
    fn into_entry(self) -> (String, String) {
        (self.to_owned(), self.to_owned())
    }
}

impl PathMapEntry for String {
    fn into_entry(self) -> (String, String) {
        (self.clone(), self)
    }
}

impl PathMapEntry for &String {
    fn into_entry(self) -> (String, String) {
        (self.clone(), self.clone())
    }
}

impl<K: Into<String>, V: Into<String>> PathMapEntry for (K, V) {
    fn into_entry(self) -> (String, String) {
        (self.0.into(), self.1.into())
    }
}

/// A declared node.
struct NodeDecl<S: State> {
    name: String,
    run: NodeFn<S>,
    /// For subgraph nodes: the subgraph's state reader.
    view: Option<Arc<dyn SubgraphView>>,
    /// The Rust path of its function's type, which names it in cache entries.
    function: &'static str,
}

/// Declares a graph over state `S`: nodes that return partial updates, and the edges between
/// them. [`compile`](Self::compile) validates it.
pub struct StateGraph<S: State> {
    schema: Schema,
    nodes: Vec<NodeDecl<S>>,
    edges: Vec<(String, String)>,
    joins: Vec<(Vec<String>, String)>,
    branches: Vec<(String, Branch<S>)>,
    /// Where each node's `Command`s may route (LangGraph's `destinations=`), each target
    /// with the label its drawn edge carries.
    destinations: crate::topology::Destinations,
    /// Each node's own retry and timeout policies.
    policies: BTreeMap<String, crate::attempts::Attempts>,
    /// What nodes without their own policies get.
    defaults: NodeDefaults,
    /// Nodes that wait for the run's end (LangGraph's `defer=True`).
    deferred: BTreeSet<String>,
    /// Store every append-style reducer key as deltas, with this snapshot frequency.
    delta_storage: Option<u32>,
    /// The input and output schemas, where not the whole state.
    io: InputOutput,
    /// Each node's own error handler: (the node, the handler node).
    handlers: Vec<(String, NodeDecl<S>)>,
    /// The handler of nodes without their own.
    default_handler: Option<NodeDecl<S>>,
}

impl<S: State> Default for StateGraph<S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<S: State> StateGraph<S> {
    /// A graph over `S`'s own schema.
    pub fn new() -> Self {
        Self::with_schema(S::schema())
    }

    /// A graph over an explicit schema (for [`crate::DynState`]).
    pub fn with_schema(schema: Schema) -> Self {
        Self {
            schema,
            nodes: Vec::new(),
            edges: Vec::new(),
            joins: Vec::new(),
            branches: Vec::new(),
            destinations: Vec::new(),
            policies: BTreeMap::new(),
            defaults: NodeDefaults::default(),
            deferred: BTreeSet::new(),
            delta_storage: None,
            io: InputOutput::default(),
            handlers: Vec::new(),
            default_handler: None,
        }
    }

    /// Adds a node: an async function of the shared state snapshot and the node context,
    /// returning an update (or anything convertible into [`NodeOutput`]).
    pub fn add_node<F, Fut, O>(&mut self, name: impl Into<String>, f: F) -> &mut Self
    where
        F: Fn(Arc<S>, NodeContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, NodeError>> + Send + 'static,
        O: Into<NodeOutput<S::Update>>,
    {
        self.nodes.push(NodeDecl {
            name: name.into(),
            run: node_fn(f),
            view: None,
            function: std::any::type_name::<F>(),
        });
        self
    }

    /// Adds a compiled graph as a node. Each time the node runs, the subgraph runs as a whole
    /// on the parent's state (the keys the two states share), checkpointing into the parent's
    /// thread under its own namespace `node:task_id` (with `parents` metadata pointing at the
    /// parent's checkpoint), and its final values for the shared keys become the node's update.
    /// [`CompiledGraph::with_subgraph_persistence`] makes it keep one history per thread
    /// instead (under `node`), or none.
    pub fn add_subgraph<S2: State>(
        &mut self,
        name: impl Into<String>,
        subgraph: CompiledGraph<S2>,
    ) -> &mut Self {
        let sub = Arc::new(subgraph);
        let view: Arc<dyn SubgraphView> = sub.clone();
        let parent_keys: Vec<String> = self.schema.keys().map(str::to_owned).collect();
        let run: NodeFn<S> = Arc::new(move |_state: Arc<S>, ctx: NodeContext| {
            let sub = Arc::clone(&sub);
            let parent_keys = parent_keys.clone();
            Box::pin(async move {
                let input: stategraph_checkpoint::Map = sub
                    .schema
                    .keys()
                    .filter_map(|k| ctx.values.get(k).map(|v| (k.to_owned(), v.clone())))
                    .collect();
                let result = sub.run_in(&ctx, input).await;
                let out = match result {
                    Ok(outcome) if !outcome.interrupts.is_empty() => {
                        return Err(NodeError::interrupted(outcome.interrupts));
                    }
                    Ok(crate::run::RunOutcome {
                        parent_command: None,
                        values,
                        ..
                    }) => values,
                    // A command for this graph, from inside the subgraph: it is this node's
                    // result.
                    Ok(crate::run::RunOutcome {
                        parent_command: Some(command),
                        ..
                    }) => {
                        let mut writes: Vec<(String, stategraph_checkpoint::Value)> = command
                            .update
                            .into_iter()
                            .filter(|(k, _)| parent_keys.iter().any(|p| p == k))
                            .collect();
                        for node in command.goto.into_iter().filter(|n| n != END) {
                            writes
                                .push((branch_channel(&node), stategraph_checkpoint::Value::Null));
                        }
                        for (node, arg) in command.sends {
                            writes.push((
                                stategraph_checkpoint::channels::TASKS.to_owned(),
                                crate::node::send_value(&node, arg),
                            ));
                        }
                        return Ok(NodeOutput::Writes(writes));
                    }
                    Err(e) => return Err(e),
                };
                let writes = sub
                    .schema
                    .keys()
                    .filter(|k| parent_keys.iter().any(|p| p == k))
                    .filter_map(|k| out.get(k).map(|v| (k.to_owned(), v.clone())))
                    .collect();
                Ok(NodeOutput::Writes(writes))
            })
        });
        self.nodes.push(NodeDecl {
            name: name.into(),
            run,
            view: Some(view),
            function: std::any::type_name::<CompiledGraph<S2>>(),
        });
        self
    }

    /// Adds an edge: after `from` runs, `to` runs in the next step (`START`/`END` allowed).
    pub fn add_edge(&mut self, from: impl Into<String>, to: impl Into<String>) -> &mut Self {
        self.edges.push((from.into(), to.into()));
        self
    }

    /// Declares the nodes a node's [`Command`](crate::Command)s may route to (LangGraph's
    /// `destinations=`, or a `Command[Literal[...]]` return type): validation counts them as
    /// reachable, and drawings show them as conditional edges. Routing itself is up to the
    /// commands.
    pub fn add_destinations<I, T>(&mut self, node: impl Into<String>, to: I) -> &mut Self
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        self.destinations.push((
            node.into(),
            to.into_iter().map(|t| (t.into(), None)).collect(),
        ));
        self
    }

    /// [`add_destinations`](Self::add_destinations) with a label for each drawn edge
    /// (LangGraph's `destinations={"node": "label"}`).
    pub fn add_labelled_destinations<I, T, L>(
        &mut self,
        node: impl Into<String>,
        to: I,
    ) -> &mut Self
    where
        I: IntoIterator<Item = (T, L)>,
        T: Into<String>,
        L: Into<String>,
    {
        self.destinations.push((
            node.into(),
            to.into_iter()
                .map(|(t, l)| (t.into(), Some(l.into())))
                .collect(),
        ));
        self
    }

    /// Adds a join edge: `to` runs once every node of `from` has run.
    pub fn add_join<I, T>(&mut self, from: I, to: impl Into<String>) -> &mut Self
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        self.joins
            .push((from.into_iter().map(Into::into).collect(), to.into()));
        self
    }

    /// Adds a conditional edge from `from` (LangGraph's `add_conditional_edges`): `path` sees
    /// the state with `from`'s update applied and returns where to go — node names (or `END`),
    /// [`Send`](crate::Send)s, or keys of a path map given with
    /// [`path_map`](ConditionalEdges::path_map) on the returned handle. The handle derefs to
    /// the graph, so declaring goes on from it.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use stategraph_checkpoint::{Map, value};
    /// use stategraph_graph::{DynState, END, Goto, START, Schema, StateGraph};
    ///
    /// let mut graph = StateGraph::<DynState>::with_schema(Schema::new().last_value("n"));
    /// for name in ["check", "fix"] {
    ///     graph.add_node(name, |_s, _ctx| async { Ok(Map::new()) });
    /// }
    /// graph.add_edge(START, "check");
    /// graph
    ///     .add_conditional_edges("check", |s: &DynState| {
    ///         let ok = s.get("n") == Some(&value!(0));
    ///         Ok(vec![Goto::from(if ok { "done" } else { "retry" })])
    ///     })
    ///     .path_map([("done", END), ("retry", "fix")])
    ///     .add_edge("fix", "check");
    /// assert!(graph.compile().is_ok());
    /// ```
    pub fn add_conditional_edges<F>(
        &mut self,
        from: impl Into<String>,
        path: F,
    ) -> ConditionalEdges<'_, S>
    where
        F: Fn(&S) -> Result<Vec<Goto<S::Update>>, NodeError> + Send + Sync + 'static,
    {
        self.branches.push((
            from.into(),
            Branch {
                path: Arc::new(path),
                path_map: None,
                name: None,
            },
        ));
        let index = self.branches.len() - 1;
        ConditionalEdges { graph: self, index }
    }

    /// Validates the graph and builds its channels and Pregel nodes.
    pub fn compile(&self) -> Result<CompiledGraph<S>, GraphError> {
        // Error handlers are nodes too (edges may leave them), run only for failures.
        let decls: Vec<&NodeDecl<S>> = self.nodes.iter().chain(self.handler_decls()).collect();
        let names: Vec<&str> = decls.iter().map(|n| n.name.as_str()).collect();
        let known: BTreeSet<&str> = names.iter().copied().collect();
        self.validate(&names, &known)?;

        let mut channels: Vec<(String, ChannelSpec)> = self.schema.keys.clone();
        if let Some(n) = self.delta_storage {
            for (_, spec) in &mut channels {
                if let ChannelSpec::Reducer(r) = spec
                    && matches!(r.name(), "append" | "add_messages")
                {
                    *spec = ChannelSpec::delta(r.clone(), n);
                }
            }
        }
        channels.push((START.to_owned(), ChannelSpec::Ephemeral { guard: true }));
        let mut pregel: Vec<PregelNode<S>> = Vec::new();
        let mut edges: HashMap<String, Edges<S>> = HashMap::new();
        // Handlers get the defaults' retries and timeouts, never their cache.
        let handler_defaults = NodeDefaults {
            cache: None,
            ..self.defaults.clone()
        };
        for NodeDecl {
            name,
            run: f,
            view,
            function,
        } in decls
        {
            let defaults = if self.is_handler(name) {
                &handler_defaults
            } else {
                &self.defaults
            };
            channels.push((
                branch_channel(name),
                if self.deferred.contains(name) {
                    ChannelSpec::LastValueAfterFinish
                } else {
                    ChannelSpec::Ephemeral { guard: false }
                },
            ));
            pregel.push(PregelNode {
                name: name.clone(),
                triggers: vec![branch_channel(name)].into(),
                pull_path: crate::step::pull_path(name),
                run: Some(Arc::clone(f)),
                subgraph: view.clone(),
                attempts: self
                    .policies
                    .get(name)
                    .cloned()
                    .unwrap_or_default()
                    .or(defaults),
                entrypoint: false,
                function,
                error_handler: self.handler_of(name).map(str::to_owned),
            });
        }
        for (from, to) in &self.edges {
            if to != END {
                edges
                    .entry(from.clone())
                    .or_default()
                    .writes
                    .push((branch_channel(to), None));
            }
        }
        for (from, to) in &self.joins {
            let channel = format!("join:{}:{to}", from.join("+"));
            let names = from.iter().cloned().collect();
            channels.push((
                channel.clone(),
                if self.deferred.contains(to) {
                    ChannelSpec::NamedBarrierAfterFinish(names)
                } else {
                    ChannelSpec::NamedBarrier(names)
                },
            ));
            if let Some(node) = pregel.iter_mut().find(|n| n.name == *to) {
                let mut triggers = node.triggers.to_vec();
                triggers.push(channel.clone());
                node.triggers = triggers.into();
            }
            for f in from {
                edges
                    .entry(f.clone())
                    .or_default()
                    .writes
                    .push((channel.clone(), Some(f.clone())));
            }
        }
        for (from, branch) in &self.branches {
            edges
                .entry(from.clone())
                .or_default()
                .branches
                .push(branch.clone());
        }
        channels.push((
            stategraph_checkpoint::channels::TASKS.to_owned(),
            ChannelSpec::Topic { accumulate: false },
        ));
        pregel.insert(
            0,
            PregelNode {
                name: START.to_owned(),
                triggers: vec![START.to_owned()].into(),
                pull_path: crate::step::pull_path(START),
                run: None,
                subgraph: None,
                attempts: crate::attempts::Attempts::default(),
                entrypoint: false,
                function: "",
                error_handler: None,
            },
        );
        let mut graph = CompiledGraph::new(self.schema.clone(), channels, pregel, edges);
        graph.io = Arc::new(self.io.clone());
        graph.drawn = Arc::new(self.declared_for_drawing());
        Ok(graph)
    }
}

mod handlers;
mod options;
mod validate;
pub(crate) use options::InputOutput;
pub use options::{IoSchema, NodeDefaults};

/// The trigger channel of a node.
pub(crate) fn branch_channel(node: &str) -> String {
    format!("branch:to:{node}")
}
