//! One error type for programs that use several parts of stategraph.

use stategraph_store::{EmbeddingError, StoreError};

/// Anything stategraph can fail with: a graph run, a checkpointer, the memory store, an
/// embedding model or a value's encoding. Every crate's error converts into it with `?`,
/// keeping its message and its chain of sources, and each stays matchable:
///
/// ```
/// use stategraph::prelude::*;
///
/// async fn saved_steps(url: &str, thread: &str) -> stategraph::Result<usize> {
///     let saver = stategraph::open_saver(url).await?; // a checkpointer's error
///     let graph = StateGraph::<DynState>::with_schema(Schema::new().last_value("x"));
///     let graph = graph.compile()?.with_checkpointer(saver); // a graph's error
///     Ok(graph.get_state_history(&RunConfig::thread(thread), Default::default()).await?.len())
/// }
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// // This graph has no node to start from.
/// let err = saved_steps("sqlite::memory:", "t").await.unwrap_err();
/// assert!(matches!(err, stategraph::Error::Graph(GraphError::InvalidGraph(_))), "{err}");
/// let err = saved_steps("nosuchdb://x", "t").await.unwrap_err();
/// assert!(matches!(
///     err.as_checkpoint(),
///     Some(stategraph::CheckpointError::InvalidInput { .. })
/// ));
/// # });
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Building, running or inspecting a graph failed.
    #[error(transparent)]
    Graph(#[from] stategraph_graph::GraphError),
    /// A checkpointer failed.
    #[error(transparent)]
    Checkpoint(#[from] stategraph_checkpoint::Error),
    /// The memory store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An embedding model failed.
    #[error(transparent)]
    Embedding(#[from] EmbeddingError),
    /// A value could not be encoded or decoded.
    #[error(transparent)]
    Serde(#[from] stategraph_checkpoint::SerdeError),
    /// Reading or writing a file, a socket or the terminal failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// An Agent Server could not be built from its parts (feature `server`).
    #[cfg(feature = "server")]
    #[error(transparent)]
    Server(#[from] stategraph_server::BuildError),
    /// A chat model or a tool failed (feature `agent`).
    #[cfg(feature = "agent")]
    #[error(transparent)]
    Agent(#[from] stategraph_agent::Error),
}

impl Error {
    /// The checkpointer's error, whether a saver returned it or a graph run did.
    pub fn as_checkpoint(&self) -> Option<&stategraph_checkpoint::Error> {
        match self {
            Error::Checkpoint(e) | Error::Graph(stategraph_graph::GraphError::Checkpoint(e)) => {
                Some(e)
            }
            _ => None,
        }
    }

    /// Whether another writer moved the thread on first (the run or write may be retried
    /// on the new head).
    pub fn is_conflict(&self) -> bool {
        matches!(
            self.as_checkpoint(),
            Some(stategraph_checkpoint::Error::Conflict { .. })
        )
    }
}

/// `Result` with stategraph's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
