//! Enqueueing a run (LangGraph's multitask strategies under the thread's lock) and asking
//! runs to stop.

use super::*;

pub(super) async fn enqueue_once(q: &PostgresRunQueue, run: &NewRun) -> Result<Enqueued> {
    const OP: &str = "enqueuing a run";
    let mut client = q.client().await?;
    let tx = client.transaction().await.map_err(db(OP))?;
    tx.query_typed(
        "SELECT pg_advisory_xact_lock(hashtextextended(\
         COALESCE(current_schema(), '') || '/' || $1, $2))",
        &[
            (&run.thread_id, Type::TEXT),
            (&THREAD_LOCK_SEED, Type::INT8),
        ],
    )
    .await
    .map_err(db("locking the thread to enqueue a run"))?;
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
    // Whether nothing else of the thread is pending or running (under the thread's lock; no
    // claim can take a run of a thread with none): the run is then claimed at once for
    // `claim_for`, the records that start the thread's work are written, and otherwise its
    // notification says a worker may claim it.
    let if_idle = run.records.as_ref().map_or(&[][..], |r| &r.if_idle[..]);
    let idle = tx
        .query_typed(
            "SELECT 1 FROM stategraph_runs \
             WHERE thread_id = $1 AND status IN ('pending', 'running') LIMIT 1",
            &[(&run.thread_id, Type::TEXT)],
        )
        .await
        .map_err(db("reading the thread's runs"))?
        .is_empty();
    let claim_for = run.claim_for.as_deref().filter(|_| idle);
    let inserted = tx
        .query_typed(
            "INSERT INTO stategraph_runs \
               (run_id, thread_id, status, payload, max_attempts, worker, lease_until, attempt) \
             VALUES ($1, $2, CASE WHEN $6::text IS NULL THEN 'pending' ELSE 'running' END, \
               $3, $4, $6, CASE WHEN $6::text IS NULL THEN NULL \
                 ELSE now() + $7::bigint * interval '1 millisecond' END, \
               CASE WHEN $6::text IS NULL THEN 0 ELSE 1 END) \
             RETURNING attempt, pg_notify($5, json_build_object('kind', 'enqueued', \
               'run_id', run_id, 'thread_id', thread_id, 'claimable', $8::bool)::text)",
            &[
                (&run.run_id, Type::TEXT),
                (&run.thread_id, Type::TEXT),
                (&run.payload, Type::JSONB),
                (&q.max_attempts, Type::INT4),
                (&q.channel, Type::TEXT),
                (&claim_for, Type::TEXT),
                (&q.lease_ms(), Type::INT8),
                (&(idle && claim_for.is_none()), Type::BOOL),
            ],
        )
        .await;
    let rows = match inserted {
        Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
            return Err(duplicate(&run.run_id));
        }
        other => other.map_err(db("inserting a run"))?,
    };
    if claim_for.is_some()
        && let Some(row) = rows.first()
    {
        done.claimed = Some(ClaimedRun::new(
            run.run_id.clone(),
            run.thread_id.clone(),
            run.payload.clone(),
            count(get(row, 0, "inserting a run")?),
        ));
    }
    if let Some(records) = &run.records {
        crate::store::records::write(&*tx, &records.at.relation, &records.writes)
            .await
            .map_err(db("writing a run's records"))?;
        if idle {
            crate::store::records::write(&*tx, &records.at.relation, if_idle)
                .await
                .map_err(db("writing a run's records"))?;
        }
    }
    tx.commit()
        .await
        .map_err(db("committing an enqueued run"))?;
    Ok(done)
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
