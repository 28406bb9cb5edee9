//! Claims and leases: the next run of a free thread, heartbeats, and the runs whose lease ran
//! out.

use super::*;
use stategraph_checkpoint::backend::Timed as _;

/// Claims the oldest claimable run (`only`: if it is that run) for `worker`.
pub(super) async fn claim(
    q: &PostgresRunQueue,
    worker: &str,
    only: Option<&str>,
) -> Result<Option<RunRow>> {
    const OP: &str = "claiming a run";
    q.timed(OP, async {
        let client = q.client().await?;
        match claim_on(&**client, q, worker, only).await {
            // Another claim made the thread's run running first: nothing this time.
            Err(e) if second_running(&e) => Ok(None),
            other => Ok(run_rows(&other.map_err(db(OP))?)?.into_iter().next()),
        }
    })
    .await
}

/// The claim statement (see [`claim_ctes`]) on `client`; a violation of the one running run
/// per thread means another claim made the thread's run running first.
pub(super) async fn claim_on(
    client: &impl tokio_postgres::GenericClient,
    q: &PostgresRunQueue,
    worker: &str,
    only: Option<&str>,
) -> std::result::Result<Vec<Row>, tokio_postgres::Error> {
    let ctes = claim_ctes(&ClaimParams {
        worker: "$1",
        lease_ms: "$2",
        only: only.map(|_| "$3"),
        ending: None,
    });
    client
        .query_typed(
            &format!("WITH {ctes} SELECT {ROW_COLUMNS} FROM claimed"),
            &[
                (&worker, Type::TEXT),
                (&q.lease_ms(), Type::INT8),
                (&only, Type::TEXT),
            ],
        )
        .await
}

/// Extends `worker`'s lease on a running run, if it still holds it (see
/// [`RunQueue::heartbeat`]).
pub(super) async fn heartbeat(q: &PostgresRunQueue, run_id: &str, worker: &str) -> Result<Lease> {
    const OP: &str = "renewing a run's lease";
    q.timed(OP, async {
        let client = q.client().await?;
        let rows = client
            .query_typed(
                "UPDATE stategraph_runs \
                 SET lease_until = now() + $3::bigint * interval '1 millisecond', \
                   updated_at = now() \
                 WHERE run_id = $1 AND worker = $2 AND status = 'running' \
                 RETURNING cancel, cancel_reason",
                &[
                    (&run_id, Type::TEXT),
                    (&worker, Type::TEXT),
                    (&q.lease_ms(), Type::INT8),
                ],
            )
            .await
            .map_err(db(OP))?;
        let Some(row) = rows.first() else {
            return Ok(Lease::lost());
        };
        let cancel: Option<String> = get(row, 0, OP)?;
        let reason: Option<String> = get(row, 1, OP)?;
        Ok(Lease::held(cancel.as_deref().and_then(CancelAction::parse))
            .with_reason(reason.unwrap_or_default()))
    })
    .await
}

/// Takes back running runs whose lease ran out (see [`RunQueue::requeue_expired`]) in one
/// statement: each goes back to `pending` (keeping its place in its thread's queue), to
/// `interrupted` if it had been asked to stop, or to `error` if that was its last attempt —
/// its thread's state then becomes `error` too, with the same error, keeping its values and
/// interrupts. Each change is announced.
pub(super) async fn requeue_expired(q: &PostgresRunQueue) -> Result<Vec<Expired>> {
    const OP: &str = "requeuing runs whose lease ran out";
    let sql = format!(
        "WITH expired AS ( \
           SELECT run_id FROM stategraph_runs \
           WHERE status = 'running' AND lease_until < now() \
           FOR UPDATE SKIP LOCKED), \
         changed AS ( \
           UPDATE stategraph_runs r SET \
             status = CASE WHEN r.cancel IS NOT NULL THEN 'interrupted' \
               WHEN r.attempt >= r.max_attempts THEN 'error' ELSE 'pending' END, \
             error = CASE WHEN r.cancel IS NULL AND r.attempt >= r.max_attempts \
               THEN json_build_object('error', 'LeaseExpired', 'message', \
                 format('the lease of attempt %s of %s ran out', r.attempt, r.max_attempts)) \
               ELSE r.error END, \
             lease_until = NULL, updated_at = now() \
           FROM expired WHERE r.run_id = expired.run_id AND r.status = 'running' \
           RETURNING r.run_id, r.thread_id, r.status, r.error), \
         failed AS ( \
           INSERT INTO stategraph_run_threads AS t \
             (thread_id, status, \"values\", interrupts, error, updated_at) \
           SELECT thread_id, 'error', 'null', '{{}}', error, now() FROM changed \
           WHERE status = 'error' \
           ON CONFLICT (thread_id) DO UPDATE SET status = 'error', error = EXCLUDED.error, \
             updated_at = EXCLUDED.updated_at) \
         SELECT run_id, thread_id, status, pg_notify($1, CASE status \
           WHEN 'pending' THEN {REQUEUED} ELSE {} END) \
         FROM changed",
        finished("status")
    );
    q.timed(OP, async {
        let client = q.client().await?;
        let rows = client
            .query_typed(&sql, &[(&q.channel, Type::TEXT)])
            .await
            .map_err(db(OP))?;
        rows.iter()
            .map(|row| {
                Ok(Expired::new(
                    get::<String>(row, 0, OP)?,
                    get::<String>(row, 1, OP)?,
                    status_of(&get::<String>(row, 2, OP)?)?,
                ))
            })
            .collect()
    })
    .await
}
