//! A graph run inside another graph's task: as a subgraph node
//! ([`StateGraph::add_subgraph`](crate::StateGraph::add_subgraph)) or invoked from a node's
//! code ([`CompiledGraph::invoke_in`]); either way it checkpoints into the parent's thread
//! under the task's namespace (or, for [`SubgraphPersistence::PerThread`], the node's), with
//! the parent's saver, store, answers to interrupts and stream.

use stategraph_checkpoint::Map;

use super::CompiledGraph;
use crate::error::NodeError;
use crate::node::NodeContext;
use crate::run::{ResumeInput, RunOutcome, RunSetup};
use crate::state::{State, Values};

/// How a graph keeps its checkpoints when it runs inside another graph's task (LangGraph's
/// `compile(checkpointer=…)` for subgraphs). A graph run on its own ignores it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SubgraphPersistence {
    /// Each run of the subgraph keeps its own history, under the namespace of the task that
    /// runs it (`node:task_id`), and starts from empty state — LangGraph's default
    /// (`checkpointer=None`). An interrupted run resumes where it stopped.
    #[default]
    PerInvocation,
    /// One history per thread, under the node's namespace without task ids (`node`): each
    /// run of the subgraph starts from the state the last one left, as a thread does —
    /// LangGraph's `checkpointer=True`, e.g. an agent that remembers its own conversation
    /// across its parent's runs.
    PerThread,
    /// No checkpoints at all (LangGraph's `checkpointer=False`): the subgraph runs in
    /// memory; an interrupt inside it runs it again from its start when answered.
    Off,
}

/// `ns` without its task ids (`a:1|b:2` → `a|b`), as a [`SubgraphPersistence::PerThread`]
/// subgraph stores it (numeric segments are kept).
fn without_task_ids(ns: &str) -> String {
    ns.split('|')
        .map(|part| part.split(':').next().unwrap_or(part))
        .collect::<Vec<_>>()
        .join("|")
}

impl<S: State> CompiledGraph<S> {
    /// How this graph keeps its checkpoints when it runs inside another graph's task (see
    /// [`SubgraphPersistence`]); the default is [`PerInvocation`](SubgraphPersistence::PerInvocation).
    pub fn with_subgraph_persistence(mut self, persistence: SubgraphPersistence) -> Self {
        self.persistence = persistence;
        self
    }

    /// The namespace this graph checkpoints under when run by the task whose own namespace
    /// is `task_ns`.
    pub(crate) fn nested_ns(&self, task_ns: &str) -> String {
        match self.persistence {
            SubgraphPersistence::PerThread => without_task_ids(task_ns),
            _ => task_ns.to_owned(),
        }
    }

    /// Runs this graph inside the task `ctx` belongs to, on `input` (LangGraph's
    /// `subgraph.invoke(...)` called in a node): it checkpoints into the parent's thread
    /// under the task's namespace (per its [`SubgraphPersistence`]), shares the parent's
    /// saver, store and stream (its events carry its namespace), and its interrupts stop
    /// the parent's task — answered, the task runs again and this call resumes the
    /// subgraph where it stopped. Returns the subgraph's final values.
    ///
    /// ```
    /// use stategraph_checkpoint::{CheckpointSaver, InMemorySaver, ListOptions, Map, value};
    /// use stategraph_graph::{DynState, RunConfig, START, Schema, StateGraph};
    /// use std::sync::Arc;
    ///
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// // A subgraph with its own schema…
    /// let mut sub = StateGraph::<DynState>::with_schema(Schema::new().last_value("q").last_value("a"));
    /// sub.add_node("answer", |s, _ctx| {
    ///     let q = s.get("q").and_then(|q| q.as_str().map(str::to_owned)).unwrap_or_default();
    ///     async move { Ok(Map::from_iter([("a", value!(q.to_uppercase()))])) }
    /// });
    /// sub.add_edge(START, "answer");
    /// let sub = sub.compile()?;
    /// // …called from a node of a parent with another one, mapping in and out.
    /// let mut g = StateGraph::<DynState>::with_schema(Schema::new().last_value("text"));
    /// g.add_node("ask", move |s, ctx| {
    ///     let sub = sub.clone();
    ///     let text = s.get("text").cloned().unwrap_or(value!(""));
    ///     async move {
    ///         let out = sub.invoke_in(&ctx, Map::from_iter([("q", text)])).await?;
    ///         Ok(Map::from_iter([("text", out["a"].clone())]))
    ///     }
    /// });
    /// g.add_edge(START, "ask");
    /// let saver = Arc::new(InMemorySaver::new());
    /// let g = g.compile()?.with_checkpointer(saver.clone());
    /// let out = g.invoke(Map::from_iter([("text", value!("hi"))]), RunConfig::thread("t")).await?;
    /// assert_eq!(out["text"], value!("HI"));
    /// // The subgraph's checkpoints are in the parent's thread, under the task's namespace.
    /// let all = saver.list(&ListOptions { thread_id: Some("t".into()), ..Default::default() }).await?;
    /// assert!(all.iter().any(|t| t.config.checkpoint_ns.starts_with("ask:")));
    /// # Ok::<(), stategraph_graph::GraphError>(()) }).unwrap();
    /// ```
    pub async fn invoke_in(&self, ctx: &NodeContext, input: Map) -> Result<Values, NodeError> {
        let outcome = self.run_in(ctx, input).await?;
        if !outcome.interrupts.is_empty() {
            return Err(NodeError::interrupted(outcome.interrupts));
        }
        if let Some(command) = outcome.parent_command {
            // A command for the graph whose node called this one: it leaves that node too.
            return Err(NodeError::to_parent(*command));
        }
        Ok(outcome.values)
    }

    /// Runs this graph inside `ctx`'s task on `input`: what it ended on, its interrupts, or
    /// the command it sent to the parent.
    pub(crate) async fn run_in(
        &self,
        ctx: &NodeContext,
        input: Map,
    ) -> Result<RunOutcome<S>, NodeError> {
        let mut config = (*ctx.config).clone();
        config.checkpoint_ns = self.nested_ns(&ctx.checkpoint_ns);
        config.checkpoint_id = None;
        let saver = match self.persistence {
            SubgraphPersistence::Off => None,
            _ => self.checkpointer.clone().or_else(|| ctx.saver.clone()),
        };
        let mut setup = RunSetup::new(saver);
        setup.parents = (*ctx.parents).clone();
        setup.resume = Some(ResumeInput::Inherited(ctx.resume.clone()));
        setup.resuming = Some(ctx.resuming);
        setup.store = ctx.store.clone();
        setup.subgraph = true;
        setup.emitter = ctx
            .emitter
            .as_ref()
            .and_then(|e| e.nested(&config.checkpoint_ns));
        setup.input = Some(stategraph_checkpoint::Value::Map(input));
        setup.parent_run = ctx.runs.clone();
        // A subgraph with a checkpoint in its namespace continues from it when the run that
        // contains it is resuming (LangGraph's `CONFIG_KEY_RESUMING`): it was interrupted (or
        // failed) there. Otherwise its input is applied afresh (on top of that state, for a
        // per-thread subgraph).
        setup.continue_saved = ctx.resuming;
        self.run_with(config, setup).await.map_err(NodeError::from)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn task_ids_are_dropped_numeric_parts_kept() {
        assert_eq!(super::without_task_ids("a:1f2e|b:9c"), "a|b");
        assert_eq!(super::without_task_ids("a:1f2e|3|b"), "a|3|b");
        assert_eq!(super::without_task_ids(""), "");
    }
}
