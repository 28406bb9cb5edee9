//! `prune` on MongoDB: the shared driver's operations, through the saver's own queries.

use mongodb::bson::{Bson, doc};
use stategraph_checkpoint::backend::{PrunePlan, PruneRow, PruneTarget};
use stategraph_checkpoint::{CheckpointSaver, Location, Result};

use super::MongoSaver;
use super::docs::{key, opt_string, read_metadata};
use super::read::doc_key;
use crate::error::db;

/// `prune` through the saver's own queries.
pub(super) struct Pruning<'s>(pub(super) &'s MongoSaver);

impl PruneTarget for Pruning<'_> {
    /// Ids, parents and metadata only: a checkpoint whose body cannot be read is still
    /// planned (and kept or deleted) like any other.
    async fn rows(&mut self, thread: &str) -> Result<Vec<PruneRow>> {
        let saver = self.0;
        let doing = "reading checkpoints to prune";
        let docs = saver
            .find(doc! { "thread_id": thread })
            .projection(doc! {
                "_id": 0, "thread_id": 1, "checkpoint_ns": 1, "checkpoint_id": 1,
                "parent_checkpoint_id": 1, "metadata": 1,
            })
            .all(&saver.db, doing)
            .await?;
        let mut rows = Vec::new();
        for doc in docs {
            let (_, ns, id) = doc_key(&doc)?;
            let loc = Location::checkpoint(thread, &ns, &id);
            rows.push(PruneRow {
                metadata: read_metadata(saver.serializer.as_ref(), doc.get("metadata"), &loc)?,
                parent: opt_string(&doc, "parent_checkpoint_id", &loc)?
                    .filter(|p| !p.is_empty())
                    .map(Into::into),
                checkpoint_ns: ns,
                checkpoint_id: id.into(),
            });
        }
        Ok(rows)
    }

    async fn delete_thread(&mut self, thread: &str) -> Result<()> {
        self.0.delete_thread(thread).await
    }

    async fn delete_checkpoint(&mut self, thread: &str, ns: &str, id: &str) -> Result<()> {
        self.0
            .delete_keys(vec![key(thread, ns, id)], "pruning")
            .await
    }

    async fn unlink_parent(&mut self, thread: &str, ns: &str, id: &str) -> Result<()> {
        self.0
            .checkpoints
            .update_one(
                key(thread, ns, id),
                doc! { "$set": { "parent_checkpoint_id": Bson::Null } },
            )
            .await
            .map_err(db("unlinking pruned parents"))?;
        Ok(())
    }

    async fn collect_garbage(&mut self, _thread: &str, _plan: &PrunePlan) -> Result<()> {
        // Values live inside the checkpoint documents: nothing else to collect.
        Ok(())
    }
}
