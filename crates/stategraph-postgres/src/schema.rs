//! LangGraph's Postgres schema: migrations v0–v9 of `langgraph-checkpoint-postgres`, recorded in
//! `checkpoint_migrations` exactly as Python records them (never beyond v9, so a later Python
//! `setup()` still runs its own future migrations).

use stategraph_checkpoint::{Error, Result};
use tokio_postgres::Client;
use tokio_postgres::error::SqlState;

use crate::BlobCompression;

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
    let missing = crate::migrate::missing_tables(
        client,
        schema,
        &["checkpoints", "checkpoint_blobs", "checkpoint_writes"],
    )
    .await
    .map_err(crate::error::db("checking the checkpoint tables"))?;
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

pub(crate) async fn setup(
    client: &Client,
    schema: Option<&str>,
    compression: BlobCompression,
) -> Result<()> {
    if let Some(schema) = schema {
        create_schema(client, schema).await?;
    }
    with_setup_lock(client, SETUP_LOCK_SEED, async {
        run_migrations(client, "checkpoint_migrations", &MIGRATIONS).await?;
        compress_blobs(client, compression).await
    })
    .await
}

/// The columns [`BlobCompression`] applies to.
pub(crate) const BLOB_COLUMNS: [(&str, &str); 2] =
    [("checkpoint_blobs", "blob"), ("checkpoint_writes", "blob")];

/// Sets lz4 on the blob columns as `compression` asks, where it is not set already (so that
/// a set-up that changes nothing takes no table lock). Not a migration: Python's saver
/// numbers its own, and the setting changes no data (rows written before keep theirs).
async fn compress_blobs(client: &Client, compression: BlobCompression) -> Result<()> {
    let required = match compression {
        BlobCompression::ServerDefault => return Ok(()),
        BlobCompression::Lz4 => true,
        BlobCompression::Lz4IfSupported => false,
    };
    let db = |what: &'static str| crate::error::db(what);
    let version: i32 = client
        .query_one("SELECT current_setting('server_version_num')::int", &[])
        .await
        .and_then(|r| r.try_get(0))
        .map_err(db("reading the server version"))?;
    if version < 140_000 {
        if required {
            return Err(Error::Unsupported {
                operation: "lz4 compression of the blob columns (PostgreSQL 14 or later)",
                backend: "postgres",
            });
        }
        return Ok(());
    }
    for (table, column) in BLOB_COLUMNS {
        let current: String = client
            .query_one(
                "SELECT attcompression::text FROM pg_attribute \
                 WHERE attrelid = to_regclass($1) AND attname = $2",
                &[&table, &column],
            )
            .await
            .and_then(|r| r.try_get(0))
            .map_err(db("reading the blob columns' compression"))?;
        if current == "l" {
            continue;
        }
        let set = format!("ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION lz4");
        if let Err(e) = client.batch_execute(&set).await {
            let unsupported = e.code() == Some(&SqlState::FEATURE_NOT_SUPPORTED);
            if unsupported && !required {
                // Built without lz4: the server's default stays, as documented.
                return Ok(());
            }
            return Err(crate::error::db(
                "setting lz4 compression on the blob columns",
            )(e));
        }
    }
    Ok(())
}
