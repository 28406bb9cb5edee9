//! The store's tables: LangGraph's migrations, applied by an explicit setup, and the check
//! that a store opened without setup finds them.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

/// LangGraph's `MIGRATIONS` for the `store` table, by version (`store_migrations.v`).
pub(super) const STORE_MIGRATIONS: [&str; 5] = [
    "CREATE TABLE IF NOT EXISTS store (
    -- 'prefix' represents the doc's 'namespace'
    prefix text NOT NULL,
    key text NOT NULL,
    value text NOT NULL,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (prefix, key)
);",
    "CREATE INDEX IF NOT EXISTS store_prefix_idx ON store (prefix);",
    "ALTER TABLE store ADD COLUMN expires_at TIMESTAMP;",
    "ALTER TABLE store ADD COLUMN ttl_minutes REAL;",
    "CREATE INDEX IF NOT EXISTS idx_store_expires_at ON store (expires_at)
WHERE expires_at IS NOT NULL;",
];

/// LangGraph's `VECTOR_MIGRATIONS` (`vector_migrations.v`), run when the store has an index.
pub(super) const VECTOR_MIGRATIONS: [&str; 1] = ["CREATE TABLE IF NOT EXISTS store_vectors (
    prefix text NOT NULL,
    key text NOT NULL,
    field_name text NOT NULL,
    embedding BLOB,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (prefix, key, field_name),
    FOREIGN KEY (prefix, key) REFERENCES store(prefix, key) ON DELETE CASCADE
);"];

/// The tables [`STORE_MIGRATIONS`] create (with their migrations table), in creation order.
pub(super) const STORE_TABLES: [&str; 2] = ["store", "store_migrations"];

/// The tables [`VECTOR_MIGRATIONS`] create (with their migrations table).
pub(super) const VECTOR_TABLES: [&str; 2] = ["store_vectors", "vector_migrations"];

/// Runs `migrations` not yet recorded in `table` (LangGraph's scheme: `v` is the index of
/// the last one applied), all in one transaction.
pub(super) fn migrate(
    conn: &mut Connection,
    table: &str,
    migrations: &[&str],
) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch(&format!(
        "CREATE TABLE IF NOT EXISTS {table} (v INTEGER PRIMARY KEY)"
    ))?;
    let current: Option<i64> = tx
        .query_row(
            &format!("SELECT v FROM {table} ORDER BY v DESC LIMIT 1"),
            [],
            |r| r.get(0),
        )
        .optional()?;
    let next = current.map_or(0, |v| usize::try_from(v.saturating_add(1)).unwrap_or(0));
    for (v, sql) in migrations.iter().enumerate().skip(next) {
        tx.execute_batch(sql)?;
        tx.execute(
            &format!("INSERT INTO {table} (v) VALUES (?1)"),
            [i64::try_from(v).unwrap_or(i64::MAX)],
        )?;
    }
    tx.commit()
}

pub(super) fn table_exists(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1")?
        .exists([name])
}

/// Those of `tables` the database lacks, in the order given.
pub(super) fn missing_tables(conn: &Connection, tables: &[&str]) -> rusqlite::Result<Vec<String>> {
    let mut missing = Vec::new();
    for table in tables {
        if !table_exists(conn, table)? {
            missing.push((*table).to_owned());
        }
    }
    Ok(missing)
}
