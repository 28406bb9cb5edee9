//! Saver layers: transformations of what a saver stores, applied around any saver.
//!
//! A [`SaverLayer`] says how checkpoints, metadata and writes change on the way into the
//! database and back; [`Layered`] wraps a saver with a layer and is itself a
//! [`CheckpointSaver`], so layers stack. [`CodecSaver`](crate::codec::CodecSaver) (per-channel
//! formats) and [`SealedMetadataSaver`](crate::SealedMetadataSaver) (encrypted metadata) are
//! layers.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value as Json;

use crate::error::Result;
use crate::saver::{Capabilities, CheckpointSaver, Expect, ListOptions};
use crate::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata,
    CheckpointTuple, PruneStrategy, Value,
};

/// Metadata filter conditions (`ListOptions::filter`).
pub type Filter = serde_json::Map<String, Json>;

/// How a layer changes what is stored. Every method has a pass-through default.
pub trait SaverLayer: Send + Sync + fmt::Debug + 'static {
    /// The checkpoint as it is to be stored.
    fn store_checkpoint<'a>(
        &self,
        config: &CheckpointConfig,
        checkpoint: &'a Checkpoint,
    ) -> Result<Cow<'a, Checkpoint>> {
        let _ = config;
        Ok(Cow::Borrowed(checkpoint))
    }

    /// The metadata as it is to be stored (`checkpoint` is the one being stored with it).
    fn store_metadata<'a>(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &'a CheckpointMetadata,
    ) -> Result<Cow<'a, CheckpointMetadata>> {
        let _ = (config, checkpoint);
        Ok(Cow::Borrowed(metadata))
    }

    /// The writes as they are to be stored.
    fn store_writes<'a>(
        &self,
        config: &CheckpointConfig,
        writes: &'a [(String, Value)],
    ) -> Result<Cow<'a, [(String, Value)]>> {
        let _ = config;
        Ok(Cow::Borrowed(writes))
    }

    /// Turns a stored tuple back into what the layer's users see.
    fn load_tuple(&self, tuple: CheckpointTuple) -> Result<CheckpointTuple> {
        Ok(tuple)
    }

    /// Splits a `list` filter into the part the inner saver can evaluate on stored data and
    /// the part this layer evaluates on loaded tuples (default: all of it in the database).
    fn split_filter(&self, filter: &Filter) -> (Filter, Filter) {
        (filter.clone(), Filter::new())
    }
}

/// Whether metadata matches a filter (a `null` also matches a missing key; numbers compare
/// by value, `42 == 42.0`), exactly as every saver's own filter does: this is
/// [`CheckpointMetadata::matches`].
pub fn metadata_matches(metadata: &CheckpointMetadata, filter: &Filter) -> bool {
    metadata.matches(filter)
}

/// A saver wrapped with a [`SaverLayer`].
#[derive(Clone)]
pub struct Layered<L> {
    pub(crate) inner: Arc<dyn CheckpointSaver>,
    pub(crate) layer: Arc<L>,
}

impl<L: SaverLayer> Layered<L> {
    /// `inner` with `layer` around it.
    pub fn wrap(inner: Arc<dyn CheckpointSaver>, layer: L) -> Self {
        Self {
            inner,
            layer: Arc::new(layer),
        }
    }

    /// The wrapped saver.
    pub fn inner(&self) -> &Arc<dyn CheckpointSaver> {
        &self.inner
    }

    /// The layer.
    pub fn layer(&self) -> &L {
        &self.layer
    }
}

impl<L: SaverLayer> fmt::Debug for Layered<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Layered")
            .field("inner", &self.inner.name())
            .field("layer", &self.layer)
            .finish()
    }
}

#[async_trait]
impl<L: SaverLayer> CheckpointSaver for Layered<L> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn process_local(&self) -> bool {
        self.inner.process_local()
    }

    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        match self.inner.get_tuple(config).await? {
            Some(t) => Ok(Some(self.layer.load_tuple(t)?)),
            None => Ok(None),
        }
    }

    async fn list(&self, options: &ListOptions) -> Result<Vec<CheckpointTuple>> {
        let (in_db, here) = self.layer.split_filter(&options.filter);
        let mut query = options.clone();
        query.filter = in_db;
        if !here.is_empty() {
            // The limit counts matches, which only this layer can see.
            query.limit = None;
        }
        let mut out = Vec::new();
        for t in self.inner.list(&query).await? {
            if options.limit.is_some_and(|l| out.len() >= l) {
                break;
            }
            let t = self.layer.load_tuple(t)?;
            if metadata_matches(&t.metadata, &here) {
                out.push(t);
            }
        }
        Ok(out)
    }

    async fn put_checked(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        new_versions: &ChannelVersions,
        expect: Expect<&str>,
    ) -> Result<CheckpointConfig> {
        let cp = self.layer.store_checkpoint(config, checkpoint)?;
        let meta = self.layer.store_metadata(config, checkpoint, metadata)?;
        self.inner
            .put_checked(config, &cp, &meta, new_versions, expect)
            .await
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: &[(String, Value)],
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        let writes = self.layer.store_writes(config, writes)?;
        self.inner
            .put_writes(config, &writes, task_id, task_path)
            .await
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        self.inner.delete_thread(thread_id).await
    }

    async fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
        self.inner.delete_for_runs(run_ids).await
    }

    async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        self.inner.copy_thread(source, target).await
    }

    async fn prune(&self, thread_ids: &[String], strategy: PruneStrategy) -> Result<()> {
        self.inner.prune(thread_ids, strategy).await
    }

    fn get_next_version(&self, current: Option<&ChannelVersion>) -> ChannelVersion {
        self.inner.get_next_version(current)
    }
}
