//! The engine's error type.

use std::fmt;

/// Everything that can go wrong building or running a graph.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// The graph definition is invalid (unknown node, unreachable node, …).
    #[error("invalid graph: {0}")]
    InvalidGraph(String),
    /// A write that a channel cannot accept (two values into a last-value channel in one
    /// step, a reducer that fails, an update for a key the state does not have).
    #[error("invalid update for channel `{channel}`: {message}")]
    InvalidUpdate {
        /// The channel.
        channel: String,
        /// Why.
        message: String,
    },
    /// The graph ran more super-steps than the recursion limit allows.
    #[error(
        "recursion limit of {limit} reached without hitting a stop condition; raise \
         `recursion_limit` in the run config if the graph really needs more steps"
    )]
    RecursionLimit {
        /// The limit in force.
        limit: usize,
    },
    /// A node failed; its error is stored in the thread as the task's `__error__` write.
    #[error("node `{node}` (task {task_id}) failed: {message}")]
    NodeFailed {
        /// The node.
        node: String,
        /// The task id.
        task_id: String,
        /// The node's error, as stored in the thread.
        message: String,
        /// The error the node's failure was converted from, if any.
        #[source]
        source: Option<NodeErrorSource>,
    },
    /// A Rust value could not be turned into a channel value.
    #[error("cannot encode {what}: {message}")]
    Encode {
        /// The Rust type.
        what: String,
        /// Why.
        message: String,
    },
    /// A channel value could not be read as the state's Rust type.
    #[error("state key `{key}` does not match its Rust type: {message}")]
    Decode {
        /// The state key.
        key: String,
        /// Why.
        message: String,
    },
    /// A value of the run configuration is unusable (e.g. a `recursion_limit` below 1).
    #[error("invalid config: {0}")]
    InvalidConfig(String),
    /// The call needs a checkpointer (state, history, updates, resuming, repair), but the
    /// graph was compiled without one.
    #[error("this graph was compiled without a checkpointer")]
    NoCheckpointer,
    /// A checkpointer is attached, so the run config needs a `thread_id`.
    #[error("a checkpointer is attached, so the config needs a `thread_id`")]
    MissingThreadId,
    /// What the call addresses is not stored (a thread, a checkpoint, a parent checkpoint).
    #[error("not found: {what}")]
    NotFound {
        /// What was looked for.
        what: String,
    },
    /// A run was started without input on a thread that has no checkpoint to resume from.
    #[error("no input was given and the thread has no checkpoint to resume from")]
    NothingToResume,
    /// A bare resume value while several interrupts are pending: resume them by id
    /// (`Resume::ById`).
    #[error("{} interrupts are pending ({}); resume them by id", pending.len(), pending.join(", "))]
    AmbiguousResume {
        /// The ids of the pending interrupts.
        pending: Vec<String>,
    },
    /// An argument of the call is invalid (not a write to a state channel, which is
    /// [`InvalidUpdate`](Self::InvalidUpdate)): e.g. an `as_node` that names no node.
    #[error("invalid {what}: {message}")]
    InvalidArgument {
        /// Which argument.
        what: String,
        /// What is wrong with it.
        message: String,
    },
    /// `plan_repair` cannot rebuild this checkpoint.
    #[error("checkpoint `{checkpoint}` cannot be rebuilt: {reason}")]
    CannotRepair {
        /// The checkpoint.
        checkpoint: stategraph_checkpoint::CheckpointId,
        /// Why.
        reason: String,
    },
    /// An invariant of the engine did not hold: a bug in stategraph (please report it).
    #[error("internal error: {0}")]
    Internal(String),
    /// The checkpointer failed.
    #[error(transparent)]
    Checkpoint(#[from] stategraph_checkpoint::Error),
    /// A node returned a [`Command`](crate::Command) for the parent graph, but this graph
    /// runs on its own, not as a subgraph.
    #[error("node `{node}` sent a Command to the parent graph, but this graph is not a subgraph")]
    NoParentGraph {
        /// The node.
        node: String,
    },
}

impl GraphError {
    /// Whether another run moved the thread on (the checkpointer's `Conflict`).
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            GraphError::Checkpoint(stategraph_checkpoint::Error::Conflict { .. })
        )
    }
}

/// The error a node's failure was converted from (see [`NodeError`]'s `From`).
pub type NodeErrorSource = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A `Command` addressed to the parent graph, carried out of a subgraph as raw writes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ParentCommand {
    /// State writes (for keys the parent has).
    pub update: Vec<(String, stategraph_checkpoint::Value)>,
    /// Nodes of the parent to run next.
    pub goto: Vec<String>,
    /// `Send`s to nodes of the parent: (node, argument).
    pub sends: Vec<(String, stategraph_checkpoint::Value)>,
}

/// A node's failure, as a node returns it.
///
/// Any error converts with `?` inside a node: it is stored (as LangGraph stores a Python
/// exception) as `TypeName('message')` — `Error('missing field `x` at line 1 column 2')` for a
/// `serde_json::Error` — and kept as the failure's [`source`](Self::source). (So that the
/// conversion can cover every error type, `NodeError` is not itself a
/// `std::error::Error`; it displays as its message.)
///
/// ```
/// use std::sync::Arc;
/// use stategraph_graph::{NodeError, NodeOutput};
///
/// async fn parse(text: Arc<String>) -> Result<NodeOutput<serde_json::Map<String, serde_json::Value>>, NodeError> {
///     let value: serde_json::Value = serde_json::from_str(&text)?;
///     let _bytes = std::fs::read("/definitely/not/here").or_else(|e| {
///         if e.kind() == std::io::ErrorKind::NotFound { Ok(Vec::new()) } else { Err(e) }
///     })?;
///     let _ = value;
///     Ok(NodeOutput::Empty)
/// }
/// # let err = tokio::runtime::Builder::new_current_thread().build().unwrap()
/// #     .block_on(parse(Arc::new("{not json".into()))).err().unwrap();
/// # assert!(err.message.starts_with("Error('"), "{}", err.message);
/// # assert!(err.source().is_some());
/// ```
#[derive(Debug)]
pub struct NodeError {
    /// Python-style `repr` of the error, stored in the `__error__` write: `ValueError('boom')`.
    pub message: String,
    /// The error this failure was converted from, if any.
    pub(crate) source: Option<NodeErrorSource>,
    /// Set when this is not a failure but control flow leaving the node the way an error
    /// does (so that `?` carries it): an interrupt, or a command for the parent graph.
    pub(crate) signal: Option<Signal>,
}

/// Control flow that leaves a node through its error path; never shown to users as an error.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Signal {
    /// The node interrupted: the run stops and waits for an answer.
    Interrupt(Vec<crate::interrupt::Interrupt>),
    /// A command bubbling up to the parent graph (no error write).
    Parent(Box<ParentCommand>),
}

impl fmt::Display for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Equal when they store the same message (and carry the same control flow); the source is
/// not compared.
impl PartialEq for NodeError {
    fn eq(&self, other: &Self) -> bool {
        self.message == other.message && self.signal == other.signal
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for NodeError {
    /// Any error, stored as `TypeName('message')` and kept as the source.
    fn from(e: E) -> Self {
        let name = short_type_name(std::any::type_name::<E>());
        Self {
            message: format!("{name}({})", py_repr_str(&e.to_string())),
            source: Some(Box::new(e)),
            signal: None,
        }
    }
}

/// `a::b::Name<c::D>` → `Name`.
fn short_type_name(full: &str) -> &str {
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base)
}

impl NodeError {
    /// An error with this message, stored as `NodeError('message')`.
    pub fn new(message: impl Into<String>) -> Self {
        let message = message.into();
        Self {
            message: format!("NodeError({})", py_repr_str(&message)),
            source: None,
            signal: None,
        }
    }

    /// The error this failure was converted from (with `?` or `From`), if any.
    pub fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }

    /// The control-flow "error" of a node that interrupted.
    pub(crate) fn interrupted(interrupts: Vec<crate::interrupt::Interrupt>) -> Self {
        Self {
            message: "GraphInterrupt".to_owned(),
            source: None,
            signal: Some(Signal::Interrupt(interrupts)),
        }
    }

    /// The control-flow "error" carrying a command out of a subgraph.
    pub(crate) fn to_parent(command: ParentCommand) -> Self {
        Self {
            message: "ParentCommand".to_owned(),
            source: None,
            signal: Some(Signal::Parent(Box::new(command))),
        }
    }

    /// Whether this is control flow (an interrupt, a command for the parent graph) rather
    /// than a failure.
    pub(crate) fn is_signal(&self) -> bool {
        self.signal.is_some()
    }

    /// Whether this is control flow leaving the node the way an error does — an interrupt
    /// or a command for the parent graph (LangGraph's `GraphBubbleUp`) — rather than a
    /// failure. Code that catches a node's errors (a retry, a fallback) must pass these on.
    pub fn is_control_flow(&self) -> bool {
        self.signal.is_some()
    }

    /// An error stored exactly as `repr` (e.g. `ValueError('boom')`).
    pub fn from_repr(repr: impl Into<String>) -> Self {
        Self {
            message: repr.into(),
            source: None,
            signal: None,
        }
    }
}

pub(crate) use stategraph_value::py::repr_str as py_repr_str;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repr_like_python() {
        assert_eq!(py_repr_str("boom"), "'boom'");
        assert_eq!(py_repr_str("it's"), "\"it's\"");
        assert_eq!(py_repr_str("a\nb"), "'a\\nb'");
        assert_eq!(NodeError::new("boom").message, "NodeError('boom')");
        let parsed: Result<serde_json::Value, _> = serde_json::from_str("{");
        let e = NodeError::from(parsed.unwrap_err());
        assert!(
            e.message.starts_with("Error('EOF while parsing"),
            "{}",
            e.message
        );
        assert!(e.source().is_some());
        let io = NodeError::from(std::io::Error::other("disk full"));
        assert_eq!(io.message, "Error('disk full')");
        assert_eq!(short_type_name("a::b::Name<c::D>"), "Name");
    }
}
