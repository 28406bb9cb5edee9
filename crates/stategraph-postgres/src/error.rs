//! Mapping driver failures to the checkpoint crate's typed errors.

use stategraph_checkpoint::Error;

/// The backend name in errors.
pub(crate) const BACKEND: &str = "postgres";

/// Wraps a tokio-postgres error with what we were doing.
pub(crate) fn db(context: &'static str) -> impl Fn(tokio_postgres::Error) -> Error {
    move |e| Error::backend(BACKEND, context, e)
}

/// A pool failure (cannot connect, pool closed, …).
pub(crate) fn pool(e: deadpool_postgres::PoolError) -> Error {
    Error::backend(BACKEND, "getting a connection from the pool", e)
}
