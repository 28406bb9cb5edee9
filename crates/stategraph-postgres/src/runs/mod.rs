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

use std::fmt;
use std::time::{Duration, SystemTime};

use deadpool_postgres::Pool;
use serde_json::Value as Json;
use stategraph_checkpoint::backend::Timeouts;
use stategraph_checkpoint::{Error, Result};
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;

use crate::error::{BACKEND, db};

pub use config::RunQueueConfig;
pub use listen::{Listener, Notification};

/// Seed of the transaction advisory-lock key of a thread (hashed with the schema and the
/// thread id), held while enqueueing a run of that thread.
const THREAD_LOCK_SEED: i64 = 0x5354_4752_5448_5244; // "STGRTHRD"

/// The longest run or thread id accepted, in bytes (ids travel in `NOTIFY` payloads, which
/// PostgreSQL limits to 8000 bytes).
const MAX_ID_LEN: usize = 1024;

/// What enqueueing a run does when its thread already has a pending or running run
/// (LangGraph's `multitask_strategy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Multitask {
    /// Refuse the new run: an `Error::Conflict` naming the thread and its busy run.
    Reject,
    /// Queue the new run behind the thread's others (FIFO per thread).
    Enqueue,
    /// End the thread's pending runs (status `interrupted`), ask its running run to stop
    /// (its cancel becomes [`CancelAction::Interrupt`]), and queue the new run.
    Interrupt,
    /// Delete the thread's pending runs, ask its running run to stop and be rolled back (its
    /// cancel becomes [`CancelAction::Rollback`]), and queue the new run.
    Rollback,
}

impl Multitask {
    /// Its name in LangGraph's API (`reject`, `enqueue`, `interrupt`, `rollback`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reject => "reject",
            Self::Enqueue => "enqueue",
            Self::Interrupt => "interrupt",
            Self::Rollback => "rollback",
        }
    }

    /// The strategy of a LangGraph name, or `None`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "reject" => Some(Self::Reject),
            "enqueue" => Some(Self::Enqueue),
            "interrupt" => Some(Self::Interrupt),
            "rollback" => Some(Self::Rollback),
            _ => None,
        }
    }
}

/// How a run is asked to stop (LangGraph's cancel `action`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CancelAction {
    /// Stop the run; it ends `interrupted` and its checkpoints are kept.
    Interrupt,
    /// Stop the run and delete it with what it wrote.
    Rollback,
}

impl CancelAction {
    /// Its name in LangGraph's API and in the `cancel` column (`interrupt`, `rollback`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Interrupt => "interrupt",
            Self::Rollback => "rollback",
        }
    }

    /// The action of a name, or `None`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "interrupt" => Some(Self::Interrupt),
            "rollback" => Some(Self::Rollback),
            _ => None,
        }
    }
}

/// A run's status (LangGraph's run statuses).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RunStatus {
    /// Queued, waiting for a worker.
    Pending,
    /// Claimed by a worker holding its lease.
    Running,
    /// Finished without error.
    Success,
    /// Failed, or its lease ran out on its last attempt.
    Error,
    /// Ran out of time.
    Timeout,
    /// Stopped by a cancel request or a multitask strategy.
    Interrupted,
}

impl RunStatus {
    /// Its name in LangGraph's API and in the `status` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Success => "success",
            Self::Error => "error",
            Self::Timeout => "timeout",
            Self::Interrupted => "interrupted",
        }
    }

    /// The status of a name, or `None`.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "pending" => Self::Pending,
            "running" => Self::Running,
            "success" => Self::Success,
            "error" => Self::Error,
            "timeout" => Self::Timeout,
            "interrupted" => Self::Interrupted,
            _ => return None,
        })
    }

    /// Whether the run is over (neither pending nor running).
    pub fn is_final(self) -> bool {
        !matches!(self, Self::Pending | Self::Running)
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A run to enqueue.
#[derive(Clone, Debug, PartialEq)]
pub struct NewRun {
    /// Its id (unique in the queue; at most 1024 bytes).
    pub run_id: String,
    /// Its thread's id (at most 1024 bytes).
    pub thread_id: String,
    /// What the executor needs to run it (input, config, assistant…), stored as JSONB.
    pub payload: Json,
    /// What to do if the thread is busy.
    pub multitask: Multitask,
}

impl NewRun {
    /// A run of `thread_id` with LangGraph's default strategy, [`Multitask::Reject`].
    pub fn new(run_id: impl Into<String>, thread_id: impl Into<String>, payload: Json) -> Self {
        Self {
            run_id: run_id.into(),
            thread_id: thread_id.into(),
            payload,
            multitask: Multitask::Reject,
        }
    }

    /// With another multitask strategy.
    pub fn multitask(mut self, multitask: Multitask) -> Self {
        self.multitask = multitask;
        self
    }
}

/// What enqueueing did to the thread's other runs (for the server's own records).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Enqueued {
    /// Pending runs ended by the strategy: `interrupted` ([`Multitask::Interrupt`]) or
    /// deleted ([`Multitask::Rollback`]).
    pub ended: Vec<String>,
    /// Running runs asked to stop (their `cancel` is set; their workers see it).
    pub signalled: Vec<String>,
}

/// A run a worker claimed: it holds the lease until it finishes, stops heartbeating, or loses
/// it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ClaimedRun {
    /// The run's id.
    pub run_id: String,
    /// Its thread.
    pub thread_id: String,
    /// What was enqueued with it.
    pub payload: Json,
    /// Which claim this is: 1 the first time, more when a worker took it over after an
    /// earlier one's lease ran out (the thread may hold that attempt's checkpoints).
    pub attempt: u32,
}

/// The answer to a heartbeat.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Lease {
    /// Whether the worker still holds the run (its lease was extended); if not, it must stop
    /// without writing anything more.
    pub held: bool,
    /// A stop request for the run, if one was made (the fallback to the `NOTIFY`).
    pub cancel: Option<CancelAction>,
}

/// What [`RunQueue::request_cancel`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CancelOutcome {
    /// No such run.
    NotFound,
    /// The run was pending: it ended at once (`interrupted`, or deleted for a rollback).
    Ended,
    /// The run is running: its cancel is set, its worker stops it.
    Signalled,
    /// The run had already finished, with this status.
    AlreadyFinished(RunStatus),
}

/// One stream event of a run.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct RunEvent {
    /// Its number in the run: 1, 2, 3…
    pub seq: i64,
    /// Its name (`values`, `updates`, `messages`, …).
    pub event: String,
    /// Its data.
    pub data: Json,
}

/// A run whose lease ran out, as [`RunQueue::requeue_expired`] left it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Expired {
    /// The run.
    pub run_id: String,
    /// Its thread.
    pub thread_id: String,
    /// `pending` (another worker may claim it), `error` (that was its last attempt) or
    /// `interrupted` (it had been asked to stop).
    pub status: RunStatus,
}

/// A run as stored.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct RunRow {
    /// Its id.
    pub run_id: String,
    /// Its thread.
    pub thread_id: String,
    /// Its status.
    pub status: RunStatus,
    /// What was enqueued with it.
    pub payload: Json,
    /// Its place in the queue (increasing with enqueue order).
    pub seq: i64,
    /// How many times it was claimed.
    pub attempt: u32,
    /// How many claims it gets.
    pub max_attempts: u32,
    /// The worker that claimed it last.
    pub worker: Option<String>,
    /// Until when that worker's lease runs (while running).
    pub lease_until: Option<SystemTime>,
    /// A stop request, if one was made while it ran.
    pub cancel: Option<CancelAction>,
    /// How many events it has.
    pub events: i64,
    /// The error it finished with, if any.
    pub error: Option<Json>,
    /// When it was enqueued.
    pub created_at: SystemTime,
    /// When it last changed.
    pub updated_at: SystemTime,
}

/// A durable queue of runs in PostgreSQL, shared by every process on the database; made by
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
///   [`listen`](Self::listen) turns them into [`Notification`]s. Notifications are a wake-up,
///   not the truth: after a lost connection, read the tables again.
///
/// Worker names identify a lease holder: give each executing task its own (say, host, process
/// id and a counter), never two tasks one name.
#[derive(Clone)]
pub struct RunQueue {
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
}

impl fmt::Debug for RunQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunQueue")
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

impl RunQueue {
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

    /// The lease a claim or heartbeat grants.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// The lease in milliseconds, for SQL.
    fn lease_ms(&self) -> i64 {
        i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX)
    }

    /// A pooled connection; one the driver already knows to be closed is dropped and
    /// replaced.
    async fn client(&self) -> Result<deadpool_postgres::Object> {
        crate::error::pooled(&self.pool, &self.timeouts, &self.target).await
    }

    /// Runs one operation within the statement limit.
    async fn timed<T>(
        &self,
        operation: &str,
        work: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        self.timeouts.statement(BACKEND, operation, work).await
    }

    /// Enqueues a run as `pending` and wakes idle workers, applying its multitask strategy to
    /// the thread's pending and running runs first — all in one transaction holding the
    /// thread's advisory lock, so concurrent enqueues of one thread (from any process) take
    /// turns.
    ///
    /// Errors: [`Multitask::Reject`] on a busy thread, or a run id already in the queue, is an
    /// `Error::Conflict` naming them; an empty or over-long id is `Error::InvalidInput`.
    pub async fn enqueue(&self, run: NewRun) -> Result<Enqueued> {
        check_id("run id", &run.run_id)?;
        check_id("thread id", &run.thread_id)?;
        self.timed("enqueuing a run", self.enqueue_once(&run)).await
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
                    let status: String = get(row, 1, "reading the thread's runs")?;
                    return Err(Error::Conflict {
                        message: format!(
                            "thread `{}` is busy with run `{busy}` ({status}); run `{}` was \
                             rejected (multitask strategy `reject`)",
                            run.thread_id, run.run_id
                        ),
                    });
                }
            }
            Multitask::Interrupt | Multitask::Rollback => {
                let action = if run.multitask == Multitask::Interrupt {
                    CancelAction::Interrupt
                } else {
                    CancelAction::Rollback
                };
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
        let inserted = tx
            .query_typed(
                "INSERT INTO stategraph_runs (run_id, thread_id, status, payload, max_attempts) \
                 VALUES ($1, $2, 'pending', $3, $4) \
                 RETURNING pg_notify($5, json_build_object('kind', 'enqueued', \
                 'run_id', run_id, 'thread_id', thread_id)::text)",
                &[
                    (&run.run_id, Type::TEXT),
                    (&run.thread_id, Type::TEXT),
                    (&run.payload, Type::JSONB),
                    (&self.max_attempts, Type::INT4),
                    (&self.channel, Type::TEXT),
                ],
            )
            .await;
        match inserted {
            Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                return Err(Error::Conflict {
                    message: format!("run `{}` is already in the queue", run.run_id),
                });
            }
            other => other.map_err(db("inserting a run"))?,
        };
        tx.commit()
            .await
            .map_err(db("committing an enqueued run"))?;
        Ok(done)
    }

    /// Claims the next run for `worker`: the oldest pending run whose thread has no running
    /// run and no older pending run (FIFO per thread), skipping runs other claims are taking.
    /// It becomes `running` with `worker`'s lease; `None` when there is nothing to claim now
    /// (including when another process claimed the thread's run at the same moment).
    pub async fn claim(&self, worker: &str) -> Result<Option<ClaimedRun>> {
        const OP: &str = "claiming a run";
        self.timed(OP, async {
            let client = self.client().await?;
            let rows = client
                .query_typed(
                    "WITH next AS ( \
                       SELECT r.run_id FROM stategraph_runs r \
                       WHERE r.status = 'pending' AND NOT EXISTS ( \
                         SELECT 1 FROM stategraph_runs o WHERE o.thread_id = r.thread_id \
                         AND (o.status = 'running' OR (o.status = 'pending' AND o.seq < r.seq))) \
                       ORDER BY r.seq LIMIT 1 \
                       FOR UPDATE OF r SKIP LOCKED) \
                     UPDATE stategraph_runs r SET status = 'running', worker = $1, \
                       lease_until = now() + $2::bigint * interval '1 millisecond', \
                       attempt = r.attempt + 1, cancel = NULL, updated_at = now() \
                     FROM next WHERE r.run_id = next.run_id AND r.status = 'pending' \
                     RETURNING r.run_id, r.thread_id, r.payload, r.attempt",
                    &[(&worker, Type::TEXT), (&self.lease_ms(), Type::INT8)],
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
            Ok(Some(ClaimedRun {
                run_id: get(row, 0, OP)?,
                thread_id: get(row, 1, OP)?,
                payload: get(row, 2, OP)?,
                attempt: count(get(row, 3, OP)?),
            }))
        })
        .await
    }

    /// Extends `worker`'s lease on a running run by the configured lease, if it still holds
    /// it, and reports a stop request made for the run. A lease that is not held (it ran out
    /// and the run was requeued or taken over, or the run finished) is not extended; one that
    /// ran out but was not taken back yet is (nobody else has the run). Lease times are the
    /// database server's clock, so workers' clocks do not matter.
    pub async fn heartbeat(&self, run_id: &str, worker: &str) -> Result<Lease> {
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
                return Ok(Lease {
                    held: false,
                    cancel: None,
                });
            };
            let cancel: Option<String> = get(row, 0, OP)?;
            Ok(Lease {
                held: true,
                cancel: cancel.as_deref().and_then(CancelAction::parse),
            })
        })
        .await
    }

    /// Ends a running run `worker` holds with a final `status` (and an error, if any); `false`
    /// when the worker no longer holds it (nothing changes then). A status that is not final
    /// (`pending`, `running`) is `Error::InvalidInput`.
    pub async fn finish(
        &self,
        run_id: &str,
        worker: &str,
        status: RunStatus,
        error: Option<&Json>,
    ) -> Result<bool> {
        const OP: &str = "finishing a run";
        if !status.is_final() {
            return Err(Error::invalid(
                "run status",
                format!("a run finishes with a final status, not `{status}`"),
            ));
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
    pub async fn requeue_expired(&self) -> Result<Vec<Expired>> {
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
                    Ok(Expired {
                        run_id: get(row, 0, OP)?,
                        thread_id: get(row, 1, OP)?,
                        status: status_of(&get::<String>(row, 2, OP)?)?,
                    })
                })
                .collect()
        })
        .await
    }

    /// Asks a run to stop: a pending run ends at once (`interrupted`, or deleted for a
    /// rollback); a running one gets its `cancel` set and a notification, and its worker
    /// stops it (it sees the request in its next heartbeat, or in the notification).
    pub async fn request_cancel(
        &self,
        run_id: &str,
        action: CancelAction,
    ) -> Result<CancelOutcome> {
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

    /// Appends a stream event to a running run `worker` holds, numbering it after the run's
    /// previous events (1, 2, 3…), and announces it. `None` when the worker no longer holds
    /// the run (nothing is written then).
    pub async fn append_event(
        &self,
        run_id: &str,
        worker: &str,
        event: &str,
        data: &Json,
    ) -> Result<Option<i64>> {
        const OP: &str = "appending a run event";
        self.timed(OP, async {
            let client = self.client().await?;
            let rows = client
                .query_typed(
                    "WITH r AS ( \
                       UPDATE stategraph_runs SET events = events + 1 \
                       WHERE run_id = $1 AND worker = $2 AND status = 'running' \
                       RETURNING run_id, events) \
                     INSERT INTO stategraph_run_events (run_id, seq, event, data) \
                     SELECT run_id, events, $3, $4 FROM r \
                     RETURNING seq, pg_notify($5, json_build_object('kind', 'event', \
                       'run_id', run_id, 'seq', seq)::text)",
                    &[
                        (&run_id, Type::TEXT),
                        (&worker, Type::TEXT),
                        (&event, Type::TEXT),
                        (data, Type::JSONB),
                        (&self.channel, Type::TEXT),
                    ],
                )
                .await
                .map_err(db(OP))?;
            rows.first().map(|row| get(row, 0, OP)).transpose()
        })
        .await
    }

    /// Up to `limit` events of a run after sequence number `after_seq` (0 for all), in order:
    /// for joining a run's stream, or resuming it after a `Last-Event-ID`.
    pub async fn events_after(
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
                    Ok(RunEvent {
                        seq: get(row, 0, OP)?,
                        event: get(row, 1, OP)?,
                        data: get(row, 2, OP)?,
                    })
                })
                .collect()
        })
        .await
    }

    /// A run, or `None`.
    pub async fn get(&self, run_id: &str) -> Result<Option<RunRow>> {
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
    pub async fn runs_of_thread(&self, thread_id: &str) -> Result<Vec<RunRow>> {
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

    /// Deletes a run that is not running, with its events (after a rollback, or to forget a
    /// finished run); `false` when there is no such run or it is running.
    pub async fn delete(&self, run_id: &str) -> Result<bool> {
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

    /// A listener on a connection of its own (not from the pool) for the queue's
    /// notifications: runs enqueued, requeued and finished, stop requests, events.
    pub async fn listen(&self) -> Result<Listener> {
        listen::Listener::connect(self).await
    }
}

/// Refuses an empty or over-long id.
fn check_id(what: &str, id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(Error::invalid(what, "is empty"));
    }
    if id.len() > MAX_ID_LEN {
        return Err(Error::invalid(
            what,
            format!(
                "is {} bytes long, at most {MAX_ID_LEN} are allowed",
                id.len()
            ),
        ));
    }
    Ok(())
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
    Ok(RunRow {
        run_id: get(row, 0, OP)?,
        thread_id: get(row, 1, OP)?,
        status: status_of(&get::<String>(row, 2, OP)?)?,
        payload: get(row, 3, OP)?,
        seq: get(row, 4, OP)?,
        attempt: count(get(row, 5, OP)?),
        max_attempts: count(get(row, 6, OP)?),
        worker: get(row, 7, OP)?,
        lease_until: get(row, 8, OP)?,
        cancel: cancel.as_deref().and_then(CancelAction::parse),
        events: get(row, 10, OP)?,
        error: get(row, 11, OP)?,
        created_at: get(row, 12, OP)?,
        updated_at: get(row, 13, OP)?,
    })
}
