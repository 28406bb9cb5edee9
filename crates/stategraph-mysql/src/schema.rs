//! The three tables of the project's MySQL layout: `checkpoints`,
//! `checkpoint_writes` and `checkpoint_blobs`, linked by `thread_id` + `checkpoint_ns_hash`
//! (MD5 of the namespace), with `gmt_create` / `gmt_modified` timestamps. Values use
//! LangGraph's layout (inline primitives in the checkpoint JSON, blobs per channel version) and
//! its serializer, so rows read the same as Postgres rows. Versioned in
//! `stategraph_mysql_migrations`.

use mysql_async::prelude::Queryable;
use stategraph_checkpoint::Result;

use crate::error::db;

/// The migrations, indexed by version.
pub(crate) const MIGRATIONS: [&str; 3] = [
    "CREATE TABLE IF NOT EXISTS checkpoints (
    thread_id VARCHAR(255) NOT NULL,
    checkpoint_ns VARCHAR(2048) NOT NULL DEFAULT '',
    checkpoint_ns_hash CHAR(32) NOT NULL,
    checkpoint_id VARCHAR(64) NOT NULL,
    parent_checkpoint_id VARCHAR(64) NULL,
    type VARCHAR(64) NULL,
    checkpoint LONGTEXT NOT NULL,
    metadata LONGTEXT NOT NULL,
    gmt_create DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    gmt_modified DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
    PRIMARY KEY (thread_id, checkpoint_ns_hash, checkpoint_id),
    KEY idx_checkpoints_gmt_create (gmt_create)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
    "CREATE TABLE IF NOT EXISTS checkpoint_blobs (
    thread_id VARCHAR(255) NOT NULL,
    checkpoint_ns_hash CHAR(32) NOT NULL,
    channel VARCHAR(255) NOT NULL,
    version VARCHAR(128) NOT NULL,
    type VARCHAR(64) NOT NULL,
    blob_data LONGBLOB NULL,
    gmt_create DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    gmt_modified DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
    PRIMARY KEY (thread_id, checkpoint_ns_hash, channel, version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
    "CREATE TABLE IF NOT EXISTS checkpoint_writes (
    thread_id VARCHAR(255) NOT NULL,
    checkpoint_ns VARCHAR(2048) NOT NULL DEFAULT '',
    checkpoint_ns_hash CHAR(32) NOT NULL,
    checkpoint_id VARCHAR(64) NOT NULL,
    task_id VARCHAR(255) NOT NULL,
    task_path VARCHAR(1024) NOT NULL DEFAULT '',
    idx INT NOT NULL,
    channel VARCHAR(255) NOT NULL,
    type VARCHAR(64) NULL,
    blob_data LONGBLOB NOT NULL,
    gmt_create DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    gmt_modified DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
    PRIMARY KEY (thread_id, checkpoint_ns_hash, checkpoint_id, task_id, idx),
    KEY idx_writes_gmt_create (gmt_create)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
];

/// The tables a saver needs.
const TABLES: [&str; 3] = ["checkpoints", "checkpoint_blobs", "checkpoint_writes"];

/// Checks, without changing anything, that the saver's tables exist in the connection's
/// database; missing ones are an `Error::NotFound` naming them.
pub(crate) async fn check(conn: &mut mysql_async::Conn, target: &str) -> Result<()> {
    let rows: Vec<mysql_async::Row> = conn
        .query(
            "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
             WHERE table_schema = DATABASE()",
        )
        .await
        .map_err(db("checking the tables"))?;
    let found: Vec<String> = rows
        .into_iter()
        .filter_map(|mut r| r.take_opt::<String, _>(0).and_then(|v| v.ok()))
        .collect();
    let missing: Vec<&str> = TABLES
        .into_iter()
        .filter(|t| !found.iter().any(|f| f == t))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(stategraph_checkpoint::Error::NotFound {
        what: format!(
            "checkpoint tables {} in the MySQL database at {target} (run `stategraph migrate` \
             to create them)",
            missing.join(", ")
        ),
    })
}

/// Creates or upgrades the tables (idempotent; concurrent setups take turns on a named lock).
pub(crate) async fn setup(conn: &mut mysql_async::Conn) -> Result<()> {
    conn.query_drop("SELECT GET_LOCK('stategraph_setup', 60)")
        .await
        .map_err(db("waiting for other setups"))?;
    let result = migrate(conn).await;
    let unlock = conn
        .query_drop("SELECT RELEASE_LOCK('stategraph_setup')")
        .await
        .map_err(db("releasing the setup lock"));
    result?;
    unlock
}

async fn migrate(conn: &mut mysql_async::Conn) -> Result<()> {
    conn.query_drop(
        "CREATE TABLE IF NOT EXISTS stategraph_mysql_migrations (v INT PRIMARY KEY) ENGINE=InnoDB",
    )
    .await
    .map_err(db("creating the migrations table"))?;
    let current: Option<i32> = conn
        .query_first("SELECT MAX(v) FROM stategraph_mysql_migrations")
        .await
        .map_err(db("reading migrations"))?
        .flatten();
    let start = usize::try_from(current.map_or(0, |v| v + 1)).unwrap_or(0);
    for (v, sql) in MIGRATIONS.iter().enumerate().skip(start) {
        conn.query_drop(*sql)
            .await
            .map_err(db("running a migration"))?;
        conn.exec_drop(
            "INSERT IGNORE INTO stategraph_mysql_migrations (v) VALUES (?)",
            (i32::try_from(v).unwrap_or(i32::MAX),),
        )
        .await
        .map_err(db("recording a migration"))?;
    }
    Ok(())
}
