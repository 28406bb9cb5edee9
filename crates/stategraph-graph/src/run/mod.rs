//! The Pregel loop: super-steps, each checkpointed exactly when LangGraph checkpoints.
//!
//! `Run` is the mutable state of one run; its methods are split by concern:
//! - `entry`: the public entry points, and where a run starts (its loaded checkpoint);
//! - `input`: applying the run's input, or resuming (answers to interrupts, replays);
//! - `cached`: tasks whose writes come from the node cache, and filling it;
//! - `execute`: running a step's tasks, concurrently;
//! - `outcome`: what a task's node returned, as channel writes, recorded and saved;
//! - `handlers`: failed tasks handed to their error handlers;
//! - `save`: creating and saving checkpoints and writes, by durability mode;
//! - `exit`: ending a run (waiting for saves, the `exit`-durability final save);
//! - `events`: stream events of checkpoints and task results.

mod cached;
mod entry;
mod events;
mod execute;
mod exit;
mod handlers;
mod input;
mod outcome;
mod save;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use tracing::Instrument;

use stategraph_checkpoint::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointId,
    CheckpointMetadata, CheckpointSaver, CheckpointSource, PendingWrite, SaveOp, Value,
    channels as reserved,
};
use stategraph_store::Store;

pub use self::entry::GraphOutput;
pub(crate) use self::entry::{CommandWrites, ResumeInput, RunOutcome, RunSetup};
pub(crate) use self::execute::panic_message;
use self::save::BackgroundWriter;
use crate::compiled::CompiledGraph;
use crate::config::{Durability, RunConfig};
use crate::error::GraphError;
use crate::graph::START;
use crate::interrupt::{Interrupt, ResumeSource};
use crate::state::State;
use crate::step::{Channels, INTERRUPT, NodeTriggers, Task, apply_writes, prepare_next_tasks};
use crate::stream::{Emitter, Raw, StreamMode};

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

/// A task's saved-later writes: (task id, task path, writes).
type TaskWrites = (String, String, Vec<(String, Value)>);

/// The mutable state of one run.
struct Run<'g, S: State> {
    graph: &'g CompiledGraph<S>,
    config: Arc<RunConfig>,
    saver: Option<Arc<dyn CheckpointSaver>>,
    checkpoint: Checkpoint,
    /// The metadata of the checkpoint created last.
    metadata: CheckpointMetadata,
    channels: Channels,
    step: i64,
    /// LangGraph's `stop`: step at start + recursion limit + 1; a tick beyond it fails.
    stop: i64,
    /// Where the next checkpoint is put: the thread, namespace and (as parent) current id.
    checkpoint_config: CheckpointConfig,
    pending_writes: Vec<PendingWrite>,
    updated_channels: Option<BTreeSet<String>>,
    /// Interrupts raised in the current step.
    interrupts: Vec<Interrupt>,
    /// What the run's tasks are given besides the state.
    env: TaskEnv<S>,
    /// Saving as the run goes (`sync` and `async` durability).
    save: SaveState,
    /// Delta channels' snapshot bookkeeping.
    delta: DeltaState,
    /// `exit` durability: what is saved when the run ends.
    exit: ExitState,
    /// The stream the run emits to.
    stream: StreamState,
    /// A command a node sent to the parent graph (the run stopped on it).
    parent_command: Option<Box<crate::error::ParentCommand>>,
    /// The run stopped because no task was left to run (not on an interrupt or error).
    complete: bool,
    /// The tasks the current step's tasks called (replayed or run), applied with them.
    calls: Vec<Task>,
    /// The cache entries the current step's tasks fill when they succeed.
    cache_keys: cached::CacheKeys,
    /// The current step's error handlers.
    handlers: handlers::Handlers,
}

/// What the run's tasks are given besides the state.
struct TaskEnv<S: State> {
    /// The enclosing graphs' checkpoint ids, by namespace.
    parents: BTreeMap<String, String>,
    /// The store nodes see (the graph's, else the parent task's).
    store: Option<Arc<dyn Store>>,
    /// Answers to interrupts available to this run's tasks.
    resume: ResumeSource,
    /// The typed state nodes last read, with the values it was built from: the next one is
    /// built from it, converting only what changed.
    typed: Option<crate::head::TypedState<S>>,
    /// Whether the run continues its thread (no new input: a resume, a command, a retry of
    /// a failed step); subgraphs with a checkpoint then continue theirs.
    resuming: bool,
}

/// Saving as the run goes (`sync` and `async` durability).
struct SaveState {
    /// The channel versions of the last saved checkpoint.
    previous_versions: ChannelVersions,
    /// The newest checkpoint of the thread's namespace as this run last saw it.
    expected_latest: Option<CheckpointId>,
    /// `async` durability: the saves not yet handed to the background writer. They are
    /// handed over as one batch whenever the run waits (for a node that does not finish at
    /// once), and applied at the end otherwise, so a run whose nodes never wait commits once.
    pending: Vec<SaveOp>,
    /// The background saver of `async` durability (started when the run first waits).
    writer: Option<BackgroundWriter>,
    /// The thread's queue turn (`RunConfig::queue`), shared with the background writer: a
    /// run dropped mid-way (its stream dropped, a cancel) keeps the next queued run waiting
    /// until the saves it already handed over are committed.
    turn: Option<Arc<tokio::sync::OwnedMutexGuard<()>>>,
}

/// Delta channels: the counters of the last checkpoint, and the channels the next saved
/// checkpoint must snapshot whatever the counters say.
struct DeltaState {
    counters: crate::delta::Counters,
    forced: BTreeSet<String>,
    /// The delta channels the loaded checkpoint's stored writes touch.
    loaded_writes: BTreeSet<String>,
}

/// `exit` durability: where the final checkpoint goes, on what condition, and the writes
/// stored with it.
struct ExitState {
    parent: CheckpointConfig,
    expected: Option<CheckpointId>,
    /// The last step's task writes.
    writes: Vec<TaskWrites>,
    /// The delta channel writes of every finished step, stored at the end (step, task id,
    /// task path, channel, value).
    delta_writes: Vec<(i64, String, String, String, Value)>,
    /// The run's first step.
    first_step: Option<i64>,
}

/// The stream the run emits to.
struct StreamState {
    emitter: Option<Emitter>,
    /// `messages` mode: whether the emitter's seen ids hold the state's messages yet.
    messages_seeded: bool,
    /// The checkpoint saved last, not yet announced on the stream, and its parent.
    unannounced: Option<Option<CheckpointConfig>>,
    /// `events` mode: the graph's run.
    graph_run: crate::stream::ChildRun,
    /// `events` mode: the runs of the tasks started and not finished, by task id.
    task_runs: std::collections::HashMap<String, crate::stream::ChildRun>,
}

impl<S: State> Run<'_, S> {
    /// Waits while the stream's reader is too far behind.
    async fn stream_room(&self) {
        if let Some(e) = &self.stream.emitter {
            e.room().await;
        }
    }

    async fn run_loop(&mut self) -> Result<(), GraphError> {
        loop {
            self.stream_room().await;
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
                            pull_path: &n.pull_path,
                        })
                        .collect();
                    let graph = self.graph;
                    let is_node = |name: &str| graph.node_index.contains_key(name);
                    let mut tasks = crate::step::prepare_push_tasks(
                        &self.checkpoint,
                        &self.channels,
                        &is_node,
                        self.step,
                        &self.checkpoint_config.checkpoint_ns,
                    );
                    tasks.extend(crate::step::prepare_pull_tasks(
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
                self.complete = true;
                return Ok(());
            }
            self.handlers.of.clear();
            self.reuse_finished_writes(&mut tasks);
            if !self.pending_writes.is_empty() {
                self.resume_error_handlers(&mut tasks);
            }
            // Writes reused from the loaded checkpoint are stored on it already.
            let reused: BTreeSet<String> = tasks
                .iter()
                .filter(|t| !t.writes.is_empty())
                .map(|t| t.id.clone())
                .collect();
            let before = self
                .config
                .interrupt_before
                .as_deref()
                .unwrap_or(&self.graph.interrupt_before);
            if should_interrupt(&self.checkpoint, before, &tasks) {
                return Ok(());
            }
            // As LangGraph 1.2 (once past `interrupt_before`), every task of the step is
            // announced; the writes a task saved on an earlier try of the step are streamed
            // again, marked cached; then the node cache answers the tasks it can.
            let values = Arc::new(self.step_values());
            self.announce_task_starts(&tasks, &values);
            if !reused.is_empty() {
                for task in tasks.iter().filter(|t| reused.contains(&t.id)) {
                    self.announce_cached(task, &task.writes);
                }
            }
            if self.graph.cache.is_some() {
                self.match_cached(&mut tasks, &values).await?;
            }
            // The step's span covers its awaits (its tasks, its save); without a subscriber
            // they are awaited as they are.
            let span = crate::trace::step_span(self.step, tasks.len());
            let started = std::time::Instant::now();
            if span.is_disabled() {
                self.execute(&mut tasks, values).await?;
            } else {
                self.execute(&mut tasks, values)
                    .instrument(span.clone())
                    .await?;
            }
            if !self.interrupts.is_empty() {
                // The step stops here; its finished tasks' writes are saved, and the thread
                // waits on the checkpoint the step started from.
                span.in_scope(|| {
                    for i in &self.interrupts {
                        tracing::info!(interrupt_id = i.id.as_str(), "interrupt");
                    }
                });
                return Ok(());
            }
            // An answer no interrupt took does not carry over to later steps.
            if let Ok(mut null) = self.env.resume.null.lock() {
                null.take();
            }
            let calls = std::mem::take(&mut self.calls);
            let refs: Vec<&Task> = tasks.iter().chain(calls.iter()).collect();
            let updated = self.apply(&refs)?;
            if let Some(e) = &self.stream.emitter
                && updated.iter().any(|c| self.graph.schema.contains(c))
            {
                e.emit(StreamMode::Values, || {
                    let values = self.graph.read_values(&self.channels);
                    Raw::values(values, self.graph.output_channel(), Vec::new())
                });
            }
            self.updated_channels = Some(updated);
            self.pending_writes.clear();
            self.exit.writes.clear();
            if self.config.durability == Durability::Exit && self.saver.is_some() {
                self.keep_exit_delta_writes(&tasks, &reused);
            }
            if span.is_disabled() {
                self.put_checkpoint(CheckpointSource::Loop).await?;
            } else {
                self.put_checkpoint(CheckpointSource::Loop)
                    .instrument(span)
                    .await?;
            }
            metrics::histogram!("stategraph_graph_step_duration_seconds")
                .record(started.elapsed().as_secs_f64());
            let after = self
                .config
                .interrupt_after
                .as_deref()
                .unwrap_or(&self.graph.interrupt_after);
            if should_interrupt(&self.checkpoint, after, &tasks) {
                let next = self.next_tasks();
                self.announce_checkpoint(&next);
                return Ok(());
            }
        }
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
}
