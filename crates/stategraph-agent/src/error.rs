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
    /// A model streamed pieces that cannot be added up.
    #[error(transparent)]
    Chunk(#[from] stategraph_checkpoint::ChunkMergeError),
    /// A graph error (building the agent, or a node failing).
    #[error(transparent)]
    Graph(#[from] stategraph_graph::GraphError),
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
