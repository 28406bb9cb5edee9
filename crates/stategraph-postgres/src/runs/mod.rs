//! [`RunQueue`]: a durable queue of agent runs in PostgreSQL, shared by every Agent Server
//! process on one database.
//!
//! - Runs are rows of `stategraph_runs`, claimed with `SELECT … FOR UPDATE SKIP LOCKED`: the
//!   oldest pending run whose thread has no running run and no older pending run (FIFO per
//!   thread). A unique partial index on `(thread_id) WHERE status = 'running'` makes the
//!   database itself refuse a second running run on a thread, whichever process claims it.
//! - A claim is a lease (`worker`, `lease_until`) kept alive by heartbeats; a run whose lease
//!   ran out (its worker died) goes back to pending for another worker, or to `error` after
//!   its last attempt.
//! - Enqueueing applies LangGraph's multitask strategies under a per-thread transaction
//!   advisory lock, so concurrent enqueues of one thread take turns across processes.
//! - A run's stream events are rows of `stategraph_run_events`, numbered per run, appended
//!   only by the lease holder, readable from any sequence number (joiners, `Last-Event-ID`).
//! - Changes are announced with `NOTIFY` on a channel of the queue's schema (ids only);
//!   [`RunQueue::listen`] turns them into [`Notification`]s. Notifications are a wake-up, not
//!   the truth: after a lost connection, read the tables again.

mod config;
mod listen;

use std::collections::BTreeSet;
use std::fmt;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use deadpool_postgres::Pool;
use serde_json::Value as Json;
use stategraph_checkpoint::backend::Timeouts;
use stategraph_checkpoint::runs::{
    CLAIM_RETENTION, CancelAction, CancelOutcome, ClaimedRun, Enqueued, Expired, Lease, Multitask,
    NewRun, Notifications, QueueStats, RunEvent, RunFence, RunQueue, RunRow, RunStatus, check_id,
    duplicate, not_final, rejected,
};
use stategraph_checkpoint::{Error, Result};
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;

use crate::error::{BACKEND, db};

pub use config::RunQueueConfig;
pub use listen::Listener;

/// Seed of the transaction advisory-lock key of a thread (hashed with the schema and the
/// thread id), held while enqueueing a run of that thread.
const THREAD_LOCK_SEED: i64 = 0x5354_4752_5448_5244; // "STGRTHRD"

/// A durable [`RunQueue`] in PostgreSQL, shared by every process on the database; made by
/// [`RunQueueConfig::connect`]. Cheap to clone: clones share the pool.
///
/// - Runs are rows of `stategraph_runs`, claimed with `SELECT … FOR UPDATE SKIP LOCKED`: the
///   oldest pending run whose thread has no running run and no older pending run (FIFO per
///   thread). A unique partial index on `(thread_id) WHERE status = 'running'` makes the
///   database itself refuse a second running run on a thread, whichever process claims it.
/// - A claim is a lease (`worker`, `lease_until`) kept alive by [`heartbeat`](Self::heartbeat)s;
///   a run whose lease ran out (its worker died) goes back to pending for another worker, or
///   to `error` after its last attempt ([`requeue_expired`](Self::requeue_expired)).
/// - [`enqueue`](Self::enqueue) applies LangGraph's multitask strategies under a per-thread
///   transaction advisory lock, so concurrent enqueues of one thread take turns across
///   processes.
/// - A run's stream events are rows of `stategraph_run_events`, numbered per run, appended
///   only by the lease holder, readable from any sequence number (joiners, `Last-Event-ID`).
/// - Changes are announced with `NOTIFY` on a channel of the queue's schema (ids only);
///   [`listen`](Self::listen) turns them into [`Notification`](stategraph_checkpoint::runs::Notification)s. Notifications are a wake-up,
///   not the truth: after a lost connection, read the tables again.
///
/// - [`fence`](RunQueue::fence) gives a run's lease as a condition that a
///   [`PostgresSaver`](crate::PostgresSaver) on the same database checks in each of the
///   run's checkpoint writes (fencing): a worker that stalled past its lease cannot write
///   after another took the run over.
/// - [`purge_finished`](RunQueue::purge_finished) deletes finished runs, oldest first, in
///   bounded batches.
///
/// Worker names identify a lease holder: give each executing task its own (say, host, process
/// id and a counter), never two tasks one name.
#[derive(Clone)]
pub struct PostgresRunQueue {
    pool: Pool,
    /// For the listener's dedicated connection.
    pg: tokio_postgres::Config,
    /// Where it connects, password removed, for error messages.
    target: String,
    timeouts: Timeouts,
    lease: Duration,
    max_attempts: i32,
    /// The `NOTIFY` channel of the queue's schema.
    channel: String,
    /// The queue's table of runs, qualified by its schema (for fences).
    relation: String,
    /// The database as its server identifies it (for fences).
    database: String,
}

impl fmt::Debug for PostgresRunQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresRunQueue")
            .field("target", &self.target)
            .field("channel", &self.channel)
            .field("lease", &self.lease)
            .field("max_attempts", &self.max_attempts)
            .finish_non_exhaustive()
    }
}

/// The columns of a [`RunRow`], in order.
const ROW_COLUMNS: &str = "run_id, thread_id, status, payload, seq, attempt, max_attempts, \
    worker, lease_until, cancel, events, error, created_at, updated_at";

/// `json_build_object` arguments of a `finished` notification for the row in scope.
const FINISHED: &str = "json_build_object('kind', 'finished', 'run_id', run_id, 'status', status)";

impl PostgresRunQueue {
    /// Connects to the database a `postgres://` URL names and creates or upgrades the queue's
    /// tables: shorthand for
    /// [`RunQueueConfig::from_url`]`(url)?.`[`connect`](RunQueueConfig::connect)`()`.
    pub async fn connect(url: &str) -> Result<Self> {
        RunQueueConfig::from_url(url)?.connect().await
    }

    /// The `NOTIFY` channel of this queue (`stategraph_runs_` and a hash of the schema).
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// The lease in milliseconds, for SQL.
    fn lease_ms(&self) -> i64 {
        i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX)
    }

    /// A pooled connection; one the driver already knows to be closed is dropped and
    /// replaced.
    async fn client(&self) -> Result<deadpool_postgres::Object> {
        crate::error::pooled(&self.pool, &self.timeouts, &self.target, "runs").await
    }

    /// Runs one operation within the statement limit.
    async fn timed<T>(
        &self,
        operation: &str,
        work: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        self.timeouts.statement(BACKEND, operation, work).await
    }

    async fn enqueue_once(&self, run: &NewRun) -> Result<Enqueued> {
        const OP: &str = "enqueuing a run";
        let mut client = self.client().await?;
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
                let end_pending = match action {
                    CancelAction::Interrupt => format!(
                        "UPDATE stategraph_runs SET status = 'interrupted', updated_at = now() \
                         WHERE thread_id = $1 AND status = 'pending' \
                         RETURNING run_id, pg_notify($2, {FINISHED}::text)"
                    ),
                    CancelAction::Rollback => "DELETE FROM stategraph_runs \
                         WHERE thread_id = $1 AND status = 'pending' \
                         RETURNING run_id, pg_notify($2, json_build_object('kind', 'finished', \
                         'run_id', run_id, 'status', NULL)::text)"
                        .to_owned(),
                };
                let rows = tx
                    .query_typed(
                        &end_pending,
                        &[(&run.thread_id, Type::TEXT), (&self.channel, Type::TEXT)],
                    )
                    .await
                    .map_err(db("ending the thread's pending runs"))?;
                done.ended = ids(&rows, "ending the thread's pending runs")?;
                let action_name = action.as_str();
                let rows = tx
                    .query_typed(
                        "UPDATE stategraph_runs SET cancel = $3, updated_at = now() \
                         WHERE thread_id = $1 AND status = 'running' \
                         RETURNING run_id, pg_notify($2, json_build_object('kind', 'cancel', \
                         'run_id', run_id, 'action', $3::text)::text)",
                        &[
                            (&run.thread_id, Type::TEXT),
                            (&self.channel, Type::TEXT),
                            (&action_name, Type::TEXT),
                        ],
                    )
                    .await
                    .map_err(db("signalling the thread's running run"))?;
                done.signalled = ids(&rows, "signalling the thread's running run")?;
            }
        }
        // Claimed at once for `claim_for` when nothing else of the thread is pending or
        // running (under the thread's lock; no claim can take a run of a thread with none).
        let claim_for = match &run.claim_for {
            Some(worker) => {
                let busy = tx
                    .query_typed(
                        "SELECT 1 FROM stategraph_runs \
                         WHERE thread_id = $1 AND status IN ('pending', 'running') LIMIT 1",
                        &[(&run.thread_id, Type::TEXT)],
                    )
                    .await
                    .map_err(db("reading the thread's runs"))?;
                busy.is_empty().then_some(worker.as_str())
            }
            None => None,
        };
        let inserted = tx
            .query_typed(
                "INSERT INTO stategraph_runs \
                   (run_id, thread_id, status, payload, max_attempts, worker, lease_until, attempt) \
                 VALUES ($1, $2, CASE WHEN $6::text IS NULL THEN 'pending' ELSE 'running' END, \
                   $3, $4, $6, CASE WHEN $6::text IS NULL THEN NULL \
                     ELSE now() + $7::bigint * interval '1 millisecond' END, \
                   CASE WHEN $6::text IS NULL THEN 0 ELSE 1 END) \
                 RETURNING attempt, CASE WHEN $6::text IS NULL THEN pg_notify($5, \
                   json_build_object('kind', 'enqueued', 'run_id', run_id, \
                   'thread_id', thread_id)::text) END",
                &[
                    (&run.run_id, Type::TEXT),
                    (&run.thread_id, Type::TEXT),
                    (&run.payload, Type::JSONB),
                    (&self.max_attempts, Type::INT4),
                    (&self.channel, Type::TEXT),
                    (&claim_for, Type::TEXT),
                    (&self.lease_ms(), Type::INT8),
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
        tx.commit()
            .await
            .map_err(db("committing an enqueued run"))?;
        Ok(done)
    }

    /// Claims the oldest pending run that is next on its thread (`only`: if it is that run)
    /// for `worker`.
    async fn claim_next(&self, worker: &str, only: Option<&str>) -> Result<Option<ClaimedRun>> {
        const OP: &str = "claiming a run";
        self.timed(OP, async {
            let client = self.client().await?;
            let rows = client
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
                       attempt = r.attempt + 1, cancel = NULL, updated_at = now() \
                     FROM next WHERE r.run_id = next.run_id AND r.status = 'pending' \
                     RETURNING r.run_id, r.thread_id, r.payload, r.attempt",
                    &[
                        (&worker, Type::TEXT),
                        (&self.lease_ms(), Type::INT8),
                        (&only, Type::TEXT),
                    ],
                )
                .await;
            let rows = match rows {
                // Another claim made the thread's run running first: nothing this time.
                Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => return Ok(None),
                other => other.map_err(db(OP))?,
            };
            let Some(row) = rows.first() else {
                return Ok(None);
            };
            Ok(Some(ClaimedRun::new(
                get::<String>(row, 0, OP)?,
                get::<String>(row, 1, OP)?,
                get(row, 2, OP)?,
                count(get(row, 3, OP)?),
            )))
        })
        .await
    }

    /// A listener on a connection of its own (not from the pool) for the queue's
    /// notifications: runs enqueued, requeued and finished, stop requests, events.
    pub async fn listen(&self) -> Result<Listener> {
        listen::Listener::connect(self).await
    }
}

#[async_trait]
impl RunQueue for PostgresRunQueue {
    fn lease(&self) -> Duration {
        self.lease
    }

    /// Enqueues a run (see [`RunQueue::enqueue`]) in one transaction holding the thread's
    /// advisory lock, so concurrent enqueues of one thread (from any process) take turns.
    async fn enqueue(&self, run: NewRun) -> Result<Enqueued> {
        run.check()?;
        self.timed("enqueuing a run", self.enqueue_once(&run)).await
    }

    /// Claims the next run for `worker`: the oldest pending run whose thread has no running
    /// run and no older pending run (FIFO per thread), skipping runs other claims are taking.
    /// It becomes `running` with `worker`'s lease; `None` when there is nothing to claim now
    /// (including when another process claimed the thread's run at the same moment).
    async fn claim(&self, worker: &str) -> Result<Option<ClaimedRun>> {
        self.claim_next(worker, None).await
    }

    async fn claim_run(&self, run_id: &str, worker: &str) -> Result<Option<ClaimedRun>> {
        self.claim_next(worker, Some(run_id)).await
    }

    /// Extends `worker`'s lease on a running run by the configured lease, if it still holds
    /// it, and reports a stop request made for the run. A lease that is not held (it ran out
    /// and the run was requeued or taken over, or the run finished) is not extended; one that
    /// ran out but was not taken back yet is (nobody else has the run). Lease times are the
    /// database server's clock, so workers' clocks do not matter.
    async fn heartbeat(&self, run_id: &str, worker: &str) -> Result<Lease> {
        const OP: &str = "renewing a run's lease";
        self.timed(OP, async {
            let client = self.client().await?;
            let rows = client
                .query_typed(
                    "UPDATE stategraph_runs \
                     SET lease_until = now() + $3::bigint * interval '1 millisecond', \
                       updated_at = now() \
                     WHERE run_id = $1 AND worker = $2 AND status = 'running' \
                     RETURNING cancel",
                    &[
                        (&run_id, Type::TEXT),
                        (&worker, Type::TEXT),
                        (&self.lease_ms(), Type::INT8),
                    ],
                )
                .await
                .map_err(db(OP))?;
            let Some(row) = rows.first() else {
                return Ok(Lease::lost());
            };
            let cancel: Option<String> = get(row, 0, OP)?;
            Ok(Lease::held(cancel.as_deref().and_then(CancelAction::parse)))
        })
        .await
    }

    /// Ends a running run `worker` holds with a final `status` (and an error, if any); `false`
    /// when the worker no longer holds it (nothing changes then). A status that is not final
    /// (`pending`, `running`) is `Error::InvalidInput`.
    async fn finish(
        &self,
        run_id: &str,
        worker: &str,
        status: RunStatus,
        error: Option<&Json>,
    ) -> Result<bool> {
        const OP: &str = "finishing a run";
        if !status.is_final() {
            return Err(not_final(status));
        }
        self.timed(OP, async {
            let client = self.client().await?;
            let rows = client
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
                        (&self.channel, Type::TEXT),
                    ],
                )
                .await
                .map_err(db(OP))?;
            Ok(!rows.is_empty())
        })
        .await
    }

    /// Takes back running runs whose lease ran out (their worker died or stalled): each goes
    /// back to `pending` for another worker (keeping its place in its thread's queue), to
    /// `error` if that was its last attempt, or to `interrupted` if it had been asked to stop.
    /// Each change is announced. Call it periodically from any process.
    async fn requeue_expired(&self) -> Result<Vec<Expired>> {
        const OP: &str = "requeuing runs whose lease ran out";
        self.timed(OP, async {
            let client = self.client().await?;
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
                    &[(&self.channel, Type::TEXT)],
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

    /// Asks a run to stop: a pending run ends at once (`interrupted`, or deleted for a
    /// rollback); a running one gets its `cancel` set and a notification, and its worker
    /// stops it (it sees the request in its next heartbeat, or in the notification).
    async fn request_cancel(&self, run_id: &str, action: CancelAction) -> Result<CancelOutcome> {
        const OP: &str = "cancelling a run";
        self.timed(OP, async {
            let client = self.client().await?;
            let end_pending = match action {
                CancelAction::Interrupt => format!(
                    "UPDATE stategraph_runs SET status = 'interrupted', updated_at = now() \
                     WHERE run_id = $1 AND status = 'pending' \
                     RETURNING pg_notify($2, {FINISHED}::text)"
                ),
                CancelAction::Rollback => "DELETE FROM stategraph_runs \
                     WHERE run_id = $1 AND status = 'pending' \
                     RETURNING pg_notify($2, json_build_object('kind', 'finished', \
                     'run_id', run_id, 'status', NULL)::text)"
                    .to_owned(),
            };
            let action_name = action.as_str();
            // A run can move between the statements (claimed, requeued): look again.
            for _ in 0..5 {
                let ended = client
                    .query_typed(
                        &end_pending,
                        &[(&run_id, Type::TEXT), (&self.channel, Type::TEXT)],
                    )
                    .await
                    .map_err(db(OP))?;
                if !ended.is_empty() {
                    return Ok(CancelOutcome::Ended);
                }
                let signalled = client
                    .query_typed(
                        "UPDATE stategraph_runs SET cancel = $3, updated_at = now() \
                         WHERE run_id = $1 AND status = 'running' \
                         RETURNING pg_notify($2, json_build_object('kind', 'cancel', \
                         'run_id', run_id, 'action', $3::text)::text)",
                        &[
                            (&run_id, Type::TEXT),
                            (&self.channel, Type::TEXT),
                            (&action_name, Type::TEXT),
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

    /// Appends events in one statement (one notification, with the last number).
    async fn append_events(
        &self,
        run_id: &str,
        worker: &str,
        events: &[(String, Json)],
    ) -> Result<Option<i64>> {
        const OP: &str = "appending run events";
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        let data: Vec<&Json> = events.iter().map(|(_, d)| d).collect();
        let n = i64::try_from(events.len()).unwrap_or(i64::MAX);
        self.timed(OP, async {
            let client = self.client().await?;
            let rows = client
                .query_typed(
                    "WITH r AS ( \
                       UPDATE stategraph_runs SET events = events + $6 \
                       WHERE run_id = $1 AND worker = $2 AND status = 'running' \
                       RETURNING run_id, events), \
                     ins AS ( \
                       INSERT INTO stategraph_run_events (run_id, seq, event, data) \
                       SELECT r.run_id, r.events - $6 + e.ord, e.event, e.data \
                       FROM r, unnest($3::text[], $4::jsonb[]) WITH ORDINALITY AS e(event, data, ord)) \
                     SELECT events, CASE WHEN $6 > 0 THEN pg_notify($5, json_build_object( \
                       'kind', 'event', 'run_id', run_id, 'seq', events)::text) END FROM r",
                    &[
                        (&run_id, Type::TEXT),
                        (&worker, Type::TEXT),
                        (&names, Type::TEXT_ARRAY),
                        (&data, Type::JSONB_ARRAY),
                        (&self.channel, Type::TEXT),
                        (&n, Type::INT8),
                    ],
                )
                .await
                .map_err(db(OP))?;
            rows.first().map(|row| get(row, 0, OP)).transpose()
        })
        .await
    }

    async fn busy_threads(&self) -> Result<BTreeSet<String>> {
        const OP: &str = "reading the busy threads";
        self.timed(OP, async {
            let client = self.client().await?;
            let rows = client
                .query_typed(
                    "SELECT DISTINCT thread_id FROM stategraph_runs \
                     WHERE status IN ('pending', 'running')",
                    &[],
                )
                .await
                .map_err(db(OP))?;
            rows.iter().map(|row| get(row, 0, OP)).collect()
        })
        .await
    }

    async fn stats(&self) -> Result<QueueStats> {
        const OP: &str = "counting the queue's runs";
        self.timed(OP, async {
            let client = self.client().await?;
            let row = client
                .query_one(
                    "SELECT count(*) FILTER (WHERE status = 'pending'), \
                            count(*) FILTER (WHERE status = 'running'), \
                            min(created_at) FILTER (WHERE status = 'pending') \
                     FROM stategraph_runs WHERE status IN ('pending', 'running')",
                    &[],
                )
                .await
                .map_err(db(OP))?;
            let pending: i64 = get(&row, 0, OP)?;
            let running: i64 = get(&row, 1, OP)?;
            let oldest: Option<std::time::SystemTime> = get(&row, 2, OP)?;
            Ok(QueueStats::new(
                u64::try_from(pending).unwrap_or(0),
                u64::try_from(running).unwrap_or(0),
                oldest,
            ))
        })
        .await
    }

    async fn subscribe(&self) -> Result<Notifications> {
        Ok(self.listen().await?.into_notifications())
    }

    /// Up to `limit` events of a run after sequence number `after_seq` (0 for all), in order:
    /// for joining a run's stream, or resuming it after a `Last-Event-ID`.
    async fn events_after(
        &self,
        run_id: &str,
        after_seq: i64,
        limit: u32,
    ) -> Result<Vec<RunEvent>> {
        const OP: &str = "reading run events";
        self.timed(OP, async {
            let client = self.client().await?;
            let rows = client
                .query_typed(
                    "SELECT seq, event, data FROM stategraph_run_events \
                     WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                    &[
                        (&run_id, Type::TEXT),
                        (&after_seq, Type::INT8),
                        (&i64::from(limit), Type::INT8),
                    ],
                )
                .await
                .map_err(db(OP))?;
            rows.iter()
                .map(|row| {
                    Ok(RunEvent::new(
                        get(row, 0, OP)?,
                        get::<String>(row, 1, OP)?,
                        get(row, 2, OP)?,
                    ))
                })
                .collect()
        })
        .await
    }

    /// A run, or `None`.
    async fn get(&self, run_id: &str) -> Result<Option<RunRow>> {
        const OP: &str = "reading a run";
        self.timed(OP, async {
            let client = self.client().await?;
            let rows = client
                .query_typed(
                    &format!("SELECT {ROW_COLUMNS} FROM stategraph_runs WHERE run_id = $1"),
                    &[(&run_id, Type::TEXT)],
                )
                .await
                .map_err(db(OP))?;
            rows.first().map(run_row).transpose()
        })
        .await
    }

    /// The runs of a thread, in queue order.
    async fn runs_of_thread(&self, thread_id: &str) -> Result<Vec<RunRow>> {
        const OP: &str = "reading a thread's runs";
        self.timed(OP, async {
            let client = self.client().await?;
            let rows = client
                .query_typed(
                    &format!(
                        "SELECT {ROW_COLUMNS} FROM stategraph_runs WHERE thread_id = $1 \
                         ORDER BY seq"
                    ),
                    &[(&thread_id, Type::TEXT)],
                )
                .await
                .map_err(db(OP))?;
            rows.iter().map(run_row).collect()
        })
        .await
    }

    /// Takes `key` once: an insert that a unique key refuses to every later caller, in one
    /// statement; now and then (about one call in 256) keys past the retention are deleted
    /// in the same statement.
    async fn claim_once(&self, key: &str) -> Result<bool> {
        const OP: &str = "claiming a key once";
        check_id("claim key", key)?;
        let sweep = {
            use std::hash::{BuildHasher, BuildHasherDefault};
            let h = BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default();
            h.hash_one(key) % 256 == 0
        };
        let retention = CLAIM_RETENTION.as_secs_f64();
        self.timed(OP, async {
            let client = self.client().await?;
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

    /// Deletes the oldest finished runs that ended before `ended_before` (their events go
    /// with them, by the foreign key), `limit` at most, in one statement; rows another
    /// session holds are skipped, not waited for.
    /// A fence on this queue's `stategraph_runs` row of the run: a [`PostgresSaver`](crate::PostgresSaver)
    /// on the same database takes it.
    fn fence(&self, run_id: &str, worker: &str) -> Option<RunFence> {
        Some(RunFence::new(
            &self.database,
            &self.relation,
            run_id,
            worker,
        ))
    }

    async fn purge_finished(&self, ended_before: SystemTime, limit: u32) -> Result<u64> {
        const OP: &str = "purging finished runs";
        let before = ended_before;
        let limit = i64::from(limit);
        self.timed(OP, async {
            let client = self.client().await?;
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
    async fn delete(&self, run_id: &str) -> Result<bool> {
        const OP: &str = "deleting a run";
        self.timed(OP, async {
            let client = self.client().await?;
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
}

/// Column `i` of a row.
fn get<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a Row,
    i: usize,
    context: &'static str,
) -> Result<T> {
    row.try_get(i).map_err(db(context))
}

/// The first column of each row, as ids.
fn ids(rows: &[Row], context: &'static str) -> Result<Vec<String>> {
    rows.iter().map(|r| get(r, 0, context)).collect()
}

/// A non-negative count from an INTEGER column.
fn count(n: i32) -> u32 {
    u32::try_from(n).unwrap_or(0)
}

/// A stored status.
fn status_of(name: &str) -> Result<RunStatus> {
    RunStatus::parse(name).ok_or_else(|| Error::Backend {
        backend: BACKEND,
        message: format!("stategraph_runs holds an unknown run status `{name}`"),
        source: None,
    })
}

/// A row of [`ROW_COLUMNS`].
fn run_row(row: &Row) -> Result<RunRow> {
    const OP: &str = "reading a run";
    let cancel: Option<String> = get(row, 9, OP)?;
    let mut run = RunRow::new(
        get::<String>(row, 0, OP)?,
        get::<String>(row, 1, OP)?,
        status_of(&get::<String>(row, 2, OP)?)?,
        get(row, 3, OP)?,
        get(row, 4, OP)?,
    );
    run.attempt = count(get(row, 5, OP)?);
    run.max_attempts = count(get(row, 6, OP)?);
    run.worker = get(row, 7, OP)?;
    run.lease_until = get(row, 8, OP)?;
    run.cancel = cancel.as_deref().and_then(CancelAction::parse);
    run.events = get(row, 10, OP)?;
    run.error = get(row, 11, OP)?;
    run.created_at = get(row, 12, OP)?;
    run.updated_at = get(row, 13, OP)?;
    Ok(run)
}
