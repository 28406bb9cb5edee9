//! How to reach an MCP server: [`McpServer`], over stdio or streamable HTTP.

use super::*;

/// How to reach one MCP server; see the [module docs](super).
#[derive(Clone, Debug)]
pub struct McpServer {
    pub(super) transport: Transport,
    pub(super) timeout: Option<Duration>,
    pub(super) connect_timeout: Option<Duration>,
}

#[derive(Clone, Debug)]
pub(super) enum Transport {
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
    pub(super) fn describe(&self) -> String {
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

/// What a stdio server last wrote to its stderr, for an error message (waiting a moment for
/// a server that is exiting to finish writing).
pub(super) async fn last_words(tail: Option<&Arc<StdMutex<StderrTail>>>) -> String {
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
