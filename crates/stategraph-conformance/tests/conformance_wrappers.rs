//! The shared conformance suite against the wrappers (a pass-through layer and sealed
//! metadata, over the in-memory saver and over SQLite) and against a saver that declares no
//! optional capability, so every `Unsupported` path of the suite runs too.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;

use async_trait::async_trait;
use stategraph_checkpoint::backend::Expect;
use stategraph_checkpoint::layer::{Layered, SaverLayer};
use stategraph_checkpoint::*;
use stategraph_conformance::Fixture;

/// A layer that changes nothing: `Layered`'s own plumbing under test.
#[derive(Debug)]
struct Passthrough;

impl SaverLayer for Passthrough {}

fn cipher() -> Arc<dyn Cipher> {
    Arc::new(AesEaxCipher::new(b"0123456789abcdef").unwrap())
}

mod passthrough {
    use super::*;

    async fn fixture() -> Fixture {
        Fixture::new(Layered::wrap(Arc::new(InMemorySaver::new()), Passthrough))
    }

    stategraph_conformance::checkpointer_conformance!(fixture);
}

mod sealed_metadata {
    use super::*;

    async fn fixture() -> Fixture {
        Fixture::new(SealedMetadataSaver::new(
            Arc::new(InMemorySaver::new()),
            cipher(),
        ))
    }

    stategraph_conformance::checkpointer_conformance!(fixture);
}

/// Only the required operations, delegated to memory: declares no capability, so the
/// suite's cases for optional operations check that each fails with `Unsupported`.
#[derive(Debug, Default)]
struct Minimal(InMemorySaver);

#[async_trait]
impl CheckpointSaver for Minimal {
    fn name(&self) -> &'static str {
        "minimal"
    }

    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        self.0.get_tuple(config).await
    }

    async fn list(&self, options: &ListOptions) -> Result<Vec<CheckpointTuple>> {
        self.0.list(options).await
    }

    async fn put_checked(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        new_versions: &ChannelVersions,
        expect: Expect<&str>,
    ) -> Result<CheckpointConfig> {
        self.0
            .put_checked(config, checkpoint, metadata, new_versions, expect)
            .await
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: &[(String, Value)],
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        self.0.put_writes(config, writes, task_id, task_path).await
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        self.0.delete_thread(thread_id).await
    }
}

mod minimal {
    use super::*;

    async fn fixture() -> Fixture {
        assert_eq!(Minimal::default().capabilities(), Capabilities::NONE);
        Fixture::new(Minimal::default())
            .without_corruptor("keeps decoded values in memory: there are no bytes to damage")
    }

    stategraph_conformance::checkpointer_conformance!(fixture);
}
