//! Writing checkpoints and writes: serializing puts and running them in a transaction.

use super::*;

/// A checkpoint put, serialized and ready for a transaction.
pub(super) struct EncodedPut {
    /// The stored checkpoint's config (what `put` returns).
    pub(super) out: CheckpointConfig,
    /// The config the put was made with (for conflict errors).
    pub(super) target: CheckpointConfig,
    pub(super) parent: Option<CheckpointId>,
    pub(super) tag: String,
    pub(super) bytes: Vec<u8>,
    pub(super) meta: Vec<u8>,
    /// What the namespace's newest checkpoint must be.
    pub(super) expect: Expect<CheckpointId>,
}

/// A `put_writes`, serialized and ready for a transaction.
pub(super) struct EncodedWriteCall {
    pub(super) sql: &'static str,
    pub(super) thread_id: String,
    pub(super) ns: String,
    pub(super) checkpoint_id: String,
    pub(super) task_id: String,
    pub(super) task_path: String,
    pub(super) rows: Vec<stategraph_checkpoint::EncodedWrite>,
}

impl SqliteSaver {
    pub(super) fn encode_put(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        expect: Expect<CheckpointId>,
    ) -> Result<EncodedPut> {
        validate_put(config, checkpoint)?;
        let (tag, bytes) = self
            .inner
            .config()
            .serializer
            .dumps_typed(&checkpoint.to_value())
            .map_err(|e| {
                Error::serialization(
                    Location::checkpoint(&config.thread_id, &config.checkpoint_ns, &checkpoint.id),
                    e,
                )
            })?;
        Ok(EncodedPut {
            out: CheckpointConfig::new(config.thread_id.clone())
                .with_ns(config.checkpoint_ns.clone())
                .with_checkpoint_id(checkpoint.id.clone()),
            target: config.clone(),
            parent: config.checkpoint_id.clone(),
            tag,
            bytes,
            meta: metadata.to_python_json_bytes(),
            expect,
        })
    }

    pub(super) fn encode_write_call(
        &self,
        config: &CheckpointConfig,
        writes: &[(String, Value)],
        task_id: &str,
        task_path: &str,
    ) -> Result<EncodedWriteCall> {
        let EncodedWrites {
            checkpoint_id,
            replace,
            rows,
        } = encode_writes(
            self.inner.config().serializer.as_ref(),
            config,
            writes,
            task_id,
        )?;
        let sql = if replace {
            "INSERT OR REPLACE INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, \
             task_path, idx, channel, type, value) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
        } else {
            "INSERT OR IGNORE INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, \
             task_path, idx, channel, type, value) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
        };
        Ok(EncodedWriteCall {
            sql,
            thread_id: config.thread_id.clone(),
            ns: config.checkpoint_ns.clone(),
            checkpoint_id: checkpoint_id.to_owned(),
            task_id: task_id.to_owned(),
            task_path: task_path.to_owned(),
            rows,
        })
    }
}

/// A checkpoint put inside `tx` (its conflict check first).
pub(super) fn put_in(tx: &Connection, put: &EncodedPut) -> Result<()> {
    let row = &put.out;
    if let Expect::Latest(expected) = &put.expect {
        let latest: Option<String> = tx
            .prepare_cached(
                "SELECT max(checkpoint_id) FROM checkpoints \
                 WHERE thread_id = ?1 AND checkpoint_ns = ?2",
            )
            .and_then(|mut s| s.query_row(params![row.thread_id, row.checkpoint_ns], |r| r.get(0)))
            .map_err(db("reading the latest checkpoint"))?;
        if latest.as_deref() != expected.as_deref() {
            return Err(latest_conflict(
                &put.target,
                expected.as_deref(),
                latest.as_deref(),
            ));
        }
    }
    tx.prepare_cached(
        "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, \
         parent_checkpoint_id, type, checkpoint, metadata) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .and_then(|mut s| {
        s.execute(params![
            row.thread_id,
            row.checkpoint_ns,
            row.checkpoint_id.as_deref(),
            put.parent.as_deref(),
            put.tag,
            put.bytes,
            put.meta
        ])
    })
    .map_err(db("storing a checkpoint"))?;
    Ok(())
}

/// A `put_writes` inside `tx`.
pub(super) fn writes_in(tx: &Connection, call: &EncodedWriteCall) -> Result<()> {
    let mut stmt = tx.prepare_cached(call.sql).map_err(db("storing writes"))?;
    for row in &call.rows {
        stmt.execute(params![
            call.thread_id,
            call.ns,
            call.checkpoint_id,
            call.task_id,
            call.task_path,
            row.idx,
            row.channel,
            row.tag,
            row.bytes
        ])
        .map_err(db("storing writes"))?;
    }
    Ok(())
}

/// One op of a batch, serialized.
pub(super) enum EncodedOp {
    Put(EncodedPut),
    Writes(EncodedWriteCall),
}

pub(super) fn delete_thread_in(tx: &Connection, thread_id: &str) -> Result<()> {
    tx.execute("DELETE FROM checkpoints WHERE thread_id = ?1", [thread_id])
        .map_err(db("deleting checkpoints"))?;
    tx.execute("DELETE FROM writes WHERE thread_id = ?1", [thread_id])
        .map_err(db("deleting writes"))?;
    Ok(())
}
