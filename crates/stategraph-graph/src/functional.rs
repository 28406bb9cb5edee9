//! The Functional API (LangGraph's `@entrypoint` and `@task`): durable workflows written as
//! plain async functions.
//!
//! A [`Task`] is a named unit of work. Calling it from an entrypoint or from a graph's node
//! starts it at once and returns a future of its result. The result is saved in the
//! thread's checkpoint, so when the workflow runs again (after an interrupt, a crash or a
//! failed sibling) the call returns the saved result instead of running the task again.
//! Await calls one by one, or join them to run tasks in parallel.
//!
//! An [`Entrypoint`] is a workflow: an async function of one input, run with a checkpointer
//! like a compiled graph. It leaves the checkpoints Python LangGraph's `@entrypoint` leaves
//! (one node named after it, reading `__start__` and writing `__end__` and `__previous__`),
//! so the two share threads. [`NodeContext::previous`] gives it the value its last run on
//! the thread saved; [`Final`] returns one value and saves another.
//!
//! ```
//! use stategraph_graph::functional::{entrypoint, task, Outcome};
//! use stategraph_graph::RunConfig;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), stategraph_graph::GraphError> {
//! let double = task("double", |x: i64, _ctx| async move { Ok(x * 2) });
//! let workflow = entrypoint("workflow", move |n: i64, ctx| {
//!     let double = double.clone();
//!     async move {
//!         // Two calls run in parallel; each result is saved once it is ready.
//!         let (a, b) = (double.call(&ctx, n), double.call(&ctx, n + 1));
//!         Ok(a.await? + b.await?)
//!     }
//! })
//! .with_checkpointer(std::sync::Arc::new(stategraph_checkpoint::InMemorySaver::new()));
//! let done = workflow.invoke(3, RunConfig::thread("t")).await?;
//! assert_eq!(done, Outcome::Done(14));
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use serde::Serialize;
use serde::de::DeserializeOwned;
use stategraph_checkpoint::{CheckpointSaver, Map, Value};
use stategraph_store::Store;

use crate::attempts::Attempts;
use crate::call::{CallFuture, TaskFn};
use crate::channel::ChannelSpec;
use crate::compiled::{CompiledGraph, PregelNode};
use crate::config::RunConfig;
use crate::error::{GraphError, NodeError};
use crate::graph::{END, START};
use crate::interrupt::{Interrupt, Resume};
use crate::node::{NodeContext, NodeFn, NodeOutput, RunCommand};
use crate::retry::RetryPolicies;
use crate::run::RunSetup;
use crate::state::{DynState, Schema, from_value, to_value};
use crate::stream::{RunStream, StreamMode};

/// The channel holding the value an entrypoint's last run saved (its `previous`).
pub const PREVIOUS: &str = "__previous__";

/// A named unit of durable work (LangGraph's `@task`). Cheap to clone.
pub struct Task<I, O> {
    name: Arc<str>,
    body: TaskFn,
    /// The Rust path of the body's type: the task's identifier in cache entries.
    function: &'static str,
    attempts: Attempts,
    types: PhantomData<fn(I) -> O>,
}

impl<I, O> Clone for Task<I, O> {
    fn clone(&self) -> Self {
        Self {
            name: Arc::clone(&self.name),
            body: Arc::clone(&self.body),
            function: self.function,
            attempts: self.attempts.clone(),
            types: PhantomData,
        }
    }
}

impl<I, O> std::fmt::Debug for Task<I, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task")
            .field("name", &self.name)
            .field("attempts", &self.attempts)
            .finish_non_exhaustive()
    }
}

/// A task named `name` running `body`. Its input and result are stored as LangGraph stores
/// values (serde), so they must serialize; a call with the same name, from the same place in
/// the same workflow, is the same task to Python LangGraph.
pub fn task<I, O, F, Fut>(name: impl Into<String>, body: F) -> Task<I, O>
where
    I: DeserializeOwned + Send + 'static,
    O: Serialize + Send + 'static,
    F: Fn(I, NodeContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, NodeError>> + Send + 'static,
{
    let name: Arc<str> = Arc::from(name.into());
    let key = Arc::clone(&name);
    let body: TaskFn = Arc::new(move |input: Value, ctx: NodeContext| {
        let typed = from_value::<I>(&key, &input).map_err(NodeError::from);
        let fut = typed.map(|i| body(i, ctx));
        Box::pin(async move {
            let out = fut?.await?;
            to_value(&out).map_err(NodeError::from)
        })
    });
    Task {
        name,
        body,
        function: std::any::type_name::<F>(),
        attempts: Attempts::default(),
        types: PhantomData,
    }
}

impl<I: Serialize, O: DeserializeOwned> Task<I, O> {
    /// The same task, retried by `policies` when it fails (one
    /// [`RetryPolicy`](crate::RetryPolicy) or a list: see [`RetryPolicies`]).
    pub fn with_retry(mut self, policies: impl Into<RetryPolicies>) -> Self {
        self.attempts.retry = Some(policies.into());
        self
    }

    /// The same task, each try limited by `policy` (LangGraph's `@task(timeout=)`): a
    /// [`TimeoutPolicy`](crate::TimeoutPolicy), or a [`Duration`](std::time::Duration) as a
    /// run timeout. A try that runs out fails with a
    /// [`NodeTimeoutError`](crate::NodeTimeoutError), retried by the task's retry policy.
    pub fn with_timeout(mut self, policy: impl Into<crate::timeout::TimeoutPolicy>) -> Self {
        self.attempts.timeout = Some(policy.into());
        self
    }

    /// The same task, its results cached by `policy` (LangGraph's `@task(cache_policy=)`):
    /// when the graph or entrypoint that calls it has a cache, a call whose argument keys to
    /// a live entry returns the cached result without running (and nothing is saved for it in
    /// the thread); a call that runs and succeeds leaves its result there. The key function
    /// sees the argument. Its entries' namespace is `(__pregel_ns_writes, identifier)`, the
    /// identifier being the body's Rust path unless the policy names one
    /// ([`CachePolicy::identifier`](crate::CachePolicy::identifier)).
    pub fn with_cache(mut self, policy: crate::cache::CachePolicy) -> Self {
        self.attempts.cache = Some(policy);
        self
    }

    /// The task's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Calls the task from the entrypoint or node `ctx` runs: it starts at once (or, if
    /// its result is saved in the thread, is answered from it) and the future resolves to
    /// its result once that is saved. Calls are told apart by their order in the caller:
    /// a workflow that runs again must make the same calls in the same order.
    pub fn call(&self, ctx: &NodeContext, input: I) -> TaskFuture<O> {
        let inner = match to_value(&input) {
            Ok(v) => crate::call::call(
                ctx,
                crate::call::Callee {
                    name: &self.name,
                    body: &self.body,
                    function: self.function,
                    attempts: &self.attempts,
                },
                v,
            ),
            Err(e) => CallFuture::Ready(Some(Err(e.into()))),
        };
        TaskFuture {
            inner,
            name: Arc::clone(&self.name),
            types: PhantomData,
        }
    }
}

/// The result of a [`Task::call`], to await.
pub struct TaskFuture<O> {
    inner: CallFuture,
    name: Arc<str>,
    types: PhantomData<fn() -> O>,
}

impl<O: DeserializeOwned> Future for TaskFuture<O> {
    type Output = Result<O, NodeError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(r) => Poll::Ready(
                r.and_then(|v| from_value::<O>(&this.name, &v).map_err(NodeError::from)),
            ),
        }
    }
}

/// What an entrypoint returns when it saves something else for its next run
/// (LangGraph's `entrypoint.final`): the caller gets `value`, the next run's
/// [`previous`](NodeContext::previous) is `save`.
#[derive(Clone, Debug, PartialEq)]
pub struct Final<O, P> {
    /// What the run returns.
    pub value: O,
    /// What the thread's next run sees as `previous`.
    pub save: P,
}

impl<O, P> Final<O, P> {
    /// Returns `value`, saves `save`.
    pub fn new(value: O, save: P) -> Self {
        Self { value, save }
    }
}

/// How a run of an entrypoint ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome<O> {
    /// It returned this.
    Done(O),
    /// It stopped on these interrupts: resume it with [`Entrypoint::resume`].
    Interrupted(Vec<Interrupt>),
}

impl<O> Outcome<O> {
    /// The returned value, if the run finished.
    pub fn done(self) -> Option<O> {
        match self {
            Outcome::Done(o) => Some(o),
            Outcome::Interrupted(_) => None,
        }
    }
}

impl NodeContext {
    /// In an entrypoint: the value its last run on this thread saved (LangGraph's
    /// `previous`), `None` on a thread's first run (or in a graph's node).
    pub fn previous<T: DeserializeOwned>(&self) -> Result<Option<T>, NodeError> {
        match &self.previous {
            None | Some(Value::Null) => Ok(None),
            Some(v) => from_value(PREVIOUS, v).map(Some).map_err(NodeError::from),
        }
    }
}

/// A durable workflow (LangGraph's `@entrypoint`): run, stream and inspect it like a compiled
/// graph. Cheap to clone.
pub struct Entrypoint<I, O> {
    graph: CompiledGraph<DynState>,
    types: PhantomData<fn(I) -> O>,
}

impl<I, O> Clone for Entrypoint<I, O> {
    fn clone(&self) -> Self {
        Self {
            graph: self.graph.clone(),
            types: PhantomData,
        }
    }
}

impl<I, O> std::fmt::Debug for Entrypoint<I, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entrypoint")
            .field("graph", &self.graph)
            .finish()
    }
}

impl<I, O> From<Entrypoint<I, O>> for CompiledGraph<DynState> {
    /// The graph the workflow runs (see [`Entrypoint::graph`]), e.g. to serve it where
    /// graphs are served.
    fn from(workflow: Entrypoint<I, O>) -> Self {
        workflow.graph
    }
}

/// An entrypoint named `name` running `body`; what it returns is also what its next run on
/// the thread sees as [`previous`](NodeContext::previous). Name it as the Python function
/// it shares threads with.
pub fn entrypoint<I, O, F, Fut>(name: impl Into<String>, body: F) -> Entrypoint<I, O>
where
    I: Serialize + DeserializeOwned + Send + 'static,
    O: Serialize + DeserializeOwned + Send + 'static,
    F: Fn(I, NodeContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, NodeError>> + Send + 'static,
{
    build(
        name.into(),
        move |input: Value, ctx: NodeContext, name: Arc<str>| {
            let fut = from_value::<I>(&name, &input)
                .map_err(NodeError::from)
                .map(|i| body(i, ctx));
            async move {
                let value = to_value(&fut?.await?).map_err(NodeError::from)?;
                Ok((value.clone(), value))
            }
        },
    )
}

/// An entrypoint whose runs return one value and save another ([`Final`]).
pub fn entrypoint_final<I, O, P, F, Fut>(name: impl Into<String>, body: F) -> Entrypoint<I, O>
where
    I: Serialize + DeserializeOwned + Send + 'static,
    O: Serialize + DeserializeOwned + Send + 'static,
    P: Serialize + Send + 'static,
    F: Fn(I, NodeContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Final<O, P>, NodeError>> + Send + 'static,
{
    build(
        name.into(),
        move |input: Value, ctx: NodeContext, name: Arc<str>| {
            let fut = from_value::<I>(&name, &input)
                .map_err(NodeError::from)
                .map(|i| body(i, ctx));
            async move {
                let Final { value, save } = fut?.await?;
                Ok((
                    to_value(&value).map_err(NodeError::from)?,
                    to_value(&save).map_err(NodeError::from)?,
                ))
            }
        },
    )
}

/// The graph of an entrypoint: one node named after it, triggered by `__start__`, writing
/// what it returns to `__end__` and what it saves to `__previous__`.
fn build<I, O, F, Fut>(name: String, body: F) -> Entrypoint<I, O>
where
    F: Fn(Value, NodeContext, Arc<str>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(Value, Value), NodeError>> + Send + 'static,
{
    let key: Arc<str> = Arc::from(name.as_str());
    let run: NodeFn<DynState> = Arc::new(move |_state, ctx: NodeContext| {
        let input = ctx.input.clone().unwrap_or(Value::Null);
        let fut = body(input, ctx, Arc::clone(&key));
        Box::pin(async move {
            let (value, save) = fut.await?;
            Ok(NodeOutput::Writes(vec![
                (END.to_owned(), value),
                (PREVIOUS.to_owned(), save),
            ]))
        })
    });
    let node = PregelNode {
        name: name.clone(),
        triggers: vec![START.to_owned()].into(),
        pull_path: crate::step::pull_path(&name),
        run: Some(run),
        subgraph: None,
        attempts: Attempts::default(),
        entrypoint: true,
        error_handler: None,
        function: std::any::type_name::<F>(),
    };
    let channels = vec![
        (START.to_owned(), ChannelSpec::Ephemeral { guard: true }),
        (END.to_owned(), ChannelSpec::LastValue),
        (PREVIOUS.to_owned(), ChannelSpec::LastValue),
    ];
    let graph = CompiledGraph::new(
        Schema::new().last_value(END),
        channels,
        vec![node],
        HashMap::new(),
    );
    Entrypoint {
        graph,
        types: PhantomData,
    }
}

impl<I: Serialize, O: DeserializeOwned> Entrypoint<I, O> {
    /// The same entrypoint, saving its threads in `saver`.
    pub fn with_checkpointer(mut self, saver: Arc<dyn CheckpointSaver>) -> Self {
        self.graph = self.graph.with_checkpointer(saver);
        self
    }

    /// The same entrypoint, with a cross-thread store for its tasks
    /// ([`NodeContext::store`]).
    pub fn with_store(mut self, store: Arc<dyn Store>) -> Self {
        self.graph = self.graph.with_store(store);
        self
    }

    /// The same entrypoint, with a node cache for the tasks it calls that have a cache
    /// policy ([`Task::with_cache`]; LangGraph's `@entrypoint(cache=)`).
    pub fn with_cache(mut self, cache: Arc<dyn stategraph_checkpoint::cache::Cache>) -> Self {
        self.graph = self.graph.with_cache(cache);
        self
    }

    /// The same entrypoint, retried by `policies` when its body fails (one
    /// [`RetryPolicy`](crate::RetryPolicy) or a list: see [`RetryPolicies`]).
    pub fn with_retry(self, policies: impl Into<RetryPolicies>) -> Self {
        let policies = policies.into();
        self.with_attempts(|a| a.retry = Some(policies.clone()))
    }

    /// The same entrypoint, each try of its body limited by `policy` (LangGraph's
    /// `@entrypoint(timeout=)`; see [`Task::with_timeout`]).
    pub fn with_timeout(self, policy: impl Into<crate::timeout::TimeoutPolicy>) -> Self {
        let policy = policy.into();
        self.with_attempts(|a| a.timeout = Some(policy.clone()))
    }

    /// The same entrypoint, its body's policies changed by `change`.
    fn with_attempts(mut self, change: impl Fn(&mut Attempts)) -> Self {
        if let Some(nodes) = Arc::get_mut(&mut self.graph.nodes) {
            for n in nodes {
                change(&mut n.attempts);
            }
        }
        self
    }

    /// The graph it runs: for its threads' state ([`CompiledGraph::get_state`]; the value
    /// returned last is under `__end__`), history, `update_state` and everything else a
    /// compiled graph offers.
    pub fn graph(&self) -> &CompiledGraph<DynState> {
        &self.graph
    }

    /// Runs the workflow on `input` (LangGraph's `invoke(input)`): what it returned, or the
    /// interrupts it stopped on.
    pub async fn invoke(&self, input: I, config: RunConfig) -> Result<Outcome<O>, GraphError> {
        let mut setup = RunSetup::new(self.graph.checkpointer.clone());
        setup.input = Some(to_value(&input)?);
        self.outcome(self.graph.run_with(config, setup).await?)
    }

    /// Continues the thread from its latest checkpoint without new input (LangGraph's
    /// `invoke(None)`): after a crash, the workflow runs again and the calls whose results
    /// were saved return them instead of running.
    pub async fn continue_run(&self, config: RunConfig) -> Result<Outcome<O>, GraphError> {
        let setup = RunSetup::new(self.graph.checkpointer.clone());
        self.outcome(self.graph.run_with(config, setup).await?)
    }

    /// Answers the interrupts the thread's last run stopped on and runs the workflow again
    /// (LangGraph's `invoke(Command(resume=...))`): finished tasks are not run again.
    pub async fn resume(
        &self,
        resume: Resume,
        config: RunConfig,
    ) -> Result<Outcome<O>, GraphError> {
        let setup = self.resume_setup(resume)?;
        self.outcome(self.graph.run_with(config, setup).await?)
    }

    /// [`invoke`](Self::invoke), streaming `modes` (the default of an entrypoint, as in
    /// LangGraph, is [`StreamMode::Updates`]: each task's result, then the workflow's).
    pub fn stream(&self, input: I, config: RunConfig, modes: &[StreamMode]) -> RunStream<DynState> {
        match to_value(&input) {
            Ok(v) => {
                let mut setup = RunSetup::new(self.graph.checkpointer.clone());
                setup.input = Some(v);
                self.graph.stream_setup(config, modes, setup)
            }
            Err(e) => RunStream::failed(e),
        }
    }

    /// [`resume`](Self::resume), streaming `modes`.
    pub fn stream_resume(
        &self,
        resume: Resume,
        config: RunConfig,
        modes: &[StreamMode],
    ) -> RunStream<DynState> {
        match self.resume_setup(resume) {
            Ok(setup) => self.graph.stream_setup(config, modes, setup),
            Err(e) => RunStream::failed(e),
        }
    }

    fn resume_setup(&self, resume: Resume) -> Result<RunSetup, GraphError> {
        self.graph
            .command_setup(RunCommand::<Map>::resume(resume), crate::state::map_writes)
    }

    fn outcome(&self, run: crate::run::RunOutcome<DynState>) -> Result<Outcome<O>, GraphError> {
        if !run.interrupts.is_empty() {
            return Ok(Outcome::Interrupted(run.interrupts));
        }
        let value = run.values.get(END).cloned().unwrap_or(Value::Null);
        Ok(Outcome::Done(from_value(END, &value)?))
    }
}
