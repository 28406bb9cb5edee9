//! The nodes of an agent's graph — the model, the tools, the middleware's hooks — and the
//! routing between them (LangChain's `model_to_tools`, `tools_to_model`, `model_to_model`
//! and `jump_edge`).

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use futures_util::future::join_all;
use stategraph_checkpoint::Value;
use stategraph_graph::{Goto, NodeContext, NodeError, NodeFuture, NodeOutput, Send};
use stategraph_messages::{Message, ToolCall};

use super::graph::Ends;
use super::middleware::{
    BaseModelCall, BaseToolCall, Hooks, Middleware, ModelHandler, ModelRequest, ModelResponse,
    ToolCallRequest, ToolHandler, ToolResult,
};
use super::state::{AgentState, AgentUpdate, MESSAGES, STRUCTURED_RESPONSE};
use super::structured::{ResponseFormat, ToolStrategy};
use crate::model::{ChatModel, ChatModelExt, ChatRequest, ToolChoice};
use crate::tool::Tool;
use crate::tool_node::ToolNode;

/// A node hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum HookKind {
    BeforeAgent,
    BeforeModel,
    AfterModel,
    AfterAgent,
}

impl HookKind {
    /// In the order LangChain adds a middleware's nodes.
    pub(super) const ALL: [HookKind; 4] = [
        HookKind::BeforeAgent,
        HookKind::BeforeModel,
        HookKind::AfterModel,
        HookKind::AfterAgent,
    ];

    pub(super) fn as_str(self) -> &'static str {
        match self {
            HookKind::BeforeAgent => "before_agent",
            HookKind::BeforeModel => "before_model",
            HookKind::AfterModel => "after_model",
            HookKind::AfterAgent => "after_agent",
        }
    }

    pub(super) fn declared(self, hooks: &Hooks) -> bool {
        match self {
            HookKind::BeforeAgent => hooks.before_agent.is_some(),
            HookKind::BeforeModel => hooks.before_model.is_some(),
            HookKind::AfterModel => hooks.after_model.is_some(),
            HookKind::AfterAgent => hooks.after_agent.is_some(),
        }
    }
}

/// What the model and tools nodes share.
pub(super) struct Core {
    pub(super) model: Arc<dyn ChatModel>,
    pub(super) tool_node: Option<ToolNode>,
    /// The tools the model is offered and the tools node runs (LangChain's `default_tools`:
    /// the tool node's, one per name).
    pub(super) default_tools: Arc<[Arc<dyn Tool>]>,
    pub(super) system_message: Option<Message>,
    pub(super) response_format: Option<ResponseFormat>,
    pub(super) tool_strategy: Option<ToolStrategy>,
    pub(super) model_wrappers: Vec<Arc<dyn Middleware>>,
    pub(super) tool_wrappers: Vec<Arc<dyn Middleware>>,
    pub(super) name: Option<String>,
}

/// A node hook's node.
pub(super) fn hook_node(
    m: Arc<dyn Middleware>,
    kind: HookKind,
) -> impl Fn(Arc<AgentState>, NodeContext) -> NodeFuture<AgentUpdate> + std::marker::Send + Sync + 'static
{
    move |state: Arc<AgentState>, ctx: NodeContext| {
        let m = Arc::clone(&m);
        Box::pin(async move {
            let update = match kind {
                HookKind::BeforeAgent => m.before_agent(&state, &ctx).await?,
                HookKind::BeforeModel => m.before_model(&state, &ctx).await?,
                HookKind::AfterModel => m.after_model(&state, &ctx).await?,
                HookKind::AfterAgent => m.after_agent(&state, &ctx).await?,
            };
            Ok(match update {
                Some(u) => NodeOutput::Update(u),
                None => NodeOutput::Empty,
            })
        })
    }
}

/// The `model` node.
pub(super) fn model_node(
    core: Arc<Core>,
) -> impl Fn(Arc<AgentState>, NodeContext) -> NodeFuture<AgentUpdate> + std::marker::Send + Sync + 'static
{
    move |state: Arc<AgentState>, ctx: NodeContext| {
        let core = Arc::clone(&core);
        Box::pin(async move { core.run_model(state, ctx).await })
    }
}

impl Core {
    async fn run_model(
        &self,
        state: Arc<AgentState>,
        ctx: NodeContext,
    ) -> Result<NodeOutput<AgentUpdate>, NodeError> {
        let messages = patch_invalid_tool_calls(&state.messages);
        let repaired = messages.len() != state.messages.len();
        let request = ModelRequest {
            model: Arc::clone(&self.model),
            messages: messages.clone(),
            system_message: self.system_message.clone(),
            tool_choice: None,
            tools: self.default_tools.to_vec(),
            response_format: self.response_format.clone(),
            state: Arc::clone(&state),
            ctx,
        };
        let handler = ModelHandler {
            rest: &self.model_wrappers,
            base: self,
        };
        let response = handler.call(request).await?;
        let mut added: Vec<Message> = Vec::new();
        if repaired {
            added.push(Message::remove_all());
            added.extend(messages);
        }
        added.extend(response.result);
        let mut update = AgentUpdate::new().messages(added);
        match response.structured_response {
            Some(v) => update = update.set(STRUCTURED_RESPONSE, v),
            None if self.response_format.is_some() => {
                update = update.set(STRUCTURED_RESPONSE, Value::Null);
            }
            None => {}
        }
        for command in response.commands {
            update.extend(command);
        }
        Ok(NodeOutput::Writes(update.writes().to_vec()))
    }
}

#[async_trait::async_trait]
impl BaseModelCall for Core {
    async fn call(&self, request: ModelRequest) -> Result<ModelResponse, NodeError> {
        // Tools the model is offered must be tools the agent runs, unless a wrapper
        // handles tool calls itself.
        if self.tool_wrappers.is_empty() {
            let known: HashSet<&str> = self
                .tool_node
                .iter()
                .flat_map(|n| n.tools().map(|t| t.name()))
                .collect();
            let unknown: Vec<&str> = request
                .tools
                .iter()
                .map(|t| t.name())
                .filter(|n| !known.contains(n))
                .collect();
            if !unknown.is_empty() {
                let mut available: Vec<&str> = known.into_iter().collect();
                available.sort_unstable();
                return Err(NodeError::new(format!(
                    "Middleware added tools that the agent doesn't know how to execute: \
                     {unknown:?}; the agent's tools are {available:?}. Add them to the \
                     agent's tools, or handle them in a `wrap_tool_call` middleware."
                )));
            }
        }
        let effective = match &request.response_format {
            Some(ResponseFormat::Auto(schema)) => {
                if request.model.supports_structured_output() {
                    Some(ResponseFormat::Provider(super::ProviderStrategy::new(
                        schema.clone(),
                    )))
                } else {
                    Some(ResponseFormat::Tool(
                        self.tool_strategy
                            .clone()
                            .unwrap_or_else(|| ToolStrategy::new(schema.clone())),
                    ))
                }
            }
            other => other.clone(),
        };
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        messages.extend(request.system_message.iter().cloned());
        messages.extend(request.messages.iter().cloned());
        let mut chat = ChatRequest::new(messages).tools(request.tools.iter().map(|t| t.spec()));
        chat.tool_choice = request.tool_choice.clone();
        match &effective {
            Some(ResponseFormat::Tool(strategy)) => {
                for schema in &strategy.schemas {
                    let declared = self
                        .tool_strategy
                        .iter()
                        .any(|t| t.schemas.iter().any(|s| s.name == schema.name));
                    if !declared {
                        return Err(NodeError::new(format!(
                            "ToolStrategy specifies tool '{}' which wasn't declared in the \
                             original response format when creating the agent.",
                            schema.name
                        )));
                    }
                    chat.tools.push(schema.tool_spec());
                }
                chat.tool_choice = Some(ToolChoice::Required);
            }
            Some(ResponseFormat::Provider(p)) => chat.response_format = Some(p.format()),
            _ => {}
        }
        let mut out = request
            .model
            .call(&chat, &request.ctx)
            .await
            .map_err(NodeError::from)?;
        if let (Some(name), Message::Ai { fields, .. }) = (&self.name, &mut out) {
            fields.name = Some(name.clone());
        }
        match &effective {
            Some(ResponseFormat::Provider(p)) => {
                let structured = p.read(&out).map_err(NodeError::from)?;
                Ok(ModelResponse {
                    result: vec![out],
                    structured_response: structured,
                    commands: Vec::new(),
                })
            }
            Some(ResponseFormat::Tool(t)) => {
                let (result, structured) = t.read(out).map_err(NodeError::from)?;
                Ok(ModelResponse {
                    result,
                    structured_response: structured,
                    commands: Vec::new(),
                })
            }
            _ => Ok(ModelResponse::message(out)),
        }
    }
}

/// LangChain's `_patch_invalid_tool_calls`: each invalid tool call (arguments that did not
/// parse) with an id and no answer gets an error tool message right after its AI message.
fn patch_invalid_tool_calls(messages: &[Message]) -> Vec<Message> {
    let mut answered: HashSet<String> = messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { tool_call_id, .. } => Some(tool_call_id.clone()),
            _ => None,
        })
        .collect();
    let mut out = Vec::with_capacity(messages.len());
    for m in messages {
        out.push(m.clone());
        let Message::Ai {
            invalid_tool_calls, ..
        } = m
        else {
            continue;
        };
        for call in invalid_tool_calls {
            let text = |k: &str| call.as_map()?.get(k)?.as_str().map(str::to_owned);
            let Some(id) = text("id") else { continue };
            if answered.contains(&id) {
                continue;
            }
            let name = text("name").unwrap_or_else(|| "unknown".to_owned());
            let mut reply = Message::tool(
                format!(
                    "Tool call {name} with id {id} could not be executed - arguments were \
                     malformed or truncated."
                ),
                id.clone(),
            );
            if let Message::Tool { fields, status, .. } = &mut reply {
                fields.name = Some(name);
                *status = "error".to_owned();
            }
            out.push(reply);
            answered.insert(id);
        }
    }
    out
}

/// The `tools` node.
pub(super) fn tools_node(
    core: Arc<Core>,
) -> impl Fn(Arc<AgentState>, NodeContext) -> NodeFuture<AgentUpdate> + std::marker::Send + Sync + 'static
{
    move |state: Arc<AgentState>, ctx: NodeContext| {
        let core = Arc::clone(&core);
        Box::pin(async move { core.run_tools(state, ctx).await })
    }
}

impl Core {
    async fn run_tools(
        &self,
        state: Arc<AgentState>,
        ctx: NodeContext,
    ) -> Result<NodeOutput<AgentUpdate>, NodeError> {
        let Some(tool_node) = &self.tool_node else {
            return Ok(NodeOutput::Empty);
        };
        let calls = match ctx.send_arg() {
            Some(Value::List(list)) => list
                .iter()
                .map(crate::tool_node::tool_call_from_value)
                .collect::<Result<Vec<_>, _>>()
                .map_err(NodeError::from)?,
            _ => tool_node
                .calls_in(ctx.input_values())
                .map_err(NodeError::from)?,
        };
        let base = RunTool { tool_node };
        let results = join_all(calls.into_iter().map(|call| {
            let request = ToolCallRequest {
                tool: tool_node.tool(&call.name).cloned(),
                tools: Arc::clone(&self.default_tools),
                call,
                state: Arc::clone(&state),
                ctx: ctx.clone(),
            };
            let base = &base;
            async move {
                let handler = ToolHandler {
                    rest: &self.tool_wrappers,
                    base,
                };
                handler.call(request).await
            }
        }))
        .await;
        let answers = results.into_iter().collect::<Result<Vec<_>, _>>()?;
        Ok(crate::tool_node::answers_output(answers, MESSAGES))
    }
}

/// The innermost tool call: the tool node's own handling of one call.
struct RunTool<'a> {
    tool_node: &'a ToolNode,
}

#[async_trait::async_trait]
impl BaseToolCall for RunTool<'_> {
    async fn call(&self, request: ToolCallRequest) -> Result<ToolResult, NodeError> {
        self.tool_node
            .run_call(request.tool.as_ref(), &request.call, Some(&request.ctx))
            .await
            .map_err(NodeError::from)
    }
}

/// The last AI message and the tool messages after it.
fn last_ai_and_tools(messages: &[Message]) -> Option<(&Message, Vec<&Message>)> {
    let i = messages
        .iter()
        .rposition(|m| matches!(m, Message::Ai { .. }))?;
    let ai = messages.get(i)?;
    let tools = messages
        .get(i + 1..)
        .unwrap_or_default()
        .iter()
        .filter(|m| matches!(m, Message::Tool { .. }))
        .collect();
    Some((ai, tools))
}

type Route = Result<Vec<Goto<AgentUpdate>>, NodeError>;

fn to(node: &str) -> Route {
    Ok(vec![Goto::Node(node.to_owned())])
}

fn has_structured(state: &AgentState) -> bool {
    state
        .structured_response
        .as_ref()
        .is_some_and(|v| !v.is_null())
}

/// `jump_edge`: where a hook's jump leads, else `default`.
pub(super) fn jump_edge(
    default: String,
    ends: Ends,
) -> impl Fn(&AgentState) -> Route + std::marker::Send + Sync + 'static {
    move |s: &AgentState| match s.jump_to {
        Some(j) => to(&ends.resolve(j)),
        None => to(&default),
    }
}

/// `model_to_tools`: a jump, else one `Send` per unanswered call to the tools, else the
/// exit (no call, or a structured answer), else the model again.
pub(super) fn model_to_tools(
    structured_tools: Vec<String>,
    ends: Ends,
) -> impl Fn(&AgentState) -> Route + std::marker::Send + Sync + 'static {
    move |s: &AgentState| {
        if let Some(j) = s.jump_to {
            return to(&ends.resolve(j));
        }
        let Some((Message::Ai { tool_calls, .. }, tools)) = last_ai_and_tools(&s.messages) else {
            return to(&ends.exit);
        };
        if tool_calls.is_empty() {
            return to(&ends.exit);
        }
        let answered: BTreeSet<&str> = tools
            .iter()
            .filter_map(|m| match m {
                Message::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
                _ => None,
            })
            .collect();
        let pending: Vec<&ToolCall> = tool_calls
            .iter()
            .filter(|c| !answered.contains(c.id.as_deref().unwrap_or_default()))
            .filter(|c| !structured_tools.contains(&c.name))
            .collect();
        if !pending.is_empty() {
            return Ok(pending
                .into_iter()
                .map(|c| {
                    let arg = AgentUpdate::send_arg(Value::from(vec![c.to_value()]));
                    Goto::Send(Send::new("tools", arg))
                })
                .collect());
        }
        if has_structured(s) {
            return to(&ends.exit);
        }
        to(&ends.loop_entry)
    }
}

/// `model_to_model` (structured output without tools): a jump, else the exit once the
/// structured answer came, else the model again.
pub(super) fn model_to_model(
    ends: Ends,
) -> impl Fn(&AgentState) -> Route + std::marker::Send + Sync + 'static {
    move |s: &AgentState| {
        if let Some(j) = s.jump_to {
            return to(&ends.resolve(j));
        }
        if has_structured(s) {
            return to(&ends.exit);
        }
        to(&ends.loop_entry)
    }
}

/// `tools_to_model`: the exit when every tool that ran is `return_direct` or a
/// structured-output tool answered, else the model again.
pub(super) fn tools_to_model(
    tool_node: ToolNode,
    structured_tools: Vec<String>,
    ends: Ends,
) -> impl Fn(&AgentState) -> Route + std::marker::Send + Sync + 'static {
    move |s: &AgentState| {
        let Some((Message::Ai { tool_calls, .. }, tools)) = last_ai_and_tools(&s.messages) else {
            return to(&ends.loop_entry);
        };
        let ran_as: std::collections::HashMap<&str, &str> = tools
            .iter()
            .filter_map(|m| match m {
                Message::Tool {
                    tool_call_id,
                    fields,
                    ..
                } => {
                    let name = fields.name.as_deref()?;
                    tool_node
                        .tool(name)
                        .is_some()
                        .then_some((tool_call_id.as_str(), name))
                }
                _ => None,
            })
            .collect();
        let executed: Vec<&str> = tool_calls
            .iter()
            .map(|c| {
                ran_as
                    .get(c.id.as_deref().unwrap_or_default())
                    .copied()
                    .unwrap_or(c.name.as_str())
            })
            .filter(|n| tool_node.tool(n).is_some())
            .collect();
        if !executed.is_empty()
            && executed
                .iter()
                .all(|n| tool_node.tool(n).is_some_and(|t| t.return_direct()))
        {
            return to(&ends.exit);
        }
        let structured_answered = tools.iter().any(|m| match m {
            Message::Tool { fields, status, .. } => {
                status != "error"
                    && fields
                        .name
                        .as_ref()
                        .is_some_and(|n| structured_tools.contains(n))
            }
            _ => false,
        });
        if structured_answered {
            return to(&ends.exit);
        }
        to(&ends.loop_entry)
    }
}
