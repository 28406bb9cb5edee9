//! Agents for stategraph: chat models, tools, the node that runs tool calls, and LangGraph's
//! prebuilt ReAct agent, with the model's answer streamed token by token to a run's
//! `messages` stream.
//!
//! - [`ChatModel`]: messages in, an AI message out (with tool calls), whole or streamed as
//!   [`AiMessageChunk`](stategraph_messages::AiMessageChunk)s. [`ChatOpenAi`] (feature
//!   `openai`, on by default) speaks to any OpenAI-compatible chat-completions server.
//!   Inside a node, [`ChatModelExt::call`] streams the answer to the run's `messages` mode
//!   when it is streamed, as LangChain models do inside LangGraph.
//! - [`Tool`]: a name, a description and a JSON schema of its arguments; [`tool`] makes one
//!   from an async function whose argument type derives `JsonSchema`.
//! - [`ToolNode`]: runs an answer's tool calls concurrently and answers each with a tool
//!   message; [`tools_condition`] routes to it.
//! - [`create_react_agent`]: the loop between the two on [`MessagesState`], with an optional
//!   system prompt, `interrupt_before(["tools"])` for approvals, a checkpointer and a store.
//! - `mcp` (feature `mcp`): the tools of any MCP server, over stdio or streamable HTTP, as
//!   langchain-mcp-adapters gives them to Python agents.
//!
//! Messages are LangChain's, stored as Python stores them: a thread an agent wrote can be
//! read and continued by Python LangGraph.
//!
//! Running a model's tool calls (no model needed):
//!
//! ```
//! use std::sync::Arc;
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//! use stategraph_agent::{Tool, ToolNode, tool};
//! use stategraph_checkpoint::value;
//! use stategraph_messages::{Message, ToolCall};
//!
//! /// A city.
//! #[derive(Deserialize, JsonSchema)]
//! struct City {
//!     /// Its name, e.g. "Paris".
//!     city: String,
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let weather = tool("get_weather", "Today's weather.", |c: City, _ctx| async move {
//!     Ok::<_, std::convert::Infallible>(format!("Sunny in {}", c.city))
//! });
//! let tools = ToolNode::new([Arc::new(weather) as Arc<dyn Tool>]);
//! let calls = [
//!     ToolCall { name: "get_weather".into(), args: value!({"city": "Paris"}), id: Some("1".into()) },
//!     ToolCall { name: "get_weather".into(), args: value!({"town": "Rome"}), id: Some("2".into()) },
//! ];
//! let answers = tools.run(&calls, None).await?;
//! assert_eq!(answers[0].text(), Some("Sunny in Paris"));
//! // Arguments that do not fit become an error message the model can act on.
//! assert!(answers[1].text().unwrap_or_default().starts_with("Error invoking tool 'get_weather'"));
//! # Ok::<(), stategraph_agent::Error>(()) }).unwrap();
//! ```

#![cfg_attr(
    not(test),
    warn(clippy::indexing_slicing, clippy::string_slice, clippy::panic)
)]
// On docs.rs (`--cfg docsrs`, nightly), items behind a feature say which.
#![cfg_attr(docsrs, feature(doc_cfg))]
// The features and their `##` comments in the manifest, listed.
#![doc = "\n# Feature flags\n"]
#![doc = document_features::document_features!()]

pub mod agent;
#[cfg(feature = "anthropic")]
mod anthropic;
mod error;
pub mod handoff;
#[cfg(any(feature = "openai", feature = "anthropic"))]
mod http;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod middleware;
mod model;
#[cfg(feature = "openai")]
mod openai;
mod py;
mod react;
#[cfg(any(feature = "openai", feature = "anthropic"))]
mod sse;
mod state;
pub mod swarm;
mod tool;
mod tool_node;

#[cfg(feature = "anthropic")]
pub use anthropic::{ANTHROPIC_BASE_URL, ANTHROPIC_VERSION, AnthropicConfig, ChatAnthropic};
pub use error::{Error, McpError, Result};
pub use model::{
    ChatModel, ChatModelExt, ChatRequest, ChunkStream, ResponseFormat, ToolChoice, ToolSpec,
};
#[cfg(feature = "openai")]
pub use openai::{ChatOpenAi, OPENAI_BASE_URL, OpenAiConfig};
pub use react::{AgentVersion, Prompt, PromptFn, ReactAgent, create_react_agent};
/// The JSON-schema crate tool arguments derive `JsonSchema` with (the version this crate uses).
pub use schemars;
pub use state::{MessagesState, MessagesUpdate};
pub use tool::{FnTool, Tool, ToolCommand, ToolContext, ToolOutput, ToolResult, schema_of, tool};
pub use tool_node::{TOOL_CALL_WITH_CONTEXT, ToolErrorFn, ToolErrors, ToolNode, tools_condition};
