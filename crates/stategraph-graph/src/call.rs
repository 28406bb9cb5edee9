//! Tasks called from a running node (LangGraph's `task` calls, the Functional API's unit of
//! durable work). A call is a PUSH task of its caller's step. Its id is derived from the
//! caller's path and the call's position among the caller's calls, so a caller that runs
//! again (a resume, a retry, a new process) makes the same calls under the same ids. Its
//! result is saved as a `__return__` write against the step's checkpoint, and a call whose
//! result is saved is answered from it instead of running again.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use stategraph_checkpoint::cache::Cache;
use stategraph_checkpoint::{Value, channels as reserved};
use tokio::sync::oneshot;

use crate::attempts::Attempts;
use crate::config::RunConfig;
use crate::error::NodeError;
use crate::interrupt::{ResumeSource, Scratchpad, interrupt_id};
use crate::node::NodeContext;
use crate::step::{PUSH, Task, task_id, task_path_str};

/// The channel a call's result is written to.
pub(crate) const RETURN: &str = "__return__";

/// `True` in a call's path, as LangGraph spells it there (`f"{True:010d}"`): the task was
/// made by a call, so its interrupts are its caller's to report.
const CALLED: &str = "0000000001";

/// A task's body: its input and context → its result.
pub(crate) type TaskFn = Arc<
    dyn Fn(Value, NodeContext) -> Pin<Box<dyn Future<Output = Result<Value, NodeError>> + Send>>
        + Send
        + Sync,
>;

/// What calls tell the run of their step.
pub(crate) enum CallEvent {
    /// A call answered from its saved result: a task of the step, not run again.
    Replayed(Task),
    /// A call started running (with its input, for the `tasks` stream).
    Started { task: Task, input: Value },
    /// A call finished. The run saves its writes, then answers `saved`, and only then does
    /// the caller see the result (a result the caller acted on is on disk first).
    Finished {
        task: Task,
        outcome: Result<Value, NodeError>,
        /// `__resume__` writes of interrupts the task had answered.
        resume_writes: Vec<(String, Value)>,
        saved: oneshot::Sender<()>,
        /// The result came from the node cache: nothing ran.
        cached: bool,
    },
}

/// What every call of one step shares: where it is, what is saved, what its tasks see.
pub(crate) struct CallScope {
    pub(crate) checkpoint_id: stategraph_checkpoint::CheckpointId,
    pub(crate) step: i64,
    pub(crate) stop: i64,
    pub(crate) config: Arc<RunConfig>,
    pub(crate) saver: Option<Arc<dyn stategraph_checkpoint::CheckpointSaver>>,
    pub(crate) store: Option<Arc<dyn stategraph_store::Store>>,
    /// The node cache of the graph (or entrypoint) the step belongs to.
    pub(crate) cache: Option<Arc<dyn Cache>>,
    pub(crate) parents: Arc<std::collections::BTreeMap<String, String>>,
    pub(crate) emitter: Option<crate::stream::Emitter>,
    /// Saved results (`__return__` writes of the step's checkpoint, and of calls finished
    /// since: a caller that is retried gets them back too), by task id.
    pub(crate) returns: std::sync::Mutex<HashMap<String, Value>>,
    /// Saved answers to interrupts (`__resume__` writes), by task id.
    pub(crate) answers: HashMap<String, Vec<Value>>,
    pub(crate) resume: ResumeSource,
    /// What the calls told the run and it has not read yet (nothing is allocated for a step
    /// whose tasks call nothing).
    pub(crate) events: std::sync::Mutex<Vec<CallEvent>>,
    /// Wakes the run when an event is queued.
    pub(crate) queued: tokio::sync::Notify,
    /// Set when the step is over: later calls fail, their results would not be saved.
    pub(crate) closed: std::sync::atomic::AtomicBool,
    /// Whether the run is resuming (see `NodeContext::resuming`).
    pub(crate) resuming: bool,
}

impl CallScope {
    /// Queues `event` for the run; `false` (the event dropped) when the step is over.
    fn send(&self, event: CallEvent) -> bool {
        {
            let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
            if self.closed.load(std::sync::atomic::Ordering::Acquire) {
                return false;
            }
            events.push(event);
        }
        self.queued.notify_one();
        true
    }

    /// The events queued so far, oldest first.
    pub(crate) fn take(&self) -> Vec<CallEvent> {
        std::mem::take(&mut *self.events.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Ends the step: no call is accepted after this, and the callers of calls it did not
    /// record learn that their results were not saved.
    fn close(&self) {
        let unread = {
            let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
            self.closed
                .store(true, std::sync::atomic::Ordering::Release);
            std::mem::take(&mut *events)
        };
        drop(unread);
    }
}

/// Closes a step's [`CallScope`] when the step ends, however it ends.
pub(crate) struct Closing(pub(crate) Arc<CallScope>);

impl Drop for Closing {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// A task's side of calling: the step's scope and the task's own path.
#[derive(Clone)]
pub(crate) struct Caller {
    pub(crate) scope: Arc<CallScope>,
    /// The calling task's path (stored as `~__pregel_pull, node`).
    pub(crate) path: Arc<[String]>,
}

/// A task's interrupt bookkeeping: the answers saved for it, plus one by interrupt id if the
/// run was resumed with answers by id.
pub(crate) fn scratchpad(ns: &str, mut answers: Vec<Value>, source: &ResumeSource) -> Scratchpad {
    if let Some(map) = &source.by_id {
        let next = interrupt_id(ns, answers.len());
        let first = interrupt_id(ns, 0);
        if let Some(v) = map.get(&next).or_else(|| map.get(&first)) {
            answers.push(v.clone());
        }
    }
    Scratchpad {
        ns: ns.to_owned(),
        resume: answers,
        counter: 0,
        calls: 0,
        source: source.clone(),
        writes: Vec::new(),
    }
}

/// The same failure for a second reader: message and control flow (the source stays with
/// the first).
fn copy_error(e: &NodeError) -> NodeError {
    NodeError {
        message: e.message.clone(),
        source: None,
        signal: e.signal.clone(),
    }
}

/// A call's result, to await.
pub(crate) enum CallFuture {
    /// Known already (saved, or the call could not be made).
    Ready(Option<Result<Value, NodeError>>),
    /// Running as its own task.
    Running(tokio::task::JoinHandle<Result<Value, NodeError>>),
}

impl Future for CallFuture {
    type Output = Result<Value, NodeError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            CallFuture::Ready(r) => Poll::Ready(
                r.take()
                    .unwrap_or_else(|| Err(NodeError::new("a task's result was awaited twice"))),
            ),
            CallFuture::Running(handle) => match Pin::new(handle).poll(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Ok(r)) => Poll::Ready(r),
                Poll::Ready(Err(e)) if e.is_panic() => {
                    let what = crate::run::panic_message(&*e.into_panic());
                    Poll::Ready(Err(NodeError::new(format!("the task panicked: {what}"))))
                }
                Poll::Ready(Err(_)) => Poll::Ready(Err(NodeError::new("the task was cancelled"))),
            },
        }
    }
}

/// A called task: its name, its body, the Rust path of its function (its identifier in cache
/// entries) and how it is tried and cached.
pub(crate) struct Callee<'a> {
    pub(crate) name: &'a str,
    pub(crate) body: &'a TaskFn,
    pub(crate) function: &'static str,
    pub(crate) attempts: &'a Attempts,
}

/// Calls `callee` with `input` from the task `ctx` runs: answered from its saved result if it
/// has one, else started at once as its own task (which first looks the input up in the node
/// cache, if the task has a cache policy).
pub(crate) fn call(ctx: &NodeContext, callee: Callee<'_>, input: Value) -> CallFuture {
    let Callee {
        name,
        body: f,
        function,
        attempts,
    } = callee;
    // Calling a task is progress for the caller's idle timeout.
    ctx.progressed();
    let Some(caller) = &ctx.caller else {
        return CallFuture::Ready(Some(Err(NodeError::new(format!(
            "task `{name}` was called outside a running graph or entrypoint"
        )))));
    };
    let scope = &caller.scope;
    let caller_path = task_path_str(&caller.path);
    // The call's position among the caller's calls (counted from 0 on every try).
    let idx = {
        let mut pad = ctx.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let idx = pad.calls;
        pad.calls += 1;
        idx
    };
    let task_ns = if ctx.checkpoint_ns.is_empty() {
        name.to_owned()
    } else {
        format!("{}|{name}", ctx.checkpoint_ns)
    };
    let id = task_id(
        &scope.checkpoint_id,
        &[
            &task_ns,
            &scope.step.to_string(),
            name,
            PUSH,
            &caller_path,
            &idx.to_string(),
        ],
    );
    let path: Arc<[String]> = vec![
        PUSH.to_owned(),
        caller_path,
        format!("{idx:010}"),
        CALLED.to_owned(),
    ]
    .into();
    let mut task = Task {
        id,
        name: name.to_owned(),
        path,
        triggers: vec![PUSH.to_owned()].into(),
        writes: Vec::new(),
        input: None,
    };
    let saved = scope
        .returns
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&task.id)
        .cloned();
    if let Some(value) = saved {
        task.writes = vec![(RETURN.to_owned(), value.clone())];
        // A closed channel means the step is over; the saved value is still the answer.
        scope.send(CallEvent::Replayed(task));
        return CallFuture::Ready(Some(Ok(value)));
    }
    let ns = format!("{task_ns}:{}", task.id);
    let answers = scope.answers.get(&task.id).cloned().unwrap_or_default();
    let pad = Arc::new(std::sync::Mutex::new(scratchpad(
        &ns,
        answers,
        &scope.resume,
    )));
    let child = NodeContext {
        node: name.to_owned(),
        task_id: task.id.clone(),
        step: scope.step,
        config: Arc::clone(&scope.config),
        values: Arc::new(crate::state::Values::new()),
        saver: scope.saver.clone(),
        checkpoint_ns: ns,
        parents: Arc::clone(&scope.parents),
        emitter: scope.emitter.clone(),
        message_metadata: None,
        stop: scope.stop,
        scratch: Arc::clone(&pad),
        resume: scope.resume.clone(),
        store: scope.store.clone(),
        caller: Some(Caller {
            scope: Arc::clone(scope),
            path: Arc::clone(&task.path),
        }),
        input: None,
        previous: None,
        progress: None,
        failure: None,
        resuming: scope.resuming,
        send_arg: None,
        runs: crate::stream::RunTree::off(),
    };
    if !scope.send(CallEvent::Started {
        task: task.clone(),
        input: input.clone(),
    }) {
        return CallFuture::Ready(Some(Err(NodeError::new(format!(
            "task `{name}` was called after its step ended"
        )))));
    }
    let events = Arc::clone(scope);
    let f = Arc::clone(f);
    let attempts = attempts.clone();
    // LangGraph's entry of a task: namespace `(__pregel_ns_writes, identifier)`, keyed by
    // the argument.
    let cached = match (&scope.cache, &attempts.cache) {
        (Some(cache), Some(policy)) => Some((
            Arc::clone(cache),
            policy.cache_key(function, None, &input),
            policy.ttl_value(),
        )),
        _ => None,
    };
    CallFuture::Running(tokio::spawn(async move {
        if let Some((cache, key, _)) = &cached
            && let Some(value) = cached_return(cache.as_ref(), key).await
        {
            let (saved, is_saved) = oneshot::channel();
            let sent = events.send(CallEvent::Finished {
                task,
                outcome: Ok(value.clone()),
                resume_writes: Vec::new(),
                saved,
                cached: true,
            });
            if !sent || is_saved.await.is_err() {
                return Err(NodeError::new(format!(
                    "the run ended before task `{}`'s result was taken",
                    child.node
                )));
            }
            return Ok(value);
        }
        let outcome = attempts
            .run(
                &child.node,
                |progress| {
                    let mut child = child.clone();
                    child.progress = progress;
                    f(input.clone(), child)
                },
                || pad.lock().unwrap_or_else(|e| e.into_inner()).restart(),
            )
            .await;
        let resume_writes =
            std::mem::take(&mut pad.lock().unwrap_or_else(|e| e.into_inner()).writes);
        let (saved, is_saved) = oneshot::channel();
        let copy = match &outcome {
            Ok(v) => Ok(v.clone()),
            Err(e) => Err(copy_error(e)),
        };
        let id = task.id.clone();
        let sent = events.send(CallEvent::Finished {
            task,
            outcome: copy,
            resume_writes,
            saved,
            cached: false,
        });
        if !sent || is_saved.await.is_err() {
            return Err(NodeError::new(format!(
                "the run ended before task `{}`'s result was saved",
                child.node
            )));
        }
        if let (Ok(v), Some(c)) = (&outcome, &child.caller) {
            let mut returns = c.scope.returns.lock().unwrap_or_else(|e| e.into_inner());
            returns.insert(id, v.clone());
        }
        if let (Ok(v), Some((cache, key, ttl))) = (&outcome, cached) {
            let writes = [(RETURN.to_owned(), v.clone())];
            crate::cache::keep_writes(cache.as_ref(), key, ttl, &writes, &child.node).await;
        }
        outcome
    }))
}

/// The result a cached call returned, if the cache holds one.
async fn cached_return(
    cache: &dyn Cache,
    key: &stategraph_checkpoint::cache::CacheKey,
) -> Option<Value> {
    let found = crate::cache::cached_writes(cache, std::slice::from_ref(key)).await;
    let (_, writes) = found.into_iter().next()?;
    let value = writes.into_iter().find(|(c, _)| c == RETURN)?.1;
    metrics::counter!("stategraph_cache_hits_total").increment(1);
    Some(value)
}

/// The writes a finished call leaves: its result, its interrupts or its error.
pub(crate) fn call_writes(
    outcome: &Result<Value, NodeError>,
    resume_writes: Vec<(String, Value)>,
) -> Vec<(String, Value)> {
    match outcome {
        Ok(v) => {
            let mut writes = resume_writes;
            writes.push((RETURN.to_owned(), v.clone()));
            writes
        }
        Err(NodeError {
            signal: Some(crate::error::Signal::Interrupt(interrupts)),
            ..
        }) => {
            let mut writes = vec![(
                reserved::INTERRUPT.to_owned(),
                Value::List(
                    interrupts
                        .iter()
                        .map(crate::interrupt::Interrupt::to_value)
                        .collect(),
                ),
            )];
            writes.extend(resume_writes);
            writes
        }
        Err(e) => vec![(reserved::ERROR.to_owned(), Value::from(e.message.clone()))],
    }
}
