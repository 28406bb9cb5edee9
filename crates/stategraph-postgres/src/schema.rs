//! LangGraph's Postgres schema: migrations v0–v9 of `langgraph-checkpoint-postgres`, recorded in
//! `checkpoint_migrations` exactly as Python records them (never beyond v9, so a later Python
//! `setup()` still runs its own future migrations).

use stategraph_checkpoint::Result;
use tokio_postgres::Client;
use tokio_postgres::types::Type;

use crate::error::db;

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
pub(crate) async fn setup(client: &Client, schema: Option<&str>) -> Result<()> {
    if let Some(schema) = schema {
        client
            .batch_execute(&format!(
                "CREATE SCHEMA IF NOT EXISTS \"{}\"",
                schema.replace('"', "\"\"")
            ))
            .await
            .map_err(db("creating the schema"))?;
    }
    // Take turns with other setups of this schema. Poll with `pg_try_advisory_lock` instead of
    // blocking in `pg_advisory_lock`: a session blocked inside a statement holds a snapshot,
    // and `CREATE INDEX CONCURRENTLY` in the session holding the lock would wait for it — a
    // deadlock.
    const KEY: &str = "hashtextextended(current_schema(), $1)";
    loop {
        let rows = client
            .query_typed(
                &format!("SELECT pg_try_advisory_lock({KEY})"),
                &[(&SETUP_LOCK_SEED, Type::INT8)],
            )
            .await
            .map_err(db("waiting for other setups"))?;
        if rows.first().is_some_and(|r| r.get::<_, bool>(0)) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let result = migrate(client).await;
    let unlock = client
        .query_typed(
            &format!("SELECT pg_advisory_unlock({KEY})"),
            &[(&SETUP_LOCK_SEED, Type::INT8)],
        )
        .await
        .map_err(db("releasing the setup lock"));
    result?;
    unlock.map(drop)
}

async fn migrate(client: &Client) -> Result<()> {
    client
        .batch_execute(MIGRATIONS[0])
        .await
        .map_err(db("creating checkpoint_migrations"))?;
    let rows = client
        .query_typed(
            "SELECT v FROM checkpoint_migrations ORDER BY v DESC LIMIT 1",
            &[],
        )
        .await
        .map_err(db("reading checkpoint_migrations"))?;
    let current: i32 = rows.first().map_or(-1, |r| r.get(0));
    for (v, sql) in MIGRATIONS
        .iter()
        .enumerate()
        .skip(usize::try_from(current + 1).unwrap_or(0))
    {
        // Each statement on its own: CREATE INDEX CONCURRENTLY refuses to run in a transaction.
        client
            .batch_execute(sql)
            .await
            .map_err(db("running a migration"))?;
        let v = i32::try_from(v).unwrap_or(i32::MAX);
        client
            .query_typed(
                "INSERT INTO checkpoint_migrations (v) VALUES ($1) ON CONFLICT DO NOTHING",
                &[(&v, Type::INT4)],
            )
            .await
            .map_err(db("recording a migration"))?;
    }
    Ok(())
}
