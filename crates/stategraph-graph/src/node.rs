//! Nodes, branches and what they are handed at run time.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::config::RunConfig;
use crate::error::NodeError;
use crate::state::State;

/// What a node returns.
#[derive(Debug)]
#[non_exhaustive]
pub enum NodeOutput<U> {
    /// A partial state update.
    Update(U),
    /// No update (LangGraph: the node returned `None`).
    Empty,
    /// An update plus where to go next.
    Command(Command<U>),
    /// Raw channel writes: a subgraph's or an entrypoint's, or what a typed update cannot
    /// say, such as an [`Overwrite`](crate::Overwrite) of a reducer key.
    Writes(Vec<(String, stategraph_checkpoint::Value)>),
    /// Raw state writes with routing (a `Command` whose update a typed update cannot say,
    /// such as a tool's): the writes, the nodes to run next, and whether both address the
    /// parent graph (LangGraph's `graph=Command.PARENT`).
    RawCommand {
        /// State writes, in order.
        writes: Vec<(String, stategraph_checkpoint::Value)>,
        /// Nodes to run next (`END`: none).
        goto: Vec<String>,
        /// Whether the writes and routing apply to the parent graph.
        parent: bool,
    },
}

/// A message to run `node` with `arg` as its whole input (LangGraph's `Send`), for map-reduce
/// fan-outs: each `Send` becomes its own task in the next super-step.
#[derive(Clone, Debug, PartialEq)]
pub struct Send<U> {
    /// The node to run.
    pub node: String,
    /// Its input, instead of the graph state.
    pub arg: U,
}

impl<U> Send<U> {
    /// A `Send` to `node` with input `arg`.
    pub fn new(node: impl Into<String>, arg: U) -> Self {
        Self {
            node: node.into(),
            arg,
        }
    }
}

/// Where control goes next: a node by name (or `END`), or a [`Send`].
#[derive(Clone, Debug, PartialEq)]
pub enum Goto<U> {
    /// Run this node in the next step (`END`: nothing).
    Node(String),
    /// Run a node with its own input in the next step.
    Send(Send<U>),
}

impl<U> From<&str> for Goto<U> {
    fn from(s: &str) -> Self {
        Goto::Node(s.to_owned())
    }
}
impl<U> From<String> for Goto<U> {
    fn from(s: String) -> Self {
        Goto::Node(s)
    }
}
impl<U> From<Send<U>> for Goto<U> {
    fn from(s: Send<U>) -> Self {
        Goto::Send(s)
    }
}

/// A node's combined answer (LangGraph's `Command`): a state update and where to go next,
/// in addition to the node's static edges.
#[derive(Clone, Debug)]
pub struct Command<U> {
    /// The state update, if any.
    pub update: Option<U>,
    /// Nodes (or `Send`s) to run next.
    pub goto: Vec<Goto<U>>,
    /// Address the parent graph instead (from inside a subgraph): the update and the routing
    /// apply to the parent, as the result of the subgraph's node.
    pub parent: bool,
}

impl<U> Command<U> {
    /// A command that only routes.
    pub fn goto(goto: impl Into<Goto<U>>) -> Self {
        Self {
            update: None,
            goto: vec![goto.into()],
            parent: false,
        }
    }

    /// A command that updates and routes (to node names, `END` or [`Send`]s).
    pub fn update_and_goto(update: U, goto: impl IntoIterator<Item = impl Into<Goto<U>>>) -> Self {
        Self {
            update: Some(update),
            goto: goto.into_iter().map(Into::into).collect(),
            parent: false,
        }
    }

    /// The same command, addressed to the parent graph (LangGraph's `graph=Command.PARENT`).
    pub fn to_parent(mut self) -> Self {
        self.parent = true;
        self
    }
}

impl<U> From<Command<U>> for NodeOutput<U> {
    fn from(c: Command<U>) -> Self {
        NodeOutput::Command(c)
    }
}

impl<U> From<U> for NodeOutput<U> {
    fn from(u: U) -> Self {
        NodeOutput::Update(u)
    }
}

/// The boxed future a node runs.
pub type NodeFuture<U> =
    Pin<Box<dyn Future<Output = Result<NodeOutput<U>, NodeError>> + std::marker::Send>>;

/// A node: takes the super-step's shared state snapshot and its context.
pub(crate) type NodeFn<S> =
    Arc<dyn Fn(Arc<S>, NodeContext) -> NodeFuture<<S as State>::Update> + std::marker::Send + Sync>;

/// A conditional edge's routing function: the state (with the node's own update applied)
/// → routes (node names or path-map keys, `__end__` to stop, or [`Send`]s).
pub(crate) type BranchFn<S> = Arc<
    dyn Fn(&S) -> Result<Vec<Goto<<S as State>::Update>>, NodeError> + std::marker::Send + Sync,
>;

/// What a running node can see besides the state.
#[derive(Clone)]
pub struct NodeContext {
    /// The node's name.
    pub node: String,
    /// The task id (LangGraph's, stable for a given checkpoint and node).
    pub task_id: String,
    /// The super-step the task runs in.
    pub step: i64,
    /// The run's config, including any `configurable` keys (e.g. `user_id`).
    pub config: Arc<RunConfig>,
    /// The step's state as raw values (shared, not copied).
    pub(crate) values: Arc<crate::state::Values>,
    /// The run's checkpointer, inherited by subgraphs.
    pub(crate) saver: Option<Arc<dyn stategraph_checkpoint::CheckpointSaver>>,
    /// The namespace a subgraph run by this task checkpoints under (`node:task_id`).
    pub(crate) checkpoint_ns: String,
    /// The enclosing graphs' checkpoint ids, for a subgraph's `parents` metadata.
    pub(crate) parents: Arc<std::collections::BTreeMap<String, String>>,
    /// The run's stream, if it is being streamed.
    pub(crate) emitter: Option<crate::stream::Emitter>,
    /// The metadata of this task's messages, when the run streams `messages`.
    pub(crate) message_metadata: Option<Arc<stategraph_checkpoint::Map>>,
    /// LangGraph's `stop`: the step past which the run fails (recursion limit).
    pub(crate) stop: i64,
    /// The task's interrupt bookkeeping.
    pub(crate) scratch: Arc<std::sync::Mutex<crate::interrupt::Scratchpad>>,
    /// The answers available to this task (inherited by a subgraph it runs).
    pub(crate) resume: crate::interrupt::ResumeSource,
    /// The graph's cross-thread store, inherited by subgraphs.
    pub(crate) store: Option<Arc<dyn stategraph_store::Store>>,
    /// How this task calls tasks (`None` outside a run).
    pub(crate) caller: Option<crate::call::Caller>,
    /// An entrypoint's input (what the run wrote to `__start__`).
    pub(crate) input: Option<stategraph_checkpoint::Value>,
    /// An entrypoint's `previous`: the value its last run on the thread saved.
    pub(crate) previous: Option<stategraph_checkpoint::Value>,
    /// The progress clock of this try's idle timeout, if it has one.
    pub(crate) progress: Option<Arc<crate::timeout::Progress>>,
    /// In an error handler, the failure it handles.
    pub(crate) failure: Option<Arc<crate::handler::NodeFailure>>,
    /// Whether the run is resuming (a subgraph run here continues its checkpoint).
    pub(crate) resuming: bool,
    /// The argument of the `Send` that started this task.
    pub(crate) send_arg: Option<stategraph_checkpoint::Value>,
    /// This task's place in the run tree ([`StreamMode::Events`](crate::StreamMode::Events)).
    pub(crate) runs: crate::stream::RunTree,
}

impl NodeContext {
    /// Asks for human input (LangGraph's `interrupt(value)`): returns the answer when the run
    /// was resumed with one, otherwise stops the run — `?` propagates it — and the thread
    /// waits with this interrupt pending. A node may interrupt several times; on resume it
    /// runs again from its start and earlier interrupts return their answers in order.
    pub fn interrupt(
        &self,
        value: impl Into<stategraph_checkpoint::Value>,
    ) -> Result<stategraph_checkpoint::Value, NodeError> {
        crate::interrupt::Scratchpad::interrupt(&self.scratch, value.into())
            .map_err(|i| NodeError::interrupted(vec![i]))
    }

    /// [`interrupt`](Self::interrupt) with an interrupt raised elsewhere, keeping its `id`
    /// (a remote graph's, which its own server made): the run stops on it as it is, and a
    /// [`Resume::ById`](crate::Resume::ById) naming that id answers it, as does a single
    /// [`Resume::Value`](crate::Resume::Value).
    pub fn interrupt_with_id(
        &self,
        value: impl Into<stategraph_checkpoint::Value>,
        id: impl Into<String>,
    ) -> Result<stategraph_checkpoint::Value, NodeError> {
        crate::interrupt::Scratchpad::interrupt_as(&self.scratch, value.into(), Some(id.into()))
            .map_err(|i| NodeError::interrupted(vec![i]))
    }

    /// The modes in which the run streams its subgraphs' events
    /// ([`RunConfig::with_subgraph_events`](crate::RunConfig::with_subgraph_events)): what a
    /// node running a graph of its own elsewhere (a remote graph) should pass on with
    /// [`send_subgraph_event`](Self::send_subgraph_event). Empty when subgraph events are
    /// not streamed.
    pub fn subgraph_modes(&self) -> Vec<crate::stream::StreamMode> {
        match &self.emitter {
            Some(e) if e.streams_subgraphs() => e.modes().collect(),
            _ => Vec::new(),
        }
    }

    /// Passes on an event of a graph this node runs elsewhere (a remote graph's, read from
    /// its server's stream) as a subgraph event of this task: its namespace is this task's
    /// (`node:task_id`) followed by `namespace`, the event's own inside that graph. Dropped
    /// unless [`subgraph_modes`](Self::subgraph_modes) has its mode; waits when the
    /// stream's reader is behind.
    pub async fn send_subgraph_event(
        &self,
        namespace: &[&str],
        event: crate::stream::StreamEvent<crate::state::DynState>,
    ) {
        self.progressed();
        let Some(e) = &self.emitter else {
            return;
        };
        let full: Vec<String> = self
            .checkpoint_ns
            .split('|')
            .chain(namespace.iter().copied())
            .map(str::to_owned)
            .collect();
        e.emit_nested(full, event);
        e.room().await;
    }

    /// The thread the run is on, if any.
    pub fn thread_id(&self) -> Option<&str> {
        self.config.thread_id.as_deref()
    }

    /// Whether the run resumes the thread (answers interrupts, or continues after a
    /// failure) rather than starting on new input.
    pub fn is_resuming(&self) -> bool {
        self.resuming
    }

    /// The run's typed context, if one of type `C` was given with
    /// [`RunConfig::with_context`].
    pub fn context<C: std::any::Any + std::marker::Send + Sync>(&self) -> Option<&C> {
        self.config.context.as_ref()?.0.downcast_ref()
    }

    /// The cross-thread memory store the graph was compiled with
    /// ([`CompiledGraph::with_store`](crate::CompiledGraph::with_store)), shared by every
    /// thread: what one conversation saves here, another can find. Subgraphs see their
    /// parent's store unless they have their own.
    pub fn store(&self) -> Option<&Arc<dyn stategraph_store::Store>> {
        self.store.as_ref()
    }

    /// A `configurable` key of the run's config (e.g. `user_id`).
    pub fn configurable(&self, key: &str) -> Option<&serde_json::Value> {
        self.config.configurable.get(key)
    }

    /// Tells the node's idle timeout it is making progress (LangGraph's
    /// `runtime.heartbeat()`): work that streams nothing and calls no task beats now and then
    /// so that a [`TimeoutPolicy`](crate::TimeoutPolicy)'s `idle_timeout` does not cancel it.
    /// The run timeout is never pushed back. A no-op without an idle timeout.
    pub fn heartbeat(&self) {
        if let Some(p) = &self.progress {
            p.heartbeat();
        }
    }

    /// Progress the node made on its own (stream output, a task call), which pushes back an
    /// idle timeout refreshed by [`RefreshOn::Auto`](crate::RefreshOn::Auto).
    pub(crate) fn progressed(&self) {
        if let Some(p) = &self.progress {
            p.progressed();
        }
    }

    /// Sends `value` to the `custom` stream mode (a no-op when nobody streams it). When the
    /// stream's reader is [`STREAM_CAPACITY`](crate::stream::STREAM_CAPACITY) events behind,
    /// this waits for it.
    pub async fn write_custom(&self, value: impl Into<stategraph_checkpoint::Value>) {
        self.progressed();
        if let Some(e) = &self.emitter {
            let value = value.into();
            e.emit(crate::stream::StreamMode::Custom, move || {
                crate::stream::StreamEvent::Custom(value)
            });
            e.room().await;
        }
    }

    /// The namespace a subgraph started by this task checkpoints under (`node:task_id`).
    pub fn checkpoint_ns(&self) -> &str {
        &self.checkpoint_ns
    }

    /// The state this task was given, as raw values: the step's state, or a `Send`'s
    /// argument for a task a `Send` started (LangGraph hands a node either).
    pub fn input_values(&self) -> &crate::state::Values {
        &self.values
    }

    /// The argument of the `Send` that started this task, as it was sent (`None` for a task
    /// the graph's edges started). A map argument is also the task's
    /// [`input_values`](Self::input_values); any other value (see [`SEND_ARG`]) leaves the
    /// task reading the step's state.
    pub fn send_arg(&self) -> Option<&stategraph_checkpoint::Value> {
        self.send_arg.as_ref()
    }

    /// How many more steps the run may take before it hits its recursion limit, counting
    /// this one (LangGraph's `RemainingSteps` managed value): 1 means this is the last.
    pub fn remaining_steps(&self) -> i64 {
        self.stop - self.step
    }

    /// Where the runnables this node invokes report their runs (LangChain's callbacks): a
    /// model's `on_chat_model_*` events, a tool's `on_tool_*`, a chain of the node's own.
    /// Off (reporting nothing, building nothing) unless the run streams
    /// [`StreamMode::Events`](crate::StreamMode::Events).
    ///
    /// ```
    /// # use stategraph_graph::{NodeContext, stream::RunKind};
    /// # use stategraph_checkpoint::{Map, Value};
    /// fn lookup(ctx: &NodeContext, key: &str) -> String {
    ///     let run = ctx
    ///         .run_tree()
    ///         .child(RunKind::Retriever, "lookup", None, &Map::new(), || Value::from(key));
    ///     let found = format!("the value of {key}");
    ///     run.end(|| Value::from(found.as_str()));
    ///     found
    /// }
    /// ```
    pub fn run_tree(&self) -> &crate::stream::RunTree {
        &self.runs
    }

    /// Whether the run streams the `messages` mode, so that a model called here should
    /// stream its answer ([`send_message_chunk`](Self::send_message_chunk)) rather than
    /// wait for all of it.
    pub fn streams_messages(&self) -> bool {
        self.message_metadata.is_some()
    }

    /// Sends a piece of a model's answer to the `messages` stream, with this task's
    /// metadata plus `metadata` (e.g. LangChain's `ls_provider`, `ls_model_name`), as
    /// LangGraph streams a chat model's tokens. The message the node then returns with the
    /// same id is not streamed again. A no-op when nobody streams `messages`; waits when the
    /// stream's reader is behind.
    pub async fn send_message_chunk(
        &self,
        chunk: stategraph_messages::AiMessageChunk,
        metadata: &stategraph_checkpoint::Map,
    ) {
        self.progressed();
        let (Some(e), Some(task_metadata)) = (&self.emitter, &self.message_metadata) else {
            return;
        };
        let chunk = match &chunk.fields.id {
            Some(_) => chunk,
            None => chunk.with_id(stategraph_checkpoint::uuid4()),
        };
        if let Some(id) = &chunk.fields.id {
            e.mark_seen(id);
        }
        let mut all = (**task_metadata).clone();
        for (k, v) in metadata.iter() {
            all.insert(k.clone(), v.clone());
        }
        e.emit(crate::stream::StreamMode::Messages, move || {
            crate::stream::StreamEvent::Messages(crate::stream::MessageEvent {
                message: stategraph_messages::Message::AiChunk(chunk),
                metadata: all,
            })
        });
        e.room().await;
    }
}

impl std::fmt::Debug for NodeContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeContext")
            .field("node", &self.node)
            .field("task_id", &self.task_id)
            .field("step", &self.step)
            .field("checkpoint_ns", &self.checkpoint_ns)
            .finish_non_exhaustive()
    }
}

/// Wraps an async closure as a node.
pub(crate) fn node_fn<S, F, Fut, O>(f: F) -> NodeFn<S>
where
    S: State,
    F: Fn(Arc<S>, NodeContext) -> Fut + std::marker::Send + Sync + 'static,
    Fut: Future<Output = Result<O, NodeError>> + std::marker::Send + 'static,
    O: Into<NodeOutput<S::Update>>,
{
    Arc::new(move |state, ctx| {
        let fut = f(state, ctx);
        Box::pin(async move { fut.await.map(Into::into) })
    })
}

/// A `Send` in a typed state or value is stored as Python stores `langgraph.types.Send`.
impl<U: serde::Serialize + serde::de::DeserializeOwned> stategraph_value::py::PyType for Send<U> {
    fn to_py(&self) -> Result<stategraph_checkpoint::Value, stategraph_checkpoint::SerdeError> {
        let arg = crate::state::to_value(&self.arg).map_err(|e| {
            stategraph_checkpoint::SerdeError::Shape {
                path: "arg".into(),
                message: e.to_string(),
            }
        })?;
        Ok(send_value(&self.node, arg))
    }

    fn from_py(
        value: &stategraph_checkpoint::Value,
    ) -> Result<Self, stategraph_checkpoint::SerdeError> {
        stategraph_value::py::object_data(
            value,
            stategraph_checkpoint::ExtCode::ConstructorPosArgs,
            &[("langgraph.types", "Send")],
        )?;
        let shape = |message: String| stategraph_checkpoint::SerdeError::Shape {
            path: String::new(),
            message,
        };
        let (node, arg) =
            parse_send(value).ok_or_else(|| shape(format!("a Send needs [node, arg]: {value}")))?;
        let arg = crate::state::from_value("arg", &arg).map_err(|e| shape(e.to_string()))?;
        Ok(Self { node, arg })
    }
}

/// The key that makes a [`Send`]'s argument a plain value rather than a map of state keys:
/// a `Send` whose update is one write to this key carries the written value as its argument
/// as it is (a list, a string, …), as Python's `Send(node, arg)` may. The task it starts sees
/// the value through [`NodeContext::send_arg`] and, as its state, the graph's state (as
/// LangGraph's `ToolNode` reads the state for a `Send` of tool calls).
pub const SEND_ARG: &str = "__send_arg__";

/// A `Send` as LangGraph stores it: ext 1, `["langgraph.types", "Send", [node, arg]]`.
pub(crate) fn send_value(
    node: &str,
    arg: stategraph_checkpoint::Value,
) -> stategraph_checkpoint::Value {
    use stategraph_checkpoint::{Ext, ExtCode, Value};
    Value::Ext(Ext::python(
        ExtCode::ConstructorPosArgs,
        "langgraph.types",
        "Send",
        Value::from(vec![Value::from(node), arg]),
    ))
}

/// Reads a stored `Send`: its node and argument.
pub(crate) fn parse_send(
    v: &stategraph_checkpoint::Value,
) -> Option<(String, stategraph_checkpoint::Value)> {
    let stategraph_checkpoint::Value::Ext(e) = v else {
        return None;
    };
    let obj = e.py_object().ok().flatten()?;
    if obj.class != "Send" {
        return None;
    }
    let parts = obj.data.as_list()?;
    let node = parts.first()?.as_str()?.to_owned();
    Some((node, parts.get(1).cloned().unwrap_or_default()))
}

/// A run's input as LangGraph's `Command` (`invoke(Command(resume=…, update=…, goto=…))`).
///
/// Unlike new input, a command acts on the thread where it stands: it answers pending
/// interrupts, writes a state update as if no node had (through the reducers), and schedules
/// nodes (or [`Send`]s) for the next step. Its writes are saved against the checkpoint the
/// run starts from without a task, as LangGraph saves them, so Python reading the thread
/// applies them the same way. Run it with
/// [`CompiledGraph::invoke_command`](crate::CompiledGraph::invoke_command) (or the `_values`
/// and `stream_` forms).
///
/// ```
/// use stategraph_checkpoint::{Map, value};
/// use stategraph_graph::{Resume, RunCommand};
/// let approve: RunCommand<Map> = RunCommand::resume(Resume::Value(value!("yes")));
/// let redo = RunCommand::update(Map::from_iter([("foo", value!("edited"))])).with_goto("node_b");
/// assert!(redo.resume.is_none() && redo.goto.len() == 1 && approve.update.is_none());
/// ```
#[derive(Clone, Debug)]
pub struct RunCommand<U> {
    /// Answers to pending interrupts.
    pub resume: Option<crate::interrupt::Resume>,
    /// A state update, applied before the next step.
    pub update: Option<U>,
    /// Nodes (or `Send`s) to run in the next step, besides those already due.
    pub goto: Vec<Goto<U>>,
}

impl<U> RunCommand<U> {
    /// A command that answers pending interrupts.
    pub fn resume(resume: crate::interrupt::Resume) -> Self {
        Self {
            resume: Some(resume),
            update: None,
            goto: Vec::new(),
        }
    }

    /// A command that updates the state.
    pub fn update(update: U) -> Self {
        Self {
            resume: None,
            update: Some(update),
            goto: Vec::new(),
        }
    }

    /// A command that schedules a node (or a [`Send`]).
    pub fn goto(goto: impl Into<Goto<U>>) -> Self {
        Self {
            resume: None,
            update: None,
            goto: vec![goto.into()],
        }
    }

    /// Also answers pending interrupts.
    pub fn with_resume(mut self, resume: crate::interrupt::Resume) -> Self {
        self.resume = Some(resume);
        self
    }

    /// Also updates the state.
    pub fn with_update(mut self, update: U) -> Self {
        self.update = Some(update);
        self
    }

    /// Also schedules a node (or a [`Send`]); call again for more.
    pub fn with_goto(mut self, goto: impl Into<Goto<U>>) -> Self {
        self.goto.push(goto.into());
        self
    }

    /// Whether the command does nothing (LangGraph refuses such a command).
    pub fn is_empty(&self) -> bool {
        self.resume.is_none() && self.update.is_none() && self.goto.is_empty()
    }
}

impl<U> From<crate::interrupt::Resume> for RunCommand<U> {
    fn from(resume: crate::interrupt::Resume) -> Self {
        Self::resume(resume)
    }
}
