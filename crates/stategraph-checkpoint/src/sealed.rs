//! Encrypted checkpoint metadata: [`SealedMetadataSaver`].
//!
//! LangGraph stores metadata in the clear on every backend, even with an encrypting
//! serializer, because it is what `list(filter=…)` queries and what its loop reads to continue
//! a thread. Metadata often carries more than the loop needs — user ids, tenant names, the
//! values of `configurable` keys, whatever a caller attached. `SealedMetadataSaver` wraps any
//! saver and encrypts every metadata key except the ones LangGraph's loop reads (`source`,
//! `step`, `parents`) and any you choose to keep readable (by default `run_id`, which
//! `delete_for_runs` looks up in the database). The sealed keys are stored together, as one
//! extra key, [`SEALED_KEY`], holding `"<cipher>:<hex of the cipher's bytes>"`.
//!
//! What it costs:
//! - Filters on sealed keys run after decryption, in this process: a `list` with such a
//!   filter reads every candidate checkpoint of the query (its other conditions still run in
//!   the database) and applies the filter and `limit` itself.
//! - Python LangGraph still reads and continues the threads (the keys its loop needs are in
//!   the clear), but it sees the sealed keys only as the opaque [`SEALED_KEY`] entry, and the
//!   checkpoints Python writes carry their metadata in the clear again.
//! - A wrong key, altered bytes, or sealed metadata read without this wrapper is visible: the
//!   first two are typed errors naming thread, checkpoint and `metadata`; the third shows the
//!   [`SEALED_KEY`] entry instead of the keys.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use serde_json::Value as Json;

use crate::error::{Error, Location, Result};
use crate::layer::{Filter, Layered, SaverLayer};
use crate::saver::CheckpointSaver;
use crate::serializer::SerdeError;
use crate::{Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointTuple};
use stategraph_value::cipher::{Cipher, hex, unhex};

pub use stategraph_value::cipher::SEALED_KEY;

/// The metadata sealing of a [`SealedMetadataSaver`]: a [`SaverLayer`].
#[derive(Clone)]
pub struct SealedMetadata {
    cipher: Arc<dyn Cipher>,
    clear: BTreeSet<String>,
}

impl fmt::Debug for SealedMetadata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SealedMetadata")
            .field("cipher", &self.cipher)
            .field("clear", &self.clear)
            .finish()
    }
}

/// A saver whose checkpoint metadata is encrypted, except for the keys LangGraph's loop reads
/// and those kept readable with [`keep_clear`](Layered::keep_clear).
pub type SealedMetadataSaver = Layered<SealedMetadata>;

/// The keys LangGraph's loop reads; never sealed.
const STRUCTURAL: [&str; 3] = ["source", "step", "parents"];

impl Layered<SealedMetadata> {
    /// `inner`, with metadata sealed by `cipher` (e.g. [`AesEaxCipher`](crate::AesEaxCipher));
    /// `run_id` stays readable.
    pub fn new(inner: Arc<dyn CheckpointSaver>, cipher: Arc<dyn Cipher>) -> Self {
        Layered::wrap(
            inner,
            SealedMetadata {
                cipher,
                clear: BTreeSet::from(["run_id".to_owned()]),
            },
        )
    }

    /// Keeps these metadata keys readable too (queried in the database, visible to Python).
    pub fn keep_clear<I: IntoIterator<Item = S>, S: Into<String>>(mut self, keys: I) -> Self {
        Arc::make_mut(&mut self.layer)
            .clear
            .extend(keys.into_iter().map(Into::into));
        self
    }
}

impl SealedMetadata {
    fn is_clear(&self, key: &str) -> bool {
        STRUCTURAL.contains(&key) || self.clear.contains(key)
    }
}

impl SaverLayer for SealedMetadata {
    fn store_metadata<'a>(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &'a CheckpointMetadata,
    ) -> Result<Cow<'a, CheckpointMetadata>> {
        let sealed: serde_json::Map<String, Json> = metadata
            .extra
            .iter()
            .filter(|(k, _)| !self.is_clear(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if sealed.is_empty() {
            return Ok(Cow::Borrowed(metadata));
        }
        let fail = |e: SerdeError| {
            Error::serialization(
                Location::checkpoint(&config.thread_id, &config.checkpoint_ns, &checkpoint.id)
                    .part("metadata"),
                e,
            )
        };
        let plain = serde_json::to_vec(&sealed).map_err(|e| {
            fail(SerdeError::Shape {
                path: String::new(),
                message: e.to_string(),
            })
        })?;
        let (name, bytes) = self.cipher.encrypt(&plain).map_err(fail)?;
        let mut out = metadata.clone();
        out.extra.retain(|k, _| self.is_clear(k));
        out.extra.insert(
            SEALED_KEY.into(),
            Json::String(format!("{name}:{}", hex(&bytes))),
        );
        Ok(Cow::Owned(out))
    }

    fn load_tuple(&self, mut t: CheckpointTuple) -> Result<CheckpointTuple> {
        let Some(sealed) = t.metadata.extra.get(SEALED_KEY) else {
            return Ok(t);
        };
        let location = Location::checkpoint(
            &t.config.thread_id,
            &t.config.checkpoint_ns,
            &t.checkpoint.id,
        )
        .part("metadata");
        let bad = |message: &str| {
            Error::serialization(
                location.clone(),
                SerdeError::Cipher {
                    message: format!("sealed metadata: {message}"),
                },
            )
        };
        let text = sealed.as_str().ok_or_else(|| bad("not a string"))?;
        let (name, hexed) = text
            .split_once(':')
            .ok_or_else(|| bad("not `<cipher>:<hex>`"))?;
        let bytes = unhex(hexed).ok_or_else(|| bad("not hex"))?;
        let plain = self
            .cipher
            .decrypt(name, &bytes)
            .map_err(|e| Error::serialization(location.clone(), e))?;
        let keys: serde_json::Map<String, Json> =
            serde_json::from_slice(&plain).map_err(|e| bad(&e.to_string()))?;
        // Only now is the metadata copied (if a saver's read shares it) and changed.
        let metadata = std::sync::Arc::make_mut(&mut t.metadata);
        metadata.extra.remove(SEALED_KEY);
        metadata.extra.extend(keys);
        Ok(t)
    }

    fn split_filter(&self, filter: &Filter) -> (Filter, Filter) {
        filter
            .clone()
            .into_iter()
            .partition(|(k, _)| self.is_clear(k))
    }
}
