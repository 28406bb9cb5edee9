//! Writing saves in as few round trips as the driver allows: a batch of saves (a run's
//! checkpoints and writes, or one put) is one transaction of multi-row statements — the
//! thread's lock, the conflict check, the blobs, the checkpoint rows, the writes, the commit
//! — instead of a transaction and a lock per save. (The MySQL protocol has no pipelining in
//! mysql_async, so each statement is still its own round trip; the count no longer grows
//! with the batch.)

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params, TxOpts, Value as My};
use stategraph_checkpoint::blob_layout::{EncodedPut, EncodedSave};
use stategraph_checkpoint::{Error, Result, latest_conflict};

use crate::error::db;

fn s(v: &str) -> My {
    My::from(v)
}

pub(crate) use stategraph_checkpoint::backend::WriteFailure as Failure;

/// Stores `ops` (which must be [`EncodedSave::combinable`]) in one transaction.
pub(crate) async fn store(
    conn: &mut Conn,
    ops: &[EncodedSave],
) -> std::result::Result<(), Failure> {
    let Some((thread, ns)) = ops.first().map(EncodedSave::thread_ns) else {
        return Ok(());
    };
    let checked = EncodedSave::first_check(ops);
    if let ([EncodedSave::Writes(_)], None) = (ops, checked) {
        // One statement: autocommitted on its own, no transaction around it.
        return statements(conn, thread, ns, None, ops)
            .await
            .map_err(Failure::RolledBack);
    }
    // A named lock per thread namespace makes check-then-write atomic across connections.
    let lock = checked.map(|_| format!("sg:{thread}\u{1f}{ns}"));
    if let Some(name) = &lock {
        // GET_LOCK answers 1 (taken), 0 (timed out) or NULL (an error).
        let got: Option<Option<i64>> = conn
            .exec_first("SELECT GET_LOCK(SHA1(?), 30)", (name.as_str(),))
            .await
            .map_err(db("locking the thread"))
            .map_err(Failure::RolledBack)?;
        if got.flatten() != Some(1) {
            return Err(Failure::RolledBack(Error::Conflict {
                message: format!("timed out waiting for thread `{thread}`"),
            }));
        }
    }
    let result = in_transaction(conn, thread, ns, checked, ops).await;
    if let Some(name) = &lock {
        let _ = conn
            .exec_drop("SELECT RELEASE_LOCK(SHA1(?))", (name.as_str(),))
            .await;
    }
    result
}

async fn in_transaction(
    conn: &mut Conn,
    thread: &str,
    ns: &str,
    checked: Option<&EncodedPut>,
    ops: &[EncodedSave],
) -> std::result::Result<(), Failure> {
    let mut tx = conn
        .start_transaction(TxOpts::default())
        .await
        .map_err(db("starting a checkpoint write"))
        .map_err(Failure::RolledBack)?;
    statements(&mut tx, thread, ns, checked, ops)
        .await
        .map_err(Failure::RolledBack)?;
    tx.commit()
        .await
        .map_err(db("committing a checkpoint"))
        .map_err(Failure::Unknown)
}

/// The batch's statements inside `tx`; an error drops `tx`, which rolls it back.
async fn statements<Q: Queryable>(
    tx: &mut Q,
    thread: &str,
    ns: &str,
    checked: Option<&EncodedPut>,
    ops: &[EncodedSave],
) -> Result<()> {
    if let Some(p) = checked {
        let expected = p.expect.latest().flatten();
        let latest: Option<Option<String>> = tx
            .exec_first(
                "SELECT MAX(checkpoint_id) FROM checkpoints \
                 WHERE thread_id = ? AND checkpoint_ns_hash = MD5(?)",
                (thread, ns),
            )
            .await
            .map_err(db("reading the latest checkpoint"))?;
        let latest = latest.flatten();
        if latest.as_deref() != expected {
            return Err(latest_conflict(&p.config, expected, latest.as_deref()));
        }
    }
    let puts: Vec<&EncodedPut> = ops
        .iter()
        .filter_map(|op| match op {
            EncodedSave::Put(p) => Some(&**p),
            EncodedSave::Writes(_) => None,
        })
        .collect();
    let blobs: Vec<_> = puts.iter().flat_map(|p| &p.blobs).collect();
    if !blobs.is_empty() {
        let rows = vec!["(?, MD5(?), ?, ?, ?, ?)"; blobs.len()].join(", ");
        let mut params = Vec::with_capacity(6 * blobs.len());
        for b in blobs {
            params.extend([
                s(thread),
                s(ns),
                s(&b.channel),
                s(&b.version),
                s(&b.type_tag),
                My::from(b.data.as_slice()),
            ]);
        }
        tx.exec_drop(
            format!(
                "INSERT IGNORE INTO checkpoint_blobs (thread_id, checkpoint_ns_hash, \
                 channel, version, type, blob_data) VALUES {rows}"
            ),
            Params::Positional(params),
        )
        .await
        .map_err(db("storing blobs"))?;
    }
    if !puts.is_empty() {
        // ON DUPLICATE KEY UPDATE applies the rows in order: a later put of an id replaces
        // an earlier one, as when they are stored one by one.
        let rows = vec!["(?, ?, MD5(?), ?, ?, ?, ?)"; puts.len()].join(", ");
        let mut params = Vec::with_capacity(7 * puts.len());
        for p in &puts {
            params.extend([
                s(thread),
                s(ns),
                s(ns),
                s(&p.id),
                p.parent.as_deref().map_or(My::NULL, s),
                My::from(p.checkpoint.to_string()),
                My::from(p.metadata.to_string()),
            ]);
        }
        tx.exec_drop(
            format!(
                "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_ns_hash, \
                 checkpoint_id, parent_checkpoint_id, checkpoint, metadata) VALUES {rows} \
                 ON DUPLICATE KEY UPDATE checkpoint = VALUES(checkpoint), \
                 metadata = VALUES(metadata)"
            ),
            Params::Positional(params),
        )
        .await
        .map_err(db("storing a checkpoint"))?;
    }
    for replace in [false, true] {
        let calls: Vec<_> = ops
            .iter()
            .filter_map(|op| match op {
                EncodedSave::Writes(w) if w.replace == replace => Some(w),
                _ => None,
            })
            .collect();
        let count: usize = calls.iter().map(|w| w.rows.len()).sum();
        if count == 0 {
            continue;
        }
        let mut params = Vec::with_capacity(10 * count);
        for w in calls {
            for row in &w.rows {
                params.extend([
                    s(thread),
                    s(ns),
                    s(ns),
                    s(&w.checkpoint_id),
                    s(&w.task_id),
                    s(&w.task_path),
                    My::from(row.idx),
                    s(&row.channel),
                    s(&row.tag),
                    My::from(row.bytes.as_slice()),
                ]);
            }
        }
        let values = vec!["(?, ?, MD5(?), ?, ?, ?, ?, ?, ?, ?)"; count].join(", ");
        let (verb, tail) = if replace {
            (
                "INSERT",
                " ON DUPLICATE KEY UPDATE channel = VALUES(channel), type = VALUES(type), \
                 blob_data = VALUES(blob_data)",
            )
        } else {
            ("INSERT IGNORE", "")
        };
        tx.exec_drop(
            format!(
                "{verb} INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_ns_hash, \
                 checkpoint_id, task_id, task_path, idx, channel, type, blob_data) \
                 VALUES {values}{tail}"
            ),
            Params::Positional(params),
        )
        .await
        .map_err(db("storing writes"))?;
    }
    Ok(())
}
