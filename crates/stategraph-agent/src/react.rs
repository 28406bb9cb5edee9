//! LangGraph's prebuilt ReAct agent (`create_react_agent`): a model that calls tools in a
//! loop until it answers without one.

use std::sync::Arc;

use stategraph_checkpoint::{CheckpointSaver, Map, Value};
use stategraph_graph::stream::RunKind;
use stategraph_graph::{
    CompiledGraph, END, Goto, GraphError, NodeContext, NodeError, START, Send, StateGraph,
};
use stategraph_messages::Message;
use stategraph_store::Store;

use crate::model::{ChatModel, ChatModelExt, ChatRequest, ToolSpec};
use crate::state::{MessagesState, MessagesUpdate};
use crate::tool::Tool;
use crate::tool_node::{TOOL_CALL_WITH_CONTEXT, ToolNode};

/// A function making the messages sent to the model from the conversation.
pub type PromptFn = Arc<dyn Fn(&[Message]) -> Vec<Message> + std::marker::Send + Sync>;

/// What the model is told before the conversation.
#[derive(Clone)]
#[non_exhaustive]
pub enum Prompt {
    /// A system message with this text.
    Text(String),
    /// This message (usually a system message).
    Message(Message),
    /// The messages to send, made from the conversation.
    Fn(PromptFn),
}

impl std::fmt::Debug for Prompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Prompt::Text(t) => f.debug_tuple("Text").field(t).finish(),
            Prompt::Message(m) => f.debug_tuple("Message").field(m).finish(),
            Prompt::Fn(_) => f.write_str("Fn(..)"),
        }
    }
}

impl From<&str> for Prompt {
    fn from(s: &str) -> Self {
        Prompt::Text(s.to_owned())
    }
}

impl From<String> for Prompt {
    fn from(s: String) -> Self {
        Prompt::Text(s)
    }
}

impl From<Message> for Prompt {
    fn from(m: Message) -> Self {
        Prompt::Message(m)
    }
}

impl Prompt {
    fn apply(&self, messages: &[Message]) -> Vec<Message> {
        match self {
            Prompt::Text(t) => std::iter::once(Message::system(t.clone()))
                .chain(messages.iter().cloned())
                .collect(),
            Prompt::Message(m) => std::iter::once(m.clone())
                .chain(messages.iter().cloned())
                .collect(),
            Prompt::Fn(f) => f(messages),
        }
    }
}

/// How the tool calls of one answer run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum AgentVersion {
    /// One `tools` task per call, each started by a `Send` carrying the call and the state
    /// (LangGraph's default, `version="v2"`): Python's agent can run the calls of a thread
    /// stopped before its tools. Each call's `Send` stores a copy of the conversation.
    #[default]
    V2,
    /// One `tools` task runs every call of the answer (`version="v1"`): nothing is copied.
    V1,
}

/// The agent's settings; [`create_react_agent`] starts one, [`build`](Self::build) makes the
/// graph.
#[derive(Clone)]
pub struct ReactAgent {
    model: Arc<dyn ChatModel>,
    tools: ToolNode,
    prompt: Option<Prompt>,
    interrupt_before: Vec<String>,
    interrupt_after: Vec<String>,
    checkpointer: Option<Arc<dyn CheckpointSaver>>,
    store: Option<Arc<dyn Store>>,
    name: Option<String>,
    version: AgentVersion,
}

impl std::fmt::Debug for ReactAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReactAgent")
            .field("model", &self.model)
            .field("tools", &self.tools)
            .field("prompt", &self.prompt)
            .field("interrupt_before", &self.interrupt_before)
            .field("interrupt_after", &self.interrupt_after)
            .field("name", &self.name)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// LangGraph's `create_react_agent(model, tools)`: a graph over [`MessagesState`] with two
/// nodes, `agent` (calls the model with the conversation and the tools) and `tools` (runs
/// the calls of its answer, [`ToolNode`]): START → `agent`; `agent` → `tools` while the answer
/// calls tools, else END; `tools` → `agent` (END after a `return_direct` tool). Inside a run
/// that streams `messages`, the model's answer streams token by token.
///
/// LangGraph 1.x deprecates `create_react_agent` for LangChain's `create_agent`
/// ([`crate::agent::create_agent`]); this one stays for threads written by it. What the
/// deprecated agent's extra parameters did, `create_agent` does with middleware
/// ([`crate::agent::Middleware`]): `pre_model_hook` / `post_model_hook` are `before_model` /
/// `after_model` hooks, a dynamic model is a `wrap_model_call` that sets the request's model,
/// a custom state schema is the middleware's
/// [`state_keys`](crate::agent::Middleware::state_keys), and the run's context reaches tools
/// as [`ToolContext::context`](crate::ToolContext::context).
///
/// ```
/// use std::sync::Arc;
/// use schemars::JsonSchema;
/// use serde::Deserialize;
/// use stategraph_agent::{OpenAiConfig, Tool, create_react_agent, tool};
/// use stategraph_checkpoint::InMemorySaver;
///
/// #[derive(Deserialize, JsonSchema)]
/// struct Add {
///     a: i64,
///     b: i64,
/// }
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // Any OpenAI-compatible server; nothing is sent until the agent runs.
/// let model = OpenAiConfig::new("gpt-4o-mini").base_url("http://127.0.0.1:8080/v1").build()?;
/// let add = tool("add", "Adds two numbers.", |x: Add, _ctx| async move {
///     Ok::<_, std::convert::Infallible>((x.a + x.b).to_string())
/// });
/// let agent = create_react_agent(model, [Arc::new(add) as Arc<dyn Tool>])
///     .prompt("You are a careful calculator.")
///     .interrupt_before(["tools"]) // a person approves each tool call
///     .checkpointer(Arc::new(InMemorySaver::new()))
///     .build()?;
/// assert_eq!(agent.topology().nodes, ["__start__", "agent", "tools", "__end__"]);
/// # Ok(()) }
/// ```
pub fn create_react_agent(
    model: impl ChatModel + 'static,
    tools: impl IntoIterator<Item = Arc<dyn Tool>>,
) -> ReactAgent {
    ReactAgent {
        model: Arc::new(model),
        tools: ToolNode::new(tools),
        prompt: None,
        interrupt_before: Vec::new(),
        interrupt_after: Vec::new(),
        checkpointer: None,
        store: None,
        name: None,
        version: AgentVersion::default(),
    }
}

impl ReactAgent {
    /// What the model is told before the conversation: a system prompt's text, a message, or
    /// a function of the conversation ([`Prompt`]).
    pub fn prompt(mut self, prompt: impl Into<Prompt>) -> Self {
        self.prompt = Some(prompt.into());
        self
    }

    /// Runs the tools with this node instead (e.g. its own [`ToolErrors`](crate::ToolErrors)).
    pub fn tool_node(mut self, node: ToolNode) -> Self {
        self.tools = node;
        self
    }

    /// Stops before these nodes (`["tools"]`: a person approves each tool call, then the
    /// run is resumed).
    pub fn interrupt_before<I, T>(mut self, nodes: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        self.interrupt_before = nodes.into_iter().map(Into::into).collect();
        self
    }

    /// Stops after these nodes.
    pub fn interrupt_after<I, T>(mut self, nodes: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        self.interrupt_after = nodes.into_iter().map(Into::into).collect();
        self
    }

    /// Checkpoints every step into threads (conversation memory, interrupts).
    pub fn checkpointer(mut self, saver: Arc<dyn CheckpointSaver>) -> Self {
        self.checkpointer = Some(saver);
        self
    }

    /// The cross-thread store tools and nodes see.
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// The agent's name, given to its AI messages (LangGraph's `name`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// How tool calls run ([`AgentVersion`]).
    pub fn version(mut self, version: AgentVersion) -> Self {
        self.version = version;
        self
    }

    /// The agent's name, if it has one.
    pub fn agent_name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The agents its handoff tools hand over to ([`Tool::handoff_destination`]).
    pub fn handoff_destinations(&self) -> Vec<String> {
        crate::agent::handoff_destinations(self.tools.tools().map(|t| &**t))
    }

    /// The graph before it is compiled (to add nodes or edges of your own).
    pub fn graph(&self) -> StateGraph<MessagesState> {
        let mut graph = StateGraph::<MessagesState>::new();
        let specs: Arc<[ToolSpec]> = self.tools.tools().map(|t| t.spec()).collect();
        let direct: Arc<[String]> = self
            .tools
            .tools()
            .filter(|t| t.return_direct())
            .map(|t| t.name().to_owned())
            .collect();
        let call = Arc::new(CallModel {
            model: Arc::clone(&self.model),
            specs: Arc::clone(&specs),
            prompt: self.prompt.clone(),
            name: self.name.clone(),
            direct: Arc::clone(&direct),
        });
        graph.add_node(
            "agent",
            move |state: Arc<MessagesState>, ctx: NodeContext| {
                let call = Arc::clone(&call);
                async move { call.run(&state, &ctx).await }
            },
        );
        if specs.is_empty() {
            graph.add_edge(START, "agent").add_edge("agent", END);
            return graph;
        }
        graph.add_node("tools", self.tools.node::<MessagesState>());
        graph.add_edge(START, "agent");
        let version = self.version;
        graph
            .add_conditional_edges("agent", move |s: &MessagesState| {
                Ok(should_continue(s, version))
            })
            .name("should_continue")
            .path_map([("tools", "tools"), (END, END)]);
        if direct.is_empty() {
            graph.add_edge("tools", "agent");
        } else {
            graph
                .add_conditional_edges("tools", move |s: &MessagesState| {
                    Ok(vec![Goto::from(route_tool_responses(&s.messages, &direct))])
                })
                .name("route_tool_responses")
                .path_map([("agent", "agent"), (END, END)]);
        }
        graph
    }

    /// The compiled agent.
    pub fn build(self) -> Result<CompiledGraph<MessagesState>, GraphError> {
        let mut compiled = self.graph().compile()?;
        if let Some(name) = &self.name {
            compiled = compiled.with_name(name.clone());
        }
        if !self.interrupt_before.is_empty() {
            compiled = compiled.with_interrupt_before(self.interrupt_before);
        }
        if !self.interrupt_after.is_empty() {
            compiled = compiled.with_interrupt_after(self.interrupt_after);
        }
        if let Some(saver) = self.checkpointer {
            compiled = compiled.with_checkpointer(saver);
        }
        if let Some(store) = self.store {
            compiled = compiled.with_store(store);
        }
        Ok(compiled)
    }
}

/// The `agent` node.
struct CallModel {
    model: Arc<dyn ChatModel>,
    specs: Arc<[ToolSpec]>,
    prompt: Option<Prompt>,
    name: Option<String>,
    direct: Arc<[String]>,
}

impl CallModel {
    async fn run(
        &self,
        state: &MessagesState,
        ctx: &NodeContext,
    ) -> Result<MessagesUpdate, NodeError> {
        // The runs LangGraph's agent reports: its callable `call_model`, and in it the
        // `RunnableSequence` of the prompt (`Prompt`) and the model.
        // The state as their input, made once when reported.
        let state_in = ctx
            .run_tree()
            .is_on()
            .then(|| messages_value(&state.messages));
        let input = || state_in.clone().unwrap_or(Value::Null);
        let call_model = ctx.run_tree().step("call_model", Some("seq:step:1"), input);
        // LangGraph's `call_model` hands the model its node's config: the sequence runs in
        // the task, beside `call_model`, not in it.
        let sequence = ctx.run_tree().child(
            RunKind::Chain,
            "RunnableSequence",
            Some("seq:step:1"),
            &Map::new(),
            input,
        );
        let prompt = sequence.tree().child(
            RunKind::Chain,
            "Prompt",
            Some("seq:step:1"),
            &Map::new(),
            input,
        );
        validate_chat_history(&state.messages)?;
        let messages = match &self.prompt {
            Some(p) => p.apply(&state.messages),
            None => state.messages.clone(),
        };
        prompt.end(|| Value::List(messages.iter().map(Message::to_value).collect()));
        let request = ChatRequest::new(messages).tools(self.specs.iter().cloned());
        let mut reply = self
            .model
            .call_in(&request, ctx, &sequence.tree(), Some("seq:step:2"))
            .await?;
        sequence.end(|| reply.to_value());
        if let Message::Ai { fields, .. } = &mut reply {
            fields.name.clone_from(&self.name);
        }
        if self.more_steps_needed(&reply, ctx.remaining_steps()) {
            let mut sorry = Message::ai(
                "Sorry, need more steps to process this request.",
                Vec::new(),
            );
            if let Some(id) = &reply.fields().id {
                sorry = sorry.with_id(id.clone());
            }
            reply = sorry;
        }
        call_model.end(|| messages_value(std::slice::from_ref(&reply)));
        Ok(MessagesUpdate::messages([reply]))
    }

    /// LangGraph's check that the recursion limit leaves room for the tools and one more
    /// answer.
    fn more_steps_needed(&self, reply: &Message, remaining: i64) -> bool {
        let Message::Ai { tool_calls, .. } = reply else {
            return false;
        };
        let all_direct = tool_calls.iter().all(|c| self.direct.contains(&c.name));
        (remaining < 1 && all_direct) || (remaining < 2 && !tool_calls.is_empty())
    }
}

/// `{"messages": [...]}`: the agent's state (or update) with `messages`.
fn messages_value(messages: &[Message]) -> Value {
    Value::Map(Map::from_iter([(
        "messages",
        Value::List(messages.iter().map(Message::to_value).collect()),
    )]))
}

/// Every tool call of an AI message needs a tool message answering it before the model is
/// called again (most providers refuse the history otherwise).
fn validate_chat_history(messages: &[Message]) -> Result<(), NodeError> {
    let answered: std::collections::HashSet<&str> = messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    let missing: Vec<String> = messages
        .iter()
        .filter_map(|m| match m {
            Message::Ai { tool_calls, .. } => Some(tool_calls),
            _ => None,
        })
        .flatten()
        .filter(|c| !answered.contains(c.id.as_deref().unwrap_or_default()))
        .take(3)
        .map(|c| c.to_value().to_json().to_string())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(NodeError::new(format!(
        "Found AIMessages with tool_calls that do not have a corresponding ToolMessage. Here \
         are the first few of those tool calls: [{}].\n\nEvery tool call (LLM requesting to \
         call a tool) in the message history MUST have a corresponding ToolMessage (result of \
         a tool invocation to return to the LLM) - this is required by most LLM providers.",
        missing.join(", ")
    )))
}

/// Where the agent's answer goes: the tools (one `Send` per call in `V2`), or the end.
fn should_continue(s: &MessagesState, version: AgentVersion) -> Vec<Goto<MessagesUpdate>> {
    let calls = match s.messages.last() {
        Some(Message::Ai { tool_calls, .. }) if !tool_calls.is_empty() => tool_calls,
        _ => return vec![Goto::from(END)],
    };
    match version {
        AgentVersion::V1 => vec![Goto::from("tools")],
        AgentVersion::V2 => {
            let state = messages_value(&s.messages);
            calls
                .iter()
                .map(|c| {
                    let mut arg = Map::new();
                    arg.insert("__type", TOOL_CALL_WITH_CONTEXT);
                    arg.insert("tool_call", c.to_value());
                    arg.insert("state", state.clone());
                    Goto::Send(Send::new("tools", MessagesUpdate::raw(arg)))
                })
                .collect()
        }
    }
}

/// After the tools: the end if one that answered is `return_direct`, else the agent again.
fn route_tool_responses(messages: &[Message], direct: &[String]) -> &'static str {
    let is_direct = |name: &str| direct.iter().any(|d| d == name);
    let mut last = None;
    for m in messages.iter().rev() {
        match m {
            Message::Tool { fields, .. } => {
                if fields.name.as_deref().is_some_and(is_direct) {
                    return END;
                }
            }
            other => {
                last = Some(other);
                break;
            }
        }
    }
    // Parallel calls where the `return_direct` one ran in another task.
    if let Some(Message::Ai { tool_calls, .. }) = last
        && tool_calls.iter().any(|c| is_direct(&c.name))
    {
        return END;
    }
    "agent"
}
