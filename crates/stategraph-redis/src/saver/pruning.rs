//! `prune` on Redis: the shared driver's operations, through the saver's own commands.

use super::*;

/// `prune` through the saver's own commands.
pub(super) struct Pruning<'s>(pub(super) &'s RedisSaver);

impl PruneTarget for Pruning<'_> {
    /// Ids, parents and metadata only: a checkpoint whose body cannot be read is still
    /// planned (and kept or deleted) like any other.
    async fn rows(&mut self, thread: &str) -> Result<Vec<PruneRow>> {
        let saver = self.0;
        let mut rows = Vec::new();
        for ns in saver.namespaces(thread).await? {
            for id in saver.ids(thread, &ns, None).await? {
                let mut conn = saver.conn.clone();
                let fields: Vec<Option<Vec<u8>>> = redis::cmd("HMGET")
                    .arg(saver.cp_key(thread, &ns, &id))
                    .arg("metadata")
                    .arg("parent")
                    .query_async(&mut conn)
                    .await
                    .map_err(db("reading checkpoints to prune"))?;
                let loc = Location::checkpoint(thread, &ns, &id);
                let mut fields = fields.into_iter();
                let (meta, parent) = (fields.next().flatten(), fields.next().flatten());
                rows.push(PruneRow {
                    metadata: saver.metadata(meta, &loc)?,
                    parent: parent
                        .map(|p| utf8(p, &loc, "parent"))
                        .transpose()?
                        .filter(|p| !p.is_empty())
                        .map(Into::into),
                    checkpoint_ns: ns.clone(),
                    checkpoint_id: id.into(),
                });
            }
        }
        Ok(rows)
    }

    async fn delete_thread(&mut self, thread: &str) -> Result<()> {
        self.0.delete_thread(thread).await
    }

    async fn delete_checkpoint(&mut self, thread: &str, ns: &str, id: &str) -> Result<()> {
        self.0.remove_checkpoint(thread, ns, id).await
    }

    async fn unlink_parent(&mut self, thread: &str, ns: &str, id: &str) -> Result<()> {
        let mut conn = self.0.conn.clone();
        conn.hset::<_, _, _, ()>(self.0.cp_key(thread, ns, id), "parent", "")
            .await
            .map_err(db("unlinking pruned parents"))
    }

    async fn collect_garbage(&mut self, thread: &str, plan: &PrunePlan) -> Result<()> {
        // Values live inside the checkpoint hashes; only emptied namespaces are left.
        let emptied: BTreeSet<&String> = plan
            .delete
            .iter()
            .map(|(ns, _)| ns)
            .filter(|ns| !plan.keep.iter().any(|(k, _)| k == *ns))
            .collect();
        let mut conn = self.0.conn.clone();
        for ns in emptied {
            conn.srem::<_, _, ()>(self.0.ns_key(thread), ns)
                .await
                .map_err(db("pruning namespaces"))?;
        }
        Ok(())
    }
}
