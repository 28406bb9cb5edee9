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

/// How long a request may wait for its answer unless [`McpServer::timeout`] says otherwise
/// (as the official TypeScript SDK's default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The variables a stdio server inherits from this process (the official SDKs' list).
const INHERITED_ENV: [&str; 6] = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// How many of a stdio server's last stderr lines an error quotes.
const STDERR_LINES: usize = 8;

/// How to reach one MCP server; see the [module docs](self).
#[derive(Clone, Debug)]
pub struct McpServer {
    transport: Transport,
    timeout: Option<Duration>,
    connect_timeout: Option<Duration>,
}

#[derive(Clone, Debug)]
enum Transport {
    Stdio {
        program: OsString,
        args: Vec<OsString>,
        env: Vec<(OsString, OsString)>,
        cwd: Option<PathBuf>,
        /// Headers given to a stdio server (an error at connect).
        misplaced: Option<String>,
    },
    Http {
        url: String,
        headers: Vec<(String, String)>,
        /// Environment or directory given to an HTTP server (an error at connect).
        misplaced: Option<String>,
    },
}

impl McpServer {
    /// A server started as `program args…`, speaking MCP on its stdin and stdout (its
    /// stderr is logged at `debug` and quoted in connection errors). It runs while its
    /// client is connected.
    pub fn stdio(
        program: impl Into<OsString>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
    ) -> Self {
        Self {
            transport: Transport::Stdio {
                program: program.into(),
                args: args.into_iter().map(Into::into).collect(),
                env: Vec::new(),
                cwd: None,
                misplaced: None,
            },
            timeout: Some(DEFAULT_TIMEOUT),
            connect_timeout: Some(DEFAULT_TIMEOUT),
        }
    }

    /// A server at a streamable HTTP endpoint (`https://host/mcp`).
    pub fn http(url: impl Into<String>) -> Self {
        Self {
            transport: Transport::Http {
                url: url.into(),
                headers: Vec::new(),
                misplaced: None,
            },
            timeout: Some(DEFAULT_TIMEOUT),
            connect_timeout: Some(DEFAULT_TIMEOUT),
        }
    }

    /// Sets an environment variable of a stdio server's process.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        match &mut self.transport {
            Transport::Stdio { env, .. } => env.push((key.into(), value.into())),
            Transport::Http { misplaced, .. } => {
                misplaced.get_or_insert_with(|| "an environment variable".into());
            }
        }
        self
    }

    /// Starts a stdio server in `dir`.
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        match &mut self.transport {
            Transport::Stdio { cwd, .. } => *cwd = Some(dir.into()),
            Transport::Http { misplaced, .. } => {
                misplaced.get_or_insert_with(|| "a working directory".into());
            }
        }
        self
    }

    /// Sends a header with every request to an HTTP server.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        match &mut self.transport {
            Transport::Http { headers, .. } => headers.push((name.into(), value.into())),
            Transport::Stdio { misplaced, .. } => {
                misplaced.get_or_insert_with(|| "an HTTP header".into());
            }
        }
        self
    }

    /// Sends `Authorization: Bearer {token}` with every request to an HTTP server.
    pub fn bearer_token(self, token: impl std::fmt::Display) -> Self {
        self.header("Authorization", format!("Bearer {token}"))
    }

    /// How long each request may take (default [`DEFAULT_TIMEOUT`]; `None`: no limit). A
    /// call that takes longer is cancelled on the server and is an [`McpError::Timeout`];
    /// the connection stays.
    pub fn timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// How long starting or reaching the server and initializing MCP may take (default
    /// [`DEFAULT_TIMEOUT`]; `None`: no limit).
    pub fn connect_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The command line or URL, for messages.
    fn describe(&self) -> String {
        match &self.transport {
            Transport::Stdio { program, args, .. } => std::iter::once(program)
                .chain(args)
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" "),
            Transport::Http { url, .. } => url.clone(),
        }
    }
}

/// The last lines a stdio server wrote to its stderr.
#[derive(Default)]
struct StderrTail {
    lines: VecDeque<String>,
    ended: bool,
}

/// What the client keeps per connection and its notification handler updates.
struct Shared {
    /// The tool list must be read again (set at connect and by `tools/list_changed`).
    stale: AtomicBool,
    /// Counts `tools/list_changed` notifications, for [`McpClient::tools_changed`].
    changes: watch::Sender<u64>,
}

impl Shared {
    /// The server said its tool list changed: the next `tools` reads it again.
    fn tool_list_changed(&self) {
        self.stale.store(true, Ordering::SeqCst);
        self.changes.send_modify(|n| *n += 1);
    }
}

/// The client side's handler: names the client and follows tool list changes.
#[derive(Clone)]
struct Handler(Arc<Shared>);

impl ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + rmcp::service::MaybeSendFuture + '_ {
        self.0.tool_list_changed();
        std::future::ready(())
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("stategraph", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// One open connection.
struct Connection {
    service: RunningService<RoleClient, Handler>,
    /// The tool list as last read on this connection.
    tools: tokio::sync::Mutex<Option<Arc<[rmcp::model::Tool]>>>,
    stderr: Option<Arc<StdMutex<StderrTail>>>,
}

/// A connection to one MCP server; see the [module docs](self). Cheap to share (`Arc`); the
/// connection is opened again, on the next request, after it was lost.
pub struct McpClient {
    name: String,
    server: McpServer,
    conn: tokio::sync::Mutex<Option<Arc<Connection>>>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient")
            .field("name", &self.name)
            .field("server", &self.server.describe())
            .finish_non_exhaustive()
    }
}

impl McpClient {
    /// Connects to `server`, called `name` in errors and tool name prefixes: starts a stdio
    /// server or opens an HTTP session, and initializes MCP.
    pub async fn connect(name: impl Into<String>, server: McpServer) -> Result<Arc<Self>, Error> {
        let (changes, _) = watch::channel(0);
        let client = Arc::new(Self {
            name: name.into(),
            server,
            conn: tokio::sync::Mutex::new(None),
            shared: Arc::new(Shared {
                stale: AtomicBool::new(true),
                changes,
            }),
        });
        client.connection().await?;
        Ok(client)
    }

    /// The server's name, as given to [`connect`](Self::connect).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Changes each time the server says its tool list changed; [`tools`](Self::tools)
    /// then reads the list again.
    pub fn tools_changed(&self) -> watch::Receiver<u64> {
        self.shared.changes.subscribe()
    }

    /// The server's tools, named as the server names them: read once per connection, and
    /// again after the server said its list changed.
    pub async fn tools(self: &Arc<Self>) -> Result<Vec<Arc<dyn Tool>>, Error> {
        let listed = self.list_tools().await?;
        Ok(listed
            .iter()
            .map(|t| Arc::new(McpTool::new(self, t, t.name.to_string())) as Arc<dyn Tool>)
            .collect())
    }

    /// The tool list, from this connection's cache unless it is stale.
    async fn list_tools(&self) -> Result<Arc<[rmcp::model::Tool]>, McpError> {
        let conn = self.connection().await?;
        let mut cached = conn.tools.lock().await;
        // Cleared before the request: a change announced while it runs marks it stale again.
        let stale = self.shared.stale.swap(false, Ordering::SeqCst);
        if let (false, Some(tools)) = (stale, cached.as_ref()) {
            return Ok(Arc::clone(tools));
        }
        let listed = self
            .request(&conn, "tools/list", conn.service.peer().list_all_tools())
            .await;
        let tools: Arc<[rmcp::model::Tool]> = match listed {
            Ok(t) => t.into(),
            Err(e) => {
                self.shared.stale.store(true, Ordering::SeqCst);
                return Err(e);
            }
        };
        *cached = Some(Arc::clone(&tools));
        Ok(tools)
    }

    /// Calls the server's tool `name` with `args` (a JSON object), and converts its answer
    /// as the tools of [`tools`](Self::tools) do.
    pub async fn call_tool(&self, name: &str, args: Json) -> Result<ToolOutput, Error> {
        let request = format!("tools/call {name}");
        let arguments = match args {
            Json::Object(o) => Some(o),
            Json::Null => None,
            other => {
                return Err(Error::ToolArgs {
                    tool: name.to_owned(),
                    args: other,
                    message: "the arguments must be a JSON object".into(),
                });
            }
        };
        let conn = self.connection().await?;
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = arguments;
        let result = self
            .request(&conn, &request, conn.service.peer().call_tool(params))
            .await?;
        let json = self.wire(&result, &request)?;
        content::tool_output(name, &json).map_err(|message| self.unusable(&request, message))?
    }

    /// The server's prompts (`prompts/list`, every page).
    pub async fn list_prompts(&self) -> Result<Vec<McpPrompt>, Error> {
        let conn = self.connection().await?;
        let prompts = self
            .request(
                &conn,
                "prompts/list",
                conn.service.peer().list_all_prompts(),
            )
            .await?;
        self.reread(&prompts, "prompts/list")
    }

    /// The prompt `name` filled with `arguments`, as chat messages: the server's user
    /// messages as human messages, its assistant messages as AI messages (as the adapters'
    /// `load_mcp_prompt`; a message that is not text is an [`McpError::Answer`]).
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: impl IntoIterator<Item = (impl Into<String>, impl Into<String>)>,
    ) -> Result<Vec<Message>, Error> {
        let request = format!("prompts/get {name}");
        let mut params = GetPromptRequestParams::new(name);
        let arguments: serde_json::Map<String, Json> = arguments
            .into_iter()
            .map(|(k, v)| (k.into(), Json::String(v.into())))
            .collect();
        params.arguments = Some(arguments);
        let conn = self.connection().await?;
        let result = self
            .request(&conn, &request, conn.service.peer().get_prompt(params))
            .await?;
        let wire = self.wire(&result, &request)?;
        let bad = |message: String| self.unusable(&request, message);
        field(&wire, "messages")
            .as_array()
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .enumerate()
            .map(|(at, m)| {
                let content = field(m, "content");
                let text = match (
                    field(content, "type").as_str(),
                    field(content, "text").as_str(),
                ) {
                    (Some("text"), Some(text)) => text,
                    (kind, _) => {
                        return Err(bad(format!(
                            "messages[{at}] has content of type {}, not text",
                            kind.unwrap_or("(none)")
                        ))
                        .into());
                    }
                };
                match field(m, "role").as_str() {
                    Some("user") => Ok(Message::human(text)),
                    Some("assistant") => Ok(Message::ai(text, Vec::new())),
                    other => Err(bad(format!(
                        "messages[{at}] has role {}",
                        other.unwrap_or("(none)")
                    ))
                    .into()),
                }
            })
            .collect()
    }

    /// The server's resources (`resources/list`, every page; templates are not listed).
    pub async fn list_resources(&self) -> Result<Vec<McpResource>, Error> {
        let conn = self.connection().await?;
        let resources = self
            .request(
                &conn,
                "resources/list",
                conn.service.peer().list_all_resources(),
            )
            .await?;
        self.reread(&resources, "resources/list")
    }

    /// The contents of the resource at `uri` (one or more parts, text or bytes, as the
    /// adapters' `get_mcp_resource` gives them as blobs).
    pub async fn read_resource(&self, uri: &str) -> Result<Vec<McpResourceContents>, Error> {
        let request = format!("resources/read {uri}");
        let conn = self.connection().await?;
        let result = self
            .request(
                &conn,
                &request,
                conn.service
                    .peer()
                    .read_resource(ReadResourceRequestParams::new(uri)),
            )
            .await?;
        let wire = self.wire(&result, &request)?;
        field(&wire, "contents")
            .as_array()
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .enumerate()
            .map(|(at, c)| {
                let bad =
                    |message: String| self.unusable(&request, format!("contents[{at}] {message}"));
                let data = if let Some(text) = field(c, "text").as_str() {
                    ResourceData::Text(text.to_owned())
                } else if let Some(blob) = field(c, "blob").as_str() {
                    use base64::Engine as _;
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(blob)
                        .map_err(|e| bad(format!("has a `blob` that is not base64: {e}")))?;
                    ResourceData::Bytes(bytes)
                } else {
                    return Err(bad("has neither `text` nor `blob`".into()).into());
                };
                Ok(McpResourceContents {
                    uri: field(c, "uri").as_str().unwrap_or(uri).to_owned(),
                    mime_type: field(c, "mimeType").as_str().map(str::to_owned),
                    data,
                })
            })
            .collect()
    }

    /// The error for an answer to `request` that cannot be used.
    fn unusable(&self, request: &str, message: impl Into<String>) -> McpError {
        McpError::Answer {
            server: self.name.clone(),
            request: request.to_owned(),
            message: message.into(),
        }
    }

    /// An answer in its wire form (the protocol's JSON), which this client reads so that
    /// its types follow the protocol, not the SDK's structs.
    fn wire(&self, answer: &impl serde::Serialize, request: &str) -> Result<Json, McpError> {
        serde_json::to_value(answer).map_err(|e| self.unusable(request, e.to_string()))
    }

    /// An answer re-read as `T` through its [wire form](Self::wire).
    fn reread<T: serde::de::DeserializeOwned>(
        &self,
        answer: &impl serde::Serialize,
        request: &str,
    ) -> Result<T, Error> {
        serde_json::from_value(self.wire(answer, request)?)
            .map_err(|e| self.unusable(request, e.to_string()).into())
    }

    /// Closes the connection (a stdio server's process ends). The next request opens a new
    /// one.
    pub async fn close(&self) {
        let conn = self.conn.lock().await.take();
        if let Some(conn) = conn
            && let Ok(conn) = Arc::try_unwrap(conn)
        {
            let _ = conn.service.cancel().await;
        }
    }

    /// The open connection, or a new one if there is none or it ended.
    async fn connection(&self) -> Result<Arc<Connection>, McpError> {
        let mut slot = self.conn.lock().await;
        if let Some(conn) = slot.as_ref()
            && !conn.service.is_closed()
        {
            return Ok(Arc::clone(conn));
        }
        *slot = None;
        let conn = Arc::new(self.open().await?);
        *slot = Some(Arc::clone(&conn));
        Ok(conn)
    }

    /// Starts or reaches the server and initializes MCP.
    async fn open(&self) -> Result<Connection, McpError> {
        let connect_error = |message: String| McpError::Connect {
            server: self.name.clone(),
            message,
        };
        let handler = Handler(Arc::clone(&self.shared));
        let (serving, stderr) = match &self.server.transport {
            Transport::Stdio {
                misplaced: Some(what),
                ..
            }
            | Transport::Http {
                misplaced: Some(what),
                ..
            } => {
                return Err(connect_error(format!(
                    "{what} was given, which does not apply to a server at `{}`",
                    self.server.describe()
                )));
            }
            Transport::Stdio {
                program,
                args,
                env,
                cwd,
                misplaced: None,
            } => {
                let mut cmd = tokio::process::Command::new(program);
                cmd.args(args).env_clear();
                for key in INHERITED_ENV {
                    if let Some(v) = std::env::var_os(key) {
                        cmd.env(key, v);
                    }
                }
                cmd.envs(env.iter().map(|(k, v)| (k, v)));
                if let Some(dir) = cwd {
                    cmd.current_dir(dir);
                }
                let (transport, stderr) = TokioChildProcess::builder(cmd)
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|e| {
                        connect_error(format!("cannot start `{}`: {e}", self.server.describe()))
                    })?;
                let tail = stderr.map(|s| self.follow_stderr(s));
                (
                    Box::pin(handler.serve(transport))
                        as std::pin::Pin<Box<dyn Future<Output = _> + Send>>,
                    tail,
                )
            }
            Transport::Http {
                url,
                headers,
                misplaced: None,
            } => {
                let client = http::client().map_err(connect_error)?;
                let headers = http::headers(headers).map_err(connect_error)?;
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(headers);
                let transport = StreamableHttpClientTransport::with_client(client, config);
                (
                    Box::pin(handler.serve(transport))
                        as std::pin::Pin<Box<dyn Future<Output = _> + Send>>,
                    None,
                )
            }
        };
        let served = match self.server.connect_timeout {
            Some(after) => tokio::time::timeout(after, serving).await.map_err(|_| {
                connect_error(format!(
                    "`{}` did not answer `initialize` within {after:?}",
                    self.server.describe()
                ))
            })?,
            None => serving.await,
        };
        let service = match served {
            Ok(s) => s,
            Err(e) => {
                let said = last_words(stderr.as_ref()).await;
                return Err(connect_error(format!(
                    "`{}`: {e}{said}",
                    self.server.describe()
                )));
            }
        };
        self.follow_tool_list(&service).await;
        Ok(Connection {
            service,
            tools: tokio::sync::Mutex::new(None),
            stderr,
        })
    }

    /// On a connection of a protocol version without `initialize` (2026-07-28 on), a server
    /// announces tool list changes only on a subscription the client opens: opens one when
    /// the server says its list can change, and follows it while the connection lasts. (On
    /// earlier versions the announcement reaches the handler unasked.)
    async fn follow_tool_list(&self, service: &RunningService<RoleClient, Handler>) {
        let Some(info) = service.peer_info() else {
            return;
        };
        let may_change = info
            .capabilities
            .tools
            .as_ref()
            .and_then(|t| t.list_changed)
            .unwrap_or(false);
        if info.protocol_version.has_initialize() || !may_change {
            return;
        }
        let filter = SubscriptionFilter::builder().tools_list_changed().build();
        let listened = self
            .request_within(
                "subscriptions/listen",
                service.peer().listen(filter),
                self.server.connect_timeout,
            )
            .await
            .map_err(|e| e.to_string())
            .and_then(|l| l.map_err(|e| e.to_string()));
        let mut subscription = match listened {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(
                    mcp.server = self.name.as_str(),
                    "cannot follow its tool list: {e}"
                );
                return;
            }
        };
        let shared = Arc::clone(&self.shared);
        tokio::spawn(async move {
            while let Ok(Some(n)) = subscription.next().await {
                if matches!(n, ServerNotification::ToolListChangedNotification(_)) {
                    shared.tool_list_changed();
                }
            }
        });
    }

    /// `answer` within `limit`, or the timeout error.
    async fn request_within<T>(
        &self,
        request: &str,
        answer: impl Future<Output = T>,
        limit: Option<Duration>,
    ) -> Result<T, McpError> {
        match limit {
            Some(after) => {
                tokio::time::timeout(after, answer)
                    .await
                    .map_err(|_| McpError::Timeout {
                        server: self.name.clone(),
                        request: request.to_owned(),
                        after,
                    })
            }
            None => Ok(answer.await),
        }
    }

    /// Reads a stdio server's stderr into a tail (and the log) until it closes.
    fn follow_stderr(&self, stderr: tokio::process::ChildStderr) -> Arc<StdMutex<StderrTail>> {
        let tail = Arc::new(StdMutex::new(StderrTail::default()));
        let writer = Arc::clone(&tail);
        let server = self.name.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(mcp.server = server.as_str(), "{line}");
                let mut t = writer.lock().unwrap_or_else(|p| p.into_inner());
                if t.lines.len() == STDERR_LINES {
                    t.lines.pop_front();
                }
                t.lines.push_back(line.chars().take(500).collect());
            }
            writer.lock().unwrap_or_else(|p| p.into_inner()).ended = true;
        });
        tail
    }

    /// Sends one request on `conn`, within the timeout, its failure as an [`McpError`]. A
    /// lost connection is forgotten, so that the next request opens a new one.
    async fn request<T>(
        &self,
        conn: &Arc<Connection>,
        request: &str,
        answer: impl Future<Output = Result<T, ServiceError>>,
    ) -> Result<T, McpError> {
        let answered = self
            .request_within(request, answer, self.server.timeout)
            .await?;
        let e = match answered {
            Ok(a) => return Ok(a),
            Err(e) => e,
        };
        let (server, request) = (self.name.clone(), request.to_owned());
        Err(match e {
            ServiceError::McpError(data) => McpError::Protocol {
                server,
                request,
                code: data.code.0,
                message: data.message.into_owned(),
            },
            ServiceError::Timeout { timeout } => McpError::Timeout {
                server,
                request,
                after: timeout,
            },
            ServiceError::TransportClosed
            | ServiceError::TransportSend(_)
            | ServiceError::Cancelled { .. } => {
                let said = last_words(conn.stderr.as_ref()).await;
                let mut slot = self.conn.lock().await;
                if slot.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn)) {
                    *slot = None;
                }
                McpError::Closed {
                    server,
                    request,
                    message: format!("{e}{said}"),
                }
            }
            other => McpError::Answer {
                server,
                request,
                message: other.to_string(),
            },
        })
    }
}

/// `value[key]`, `null` when absent.
fn field<'a>(value: &'a Json, key: &str) -> &'a Json {
    value.get(key).unwrap_or(&Json::Null)
}

/// What a stdio server last wrote to its stderr, for an error message (waiting a moment for
/// a server that is exiting to finish writing).
async fn last_words(tail: Option<&Arc<StdMutex<StderrTail>>>) -> String {
    let Some(tail) = tail else {
        return String::new();
    };
    for _ in 0..20 {
        if tail.lock().unwrap_or_else(|p| p.into_inner()).ended {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let t = tail.lock().unwrap_or_else(|p| p.into_inner());
    if t.lines.is_empty() {
        String::new()
    } else {
        format!(
            " (its stderr ends: {})",
            t.lines.iter().cloned().collect::<Vec<_>>().join(" | ")
        )
    }
}

/// A prompt a server offers ([`McpClient::list_prompts`]).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[non_exhaustive]
pub struct McpPrompt {
    /// Its name, for [`McpClient::get_prompt`].
    pub name: String,
    /// What it is for.
    #[serde(default)]
    pub description: Option<String>,
    /// The arguments it takes.
    #[serde(default)]
    pub arguments: Vec<McpPromptArgument>,
}

/// An argument of an [`McpPrompt`].
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[non_exhaustive]
pub struct McpPromptArgument {
    /// Its name.
    pub name: String,
    /// What it is.
    #[serde(default)]
    pub description: Option<String>,
    /// Whether the prompt needs it.
    #[serde(default)]
    pub required: bool,
}

/// A resource a server offers ([`McpClient::list_resources`]).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct McpResource {
    /// Where it is, for [`McpClient::read_resource`].
    pub uri: String,
    /// Its name.
    pub name: String,
    /// What it is.
    #[serde(default)]
    pub description: Option<String>,
    /// Its MIME type, when the server says.
    #[serde(default)]
    pub mime_type: Option<String>,
}

/// One part of a resource's contents ([`McpClient::read_resource`]).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct McpResourceContents {
    /// The part's URI.
    pub uri: String,
    /// Its MIME type, when the server says.
    pub mime_type: Option<String>,
    /// The data.
    pub data: ResourceData,
}

/// The data of a resource part.
#[derive(Clone, Debug, PartialEq)]
pub enum ResourceData {
    /// Text.
    Text(String),
    /// Bytes (sent base64-encoded).
    Bytes(Vec<u8>),
}

/// One tool of an MCP server, as a [`Tool`]: its name (prefixed with the server's when asked),
/// description and input schema as the server lists them.
pub struct McpTool {
    client: Arc<McpClient>,
    name: String,
    remote: String,
    description: String,
    parameters: Json,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("server", &self.client.name)
            .field("name", &self.name)
            .field("remote", &self.remote)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    fn new(client: &Arc<McpClient>, tool: &rmcp::model::Tool, name: String) -> Self {
        Self {
            client: Arc::clone(client),
            name,
            remote: tool.name.to_string(),
            description: tool.description.as_deref().unwrap_or_default().to_owned(),
            parameters: Json::Object((*tool.input_schema).clone()),
        }
    }

    /// The server it belongs to.
    pub fn server(&self) -> &str {
        &self.client.name
    }

    /// Its name on the server (without a prefix).
    pub fn remote_name(&self) -> &str {
        &self.remote
    }
}

#[async_trait::async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Json {
        self.parameters.clone()
    }

    async fn call(&self, args: Value, _ctx: ToolContext) -> Result<ToolOutput, Error> {
        self.client.call_tool(&self.remote, args.to_json()).await
    }
}

/// How the tools of several servers are named.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolNames {
    /// As each server names them; two servers offering one name is an
    /// [`McpError::NameClash`] (the adapters' default, `tool_name_prefix=False`, which lets
    /// the later tool hide the earlier).
    #[default]
    AsGiven,
    /// Every name prefixed `{server}_{tool}` (the adapters' `tool_name_prefix=True`).
    Prefixed,
    /// Only the names more than one server offers are prefixed.
    PrefixOnClash,
}

/// The servers a [`MultiServerMcpClient`] connects to.
#[derive(Clone, Debug, Default)]
pub struct MultiServerMcpClientBuilder {
    servers: Vec<(String, McpServer)>,
    names: ToolNames,
}

impl MultiServerMcpClientBuilder {
    /// Adds a server called `name` (the prefix of its tools' names where they are prefixed).
    pub fn server(mut self, name: impl Into<String>, server: McpServer) -> Self {
        self.servers.push((name.into(), server));
        self
    }

    /// How the tools are named (default [`ToolNames::AsGiven`]).
    pub fn tool_names(mut self, names: ToolNames) -> Self {
        self.names = names;
        self
    }

    /// Connects to every server at once; the first that cannot be reached is the error.
    pub async fn connect(self) -> Result<MultiServerMcpClient, Error> {
        let mut seen = std::collections::BTreeSet::new();
        if let Some((dup, _)) = self.servers.iter().find(|(n, _)| !seen.insert(n.as_str())) {
            return Err(Error::InvalidRequest(format!(
                "two MCP servers are named `{dup}`"
            )));
        }
        let clients = futures_util::future::try_join_all(
            self.servers
                .into_iter()
                .map(|(name, server)| McpClient::connect(name, server)),
        )
        .await?;
        Ok(MultiServerMcpClient {
            clients,
            names: self.names,
        })
    }
}

/// Connections to several named MCP servers, and their tools together (the adapters'
/// `MultiServerMCPClient`).
#[derive(Debug)]
pub struct MultiServerMcpClient {
    clients: Vec<Arc<McpClient>>,
    names: ToolNames,
}

impl MultiServerMcpClient {
    /// The servers to connect to.
    pub fn builder() -> MultiServerMcpClientBuilder {
        MultiServerMcpClientBuilder::default()
    }

    /// The client of the server called `name`.
    pub fn client(&self, name: &str) -> Option<&Arc<McpClient>> {
        self.clients.iter().find(|c| c.name == name)
    }

    /// The connected clients, in the order the servers were added.
    pub fn clients(&self) -> &[Arc<McpClient>] {
        &self.clients
    }

    /// Every server's tools, in the order the servers were added, named as
    /// [`ToolNames`] says.
    pub async fn tools(&self) -> Result<Vec<Arc<dyn Tool>>, Error> {
        let lists =
            futures_util::future::try_join_all(self.clients.iter().map(|c| c.list_tools())).await?;
        // Which server first offers each name, and whether another does too.
        let mut owners: BTreeMap<&str, (&str, bool)> = BTreeMap::new();
        for (client, tools) in self.clients.iter().zip(&lists) {
            for t in tools.iter() {
                owners
                    .entry(&t.name)
                    .and_modify(|o| o.1 = true)
                    .or_insert((&client.name, false));
            }
        }
        let mut out: Vec<Arc<dyn Tool>> = Vec::new();
        for (client, tools) in self.clients.iter().zip(&lists) {
            for t in tools.iter() {
                let (first, clash) = owners.get(t.name.as_ref()).copied().unwrap_or_default();
                let prefixed = match self.names {
                    ToolNames::Prefixed => true,
                    ToolNames::PrefixOnClash => clash,
                    ToolNames::AsGiven if clash && first != client.name => {
                        return Err(McpError::NameClash {
                            tool: t.name.to_string(),
                            first: first.to_owned(),
                            second: client.name.clone(),
                        }
                        .into());
                    }
                    ToolNames::AsGiven => false,
                };
                let name = if prefixed {
                    format!("{}_{}", client.name, t.name)
                } else {
                    t.name.to_string()
                };
                out.push(Arc::new(McpTool::new(client, t, name)));
            }
        }
        Ok(out)
    }
}
