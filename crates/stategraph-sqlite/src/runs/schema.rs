//! The queue's tables, created by versioned migrations recorded in
//! `stategraph_run_migrations` (`v`: the migration's number, from 1), next to LangGraph's
//! tables and never touching them.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use super::micros;

/// The migrations, in order: migration `v` is `MIGRATIONS[v - 1]`.
const MIGRATIONS: [&str; 1] = [
    // Runs, in queue order (`seq`). `status` is a run status's name; JSON is text;
    // `created_at`, `updated_at`, `lease_until`, `ended_at` are microseconds since the Unix
    // epoch; `ended_at` is set when the run reaches a final status, `purged` once its events
    // were purged.
    "CREATE TABLE stategraph_runs (
        seq INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL UNIQUE,
        thread_id TEXT NOT NULL,
        assistant_id TEXT NOT NULL,
        status TEXT NOT NULL,
        metadata TEXT NOT NULL,
        kwargs TEXT NOT NULL,
        multitask TEXT NOT NULL,
        temporary INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        attempt INTEGER NOT NULL DEFAULT 0,
        max_attempts INTEGER NOT NULL,
        worker TEXT,
        lease_until INTEGER,
        cancel TEXT,
        cancel_reason TEXT NOT NULL DEFAULT '',
        events INTEGER NOT NULL DEFAULT 0,
        error TEXT,
        output TEXT,
        ended_at INTEGER,
        purged INTEGER NOT NULL DEFAULT 0
    );
    -- Claims walk the pending runs in queue order.
    CREATE INDEX stategraph_runs_pending ON stategraph_runs (seq) WHERE status = 'pending';
    -- The running runs, in queue order (leases running out, counts): small, its last page
    -- shared by the runs that start together.
    CREATE INDEX stategraph_runs_running ON stategraph_runs (seq) WHERE status = 'running';
    -- A thread's runs by status, in order (claims, strategies, busy threads, listings).
    CREATE INDEX stategraph_runs_by_thread ON stategraph_runs (thread_id, status, seq);
    -- The ended runs whose events are still there, oldest end first (purges).
    CREATE INDEX stategraph_runs_by_end ON stategraph_runs (ended_at, seq)
        WHERE ended_at IS NOT NULL AND purged = 0;
    -- Each run's stream events, numbered from 1; they go with their run.
    CREATE TABLE stategraph_run_events (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        event TEXT NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;
    CREATE TRIGGER stategraph_runs_delete_events AFTER DELETE ON stategraph_runs
    BEGIN
        DELETE FROM stategraph_run_events WHERE run_id = old.run_id;
    END;
    -- The state each thread's last run (or state update) left.
    CREATE TABLE stategraph_run_threads (
        thread_id TEXT PRIMARY KEY,
        status TEXT NOT NULL,
        state_values TEXT NOT NULL,
        interrupts TEXT NOT NULL,
        error TEXT NOT NULL,
        updated_at INTEGER NOT NULL
    ) WITHOUT ROWID;
    -- Keys taken once (`claim_once`), and when.
    CREATE TABLE stategraph_run_claims (
        key TEXT PRIMARY KEY,
        claimed_at INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX stategraph_run_claims_by_time ON stategraph_run_claims (claimed_at);
    -- The notification sockets of the handles with subscribers.
    CREATE TABLE stategraph_run_listeners (
        name TEXT PRIMARY KEY,
        pid INTEGER NOT NULL,
        registered_at INTEGER NOT NULL
    ) WITHOUT ROWID;",
];

/// The table that records the migrations run.
const CREATE_MIGRATIONS: &str = "CREATE TABLE IF NOT EXISTS stategraph_run_migrations (
    v INTEGER PRIMARY KEY,
    applied_at INTEGER NOT NULL
)";

/// The last migration recorded (0 for none, or no table yet).
fn version(conn: &Connection) -> rusqlite::Result<i64> {
    let recorded = conn
        .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'stategraph_run_migrations'")?
        .exists([])?;
    if !recorded {
        return Ok(0);
    }
    conn.query_row("SELECT max(v) FROM stategraph_run_migrations", [], |r| {
        r.get(0)
    })
    .optional()
    .map(|v| v.flatten().unwrap_or(0))
}

/// Runs the migrations not recorded yet, each in an `IMMEDIATE` transaction that checks the
/// recorded version again (another process may have run it meanwhile). Reads only when the
/// tables are up to date.
pub(super) fn migrate(conn: &mut Connection) -> rusqlite::Result<()> {
    for (v, sql) in (1..).zip(MIGRATIONS) {
        if version(conn)? >= v {
            continue;
        }
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute_batch(CREATE_MIGRATIONS)?;
        if version(&tx)? < v {
            tx.execute_batch(sql)?;
            tx.execute(
                "INSERT INTO stategraph_run_migrations (v, applied_at) VALUES (?1, ?2)",
                [v, micros(std::time::SystemTime::now())],
            )?;
        }
        tx.commit()?;
    }
    Ok(())
}
