//! Upkeep: keys taken once, runs and threads deleted, events purged, threads' states set.

use super::*;
use stategraph_checkpoint::backend::Timed as _;

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

/// Deletes what `what` names (see [`RunQueue::delete`]) in one statement; how many runs it
/// deleted or purged.
pub(super) async fn delete(q: &PostgresRunQueue, what: Deletion<'_>) -> Result<u64> {
    match what {
        Deletion::Run(run_id) => {
            // Its events go with it, by the foreign key.
            let sql = "WITH runs AS (DELETE FROM stategraph_runs \
                   WHERE run_id = $1 AND status <> 'running' RETURNING 1) \
                 SELECT count(*) FROM runs";
            counted(q, "deleting a run", sql, run_id).await
        }
        Deletion::Thread(thread_id) => {
            let sql = "WITH runs AS (DELETE FROM stategraph_runs \
                   WHERE thread_id = $1 AND status <> 'running' RETURNING 1), \
                 state AS (DELETE FROM stategraph_run_threads WHERE thread_id = $1) \
                 SELECT count(*) FROM runs";
            counted(q, "deleting a thread", sql, thread_id).await
        }
        Deletion::EventsEndedBefore {
            ended_before,
            limit,
        } => purge(q, ended_before, limit).await,
        other => Err(Error::invalid(
            "deletion",
            format!("{other:?} is not one this queue knows"),
        )),
    }
}

/// Runs `sql` with `$1` = `id`: the count it returns.
async fn counted(q: &PostgresRunQueue, op: &'static str, sql: &str, id: &str) -> Result<u64> {
    q.timed(op, async {
        let client = q.client().await?;
        let rows = client
            .query_typed(sql, &[(&id, Type::TEXT)])
            .await
            .map_err(db(op))?;
        rows.first()
            .map(|row| get::<i64>(row, 0, op).map(count64))
            .transpose()
            .map(Option::unwrap_or_default)
    })
    .await
}

/// Purges the events of up to `limit` runs that ended before `ended_before`, oldest first,
/// in one statement: each run is marked as purged (its row stays, a thread's record), but
/// for a temporary run, which is deleted (its events go with it). Rows another session holds
/// are skipped, not waited for.
async fn purge(q: &PostgresRunQueue, ended_before: SystemTime, limit: u32) -> Result<u64> {
    const OP: &str = "purging the events of ended runs";
    let limit = i64::from(limit);
    q.timed(OP, async {
        let client = q.client().await?;
        let rows = client
            .query_typed(
                "WITH ended AS (SELECT run_id, temporary FROM stategraph_runs \
                    WHERE status NOT IN ('pending', 'running') AND NOT events_purged \
                    AND updated_at < $1 ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED), \
                 gone AS (DELETE FROM stategraph_runs r USING ended \
                    WHERE r.run_id = ended.run_id AND ended.temporary), \
                 marked AS (UPDATE stategraph_runs r SET events_purged = true FROM ended \
                    WHERE r.run_id = ended.run_id AND NOT ended.temporary), \
                 purged AS (DELETE FROM stategraph_run_events e USING ended \
                    WHERE e.run_id = ended.run_id AND NOT ended.temporary) \
                 SELECT count(*) FROM ended",
                &[(&ended_before, Type::TIMESTAMPTZ), (&limit, Type::INT8)],
            )
            .await
            .map_err(db(OP))?;
        rows.first()
            .map(|row| get::<i64>(row, 0, OP).map(count64))
            .transpose()
            .map(Option::unwrap_or_default)
    })
    .await
}

/// Sets a thread's state (see [`RunQueue::set_thread`]) in one statement; with `if_idle`,
/// only if no run of the thread is pending or running.
pub(super) async fn set_thread(
    q: &PostgresRunQueue,
    thread_id: &str,
    state: &ThreadState,
    if_idle: bool,
) -> Result<bool> {
    const OP: &str = "setting a thread's state";
    check_id("thread id", thread_id)?;
    q.timed(OP, async {
        let client = q.client().await?;
        let rows = client
            .query_typed(
                "INSERT INTO stategraph_run_threads AS t \
                   (thread_id, status, \"values\", interrupts, error, updated_at) \
                 SELECT $1, $2, $3, $4, $5, now() WHERE NOT $6 OR NOT EXISTS ( \
                   SELECT 1 FROM stategraph_runs \
                   WHERE thread_id = $1 AND status IN ('pending', 'running')) \
                 ON CONFLICT (thread_id) DO UPDATE SET status = EXCLUDED.status, \
                   \"values\" = EXCLUDED.\"values\", interrupts = EXCLUDED.interrupts, \
                   error = EXCLUDED.error, updated_at = EXCLUDED.updated_at \
                 RETURNING 1",
                &[
                    (&thread_id, Type::TEXT),
                    (&state.status.as_str(), Type::TEXT),
                    (&state.values, Type::JSON),
                    (&state.interrupts, Type::JSON),
                    (&state.error, Type::JSON),
                    (&if_idle, Type::BOOL),
                ],
            )
            .await
            .map_err(db(OP))?;
        Ok(!rows.is_empty())
    })
    .await
}
