//! The middleware interface of `create_agent` (LangChain's `AgentMiddleware`): hooks that
//! run as their own graph nodes before and after the agent and the model, and wrappers
//! around each model call and each tool call.

use std::sync::Arc;

use stategraph_checkpoint::Value;
use stategraph_graph::{ChannelSpec, NodeContext, NodeError};
use stategraph_messages::{Message, ToolCall};

use super::state::{AgentState, AgentUpdate, Jump};
use super::structured::ResponseFormat;
use crate::model::{ChatModel, ToolChoice};
use crate::tool::Tool;
pub use crate::tool::ToolResult;

/// What a node hook returns: an update of the state (`None`: nothing).
pub type HookResult = Result<Option<AgentUpdate>, NodeError>;

/// Which hooks a middleware implements, and where each node hook may jump. The agent adds
/// one graph node per node hook (`{name}.before_model`, …) and chains the wrappers; a hook
/// not declared here is never called.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hooks {
    /// `before_agent`, with the jumps it may ask for.
    pub before_agent: Option<Vec<Jump>>,
    /// `before_model`, with the jumps it may ask for.
    pub before_model: Option<Vec<Jump>>,
    /// `after_model`, with the jumps it may ask for.
    pub after_model: Option<Vec<Jump>>,
    /// `after_agent`, with the jumps it may ask for.
    pub after_agent: Option<Vec<Jump>>,
    /// `wrap_model_call`.
    pub wrap_model_call: bool,
    /// `wrap_tool_call`.
    pub wrap_tool_call: bool,
}

impl Hooks {
    /// No hooks.
    pub fn new() -> Self {
        Self::default()
    }

    /// With `before_agent`, which may jump to `jumps`.
    pub fn before_agent(mut self, jumps: impl IntoIterator<Item = Jump>) -> Self {
        self.before_agent = Some(jumps.into_iter().collect());
        self
    }

    /// With `before_model`, which may jump to `jumps`.
    pub fn before_model(mut self, jumps: impl IntoIterator<Item = Jump>) -> Self {
        self.before_model = Some(jumps.into_iter().collect());
        self
    }

    /// With `after_model`, which may jump to `jumps`.
    pub fn after_model(mut self, jumps: impl IntoIterator<Item = Jump>) -> Self {
        self.after_model = Some(jumps.into_iter().collect());
        self
    }

    /// With `after_agent`, which may jump to `jumps`.
    pub fn after_agent(mut self, jumps: impl IntoIterator<Item = Jump>) -> Self {
        self.after_agent = Some(jumps.into_iter().collect());
        self
    }

    /// With `wrap_model_call`.
    pub fn wrap_model_call(mut self) -> Self {
        self.wrap_model_call = true;
        self
    }

    /// With `wrap_tool_call`.
    pub fn wrap_tool_call(mut self) -> Self {
        self.wrap_tool_call = true;
        self
    }
}

/// A state key a middleware adds to the agent's state.
#[derive(Clone, Debug)]
pub struct StateKey {
    /// The key.
    pub name: String,
    /// Its channel.
    pub spec: ChannelSpec,
    /// Whether callers may write it in the agent's input.
    pub input: bool,
    /// Whether it is part of the agent's output.
    pub output: bool,
}

impl StateKey {
    /// A key callers neither write nor read (LangChain's `PrivateStateAttr`).
    pub fn private(name: impl Into<String>, spec: ChannelSpec) -> Self {
        Self {
            name: name.into(),
            spec,
            input: false,
            output: false,
        }
    }

    /// A key in the agent's input and output.
    pub fn public(name: impl Into<String>, spec: ChannelSpec) -> Self {
        Self {
            name: name.into(),
            spec,
            input: true,
            output: true,
        }
    }
}

/// What a model call is made of (LangChain's `ModelRequest`); a `wrap_model_call` hook
/// may change any of it before calling on.
#[derive(Clone)]
pub struct ModelRequest {
    /// The model to call.
    pub model: Arc<dyn ChatModel>,
    /// The conversation (without the system message).
    pub messages: Vec<Message>,
    /// The system message sent before the conversation.
    pub system_message: Option<Message>,
    /// Whether and which tools the model must call.
    pub tool_choice: Option<ToolChoice>,
    /// The tools offered.
    pub tools: Vec<Arc<dyn Tool>>,
    /// The structured answer asked for.
    pub response_format: Option<ResponseFormat>,
    /// The agent's state when the model node started.
    pub state: Arc<AgentState>,
    /// The model node's context (config, typed context, store, streams).
    pub ctx: NodeContext,
}

impl std::fmt::Debug for ModelRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelRequest")
            .field("model", &self.model.name())
            .field("messages", &self.messages.len())
            .field("system_message", &self.system_message)
            .field("tool_choice", &self.tool_choice)
            .field(
                "tools",
                &self.tools.iter().map(|t| t.name()).collect::<Vec<_>>(),
            )
            .field("response_format", &self.response_format)
            .finish_non_exhaustive()
    }
}

impl ModelRequest {
    /// The system prompt's text, if the system message is text.
    pub fn system_prompt(&self) -> Option<&str> {
        self.system_message.as_ref().and_then(Message::text)
    }
}

/// What a model call gave (LangChain's `ModelResponse`, with `ExtendedModelResponse`'s
/// commands): the messages to add, the structured answer, and the state updates wrappers
/// asked for (innermost first).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelResponse {
    /// The model's answer, and any messages made with it (a structured-output tool's reply).
    pub result: Vec<Message>,
    /// The structured answer, when one was asked for and given.
    pub structured_response: Option<Value>,
    /// State updates the wrappers add to the model node's writes (innermost first).
    pub commands: Vec<AgentUpdate>,
}

impl ModelResponse {
    /// A response of one message.
    pub fn message(message: Message) -> Self {
        Self {
            result: vec![message],
            ..Self::default()
        }
    }
}

/// The call of a tool a `wrap_tool_call` hook wraps (LangChain's `ToolCallRequest`).
#[derive(Clone)]
pub struct ToolCallRequest {
    /// The call (name, arguments, id).
    pub call: ToolCall,
    /// The tool it names (`None` when the agent has no such tool).
    pub tool: Option<Arc<dyn Tool>>,
    /// Every tool the agent runs (to redirect a call to another).
    pub tools: Arc<[Arc<dyn Tool>]>,
    /// The agent's state.
    pub state: Arc<AgentState>,
    /// The tools node's context.
    pub ctx: NodeContext,
}

impl std::fmt::Debug for ToolCallRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolCallRequest")
            .field("call", &self.call)
            .field("tool", &self.tool.as_ref().map(|t| t.name().to_owned()))
            .finish_non_exhaustive()
    }
}

/// The rest of the model-call chain a `wrap_model_call` hook calls on (LangChain's
/// `handler`): the next wrapper, or the model itself. It may be called more than once (a
/// retry) or not at all (a cached answer).
pub struct ModelHandler<'a> {
    pub(crate) rest: &'a [Arc<dyn Middleware>],
    pub(crate) base: &'a (dyn BaseModelCall + 'a),
}

/// The innermost model call: bind the request and call the model.
#[async_trait::async_trait]
pub(crate) trait BaseModelCall: Send + Sync {
    async fn call(&self, request: ModelRequest) -> Result<ModelResponse, NodeError>;
}

impl ModelHandler<'_> {
    /// Calls the rest of the chain with `request`.
    pub async fn call(&self, request: ModelRequest) -> Result<ModelResponse, NodeError> {
        match self.rest.split_first() {
            Some((first, rest)) => {
                let next = ModelHandler {
                    rest,
                    base: self.base,
                };
                first.wrap_model_call(request, &next).await
            }
            None => self.base.call(request).await,
        }
    }
}

/// The rest of the tool-call chain a `wrap_tool_call` hook calls on.
pub struct ToolHandler<'a> {
    pub(crate) rest: &'a [Arc<dyn Middleware>],
    pub(crate) base: &'a (dyn BaseToolCall + 'a),
}

/// The innermost tool call: run the tool.
#[async_trait::async_trait]
pub(crate) trait BaseToolCall: Send + Sync {
    async fn call(&self, request: ToolCallRequest) -> Result<ToolResult, NodeError>;
}

impl ToolHandler<'_> {
    /// Calls the rest of the chain with `request`.
    pub async fn call(&self, request: ToolCallRequest) -> Result<ToolResult, NodeError> {
        match self.rest.split_first() {
            Some((first, rest)) => {
                let next = ToolHandler {
                    rest,
                    base: self.base,
                };
                first.wrap_tool_call(request, &next).await
            }
            None => self.base.call(request).await,
        }
    }
}

/// A middleware of an agent (LangChain's `AgentMiddleware`).
///
/// # Contract
/// - [`hooks`](Self::hooks) declares which hooks it implements; the agent calls only those
///   (a node hook becomes the graph node `{name}.{hook}`), in LangChain's order: `before_*`
///   hooks in the order the middleware were given, `after_*` hooks in reverse, and
///   wrappers with the first given outermost.
/// - A node hook's update may set [`AgentUpdate::jump_to`] to a jump it declared.
/// - [`name`](Self::name) names its nodes; two middleware of one agent must not share it.
/// - Errors are the node's: they fail the step (and the run) unless a wrapper outside
///   handles them. Control flow ([`NodeError::is_control_flow`]: an interrupt) must be
///   passed on, never handled.
#[async_trait::async_trait]
pub trait Middleware: Send + Sync {
    /// Its name (LangChain's class name): the prefix of its nodes.
    fn name(&self) -> String;

    /// The hooks it implements.
    fn hooks(&self) -> Hooks;

    /// State keys it adds.
    fn state_keys(&self) -> Vec<StateKey> {
        Vec::new()
    }

    /// Tools it adds to the agent.
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        Vec::new()
    }

    /// Runs once per invocation, before anything else.
    async fn before_agent(&self, _state: &AgentState, _ctx: &NodeContext) -> HookResult {
        Ok(None)
    }

    /// Runs before each model call.
    async fn before_model(&self, _state: &AgentState, _ctx: &NodeContext) -> HookResult {
        Ok(None)
    }

    /// Runs after each model call.
    async fn after_model(&self, _state: &AgentState, _ctx: &NodeContext) -> HookResult {
        Ok(None)
    }

    /// Runs once per invocation, when the agent is done.
    async fn after_agent(&self, _state: &AgentState, _ctx: &NodeContext) -> HookResult {
        Ok(None)
    }

    /// Wraps each model call.
    async fn wrap_model_call(
        &self,
        request: ModelRequest,
        handler: &ModelHandler<'_>,
    ) -> Result<ModelResponse, NodeError> {
        handler.call(request).await
    }

    /// Wraps each tool call.
    async fn wrap_tool_call(
        &self,
        request: ToolCallRequest,
        handler: &ToolHandler<'_>,
    ) -> Result<ToolResult, NodeError> {
        handler.call(request).await
    }
}
