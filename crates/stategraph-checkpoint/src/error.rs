//! The error type of every checkpoint operation.

use std::fmt;

use crate::checkpoint_id::CheckpointId;
use crate::serializer::SerdeError;

use stategraph_value::BoxError;

/// Where in the stored data a problem was found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Location {
    /// The thread.
    pub thread_id: String,
    /// The namespace (`""` at the root).
    pub checkpoint_ns: String,
    /// The checkpoint, when one is concerned.
    pub checkpoint_id: Option<CheckpointId>,
    /// The channel, when one is concerned.
    pub channel: Option<String>,
    /// The task whose write is concerned.
    pub task_id: Option<String>,
    /// What was being read: `checkpoint`, `metadata`, `write`, `blob`.
    pub part: &'static str,
}

impl Location {
    /// A location in checkpoint `checkpoint_id` of `thread_id`/`checkpoint_ns`.
    pub fn checkpoint(thread_id: &str, checkpoint_ns: &str, checkpoint_id: &str) -> Self {
        Self {
            thread_id: thread_id.to_owned(),
            checkpoint_ns: checkpoint_ns.to_owned(),
            checkpoint_id: Some(checkpoint_id.into()),
            channel: None,
            task_id: None,
            part: "checkpoint",
        }
    }

    /// The same location, narrowed to `part`.
    pub fn part(mut self, part: &'static str) -> Self {
        self.part = part;
        self
    }

    /// The same location, narrowed to `channel`.
    pub fn channel(mut self, channel: impl Into<String>) -> Self {
        self.channel = Some(channel.into());
        self
    }

    /// The same location, narrowed to a write of `task_id`.
    pub fn task(mut self, task_id: impl Into<String>) -> Self {
        self.task_id = Some(task_id.into());
        self
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // "checkpoint ID", not "checkpoint in checkpoint ID".
        let whole = self.part == "checkpoint" && self.channel.is_none() && self.task_id.is_none();
        match (&self.checkpoint_id, whole) {
            (Some(id), true) => write!(f, "checkpoint {id}")?,
            _ => f.write_str(self.part)?,
        }
        if let Some(ch) = &self.channel {
            write!(f, " of channel `{ch}`")?;
        }
        if let Some(task) = &self.task_id {
            write!(f, " written by task {task}")?;
        }
        if let Some(id) = self.checkpoint_id.as_ref().filter(|_| !whole) {
            write!(f, " in checkpoint {id}")?;
        }
        write!(f, " of thread `{}`", self.thread_id)?;
        if !self.checkpoint_ns.is_empty() {
            write!(f, " (namespace `{}`)", self.checkpoint_ns)?;
        }
        Ok(())
    }
}

/// Every failure of a saver or store, as a matchable variant. The variants are part of the
/// contract: the conformance suites assert them.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Something addressed does not exist.
    #[error("not found: {what}")]
    NotFound {
        /// What was looked for.
        what: String,
    },
    /// The operation conflicts with the stored state (e.g. copying onto a non-empty thread).
    #[error("conflict: {message}")]
    Conflict {
        /// What conflicted.
        message: String,
    },
    /// A write made for a run whose lease its worker no longer holds (another worker took
    /// the run over, or the lease ran out): refused, nothing written. The worker must stop.
    #[error(
        "the lease of run {run_id} is lost: worker {worker} no longer holds it, so nothing was \
         written"
    )]
    LeaseLost {
        /// The run.
        run_id: String,
        /// The worker that wrote.
        worker: String,
    },
    /// The connection to the database was lost while a write was under way (the server
    /// ended it, the network dropped it): the write may or may not have been applied. A run
    /// that meets it is retried from its last stored checkpoint instead of failing.
    #[error("{backend} lost its connection while {operation}; the write may not have been stored{}", cause_suffix(source.as_deref()))]
    ConnectionLost {
        /// The saver or store.
        backend: &'static str,
        /// What it was doing.
        operation: String,
        /// The driver's error.
        #[source]
        source: Option<BoxError>,
    },
    /// The caller passed something invalid.
    #[error("invalid {what}: {message}")]
    InvalidInput {
        /// Which argument or field.
        what: String,
        /// What is wrong with it.
        message: String,
    },
    /// Stored bytes could not be decoded, or a value could not be encoded.
    #[error("cannot decode {location}: {source}")]
    Serialization {
        /// Where the bad bytes are.
        location: Box<Location>,
        /// The serializer's error (with byte offset and path when known).
        #[source]
        source: SerdeError,
    },
    /// The backend does not implement this optional operation (see [`crate::Capabilities`]).
    #[error("{backend} does not support {operation}")]
    Unsupported {
        /// The operation.
        operation: &'static str,
        /// The saver or store.
        backend: &'static str,
    },
    /// The database did not answer in time (connecting, or a statement / command); the
    /// connection it was waiting on is dropped.
    #[error("{backend} timed out after {after:?} {operation}")]
    Timeout {
        /// The saver or store.
        backend: &'static str,
        /// What it was doing (e.g. "connecting to 127.0.0.1:5432", "reading a checkpoint").
        operation: String,
        /// The limit that ran out.
        after: std::time::Duration,
    },
    /// The database or driver failed. The message ends with the driver's own (e.g.
    /// "database is locked"), so printing the error alone says what happened.
    #[error("{backend} error: {message}{}", cause_suffix(source.as_deref()))]
    Backend {
        /// The saver or store.
        backend: &'static str,
        /// What failed.
        message: String,
        /// The driver's error.
        #[source]
        source: Option<BoxError>,
    },
}

impl Error {
    /// A serialization error at `location`.
    pub fn serialization(location: Location, source: SerdeError) -> Self {
        Error::Serialization {
            location: Box::new(location),
            source,
        }
    }

    /// A backend error wrapping a driver error.
    pub fn backend(
        backend: &'static str,
        message: impl Into<String>,
        source: impl Into<BoxError>,
    ) -> Self {
        Error::Backend {
            backend,
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// Where the stored data is that could not be read (a [`Serialization`](Self::Serialization)
    /// error), e.g. to tell which checkpoint of a listing is damaged.
    pub fn location(&self) -> Option<&Location> {
        match self {
            Error::Serialization { location, .. } => Some(location),
            _ => None,
        }
    }

    /// An invalid-input error.
    pub fn invalid(what: impl Into<String>, message: impl Into<String>) -> Self {
        Error::InvalidInput {
            what: what.into(),
            message: message.into(),
        }
    }
}

/// `": <the driver's message>"`, or nothing.
fn cause_suffix(source: Option<&(dyn std::error::Error + Send + Sync + 'static)>) -> String {
    source.map_or_else(String::new, |s| format!(": {s}"))
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// Printing a backend error alone says what the driver said (a library user who prints
    /// `{e}` sees "database is locked", not only what was being done).
    #[test]
    fn backend_errors_print_their_cause() {
        let e = Error::backend(
            "sqlite",
            "starting a batch of writes",
            std::io::Error::other("database is locked"),
        );
        assert_eq!(
            e.to_string(),
            "sqlite error: starting a batch of writes: database is locked"
        );
        assert!(
            std::error::Error::source(&e).is_some(),
            "the cause stays a source"
        );
        let bare = Error::Backend {
            backend: "sqlite",
            message: "no cause".into(),
            source: None,
        };
        assert_eq!(bare.to_string(), "sqlite error: no cause");
    }
}
