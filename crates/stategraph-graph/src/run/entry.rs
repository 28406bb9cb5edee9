//! Starting a run: the public entry points (`invoke`, `continue_run`, `resume`, `stream`), and
//! where a run starts (the checkpoint it loads, its step and limits).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use stategraph_checkpoint::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, Map, Value,
    channels as reserved,
};
use stategraph_store::Store;

use super::{DeltaState, ExitState, Run, SaveState, StreamState, TaskEnv};
use crate::compiled::CompiledGraph;
use crate::config::RunConfig;
use crate::error::GraphError;
use crate::interrupt::{Interrupt, Resume, ResumeSource};
use crate::node::{Goto, RunCommand};
use crate::state::{State, Values};
use crate::step::channels_from_checkpoint;
use crate::stream::{Emitter, RunStream, StreamMode};

mod output;
mod stream;

pub use output::GraphOutput;

/// How a run starts: its input (or a resume), where it saves, and who is listening.
pub(crate) struct RunSetup {
    /// What the run writes to `__start__`: a graph's input map, an entrypoint's value.
    pub(crate) input: Option<Value>,
    pub(crate) resume: Option<ResumeInput>,
    /// A command's routing and update writes (with `resume`, the run's command input).
    pub(crate) command: CommandWrites,
    pub(crate) saver: Option<Arc<dyn CheckpointSaver>>,
    pub(crate) parents: BTreeMap<String, String>,
    pub(crate) emitter: Option<Emitter>,
    /// The store a subgraph inherits from its parent's task.
    pub(crate) store: Option<Arc<dyn Store>>,
    /// Build the typed final state (for `invoke`).
    pub(crate) typed_output: bool,
    /// The run is a subgraph's, inside its parent's task: commands for the parent graph end
    /// it as its result.
    pub(crate) subgraph: bool,
    /// A subgraph's: whether the run containing it is resuming (else: whether this run has
    /// no input).
    pub(crate) resuming: Option<bool>,
    /// Continue the checkpoint the run loads, if there is one, instead of applying `input`
    /// (a subgraph in a resuming run: it was interrupted, or failed, there).
    pub(crate) continue_saved: bool,
    /// The run tree of the task a subgraph runs in (off at the root).
    pub(crate) parent_run: crate::stream::RunTree,
}

impl RunSetup {
    pub(crate) fn new(saver: Option<Arc<dyn CheckpointSaver>>) -> Self {
        Self {
            input: None,
            resume: None,
            command: CommandWrites::default(),
            saver,
            parents: BTreeMap::new(),
            emitter: None,
            store: None,
            typed_output: false,
            subgraph: false,
            resuming: None,
            continue_saved: false,
            parent_run: crate::stream::RunTree::off(),
        }
    }
}

/// Where a resumed run's answers come from.
pub(crate) enum ResumeInput {
    /// Given by the caller.
    Answer(Resume),
    /// Shared with the parent graph's task (a subgraph resuming inside it).
    Inherited(ResumeSource),
}

/// A command input's writes, saved without a task: `goto` first, then `update` (LangGraph's
/// order, with the resume answer between them).
#[derive(Default)]
pub(crate) struct CommandWrites {
    /// `branch:to:NODE` marks and `Send` packets.
    pub(crate) goto: Vec<(String, Value)>,
    /// State writes.
    pub(crate) update: Vec<(String, Value)>,
}

/// What a run ends with.
pub(crate) struct RunOutcome<S> {
    pub(crate) values: Values,
    /// Interrupts raised by the last step (the run stopped there).
    pub(crate) interrupts: Vec<Interrupt>,
    /// The typed final state, when asked for.
    pub(crate) state: Option<Arc<S>>,
    /// A subgraph's run that a node ended with a command for the parent graph: the command.
    pub(crate) parent_command: Option<Box<crate::error::ParentCommand>>,
    /// The run stopped because no task was left to run.
    pub(crate) complete: bool,
}

impl<S> RunOutcome<S> {
    /// The values of the keys `keep` keeps (the graph's output), plus `__interrupt__` when
    /// the run stopped on interrupts (as LangGraph's invoke output has it).
    pub(crate) fn into_values(mut self, keep: impl Fn(&str) -> bool) -> Values {
        self.values.retain(|k, _| keep(k));
        if !self.interrupts.is_empty() {
            self.values.insert(
                reserved::INTERRUPT.to_owned(),
                Value::List(self.interrupts.iter().map(Interrupt::to_value).collect()),
            );
        }
        self.values
    }
}

impl<S: State> CompiledGraph<S> {
    /// Runs the graph on `input` (LangGraph's `invoke(input)`) and returns the final state,
    /// typed. It is shared (nodes receive it the same way) and built from the state the last
    /// node read, converting only what the run changed. If the run stopped on interrupts, the
    /// state is the one they were raised on; the interrupts are in
    /// [`get_state`](Self::get_state)`.interrupts` (or use
    /// [`invoke_values`](Self::invoke_values), whose output carries them as LangGraph's does).
    /// On a thread that has checkpoints, the input starts a new run from the latest (or
    /// `config.checkpoint_id`); to carry on a run where it stopped instead, use
    /// [`continue_run`](Self::continue_run) (or [`resume`](Self::resume) to answer interrupts).
    pub async fn invoke(&self, input: S::Update, config: RunConfig) -> Result<Arc<S>, GraphError> {
        let setup = self.input_setup(Some(input))?;
        self.typed_output(self.run_with(config, setup).await?)
    }

    /// Continues the thread from its checkpoint (the latest, or `config.checkpoint_id`) without
    /// new input — LangGraph's `invoke(None, config)`: the tasks due there run, e.g. the
    /// nodes a run stopped before with `interrupt_before`, after an
    /// [`update_state`](Self::update_state), or from a past checkpoint (a replay). Returns the
    /// final state as [`invoke`](Self::invoke) does.
    pub async fn continue_run(&self, config: RunConfig) -> Result<Arc<S>, GraphError> {
        let setup = self.input_setup(None)?;
        self.typed_output(self.run_with(config, setup).await?)
    }

    /// [`invoke`](Self::invoke), returning LangGraph's output: the state keys' values, plus
    /// `__interrupt__` when the run stopped on interrupts.
    pub async fn invoke_values(
        &self,
        input: S::Update,
        config: RunConfig,
    ) -> Result<Values, GraphError> {
        let mut setup = self.input_setup(Some(input))?;
        setup.typed_output = false;
        Ok(self
            .run_with(config, setup)
            .await?
            .into_values(|k| self.is_output(k)))
    }

    /// [`continue_run`](Self::continue_run), returning LangGraph's output as
    /// [`invoke_values`](Self::invoke_values) does.
    pub async fn continue_values(&self, config: RunConfig) -> Result<Values, GraphError> {
        let mut setup = self.input_setup(None)?;
        setup.typed_output = false;
        Ok(self
            .run_with(config, setup)
            .await?
            .into_values(|k| self.is_output(k)))
    }

    fn input_setup(&self, input: Option<S::Update>) -> Result<RunSetup, GraphError> {
        let input = match input {
            Some(update) => {
                let writes = S::input_writes(update)?;
                self.check_state_writes(&writes)?;
                Some(Value::Map(writes.into_iter().collect()))
            }
            None => None,
        };
        Ok(RunSetup {
            input,
            typed_output: true,
            ..RunSetup::new(self.checkpointer.clone())
        })
    }

    /// The typed state a run ended with.
    fn typed_output(&self, outcome: RunOutcome<S>) -> Result<Arc<S>, GraphError> {
        match outcome.state {
            Some(s) => Ok(s),
            None => Ok(Arc::new(S::from_values(&outcome.values)?)),
        }
    }

    /// Resumes a thread waiting on interrupts (LangGraph's `invoke(Command(resume=…))`):
    /// the interrupted tasks run again from their start and their `interrupt` calls return
    /// the answers. With several pending interrupts, answer them by id. Returns the final
    /// state, as [`invoke`](Self::invoke) does. (Shorthand for
    /// [`invoke_command`](Self::invoke_command) with [`RunCommand::resume`].)
    pub async fn resume(&self, resume: Resume, config: RunConfig) -> Result<Arc<S>, GraphError> {
        self.invoke_command(RunCommand::resume(resume), config)
            .await
    }

    /// [`resume`](Self::resume), returning LangGraph's output as
    /// [`invoke_values`](Self::invoke_values) does.
    pub async fn resume_values(
        &self,
        resume: Resume,
        config: RunConfig,
    ) -> Result<Values, GraphError> {
        self.command_values(RunCommand::resume(resume), config)
            .await
    }

    /// Runs a [`RunCommand`] on the thread (LangGraph's `invoke(Command(…))`): answers its
    /// pending interrupts, applies the update and schedules the `goto` nodes, then runs from
    /// the thread's checkpoint (the latest, or `config.checkpoint_id`: from a past
    /// checkpoint without `resume` this forks, and the update and routing go into the fork).
    /// Returns the final state, as [`invoke`](Self::invoke) does.
    ///
    /// Errors before anything runs: [`GraphError::InvalidArgument`] for an empty command or
    /// a `goto` that names no node, [`GraphError::InvalidUpdate`] for an update key that is
    /// not in the state, [`GraphError::NothingToResume`] on a thread without checkpoints.
    pub async fn invoke_command(
        &self,
        command: RunCommand<S::Update>,
        config: RunConfig,
    ) -> Result<Arc<S>, GraphError> {
        let mut setup = self.command_setup(command, Self::typed_writes)?;
        setup.typed_output = true;
        self.typed_output(self.run_with(config, setup).await?)
    }

    /// [`invoke_command`](Self::invoke_command), returning LangGraph's output as
    /// [`invoke_values`](Self::invoke_values) does.
    pub async fn command_values(
        &self,
        command: RunCommand<S::Update>,
        config: RunConfig,
    ) -> Result<Values, GraphError> {
        let setup = self.command_setup(command, Self::typed_writes)?;
        Ok(self
            .run_with(config, setup)
            .await?
            .into_values(|k| self.is_output(k)))
    }

    /// [`invoke_command`](Self::invoke_command), streaming events as
    /// [`stream`](Self::stream) does.
    pub fn stream_command(
        &self,
        command: RunCommand<S::Update>,
        config: RunConfig,
        modes: &[StreamMode],
    ) -> RunStream<S> {
        match self.command_setup(command, Self::typed_writes) {
            Ok(setup) => self.stream_setup(config, modes, setup),
            Err(e) => RunStream::failed(e),
        }
    }

    /// [`stream_command`](Self::stream_command) with LangGraph's raw values (maps of state
    /// keys, as a client sends them in a run's `command`), validated as
    /// [`stream_values`](Self::stream_values) validates input.
    pub fn stream_command_values(
        &self,
        command: RunCommand<Map>,
        config: RunConfig,
        modes: &[StreamMode],
    ) -> RunStream<S> {
        match self.command_setup(command, crate::state::map_writes) {
            Ok(setup) => self.stream_setup(config, modes, setup),
            Err(e) => RunStream::failed(e),
        }
    }

    fn typed_writes(update: S::Update) -> Result<Vec<(String, Value)>, GraphError> {
        S::into_writes(update)
    }

    /// A command's writes, checked: state keys for the update, known nodes for `goto`.
    pub(crate) fn command_setup<U>(
        &self,
        command: RunCommand<U>,
        writes_of: impl Fn(U) -> Result<Vec<(String, Value)>, GraphError>,
    ) -> Result<RunSetup, GraphError> {
        if command.is_empty() {
            return Err(GraphError::InvalidArgument {
                what: "command".into(),
                message: "it has no resume, update or goto".into(),
            });
        }
        let mut writes = CommandWrites::default();
        for goto in command.goto {
            let node = match &goto {
                Goto::Node(n) => n.as_str(),
                Goto::Send(s) => s.node.as_str(),
            };
            if node == crate::graph::END && matches!(goto, Goto::Node(_)) {
                continue;
            }
            if !self.has_node(node) {
                return Err(GraphError::InvalidArgument {
                    what: "command goto".into(),
                    message: format!(
                        "`{node}` is not a node of the graph (nodes: {})",
                        self.node_names().join(", ")
                    ),
                });
            }
            writes.goto.push(match goto {
                // LangGraph marks the branch with `__start__` for a command's routing.
                Goto::Node(n) => (
                    crate::graph::branch_channel(&n),
                    Value::from(crate::graph::START),
                ),
                Goto::Send(send) => {
                    let arg: Map = writes_of(send.arg)?.into_iter().collect();
                    (
                        reserved::TASKS.to_owned(),
                        crate::node::send_value(&send.node, Value::Map(arg)),
                    )
                }
            });
        }
        if let Some(update) = command.update {
            let update = writes_of(update)?;
            self.check_state_writes(&update)?;
            writes.update = update;
        }
        Ok(RunSetup {
            resume: command.resume.map(ResumeInput::Answer),
            command: writes,
            ..RunSetup::new(self.checkpointer.clone())
        })
    }

    /// Runs with raw input values, a given saver and the enclosing graphs' checkpoint ids
    /// (how a subgraph runs inside its parent's task).
    pub(crate) async fn run_with(
        &self,
        config: RunConfig,
        setup: RunSetup,
    ) -> Result<RunOutcome<S>, GraphError> {
        use tracing::Instrument;
        let span = crate::trace::run_span(&config, setup.subgraph);
        let root = !setup.subgraph;
        let started = std::time::Instant::now();
        async {
            let outcome = self.run_traced(config, setup).await;
            if let Err(e) = &outcome {
                crate::trace::record_error(e);
            }
            if root {
                crate::trace::run_ended(&outcome, started);
            }
            outcome
        }
        .instrument(span)
        .await
    }

    /// [`run_with`](Self::run_with), inside the run's span.
    async fn run_traced(
        &self,
        config: RunConfig,
        mut setup: RunSetup,
    ) -> Result<RunOutcome<S>, GraphError> {
        let queued = match (&config.thread_id, config.queue && setup.parents.is_empty()) {
            (Some(thread), true) => Some(Arc::new(self.run_lock(thread).lock_owned().await)),
            _ => None,
        };
        let setup_typed = setup.typed_output;
        let parents = std::mem::take(&mut setup.parents);
        let mut run = self.start(config, setup.saver.clone(), parents).await?;
        run.save.turn = queued;
        if let Some(e) = &setup.emitter {
            run.stream.graph_run = run.graph_run(e, &setup);
        }
        run.stream.emitter = setup.emitter;
        run.env.store = self.store.clone().or(setup.store);
        run.env.resuming = setup.resuming.unwrap_or(setup.input.is_none());
        let continues = setup.continue_saved && run.checkpoint_config.checkpoint_id.is_some();
        match setup.input {
            Some(input) if !continues => run.first_input(input).await?,
            _ => run.first_resume(setup.resume, setup.command).await?,
        }
        let result = run.run_loop().await;
        let stopped_early = result.is_err() || !run.interrupts.is_empty();
        let flushed = run.flush(stopped_early).await;
        if setup.subgraph
            && let Some(command) = run.parent_command.take()
        {
            flushed?;
            return Ok(RunOutcome {
                values: Values::new(),
                interrupts: Vec::new(),
                state: None,
                parent_command: Some(command),
                complete: false,
            });
        }
        result?;
        flushed?;
        let values = Arc::new(self.read_values(&run.channels));
        let state = if setup_typed {
            let s = Arc::new(run.typed_state(&values)?);
            run.env.typed = Some((Arc::clone(&s), Arc::clone(&values)));
            Some(s)
        } else {
            None
        };
        run.remember_head();
        std::mem::take(&mut run.stream.graph_run).end_graph(|| crate::cache::input_map(&values));
        Ok(RunOutcome {
            values: Arc::unwrap_or_clone(values),
            interrupts: std::mem::take(&mut run.interrupts),
            state,
            parent_command: None,
            complete: run.complete,
        })
    }

    async fn start(
        &self,
        config: RunConfig,
        saver: Option<Arc<dyn CheckpointSaver>>,
        parents: BTreeMap<String, String>,
    ) -> Result<Run<'_, S>, GraphError> {
        let (saved, checkpoint_config, expected_latest) = match &saver {
            Some(s) => {
                let thread = self.thread_of(&config)?;
                let cc = config.checkpoint_config(thread);
                let saved = crate::trace::saver_call(
                    s.as_ref(),
                    crate::trace::Op::GetTuple,
                    None,
                    s.get_tuple(&cc),
                )
                .await?;
                // The run's checkpoints are saved on condition that nobody else moved the
                // thread on since this point (see `CheckpointSaver::put_if_latest`).
                let latest = if cc.checkpoint_id.is_none() {
                    saved.as_ref().map(|t| t.checkpoint.id.clone())
                } else {
                    let latest_config = CheckpointConfig {
                        checkpoint_id: None,
                        ..cc.clone()
                    };
                    crate::trace::saver_call(
                        s.as_ref(),
                        crate::trace::Op::GetTuple,
                        None,
                        s.get_tuple(&latest_config),
                    )
                    .await?
                    .map(|t| t.checkpoint.id.clone())
                };
                (saved, cc, latest)
            }
            None => (None, CheckpointConfig::default(), None),
        };
        let mut saved = saved;
        if let (Some(s), Some(t)) = (&saver, saved.as_mut()) {
            self.hydrate(s.as_ref(), t).await?;
        }
        let delta_counters = saved
            .as_ref()
            .map(|t| crate::delta::counters_of(&t.metadata))
            .unwrap_or_default();
        let (previous_versions, step, checkpoint_config, pending_writes, checkpoint) = match saved {
            Some(t) => (
                t.checkpoint.channel_versions.clone(),
                t.metadata.step.unwrap_or(-1) + 1,
                t.config,
                t.pending_writes,
                Arc::unwrap_or_clone(t.checkpoint),
            ),
            None => (
                ChannelVersions::new(),
                -1,
                CheckpointConfig {
                    checkpoint_id: None,
                    ..checkpoint_config
                },
                Vec::new(),
                Checkpoint::empty(),
            ),
        };
        let delta_loaded_writes = self.delta_channels_in(&pending_writes);
        let typed = checkpoint_config
            .checkpoint_id
            .as_deref()
            .and_then(|id| {
                self.head.take(
                    &checkpoint_config.thread_id,
                    &checkpoint_config.checkpoint_ns,
                    id,
                )
            })
            .and_then(|head| head.typed);
        let channels = channels_from_checkpoint(&self.channel_specs, &checkpoint);
        let exit_parent = checkpoint_config.clone();
        let limit = i64::try_from(config.recursion_limit).unwrap_or(i64::MAX);
        if limit < 1 {
            return Err(GraphError::InvalidConfig(
                "recursion_limit must be at least 1".into(),
            ));
        }
        let stop = step.saturating_add(limit).saturating_add(1);
        Ok(Run {
            graph: self,
            config: Arc::new(config),
            saver,
            checkpoint,
            metadata: CheckpointMetadata::default(),
            channels,
            step,
            stop,
            checkpoint_config,
            pending_writes,
            updated_channels: None,
            interrupts: Vec::new(),
            env: TaskEnv {
                parents,
                store: None,
                resume: ResumeSource::default(),
                typed,
                resuming: false,
            },
            save: SaveState {
                previous_versions,
                expected_latest: expected_latest.clone(),
                pending: Vec::new(),
                writer: None,
                turn: None,
            },
            delta: DeltaState {
                counters: delta_counters,
                forced: BTreeSet::new(),
                loaded_writes: delta_loaded_writes,
            },
            exit: ExitState {
                parent: exit_parent,
                expected: expected_latest,
                writes: Vec::new(),
                delta_writes: Vec::new(),
                first_step: None,
            },
            stream: StreamState {
                emitter: None,
                messages_seeded: false,
                unannounced: None,
                graph_run: crate::stream::ChildRun::off(),
                task_runs: std::collections::HashMap::new(),
            },
            parent_command: None,
            complete: false,
            calls: Vec::new(),
            cache_keys: Default::default(),
            handlers: Default::default(),
        })
    }
}
