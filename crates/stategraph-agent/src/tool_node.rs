//! The node that runs a model's tool calls (LangGraph's `ToolNode`), and the routing that
//! sends a model's answer to it (`tools_condition`).

use std::collections::BTreeMap;
use std::sync::Arc;
use tracing::Instrument;

use futures_util::future::join_all;
use stategraph_checkpoint::{Map, Value};
use stategraph_graph::stream::{ChildRun, RunKind};
use stategraph_graph::{END, NodeContext, NodeError, NodeFuture, NodeOutput, State};
use stategraph_messages::{Message, MessageFields, ToolCall};

use crate::error::Error;
use crate::tool::{Tool, ToolContext, ToolOutput, ToolResult};

/// LangGraph's Send payload for one tool call: `{"__type": "tool_call_with_context",
/// "tool_call": …, "state": …}`.
pub const TOOL_CALL_WITH_CONTEXT: &str = "tool_call_with_context";

/// A function answering a tool error with the text the model gets (`None`: the node fails).
pub type ToolErrorFn = Arc<dyn Fn(&Error) -> Option<String> + Send + Sync>;

/// Which tool errors become error messages for the model instead of failing the node.
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum ToolErrors {
    /// As LangGraph's default: calls the model got wrong — arguments that do not fit the
    /// tool's schema ([`Error::ToolArgs`]) — become `"Error invoking tool '…' with kwargs
    /// {…} with error: … Please fix the error and try again."`, and a tool's error result
    /// ([`Error::ToolResult`], an MCP tool's `isError` answer) becomes an error message with
    /// the tool's own content, as langchain-mcp-adapters makes it; a tool's own failure fails
    /// the node (and the run, where a retry policy or the caller can deal with it).
    #[default]
    InvalidArguments,
    /// Every error becomes `"Error: {error}\n Please fix your mistakes."` (LangGraph's
    /// `handle_tool_errors=True`), but a tool's error result keeps its own content.
    All,
    /// No error becomes a message: every one fails the node (`handle_tool_errors=False`).
    Never,
    /// The function's text for the errors it answers (`None`: the node fails).
    Custom(ToolErrorFn),
}

impl std::fmt::Debug for ToolErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ToolErrors::InvalidArguments => "InvalidArguments",
            ToolErrors::All => "All",
            ToolErrors::Never => "Never",
            ToolErrors::Custom(_) => "Custom(..)",
        })
    }
}

/// Runs the tool calls of a model's last answer, all at once, and answers each with a tool
/// message (LangGraph's `ToolNode`).
///
/// As a graph node ([`node`](Self::node)) it reads the last AI message of the state's
/// messages key (default `messages`) — or the one call of a LangGraph
/// `tool_call_with_context` `Send` — and writes one [`Message::Tool`] per call to that key,
/// in the calls' order. A call of an unknown tool is answered `"Error: NAME is not a valid
/// tool, try one of [..]."`; other errors as [`ToolErrors`] says.
#[derive(Clone)]
pub struct ToolNode {
    tools: Arc<BTreeMap<String, Arc<dyn Tool>>>,
    order: Arc<[String]>,
    errors: ToolErrors,
    messages_key: String,
}

impl std::fmt::Debug for ToolNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolNode")
            .field("tools", &self.order)
            .field("errors", &self.errors)
            .field("messages_key", &self.messages_key)
            .finish()
    }
}

impl ToolNode {
    /// A node running `tools` (a later tool of the same name replaces an earlier one).
    pub fn new(tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> Self {
        let mut map = BTreeMap::new();
        let mut order = Vec::new();
        for t in tools {
            let name = t.name().to_owned();
            if map.insert(name.clone(), t).is_none() {
                order.push(name);
            }
        }
        Self {
            tools: Arc::new(map),
            order: order.into(),
            errors: ToolErrors::default(),
            messages_key: "messages".into(),
        }
    }

    /// The same node handling errors as `errors` says.
    pub fn handle_tool_errors(mut self, errors: ToolErrors) -> Self {
        self.errors = errors;
        self
    }

    /// The same node reading and writing the messages under `key`.
    pub fn messages_key(mut self, key: impl Into<String>) -> Self {
        self.messages_key = key.into();
        self
    }

    /// The tools, in the order they were given.
    pub fn tools(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.order.iter().filter_map(|n| self.tools.get(n))
    }

    /// The tool named `name`.
    pub fn tool(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    /// Runs `calls` concurrently and answers each (in the calls' order). `node` is the graph
    /// node they run in, if any (tools see it through their [`ToolContext`]).
    pub async fn run(
        &self,
        calls: &[ToolCall],
        node: Option<&NodeContext>,
    ) -> Result<Vec<Message>, Error> {
        self.run_tagged(calls, node, None)
            .await?
            .into_iter()
            .zip(calls)
            .map(|(answer, call)| match answer {
                ToolResult::Message(m) => Ok(m),
                ToolResult::Command(_) => Err(Error::InvalidRequest(format!(
                    "tool `{}` returned a command, which only a graph node can apply",
                    call.name
                ))),
            })
            .collect()
    }

    /// [`run`](Self::run), each tool's run in the node's run tree tagged `tag` (the node's
    /// own step: `seq:step:1`, as LangGraph runs a `ToolNode` as a node).
    async fn run_tagged(
        &self,
        calls: &[ToolCall],
        node: Option<&NodeContext>,
        tag: Option<&str>,
    ) -> Result<Vec<ToolResult>, Error> {
        let answers = join_all(calls.iter().map(|c| self.run_one(c, node, tag))).await;
        answers.into_iter().collect()
    }

    async fn run_one(
        &self,
        call: &ToolCall,
        node: Option<&NodeContext>,
        tag: Option<&str>,
    ) -> Result<ToolResult, Error> {
        self.run_with(self.tools.get(&call.name), call, node, tag)
            .await
    }

    /// Answers `call` with `tool` (`None`: the call names no tool of this node), as a node
    /// task (its run tagged `seq:step:1`): what an agent's tools node does for each call
    /// once its middleware are through with it.
    pub(crate) async fn run_call(
        &self,
        tool: Option<&Arc<dyn Tool>>,
        call: &ToolCall,
        node: Option<&NodeContext>,
    ) -> Result<ToolResult, Error> {
        self.run_with(tool, call, node, Some("seq:step:1")).await
    }

    async fn run_with(
        &self,
        tool: Option<&Arc<dyn Tool>>,
        call: &ToolCall,
        node: Option<&NodeContext>,
        tag: Option<&str>,
    ) -> Result<ToolResult, Error> {
        let id = call.id.clone().unwrap_or_default();
        let Some(tool) = tool else {
            let text = format!(
                "Error: {} is not a valid tool, try one of [{}].",
                call.name,
                self.order.join(", ")
            );
            return Ok(ToolResult::Message(tool_message(
                ToolOutput::text(text),
                &call.name,
                &id,
                "error",
            )));
        };
        // `on_tool_start` / `on_tool_end` in the run's events, its arguments as input.
        let run = node.map_or_else(ChildRun::off, |n| {
            n.run_tree()
                .child(RunKind::Tool, &call.name, tag, &Map::new(), || {
                    call.args.clone()
                })
        });
        let ctx = ToolContext::new(id.clone(), node.cloned());
        // OpenInference's `TOOL` span; the arguments' size, not the arguments.
        let span = tracing::info_span!(
            "tool",
            otel.name = call.name.as_str(),
            openinference.span.kind = "TOOL",
            tool.name = call.name.as_str(),
            tool.call.id = id.as_str(),
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = call.name.as_str(),
            tool.arguments_size = serde_json::to_string(&call.args)
                .map_or(0, |s| i64::try_from(s.len()).unwrap_or(i64::MAX)),
            otel.status_code = tracing::field::Empty,
            error = tracing::field::Empty,
        );
        let called = tool
            .call(call.args.clone(), ctx)
            .instrument(span.clone())
            .await;
        if let Err(e) = &called
            && !span.is_disabled()
        {
            span.record("otel.status_code", "ERROR");
            span.record("error", tracing::field::display(e));
        }
        match called {
            Ok(ToolOutput {
                command: Some(command),
                ..
            }) => {
                run.end(|| Value::Null);
                Ok(ToolResult::Command(command))
            }
            Ok(out) => {
                let message = tool_message(out, &call.name, &id, "success");
                run.end(|| message.to_value());
                Ok(ToolResult::Message(message))
            }
            Err(e) => match self.error_output(&e) {
                Some(out) => Ok(ToolResult::Message(tool_message(
                    out, &call.name, &id, "error",
                ))),
                None => Err(e),
            },
        }
    }

    /// The error message's content for `e` under the policy (`None`: the node fails). A
    /// tool's error result ([`Error::ToolResult`]) is answered with what the tool said, as
    /// langchain-mcp-adapters answers an MCP `isError` result, unless errors fail the node.
    fn error_output(&self, e: &Error) -> Option<ToolOutput> {
        match (e, &self.errors) {
            (_, ToolErrors::Never) => None,
            (_, ToolErrors::Custom(f)) => f(e).map(ToolOutput::text),
            (Error::ToolResult { content, .. }, _) => Some(ToolOutput {
                content: content.clone(),
                artifact: Value::Null,
                command: None,
            }),
            _ => self.error_text(e).map(ToolOutput::text),
        }
    }

    fn error_text(&self, e: &Error) -> Option<String> {
        let invalid = |e: &Error| match e {
            Error::ToolArgs {
                tool,
                args,
                message,
            } => Some(format!(
                "Error invoking tool '{tool}' with kwargs {} with error:\n {message}\n Please fix \
                 the error and try again.",
                crate::py::repr(args)
            )),
            _ => None,
        };
        match &self.errors {
            ToolErrors::InvalidArguments => invalid(e),
            ToolErrors::All => Some(format!("Error: {e}\n Please fix your mistakes.")),
            ToolErrors::Never => None,
            ToolErrors::Custom(f) => f(e),
        }
    }

    /// The calls a node input asks for: the one call of a `tool_call_with_context` `Send`,
    /// or those of the last AI message under the messages key.
    pub fn calls_in(&self, input: &stategraph_graph::Values) -> Result<Vec<ToolCall>, Error> {
        if input.get("__type").and_then(Value::as_str) == Some(TOOL_CALL_WITH_CONTEXT) {
            let call = input.get("tool_call").ok_or_else(|| {
                Error::InvalidRequest("a tool_call_with_context input without `tool_call`".into())
            })?;
            return Ok(vec![tool_call_from_value(call)?]);
        }
        let messages = input
            .get(&self.messages_key)
            .and_then(Value::as_list)
            .ok_or_else(|| {
                Error::InvalidRequest(format!(
                    "no messages under `{}` in the tool node's input",
                    self.messages_key
                ))
            })?;
        for m in messages.iter().rev() {
            if let Ok(Message::Ai { tool_calls, .. }) = Message::from_value(m) {
                return Ok(tool_calls);
            }
        }
        Err(Error::InvalidRequest(
            "no AI message in the tool node's input".into(),
        ))
    }

    /// The node, for any state: `graph.add_node("tools", tool_node.node())`. It writes the
    /// tool messages to the messages key.
    pub fn node<S: State>(
        &self,
    ) -> impl Fn(Arc<S>, NodeContext) -> NodeFuture<S::Update> + Send + Sync + 'static {
        let this = self.clone();
        move |_state: Arc<S>, ctx: NodeContext| {
            let this = this.clone();
            Box::pin(async move {
                let calls = this.calls_in(ctx.input_values()).map_err(NodeError::from)?;
                let answers = this
                    .run_tagged(&calls, Some(&ctx), Some("seq:step:1"))
                    .await
                    .map_err(NodeError::from)?;
                Ok(answers_output(answers, &this.messages_key))
            })
        }
    }
}

/// The node output of a batch of answers (LangGraph's `ToolNode` output): one write of every
/// tool message when no tool gave a command; otherwise each message and each command's
/// writes in the calls' order, the commands' routing, and — when a command addresses the
/// parent graph — only the parent commands, combined (their writes and routing).
pub(crate) fn answers_output<U>(answers: Vec<ToolResult>, messages_key: &str) -> NodeOutput<U> {
    let parent: Vec<&crate::tool::ToolCommand> = answers
        .iter()
        .filter_map(|a| match a {
            ToolResult::Command(c) if c.parent => Some(c),
            _ => None,
        })
        .collect();
    if !parent.is_empty() {
        let writes = parent
            .iter()
            .flat_map(|c| c.update.iter().cloned())
            .collect();
        let goto = parent.iter().flat_map(|c| c.goto.iter().cloned()).collect();
        return NodeOutput::RawCommand {
            writes,
            goto,
            parent: true,
        };
    }
    let mut writes = Vec::new();
    let mut goto = Vec::new();
    let mut messages = Vec::new();
    let commands = answers.iter().any(|a| matches!(a, ToolResult::Command(_)));
    for a in answers {
        match a {
            ToolResult::Message(m) if commands => {
                writes.push((messages_key.to_owned(), Value::from(vec![m.to_value()])));
            }
            ToolResult::Message(m) => messages.push(m.to_value()),
            ToolResult::Command(c) => {
                writes.extend(c.update);
                goto.extend(c.goto);
            }
        }
    }
    if !commands {
        writes.push((messages_key.to_owned(), Value::from(messages)));
    }
    if goto.is_empty() {
        NodeOutput::Writes(writes)
    } else {
        NodeOutput::RawCommand {
            writes,
            goto,
            parent: false,
        }
    }
}

/// A stored tool call (`{"name", "args", "id"}`) as a [`ToolCall`].
pub(crate) fn tool_call_from_value(v: &Value) -> Result<ToolCall, Error> {
    let m = v
        .as_map()
        .ok_or_else(|| Error::InvalidRequest(format!("a tool call must be a map, found {v}")))?;
    Ok(ToolCall {
        name: m
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::InvalidRequest("a tool call without a name".into()))?
            .to_owned(),
        args: m.get("args").cloned().unwrap_or_default(),
        id: m.get("id").and_then(Value::as_str).map(str::to_owned),
    })
}

fn tool_message(out: ToolOutput, tool: &str, call_id: &str, status: &str) -> Message {
    Message::Tool {
        fields: MessageFields {
            content: out.content,
            name: Some(tool.to_owned()),
            ..MessageFields::default()
        },
        tool_call_id: call_id.to_owned(),
        artifact: out.artifact,
        status: status.to_owned(),
    }
}

/// LangGraph's `tools_condition`: `"tools"` when the last message is an AI message with tool
/// calls, else [`END`].
pub fn tools_condition(messages: &[Message]) -> &'static str {
    match messages.last() {
        Some(Message::Ai { tool_calls, .. }) if !tool_calls.is_empty() => "tools",
        _ => END,
    }
}
