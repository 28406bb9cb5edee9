//! LangGraph's SQLite schema (langgraph-checkpoint-sqlite 3.1.x), created idempotently.
//!
//! The tables are exactly the ones Python's `SqliteSaver.setup()` creates, so one database
//! file can be shared with Python LangGraph. There is no migrations table: like Python, we
//! create what is missing and add the `task_path` column to files written by older versions.

use std::time::Duration;

use rusqlite::{Connection, TransactionBehavior};

use crate::config::retry_busy;

/// `checkpoints`: one row per checkpoint; the whole checkpoint (values included) is one
/// serialized blob and the metadata is JSON text stored as a blob.
const CREATE_CHECKPOINTS: &str = "CREATE TABLE IF NOT EXISTS checkpoints (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    parent_checkpoint_id TEXT,
    type TEXT,
    checkpoint BLOB,
    metadata BLOB,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
)";

/// `writes`: one row per pending write.
const CREATE_WRITES: &str = "CREATE TABLE IF NOT EXISTS writes (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    task_path TEXT NOT NULL DEFAULT '',
    idx INTEGER NOT NULL,
    channel TEXT NOT NULL,
    type TEXT,
    value BLOB,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
)";

/// Checks, without changing anything, that the checkpoint tables exist; missing ones are an
/// `Error::NotFound` naming them and `what` (the database).
pub(crate) fn check(conn: &Connection, what: &str) -> stategraph_checkpoint::Result<()> {
    let mut missing = Vec::new();
    for table in ["checkpoints", "writes"] {
        let found = conn
            .prepare_cached("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1")
            .and_then(|mut s| s.exists([table]))
            .map_err(crate::error::db("checking the checkpoint tables"))?;
        if !found {
            missing.push(table);
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(stategraph_checkpoint::Error::NotFound {
        what: format!(
            "checkpoint tables {} in {what} (run `stategraph migrate` to create them)",
            missing.join(", ")
        ),
    })
}

/// Creates the tables if they are missing and upgrades pre-`task_path` files, in one
/// `IMMEDIATE` transaction (processes setting up one file at once take turns, each seeing
/// what the one before did), tried again while another process holds the file's lock.
pub(crate) fn setup(conn: &mut Connection, busy_timeout: Duration) -> rusqlite::Result<()> {
    retry_busy(busy_timeout, || {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute_batch(CREATE_CHECKPOINTS)?;
        tx.execute_batch(CREATE_WRITES)?;
        let has_task_path = tx
            .prepare("SELECT 1 FROM pragma_table_info('writes') WHERE name = 'task_path'")?
            .exists([])?;
        if !has_task_path {
            tx.execute_batch("ALTER TABLE writes ADD COLUMN task_path TEXT NOT NULL DEFAULT ''")?;
        }
        tx.commit()
    })
}
