//! Enqueueing a run (LangGraph's multitask strategies under the thread's lock) and asking
//! runs to stop.

use stategraph_checkpoint::backend::Timed as _;
use tokio_postgres::types::{Json as SqlJson, ToSql};

use super::*;

/// How many times an enqueue that collided with a claim is tried (see [`enqueue`]).
const TRIES: usize = 3;

/// Enqueues `run` (see [`RunQueue::enqueue`]). A run claimed as it is enqueued may collide
/// with a claim of a run of its thread that became due at that moment (the database refuses
/// the second running run): the enqueue is then tried again, and the run waits its turn.
pub(super) async fn enqueue(q: &PostgresRunQueue, run: &NewRun) -> Result<Enqueued> {
    const OP: &str = "enqueuing a run";
    q.timed(OP, async {
        let mut tries = 0;
        loop {
            tries += 1;
            match enqueue_once(q, run).await {
                Err(Retry::Collided) if tries < TRIES => {}
                Err(Retry::Collided) => {
                    return Err(Error::Conflict {
                        message: format!(
                            "run `{}` kept colliding with claims of its thread `{}`",
                            run.run_id, run.thread_id
                        ),
                    });
                }
                Err(Retry::Failed(e)) => return Err(e),
                Ok(done) => return Ok(done),
            }
        }
    })
    .await
}

/// Why one try of an enqueue failed.
enum Retry {
    /// The run, claimed as it was enqueued, collided with another claim of its thread.
    Collided,
    /// Anything else.
    Failed(Error),
}

impl From<Error> for Retry {
    fn from(e: Error) -> Self {
        Self::Failed(e)
    }
}

/// One try of [`enqueue`]: one transaction holding the thread's advisory lock. The
/// statements after the lock are sent with it, not after its answer (the connection
/// pipelines them): the database runs them in order, each with a snapshot taken once the lock
/// is held, so they see every enqueue of the thread that committed before.
async fn enqueue_once(q: &PostgresRunQueue, run: &NewRun) -> std::result::Result<Enqueued, Retry> {
    const OP: &str = "enqueuing a run";
    let mut client = q.client().await?;
    let tx = client.transaction().await.map_err(db(OP))?;
    let stop = run.multitask.cancel_action();
    let end_pending = stop.map(|action| end_pending_sql("thread_id", action));
    let action = stop.map(CancelAction::as_str);
    let signal_running = signal_running_sql("thread_id");
    let lock: [(&(dyn ToSql + Sync), Type); 2] = [
        (&run.thread_id, Type::TEXT),
        (&THREAD_LOCK_SEED, Type::INT8),
    ];
    let (lock, ended, signalled, inserted) = tokio::join!(
        biased;
        tx.query_typed(
            "SELECT pg_advisory_xact_lock(hashtextextended(\
             COALESCE(current_schema(), '') || '/' || $1, $2))",
            &lock,
        ),
        // Pending runs first: a claim racing with this makes its run running before the next
        // statement (a fresh snapshot) looks for running ones.
        async {
            match &end_pending {
                Some(sql) => {
                    tx.query_typed(sql, &[(&run.thread_id, Type::TEXT), (&q.channel, Type::TEXT)])
                        .await
                }
                None => Ok(Vec::new()),
            }
        },
        async {
            match action {
                Some(action) => {
                    tx.query_typed(
                        &signal_running,
                        &[
                            (&run.thread_id, Type::TEXT),
                            (&q.channel, Type::TEXT),
                            (&action, Type::TEXT),
                            (&"", Type::TEXT),
                        ],
                    )
                    .await
                }
                None => Ok(Vec::new()),
            }
        },
        insert(q, &tx, run),
    );
    lock.map_err(db("locking the thread to enqueue a run"))?;
    let mut done = Enqueued::default();
    done.ended = ids(&ended.map_err(db("ending the thread's pending runs"))?, OP)?;
    done.signalled = ids(
        &signalled.map_err(db("signalling the thread's running run"))?,
        OP,
    )?;
    let rows = match inserted {
        Err(e) if second_running(&e) => return Err(Retry::Collided),
        Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
            return Err(duplicate(&run.run_id).into());
        }
        other => other.map_err(db("inserting a run"))?,
    };
    let row = rows.first().ok_or_else(|| Error::Backend {
        backend: BACKEND,
        message: "inserting a run returned no row".into(),
        source: None,
    })?;
    if let Some(busy) = get::<Option<String>>(row, ROW_WIDTH + 1, OP)? {
        let status = status_of(&get::<String>(row, ROW_WIDTH + 2, OP)?)?;
        return Err(rejected(&run.thread_id, &run.run_id, &busy, status).into());
    }
    done.first = get(row, ROW_WIDTH, OP)?;
    done.claimed = run_row(row)?.filter(|r| r.status == RunStatus::Running);
    tx.commit()
        .await
        .map_err(db("committing an enqueued run"))?;
    Ok(done)
}

/// The statement that inserts the run, applying `reject` (nothing is inserted on a busy
/// thread: the busy run is returned instead). Whether the run may start now is decided in
/// the same statement (under the thread's lock): it is due (no delay), and its thread has no
/// running run and no due pending run. It is then claimed at once for `claim_for`, and
/// otherwise its notification says a worker may claim it. Returns the inserted run's
/// [`ROW_COLUMNS`], whether nothing else of the thread was pending or running, and the busy
/// run's id and status, if the run was rejected.
async fn insert(
    q: &PostgresRunQueue,
    tx: &tokio_postgres::Transaction<'_>,
    run: &NewRun,
) -> std::result::Result<Vec<Row>, tokio_postgres::Error> {
    let (metadata, kwargs) = (SqlJson(&run.metadata), SqlJson(&run.kwargs));
    let delay_us = i64::try_from(run.delay.as_micros()).unwrap_or(i64::MAX);
    let reject = run.multitask == Multitask::Reject;
    tx.query_typed(
        &format!(
            "WITH busy AS ( \
               SELECT run_id, status FROM stategraph_runs \
               WHERE $13 AND thread_id = $2 AND status IN ('pending', 'running') \
               ORDER BY status = 'running' DESC, seq LIMIT 1), \
             thread AS (SELECT \
               NOT EXISTS (SELECT 1 FROM stategraph_runs \
                 WHERE thread_id = $2 AND status IN ('pending', 'running')) AS idle, \
               $12 = 0 AND NOT EXISTS (SELECT 1 FROM stategraph_runs WHERE thread_id = $2 \
                 AND (status = 'running' OR (status = 'pending' AND created_at <= now()))) \
                 AS free), \
             inserted AS (INSERT INTO stategraph_runs (run_id, thread_id, assistant_id, status, \
                 metadata, kwargs, multitask, temporary, max_attempts, worker, lease_until, \
                 attempt, created_at, updated_at) \
               SELECT $1, $2, $3, CASE WHEN c.claim THEN 'running' ELSE 'pending' END, \
                 $4, $5, $7, $8, $9, CASE WHEN c.claim THEN $6 END, \
                 CASE WHEN c.claim THEN now() + $11::bigint * interval '1 millisecond' END, \
                 CASE WHEN c.claim THEN 1 ELSE 0 END, \
                 now() + $12::bigint * interval '1 microsecond', now() \
               FROM (SELECT free AND $6::text IS NOT NULL AS claim FROM thread) c \
               WHERE NOT EXISTS (SELECT 1 FROM busy) \
               RETURNING {ROW_COLUMNS}) \
             SELECT {columns}, thread.idle, busy.run_id, busy.status, \
               CASE WHEN inserted.run_id IS NOT NULL THEN pg_notify($10, json_build_object( \
                 'kind', 'enqueued', 'run_id', inserted.run_id, \
                 'thread_id', inserted.thread_id, \
                 'claimable', thread.free AND inserted.status = 'pending')::text) END \
             FROM thread LEFT JOIN inserted ON true LEFT JOIN busy ON true",
            columns = columns_of("inserted"),
        ),
        &[
            (&run.run_id, Type::TEXT),
            (&run.thread_id, Type::TEXT),
            (&run.assistant_id, Type::TEXT),
            (&metadata, Type::JSON),
            (&kwargs, Type::JSON),
            (&run.claim_for, Type::TEXT),
            (&run.multitask.as_str(), Type::TEXT),
            (&run.temporary, Type::BOOL),
            (&q.max_attempts, Type::INT4),
            (&q.channel, Type::TEXT),
            (&q.lease_ms(), Type::INT8),
            (&delay_us, Type::INT8),
            (&reject, Type::BOOL),
        ],
    )
    .await
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
