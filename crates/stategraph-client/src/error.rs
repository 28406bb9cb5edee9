//! What can go wrong talking to an Agent Server.

/// An error of the client: each names the request (method and URL) it comes from.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The base URL is not an `http://` or `https://` URL.
    #[error("`{url}` is not an Agent Server URL: {problem}")]
    Url {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The server could not be reached, or the connection broke.
    #[error("{method} {url}: {message}")]
    Connect {
        /// The request's method.
        method: &'static str,
        /// The request's URL.
        url: String,
        /// What the HTTP client said.
        message: String,
    },
    /// The server answered with an error status.
    #[error("{method} {url}: the server answered {status} {}: {detail}", reason(*.status))]
    Status {
        /// The request's method.
        method: &'static str,
        /// The request's URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The answer's `detail`, or its body.
        detail: String,
    },
    /// The answer (or a streamed event) is not what the API says it is.
    #[error("{url}: the answer does not read at {at}: {problem}")]
    Decode {
        /// The request's URL.
        url: String,
        /// Where in the answer (`state.values`, `event 3`, …).
        at: String,
        /// What is wrong there.
        problem: String,
    },
    /// The run failed on the server: its streamed `error` event.
    #[error("the run of {url} failed: {error}: {message}")]
    Run {
        /// The request's URL.
        url: String,
        /// The error's name (`ValueError`, `NodeFailed`, …).
        error: String,
        /// Its message.
        message: String,
    },
}

/// A result of the client.
pub type Result<T> = std::result::Result<T, ClientError>;

/// An HTTP status's reason phrase (`Unprocessable Entity`).
fn reason(status: u16) -> &'static str {
    reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("")
}
