//! Chat models: messages in, an AI message out (possibly calling tools), whole or streamed.

use std::sync::Arc;

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use stategraph_checkpoint::{Map, Value};
use stategraph_graph::NodeContext;
use stategraph_graph::stream::{RunKind, RunTree};
use stategraph_messages::{AiMessageChunk, Message};
use tracing::Instrument;

use crate::error::{Error, Result};

/// A tool as the model is told about it: name, description and the JSON schema of its
/// arguments (OpenAI's `{"type": "function", "function": {…}}`).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON schema of its arguments (an object schema).
    pub parameters: serde_json::Value,
}

/// Whether and which tools the model must call.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolChoice {
    /// The model decides (the default when tools are given).
    Auto,
    /// No tool call.
    None,
    /// At least one tool call.
    Required,
    /// A call of this tool.
    Tool(String),
}

/// What a chat model is asked: the conversation, the tools it may call, and per-call
/// settings (unset ones take the model's configured defaults).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatRequest {
    /// The conversation so far, oldest first.
    pub messages: Vec<Message>,
    /// The tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// Whether and which tools it must call.
    pub tool_choice: Option<ToolChoice>,
    /// Whether it may call several tools in one answer.
    pub parallel_tool_calls: Option<bool>,
    /// Where to stop generating.
    pub stop: Vec<String>,
    /// An answer constrained to a JSON schema (the provider's structured output), if any.
    pub response_format: Option<ResponseFormat>,
}

/// An answer the provider must constrain to a JSON schema (OpenAI's `response_format`
/// `json_schema`, the Responses API's `text.format`, Anthropic's `output_format`).
#[derive(Clone, Debug, PartialEq)]
pub struct ResponseFormat {
    /// The schema's name (e.g. the Rust type's name).
    pub name: String,
    /// What the answer is, for the model (may be empty).
    pub description: String,
    /// The JSON schema the answer must validate against.
    pub schema: serde_json::Value,
    /// Whether the provider must follow the schema exactly (OpenAI's `strict`).
    pub strict: Option<bool>,
}

impl ChatRequest {
    /// A request for an answer to `messages`.
    pub fn new(messages: impl IntoIterator<Item = Message>) -> Self {
        Self {
            messages: messages.into_iter().collect(),
            ..Self::default()
        }
    }

    /// The same request offering `tools`.
    pub fn tools(mut self, tools: impl IntoIterator<Item = ToolSpec>) -> Self {
        self.tools = tools.into_iter().collect();
        self
    }

    /// The same request with a tool choice.
    pub fn tool_choice(mut self, choice: ToolChoice) -> Self {
        self.tool_choice = Some(choice);
        self
    }

    /// The same request constrained to answer as `format` says.
    pub fn response_format(mut self, format: ResponseFormat) -> Self {
        self.response_format = Some(format);
        self
    }
}

/// The pieces of a streamed answer, in order; the last carries `chunk_position: "last"`
/// (and the finish reason and token usage when the server reports them).
pub type ChunkStream = BoxStream<'static, Result<AiMessageChunk>>;

/// A chat model (LangChain's `BaseChatModel`).
///
/// # Contract
/// - [`invoke`](Self::invoke) answers with a [`Message::Ai`], its tool calls parsed (those
///   whose arguments are not a JSON object go to `invalid_tool_calls`), with an id.
/// - [`stream`](Self::stream) yields the same answer in pieces that share one id and add up
///   ([`AiMessageChunk::merge`]) to it; errors end the stream.
/// - Both fail with a typed [`Error`] naming the endpoint, never a panic.
#[async_trait::async_trait]
pub trait ChatModel: Send + Sync + std::fmt::Debug {
    /// The whole answer.
    async fn invoke(&self, request: &ChatRequest) -> Result<Message>;

    /// The answer in pieces as the model produces them.
    async fn stream(&self, request: &ChatRequest) -> Result<ChunkStream>;

    /// What the `messages` stream's metadata says of this model, as LangChain's
    /// `ls_provider`, `ls_model_name`, `ls_model_type`, `ls_temperature`.
    fn metadata(&self) -> Map {
        Map::new()
    }

    /// Its name in a run's events (LangChain's class name, e.g. `ChatOpenAI`).
    fn name(&self) -> &str {
        "ChatModel"
    }

    /// Whether the provider constrains answers to a JSON schema
    /// ([`ChatRequest::response_format`]) — LangChain's model profile `structured_output`:
    /// an agent asking for a structured answer through
    /// [`ResponseFormat::Auto`](crate::agent::ResponseFormat::Auto) then uses it rather
    /// than a tool.
    fn supports_structured_output(&self) -> bool {
        false
    }
}

/// Calling a model from inside a graph node.
#[async_trait::async_trait]
pub trait ChatModelExt: ChatModel {
    /// The answer to `request`, as a LangChain model answers inside a LangGraph node: when
    /// the run streams the `messages` mode, the model's answer is streamed and each piece
    /// goes to the run's stream as it arrives (with the task's metadata and the model's);
    /// otherwise the model is invoked. Either way the whole AI message is returned, and the
    /// run does not stream it a second time when the node returns it.
    async fn call(&self, request: &ChatRequest, ctx: &NodeContext) -> Result<Message> {
        self.call_in(request, ctx, ctx.run_tree(), None).await
    }

    /// [`call`](Self::call), the model's run reported under `tree` tagged `tag` (a run
    /// the node started, such as a `RunnableSequence` of a prompt and the model) rather
    /// than under the node's own run. When the run streams
    /// [`StreamMode::Events`](stategraph_graph::StreamMode::Events), the answer is streamed
    /// and each piece is an `on_chat_model_stream` event.
    async fn call_in(
        &self,
        request: &ChatRequest,
        ctx: &NodeContext,
        tree: &RunTree,
        tag: Option<&str>,
    ) -> Result<Message> {
        let streamed = ctx.streams_messages() || tree.is_on();
        let span = llm_span(self, request, streamed);
        let answer = answer(self, request, ctx, tree, tag)
            .instrument(span.clone())
            .await;
        match &answer {
            Ok(message) => record_usage(&span, message),
            Err(e) if !span.is_disabled() => {
                span.record("otel.status_code", "ERROR");
                span.record("error", tracing::field::display(e));
            }
            Err(_) => {}
        }
        answer
    }
}

/// [`ChatModelExt::call`]'s answer, inside its span.
async fn answer<M: ChatModel + ?Sized>(
    model: &M,
    request: &ChatRequest,
    ctx: &NodeContext,
    tree: &RunTree,
    tag: Option<&str>,
) -> Result<Message> {
    if !ctx.streams_messages() && !tree.is_on() {
        return model.invoke(request).await;
    }
    // The model's run metadata, as LangChain's: its integration, provider, model, ….
    let mut metadata = model.metadata();
    metadata.insert("ls_integration", "langchain_chat_model");
    let run = {
        tree.child(RunKind::ChatModel, model.name(), tag, &metadata, || {
            let messages = request.messages.iter().map(Message::to_value);
            Value::Map(Map::from_iter([(
                "messages",
                Value::List(std::iter::once(Value::List(messages.collect())).collect()),
            )]))
        })
    };
    let started = std::time::Instant::now();
    let mut pieces = model.stream(request).await?;
    let mut whole: Option<AiMessageChunk> = None;
    while let Some(piece) = pieces.next().await {
        let piece = piece?;
        if whole.is_none() {
            let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            tracing::Span::current().record("llm.time_to_first_token_ms", ms);
            tracing::info!(time_to_first_token_ms = ms, "first token");
        }
        run.stream(|| Message::AiChunk(piece.clone()).to_value());
        ctx.send_message_chunk(piece.clone(), &metadata).await;
        match &mut whole {
            Some(w) => w.merge(piece)?,
            None => whole = Some(piece),
        }
    }
    let whole = whole.ok_or_else(|| Error::Decode {
        url: String::new(),
        path: "stream".into(),
        message: "the model's stream ended without any piece".into(),
    })?;
    let whole = whole.into_message();
    run.end(|| whole.to_value());
    Ok(whole)
}

/// The span of a model call: OpenInference's `LLM` kind and OpenTelemetry's GenAI
/// attributes (the model and provider its [`metadata`](ChatModel::metadata) names; the token
/// counts are recorded when the answer comes). Prompts and answers are not recorded.
fn llm_span<M: ChatModel + ?Sized>(
    model: &M,
    request: &ChatRequest,
    streamed: bool,
) -> tracing::Span {
    let metadata = model.metadata();
    let text = |key: &str| {
        metadata
            .get(key)
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    };
    let model_name = text("ls_model_name");
    tracing::info_span!(
        "llm",
        otel.name = model_name.as_deref().unwrap_or("ChatModel"),
        openinference.span.kind = "LLM",
        llm.model_name = model_name.as_deref(),
        llm.provider = text("ls_provider").as_deref(),
        gen_ai.operation.name = "chat",
        gen_ai.request.model = model_name.as_deref(),
        gen_ai.provider.name = text("ls_provider").as_deref(),
        llm.streaming = streamed,
        llm.input_messages = i64::try_from(request.messages.len()).unwrap_or(i64::MAX),
        llm.tools = i64::try_from(request.tools.len()).unwrap_or(i64::MAX),
        llm.token_count.prompt = tracing::field::Empty,
        llm.token_count.completion = tracing::field::Empty,
        llm.token_count.total = tracing::field::Empty,
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
        llm.time_to_first_token_ms = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
        error = tracing::field::Empty,
    )
}

/// Records the token usage an answer reports (LangChain's `usage_metadata`) on `span`.
fn record_usage(span: &tracing::Span, message: &Message) {
    let Message::Ai { usage_metadata, .. } = message else {
        return;
    };
    if span.is_disabled() {
        return;
    }
    let count = |key: &str| {
        usage_metadata
            .as_map()
            .and_then(|m| m.get(key))
            .and_then(Value::as_i64)
    };
    if let Some(n) = count("input_tokens") {
        span.record("llm.token_count.prompt", n);
        span.record("gen_ai.usage.input_tokens", n);
    }
    if let Some(n) = count("output_tokens") {
        span.record("llm.token_count.completion", n);
        span.record("gen_ai.usage.output_tokens", n);
    }
    if let Some(n) = count("total_tokens") {
        span.record("llm.token_count.total", n);
    }
}

impl<M: ChatModel + ?Sized> ChatModelExt for M {}

#[async_trait::async_trait]
impl<M: ChatModel + ?Sized> ChatModel for Arc<M> {
    async fn invoke(&self, request: &ChatRequest) -> Result<Message> {
        (**self).invoke(request).await
    }

    async fn stream(&self, request: &ChatRequest) -> Result<ChunkStream> {
        (**self).stream(request).await
    }

    fn metadata(&self) -> Map {
        (**self).metadata()
    }

    fn name(&self) -> &str {
        (**self).name()
    }

    fn supports_structured_output(&self) -> bool {
        (**self).supports_structured_output()
    }
}
