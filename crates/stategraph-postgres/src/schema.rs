//! LangGraph's Postgres schema: migrations v0–v9 of `langgraph-checkpoint-postgres`, recorded in
//! `checkpoint_migrations` exactly as Python records them (never beyond v9, so a later Python
//! `setup()` still runs its own future migrations).

use stategraph_checkpoint::Result;
use tokio_postgres::Client;

use crate::migrate::{create_schema, run_migrations, with_setup_lock};

/// The migrations, indexed by version.
pub(crate) const MIGRATIONS: [&str; 10] = [
    "CREATE TABLE IF NOT EXISTS checkpoint_migrations (v INTEGER PRIMARY KEY)",
    "CREATE TABLE IF NOT EXISTS checkpoints (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    parent_checkpoint_id TEXT,
    type TEXT,
    checkpoint JSONB NOT NULL,
    metadata JSONB NOT NULL DEFAULT '{}',
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
)",
    "CREATE TABLE IF NOT EXISTS checkpoint_blobs (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    channel TEXT NOT NULL,
    version TEXT NOT NULL,
    type TEXT NOT NULL,
    blob BYTEA,
    PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
)",
    "CREATE TABLE IF NOT EXISTS checkpoint_writes (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    channel TEXT NOT NULL,
    type TEXT,
    blob BYTEA NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
)",
    "ALTER TABLE checkpoint_blobs ALTER COLUMN blob DROP not null",
    "SELECT 1",
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS checkpoints_thread_id_idx ON checkpoints(thread_id)",
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS checkpoint_blobs_thread_id_idx ON checkpoint_blobs(thread_id)",
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS checkpoint_writes_thread_id_idx ON checkpoint_writes(thread_id)",
    "ALTER TABLE checkpoint_writes ADD COLUMN IF NOT EXISTS task_path TEXT NOT NULL DEFAULT ''",
];

/// Seed of the session advisory-lock key that serialises concurrent `setup()` calls on one
/// schema (the key hashes it with the schema name).
const SETUP_LOCK_SEED: i64 = 0x5354_4752_4150_4831; // "STGRAPH1"

/// Runs the missing migrations. Idempotent, and safe to run from several processes at once:
/// an advisory lock makes them take turns, and each migration is recorded as it completes.
/// Checks, without changing anything, that the checkpoint tables exist where the saver looks
/// (its schema, else the search path); missing ones are an `Error::NotFound` naming them.
pub(crate) async fn check(client: &Client, schema: Option<&str>, target: &str) -> Result<()> {
    let mut missing = Vec::new();
    for table in ["checkpoints", "checkpoint_blobs", "checkpoint_writes"] {
        let row = client
            .query_one("SELECT to_regclass($1)::text", &[&table])
            .await
            .map_err(crate::error::db("checking the checkpoint tables"))?;
        let found: Option<String> = row
            .try_get(0)
            .map_err(crate::error::db("checking the checkpoint tables"))?;
        if found.is_none() {
            missing.push(table);
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let place = schema.map_or_else(String::new, |s| format!(" (schema `{s}`)"));
    Err(stategraph_checkpoint::Error::NotFound {
        what: format!(
            "checkpoint tables {} in the PostgreSQL database at {target}{place} (run \
             `stategraph migrate` to create them)",
            missing.join(", ")
        ),
    })
}

pub(crate) async fn setup(client: &Client, schema: Option<&str>) -> Result<()> {
    if let Some(schema) = schema {
        create_schema(client, schema).await?;
    }
    with_setup_lock(client, SETUP_LOCK_SEED, async {
        run_migrations(client, "checkpoint_migrations", &MIGRATIONS).await?;
        Ok(())
    })
    .await
}
