//! Tools from MCP servers (the Model Context Protocol), for [`ToolNode`](crate::ToolNode) and
//! [`create_react_agent`](crate::create_react_agent), as langchain-mcp-adapters gives them to
//! Python agents.
//!
//! - [`McpServer`] says how to reach one server: a command line speaking MCP on its
//!   stdin/stdout ([`McpServer::stdio`]), or a streamable HTTP endpoint ([`McpServer::http`],
//!   with headers for authentication).
//! - [`McpClient`] is one connection to it, opened by [`McpClient::connect`]: its
//!   [`tools`](McpClient::tools) are [`Tool`]s with the server's input schema, read once per
//!   connection and again after the server says its list changed
//!   (`notifications/tools/list_changed`). A call sends the model's arguments, waits at most
//!   the server's [`timeout`](McpServer::timeout), and answers as the adapters do: the
//!   result's content blocks as LangChain content blocks (text, image, file), its structured
//!   content as the artifact `{"structured_content": …}`, and an `isError` result as an
//!   [`Error::ToolResult`] — which the tool node answers with an error message carrying the
//!   server's content. A server that exits or drops the connection mid-call is an
//!   [`McpError::Closed`] naming it; the next call connects again.
//! - [`MultiServerMcpClient`] connects to several named servers at once and gives all their
//!   tools, their names prefixed with the server's where asked ([`ToolNames`]).
//! - A server's prompts become chat messages ([`McpClient::get_prompt`], as the adapters'
//!   `load_mcp_prompt`) and its resources text or bytes ([`McpClient::read_resource`], as
//!   their `load_mcp_resources`).
//!
//! Unlike the adapters' default, which opens a session per tool call, a client keeps its
//! connection (a stdio server's process) open across calls.
//!
//! A stdio server's process gets only `HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM` and `USER`
//! from this process's environment, plus what [`McpServer::env`] adds — as the official SDKs
//! start servers, so that secrets in the environment do not reach them unasked.
//!
//! ```no_run
//! use std::sync::Arc;
//! use stategraph_agent::mcp::{McpServer, MultiServerMcpClient, ToolNames};
//! use stategraph_agent::{ChatOpenAi, create_react_agent};
//!
//! # async fn example(model: ChatOpenAi) -> Result<(), Box<dyn std::error::Error>> {
//! let servers = MultiServerMcpClient::builder()
//!     .server("time", McpServer::stdio("mcp-server-time", ["--local-timezone", "UTC"]))
//!     .server(
//!         "docs",
//!         McpServer::http("https://mcp.example.com/mcp").bearer_token("…"),
//!     )
//!     .tool_names(ToolNames::PrefixOnClash)
//!     .connect()
//!     .await?;
//! let agent = create_react_agent(model, servers.tools().await?).build()?;
//! # Ok(()) }
//! ```

mod content;
mod http;

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, GetPromptRequestParams,
    Implementation, ReadResourceRequestParams, ServerNotification, SubscriptionFilter,
};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ServiceError, ServiceExt};
use serde_json::Value as Json;
use stategraph_checkpoint::Value;
use stategraph_messages::Message;
use tokio::io::AsyncBufReadExt;
use tokio::sync::watch;

use crate::error::{Error, McpError};
use crate::tool::{Tool, ToolContext, ToolOutput};

mod client;
mod multi;
mod offers;
mod server;
pub use client::*;
pub use multi::*;
pub use offers::*;
pub use server::*;

/// How long a request may wait for its answer unless [`McpServer::timeout`] says otherwise
/// (as the official TypeScript SDK's default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The variables a stdio server inherits from this process (the official SDKs' list).
const INHERITED_ENV: [&str; 6] = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// How many of a stdio server's last stderr lines an error quotes.
const STDERR_LINES: usize = 8;
