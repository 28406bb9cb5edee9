//! What a graph is told beyond its nodes and edges: each node's policies (retries,
//! timeouts, caching, deferral), the defaults every node gets, and how its keys are stored.

use super::StateGraph;
use crate::cache::CachePolicy;
use crate::retry::RetryPolicies;
use crate::state::State;
use crate::timeout::TimeoutPolicy;

impl<S: State> StateGraph<S> {
    /// Stores every key whose reducer appends ([`crate::Reducer::append`],
    /// [`crate::Reducer::add_messages`]) as deltas, with a full snapshot every
    /// `snapshot_frequency` updates — LangGraph's `DeltaChannel`, so a conversation costs
    /// storage in proportion to what it adds, not to its length times its turns. Keys declared
    /// as deltas already keep their own frequency.
    pub fn delta_storage(&mut self, snapshot_frequency: u32) -> &mut Self {
        self.delta_storage = Some(snapshot_frequency);
        self
    }

    /// Retries `node` according to `policies` when it fails — one
    /// [`RetryPolicy`](crate::RetryPolicy), or a list of them where the first that applies
    /// to the error decides ([`RetryPolicies`], LangGraph's `retry_policy=`). The failure is
    /// recorded only once the last try fails.
    pub fn set_retry(
        &mut self,
        node: impl Into<String>,
        policies: impl Into<RetryPolicies>,
    ) -> &mut Self {
        self.policies.entry(node.into()).or_default().retry = Some(policies.into());
        self
    }

    /// Limits how long each try of `node` may take (LangGraph's `add_node(..., timeout=)`):
    /// a [`TimeoutPolicy`], or a [`Duration`](std::time::Duration) as a run timeout. A try
    /// that runs out is cancelled — none of its writes are kept — and fails with a
    /// [`NodeTimeoutError`](crate::NodeTimeoutError), which the node's retry policy (and
    /// LangGraph's default filter) retries.
    ///
    /// ```
    /// use std::time::Duration;
    /// use stategraph_checkpoint::Map;
    /// use stategraph_graph::{DynState, NodeTimeoutError, RunConfig, START, Schema, StateGraph};
    ///
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let mut g = StateGraph::<DynState>::with_schema(Schema::new().last_value("x"));
    /// g.add_node("slow", |_s, _ctx| async {
    ///     tokio::time::sleep(Duration::from_secs(5)).await;
    ///     Ok(Map::new())
    /// });
    /// g.add_edge(START, "slow").set_timeout("slow", Duration::from_millis(50));
    /// let err = g.compile()?.invoke(Map::new(), RunConfig::default()).await.unwrap_err();
    /// assert!(err.to_string().contains("exceeded its run timeout of 0.050s"), "{err}");
    /// # Ok::<(), stategraph_graph::GraphError>(()) }).unwrap();
    /// ```
    pub fn set_timeout(
        &mut self,
        node: impl Into<String>,
        policy: impl Into<TimeoutPolicy>,
    ) -> &mut Self {
        self.policies.entry(node.into()).or_default().timeout = Some(policy.into());
        self
    }

    /// Policies for every node of this graph that does not set its own (LangGraph's
    /// `set_node_defaults`); a field set here replaces an earlier default. Subgraphs do not
    /// inherit them.
    ///
    /// ```
    /// use std::time::Duration;
    /// use stategraph_graph::{DynState, NodeDefaults, RetryPolicy, Schema, StateGraph};
    ///
    /// let mut g = StateGraph::<DynState>::with_schema(Schema::new().last_value("x"));
    /// g.set_node_defaults(
    ///     NodeDefaults::new()
    ///         .retry(RetryPolicy::default())
    ///         .timeout(Duration::from_secs(30)),
    /// );
    /// ```
    pub fn set_node_defaults(&mut self, defaults: NodeDefaults) -> &mut Self {
        let NodeDefaults {
            retry,
            timeout,
            cache,
        } = defaults;
        if retry.is_some() {
            self.defaults.retry = retry;
        }
        if timeout.is_some() {
            self.defaults.timeout = timeout;
        }
        if cache.is_some() {
            self.defaults.cache = cache;
        }
        self
    }

    /// Caches `node`'s results by `policy` (LangGraph's `add_node(..., cache_policy=)`): when
    /// the graph has a cache ([`CompiledGraph::with_cache`](crate::CompiledGraph::with_cache)),
    /// a task of the node whose input keys to a live entry takes the entry's writes instead of
    /// running, and a task that runs and succeeds leaves its writes there. Without a cache the
    /// policy does nothing.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use stategraph_checkpoint::{Map, cache::InMemoryCache, value};
    /// use stategraph_graph::{CachePolicy, DynState, RunConfig, START, Schema, StateGraph};
    ///
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let runs = Arc::new(AtomicUsize::new(0));
    /// let mut g = StateGraph::<DynState>::with_schema(Schema::new().last_value("x").last_value("y"));
    /// let counter = Arc::clone(&runs);
    /// g.add_node("double", move |s, _ctx| {
    ///     counter.fetch_add(1, Ordering::SeqCst);
    ///     let x = s.get("x").and_then(|x| x.as_i64()).unwrap_or_default();
    ///     async move { Ok(Map::from_iter([("y", value!(x * 2))])) }
    /// });
    /// g.add_edge(START, "double").set_cache("double", CachePolicy::new());
    /// let graph = g.compile()?.with_cache(Arc::new(InMemoryCache::new()));
    /// for _ in 0..3 {
    ///     let out = graph.invoke(Map::from_iter([("x", value!(21))]), RunConfig::default()).await?;
    ///     assert_eq!(out["y"], value!(42));
    /// }
    /// assert_eq!(runs.load(Ordering::SeqCst), 1, "the second and third runs hit the cache");
    /// # Ok::<(), stategraph_graph::GraphError>(()) }).unwrap();
    /// ```
    pub fn set_cache(&mut self, node: impl Into<String>, policy: CachePolicy) -> &mut Self {
        self.policies.entry(node.into()).or_default().cache = Some(policy);
        self
    }

    /// Narrows what the graph takes as input to `schema`'s keys (LangGraph's
    /// `StateGraph(State, input_schema=…)`): an input's other keys are dropped, as LangGraph
    /// drops them. Its keys must be state keys.
    pub fn set_input_schema(&mut self, schema: IoSchema) -> &mut Self {
        self.io.input = Some(schema);
        self
    }

    /// Narrows what the graph gives back to `schema`'s keys (LangGraph's `output_schema=`):
    /// `invoke_values` (and the final values of a stream) hold only these keys; the state
    /// itself, its snapshots, the streamed `values` and `updates` (as LangGraph's `stream`
    /// shows them) and the typed [`invoke`](crate::CompiledGraph::invoke) keep every key. Its
    /// keys must be state keys.
    ///
    /// ```
    /// use stategraph_checkpoint::{Map, value};
    /// use stategraph_graph::{DynState, IoSchema, RunConfig, START, Schema, StateGraph};
    ///
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let schema = Schema::new().last_value("question").last_value("notes").last_value("answer");
    /// let mut g = StateGraph::<DynState>::with_schema(schema);
    /// g.add_node("reply", |_s, _ctx| async {
    ///     Ok(Map::from_iter([("notes", value!("thought hard")), ("answer", value!(42))]))
    /// });
    /// g.add_edge(START, "reply");
    /// g.set_input_schema(IoSchema::keys(["question"]));
    /// g.set_output_schema(IoSchema::keys(["answer"]));
    /// let input = Map::from_iter([("question", value!("?")), ("notes", value!("ignored"))]);
    /// let out = g.compile()?.invoke_values(input, RunConfig::default()).await?;
    /// assert_eq!(out.keys().collect::<Vec<_>>(), ["answer"]);
    /// # Ok::<(), stategraph_graph::GraphError>(()) }).unwrap();
    /// ```
    pub fn set_output_schema(&mut self, schema: IoSchema) -> &mut Self {
        self.io.output = Some(schema);
        self
    }

    /// Defers `node` until the run is about to end (LangGraph's `add_node(..., defer=True)`):
    /// triggered by its edges as usual, it runs only once no other node would run — the
    /// join of branches of uneven length runs once, after the longest. Its edge and join
    /// channels are LangGraph's after-finish channels, stored as Python stores them.
    ///
    /// ```
    /// use stategraph_checkpoint::{Map, value};
    /// use stategraph_graph::{DynState, END, Reducer, RunConfig, START, Schema, StateGraph};
    ///
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let mut g = StateGraph::<DynState>::with_schema(Schema::new().reducer("log", Reducer::append()));
    /// for n in ["a", "b", "b2", "c", "join"] {
    ///     g.add_node(n, move |_s, _ctx| async move { Ok(Map::from_iter([("log", value!([n]))])) });
    /// }
    /// g.add_edge(START, "a").add_edge("a", "b").add_edge("a", "c").add_edge("b", "b2");
    /// g.add_edge("b2", "join").add_edge("c", "join").add_edge("join", END);
    /// g.set_defer("join");
    /// let out = g.compile()?.invoke(Map::new(), RunConfig::default()).await?;
    /// // Without `set_defer`, `join` would run twice: after `c`, and again after `b2`.
    /// assert_eq!(out["log"], value!(["a", "b", "c", "b2", "join"]));
    /// # Ok::<(), stategraph_graph::GraphError>(()) }).unwrap();
    /// ```
    pub fn set_defer(&mut self, node: impl Into<String>) -> &mut Self {
        self.deferred.insert(node.into());
        self
    }
}

/// An input or output schema of a graph (LangGraph's `input_schema=` / `output_schema=`): the
/// state keys it has, and its JSON Schema when known (served as the assistant's schema).
#[derive(Clone, Debug, PartialEq)]
pub struct IoSchema {
    pub(crate) keys: Vec<String>,
    pub(crate) json_schema: Option<serde_json::Value>,
}

impl IoSchema {
    /// The keys of state type `T` (a `#[derive(State)]` struct naming a subset of the
    /// graph's keys), with `T`'s JSON Schema when it derives `schemars::JsonSchema`.
    pub fn of<T: State>() -> Self {
        Self {
            keys: T::schema().keys().map(str::to_owned).collect(),
            json_schema: T::json_schema(),
        }
    }

    /// These keys, their types unknown.
    pub fn keys<I, K>(keys: I) -> Self
    where
        I: IntoIterator<Item = K>,
        K: Into<String>,
    {
        Self {
            keys: keys.into_iter().map(Into::into).collect(),
            json_schema: None,
        }
    }

    /// The schema's keys.
    pub fn key_names(&self) -> &[String] {
        &self.keys
    }

    /// Its JSON Schema, if known.
    pub fn json_schema(&self) -> Option<&serde_json::Value> {
        self.json_schema.as_ref()
    }
}

/// A graph's input and output schemas, where they are not its whole state.
#[derive(Clone, Debug, Default)]
pub(crate) struct InputOutput {
    pub(crate) input: Option<IoSchema>,
    pub(crate) output: Option<IoSchema>,
}

/// Policies every node of a graph gets unless it sets its own
/// ([`StateGraph::set_node_defaults`], LangGraph's `set_node_defaults`).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct NodeDefaults {
    /// The retry policies of nodes without [`StateGraph::set_retry`].
    pub retry: Option<RetryPolicies>,
    /// The timeout of nodes without [`StateGraph::set_timeout`].
    pub timeout: Option<TimeoutPolicy>,
    /// The cache policy of nodes without [`StateGraph::set_cache`].
    pub cache: Option<CachePolicy>,
}

impl NodeDefaults {
    /// No defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Retry nodes by `policies` by default.
    pub fn retry(mut self, policies: impl Into<RetryPolicies>) -> Self {
        self.retry = Some(policies.into());
        self
    }

    /// Time nodes out by `policy` by default.
    pub fn timeout(mut self, policy: impl Into<TimeoutPolicy>) -> Self {
        self.timeout = Some(policy.into());
        self
    }

    /// Cache nodes by `policy` by default.
    pub fn cache(mut self, policy: CachePolicy) -> Self {
        self.cache = Some(policy);
        self
    }
}
