//! An OpenAI-compatible `/v1/embeddings` client (OpenAI, Azure-style proxies, vLLM, llama.cpp
//! server, Ollama's OpenAI endpoint, LiteLLM, …).

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use stategraph_store::{EmbeddingError, Embeddings};

/// The default API base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The default model.
pub const DEFAULT_MODEL: &str = "text-embedding-3-small";

fn provider(message: impl Into<String>) -> EmbeddingError {
    EmbeddingError::Provider {
        provider: "openai".into(),
        message: message.into(),
    }
}

/// Embeddings from an OpenAI-compatible HTTP API.
///
/// Texts are sent in batches (`batch_size` per request, default 512); the vectors come back in
/// the order of the texts whatever order the server lists them in (by their `index`). Calls
/// run on a blocking thread. An HTTP error is [`EmbeddingError::Provider`] with the status and
/// the API's own error message; a response with the wrong number of vectors is
/// [`EmbeddingError::Count`].
#[derive(Clone)]
pub struct OpenAiEmbeddings {
    agent: ureq::Agent,
    base_url: String,
    api_key: Option<String>,
    model: String,
    dimensions: Option<usize>,
    batch_size: usize,
}

impl std::fmt::Debug for OpenAiEmbeddings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiEmbeddings")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("dimensions", &self.dimensions)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .finish_non_exhaustive()
    }
}

#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    input: &'a [String],
    encoding_format: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    dimensions: Option<usize>,
}

#[derive(Deserialize)]
struct Response {
    data: Vec<Datum>,
}

#[derive(Deserialize)]
struct Datum {
    index: usize,
    embedding: Vec<f32>,
}

#[derive(Deserialize)]
struct ApiError {
    error: ApiErrorBody,
}

#[derive(Deserialize)]
struct ApiErrorBody {
    message: String,
}

impl OpenAiEmbeddings {
    /// A client for `model` at [`DEFAULT_BASE_URL`], without a key (set one with
    /// [`api_key`](Self::api_key)).
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            agent: Self::agent(Duration::from_secs(60)),
            base_url: DEFAULT_BASE_URL.to_owned(),
            api_key: None,
            model: model.into(),
            dimensions: None,
            batch_size: 512,
        }
    }

    /// Configured from the environment: `OPENAI_API_KEY`, `OPENAI_BASE_URL` (default
    /// [`DEFAULT_BASE_URL`]) and `STATEGRAPH_OPENAI_EMBED_MODEL` (default [`DEFAULT_MODEL`]).
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let mut s = Self::new(var("STATEGRAPH_OPENAI_EMBED_MODEL").unwrap_or(DEFAULT_MODEL.into()));
        if let Some(url) = var("OPENAI_BASE_URL") {
            s = s.base_url(url);
        }
        if let Some(key) = var("OPENAI_API_KEY") {
            s = s.api_key(key);
        }
        s
    }

    fn agent(timeout: Duration) -> ureq::Agent {
        ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .build()
            .into()
    }

    /// The API's base URL (the part before `/embeddings`).
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into().trim_end_matches('/').to_owned();
        self
    }

    /// The bearer token.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Asks the model for vectors of `n` dimensions (the API's `dimensions`).
    pub fn dimensions(mut self, n: usize) -> Self {
        self.dimensions = Some(n);
        self
    }

    /// Texts per request (default 512; at least 1).
    pub fn batch_size(mut self, n: usize) -> Self {
        self.batch_size = n.max(1);
        self
    }

    /// Gives up on a request after `timeout` (default 60 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.agent = Self::agent(timeout);
        self
    }

    /// Embeds `texts` on the calling thread.
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(self.batch_size) {
            out.extend(self.request(chunk)?);
        }
        Ok(out)
    }

    fn request(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let url = format!("{}/embeddings", self.base_url);
        let mut req = self.agent.post(&url);
        if let Some(key) = &self.api_key {
            req = req.header("Authorization", format!("Bearer {key}"));
        }
        let body = Request {
            model: &self.model,
            input: texts,
            encoding_format: "float",
            dimensions: self.dimensions,
        };
        let mut resp = req
            .send_json(&body)
            .map_err(|e| provider(format!("POST {url}: {e}")))?;
        let status = resp.status();
        let text = resp
            .body_mut()
            .read_to_string()
            .map_err(|e| provider(format!("reading the response of {url}: {e}")))?;
        if !status.is_success() {
            let detail = serde_json::from_str::<ApiError>(&text)
                .map(|e| e.error.message)
                .unwrap_or_else(|_| text.chars().take(300).collect());
            return Err(provider(format!("{url} answered {status}: {detail}")));
        }
        let parsed: Response = serde_json::from_str(&text)
            .map_err(|e| provider(format!("unexpected response from {url}: {e}")))?;
        if parsed.data.len() != texts.len() {
            return Err(EmbeddingError::Count {
                expected: texts.len(),
                got: parsed.data.len(),
            });
        }
        let mut slots: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        for d in parsed.data {
            match slots.get_mut(d.index) {
                Some(slot @ None) => *slot = Some(d.embedding),
                _ => {
                    return Err(provider(format!(
                        "response index {} is out of range or repeated",
                        d.index
                    )));
                }
            }
        }
        let vectors: Vec<Vec<f32>> = slots.into_iter().flatten().collect();
        if let Some(n) = self.dimensions
            && let Some(v) = vectors.iter().find(|v| v.len() != n)
        {
            return Err(EmbeddingError::Dimensions {
                expected: n,
                got: v.len(),
            });
        }
        Ok(vectors)
    }
}

#[async_trait]
impl Embeddings for OpenAiEmbeddings {
    async fn embed_documents(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        crate::on_blocking_thread("openai", self, texts, Self::embed_blocking).await
    }

    fn dims(&self) -> Option<usize> {
        self.dimensions
    }
}
