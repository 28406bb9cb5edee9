//! Upkeep: keys taken once, finished runs purged, runs deleted.

use super::*;

/// Takes `key` once: an insert that a unique key refuses to every later caller, in one
/// statement; now and then (about one call in 256) keys past the retention are deleted
/// in the same statement.
pub(super) async fn claim_once(q: &PostgresRunQueue, key: &str) -> Result<bool> {
    const OP: &str = "claiming a key once";
    check_id("claim key", key)?;
    let sweep = {
        use std::hash::{BuildHasher, BuildHasherDefault};
        let h = BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default();
        h.hash_one(key) % 256 == 0
    };
    let retention = CLAIM_RETENTION.as_secs_f64();
    q.timed(OP, async {
        let client = q.client().await?;
        let rows = client
            .query_typed(
                "WITH swept AS (DELETE FROM stategraph_run_claims \
                    WHERE $2 AND claimed_at < now() - make_interval(secs => $3) \
                    AND key <> $1) \
                 INSERT INTO stategraph_run_claims (key) VALUES ($1) \
                 ON CONFLICT (key) DO NOTHING RETURNING key",
                &[
                    (&key, Type::TEXT),
                    (&sweep, Type::BOOL),
                    (&retention, Type::FLOAT8),
                ],
            )
            .await
            .map_err(db(OP))?;
        Ok(!rows.is_empty())
    })
    .await
}

pub(super) async fn purge_finished(
    q: &PostgresRunQueue,
    ended_before: SystemTime,
    limit: u32,
) -> Result<u64> {
    const OP: &str = "purging finished runs";
    let before = ended_before;
    let limit = i64::from(limit);
    q.timed(OP, async {
        let client = q.client().await?;
        client
            .execute_typed(
                "WITH doomed AS (SELECT run_id FROM stategraph_runs \
                    WHERE status NOT IN ('pending', 'running') AND updated_at < $1 \
                    ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED) \
                 DELETE FROM stategraph_runs r USING doomed d WHERE r.run_id = d.run_id",
                &[(&before, Type::TIMESTAMPTZ), (&limit, Type::INT8)],
            )
            .await
            .map_err(db(OP))
    })
    .await
}

/// Deletes a run that is not running, with its events (after a rollback, or to forget a
/// finished run); `false` when there is no such run or it is running.
pub(super) async fn delete(q: &PostgresRunQueue, run_id: &str) -> Result<bool> {
    const OP: &str = "deleting a run";
    q.timed(OP, async {
        let client = q.client().await?;
        let n = client
            .execute_typed(
                "DELETE FROM stategraph_runs WHERE run_id = $1 AND status <> 'running'",
                &[(&run_id, Type::TEXT)],
            )
            .await
            .map_err(db(OP))?;
        Ok(n > 0)
    })
    .await
}
