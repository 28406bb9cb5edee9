//! Mapping driver failures to the checkpoint crate's typed errors.

use mongodb::error::{ErrorKind, WriteFailure};
use stategraph_checkpoint::Error;

/// The backend name in errors.
pub(crate) const BACKEND: &str = "mongodb";

/// MongoDB's duplicate key error code.
pub(crate) const DUPLICATE_KEY: i32 = 11000;

/// Wraps a driver error with what we were doing.
pub(crate) fn db(context: &'static str) -> impl Fn(mongodb::error::Error) -> Error {
    move |e| Error::backend(BACKEND, context, e)
}

/// Whether a write was refused by a unique index.
pub(crate) fn is_duplicate_key(e: &mongodb::error::Error) -> bool {
    matches!(
        &*e.kind,
        ErrorKind::Write(WriteFailure::WriteError(w)) if w.code == DUPLICATE_KEY
    )
}
