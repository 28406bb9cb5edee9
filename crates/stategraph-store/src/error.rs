//! What can go wrong in a store operation.

use stategraph_value::BoxError;

use super::{EmbeddingError, Namespace};

/// What can go wrong in a store operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A namespace breaks the rules (no empty labels, no `.`, not empty for a put, not under
    /// the reserved root `langgraph`).
    #[error("invalid namespace {namespace:?}: {reason}")]
    InvalidNamespace {
        /// The namespace as given.
        namespace: Namespace,
        /// The rule it breaks.
        reason: String,
    },
    /// A put value is not a JSON object.
    #[error("invalid value for {namespace:?}/{key}: {reason}")]
    InvalidValue {
        /// Its namespace.
        namespace: Namespace,
        /// Its key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// A search filter is malformed.
    #[error("invalid filter on `{key}`: {reason}")]
    InvalidFilter {
        /// The filtered field.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// An index path is malformed.
    #[error("invalid index path `{path}`: {reason}")]
    InvalidIndexPath {
        /// The path.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The store's configuration is unusable.
    #[error("invalid store configuration: {0}")]
    InvalidConfig(String),
    /// Embedding failed.
    #[error(transparent)]
    Embedding(#[from] EmbeddingError),
    /// A stored row cannot be read back.
    #[error("corrupt store row {namespace:?}/{key}: {reason}")]
    Corrupt {
        /// Its namespace.
        namespace: Namespace,
        /// Its key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// The database lacks tables the store needs, and the store was opened without setting
    /// them up (so that opening changes nothing). The store's `setup` creates them.
    #[error(
        "{database} has no store table{} {}: the store was never set up there",
        if tables.len() == 1 { "" } else { "s" },
        tables.join(", ")
    )]
    MissingTables {
        /// Which database, for people (a file path, a server and schema).
        database: String,
        /// The missing tables, in creation order.
        tables: Vec<String>,
    },
    /// The database failed.
    #[error("{backend} store: {source}")]
    Backend {
        /// `sqlite`, `postgres`, …
        backend: &'static str,
        /// The driver's error.
        #[source]
        source: BoxError,
    },
    /// An invariant of the store did not hold: a bug in stategraph (please report it).
    #[error("internal store error: {0}")]
    Internal(String),
}

impl StoreError {
    /// Wraps a driver error.
    pub fn backend(backend: &'static str, source: impl Into<BoxError>) -> Self {
        Self::Backend {
            backend,
            source: source.into(),
        }
    }
}
