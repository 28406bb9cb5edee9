//! A run's result with its interrupts (LangGraph's `invoke(..., version="v2")`).

use std::sync::Arc;

use super::RunOutcome;
use crate::compiled::CompiledGraph;
use crate::config::RunConfig;
use crate::error::GraphError;
use crate::interrupt::Interrupt;
use crate::node::RunCommand;
use crate::state::State;

/// What a run returns in LangGraph's version 2 output (`invoke(..., version="v2")`'s
/// `GraphOutput`): the final state, typed, and the interrupts the run stopped on (empty when
/// it finished).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct GraphOutput<S> {
    /// The state the run ended with (or stopped on).
    pub value: Arc<S>,
    /// The interrupts the run stopped on, in the order they were raised.
    pub interrupts: Vec<Interrupt>,
}

impl<S> GraphOutput<S> {
    /// Whether the run stopped on interrupts (it waits for answers).
    pub fn interrupted(&self) -> bool {
        !self.interrupts.is_empty()
    }
}

impl<S: State> CompiledGraph<S> {
    /// [`invoke`](Self::invoke), returning the final state together with the interrupts the
    /// run stopped on (LangGraph's `invoke(input, version="v2")`).
    ///
    /// ```
    /// use stategraph_checkpoint::{InMemorySaver, Map, value};
    /// use stategraph_graph::{DynState, Resume, RunCommand, RunConfig, START, Schema, StateGraph};
    ///
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let mut g = StateGraph::<DynState>::with_schema(Schema::new().last_value("answer"));
    /// g.add_node("ask", |_s, ctx| async move {
    ///     let answer = ctx.interrupt(value!("approve?"))?;
    ///     Ok(Map::from_iter([("answer", answer)]))
    /// });
    /// g.add_edge(START, "ask");
    /// let graph = g.compile()?.with_checkpointer(std::sync::Arc::new(InMemorySaver::new()));
    /// let config = RunConfig::thread("t");
    /// let out = graph.invoke_output(Map::new(), config.clone()).await?;
    /// assert_eq!(out.interrupts[0].value, value!("approve?"));
    /// let out = graph.command_output(RunCommand::resume(Resume::Value(value!("yes"))), config).await?;
    /// assert!(!out.interrupted());
    /// assert_eq!(out.value.get("answer"), Some(&value!("yes")));
    /// # Ok::<(), stategraph_graph::GraphError>(()) }).unwrap();
    /// ```
    pub async fn invoke_output(
        &self,
        input: S::Update,
        config: RunConfig,
    ) -> Result<GraphOutput<S>, GraphError> {
        let setup = self.input_setup(Some(input))?;
        self.graph_output(self.run_with(config, setup).await?)
    }

    /// [`continue_run`](Self::continue_run), returning the interrupts too, as
    /// [`invoke_output`](Self::invoke_output) does.
    pub async fn continue_output(&self, config: RunConfig) -> Result<GraphOutput<S>, GraphError> {
        let setup = self.input_setup(None)?;
        self.graph_output(self.run_with(config, setup).await?)
    }

    /// [`invoke_command`](Self::invoke_command) (a resume, an update, a `goto`), returning
    /// the interrupts too, as [`invoke_output`](Self::invoke_output) does.
    pub async fn command_output(
        &self,
        command: RunCommand<S::Update>,
        config: RunConfig,
    ) -> Result<GraphOutput<S>, GraphError> {
        let mut setup = self.command_setup(command, Self::typed_writes)?;
        setup.typed_output = true;
        self.graph_output(self.run_with(config, setup).await?)
    }

    fn graph_output(&self, mut outcome: RunOutcome<S>) -> Result<GraphOutput<S>, GraphError> {
        let interrupts = std::mem::take(&mut outcome.interrupts);
        Ok(GraphOutput {
            value: self.typed_output(outcome)?,
            interrupts,
        })
    }
}
