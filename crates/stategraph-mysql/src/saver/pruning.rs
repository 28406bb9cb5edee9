//! `prune` on MySQL: the shared driver's operations inside one transaction, and the
//! conservative blob collection.

use super::*;

/// Deletes blobs of `thread` that no remaining checkpoint references (computed here: MariaDB
/// has no `jsonb_each_text`). Conservative: a namespace holding a checkpoint whose JSON or
/// `channel_versions` cannot be read keeps all its blobs, since what it references is unknown.
pub(super) async fn collect_blobs<Q: Queryable>(q: &mut Q, thread: &str) -> Result<()> {
    let rows: Vec<MyRow> = q
        .exec(
            "SELECT checkpoint_ns_hash, checkpoint FROM checkpoints WHERE thread_id = ?",
            (thread,),
        )
        .await
        .map_err(db("reading checkpoints"))?;
    let at = Location::checkpoint(thread, "", "");
    let mut referenced: BTreeSet<(String, String, String)> = BTreeSet::new();
    let mut unreadable: BTreeSet<String> = BTreeSet::new();
    for mut r in rows {
        let hash: String = column(&mut r, 0, &at)?;
        let body: Option<String> = column(&mut r, 1, &at)?;
        let versions = body
            .and_then(|b| serde_json::from_str::<Json>(&b).ok())
            .and_then(|j| match j {
                Json::Object(mut o) => o.remove("channel_versions"),
                _ => None,
            });
        let Some(Json::Object(versions)) = versions else {
            unreadable.insert(hash);
            continue;
        };
        for (ch, v) in versions {
            let v = match v {
                Json::String(s) => s,
                other => other.to_string(),
            };
            referenced.insert((hash.clone(), ch, v));
        }
    }
    let stored: Vec<MyRow> = q
        .exec(
            "SELECT checkpoint_ns_hash, channel, version FROM checkpoint_blobs WHERE thread_id = ?",
            (thread,),
        )
        .await
        .map_err(db("reading blobs"))?;
    for mut r in stored {
        let key: (String, String, String) = (
            column(&mut r, 0, &at)?,
            column(&mut r, 1, &at)?,
            column(&mut r, 2, &at)?,
        );
        if referenced.contains(&key) || unreadable.contains(&key.0) {
            continue;
        }
        q.exec_drop(
            "DELETE FROM checkpoint_blobs WHERE thread_id = ? AND checkpoint_ns_hash = ? \
             AND channel = ? AND version = ?",
            (thread, key.0, key.1, key.2),
        )
        .await
        .map_err(db("deleting unreferenced blobs"))?;
    }
    Ok(())
}

pub(super) async fn delete_thread_in<Q: Queryable>(q: &mut Q, thread: &str) -> Result<()> {
    for table in ["checkpoints", "checkpoint_blobs", "checkpoint_writes"] {
        q.exec_drop(
            format!("DELETE FROM {table} WHERE thread_id = ?"),
            (thread,),
        )
        .await
        .map_err(db("deleting a thread"))?;
    }
    Ok(())
}

/// `prune` inside one transaction.
pub(super) struct Pruning<'t, Q>(pub(super) &'t mut Q);

impl<Q: Queryable> PruneTarget for Pruning<'_, Q> {
    async fn rows(&mut self, thread: &str) -> Result<Vec<PruneRow>> {
        let rows: Vec<MyRow> = self
            .0
            .exec(
                "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, metadata \
                 FROM checkpoints WHERE thread_id = ?",
                (thread,),
            )
            .await
            .map_err(db("reading checkpoints to prune"))?;
        let mut out = Vec::with_capacity(rows.len());
        for mut r in rows {
            let at = Location::checkpoint(thread, "", "");
            let ns: String = column(&mut r, 0, &at)?;
            let id: String = column(&mut r, 1, &at)?;
            let loc = Location::checkpoint(thread, &ns, &id);
            let parent: Option<String> = column(&mut r, 2, &loc)?;
            let meta: String = column(&mut r, 3, &loc)?;
            let meta = backend::json_from_text(&meta, loc.part("metadata"))?;
            out.push(PruneRow::read(
                thread,
                ns,
                id.into(),
                parent.map(Into::into),
                meta,
            )?);
        }
        Ok(out)
    }

    async fn delete_thread(&mut self, thread: &str) -> Result<()> {
        delete_thread_in(self.0, thread).await
    }

    async fn delete_checkpoint(&mut self, thread: &str, ns: &str, id: &str) -> Result<()> {
        for table in ["checkpoint_writes", "checkpoints"] {
            self.0
                .exec_drop(
                    format!(
                        "DELETE FROM {table} WHERE thread_id = ? AND checkpoint_ns_hash = MD5(?) \
                         AND checkpoint_id = ?"
                    ),
                    (thread, ns, id),
                )
                .await
                .map_err(db("pruning"))?;
        }
        Ok(())
    }

    async fn unlink_parent(&mut self, thread: &str, ns: &str, id: &str) -> Result<()> {
        self.0
            .exec_drop(
                "UPDATE checkpoints SET parent_checkpoint_id = NULL \
                 WHERE thread_id = ? AND checkpoint_ns_hash = MD5(?) AND checkpoint_id = ?",
                (thread, ns, id),
            )
            .await
            .map_err(db("unlinking pruned parents"))
    }

    async fn collect_garbage(&mut self, thread: &str, _plan: &PrunePlan) -> Result<()> {
        collect_blobs(self.0, thread).await
    }
}
