//! Node-level error handlers (LangGraph's `add_node(..., error_handler=)` and
//! `set_node_defaults(error_handler=)`): when a node fails for good (its retries spent), the
//! failure is recorded and a handler node runs in the same super-step instead of the run
//! failing, given the failed node's input and a [`NodeFailure`].
//!
//! The handler is a node of its own, named `__error_handler__{node}` (or
//! `__default_error_handler__` for the graph's default), run as a push task with LangGraph's
//! task id and path, so that a thread handled by either side reads the same in both. Its
//! update is applied with the step's other writes; it routes on with a
//! [`Command`](crate::Command) or with edges declared from its name.

use std::sync::Arc;

use stategraph_checkpoint::Value;

use crate::node::NodeContext;
use crate::step::{PUSH, Task};

/// The prefix of a node's own error handler: `__error_handler__{node}`.
const HANDLER_PREFIX: &str = "__error_handler__";
/// The node of a graph's default error handler (LangGraph's `_DEFAULT_ERROR_HANDLER_NODE`).
pub const DEFAULT_ERROR_HANDLER: &str = "__default_error_handler__";
/// The path segment of a handler task (after the failed task's first three).
const HANDLER_PATH: &str = "node_error_handler";

/// The name of the handler node [`StateGraph::set_error_handler`](crate::StateGraph::set_error_handler)
/// adds for `node`: `__error_handler__{node}`. Edges and destinations from a handler are
/// declared under this name.
pub fn error_handler_node(node: &str) -> String {
    format!("{HANDLER_PREFIX}{node}")
}

/// What an error handler is told about the failure it handles (LangGraph's `NodeError`).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct NodeFailure {
    /// The node that failed.
    pub node: String,
    /// Its error as the thread stores it: Python's `repr` form, `ValueError('boom')`.
    pub error: String,
}

impl NodeFailure {
    /// A failure of `node` with `error` (as stored).
    pub fn new(node: impl Into<String>, error: impl Into<String>) -> Self {
        Self {
            node: node.into(),
            error: error.into(),
        }
    }
}

/// An error as a saved `__error__` write holds it (both sides save the error's `repr` as a
/// string).
pub(crate) fn error_text(error: &Value) -> String {
    match error {
        Value::Str(s) => s.to_string(),
        other => format!("{other:?}"),
    }
}

impl NodeContext {
    /// In an error handler, the failure it handles (LangGraph's `error: NodeError`
    /// parameter); `None` in any other node.
    ///
    /// ```
    /// use stategraph_checkpoint::{Map, value};
    /// use stategraph_graph::{DynState, NodeError, RunConfig, START, Schema, StateGraph};
    ///
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let mut g = StateGraph::<DynState>::with_schema(Schema::new().last_value("status"));
    /// g.add_node("fetch", |_s, _ctx| async {
    ///     Err::<Map, _>(NodeError::from_repr("ConnectionError('upstream down')"))
    /// });
    /// g.add_edge(START, "fetch");
    /// g.set_error_handler("fetch", |_s, ctx| {
    ///     let failure = ctx.node_failure().cloned();
    ///     async move {
    ///         let f = failure.expect("a handler is told what failed");
    ///         Ok(Map::from_iter([("status", value!(format!("{} failed: {}", f.node, f.error)))]))
    ///     }
    /// });
    /// let out = g.compile()?.invoke(Map::new(), RunConfig::default()).await?;
    /// assert_eq!(out["status"], value!("fetch failed: ConnectionError('upstream down')"));
    /// # Ok::<(), stategraph_graph::GraphError>(()) }).unwrap();
    /// ```
    pub fn node_failure(&self) -> Option<&NodeFailure> {
        self.failure.as_deref()
    }
}

/// The task of `handler` handling `failed`'s failure in `step` (LangGraph's
/// `prepare_node_error_handler_task`), with its checkpoint namespace. It is a push task whose
/// id hashes the handler, the marker `node_error_handler` and the failed task's id; its path
/// is the failed task's first three segments then `node_error_handler, False`; its input is
/// the failed task's. As in LangGraph, its namespace nests under the failed task's
/// (`failed_ns`, `a:<id>`): `a:<id>|__error_handler__a:<handler id>`.
pub(crate) fn handler_task(
    checkpoint_id: &str,
    failed_ns: &str,
    step: i64,
    handler: &str,
    failed: &Task,
    failure: NodeFailure,
) -> Handling {
    let ns = format!("{failed_ns}|{handler}");
    let id = crate::step::task_id(
        checkpoint_id,
        &[
            &ns,
            &step.to_string(),
            handler,
            PUSH,
            HANDLER_PATH,
            &failed.id,
        ],
    );
    let mut path: Vec<String> = failed.path.iter().take(3).cloned().collect();
    // Python's `False`, formatted as the integer it is.
    path.extend([HANDLER_PATH.to_owned(), format!("{:010}", 0)]);
    Handling {
        ns: format!("{ns}:{id}"),
        task: Task {
            id,
            name: handler.to_owned(),
            path: path.into(),
            triggers: vec![PUSH.to_owned()].into(),
            writes: Vec::new(),
            input: failed.input.clone(),
        },
        failure: Arc::new(failure),
    }
}

/// A handler task, with its namespace and the failure it handles.
pub(crate) struct Handling {
    pub(crate) task: Task,
    /// Its checkpoint namespace (nested under the failed task's).
    pub(crate) ns: String,
    pub(crate) failure: Arc<NodeFailure>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handler_tasks_are_named_and_pathed_as_langgraph_does() {
        let failed = Task {
            id: "f".into(),
            name: "a".into(),
            path: crate::step::pull_path("a"),
            triggers: vec!["branch:to:a".to_owned()].into(),
            writes: Vec::new(),
            input: None,
        };
        let h = handler_task(
            "1ef4f797-8335-6428-8001-8a1503f9b875",
            "a:f",
            1,
            "__error_handler__a",
            &failed,
            NodeFailure::new("a", "ValueError('x')"),
        );
        let t = &h.task;
        assert_eq!(h.ns, format!("a:f|__error_handler__a:{}", t.id));
        assert_eq!(
            t.path_str(),
            "~__pregel_pull, a, node_error_handler, 0000000000"
        );
        assert_eq!(t.triggers.as_ref(), ["__pregel_push"]);
        assert_eq!(error_handler_node("a"), "__error_handler__a");
    }
}
