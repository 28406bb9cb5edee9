//! The store's tables: LangGraph's migrations and stategraph's own, applied when connecting,
//! and the check that a store connected without setup finds them.

use stategraph_store::StoreError;

use super::PostgresStore;
use super::sql::{backend, col, db};
use crate::migrate::{SetupFailure, create_schema, run_migrations, with_setup_lock};

/// LangGraph's `store_migrations` v0–v3 (`langgraph-checkpoint-postgres`), indexed by
/// version. Recorded in `store_migrations` exactly as Python records them, never beyond v3.
const STORE_MIGRATIONS: [&str; 4] = [
    "CREATE TABLE IF NOT EXISTS store (
    prefix text NOT NULL,
    key text NOT NULL,
    value jsonb NOT NULL,
    created_at TIMESTAMP WITH TIME ZONE DEFAULT CURRENT_TIMESTAMP,
    updated_at TIMESTAMP WITH TIME ZONE DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (prefix, key)
)",
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS store_prefix_idx ON store USING btree (prefix text_pattern_ops)",
    "ALTER TABLE store
ADD COLUMN IF NOT EXISTS expires_at TIMESTAMP WITH TIME ZONE,
ADD COLUMN IF NOT EXISTS ttl_minutes INT",
    "CREATE INDEX IF NOT EXISTS idx_store_expires_at ON store (expires_at)
WHERE expires_at IS NOT NULL",
];

/// LangGraph's `vector_migrations` v0–v2 for an index of `dims` dimensions with its defaults
/// (`vector` type, cosine distance, HNSW without parameters).
fn vector_migrations(dims: usize) -> [String; 3] {
    [
        "DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector') THEN
        CREATE EXTENSION vector;
    END IF;
END $$"
            .to_owned(),
        format!(
            "CREATE TABLE IF NOT EXISTS store_vectors (
    prefix text NOT NULL,
    key text NOT NULL,
    field_name text NOT NULL,
    embedding vector({dims}),
    created_at TIMESTAMP WITH TIME ZONE DEFAULT CURRENT_TIMESTAMP,
    updated_at TIMESTAMP WITH TIME ZONE DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (prefix, key, field_name),
    FOREIGN KEY (prefix, key) REFERENCES store(prefix, key) ON DELETE CASCADE
)"
        ),
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS store_vectors_embedding_idx ON store_vectors
    USING hnsw (embedding vector_cosine_ops)"
            .to_owned(),
    ]
}

/// stategraph's own additions, versioned in `stategraph_store_migrations` (never in LangGraph's
/// tables, so Python's `setup()` keeps running its own future migrations).
const OWN_MIGRATIONS: [&str; 1] = [
    // The exact TTL of items put with a fractional number of minutes (`store.ttl_minutes` is an
    // INT). A row counts only while its `updated_at` equals the store row's, so a later put by
    // Python (which does not know this table) makes it void.
    "CREATE TABLE IF NOT EXISTS stategraph_store_ttl (
    prefix text NOT NULL,
    key text NOT NULL,
    ttl_minutes double precision NOT NULL,
    updated_at TIMESTAMP WITH TIME ZONE NOT NULL,
    PRIMARY KEY (prefix, key),
    FOREIGN KEY (prefix, key) REFERENCES store(prefix, key) ON DELETE CASCADE
)",
];

/// Seed of the session advisory-lock key that serialises concurrent store `setup()` calls on
/// one schema (hashed with the schema name; distinct from the saver's).
const SETUP_LOCK_SEED: i64 = 0x5354_4752_5354_4f31; // "STGRSTO1"

impl PostgresStore {
    /// Creates or upgrades the tables: LangGraph's store migrations, with an index its vector
    /// migrations, and stategraph's own. Idempotent; concurrent calls (from several processes
    /// too) take turns on an advisory lock. Fails if the index's dimensions differ from an
    /// existing `store_vectors` table's.
    pub(super) async fn setup(&self) -> Result<(), StoreError> {
        if let Some(index) = &self.index {
            index.validate()?;
        }
        let client = self.client().await?;
        if let Some(schema) = &self.schema {
            create_schema(&client, schema).await?;
        }
        with_setup_lock(&client, SETUP_LOCK_SEED, self.migrate(&client)).await
    }

    async fn migrate(&self, client: &tokio_postgres::Client) -> Result<(), StoreError> {
        run_migrations(client, "store_migrations", &STORE_MIGRATIONS).await?;
        if let Some(index) = &self.index {
            run_migrations(client, "vector_migrations", &vector_migrations(index.dims)).await?;
            let rows = client
                .query_typed(
                    "SELECT a.atttypmod FROM pg_attribute a \
                     WHERE a.attrelid = to_regclass('store_vectors') AND a.attname = 'embedding'",
                    &[],
                )
                .await
                .map_err(db("reading the vector dimensions"))?;
            let dims: Option<i32> = rows.first().map(|r| col(r, 0)).transpose()?.flatten();
            if let Some(d) = dims
                && usize::try_from(d).ok() != Some(index.dims)
            {
                return Err(StoreError::InvalidConfig(format!(
                    "store_vectors.embedding has {d} dimensions, the index is configured for {}",
                    index.dims
                )));
            }
        }
        Ok(run_migrations(client, "stategraph_store_migrations", &OWN_MIGRATIONS).await?)
    }

    /// Checks, changing nothing, that the tables reads need are there: `store` and
    /// `store_migrations`, and with an index `store_vectors` and `vector_migrations` (so a
    /// database Python's `setup()` created passes). Missing tables are
    /// [`StoreError::MissingTables`]. (stategraph's own `stategraph_store_ttl`, which
    /// refreshing TTLs and putting fractional TTLs use, is created by `setup`.)
    pub(super) async fn check_tables(&self) -> Result<(), StoreError> {
        let mut wanted = vec!["store", "store_migrations"];
        if self.index.is_some() {
            wanted.extend(["store_vectors", "vector_migrations"]);
        }
        let client = self.client().await?;
        let missing = crate::migrate::missing_tables(&client, self.schema.as_deref(), &wanted)
            .await
            .map_err(db("reading the schema"))?;
        if missing.is_empty() {
            return Ok(());
        }
        let database = match &self.schema {
            Some(schema) => format!("the PostgreSQL schema \"{schema}\" of {}", self.target),
            None => format!("the PostgreSQL database {}", self.target),
        };
        Err(StoreError::MissingTables {
            database,
            tables: missing,
        })
    }
}

impl From<SetupFailure> for StoreError {
    fn from(f: SetupFailure) -> Self {
        backend(f.context, f.source)
    }
}
