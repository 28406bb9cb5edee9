//! LangChain 1.x's `create_agent`: a model calling tools in a loop, shaped by middleware —
//! hooks that run as their own nodes before and after the agent and the model, and
//! wrappers around each model call and each tool call — with an optional structured
//! answer. The graph is the one LangChain builds (the same node names, state keys,
//! channels and routing), so its threads are shared with Python LangChain both ways.

mod graph;
mod middleware;
mod nodes;
mod state;
mod structured;

use std::sync::Arc;

use stategraph_checkpoint::CheckpointSaver;
use stategraph_graph::{CompiledGraph, GraphError, StateGraph};
use stategraph_messages::Message;
use stategraph_store::Store;

pub use middleware::{
    HookResult, Hooks, Middleware, ModelHandler, ModelRequest, ModelResponse, StateKey,
    ToolCallRequest, ToolHandler, ToolResult,
};
pub use state::{AgentState, AgentUpdate, JUMP_TO, Jump, MESSAGES, STRUCTURED_RESPONSE};
pub use structured::{
    ErrorTextFn, HandleErrors, OutputSchema, ProviderStrategy, ResponseFormat,
    StructuredOutputError, ToolStrategy, Validator,
};

use crate::model::ChatModel;
use crate::tool::Tool;

/// An agent's settings; [`create_agent`] starts one, [`build`](Self::build) makes the graph.
#[derive(Clone)]
pub struct Agent {
    model: Arc<dyn ChatModel>,
    tools: Vec<Arc<dyn Tool>>,
    system_message: Option<Message>,
    middleware: Vec<Arc<dyn Middleware>>,
    response_format: Option<ResponseFormat>,
    name: Option<String>,
    checkpointer: Option<Arc<dyn CheckpointSaver>>,
    store: Option<Arc<dyn Store>>,
    interrupt_before: Vec<String>,
    interrupt_after: Vec<String>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("model", &self.model.name())
            .field(
                "tools",
                &self.tools.iter().map(|t| t.name()).collect::<Vec<_>>(),
            )
            .field("system_message", &self.system_message)
            .field(
                "middleware",
                &self.middleware.iter().map(|m| m.name()).collect::<Vec<_>>(),
            )
            .field("response_format", &self.response_format)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// LangChain's `create_agent(model, tools)`: the graph over [`AgentState`] whose `model`
/// node calls the model (through the middleware's `wrap_model_call`s) and whose `tools`
/// node runs each call of its answer (through their `wrap_tool_call`s), looping until the
/// model answers without a tool call — or gives the structured answer
/// ([`response_format`](Agent::response_format)). Each middleware's node hooks become
/// nodes named `{middleware}.{hook}`.
///
/// ```
/// use std::sync::Arc;
/// use schemars::JsonSchema;
/// use serde::Deserialize;
/// use stategraph_agent::{OpenAiConfig, Tool, tool};
/// use stategraph_agent::agent::create_agent;
/// use stategraph_agent::middleware::{HumanInTheLoopMiddleware, ModelCallLimitMiddleware};
/// use stategraph_checkpoint::InMemorySaver;
///
/// #[derive(Deserialize, JsonSchema)]
/// struct Refund {
///     order: String,
/// }
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // Any OpenAI-compatible server; nothing is sent until the agent runs.
/// let model = OpenAiConfig::new("gpt-4o-mini").base_url("http://127.0.0.1:8080/v1").build()?;
/// let refund = tool("refund", "Refunds an order.", |r: Refund, _ctx| async move {
///     Ok::<_, std::convert::Infallible>(format!("refunded {}", r.order))
/// });
/// let agent = create_agent(model, [Arc::new(refund) as Arc<dyn Tool>])
///     .system_prompt("You help customers.")
///     .middleware(HumanInTheLoopMiddleware::new().interrupt_on("refund", true))
///     .middleware(ModelCallLimitMiddleware::new().run_limit(5))
///     .checkpointer(Arc::new(InMemorySaver::new()))
///     .build()?;
/// assert_eq!(
///     agent.topology().nodes,
///     [
///         "__start__",
///         "model",
///         "tools",
///         "HumanInTheLoopMiddleware.after_model",
///         "ModelCallLimitMiddleware.before_model",
///         "ModelCallLimitMiddleware.after_model",
///         "__end__",
///     ]
/// );
/// # Ok(()) }
/// ```
pub fn create_agent(
    model: impl ChatModel + 'static,
    tools: impl IntoIterator<Item = Arc<dyn Tool>>,
) -> Agent {
    Agent {
        model: Arc::new(model),
        tools: tools.into_iter().collect(),
        system_message: None,
        middleware: Vec::new(),
        response_format: None,
        name: None,
        checkpointer: None,
        store: None,
        interrupt_before: Vec::new(),
        interrupt_after: Vec::new(),
    }
}

impl Agent {
    /// The system prompt, sent before the conversation as a system message.
    pub fn system_prompt(mut self, text: impl Into<String>) -> Self {
        self.system_message = Some(Message::system(text));
        self
    }

    /// The system message sent before the conversation.
    pub fn system_message(mut self, message: Message) -> Self {
        self.system_message = Some(message);
        self
    }

    /// Adds a middleware; they run in the order added (`before_*` hooks), reverse order
    /// (`after_*` hooks), the first added outermost (wrappers).
    pub fn middleware(mut self, middleware: impl Middleware + 'static) -> Self {
        self.middleware.push(Arc::new(middleware));
        self
    }

    /// Adds a shared middleware.
    pub fn middleware_arc(mut self, middleware: Arc<dyn Middleware>) -> Self {
        self.middleware.push(middleware);
        self
    }

    /// Asks for a structured answer ([`ToolStrategy`], [`ProviderStrategy`], or
    /// [`ResponseFormat::of`] a Rust type); it lands in `structured_response`.
    pub fn response_format(mut self, format: impl Into<ResponseFormat>) -> Self {
        self.response_format = Some(format.into());
        self
    }

    /// The agent's name, given to its AI messages.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Checkpoints every step into threads.
    pub fn checkpointer(mut self, saver: Arc<dyn CheckpointSaver>) -> Self {
        self.checkpointer = Some(saver);
        self
    }

    /// The cross-thread store tools and middleware see.
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// Stops before these nodes.
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

    /// The agent's name, if it has one.
    pub fn agent_name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The agents its handoff tools hand over to ([`Tool::handoff_destination`]), in the
    /// tools' order.
    pub fn handoff_destinations(&self) -> Vec<String> {
        handoff_destinations(self.tools.iter().map(|t| &**t))
    }

    /// The graph before it is compiled. Fails when two middleware share a name.
    pub fn graph(&self) -> Result<StateGraph<AgentState>, GraphError> {
        graph::build(self)
    }

    /// The compiled agent.
    pub fn build(self) -> Result<CompiledGraph<AgentState>, GraphError> {
        let mut compiled = self.graph()?.compile()?;
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

/// The destinations of the handoff tools among `tools`, each once, in order.
pub(crate) fn handoff_destinations<'a>(tools: impl Iterator<Item = &'a dyn Tool>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for to in tools.filter_map(Tool::handoff_destination) {
        if !out.iter().any(|d| d == to) {
            out.push(to.to_owned());
        }
    }
    out
}
