//! Streaming entry points: [`CompiledGraph::stream`] and its variants, which run in a task of\ntheir own and hand back a [`RunStream`].

use super::*;

impl<S: State> CompiledGraph<S> {
    /// Like [`invoke`](Self::invoke), streaming events of the given modes as the run goes
    /// (LangGraph's `stream`). The stream owns a handle to the graph, so it can be moved into
    /// a spawned task:
    ///
    /// ```no_run
    /// # async fn demo(graph: stategraph_graph::CompiledGraph<stategraph_graph::DynState>, input: stategraph_checkpoint::Map) -> Result<(), stategraph_graph::GraphError> {
    /// use futures_util::StreamExt;
    /// use stategraph_graph::{RunConfig, StreamEvent, StreamMode, UpdatesEvent};
    /// let mut stream = graph.stream(input, RunConfig::thread("1"), &[StreamMode::Updates]);
    /// let printer = tokio::spawn(async move {
    ///     while let Some(event) = stream.next().await {
    ///         match event? {
    ///             StreamEvent::Updates(UpdatesEvent::Node { node, .. }) => println!("{node} ran"),
    ///             other => println!("{}: {}", other.mode().as_str(), other.to_json()),
    ///         }
    ///     }
    ///     Ok::<_, stategraph_graph::GraphError>(())
    /// });
    /// printer.await.expect("the printer panicked")?;
    /// # Ok(()) }
    /// ```
    pub fn stream(
        &self,
        input: S::Update,
        config: RunConfig,
        modes: &[StreamMode],
    ) -> RunStream<S> {
        let input = match S::input_writes(input).and_then(|writes| {
            self.check_state_writes(&writes)?;
            Ok(writes.into_iter().collect::<Map>())
        }) {
            Ok(input) => input,
            Err(e) => return RunStream::failed(e),
        };
        self.stream_with(config, modes, |setup| setup.input = Some(Value::Map(input)))
    }

    /// [`stream`](Self::stream) with LangGraph's raw input: a map of state keys to values,
    /// as a client sends it (e.g. the Agent Server's run `input`). Keys are validated as typed
    /// input is; an unknown key fails the stream with
    /// [`GraphError::InvalidUpdate`] before anything runs. The values are written to their
    /// channels through the reducers, as Python LangGraph writes a dict input.
    ///
    /// ```no_run
    /// # async fn demo(graph: stategraph_graph::CompiledGraph<stategraph_graph::DynState>) -> Result<(), stategraph_graph::GraphError> {
    /// use futures_util::StreamExt;
    /// use stategraph_checkpoint::{Map, value};
    /// use stategraph_graph::{RunConfig, StreamMode};
    /// let input = Map::from_iter([("foo", value!("")), ("bar", value!([]))]);
    /// let mut stream = graph.stream_values(input, RunConfig::thread("1"), &[StreamMode::Values]);
    /// while let Some(event) = stream.next().await {
    ///     println!("{}", event?.to_json());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn stream_values(
        &self,
        input: Map,
        config: RunConfig,
        modes: &[StreamMode],
    ) -> RunStream<S> {
        let input = match crate::state::map_writes(input).and_then(|writes| {
            self.check_state_writes(&writes)?;
            Ok(writes.into_iter().collect::<Map>())
        }) {
            Ok(input) => input,
            Err(e) => return RunStream::failed(e),
        };
        self.stream_with(config, modes, |setup| setup.input = Some(Value::Map(input)))
    }

    /// [`stream`](Self::stream) with input of any shape, as a client sends it (the Agent
    /// Server's run `input`): an entrypoint's argument, any value
    /// ([`crate::functional::Entrypoint::stream`] untyped); a graph's map of state keys, as
    /// [`stream_values`](Self::stream_values) takes it (anything but a map fails the stream
    /// with [`GraphError::InvalidArgument`] naming `input`).
    pub fn stream_input(
        &self,
        input: Value,
        config: RunConfig,
        modes: &[StreamMode],
    ) -> RunStream<S> {
        if self.output_channel().is_some() {
            return self.stream_with(config, modes, |setup| setup.input = Some(input));
        }
        match input {
            Value::Map(map) => self.stream_values(map, config, modes),
            other => RunStream::failed(GraphError::InvalidArgument {
                what: "input".into(),
                message: format!("a graph takes a map of state keys, got {}", other.kind()),
            }),
        }
    }

    /// [`resume`](Self::resume), streaming events as [`stream`](Self::stream) does.
    pub fn stream_resume(
        &self,
        resume: Resume,
        config: RunConfig,
        modes: &[StreamMode],
    ) -> RunStream<S> {
        self.stream_command(RunCommand::resume(resume), config, modes)
    }

    /// Continues the thread from its checkpoint (LangGraph's `stream(None)`), streaming
    /// events as [`stream`](Self::stream) does.
    pub fn stream_continue(&self, config: RunConfig, modes: &[StreamMode]) -> RunStream<S> {
        self.stream_with(config, modes, |_| {})
    }

    fn stream_with(
        &self,
        config: RunConfig,
        modes: &[StreamMode],
        start: impl FnOnce(&mut RunSetup),
    ) -> RunStream<S> {
        let mut setup = RunSetup::new(self.checkpointer.clone());
        start(&mut setup);
        self.stream_setup(config, modes, setup)
    }

    pub(crate) fn stream_setup(
        &self,
        config: RunConfig,
        modes: &[StreamMode],
        mut setup: RunSetup,
    ) -> RunStream<S> {
        let graph = self.clone();
        RunStream::new(modes, config.subgraph_events, move |emitter| {
            setup.emitter = Some(emitter);
            Box::pin(async move {
                let outcome = graph.run_with(config, setup).await?;
                let complete = outcome.complete;
                Ok(crate::stream::RunEnd {
                    values: outcome.into_values(|k| graph.is_output(k)),
                    complete,
                })
            })
        })
    }
}
