//! Enqueueing a run (LangGraph's multitask strategies under the thread's lock) and asking
//! runs to stop.

use super::*;
use stategraph_checkpoint::runs::RecordWrite;

pub(super) async fn enqueue_once(q: &PostgresRunQueue, run: &NewRun) -> Result<Enqueued> {
    const OP: &str = "enqueuing a run";
    let mut client = q.client().await?;
    let tx = client.transaction().await.map_err(db(OP))?;
    // The statements after the lock are sent with it, not after its answer (the connection
    // pipelines them): the database runs them in order, each with a snapshot taken once the
    // lock is held, so they see every enqueue of the thread that committed before.
    let lock = async {
        tx.query_typed(
            "SELECT pg_advisory_xact_lock(hashtextextended(\
             COALESCE(current_schema(), '') || '/' || $1, $2))",
            &[
                (&run.thread_id, Type::TEXT),
                (&THREAD_LOCK_SEED, Type::INT8),
            ],
        )
        .await
        .map_err(db("locking the thread to enqueue a run"))
    };
    let (_, (mut done, (attempt, idle))) = tokio::try_join!(lock, async {
        let done = stop_others(q, &tx, run).await?;
        let records = run.records.as_ref().map(|r| &r.writes[..]);
        let (inserted, ()) =
            tokio::try_join!(insert(q, &tx, run), write_records(&tx, run, records))?;
        Ok::<_, Error>((done, inserted))
    })?;
    if idle {
        // Nothing else of the thread was pending or running: the records that start the
        // thread's work.
        let if_idle = run.records.as_ref().map(|r| &r.if_idle[..]);
        write_records(&tx, run, if_idle).await?;
    }
    if let Some(attempt) = attempt {
        done.claimed = Some(ClaimedRun::new(
            run.run_id.clone(),
            run.thread_id.clone(),
            run.payload.clone(),
            attempt,
        ));
    }
    tx.commit()
        .await
        .map_err(db("committing an enqueued run"))?;
    Ok(done)
}

/// Writes `writes` (some of `run`'s records) where `run`'s records go, in the enqueue's
/// transaction; nothing when the run carries no records.
async fn write_records(
    tx: &tokio_postgres::Transaction<'_>,
    run: &NewRun,
    writes: Option<&[RecordWrite]>,
) -> Result<()> {
    let (Some(records), Some(writes)) = (&run.records, writes) else {
        return Ok(());
    };
    crate::store::records::write(tx, &records.at.relation, writes)
        .await
        .map_err(db("writing a run's records"))
}

/// What the run's multitask strategy does to the thread's other runs before it is inserted:
/// nothing (`enqueue`), refuse the run if another is pending or running (`reject`), or stop
/// them (`interrupt`, `rollback`).
async fn stop_others(
    q: &PostgresRunQueue,
    tx: &tokio_postgres::Transaction<'_>,
    run: &NewRun,
) -> Result<Enqueued> {
    let mut done = Enqueued::default();
    match run.multitask {
        Multitask::Enqueue => {}
        Multitask::Reject => {
            let rows = tx
                .query_typed(
                    "SELECT run_id, status FROM stategraph_runs \
                     WHERE thread_id = $1 AND status IN ('pending', 'running') \
                     ORDER BY status = 'running' DESC, seq LIMIT 1",
                    &[(&run.thread_id, Type::TEXT)],
                )
                .await
                .map_err(db("reading the thread's runs"))?;
            if let Some(row) = rows.first() {
                let busy: String = get(row, 0, "reading the thread's runs")?;
                let status = status_of(&get::<String>(row, 1, "reading the thread's runs")?)?;
                return Err(rejected(&run.thread_id, &run.run_id, &busy, status));
            }
        }
        Multitask::Interrupt | Multitask::Rollback => {
            let action = run.multitask.cancel_action().unwrap_or_default();
            // Pending runs first: a claim racing with this makes its run running before
            // the next statement (a fresh snapshot) looks for running ones.
            let end_pending = end_pending_sql("thread_id", action);
            let rows = tx
                .query_typed(
                    &end_pending,
                    &[(&run.thread_id, Type::TEXT), (&q.channel, Type::TEXT)],
                )
                .await
                .map_err(db("ending the thread's pending runs"))?;
            done.ended = ids(&rows, "ending the thread's pending runs")?;
            let action_name = action.as_str();
            let rows = tx
                .query_typed(
                    &signal_running_sql("thread_id"),
                    &[
                        (&run.thread_id, Type::TEXT),
                        (&q.channel, Type::TEXT),
                        (&action_name, Type::TEXT),
                        (&"", Type::TEXT),
                    ],
                )
                .await
                .map_err(db("signalling the thread's running run"))?;
            done.signalled = ids(&rows, "signalling the thread's running run")?;
        }
    }
    Ok(done)
}

/// Inserts the run. Whether nothing else of the thread is pending or running is decided in
/// the same statement (under the thread's lock; no claim can take a run of a thread with
/// none): the run is then claimed at once for `claim_for`, and otherwise its notification
/// says a worker may claim it. Returns the claimed run's attempt, and whether the thread was
/// idle.
async fn insert(
    q: &PostgresRunQueue,
    tx: &tokio_postgres::Transaction<'_>,
    run: &NewRun,
) -> Result<(Option<u32>, bool)> {
    let inserted = tx
        .query_typed(
            "WITH thread AS (SELECT NOT EXISTS (SELECT 1 FROM stategraph_runs \
               WHERE thread_id = $2 AND status IN ('pending', 'running')) AS idle), \
             run AS (INSERT INTO stategraph_runs \
               (run_id, thread_id, status, payload, max_attempts, worker, lease_until, attempt) \
               SELECT $1, $2, CASE WHEN claim THEN 'running' ELSE 'pending' END, $3, $4, \
                 CASE WHEN claim THEN $6 END, \
                 CASE WHEN claim THEN now() + $7::bigint * interval '1 millisecond' END, \
                 CASE WHEN claim THEN 1 ELSE 0 END \
               FROM (SELECT idle AND $6::text IS NOT NULL AS claim FROM thread) c \
               RETURNING run_id, thread_id, status, attempt) \
             SELECT run.status = 'running', run.attempt, thread.idle, \
               pg_notify($5, json_build_object('kind', 'enqueued', 'run_id', run.run_id, \
                 'thread_id', run.thread_id, \
                 'claimable', thread.idle AND run.status = 'pending')::text) \
             FROM run, thread",
            &[
                (&run.run_id, Type::TEXT),
                (&run.thread_id, Type::TEXT),
                (&run.payload, Type::JSONB),
                (&q.max_attempts, Type::INT4),
                (&q.channel, Type::TEXT),
                (&run.claim_for, Type::TEXT),
                (&q.lease_ms(), Type::INT8),
            ],
        )
        .await;
    let rows = match inserted {
        Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
            return Err(duplicate(&run.run_id));
        }
        other => other.map_err(db("inserting a run"))?,
    };
    const OP: &str = "inserting a run";
    let row = rows.first().ok_or_else(|| Error::Backend {
        backend: BACKEND,
        message: "inserting a run returned no row".into(),
        source: None,
    })?;
    let claimed: bool = get(row, 0, OP)?;
    let attempt: i32 = get(row, 1, OP)?;
    let idle: bool = get(row, 2, OP)?;
    Ok((claimed.then(|| count(attempt)), idle))
}

/// Asks a run to stop: a pending run ends at once (`interrupted`, or deleted for a
/// rollback); a running one gets its `cancel` set and a notification, and its worker
/// stops it (it sees the request in its next heartbeat, or in the notification).
pub(super) async fn request_cancel(
    q: &PostgresRunQueue,
    run_id: &str,
    action: CancelAction,
    reason: &str,
) -> Result<CancelOutcome> {
    let reason = stop_reason(reason);
    const OP: &str = "cancelling a run";
    q.timed(OP, async {
        let client = q.client().await?;
        let end_pending = end_pending_sql("run_id", action);
        let signal_running = signal_running_sql("run_id");
        let action_name = action.as_str();
        // A run can move between the statements (claimed, requeued): look again.
        for _ in 0..5 {
            let ended = client
                .query_typed(
                    &end_pending,
                    &[(&run_id, Type::TEXT), (&q.channel, Type::TEXT)],
                )
                .await
                .map_err(db(OP))?;
            if !ended.is_empty() {
                return Ok(CancelOutcome::Ended);
            }
            let signalled = client
                .query_typed(
                    &signal_running,
                    &[
                        (&run_id, Type::TEXT),
                        (&q.channel, Type::TEXT),
                        (&action_name, Type::TEXT),
                        (&reason, Type::TEXT),
                    ],
                )
                .await
                .map_err(db(OP))?;
            if !signalled.is_empty() {
                return Ok(CancelOutcome::Signalled);
            }
            let rows = client
                .query_typed(
                    "SELECT status FROM stategraph_runs WHERE run_id = $1",
                    &[(&run_id, Type::TEXT)],
                )
                .await
                .map_err(db(OP))?;
            let Some(row) = rows.first() else {
                return Ok(CancelOutcome::NotFound);
            };
            let status = status_of(&get::<String>(row, 0, OP)?)?;
            if status.is_final() {
                return Ok(CancelOutcome::AlreadyFinished(status));
            }
        }
        Err(Error::Conflict {
            message: format!("run `{run_id}` kept changing while being cancelled"),
        })
    })
    .await
}
