//! Mapping driver failures to the checkpoint crate's typed errors.

use stategraph_checkpoint::Error;

/// The backend name in errors.
pub(crate) const BACKEND: &str = "sqlite";

/// Wraps a rusqlite error with what we were doing.
pub(crate) fn db(context: &'static str) -> impl Fn(rusqlite::Error) -> Error {
    move |e| Error::backend(BACKEND, context, e)
}

/// A blocking task that panicked or was cancelled.
pub(crate) fn join(e: tokio::task::JoinError) -> Error {
    Error::backend(BACKEND, "a database task did not complete", e)
}
