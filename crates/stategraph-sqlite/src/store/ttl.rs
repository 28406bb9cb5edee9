//! TTLs: refreshing the expiry of items read, and sweeping expired ones.

use std::time::Duration;

use rusqlite::{Connection, params};
use stategraph_store::{StoreError, Timestamp};

use super::conn::db;
use super::schema::table_exists;

/// A TTL refresh: `expires_at = now + ttl` for a row read at `now`.
pub(super) struct Refresh {
    pub(super) prefix: String,
    pub(super) key: String,
    /// The row's `ttl_minutes`, as stored.
    pub(super) ttl: f64,
    pub(super) now: Timestamp,
}

/// A TTL in LangGraph's stored unit, fractional minutes (the `ttl_minutes` column).
pub(super) fn minutes(ttl: Duration) -> f64 {
    ttl.as_secs_f64() / 60.0
}

/// `at` plus a stored `ttl_minutes`, to the microsecond. Whatever the column holds is honoured
/// as Python honours it (a negative TTL expires the row at once; one too large to count never
/// expires it).
fn plus_minutes(at: Timestamp, minutes: f64) -> Timestamp {
    let delta = (minutes * 60_000_000.0).round();
    let delta = if delta.is_finite() {
        delta as i64
    } else {
        i64::MAX
    };
    Timestamp::from_unix_micros(at.unix_micros().saturating_add(delta))
}

/// Applies TTL refreshes. A row whose TTL changed or that expired since it was read (another
/// writer got there first) is left alone.
pub(super) fn apply_refreshes(
    conn: &mut Connection,
    refreshes: &[Refresh],
) -> Result<(), StoreError> {
    let tx = conn.savepoint().map_err(db("starting a TTL refresh"))?;
    {
        let mut stmt = tx
            .prepare_cached(
                "UPDATE store SET expires_at = ?1 WHERE prefix = ?2 AND key = ?3 \
                 AND ttl_minutes = ?4 AND (expires_at IS NULL OR expires_at > ?5)",
            )
            .map_err(db("preparing a TTL refresh"))?;
        for r in refreshes {
            stmt.execute(params![
                plus_minutes(r.now, r.ttl).to_sql_text(),
                r.prefix,
                r.key,
                r.ttl,
                r.now.to_sql_text(),
            ])
            .map_err(db("refreshing a TTL"))?;
        }
    }
    tx.commit().map_err(db("committing a TTL refresh"))
}

/// Deletes the rows expired at `now`, and their vectors; returns how many rows.
pub(super) fn sweep(conn: &mut Connection, now: Timestamp) -> Result<usize, StoreError> {
    let now = now.to_sql_text();
    let tx = conn.savepoint().map_err(db("starting a TTL sweep"))?;
    if table_exists(&tx, "store_vectors").map_err(db("reading the schema"))? {
        tx.execute(
            "DELETE FROM store_vectors WHERE (prefix, key) IN (SELECT prefix, key FROM store \
             WHERE expires_at IS NOT NULL AND expires_at <= ?1)",
            [&now],
        )
        .map_err(db("sweeping expired vectors"))?;
    }
    let n = tx
        .execute(
            "DELETE FROM store WHERE expires_at IS NOT NULL AND expires_at <= ?1",
            [&now],
        )
        .map_err(db("sweeping expired items"))?;
    tx.commit().map_err(db("committing a TTL sweep"))?;
    Ok(n)
}
