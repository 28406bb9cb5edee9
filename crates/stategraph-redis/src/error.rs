//! Mapping driver failures to the checkpoint crate's typed errors.

use stategraph_checkpoint::Error;

/// The backend name in errors.
pub(crate) const BACKEND: &str = "redis";

/// Wraps a redis-rs error with what we were doing.
pub(crate) fn db(context: &'static str) -> impl Fn(redis::RedisError) -> Error {
    move |e| Error::backend(BACKEND, context, e)
}
