//! Claims and leases: the next run of a free thread, heartbeats, the end of a run, and the
//! runs whose lease ran out.

use super::*;

/// Claims the oldest pending run that is next on its thread (`only`: if it is that run)
/// for `worker`.
pub(super) async fn claim_next(
    q: &PostgresRunQueue,
    worker: &str,
    only: Option<&str>,
) -> Result<Option<ClaimedRun>> {
    const OP: &str = "claiming a run";
    q.timed(OP, async {
        let client = q.client().await?;
        match claim_on(&**client, q, worker, only).await {
            // Another claim made the thread's run running first: nothing this time.
            Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => Ok(None),
            other => claimed_of(other.map_err(db(OP))?),
        }
    })
    .await
}

/// The claim statement (see [`claim_next`]) on `client`; a unique violation means another
/// claim made the thread's run running first.
async fn claim_on(
    client: &impl tokio_postgres::GenericClient,
    q: &PostgresRunQueue,
    worker: &str,
    only: Option<&str>,
) -> std::result::Result<Vec<Row>, tokio_postgres::Error> {
    client
        .query_typed(
            "WITH next AS ( \
               SELECT r.run_id FROM stategraph_runs r \
               WHERE r.status = 'pending' AND ($3::text IS NULL OR r.run_id = $3) AND NOT EXISTS ( \
                 SELECT 1 FROM stategraph_runs o WHERE o.thread_id = r.thread_id \
                 AND (o.status = 'running' OR (o.status = 'pending' AND o.seq < r.seq))) \
               ORDER BY r.seq LIMIT 1 \
               FOR UPDATE OF r SKIP LOCKED) \
             UPDATE stategraph_runs r SET status = 'running', worker = $1, \
               lease_until = now() + $2::bigint * interval '1 millisecond', \
               attempt = r.attempt + 1, cancel = NULL, cancel_reason = NULL, \
               updated_at = now() \
             FROM next WHERE r.run_id = next.run_id AND r.status = 'pending' \
             RETURNING r.run_id, r.thread_id, r.payload, r.attempt",
            &[
                (&worker, Type::TEXT),
                (&q.lease_ms(), Type::INT8),
                (&only, Type::TEXT),
            ],
        )
        .await
}

/// The run a claim statement returned, if any.
fn claimed_of(rows: Vec<Row>) -> Result<Option<ClaimedRun>> {
    const OP: &str = "claiming a run";
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    Ok(Some(ClaimedRun::new(
        get::<String>(row, 0, OP)?,
        get::<String>(row, 1, OP)?,
        get(row, 2, OP)?,
        count(get(row, 3, OP)?),
    )))
}

/// Extends `worker`'s lease on a running run by the configured lease, if it still holds
/// it, and reports a stop request made for the run. A lease that is not held (it ran out
/// and the run was requeued or taken over, or the run finished) is not extended; one that
/// ran out but was not taken back yet is (nobody else has the run). Lease times are the
/// database server's clock, so workers' clocks do not matter.
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

/// Ends a running run `worker` holds with a final `status` (and an error, if any); `false`
/// when the worker no longer holds it (nothing changes then). A status that is not final
/// (`pending`, `running`) is `Error::InvalidInput`.
pub(super) async fn finish(
    q: &PostgresRunQueue,
    run_id: &str,
    worker: &str,
    status: RunStatus,
    error: Option<&Json>,
) -> Result<bool> {
    finish_with_events(q, run_id, worker, status, error, &[]).await
}

/// [`finish`] with the run's last events appended first, in one statement: the events are
/// numbered after the run's earlier ones and stored only if the run's row is ended by it.
pub(super) async fn finish_with_events(
    q: &PostgresRunQueue,
    run_id: &str,
    worker: &str,
    status: RunStatus,
    error: Option<&Json>,
    events: &[(String, Json)],
) -> Result<bool> {
    const OP: &str = "finishing a run";
    if !status.is_final() {
        return Err(not_final(status));
    }
    q.timed(OP, async {
        let client = q.client().await?;
        end_run(&**client, q, run_id, worker, status, error, events).await
    })
    .await
}

/// [`finish_with_events`] with `records` written in the same transaction, only if the run's
/// row is ended by it.
pub(super) async fn finish_with_records(
    q: &PostgresRunQueue,
    run_id: &str,
    worker: &str,
    status: RunStatus,
    error: Option<&Json>,
    events: &[(String, Json)],
    records: &RecordWrites,
) -> Result<bool> {
    const OP: &str = "finishing a run with its records";
    if !status.is_final() {
        return Err(not_final(status));
    }
    if records.is_empty() {
        return finish_with_events(q, run_id, worker, status, error, events).await;
    }
    records.check_writable_by(q)?;
    q.timed(OP, async {
        let mut client = q.client().await?;
        let tx = client.transaction().await.map_err(db(OP))?;
        if !end_run(&*tx, q, run_id, worker, status, error, events).await? {
            return Ok(false);
        }
        crate::store::records::write(&*tx, &records.at.relation, &records.writes)
            .await
            .map_err(db("writing a run's records"))?;
        tx.commit().await.map_err(db("committing a run's end"))?;
        Ok(true)
    })
    .await
}

/// Ends a run (with its last events and records, as [`finish_with_records`]) and claims the
/// worker's next run in one transaction. If the claim collides with another claiming the same
/// thread's run, the transaction is given up and the run ended alone (nothing claimed).
pub(super) async fn finish_and_claim(
    q: &PostgresRunQueue,
    end: &RunEnd<'_>,
) -> Result<(bool, Option<ClaimedRun>)> {
    const OP: &str = "finishing a run and claiming the next";
    if !end.status.is_final() {
        return Err(not_final(end.status));
    }
    let records = end.records.filter(|r| !r.is_empty());
    if let Some(records) = records {
        records.check_writable_by(q)?;
    }
    let (run_id, worker, status, error, events) =
        (end.run_id, end.worker, end.status, end.error, end.events);
    let tried = q
        .timed(OP, async {
            let mut client = q.client().await?;
            let tx = client.transaction().await.map_err(db(OP))?;
            let ended = end_run(&*tx, q, run_id, worker, status, error, events).await?;
            if ended && let Some(records) = records {
                crate::store::records::write(&*tx, &records.at.relation, &records.writes)
                    .await
                    .map_err(db("writing a run's records"))?;
            }
            match claim_on(&*tx, q, worker, None).await {
                Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => Ok(None),
                rows => {
                    let claimed = claimed_of(rows.map_err(db(OP))?)?;
                    tx.commit().await.map_err(db("committing a run's end"))?;
                    Ok(Some((ended, claimed)))
                }
            }
        })
        .await?;
    match tried {
        Some(done) => Ok(done),
        None => Ok((q.finish_run(*end).await?, None)),
    }
}

/// The statement that ends a run (with its last events, if any) on `client`; whether the
/// worker held it.
async fn end_run(
    client: &impl tokio_postgres::GenericClient,
    q: &PostgresRunQueue,
    run_id: &str,
    worker: &str,
    status: RunStatus,
    error: Option<&Json>,
    events: &[(String, Json)],
) -> Result<bool> {
    const OP: &str = "finishing a run";
    let rows = if events.is_empty() {
        client
            .query_typed(
                &format!(
                    "UPDATE stategraph_runs SET status = $3, error = $4, lease_until = NULL, \
                     updated_at = now() \
                     WHERE run_id = $1 AND worker = $2 AND status = 'running' \
                     RETURNING pg_notify($5, {FINISHED}::text)"
                ),
                &[
                    (&run_id, Type::TEXT),
                    (&worker, Type::TEXT),
                    (&status.as_str(), Type::TEXT),
                    (&error, Type::JSONB),
                    (&q.channel, Type::TEXT),
                ],
            )
            .await
    } else {
        let (names, data, n) = super::events::columns(events);
        client
            .query_typed(
                &format!(
                    "WITH r AS ( \
                       UPDATE stategraph_runs SET status = $7, error = $8, lease_until = NULL, \
                         events = events + $6, updated_at = now() \
                       WHERE run_id = $1 AND worker = $2 AND status = 'running' \
                       RETURNING run_id, status, events), \
                     {} \
                     SELECT pg_notify($5, {FINISHED}::text) FROM r",
                    super::events::INSERT_EVENTS
                ),
                &[
                    (&run_id, Type::TEXT),
                    (&worker, Type::TEXT),
                    (&names, Type::TEXT_ARRAY),
                    (&data, Type::JSONB_ARRAY),
                    (&q.channel, Type::TEXT),
                    (&n, Type::INT8),
                    (&status.as_str(), Type::TEXT),
                    (&error, Type::JSONB),
                ],
            )
            .await
    };
    Ok(!rows.map_err(db(OP))?.is_empty())
}

/// Takes back running runs whose lease ran out (their worker died or stalled): each goes
/// back to `pending` for another worker (keeping its place in its thread's queue), to
/// `error` if that was its last attempt, or to `interrupted` if it had been asked to stop.
/// Each change is announced. Call it periodically from any process.
pub(super) async fn requeue_expired(q: &PostgresRunQueue) -> Result<Vec<Expired>> {
    const OP: &str = "requeuing runs whose lease ran out";
    q.timed(OP, async {
        let client = q.client().await?;
        let rows = client
            .query_typed(
                "WITH expired AS ( \
                   SELECT run_id FROM stategraph_runs \
                   WHERE status = 'running' AND lease_until < now() \
                   FOR UPDATE SKIP LOCKED), \
                 changed AS ( \
                   UPDATE stategraph_runs r SET \
                     status = CASE WHEN r.cancel IS NOT NULL THEN 'interrupted' \
                       WHEN r.attempt >= r.max_attempts THEN 'error' ELSE 'pending' END, \
                     error = CASE WHEN r.cancel IS NULL AND r.attempt >= r.max_attempts \
                       THEN jsonb_build_object('error', 'LeaseExpired', 'message', \
                         format('the lease of attempt %s of %s ran out', \
                           r.attempt, r.max_attempts)) \
                       ELSE r.error END, \
                     lease_until = NULL, updated_at = now() \
                   FROM expired WHERE r.run_id = expired.run_id AND r.status = 'running' \
                   RETURNING r.run_id, r.thread_id, r.status) \
                 SELECT run_id, thread_id, status, pg_notify($1, CASE status \
                   WHEN 'pending' THEN json_build_object('kind', 'requeued', \
                     'run_id', run_id, 'thread_id', thread_id) \
                   ELSE json_build_object('kind', 'finished', 'run_id', run_id, \
                     'status', status) END::text) \
                 FROM changed",
                &[(&q.channel, Type::TEXT)],
            )
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
