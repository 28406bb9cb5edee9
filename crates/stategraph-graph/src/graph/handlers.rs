//! Declaring error handlers: a node's own ([`StateGraph::set_error_handler`]) and the graph's
//! default ([`StateGraph::set_default_error_handler`]), each compiled into a node of its own.

use std::future::Future;
use std::sync::Arc;

use super::{NodeDecl, StateGraph};
use crate::error::NodeError;
use crate::handler::{DEFAULT_ERROR_HANDLER, error_handler_node};
use crate::node::{NodeContext, NodeOutput, node_fn};
use crate::state::State;

impl<S: State> StateGraph<S> {
    /// Handles `node`'s failures with `handler` (LangGraph's `add_node(...,
    /// error_handler=)`): once the node fails for good — its retries spent — its error is
    /// recorded in the thread and, instead of the run failing, the handler runs in the same
    /// super-step as the node `__error_handler__{node}`
    /// ([`error_handler_node`](crate::error_handler_node)). It is given the failed task's
    /// input (the state, or a `Send`'s argument) and, through
    /// [`NodeContext::node_failure`], what failed; its update is applied with the step's
    /// other writes, and it routes on with a [`Command`](crate::Command) (declare where with
    /// [`add_destinations`](Self::add_destinations) under its name) or edges from its name.
    ///
    /// A handler is retried and timed out by the graph's default policies (or its own, set
    /// under its name), but never cached, and its own failure fails the run. Interrupts and
    /// commands for a parent graph are not failures and are never handled. A run continued
    /// after a handler failed (or never ran) runs the handler again, not the failed node.
    pub fn set_error_handler<F, Fut, O>(&mut self, node: impl Into<String>, handler: F) -> &mut Self
    where
        F: Fn(Arc<S>, NodeContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, NodeError>> + Send + 'static,
        O: Into<NodeOutput<S::Update>>,
    {
        let node = node.into();
        let decl = NodeDecl {
            name: error_handler_node(&node),
            run: node_fn(handler),
            view: None,
            function: std::any::type_name::<F>(),
        };
        self.handlers.retain(|(n, _)| *n != node);
        self.handlers.push((node, decl));
        self
    }

    /// Handles the failures of every node without its own handler with `handler`
    /// (LangGraph's `set_node_defaults(error_handler=)`), run as the node
    /// `__default_error_handler__`; see [`set_error_handler`](Self::set_error_handler).
    /// Handlers never handle each other's failures.
    pub fn set_default_error_handler<F, Fut, O>(&mut self, handler: F) -> &mut Self
    where
        F: Fn(Arc<S>, NodeContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, NodeError>> + Send + 'static,
        O: Into<NodeOutput<S::Update>>,
    {
        self.default_handler = Some(NodeDecl {
            name: DEFAULT_ERROR_HANDLER.to_owned(),
            run: node_fn(handler),
            view: None,
            function: std::any::type_name::<F>(),
        });
        self
    }

    /// The handler node of `node`'s failures, if any: its own, else the default (never one
    /// for a handler).
    pub(super) fn handler_of(&self, node: &str) -> Option<&str> {
        if self.is_handler(node) {
            return None;
        }
        self.handlers
            .iter()
            .find(|(n, _)| n == node)
            .map(|(_, d)| d.name.as_str())
            .or(self.default_handler.as_ref().map(|d| d.name.as_str()))
    }

    /// Whether `node` names an error handler node.
    pub(super) fn is_handler(&self, node: &str) -> bool {
        self.handler_decls().any(|d| d.name == node)
    }

    /// What a drawing of the compiled graph needs: the nodes in LangGraph's order (a
    /// node's own handler just before it, the default handler last) and the destinations.
    pub(super) fn declared_for_drawing(&self) -> crate::topology::Declared {
        let mut order = Vec::new();
        for n in &self.nodes {
            if let Some((_, handler)) = self.handlers.iter().find(|(of, _)| *of == n.name) {
                order.push(handler.name.clone());
            }
            order.push(n.name.clone());
        }
        order.extend(self.default_handler.iter().map(|d| d.name.clone()));
        crate::topology::Declared {
            order,
            destinations: self.destinations.clone(),
        }
    }

    /// The handler nodes' declarations: each node's own, then the default.
    pub(super) fn handler_decls(&self) -> impl Iterator<Item = &NodeDecl<S>> {
        self.handlers
            .iter()
            .map(|(_, d)| d)
            .chain(self.default_handler.iter())
    }
}
