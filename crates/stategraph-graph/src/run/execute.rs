//! Running a step's tasks: each node with its retries, concurrently; a node that finishes
//! without waiting finishes in place, one that waits goes on as its own task.

use std::sync::Arc;

use stategraph_checkpoint::{Map, Value, channels as reserved};
use tokio::task::JoinSet;
use tracing::Instrument;

use super::Run;
use crate::call::{CallEvent, CallScope, Caller, RETURN};
use crate::error::{GraphError, NodeError};
use crate::graph::START;
use crate::interrupt::Scratchpad;
use crate::node::{NodeContext, NodeOutput};
use crate::state::{State, Values};
use crate::step::Task;
use crate::stream::TaskStart;

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

/// What a panic said (its `&str` or `String` payload).
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned())
}

/// The error of a node that panicked (or whose task was cancelled).
fn panicked(payload: Option<Box<dyn std::any::Any + Send>>) -> NodeError {
    match payload {
        Some(p) => NodeError::new(format!("the node panicked: {}", panic_message(&*p))),
        None => NodeError::new("the node's task was cancelled"),
    }
}

/// A step's tasks as they run: what they share, and where each one is.
struct Running<S: State> {
    /// The step's state values (with its managed keys).
    values: Arc<Values>,
    /// The typed state, built when the first task that reads it starts.
    state: Option<Arc<S>>,
    /// What a subgraph started by a task of this step records as its parents.
    child_parents: Arc<std::collections::BTreeMap<String, String>>,
    /// What the step's task calls share.
    scope: Arc<CallScope>,
    /// Each task's interrupt bookkeeping, by task index.
    pads: Vec<Option<Arc<std::sync::Mutex<Scratchpad>>>>,
    /// The tasks that wait, each on its own tokio task.
    set: JoinSet<TaskOutcome<S>>,
    spawned: std::collections::HashMap<tokio::task::Id, usize>,
    /// Tasks finished and not yet recorded.
    done: Vec<TaskOutcome<S>>,
}

impl<S: State> Run<'_, S> {
    /// Runs every task without writes concurrently; saves each task's writes as it finishes,
    /// and the writes of the tasks they call (kept in `self.calls`). A task that fails and
    /// has an error handler adds the handler's task to `tasks`, run in the same step.
    pub(super) async fn execute(
        &mut self,
        tasks: &mut Vec<Task>,
        values: Arc<Values>,
    ) -> Result<(), GraphError> {
        // What a subgraph started by a task of this step records as its parents.
        let mut child_parents = self.env.parents.clone();
        if let Some(id) = &self.checkpoint_config.checkpoint_id {
            child_parents.insert(self.checkpoint_config.checkpoint_ns.clone(), id.to_string());
        }
        let child_parents = Arc::new(child_parents);
        self.calls.clear();
        let scope = Arc::new(self.call_scope(&child_parents));
        let _closing = crate::call::Closing(Arc::clone(&scope));
        let mut step = Running {
            values,
            state: None,
            child_parents,
            scope: Arc::clone(&scope),
            pads: vec![None; tasks.len()],
            set: JoinSet::new(),
            spawned: std::collections::HashMap::new(),
            done: Vec::new(),
        };
        let mut first_error: Option<GraphError> = None;
        for i in 0..tasks.len() {
            let Some(task) = tasks.get_mut(i) else {
                continue;
            };
            if !task.writes.is_empty() {
                continue;
            }
            if task.name == START {
                let result = self.start_writes();
                self.finish_task(task, result, Vec::new(), &mut first_error)
                    .await?;
                continue;
            }
            let task = &*task;
            self.start_task(&mut step, i, task)?;
        }
        self.settle(tasks, &mut step, &mut first_error).await?;
        let mut running_calls = 0usize;
        for event in scope.take() {
            self.on_call(event, &mut running_calls).await?;
        }
        if !step.set.is_empty() || running_calls > 0 {
            // The run waits for nodes: write the queued saves meanwhile.
            self.hand_over_saves().await?;
        }
        while !step.set.is_empty() || running_calls > 0 {
            tokio::select! {
                biased;
                () = scope.queued.notified() => {
                    for event in scope.take() {
                        self.on_call(event, &mut running_calls).await?;
                    }
                }
                Some(joined) = step.set.join_next_with_id(), if !step.set.is_empty() => {
                    let outcome = match joined {
                        Ok((_, outcome)) => outcome,
                        Err(e) => {
                            let i = step.spawned.get(&e.id()).copied().unwrap_or_default();
                            (i, Err(panicked(e.is_panic().then(|| e.into_panic()))))
                        }
                    };
                    step.done.push(outcome);
                    self.settle(tasks, &mut step, &mut first_error).await?;
                    // What the node called before it finished is accounted for first.
                    for event in scope.take() {
                        self.on_call(event, &mut running_calls).await?;
                    }
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// What the step's tasks read: the state's values, with the managed keys
    /// (`RemainingSteps`, `IsLastStep`), which are the step's to read, not stored.
    pub(super) fn step_values(&self) -> Values {
        let mut values = self.graph.read_values(&self.channels);
        self.graph
            .schema
            .add_managed(&mut values, self.step, self.stop);
        values
    }

    /// Records the tasks that finished; the handlers of those that failed join the step
    /// (and are recorded too if they finish at once).
    async fn settle(
        &mut self,
        tasks: &mut Vec<Task>,
        step: &mut Running<S>,
        first_error: &mut Option<GraphError>,
    ) -> Result<(), GraphError> {
        while !step.done.is_empty() {
            for (i, output) in std::mem::take(&mut step.done) {
                self.finish_output(tasks, &step.pads, i, output, first_error)
                    .await?;
                self.stream_room().await;
            }
            for handler in std::mem::take(&mut self.handlers.queued) {
                tasks.push(handler);
                step.pads.push(None);
                let i = tasks.len() - 1;
                if let Some(task) = tasks.get(i) {
                    self.start_task(step, i, task)?;
                }
            }
        }
        Ok(())
    }

    /// Starts task `i`: runs its node with its retries, in place if it finishes without
    /// waiting (its outcome goes to `step.done`), otherwise as a tokio task of its own.
    fn start_task(
        &mut self,
        step: &mut Running<S>,
        i: usize,
        task: &Task,
    ) -> Result<(), GraphError> {
        let Some((run, attempts, entry)) = self
            .graph
            .nodes
            .iter()
            .find(|n| n.name == task.name)
            .and_then(|n| Some((n.run.clone()?, n.attempts.clone(), n.entrypoint)))
        else {
            return Ok(());
        };
        let s = match (&task.input, &step.state) {
            // A `Send`'s task reads its own argument, not the graph state (unless the
            // argument is not a map of state keys).
            (Some(arg @ Value::Map(_)), _) => Arc::new(S::from_values(&arg_values(arg))?),
            (_, Some(s)) => Arc::clone(s),
            (_, None) => {
                let s = Arc::new(self.typed_state(&step.values)?);
                step.state = Some(Arc::clone(&s));
                self.env.typed = Some((Arc::clone(&s), Arc::clone(&step.values)));
                s
            }
        };
        let task_ns = self.ns_of(task);
        let runs = self.start_task_run(task, &task_ns, &step.values);
        let failure = self.failure_of(task);
        let message_metadata = match &self.stream.emitter {
            Some(e) if e.wants(crate::stream::StreamMode::Messages) => {
                self.seed_seen_messages();
                Some(Arc::new(self.message_metadata(task, &task_ns)))
            }
            _ => None,
        };
        let answers = step
            .scope
            .answers
            .get(&task.id)
            .cloned()
            .unwrap_or_default();
        let pad = Arc::new(std::sync::Mutex::new(crate::call::scratchpad(
            &task_ns,
            answers,
            &self.env.resume,
        )));
        if let Some(slot) = step.pads.get_mut(i) {
            *slot = Some(Arc::clone(&pad));
        }
        // An entrypoint reads what the run wrote to `__start__`, and the value its last
        // run saved.
        let channel = |name: &str| self.channels.get(name).and_then(|c| c.get());
        let (input, previous) = if entry {
            (channel(START), channel(crate::functional::PREVIOUS))
        } else {
            (None, None)
        };
        let ctx = NodeContext {
            scratch: pad,
            resume: self.env.resume.clone(),
            node: task.name.clone(),
            task_id: task.id.clone(),
            step: self.step,
            config: Arc::clone(&self.config),
            values: match &task.input {
                Some(arg @ Value::Map(_)) => Arc::new(arg_values(arg)),
                _ => Arc::clone(&step.values),
            },
            saver: self.saver.clone(),
            checkpoint_ns: task_ns,
            parents: Arc::clone(&step.child_parents),
            emitter: self.stream.emitter.clone(),
            message_metadata,
            stop: self.stop,
            store: self.env.store.clone(),
            caller: Some(Caller {
                scope: Arc::clone(&step.scope),
                path: Arc::clone(&task.path),
            }),
            input,
            previous,
            progress: None,
            failure,
            resuming: self.env.resuming,
            send_arg: task.input.clone(),
            runs,
        };
        let span = crate::trace::task_span(&task.name, &task.id, &task.triggers, self.step);
        let attempts = async move {
            let result = attempts
                .run(
                    &ctx.node,
                    |progress| {
                        let mut ctx = ctx.clone();
                        ctx.progress = progress;
                        run(Arc::clone(&s), ctx)
                    },
                    || {
                        ctx.scratch
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .restart();
                    },
                )
                .await;
            if let Err(e) = &result
                && e.signal.is_none()
            {
                crate::trace::record_error(e);
            }
            (i, result)
        };
        let mut attempt_task: TaskFuture<S> = if span.is_disabled() {
            Box::pin(attempts)
        } else {
            Box::pin(attempts.instrument(span))
        };
        // A node that finishes without waiting (most do) finishes right here; one that
        // waits goes on as its own task, next to the others of the step.
        match poll_once::<S>(i, &mut attempt_task) {
            Some(outcome) => step.done.push(outcome),
            None => {
                let handle = step.set.spawn(attempt_task);
                step.spawned.insert(handle.id(), i);
            }
        }
        Ok(())
    }

    /// What the step's calls share: the checkpoint they belong to, and what is saved on it.
    fn call_scope(&self, parents: &Arc<std::collections::BTreeMap<String, String>>) -> CallScope {
        let mut returns = std::collections::HashMap::new();
        let mut answers = std::collections::HashMap::new();
        for w in &self.pending_writes {
            if w.channel == RETURN {
                returns.insert(w.task_id.clone(), w.value.clone());
            } else if w.channel == reserved::RESUME {
                // A task's first `__resume__` write holds its answers.
                answers
                    .entry(w.task_id.clone())
                    .or_insert_with(|| resume_list(&w.value));
            }
        }
        CallScope {
            checkpoint_id: self.checkpoint.id.clone(),
            step: self.step,
            stop: self.stop,
            config: Arc::clone(&self.config),
            saver: self.saver.clone(),
            store: self.env.store.clone(),
            cache: self.graph.cache.clone(),
            parents: Arc::clone(parents),
            emitter: self.stream.emitter.clone(),
            returns: std::sync::Mutex::new(returns),
            answers,
            resume: self.env.resume.clone(),
            events: std::sync::Mutex::new(Vec::new()),
            queued: tokio::sync::Notify::new(),
            closed: std::sync::atomic::AtomicBool::new(false),
            resuming: self.env.resuming,
        }
    }

    /// Records what a call told the step: a replayed or finished call is one of its tasks
    /// (a finished one's writes are saved first, then its caller sees the result).
    async fn on_call(&mut self, event: CallEvent, running: &mut usize) -> Result<(), GraphError> {
        match event {
            CallEvent::Replayed(task) => self.calls.push(task),
            CallEvent::Started { task, input } => {
                *running += 1;
                if let Some(e) = &self.stream.emitter {
                    e.task_start(self.step, || TaskStart {
                        id: task.id.clone(),
                        name: task.name.clone(),
                        input: Value::List(
                            vec![Value::List(vec![input].into()), Value::Map(Map::new())].into(),
                        ),
                        triggers: task.triggers.to_vec(),
                        metadata: self.task_start_metadata(),
                    });
                }
            }
            CallEvent::Finished {
                mut task,
                outcome,
                resume_writes,
                saved,
                cached,
            } => {
                *running = running.saturating_sub(1);
                let writes = crate::call::call_writes(&outcome, resume_writes);
                self.save_writes(&task, &writes).await?;
                // Its caller waits on it: under `async` durability the writes go to the
                // background writer now, not when the step ends.
                self.hand_over_saves().await?;
                if cached {
                    // From the node cache: announced as such.
                    self.announce_cached(&task, &writes);
                } else if outcome.is_ok() {
                    self.announce_result(&task, &writes);
                }
                task.writes = writes;
                self.calls.push(task);
                // The caller may have stopped waiting: nothing to tell then.
                let _ = saved.send(());
            }
        }
        Ok(())
    }
    /// The typed state of `values`, built from the last one where nothing holds on to it
    /// (its nodes finished), converting only what changed.
    pub(super) fn typed_state(&mut self, values: &Arc<Values>) -> Result<S, GraphError> {
        let previous = self
            .env
            .typed
            .take()
            .and_then(|(s, before)| Arc::try_unwrap(s).ok().map(|s| (s, before)));
        let s = match previous {
            Some((s, before)) => S::from_values_reusing(values, Some((s, &before)))?,
            None => S::from_values(values)?,
        };
        Ok(s)
    }
}

/// A saved `__resume__` write's answers, in order.
fn resume_list(value: &Value) -> Vec<Value> {
    match value {
        Value::List(l) => l.to_vec(),
        other => vec![other.clone()],
    }
}
