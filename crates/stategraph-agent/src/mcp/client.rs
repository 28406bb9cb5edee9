//! [`McpClient`]: one connection to one MCP server, and what it offers (tools, prompts, resources).

use super::*;

/// The last lines a stdio server wrote to its stderr.
#[derive(Default)]
pub(super) struct StderrTail {
    pub(super) lines: VecDeque<String>,
    pub(super) ended: bool,
}

/// What the client keeps per connection and its notification handler updates.
pub(super) struct Shared {
    /// The tool list must be read again (set at connect and by `tools/list_changed`).
    pub(super) stale: AtomicBool,
    /// Counts `tools/list_changed` notifications, for [`McpClient::tools_changed`].
    pub(super) changes: watch::Sender<u64>,
}

impl Shared {
    /// The server said its tool list changed: the next `tools` reads it again.
    pub(super) fn tool_list_changed(&self) {
        self.stale.store(true, Ordering::SeqCst);
        self.changes.send_modify(|n| *n += 1);
    }
}

/// The client side's handler: names the client and follows tool list changes.
#[derive(Clone)]
pub(super) struct Handler(Arc<Shared>);

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
pub(super) struct Connection {
    pub(super) service: RunningService<RoleClient, Handler>,
    /// The tool list as last read on this connection.
    pub(super) tools: tokio::sync::Mutex<Option<Arc<[rmcp::model::Tool]>>>,
    pub(super) stderr: Option<Arc<StdMutex<StderrTail>>>,
}

/// A connection to one MCP server; see the [module docs](super). Cheap to share (`Arc`); the
/// connection is opened again, on the next request, after it was lost.
pub struct McpClient {
    pub(super) name: String,
    pub(super) server: McpServer,
    pub(super) conn: tokio::sync::Mutex<Option<Arc<Connection>>>,
    pub(super) shared: Arc<Shared>,
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
    pub(super) async fn list_tools(&self) -> Result<Arc<[rmcp::model::Tool]>, McpError> {
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
    pub(super) fn unusable(&self, request: &str, message: impl Into<String>) -> McpError {
        McpError::Answer {
            server: self.name.clone(),
            request: request.to_owned(),
            message: message.into(),
        }
    }

    /// An answer in its wire form (the protocol's JSON), which this client reads so that
    /// its types follow the protocol, not the SDK's structs.
    pub(super) fn wire(
        &self,
        answer: &impl serde::Serialize,
        request: &str,
    ) -> Result<Json, McpError> {
        serde_json::to_value(answer).map_err(|e| self.unusable(request, e.to_string()))
    }

    /// An answer re-read as `T` through its [wire form](Self::wire).
    pub(super) fn reread<T: serde::de::DeserializeOwned>(
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
    pub(super) async fn connection(&self) -> Result<Arc<Connection>, McpError> {
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
    pub(super) async fn open(&self) -> Result<Connection, McpError> {
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
    pub(super) async fn follow_tool_list(&self, service: &RunningService<RoleClient, Handler>) {
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
    pub(super) async fn request_within<T>(
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
    pub(super) fn follow_stderr(
        &self,
        stderr: tokio::process::ChildStderr,
    ) -> Arc<StdMutex<StderrTail>> {
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
    pub(super) async fn request<T>(
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
pub(super) fn field<'a>(value: &'a Json, key: &str) -> &'a Json {
    value.get(key).unwrap_or(&Json::Null)
}
