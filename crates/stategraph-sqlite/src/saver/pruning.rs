//! `prune` on SQLite: the shared driver's operations, inside one transaction.

use super::*;

/// `prune` inside one transaction.
pub(super) struct Pruning<'t>(pub(super) &'t Connection);

impl PruneTarget for Pruning<'_> {
    async fn rows(&mut self, thread_id: &str) -> Result<Vec<PruneRow>> {
        let reading = || db("reading checkpoints to prune");
        let mut stmt = self
            .0
            .prepare(
                "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, metadata \
                 FROM checkpoints WHERE thread_id = ?1",
            )
            .map_err(reading())?;
        let mut q = stmt.query([thread_id]).map_err(reading())?;
        let mut rows = Vec::new();
        while let Some(r) = q.next().map_err(reading())? {
            let ns: String = r.get(0).map_err(reading())?;
            let id: String = r.get(1).map_err(reading())?;
            let parent: Option<String> = r.get(2).map_err(reading())?;
            let meta = bytes_column(r, 3).map_err(reading())?;
            let loc = Location::checkpoint(thread_id, &ns, &id);
            let metadata = decode_metadata(meta.as_deref(), &|| loc.clone())?;
            rows.push(PruneRow {
                checkpoint_ns: ns,
                checkpoint_id: id.into(),
                metadata,
                parent: parent.map(Into::into),
            });
        }
        Ok(rows)
    }

    async fn delete_thread(&mut self, thread_id: &str) -> Result<()> {
        delete_thread_in(self.0, thread_id)
    }

    async fn delete_checkpoint(&mut self, thread_id: &str, ns: &str, id: &str) -> Result<()> {
        for (table, doing) in [
            ("writes", "pruning writes"),
            ("checkpoints", "pruning checkpoints"),
        ] {
            self.0
                .execute(
                    &format!(
                        "DELETE FROM {table} WHERE thread_id = ?1 AND checkpoint_ns = ?2 \
                         AND checkpoint_id = ?3"
                    ),
                    params![thread_id, ns, id],
                )
                .map_err(db(doing))?;
        }
        Ok(())
    }

    async fn unlink_parent(&mut self, thread_id: &str, ns: &str, id: &str) -> Result<()> {
        self.0
            .execute(
                "UPDATE checkpoints SET parent_checkpoint_id = NULL \
                 WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3",
                params![thread_id, ns, id],
            )
            .map_err(db("unlinking pruned parents"))?;
        Ok(())
    }

    async fn collect_garbage(&mut self, _thread_id: &str, _plan: &PrunePlan) -> Result<()> {
        // Values live inside the checkpoint rows: nothing is left behind.
        Ok(())
    }
}
