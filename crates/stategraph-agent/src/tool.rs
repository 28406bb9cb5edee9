//! Tools a model can call: a name, a description, the JSON schema of the arguments, and the
//! code that runs.

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use stategraph_checkpoint::Value;
use stategraph_graph::{NodeContext, Values};
use stategraph_messages::Message;

use crate::error::{Error, Result};
use crate::model::ToolSpec;

/// What a tool call returns: the content the model reads, and optionally an artifact kept
/// in the tool message for the program but not sent to the model — or, instead of a tool
/// message, a [`ToolCommand`] (LangGraph's `Command`) updating the graph's state and routing.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutput {
    /// The content of the tool message: text, or a list of content blocks.
    pub content: Value,
    /// Extra output for the program (LangChain's `artifact`), not sent to the model.
    pub artifact: Value,
    /// A command given instead of a tool message (its update should hold the tool message
    /// answering the call); `content` and `artifact` are then unused.
    pub command: Option<ToolCommand>,
}

/// A tool's `Command`: state writes (which should include a tool message answering the
/// call, under `messages`), nodes to go to, and whether it addresses the parent graph
/// (LangGraph's `graph=Command.PARENT`: a handoff from an agent running as a subgraph to
/// another node of the graph it runs in).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolCommand {
    /// State writes, in order.
    pub update: Vec<(String, Value)>,
    /// Nodes to run next.
    pub goto: Vec<String>,
    /// Whether the update and routing apply to the parent graph.
    pub parent: bool,
}

impl ToolCommand {
    /// A command with no writes and no routing.
    pub fn new() -> Self {
        Self::default()
    }

    /// With messages merged into `messages`.
    pub fn messages(self, messages: impl IntoIterator<Item = Message>) -> Self {
        let list: Vec<Value> = messages.into_iter().map(|m| m.to_value()).collect();
        self.set("messages", Value::from(list))
    }

    /// With a write of `value` to `key`.
    pub fn set(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.update.push((key.into(), value.into()));
        self
    }

    /// Going to `node` next.
    pub fn goto(mut self, node: impl Into<String>) -> Self {
        self.goto.push(node.into());
        self
    }

    /// Addressed to the parent graph.
    pub fn to_parent(mut self) -> Self {
        self.parent = true;
        self
    }

    /// Rewrites, in its `messages` writes, each tool message answering `tool_call_id`.
    pub fn map_tool_messages(&mut self, tool_call_id: &str, mut f: impl FnMut(&mut Message)) {
        for (key, value) in &mut self.update {
            if key != "messages" {
                continue;
            }
            let Some(list) = value.as_list() else {
                continue;
            };
            let mut items = list.to_vec();
            for item in &mut items {
                if let Ok(mut m) = Message::from_value(item)
                    && matches!(&m, Message::Tool { tool_call_id: id, .. } if id == tool_call_id)
                {
                    f(&mut m);
                    *item = m.to_value();
                }
            }
            *value = Value::from(items);
        }
    }
}

/// What a tool call gave: a tool message, or the tool's command.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolResult {
    /// The answer.
    Message(Message),
    /// A command (state writes, routing) instead of a message.
    Command(ToolCommand),
}

impl From<ToolCommand> for ToolOutput {
    fn from(c: ToolCommand) -> Self {
        Self {
            content: Value::Null,
            artifact: Value::Null,
            command: Some(c),
        }
    }
}

impl ToolOutput {
    /// Text content.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: Value::from(text.into()),
            artifact: Value::Null,
            command: None,
        }
    }

    /// A JSON value as content: rendered as JSON text, as LangChain renders a tool's
    /// non-text result (`json.dumps`).
    pub fn json(value: &serde_json::Value) -> Self {
        match value {
            serde_json::Value::String(s) => Self::text(s.as_str()),
            other => Self::text(crate::py::json_dumps(other)),
        }
    }

    /// The same output with an artifact.
    pub fn with_artifact(mut self, artifact: impl Into<Value>) -> Self {
        self.artifact = artifact.into();
        self
    }
}

impl From<String> for ToolOutput {
    fn from(s: String) -> Self {
        Self::text(s)
    }
}

impl From<&str> for ToolOutput {
    fn from(s: &str) -> Self {
        Self::text(s)
    }
}

impl From<serde_json::Value> for ToolOutput {
    fn from(v: serde_json::Value) -> Self {
        Self::json(&v)
    }
}

/// What a running tool can see: its call's id, and the graph node it runs in (its
/// [`NodeContext`]: the run's config and typed context, the store, the custom stream).
#[derive(Clone, Debug)]
pub struct ToolContext {
    /// The id of the tool call being answered.
    pub tool_call_id: String,
    node: Option<NodeContext>,
}

impl ToolContext {
    /// A context for answering `tool_call_id`, inside `node` if the call runs in a graph.
    pub fn new(tool_call_id: impl Into<String>, node: Option<NodeContext>) -> Self {
        Self {
            tool_call_id: tool_call_id.into(),
            node,
        }
    }

    /// The node the tool runs in (`None` when called outside a graph).
    pub fn node(&self) -> Option<&NodeContext> {
        self.node.as_ref()
    }

    /// The graph's state the call runs in, as raw values (LangGraph's injected state;
    /// `None` outside a graph). A typed state: `S::from_values(ctx.state()?)`.
    pub fn state(&self) -> Option<&Values> {
        self.node.as_ref().map(NodeContext::input_values)
    }

    /// The graph's cross-thread store (LangGraph's injected store).
    pub fn store(&self) -> Option<&Arc<dyn stategraph_store::Store>> {
        self.node.as_ref()?.store()
    }

    /// The run's typed context (LangGraph's `runtime.context`).
    pub fn context<C: std::any::Any + Send + Sync>(&self) -> Option<&C> {
        self.node.as_ref()?.context::<C>()
    }
}

/// A tool (LangChain's `BaseTool`).
///
/// # Contract
/// - [`parameters`](Self::parameters) is a JSON schema of an object: what the model is told
///   the arguments are.
/// - [`call`](Self::call) gets the arguments the model sent; arguments that do not fit are
///   [`Error::ToolArgs`] (the model can be told and try again), a failure of the tool's own
///   work is [`Error::Tool`].
#[async_trait::async_trait]
pub trait Tool: Send + Sync {
    /// The name the model calls it by.
    fn name(&self) -> &str;

    /// What it does, for the model.
    fn description(&self) -> &str;

    /// The JSON schema of its arguments.
    fn parameters(&self) -> serde_json::Value;

    /// Runs a call.
    async fn call(&self, args: Value, ctx: ToolContext) -> Result<ToolOutput>;

    /// Whether an agent stops right after this tool answered (LangChain's `return_direct`).
    fn return_direct(&self) -> bool {
        false
    }

    /// The node this tool hands the conversation over to, if it is a handoff tool
    /// ([`create_handoff_tool`](crate::handoff::create_handoff_tool); LangChain keeps it in
    /// the tool's metadata under `__handoff_destination`): multi-agent graphs such as
    /// [`create_swarm`](crate::swarm::create_swarm) declare these as the agent's
    /// destinations.
    fn handoff_destination(&self) -> Option<&str> {
        None
    }

    /// How the model is told about it.
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().to_owned(),
            description: self.description().to_owned(),
            parameters: self.parameters(),
        }
    }
}

/// A tool made of an async function of typed arguments; see [`tool`].
pub struct FnTool<A, F> {
    name: String,
    description: String,
    parameters: serde_json::Value,
    return_direct: bool,
    f: F,
    args: PhantomData<fn(A)>,
}

impl<A, F> FnTool<A, F> {
    /// The same tool, ending an agent's run when it answers.
    pub fn return_direct(mut self) -> Self {
        self.return_direct = true;
        self
    }
}

impl<A, F> std::fmt::Debug for FnTool<A, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnTool")
            .field("name", &self.name)
            .field("parameters", &self.parameters)
            .finish_non_exhaustive()
    }
}

/// A tool from an async function whose arguments are a Rust type: their JSON schema is
/// derived from it (`#[derive(Deserialize, JsonSchema)]`, doc comments becoming
/// descriptions), and the model's arguments are deserialized into it — arguments that do not
/// fit are an [`Error::ToolArgs`] naming what was wrong. The function's `Ok` is the tool's
/// output (text, JSON, or a [`ToolOutput`]); its `Err` (anything that displays) an
/// [`Error::Tool`].
///
/// ```
/// use schemars::JsonSchema;
/// use serde::Deserialize;
/// use stategraph_agent::{Tool, tool};
///
/// /// The city to look up.
/// #[derive(Deserialize, JsonSchema)]
/// struct Weather {
///     /// A city name, e.g. "Paris".
///     city: String,
/// }
///
/// let weather = tool("get_weather", "Today's weather in a city.", |a: Weather, _ctx| async move {
///     Ok::<_, std::convert::Infallible>(format!("It is sunny in {}", a.city))
/// });
/// assert_eq!(weather.parameters()["required"], serde_json::json!(["city"]));
/// ```
pub fn tool<A, F, Fut, T, E>(
    name: impl Into<String>,
    description: impl Into<String>,
    f: F,
) -> FnTool<A, F>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    F: Fn(A, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::result::Result<T, E>> + Send + 'static,
    T: Into<ToolOutput>,
    E: std::fmt::Display,
{
    FnTool {
        name: name.into(),
        description: description.into(),
        parameters: schema_of::<A>(),
        return_direct: false,
        f,
        args: PhantomData,
    }
}

/// The JSON schema of `A` as a tool's parameters: an object schema without the
/// `$schema`/`title` keys LangChain leaves out too.
pub fn schema_of<A: JsonSchema>() -> serde_json::Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(A)).unwrap_or_default();
    if let Some(obj) = schema.as_object_mut() {
        obj.remove("$schema");
        obj.remove("title");
        obj.remove("description");
        if !obj.contains_key("type") && !obj.contains_key("$ref") {
            obj.insert("type".into(), serde_json::json!("object"));
        }
        if obj.get("type") == Some(&serde_json::json!("object")) && !obj.contains_key("properties")
        {
            obj.insert("properties".into(), serde_json::json!({}));
        }
    }
    schema
}

#[async_trait::async_trait]
impl<A, F, Fut, T, E> Tool for FnTool<A, F>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    F: Fn(A, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::result::Result<T, E>> + Send + 'static,
    T: Into<ToolOutput>,
    E: std::fmt::Display,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> serde_json::Value {
        self.parameters.clone()
    }

    fn return_direct(&self) -> bool {
        self.return_direct
    }

    async fn call(&self, args: Value, ctx: ToolContext) -> Result<ToolOutput> {
        let json = args.to_json();
        let typed: A = serde_json::from_value(json.clone()).map_err(|e| Error::ToolArgs {
            tool: self.name.clone(),
            args: json,
            message: e.to_string(),
        })?;
        match (self.f)(typed, ctx).await {
            Ok(out) => Ok(out.into()),
            Err(e) => Err(Error::Tool {
                tool: self.name.clone(),
                message: e.to_string(),
            }),
        }
    }
}

#[async_trait::async_trait]
impl<T: Tool + ?Sized> Tool for Arc<T> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn description(&self) -> &str {
        (**self).description()
    }
    fn parameters(&self) -> serde_json::Value {
        (**self).parameters()
    }
    async fn call(&self, args: Value, ctx: ToolContext) -> Result<ToolOutput> {
        (**self).call(args, ctx).await
    }
    fn return_direct(&self) -> bool {
        (**self).return_direct()
    }
    fn handoff_destination(&self) -> Option<&str> {
        (**self).handoff_destination()
    }
}
