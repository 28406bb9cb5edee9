//! Nodes, branches and what they are handed at run time.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::config::RunConfig;
use crate::error::NodeError;
use crate::state::State;

/// What a node returns.
#[derive(Debug)]
#[non_exhaustive]
pub enum NodeOutput<U> {
    /// A partial state update.
    Update(U),
    /// No update (LangGraph: the node returned `None`).
    Empty,
}

impl<U> From<U> for NodeOutput<U> {
    fn from(u: U) -> Self {
        NodeOutput::Update(u)
    }
}

/// The boxed future a node runs.
pub type NodeFuture<U> = Pin<Box<dyn Future<Output = Result<NodeOutput<U>, NodeError>> + Send>>;

/// A node: takes the super-step's shared state snapshot and its context.
pub(crate) type NodeFn<S> =
    Arc<dyn Fn(Arc<S>, NodeContext) -> NodeFuture<<S as State>::Update> + Send + Sync>;

/// A conditional edge's routing function: the state (with the node's own update applied)
/// → route keys (node names, or keys of the path map; `__end__` to stop).
pub(crate) type BranchFn<S> = Arc<dyn Fn(&S) -> Result<Vec<String>, NodeError> + Send + Sync>;

/// What a running node can see besides the state.
#[derive(Clone, Debug)]
pub struct NodeContext {
    /// The node's name.
    pub node: String,
    /// The task id (LangGraph's, stable for a given checkpoint and node).
    pub task_id: String,
    /// The super-step the task runs in.
    pub step: i64,
    /// The run's config, including any `configurable` keys (e.g. `user_id`).
    pub config: Arc<RunConfig>,
}

/// Wraps an async closure as a node.
pub(crate) fn node_fn<S, F, Fut, O>(f: F) -> NodeFn<S>
where
    S: State,
    F: Fn(Arc<S>, NodeContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, NodeError>> + Send + 'static,
    O: Into<NodeOutput<S::Update>>,
{
    Arc::new(move |state, ctx| {
        let fut = f(state, ctx);
        Box::pin(async move { fut.await.map(Into::into) })
    })
}
