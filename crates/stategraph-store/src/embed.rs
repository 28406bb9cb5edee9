//! The [`Embeddings`] trait: turns texts into vectors for a store's semantic search.
//!
//! Implementations live elsewhere (`stategraph-embed` has a local all-MiniLM-L6-v2 and an
//! OpenAI-compatible HTTP provider); [`HashingEmbeddings`] here is a small model-free one,
//! useful for tests and for keyword-style similarity without downloading anything.

use std::fmt;

use async_trait::async_trait;

/// Why texts could not be embedded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbeddingError {
    /// The model's files are missing or unreadable; the message says how to install them.
    #[error("embedding model unavailable: {0}")]
    ModelUnavailable(String),
    /// The provider (a model run or a remote API) failed.
    #[error("embedding provider `{provider}` failed: {message}")]
    Provider {
        /// The provider's name (`minilm`, `openai`, …).
        provider: String,
        /// What went wrong.
        message: String,
    },
    /// The provider answered with the wrong number of vectors.
    #[error("embedding provider returned {got} vectors for {expected} texts")]
    Count {
        /// Texts sent.
        expected: usize,
        /// Vectors received.
        got: usize,
    },
    /// A vector does not have the configured number of dimensions.
    #[error("embedding has {got} dimensions, the index is configured for {expected}")]
    Dimensions {
        /// The index's `dims`.
        expected: usize,
        /// The vector's length.
        got: usize,
    },
}

/// A text-embedding model (LangChain's `Embeddings`).
///
/// `embed_documents` is called with the texts extracted from stored values (in batches),
/// `embed_query` with a search query. Both must return vectors of the same length.
#[async_trait]
pub trait Embeddings: Send + Sync + fmt::Debug {
    /// Embeds several texts, one vector per text, in order.
    async fn embed_documents(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbeddingError>;

    /// Embeds one search query. By default the same as a one-text `embed_documents`.
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbeddingError> {
        let mut v = self.embed_documents(&[text.to_owned()]).await?;
        match v.len() {
            1 => Ok(v.remove(0)),
            got => Err(EmbeddingError::Count { expected: 1, got }),
        }
    }

    /// The number of dimensions of the vectors, when known up front.
    fn dims(&self) -> Option<usize> {
        None
    }
}

/// A model-free embedding: each lower-cased alphanumeric word is hashed into one of `dims`
/// buckets (signed, FNV-1a), and the vector is L2-normalised. Texts sharing words get a
/// positive cosine similarity; texts sharing none get about zero. Deterministic across
/// processes and platforms.
#[derive(Clone, Debug)]
pub struct HashingEmbeddings {
    dims: usize,
}

impl HashingEmbeddings {
    /// A hashing embedding with `dims` dimensions (at least 1).
    pub fn new(dims: usize) -> Self {
        Self { dims: dims.max(1) }
    }

    /// Embeds one text synchronously.
    pub fn embed(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0f32; self.dims];
        for word in text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for b in word.to_lowercase().bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
            let bucket = (h % self.dims as u64) as usize;
            if let Some(x) = v.get_mut(bucket) {
                *x += if (h >> 63) == 0 { 1.0 } else { -1.0 };
            }
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            v.iter_mut().for_each(|x| *x /= norm);
        }
        v
    }
}

#[async_trait]
impl Embeddings for HashingEmbeddings {
    async fn embed_documents(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        Ok(texts.iter().map(|t| self.embed(t)).collect())
    }

    fn dims(&self) -> Option<usize> {
        Some(self.dims)
    }
}
