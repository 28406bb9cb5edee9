//! The crate's error.

use std::time::Duration;

/// What went wrong calling a model or a tool.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The model's server answered with an error status (after the retries it allows).
    #[error("{url} answered {status}{}: {message}", retried(*.attempts))]
    Http {
        /// The endpoint called.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The server's error message (OpenAI's `error.message`), or the start of its body.
        message: String,
        /// How many requests were made.
        attempts: u32,
    },
    /// The server could not be reached, or the connection broke before an answer.
    #[error("cannot reach {url}{}: {message}", retried(*.attempts))]
    Connect {
        /// The endpoint called.
        url: String,
        /// What the HTTP client said.
        message: String,
        /// How many requests were made.
        attempts: u32,
    },
    /// No answer (or no next streamed event) within the configured time.
    #[error("{url}: {what} took longer than {after:?}{}", retried(*.attempts))]
    Timeout {
        /// The endpoint called.
        url: String,
        /// What was waited for (`the response`, `the next streamed event`).
        what: &'static str,
        /// The limit.
        after: Duration,
        /// How many requests were made.
        attempts: u32,
    },
    /// The server's answer is not what the API documents.
    #[error("{url}: unexpected answer at {path}: {message}")]
    Decode {
        /// The endpoint called.
        url: String,
        /// Where in the answer (`choices[0].message`, `event 3`, or a byte offset of the body).
        path: String,
        /// What was wrong.
        message: String,
    },
    /// The request cannot be made as configured or given.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// A tool was called with arguments that do not fit its schema.
    #[error("tool `{tool}`: invalid arguments {args}: {message}")]
    ToolArgs {
        /// The tool.
        tool: String,
        /// The arguments as the model sent them.
        args: serde_json::Value,
        /// What did not fit.
        message: String,
    },
    /// A tool failed.
    #[error("tool `{tool}` failed: {message}")]
    Tool {
        /// The tool.
        tool: String,
        /// Its error's message.
        message: String,
    },
    /// A tool answered with an error result (an MCP tool's `isError: true`): what it said, as
    /// the content of the error message the model gets under [`ToolErrors`](crate::ToolErrors).
    #[error("tool `{tool}` reported an error: {message}")]
    ToolResult {
        /// The tool.
        tool: String,
        /// The text of its answer (its text blocks joined by newlines, or a summary when it
        /// has none).
        message: String,
        /// Its answer as content blocks.
        content: stategraph_checkpoint::Value,
    },
    /// An MCP server could not be used.
    #[error(transparent)]
    Mcp(#[from] McpError),
    /// A model streamed pieces that cannot be added up.
    #[error(transparent)]
    Chunk(#[from] stategraph_messages::ChunkMergeError),
    /// A graph error (building the agent, or a node failing).
    #[error(transparent)]
    Graph(#[from] stategraph_graph::GraphError),
}

/// What went wrong talking to an MCP server; each names the server (as it was named to the
/// client) and the request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The server could not be started, reached or initialized.
    #[error("MCP server `{server}`: cannot connect: {message}")]
    Connect {
        /// The server.
        server: String,
        /// Why (with the end of what a stdio server wrote to its stderr).
        message: String,
    },
    /// The connection ended before the answer: the server exited, was killed, or its HTTP
    /// endpoint went away. The next request connects again.
    #[error("MCP server `{server}` closed the connection during {request}: {message}")]
    Closed {
        /// The server.
        server: String,
        /// The request (`tools/call add`, `tools/list`).
        request: String,
        /// What the transport said (with the end of a stdio server's stderr).
        message: String,
    },
    /// No answer within the time allowed; the request was cancelled on the server.
    #[error("MCP server `{server}`: {request} took longer than {after:?}")]
    Timeout {
        /// The server.
        server: String,
        /// The request.
        request: String,
        /// The limit.
        after: Duration,
    },
    /// The server answered with a JSON-RPC error (an unknown tool, invalid parameters, …).
    #[error("MCP server `{server}` answered {request} with error {code}: {message}")]
    Protocol {
        /// The server.
        server: String,
        /// The request.
        request: String,
        /// The JSON-RPC error code (`-32602`: invalid parameters).
        code: i32,
        /// The server's message.
        message: String,
    },
    /// Two servers offer a tool of the same name and names are kept as given.
    #[error(
        "MCP tool name `{tool}` is offered by servers `{first}` and `{second}`: prefix the names \
         with their server's (`ToolNames::Prefixed` or `ToolNames::PrefixOnClash`)"
    )]
    NameClash {
        /// The tool name.
        tool: String,
        /// The first server offering it.
        first: String,
        /// The second.
        second: String,
    },
    /// The server's answer cannot be used as it is.
    #[error("MCP server `{server}`: unexpected answer to {request}: {message}")]
    Answer {
        /// The server.
        server: String,
        /// The request.
        request: String,
        /// What was wrong.
        message: String,
    },
}

fn retried(attempts: u32) -> String {
    if attempts > 1 {
        format!(" (after {attempts} attempts)")
    } else {
        String::new()
    }
}

/// This crate's results.
pub type Result<T, E = Error> = std::result::Result<T, E>;
