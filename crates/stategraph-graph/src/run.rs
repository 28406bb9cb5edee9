//! The Pregel loop: super-steps, each checkpointed exactly when LangGraph checkpoints.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use stategraph_checkpoint::store::Store;
use stategraph_checkpoint::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata,
    CheckpointSaver, CheckpointSource, Map, PendingWrite, SaveOp, Value, channels as reserved,
};
use tokio::task::JoinSet;

use crate::algo::{
    Channels, INPUT, INTERRUPT, NodeTriggers, Task, ValuesFrom, apply_writes,
    channels_from_checkpoint, create_checkpoint, new_versions, prepare_next_tasks,
};
use crate::compiled::CompiledGraph;
use crate::config::{Durability, RunConfig};
use crate::error::{GraphError, NodeError};
use crate::graph::START;
use crate::interrupt::{Interrupt, Resume, ResumeSource, Scratchpad, interrupt_id};
use crate::node::{NodeContext, NodeOutput};
use crate::state::{State, Values};
use crate::stream::{Emitter, RunStream, StreamMode};

/// Turns a parent-addressed `Command` into the error that carries it out of the subgraph.
fn parent_command<S: State>(c: crate::node::Command<S::Update>) -> Result<NodeError, NodeError> {
    let update = match c.update {
        Some(u) => S::into_writes(u).map_err(NodeError::from)?,
        None => Vec::new(),
    };
    let mut cmd = crate::error::ParentCommand {
        update,
        goto: Vec::new(),
        sends: Vec::new(),
    };
    for g in c.goto {
        match g {
            crate::node::Goto::Node(n) => cmd.goto.push(n),
            crate::node::Goto::Send(s) => {
                let arg: Map = S::into_writes(s.arg)
                    .map_err(NodeError::from)?
                    .into_iter()
                    .collect();
                cmd.sends.push((s.node, Value::Map(arg)));
            }
        }
    }
    Ok(NodeError {
        message: "ParentCommand".to_owned(),
        parent_command: Some(Box::new(cmd)),
        interrupts: Vec::new(),
    })
}

/// A background save that panicked or was cancelled.
fn join_error(e: tokio::task::JoinError) -> GraphError {
    GraphError::Checkpoint(stategraph_checkpoint::Error::backend(
        "graph",
        "a background checkpoint save did not complete",
        e,
    ))
}

/// LangGraph's `should_interrupt`: some channel moved since the last interrupt/resume, and a
/// task of the step is one of `nodes` (`*`: any node but `__start__`).
fn should_interrupt(checkpoint: &Checkpoint, nodes: &[String], tasks: &[Task]) -> bool {
    if nodes.is_empty() {
        return false;
    }
    let seen = checkpoint.versions_seen.get(INTERRUPT);
    let moved =
        checkpoint
            .channel_versions
            .iter()
            .any(|(ch, v)| match seen.and_then(|s| s.get(ch)) {
                Some(s) => v > s,
                None => true,
            });
    moved
        && tasks.iter().any(|t| {
            nodes
                .iter()
                .any(|n| n == &t.name || (n == "*" && t.name != START))
        })
}

/// Control writes, which do not make a task count as finished.
fn is_control(channel: &str) -> bool {
    matches!(
        channel,
        reserved::ERROR | reserved::ERROR_SOURCE_NODE | reserved::INTERRUPT | reserved::RESUME
    )
}

/// State values as a map value.
fn values_map(values: &Values) -> Value {
    Value::Map(
        values
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect(),
    )
}

/// A checkpoint address as LangGraph's config dict (or null).
fn config_value(config: Option<&CheckpointConfig>) -> Value {
    config.map_or(Value::Null, |c| Value::from(c.to_json()))
}

/// A `Send` argument as state values (a map of keys; anything else is empty).
fn arg_values(arg: &Value) -> Values {
    match arg {
        Value::Map(m) => m
            .iter()
            .filter_map(|(k, v)| Some((k.as_str()?.to_owned(), v.clone())))
            .collect(),
        _ => Values::new(),
    }
}

/// Where an `exit`-durability delta write is stored: (synthetic task id, task path).
type ExitKey = (String, String);

/// A task's saved-later writes: (task id, task path, writes).
type TaskWrites = (String, String, Vec<(String, Value)>);

/// How a run starts: its input (or a resume), where it saves, and who is listening.
pub(crate) struct RunSetup {
    pub(crate) input: Option<Map>,
    pub(crate) resume: Option<ResumeInput>,
    pub(crate) saver: Option<Arc<dyn CheckpointSaver>>,
    pub(crate) parents: BTreeMap<String, String>,
    pub(crate) emitter: Option<Emitter>,
    /// The store a subgraph inherits from its parent's task.
    pub(crate) store: Option<Arc<dyn Store>>,
    /// Build the typed final state (for `invoke`).
    pub(crate) typed_output: bool,
}

impl RunSetup {
    pub(crate) fn new(saver: Option<Arc<dyn CheckpointSaver>>) -> Self {
        Self {
            input: None,
            resume: None,
            saver,
            parents: BTreeMap::new(),
            emitter: None,
            store: None,
            typed_output: false,
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

/// The background saver of `async` durability: applies the batches of saves the run hands
/// it, in order, merging whatever queued up while the previous batch was being written (one
/// transaction for many steps where the saver supports it — group commit).
struct BackgroundWriter {
    queue: tokio::sync::mpsc::UnboundedSender<Vec<SaveOp>>,
    handle: tokio::task::JoinHandle<Result<(), GraphError>>,
}

impl BackgroundWriter {
    fn start(saver: Arc<dyn CheckpointSaver>) -> Self {
        let (queue, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<SaveOp>>();
        let handle = tokio::spawn(async move {
            while let Some(mut batch) = rx.recv().await {
                while let Ok(more) = rx.try_recv() {
                    batch.extend(more);
                }
                saver.apply_batch(&batch).await?;
            }
            Ok(())
        });
        Self { queue, handle }
    }

    /// Waits until everything queued is saved; the first error, if any.
    async fn finish(self) -> Result<(), GraphError> {
        drop(self.queue);
        self.handle.await.map_err(join_error)?
    }
}

/// What a run ends with.
pub(crate) struct RunOutcome<S> {
    pub(crate) values: Values,
    /// Interrupts raised by the last step (the run stopped there).
    pub(crate) interrupts: Vec<Interrupt>,
    /// The typed final state, when asked for.
    pub(crate) state: Option<Arc<S>>,
}

impl<S> RunOutcome<S> {
    /// The values, plus `__interrupt__` when the run stopped on interrupts (as LangGraph's
    /// invoke output has it).
    pub(crate) fn into_values(mut self) -> Values {
        if !self.interrupts.is_empty() {
            self.values.insert(
                reserved::INTERRUPT.to_owned(),
                Value::List(self.interrupts.iter().map(Interrupt::to_value).collect()),
            );
        }
        self.values
    }
}

/// A finished node: its task's index and what it returned.
type TaskOutcome<S> = (usize, Result<NodeOutput<<S as State>::Update>, NodeError>);

/// A node's run (with its retries), as a future that can move to its own task.
type TaskFuture<S> = std::pin::Pin<Box<dyn std::future::Future<Output = TaskOutcome<S>> + Send>>;

/// Polls `task` once, in place: its outcome if it finished without waiting. A panic in the
/// node becomes the task's error. (A future may be polled with any waker and then moved to
/// another task, which polls it with its own.)
fn poll_once<S: State>(i: usize, task: &mut TaskFuture<S>) -> Option<TaskOutcome<S>> {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| task.as_mut().poll(&mut cx))) {
        Ok(std::task::Poll::Ready(outcome)) => Some(outcome),
        Ok(std::task::Poll::Pending) => None,
        Err(panic) => Some((i, Err(panicked(Some(panic))))),
    }
}

/// The error of a node that panicked (or whose task was cancelled).
fn panicked(payload: Option<Box<dyn std::any::Any + Send>>) -> NodeError {
    let what = payload
        .as_ref()
        .and_then(|p| {
            p.downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| p.downcast_ref::<String>().cloned())
        })
        .unwrap_or_else(|| "no message".to_owned());
    match payload {
        Some(_) => NodeError::new(format!("the node panicked: {what}")),
        None => NodeError::new("the node's task was cancelled"),
    }
}

/// The mutable state of one run.
struct Run<'g, S: State> {
    graph: &'g CompiledGraph<S>,
    config: Arc<RunConfig>,
    saver: Option<Arc<dyn CheckpointSaver>>,
    checkpoint: Checkpoint,
    channels: Channels,
    step: i64,
    /// Where the next checkpoint is put: the thread, namespace and (as parent) current id.
    checkpoint_config: CheckpointConfig,
    previous_versions: ChannelVersions,
    pending_writes: Vec<PendingWrite>,
    updated_channels: Option<BTreeSet<String>>,
    parents: BTreeMap<String, String>,
    /// LangGraph's `stop`: step at start + recursion limit + 1; a tick beyond it fails.
    stop: i64,
    emitter: Option<Emitter>,
    /// The store nodes see (the graph's, else the parent task's).
    store: Option<Arc<dyn Store>>,
    /// The checkpoint saved last, not yet announced on the stream, and its parent.
    unannounced: Option<Option<CheckpointConfig>>,
    metadata: CheckpointMetadata,
    /// Answers to interrupts available to this run's tasks.
    resume: ResumeSource,
    /// Interrupts raised in the current step.
    interrupts: Vec<Interrupt>,
    /// The newest checkpoint of the thread's namespace as this run last saw it.
    expected_latest: Option<String>,
    /// `async` durability: the saves not yet handed to the background writer. They are
    /// handed over as one batch whenever the run waits (for a node that does not finish at
    /// once), and applied at the end otherwise, so a run whose nodes never wait commits once.
    pending_saves: Vec<SaveOp>,
    /// The background saver of `async` durability (started when the run first waits).
    writer: Option<BackgroundWriter>,
    /// `exit` durability: where the final checkpoint goes, on what condition, and the last
    /// step's task writes.
    exit_parent: CheckpointConfig,
    exit_expected: Option<String>,
    exit_writes: Vec<TaskWrites>,
    /// Delta channels: the counters of the last checkpoint, and the channels the next saved
    /// checkpoint must snapshot whatever the counters say.
    delta_counters: crate::delta::Counters,
    delta_forced: BTreeSet<String>,
    /// The delta channels the loaded checkpoint's stored writes touch.
    delta_loaded_writes: BTreeSet<String>,
    /// `exit` durability: the delta channel writes of every finished step, stored at the end
    /// (step, task id, task path, channel, value), and the run's first step.
    exit_delta_writes: Vec<(i64, String, String, String, Value)>,
    exit_first_step: Option<i64>,
    /// The typed state nodes last read, with the values it was built from: the next one is
    /// built from it, converting only what changed.
    typed: Option<crate::head::TypedState<S>>,
}

impl<S: State> CompiledGraph<S> {
    /// Runs the graph on `input` (or, with `None`, resumes the thread from its checkpoint)
    /// and returns the final state, typed. It is shared (nodes receive it the same way) and
    /// built from the state the last node read, converting only what the run changed. If
    /// the run stopped on interrupts, the state is the one they were raised on; the
    /// interrupts are in [`get_state`](Self::get_state)`.interrupts` (or use
    /// [`invoke_values`](Self::invoke_values), whose output carries them as LangGraph's does).
    pub async fn invoke(
        &self,
        input: Option<S::Update>,
        config: RunConfig,
    ) -> Result<Arc<S>, GraphError> {
        let setup = self.input_setup(input)?;
        self.typed_output(self.run_with(config, setup).await?)
    }

    /// [`invoke`](Self::invoke), returning LangGraph's output: the state keys' values, plus
    /// `__interrupt__` when the run stopped on interrupts.
    pub async fn invoke_values(
        &self,
        input: Option<S::Update>,
        config: RunConfig,
    ) -> Result<Values, GraphError> {
        let mut setup = self.input_setup(input)?;
        setup.typed_output = false;
        Ok(self.run_with(config, setup).await?.into_values())
    }

    fn input_setup(&self, input: Option<S::Update>) -> Result<RunSetup, GraphError> {
        let input = match input {
            Some(update) => {
                let writes = S::input_writes(update)?;
                self.check_state_writes(&writes)?;
                Some(writes.into_iter().collect())
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
    /// state, as [`invoke`](Self::invoke) does.
    pub async fn resume(&self, resume: Resume, config: RunConfig) -> Result<Arc<S>, GraphError> {
        let setup = RunSetup {
            resume: Some(ResumeInput::Answer(resume)),
            typed_output: true,
            ..RunSetup::new(self.checkpointer.clone())
        };
        self.typed_output(self.run_with(config, setup).await?)
    }

    /// [`resume`](Self::resume), returning LangGraph's output as
    /// [`invoke_values`](Self::invoke_values) does.
    pub async fn resume_values(
        &self,
        resume: Resume,
        config: RunConfig,
    ) -> Result<Values, GraphError> {
        let setup = RunSetup {
            resume: Some(ResumeInput::Answer(resume)),
            ..RunSetup::new(self.checkpointer.clone())
        };
        Ok(self.run_with(config, setup).await?.into_values())
    }

    /// Like [`invoke`](Self::invoke), streaming events of the given modes as the run goes.
    ///
    /// ```no_run
    /// # async fn demo(graph: stategraph_graph::CompiledGraph<stategraph_graph::DynState>) -> Result<(), stategraph_graph::GraphError> {
    /// use stategraph_graph::{RunConfig, StreamMode};
    /// let mut stream = graph.stream(None, RunConfig::thread("1"), &[StreamMode::Updates]);
    /// while let Some(part) = stream.next().await {
    ///     println!("{}: {}", part.mode.as_str(), part.data);
    /// }
    /// let final_values = stream.result().await?;
    /// # Ok(()) }
    /// ```
    pub fn stream(
        &self,
        input: Option<S::Update>,
        config: RunConfig,
        modes: &[StreamMode],
    ) -> RunStream<'_> {
        let input = match input {
            Some(update) => S::input_writes(update).and_then(|writes| {
                self.check_state_writes(&writes)?;
                Ok(Some(writes.into_iter().collect::<Map>()))
            }),
            None => Ok(None),
        };
        RunStream::new(modes, move |emitter| {
            Box::pin(async move {
                let setup = RunSetup {
                    input: input?,
                    emitter: Some(emitter),
                    ..RunSetup::new(self.checkpointer.clone())
                };
                Ok(self.run_with(config, setup).await?.into_values())
            })
        })
    }

    /// Runs with raw input values, a given saver and the enclosing graphs' checkpoint ids
    /// (how a subgraph runs inside its parent's task).
    pub(crate) async fn run_with(
        &self,
        config: RunConfig,
        setup: RunSetup,
    ) -> Result<RunOutcome<S>, GraphError> {
        let _queued = match (&config.thread_id, config.queue && setup.parents.is_empty()) {
            (Some(thread), true) => Some(self.run_lock(thread).lock_owned().await),
            _ => None,
        };
        let setup_typed = setup.typed_output;
        let mut run = self.start(config, setup.saver, setup.parents).await?;
        run.emitter = setup.emitter;
        run.store = self.store.clone().or(setup.store);
        match setup.input {
            Some(input) => run.first_input(input).await?,
            None => run.first_resume(setup.resume).await?,
        }
        let result = run.run_loop().await;
        let stopped_early = result.is_err() || !run.interrupts.is_empty();
        let flushed = run.flush(stopped_early).await;
        result?;
        flushed?;
        let values = Arc::new(self.read_values(&run.channels));
        let state = if setup_typed {
            let s = Arc::new(run.typed_state(&values)?);
            run.typed = Some((Arc::clone(&s), Arc::clone(&values)));
            Some(s)
        } else {
            None
        };
        run.remember_head();
        Ok(RunOutcome {
            values: Arc::unwrap_or_clone(values),
            interrupts: std::mem::take(&mut run.interrupts),
            state,
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
                let saved = s.get_tuple(&cc).await?;
                // The run's checkpoints are saved on condition that nobody else moved the
                // thread on since this point (see `CheckpointSaver::put_if_latest`).
                let latest = if cc.checkpoint_id.is_none() {
                    saved.as_ref().map(|t| t.checkpoint.id.clone())
                } else {
                    let latest_config = CheckpointConfig {
                        checkpoint_id: None,
                        ..cc.clone()
                    };
                    s.get_tuple(&latest_config).await?.map(|t| t.checkpoint.id)
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
        let (checkpoint, step, checkpoint_config, pending_writes, previous_versions) = match saved {
            Some(t) => (
                t.checkpoint.clone(),
                t.metadata.step.unwrap_or(-1) + 1,
                t.config,
                t.pending_writes,
                t.checkpoint.channel_versions,
            ),
            None => (
                Checkpoint::empty(),
                -1,
                CheckpointConfig {
                    checkpoint_id: None,
                    ..checkpoint_config
                },
                Vec::new(),
                ChannelVersions::new(),
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
            channels,
            step,
            checkpoint_config,
            previous_versions,
            pending_writes,
            updated_channels: None,
            parents,
            stop,
            emitter: None,
            store: None,
            unannounced: None,
            metadata: CheckpointMetadata::default(),
            resume: ResumeSource::default(),
            interrupts: Vec::new(),
            exit_parent,
            exit_expected: expected_latest.clone(),
            expected_latest,
            pending_saves: Vec::new(),
            writer: None,
            exit_writes: Vec::new(),
            delta_counters,
            delta_forced: BTreeSet::new(),
            delta_loaded_writes,
            exit_delta_writes: Vec::new(),
            exit_first_step: None,
            typed,
        })
    }
}

impl<S: State> Run<'_, S> {
    /// Tells the graph's head cache what this run ended on (its last saved checkpoint).
    fn remember_head(&mut self) {
        if self.saver.is_none() {
            return;
        }
        let Some(id) = self.checkpoint_config.checkpoint_id.clone() else {
            return;
        };
        let rebuilt = self
            .graph
            .delta_channels()
            .filter_map(|(k, _)| Some((k.to_owned(), self.channels.get(k)?.get()?)))
            .collect();
        let head = crate::head::Head {
            checkpoint_id: id,
            rebuilt,
            typed: self.typed.take(),
        };
        let cc = &self.checkpoint_config;
        self.graph.head.put(&cc.thread_id, &cc.checkpoint_ns, head);
    }

    /// `apply_writes` with the saver's version scheme (integers without a saver).
    fn apply(&mut self, tasks: &[&Task]) -> Result<BTreeSet<String>, GraphError> {
        let saver = self.saver.clone();
        let next = move |cur: Option<&ChannelVersion>| match &saver {
            Some(s) => s.get_next_version(cur),
            None => ChannelVersion::Int(cur.map_or(0, ChannelVersion::counter) + 1),
        };
        apply_writes(
            &mut self.checkpoint,
            &mut self.channels,
            tasks,
            Some(&next),
            &self.graph.trigger_channels,
        )
    }

    /// New input: discard the tasks pending on the loaded checkpoint, write the input to
    /// `__start__`, save the `input` checkpoint.
    async fn first_input(&mut self, input: Map) -> Result<(), GraphError> {
        let discard = self.next_tasks();
        let input_task = Task {
            id: String::new(),
            name: INPUT.to_owned(),
            path: Vec::new(),
            triggers: Vec::new(),
            writes: vec![(START.to_owned(), Value::Map(input))],
            input: None,
        };
        let mut all: Vec<&Task> = discard.iter().collect();
        all.push(&input_task);
        let updated = self.apply(&all)?;
        self.updated_channels = Some(updated);
        self.pending_writes.clear();
        // The loaded checkpoint's stored writes are not applied (its pending tasks are
        // discarded), yet a walk from the new checkpoints would replay them.
        self.delta_forced
            .extend(std::mem::take(&mut self.delta_loaded_writes));
        self.put_checkpoint(CheckpointSource::Input).await
    }

    /// No input: continue from the loaded checkpoint, applying writes that belong to no task.
    ///
    /// With an explicit `checkpoint_id` this is a replay (time travel): finished tasks run
    /// again instead of reusing their saved writes, and unless the checkpoint is the thread's
    /// latest `update`/`fork` checkpoint, a `fork` copy is written first so the replay forms a
    /// new branch next to the old one.
    async fn first_resume(&mut self, resume: Option<ResumeInput>) -> Result<(), GraphError> {
        if self.checkpoint.channel_versions.is_empty() {
            return Err(GraphError::InvalidConfig(
                "no input was given and the thread has no checkpoint to resume from".into(),
            ));
        }
        let answering = resume.is_some();
        match resume {
            Some(ResumeInput::Inherited(source)) => self.resume = source,
            Some(ResumeInput::Answer(Resume::ById(map))) => {
                self.resume.by_id = Some(Arc::new(map));
            }
            Some(ResumeInput::Answer(Resume::Value(v))) => {
                let pending = self.pending_interrupts();
                if pending.len() > 1 {
                    return Err(GraphError::InvalidConfig(format!(
                        "{} interrupts are pending ({}); resume them by id",
                        pending.len(),
                        pending.join(", ")
                    )));
                }
                let write = vec![(reserved::RESUME.to_owned(), v.clone())];
                if let Some(saver) = &self.saver {
                    saver
                        .put_writes(
                            &self.checkpoint_config,
                            &write,
                            stategraph_checkpoint::NULL_TASK_ID,
                            "",
                        )
                        .await?;
                }
                // The saved answer replaces an earlier one (the write is an upsert).
                self.pending_writes.retain(|w| {
                    !(w.task_id == stategraph_checkpoint::NULL_TASK_ID
                        && w.channel == reserved::RESUME)
                });
                self.pending_writes.push(PendingWrite {
                    task_id: stategraph_checkpoint::NULL_TASK_ID.to_owned(),
                    channel: reserved::RESUME.to_owned(),
                    value: v,
                    task_path: String::new(),
                    idx: -4,
                });
            }
            None => {}
        }
        // The answer written without a task waits for the first interrupt that asks.
        if let Some(w) = self.pending_writes.iter().find(|w| {
            w.task_id == stategraph_checkpoint::NULL_TASK_ID && w.channel == reserved::RESUME
        }) {
            let mut null = self.resume.null.lock().unwrap_or_else(|e| e.into_inner());
            if null.is_none() {
                *null = Some(w.value.clone());
            }
        }
        let null_writes: Vec<(String, Value)> = self
            .pending_writes
            .iter()
            .filter(|w| w.task_id == stategraph_checkpoint::NULL_TASK_ID)
            .map(|w| (w.channel.clone(), w.value.clone()))
            .collect();
        if !null_writes.is_empty() {
            let task = Task {
                id: String::new(),
                name: INPUT.to_owned(),
                path: Vec::new(),
                triggers: Vec::new(),
                writes: null_writes,
                input: None,
            };
            self.apply(&[&task])?;
        }
        let seen = self.checkpoint.channel_versions.clone();
        self.checkpoint
            .versions_seen
            .insert(INTERRUPT.to_owned(), seen);
        if self.config.checkpoint_id.is_some() && !answering {
            self.replay().await?;
        }
        // A resumed run streams the state it resumes from, as LangGraph does.
        if let Some(e) = &self.emitter {
            let values = self.graph.read_values(&self.channels);
            e.emit(StreamMode::Values, || values_map(&values));
        }
        Ok(())
    }

    /// Ids of the interrupts raised on the current checkpoint by tasks that have not finished.
    fn pending_interrupts(&self) -> Vec<String> {
        let finished: BTreeSet<&str> = self
            .pending_writes
            .iter()
            .filter(|w| !is_control(&w.channel))
            .map(|w| w.task_id.as_str())
            .collect();
        self.pending_writes
            .iter()
            .filter(|w| w.channel == reserved::INTERRUPT && !finished.contains(w.task_id.as_str()))
            .flat_map(|w| Interrupt::all_from(&w.value))
            .map(|i| i.id)
            .collect()
    }

    async fn replay(&mut self) -> Result<(), GraphError> {
        // Stored writes of the addressed checkpoint are not reused: everything re-runs (and
        // delta channels they touch snapshot, as a walk would replay them).
        self.pending_writes.clear();
        self.delta_forced
            .extend(std::mem::take(&mut self.delta_loaded_writes));
        let Some(saver) = self.saver.clone() else {
            return Ok(());
        };
        let here = self.checkpoint_config.clone();
        let latest = saver
            .get_tuple(&CheckpointConfig {
                checkpoint_id: None,
                ..here.clone()
            })
            .await?;
        let this = saver.get_tuple(&here).await?;
        let superseded =
            latest.is_none_or(|l| Some(&l.checkpoint.id) != here.checkpoint_id.as_ref());
        let source = this.and_then(|t| t.metadata.source);
        if superseded
            || matches!(
                source,
                Some(CheckpointSource::Input | CheckpointSource::Loop)
            )
        {
            self.updated_channels = None;
            self.put_checkpoint(CheckpointSource::Fork).await?;
        }
        Ok(())
    }

    /// LangGraph's `_put_checkpoint`: create the next checkpoint from the channels, save it
    /// with the versions that moved, and advance the step.
    async fn put_checkpoint(&mut self, source: CheckpointSource) -> Result<(), GraphError> {
        let exit = self.config.durability == Durability::Exit;
        let plan = {
            let forced = self.delta_forced.clone();
            let saver = self.saver.clone();
            let next = move |cur: Option<&ChannelVersion>| match &saver {
                Some(s) => s.get_next_version(cur),
                None => ChannelVersion::Int(cur.map_or(0, ChannelVersion::counter) + 1),
            };
            let updated = self.updated_channels.clone().unwrap_or_default();
            let step = crate::delta::StepDelta {
                previous: &self.delta_counters,
                updated: &updated,
                forced: &forced,
                stored: &self.previous_versions,
                // With `exit` durability the counters only count until the run ends.
                saved: !exit,
                count: true,
            };
            self.graph
                .plan_snapshots(&mut self.checkpoint, &self.channels, &step, &next)
        };
        let values = if self.saver.is_some() {
            ValuesFrom::Channels(&self.channels)
        } else {
            ValuesFrom::Skip
        };
        create_checkpoint(
            &mut self.checkpoint,
            values,
            self.step,
            self.updated_channels.as_ref(),
            &plan.snapshot,
        );
        if self.saver.is_some() && !exit {
            for ch in &plan.snapshot {
                self.delta_forced.remove(ch);
            }
        }
        self.delta_counters = plan.counters;
        let mut metadata = CheckpointMetadata::new(source, self.step);
        metadata.parents = Some(self.parents.clone());
        self.config.merge_into_metadata(&mut metadata);
        crate::delta::set_counters(&mut metadata, &self.delta_counters);
        self.metadata = metadata.clone();
        let parent = self
            .checkpoint_config
            .checkpoint_id
            .is_some()
            .then(|| self.checkpoint_config.clone());
        if let Some(saver) = self.saver.clone() {
            let stored = CheckpointConfig {
                checkpoint_id: Some(self.checkpoint.id.clone()),
                ..self.checkpoint_config.clone()
            };
            match self.config.durability {
                // Nothing is saved until the run ends.
                Durability::Exit => {}
                Durability::Sync => {
                    let changed = self.versions_moved();
                    saver
                        .put_if_latest(
                            &self.checkpoint_config,
                            &self.checkpoint,
                            &metadata,
                            &changed,
                            self.expected_latest.as_deref(),
                        )
                        .await?;
                }
                Durability::Async => {
                    // Saved in the background, in order, while the run goes on with the
                    // next step. The values move to the save instead of being copied: the
                    // loop reads values from its channels, never from its checkpoint (only
                    // `exit` keeps them, for the save at the end).
                    let new_versions = self.versions_moved();
                    let values = std::mem::take(&mut self.checkpoint.channel_values);
                    let op = SaveOp::Put {
                        config: self.checkpoint_config.clone(),
                        checkpoint: Box::new(Checkpoint {
                            channel_values: values,
                            ..self.checkpoint.clone()
                        }),
                        metadata,
                        new_versions,
                        expected_latest: self.expected_latest.clone(),
                    };
                    self.enqueue(op);
                }
            }
            self.expected_latest = stored.checkpoint_id.clone();
            self.checkpoint_config = stored;
            self.unannounced = Some(parent);
        }
        self.step += 1;
        Ok(())
    }

    /// Ends the run's saving: waits for background saves (`async`), or saves the final
    /// checkpoint — and, if the run stopped on an error or interrupt, its last step's writes —
    /// (`exit`).
    async fn flush(&mut self, stopped_early: bool) -> Result<(), GraphError> {
        if let Some(writer) = self.writer.take() {
            writer.finish().await?;
        }
        let Some(saver) = self.saver.clone() else {
            return Ok(());
        };
        let pending = std::mem::take(&mut self.pending_saves);
        if !pending.is_empty() {
            saver.apply_batch(&pending).await?;
        }
        if self.config.durability != Durability::Exit
            || self.checkpoint_config.checkpoint_id.is_none()
        {
            return Ok(());
        }
        let stored = if self.exit_parent.checkpoint_id.as_deref()
            == Some(self.checkpoint.id.as_str())
        {
            // The run made no checkpoint (a finished thread continued, or its first step
            // failed): the one it started from is stored already and is never rewritten
            // under its id; what the step's finished tasks wrote belongs to it.
            self.exit_parent.clone()
        } else {
            self.put_exit_delta_writes(&saver).await?;
            let changed = new_versions(&self.previous_versions, &self.checkpoint.channel_versions);
            saver
                .put_if_latest(
                    &self.exit_parent,
                    &self.checkpoint,
                    &self.metadata,
                    &changed,
                    self.exit_expected.as_deref(),
                )
                .await?
        };
        if stopped_early {
            for (task_id, path, writes) in std::mem::take(&mut self.exit_writes) {
                saver.put_writes(&stored, &writes, &task_id, &path).await?;
            }
        }
        Ok(())
    }

    async fn run_loop(&mut self) -> Result<(), GraphError> {
        loop {
            if self.step > self.stop {
                return Err(GraphError::RecursionLimit {
                    limit: self.config.recursion_limit,
                });
            }
            let candidates = self.updated_channels.as_ref().map(|u| {
                u.iter()
                    .filter_map(|ch| self.graph.trigger_to_nodes.get(ch))
                    .flatten()
                    .cloned()
                    .collect::<BTreeSet<String>>()
            });
            let mut tasks = match &candidates {
                // Only the nodes the last step's channels trigger (found by name, sorted),
                // not every node of the graph.
                Some(c) => {
                    let pull: Vec<NodeTriggers<'_>> = c
                        .iter()
                        .filter_map(|name| self.graph.node_index.get(name))
                        .filter_map(|&i| self.graph.nodes.get(i))
                        .map(|n| NodeTriggers {
                            name: &n.name,
                            triggers: &n.triggers,
                        })
                        .collect();
                    let graph = self.graph;
                    let is_node = |name: &str| graph.node_index.contains_key(name);
                    let mut tasks = crate::algo::prepare_push_tasks(
                        &self.checkpoint,
                        &self.channels,
                        &is_node,
                        self.step,
                        &self.checkpoint_config.checkpoint_ns,
                    );
                    tasks.extend(crate::algo::prepare_pull_tasks(
                        &self.checkpoint,
                        &self.channels,
                        &pull,
                        self.step,
                        &self.checkpoint_config.checkpoint_ns,
                        None,
                    ));
                    tasks
                }
                None => self.next_tasks(),
            };
            self.announce_checkpoint(&tasks);
            if tasks.is_empty() {
                return Ok(());
            }
            self.reuse_finished_writes(&mut tasks);
            // Writes reused from the loaded checkpoint are stored on it already.
            let reused: BTreeSet<String> = tasks
                .iter()
                .filter(|t| !t.writes.is_empty())
                .map(|t| t.id.clone())
                .collect();
            let before = self
                .config
                .interrupt_before
                .as_ref()
                .unwrap_or(&self.graph.interrupt_before);
            if should_interrupt(&self.checkpoint, before, &tasks) {
                return Ok(());
            }
            self.execute(&mut tasks).await?;
            if !self.interrupts.is_empty() {
                // The step stops here; its finished tasks' writes are saved, and the thread
                // waits on the checkpoint the step started from.
                return Ok(());
            }
            // An answer no interrupt took does not carry over to later steps.
            if let Ok(mut null) = self.resume.null.lock() {
                null.take();
            }
            let refs: Vec<&Task> = tasks.iter().collect();
            let updated = self.apply(&refs)?;
            if let Some(e) = &self.emitter
                && updated.iter().any(|c| self.graph.schema.contains(c))
            {
                let values = self.graph.read_values(&self.channels);
                e.emit(StreamMode::Values, || values_map(&values));
            }
            self.updated_channels = Some(updated);
            self.pending_writes.clear();
            self.exit_writes.clear();
            if self.config.durability == Durability::Exit && self.saver.is_some() {
                self.keep_exit_delta_writes(&tasks, &reused);
            }
            self.put_checkpoint(CheckpointSource::Loop).await?;
            let after = self
                .config
                .interrupt_after
                .as_ref()
                .unwrap_or(&self.graph.interrupt_after);
            if should_interrupt(&self.checkpoint, after, &tasks) {
                let next = self.next_tasks();
                self.announce_checkpoint(&next);
                return Ok(());
            }
        }
    }

    /// `exit` durability: keeps this step's delta channel writes for the end of the run.
    fn keep_exit_delta_writes(&mut self, tasks: &[Task], reused: &BTreeSet<String>) {
        let first = self.exit_first_step.is_none();
        if first {
            self.exit_first_step = Some(self.step);
        }
        let delta: BTreeSet<&str> = self.graph.delta_channels().map(|(k, _)| k).collect();
        for t in tasks {
            if first && reused.contains(&t.id) {
                continue;
            }
            for (ch, v) in &t.writes {
                if delta.contains(ch.as_str()) {
                    self.exit_delta_writes.push((
                        self.step,
                        t.id.clone(),
                        t.path_str(),
                        ch.clone(),
                        v.clone(),
                    ));
                }
            }
        }
    }

    /// `exit` durability, before the final checkpoint is put: snapshots the delta channels
    /// that are due (or cannot be rebuilt from writes on the checkpoint the run started
    /// from), and stores the others' writes on that checkpoint under LangGraph's synthetic
    /// task ids and paths, which keep them in step order.
    async fn put_exit_delta_writes(
        &mut self,
        saver: &Arc<dyn CheckpointSaver>,
    ) -> Result<(), GraphError> {
        if self.graph.delta_channels().next().is_none() {
            return Ok(());
        }
        let mut forced = self.delta_forced.clone();
        let loaded_latest =
            self.exit_expected.is_some() && self.exit_expected == self.exit_parent.checkpoint_id;
        if self.exit_parent.checkpoint_id.is_none() || !loaded_latest {
            // No checkpoint to store the writes on, or one whose other children read them.
            forced.extend(self.exit_delta_writes.iter().map(|w| w.3.clone()));
        }
        let step = crate::delta::StepDelta {
            previous: &self.delta_counters,
            updated: &BTreeSet::new(),
            forced: &forced,
            stored: &self.previous_versions,
            saved: true,
            // Every step of the run was counted as it ended: decide on those counts.
            count: false,
        };
        let next = |cur: Option<&ChannelVersion>| saver.get_next_version(cur);
        let plan = self
            .graph
            .plan_snapshots(&mut self.checkpoint, &self.channels, &step, &next);
        for ch in &plan.snapshot {
            if let Some(v) = self.channels.get(ch).and_then(|c| c.get()) {
                self.checkpoint
                    .channel_values
                    .insert(ch.clone(), crate::channel::snapshot_of(&v));
            }
        }
        crate::delta::set_counters(&mut self.metadata, &plan.counters);
        self.delta_counters = plan.counters;
        // (synthetic task id, task path) → the writes stored under it, in order.
        let mut grouped: Vec<(ExitKey, Vec<(String, Value)>)> = Vec::new();
        for (step, tid, path, ch, v) in std::mem::take(&mut self.exit_delta_writes) {
            if plan.snapshot.contains(&ch) {
                continue;
            }
            let key = if tid == stategraph_checkpoint::NULL_TASK_ID {
                (crate::delta::exit_task_id(step, &tid), String::new())
            } else if Some(step) == self.exit_first_step {
                (crate::delta::exit_task_id(step, &tid), path)
            } else {
                (
                    crate::delta::exit_late_task_id(step, &tid),
                    format!("~~{step:010}{path}"),
                )
            };
            match grouped.iter_mut().find(|(k, _)| *k == key) {
                Some((_, entries)) => entries.push((ch, v)),
                None => grouped.push((key, vec![(ch, v)])),
            }
        }
        for ((tid, path), entries) in grouped {
            saver
                .put_writes(&self.exit_parent, &entries, &tid, &path)
                .await?;
        }
        Ok(())
    }

    /// The tasks the current checkpoint schedules.
    fn next_tasks(&self) -> Vec<Task> {
        prepare_next_tasks(
            &self.checkpoint,
            &self.channels,
            &self.graph.node_triggers(),
            self.step,
            &self.checkpoint_config.checkpoint_ns,
            None,
        )
    }

    /// Emits the last saved checkpoint (`checkpoints`/`debug`), with the tasks that follow it.
    fn announce_checkpoint(&mut self, tasks: &[Task]) {
        let (Some(e), Some(parent)) = (&self.emitter, self.unannounced.take()) else {
            return;
        };
        let values = values_map(&self.graph.read_values(&self.channels));
        let config = config_value(Some(&self.checkpoint_config));
        let parent = config_value(parent.as_ref());
        let metadata = Value::from(self.metadata.to_json());
        let next: Vec<Value> = tasks.iter().map(|t| Value::from(t.name.as_str())).collect();
        let task_list: Vec<Value> = tasks
            .iter()
            .map(|t| {
                let mut m = Map::new();
                m.insert("id", t.id.as_str());
                m.insert("name", t.name.as_str());
                m.insert("interrupts", Value::List(Default::default()));
                m.insert("state", Value::Null);
                Value::Map(m)
            })
            .collect();
        let step = self.metadata.step.unwrap_or_default();
        e.emit_debug(StreamMode::Checkpoints, "checkpoint", step, || {
            let mut m = Map::new();
            m.insert("config", config.clone());
            m.insert("parent_config", parent.clone());
            m.insert("values", values.clone());
            m.insert("metadata", metadata.clone());
            m.insert("next", Value::from(next.clone()));
            m.insert("tasks", Value::from(task_list.clone()));
            Value::Map(m)
        });
    }

    /// Tasks that already finished on this checkpoint (their writes are saved) are not run
    /// again: their saved writes are reused.
    fn reuse_finished_writes(&self, tasks: &mut [Task]) {
        if self.pending_writes.is_empty() {
            return;
        }
        for task in tasks.iter_mut() {
            let writes: Vec<(String, Value)> = self
                .pending_writes
                .iter()
                .filter(|w| w.task_id == task.id)
                .map(|w| (w.channel.clone(), w.value.clone()))
                .collect();
            let finished = writes.iter().any(|(ch, _)| !is_control(ch));
            if finished {
                task.writes = writes;
            }
        }
    }

    /// Runs every task without writes concurrently; saves each task's writes as it finishes.
    async fn execute(&mut self, tasks: &mut [Task]) -> Result<(), GraphError> {
        let values = Arc::new(self.graph.read_values(&self.channels));
        // What a subgraph started by a task of this step records as its parents.
        let mut child_parents = self.parents.clone();
        if let Some(id) = &self.checkpoint_config.checkpoint_id {
            child_parents.insert(self.checkpoint_config.checkpoint_ns.clone(), id.clone());
        }
        let child_parents = Arc::new(child_parents);
        let mut state: Option<Arc<S>> = None;
        let mut set: JoinSet<TaskOutcome<S>> = JoinSet::new();
        let mut spawned: std::collections::HashMap<tokio::task::Id, usize> =
            std::collections::HashMap::new();
        let mut done: Vec<TaskOutcome<S>> = Vec::new();
        let mut first_error: Option<GraphError> = None;
        let mut pads: Vec<Option<Arc<std::sync::Mutex<Scratchpad>>>> = vec![None; tasks.len()];
        for (i, task) in tasks.iter_mut().enumerate() {
            if !task.writes.is_empty() {
                continue;
            }
            if task.name == START {
                let result = self.start_writes();
                self.finish_task(task, result, Vec::new(), &mut first_error)
                    .await?;
                continue;
            }
            let Some((run, retry)) = self
                .graph
                .nodes
                .iter()
                .find(|n| n.name == task.name)
                .and_then(|n| Some((n.run.clone()?, n.retry.clone())))
            else {
                continue;
            };
            let s = match (&task.input, &state) {
                // A `Send`'s task reads its own argument, not the graph state.
                (Some(arg), _) => Arc::new(S::from_values(&arg_values(arg))?),
                (None, Some(s)) => Arc::clone(s),
                (None, None) => {
                    let s = Arc::new(self.typed_state(&values)?);
                    state = Some(Arc::clone(&s));
                    self.typed = Some((Arc::clone(&s), Arc::clone(&values)));
                    s
                }
            };
            let ns = &self.checkpoint_config.checkpoint_ns;
            let task_ns = if ns.is_empty() {
                format!("{}:{}", task.name, task.id)
            } else {
                format!("{ns}|{}:{}", task.name, task.id)
            };
            let pad = Arc::new(std::sync::Mutex::new(self.scratchpad(task, &task_ns)));
            pads[i] = Some(Arc::clone(&pad));
            let ctx = NodeContext {
                scratch: pad,
                resume: self.resume.clone(),
                node: task.name.clone(),
                task_id: task.id.clone(),
                step: self.step,
                config: Arc::clone(&self.config),
                values: match &task.input {
                    Some(arg) => Arc::new(arg_values(arg)),
                    None => Arc::clone(&values),
                },
                saver: self.saver.clone(),
                checkpoint_ns: task_ns,
                parents: Arc::clone(&child_parents),
                emitter: self.emitter.clone(),
                store: self.store.clone(),
            };
            if let Some(e) = &self.emitter {
                let input = values_map(&ctx.values);
                let mut m = Map::new();
                m.insert("id", task.id.as_str());
                m.insert("name", task.name.as_str());
                m.insert("input", input);
                m.insert(
                    "triggers",
                    Value::List(
                        task.triggers
                            .iter()
                            .map(|t| Value::from(t.as_str()))
                            .collect(),
                    ),
                );
                let payload = Value::Map(m);
                e.emit_debug(StreamMode::Tasks, "task", self.step, || payload.clone());
            }
            let mut attempt_task: TaskFuture<S> = Box::pin(async move {
                let mut attempt = 1;
                loop {
                    let result = run(Arc::clone(&s), ctx.clone()).await;
                    match (&result, &retry) {
                        (Err(e), Some(policy)) if policy.retries(attempt, e) => {
                            tokio::time::sleep(policy.delay(attempt)).await;
                            attempt += 1;
                            // A new attempt starts with a fresh interrupt count.
                            let mut pad = ctx.scratch.lock().unwrap_or_else(|e| e.into_inner());
                            pad.counter = 0;
                            pad.writes.clear();
                        }
                        _ => return (i, result),
                    }
                }
            });
            // A node that finishes without waiting (most do) finishes right here; one that
            // waits goes on as its own task, next to the others of the step.
            match poll_once::<S>(i, &mut attempt_task) {
                Some(outcome) => done.push(outcome),
                None => {
                    let handle = set.spawn(attempt_task);
                    spawned.insert(handle.id(), i);
                }
            }
        }
        for (i, output) in done {
            self.finish_output(tasks, &pads, i, output, &mut first_error)
                .await?;
        }
        if !set.is_empty() {
            // The run waits for nodes: write the queued saves meanwhile.
            self.hand_over_saves().await?;
        }
        while let Some(joined) = set.join_next_with_id().await {
            let (i, output) = match joined {
                Ok((_, outcome)) => outcome,
                Err(e) => {
                    let i = spawned.get(&e.id()).copied().unwrap_or_default();
                    (i, Err(panicked(e.is_panic().then(|| e.into_panic()))))
                }
            };
            self.finish_output(tasks, &pads, i, output, &mut first_error)
                .await?;
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The typed state of `values`, built from the last one where nothing holds on to it
    /// (its nodes finished), converting only what changed.
    fn typed_state(&mut self, values: &Arc<Values>) -> Result<S, GraphError> {
        let previous = self
            .typed
            .take()
            .and_then(|(s, before)| Arc::try_unwrap(s).ok().map(|s| (s, before)));
        let s = match previous {
            Some((s, before)) => S::from_values_reusing(values, Some((s, &before)))?,
            None => S::from_values(values)?,
        };
        Ok(s)
    }

    /// Records what task `i`'s node returned (or how it failed).
    async fn finish_output(
        &mut self,
        tasks: &mut [Task],
        pads: &[Option<Arc<std::sync::Mutex<Scratchpad>>>],
        i: usize,
        output: Result<NodeOutput<S::Update>, NodeError>,
        first_error: &mut Option<GraphError>,
    ) -> Result<(), GraphError> {
        let Some(task) = tasks.get_mut(i) else {
            return Ok(());
        };
        let result = output.and_then(|o| self.node_writes(&task.name, o));
        let resume_writes = pads
            .get(i)
            .and_then(Option::as_ref)
            .map(|p| std::mem::take(&mut p.lock().unwrap_or_else(|e| e.into_inner()).writes))
            .unwrap_or_default();
        self.finish_task(task, result, resume_writes, first_error)
            .await
    }

    /// A task's interrupt bookkeeping: the answers it already has, plus one by id if the
    /// caller gave it.
    fn scratchpad(&self, task: &Task, task_ns: &str) -> Scratchpad {
        let mut resume: Vec<Value> = self
            .pending_writes
            .iter()
            .find(|w| w.task_id == task.id && w.channel == reserved::RESUME)
            .map(|w| match &w.value {
                Value::List(l) => l.to_vec(),
                other => vec![other.clone()],
            })
            .unwrap_or_default();
        if let Some(map) = &self.resume.by_id {
            let next = interrupt_id(task_ns, resume.len());
            let first = interrupt_id(task_ns, 0);
            if let Some(v) = map.get(&next).or_else(|| map.get(&first)) {
                resume.push(v.clone());
            }
        }
        Scratchpad {
            ns: task_ns.to_owned(),
            resume,
            counter: 0,
            source: self.resume.clone(),
            writes: Vec::new(),
        }
    }

    /// The writes of the built-in `__start__` node: each input key, then the START edges.
    fn start_writes(&self) -> Result<Vec<(String, Value)>, NodeError> {
        let mut writes = Vec::new();
        if let Some(Value::Map(input)) = self.channels.get(START).and_then(|c| c.get()) {
            for (k, v) in input {
                if let Value::Str(k) = k {
                    writes.push((k.to_string(), v));
                }
            }
        }
        let edges = self.graph.edge_writes(START, &self.channels, &writes)?;
        writes.extend(edges);
        Ok(writes)
    }

    /// A node's output as channel writes: its state update, then its edges.
    fn node_writes(
        &self,
        node: &str,
        output: NodeOutput<S::Update>,
    ) -> Result<Vec<(String, Value)>, NodeError> {
        let (mut writes, goto) = match output {
            NodeOutput::Update(u) => (S::into_writes(u).map_err(NodeError::from)?, Vec::new()),
            NodeOutput::Empty => (Vec::new(), Vec::new()),
            NodeOutput::Writes(mut w) => {
                // Produced by the engine (subgraph results): state writes plus control writes.
                let own: Vec<(String, Value)> = w
                    .iter()
                    .filter(|(k, _)| self.graph.schema.contains(k))
                    .cloned()
                    .collect();
                w.extend(self.graph.edge_writes(node, &self.channels, &own)?);
                return Ok(w);
            }
            NodeOutput::Command(c) if c.parent => return Err(parent_command::<S>(c)?),
            NodeOutput::Command(c) => match c.update {
                Some(u) => (S::into_writes(u).map_err(NodeError::from)?, c.goto),
                None => (Vec::new(), c.goto),
            },
        };
        self.graph
            .check_state_writes(&writes)
            .map_err(NodeError::from)?;
        let own = writes.clone();
        writes.extend(self.graph.goto_writes(node, goto, None)?);
        writes.extend(self.graph.edge_writes(node, &self.channels, &own)?);
        Ok(writes)
    }

    /// The channel versions that moved since the last saved checkpoint (what a put stores
    /// blobs for); the current ones become the last saved.
    fn versions_moved(&mut self) -> ChannelVersions {
        let versions = self.checkpoint.channel_versions.clone();
        let moved = new_versions(&self.previous_versions, &versions);
        self.previous_versions = versions;
        moved
    }

    /// Queues a save (`async` durability); it is handed to the background writer when the
    /// run next waits, or applied when the run ends.
    fn enqueue(&mut self, op: SaveOp) {
        self.pending_saves.push(op);
    }

    /// Hands the queued saves to the background writer (started on first use), so they are
    /// written while the run waits. A writer that stopped on an error reports that error
    /// here (or when the run flushes).
    async fn hand_over_saves(&mut self) -> Result<(), GraphError> {
        let Some(saver) = self.saver.clone() else {
            return Ok(());
        };
        if self.pending_saves.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.pending_saves);
        let writer = self
            .writer
            .get_or_insert_with(|| BackgroundWriter::start(saver));
        if writer.queue.send(batch).is_ok() {
            return Ok(());
        }
        match self.writer.take() {
            Some(stopped) => stopped.finish().await,
            None => Ok(()),
        }
    }

    /// Saves a task's writes against the current checkpoint as soon as it finishes (kept in
    /// memory until the end with `exit` durability).
    async fn save_writes(
        &mut self,
        task: &Task,
        writes: &[(String, Value)],
    ) -> Result<(), GraphError> {
        let Some(saver) = &self.saver else {
            return Ok(());
        };
        if self.checkpoint_config.checkpoint_id.is_none() {
            return Ok(());
        }
        if self.config.durability == Durability::Exit {
            self.exit_writes
                .push((task.id.clone(), task.path_str(), writes.to_vec()));
            return Ok(());
        }
        if self.config.durability == Durability::Async {
            // Queued behind the checkpoint they belong to: never saved before it (and never
            // saved if its save lost a race).
            let op = SaveOp::Writes {
                config: self.checkpoint_config.clone(),
                writes: writes.to_vec(),
                task_id: task.id.clone(),
                task_path: task.path_str(),
            };
            self.enqueue(op);
            return Ok(());
        }
        saver
            .put_writes(&self.checkpoint_config, writes, &task.id, &task.path_str())
            .await?;
        Ok(())
    }

    /// Emits a finished task's `updates` and `tasks`/`debug` result events.
    fn announce_result(&self, task: &Task, writes: &[(String, Value)]) {
        let Some(e) = &self.emitter else { return };
        let mut result = Map::new();
        for (k, v) in writes {
            if self.graph.schema.contains(k) {
                result.insert(k.as_str(), v.clone());
            }
        }
        let error = writes
            .iter()
            .find(|(c, _)| c == reserved::ERROR)
            .map(|(_, v)| v.clone());
        e.emit(StreamMode::Updates, || {
            let mut m = Map::new();
            let update = if result.is_empty() {
                Value::Null
            } else {
                Value::Map(result.clone())
            };
            m.insert(task.name.as_str(), update);
            Value::Map(m)
        });
        let mut m = Map::new();
        m.insert("id", task.id.as_str());
        m.insert("name", task.name.as_str());
        m.insert("error", error.unwrap_or_default());
        m.insert("result", Value::Map(result));
        m.insert("interrupts", Value::List(Default::default()));
        let payload = Value::Map(m);
        e.emit_debug(StreamMode::Tasks, "task_result", self.step, || {
            payload.clone()
        });
    }

    /// Records a task's outcome and saves it against the current checkpoint.
    async fn finish_task(
        &mut self,
        task: &mut Task,
        result: Result<Vec<(String, Value)>, NodeError>,
        resume_writes: Vec<(String, Value)>,
        first_error: &mut Option<GraphError>,
    ) -> Result<(), GraphError> {
        let writes = match result {
            Ok(w) => {
                // A task that finished with nothing but control writes is marked as done.
                let mut all = resume_writes;
                if w.is_empty() {
                    all.push((reserved::NO_WRITES.to_owned(), Value::Null));
                }
                all.extend(w);
                all
            }
            Err(e) if e.is_interrupt() => {
                let mut writes = vec![(
                    reserved::INTERRUPT.to_owned(),
                    Value::List(e.interrupts.iter().map(Interrupt::to_value).collect()),
                )];
                writes.extend(resume_writes);
                self.save_writes(task, &writes).await?;
                if let Some(em) = &self.emitter {
                    let list = Value::List(e.interrupts.iter().map(Interrupt::to_value).collect());
                    em.emit(StreamMode::Updates, || {
                        Value::Map([(reserved::INTERRUPT, list)].into_iter().collect())
                    });
                }
                self.interrupts.extend(e.interrupts);
                return Ok(());
            }
            Err(NodeError {
                parent_command: Some(command),
                ..
            }) => {
                // A command for the parent graph: this task writes nothing; the command leaves
                // the subgraph as its result.
                if first_error.is_none() {
                    *first_error = Some(GraphError::ParentCommand {
                        node: task.name.clone(),
                        command,
                    });
                }
                return Ok(());
            }
            Err(e) => {
                if first_error.is_none() {
                    *first_error = Some(GraphError::NodeFailed {
                        node: task.name.clone(),
                        task_id: task.id.clone(),
                        message: e.message.clone(),
                    });
                }
                vec![(reserved::ERROR.to_owned(), Value::from(e.message))]
            }
        };
        self.save_writes(task, &writes).await?;
        if task.name != START {
            self.announce_result(task, &writes);
        }
        if writes.iter().any(|(c, _)| c != reserved::ERROR) {
            task.writes = writes;
        }
        Ok(())
    }
}
