//! `prune` on Postgres: the shared driver's operations, inside one transaction, and the
//! conservative blob collection.

use super::*;

/// Deletes blobs of `thread` that no remaining checkpoint references. Conservative: a
/// namespace holding a checkpoint whose `channel_versions` cannot be read (not an object)
/// keeps all its blobs, since what that checkpoint references is unknown.
pub(super) const COLLECT_BLOBS: &str =
    "DELETE FROM checkpoint_blobs b WHERE b.thread_id = $1 AND NOT EXISTS (
    SELECT 1 FROM checkpoints c, jsonb_each_text(c.checkpoint -> 'channel_versions') v
    WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns
      AND v.key = b.channel AND v.value = b.version)
  AND NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id = b.thread_id
      AND c.checkpoint_ns = b.checkpoint_ns
      AND jsonb_typeof(c.checkpoint -> 'channel_versions') IS DISTINCT FROM 'object')";

pub(super) async fn delete_thread_in<C: GenericClient>(client: &C, thread_id: &str) -> Result<()> {
    for table in ["checkpoints", "checkpoint_blobs", "checkpoint_writes"] {
        client
            .query_typed(
                &format!("DELETE FROM {table} WHERE thread_id = $1"),
                &[p(&thread_id, Type::TEXT)],
            )
            .await
            .map_err(db("deleting a thread"))?;
    }
    Ok(())
}

/// `prune` inside one transaction.
pub(super) struct Pruning<'t, C>(pub(super) &'t C);

impl<C: GenericClient + Sync> PruneTarget for Pruning<'_, C> {
    async fn rows(&mut self, thread_id: &str) -> Result<Vec<PruneRow>> {
        let rows = self
            .0
            .query_typed(
                "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, metadata \
                 FROM checkpoints WHERE thread_id = $1",
                &[p(&thread_id, Type::TEXT)],
            )
            .await
            .map_err(db("reading checkpoints to prune"))?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let thread = Location::checkpoint(thread_id, "", "");
            let ns: String = read::column(r, 0, &thread)?;
            let id: String = read::column(r, 1, &thread)?;
            let loc = Location::checkpoint(thread_id, &ns, &id);
            let parent: Option<String> = read::column(r, 2, &loc)?;
            let meta: Json = read::column(r, 3, &loc)?;
            out.push(PruneRow::read(
                thread_id,
                ns,
                id.into(),
                parent.map(Into::into),
                meta,
            )?);
        }
        Ok(out)
    }

    async fn delete_thread(&mut self, thread_id: &str) -> Result<()> {
        delete_thread_in(self.0, thread_id).await
    }

    async fn delete_checkpoint(&mut self, thread_id: &str, ns: &str, id: &str) -> Result<()> {
        for table in ["checkpoint_writes", "checkpoints"] {
            self.0
                .query_typed(
                    &format!(
                        "DELETE FROM {table} WHERE thread_id = $1 AND checkpoint_ns = $2 \
                         AND checkpoint_id = $3"
                    ),
                    &[
                        p(&thread_id, Type::TEXT),
                        p(&ns, Type::TEXT),
                        p(&id, Type::TEXT),
                    ],
                )
                .await
                .map_err(db("pruning"))?;
        }
        Ok(())
    }

    async fn unlink_parent(&mut self, thread_id: &str, ns: &str, id: &str) -> Result<()> {
        self.0
            .query_typed(
                "UPDATE checkpoints SET parent_checkpoint_id = NULL \
                 WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3",
                &[
                    p(&thread_id, Type::TEXT),
                    p(&ns, Type::TEXT),
                    p(&id, Type::TEXT),
                ],
            )
            .await
            .map_err(db("unlinking pruned parents"))?;
        Ok(())
    }

    async fn collect_garbage(&mut self, thread_id: &str, _plan: &PrunePlan) -> Result<()> {
        self.0
            .query_typed(COLLECT_BLOBS, &[p(&thread_id, Type::TEXT)])
            .await
            .map_err(db("deleting unreferenced blobs"))?;
        Ok(())
    }
}
