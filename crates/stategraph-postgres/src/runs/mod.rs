//! [`RunQueue`]: a durable queue of agent runs in PostgreSQL, shared by every Agent Server
//! process on one database.
//!
//! - Runs are rows of `stategraph_runs` holding LangGraph's run records in typed columns
//!   (assistant, metadata, arguments, strategy, output), claimed with `SELECT … FOR UPDATE
//!   SKIP LOCKED`: the oldest due pending run whose thread has no running run and no older due
//!   pending run (FIFO per thread). A unique partial index on `(thread_id) WHERE status =
//!   'running'` makes the database itself refuse a second running run on a thread, whichever
//!   process claims it.
//! - A claim is a lease (`worker`, `lease_until`) kept alive by heartbeats; a run whose lease
//!   ran out (its worker died) goes back to pending for another worker, or to `error` after
//!   its last attempt.
//! - Enqueueing applies LangGraph's multitask strategies under a per-thread transaction
//!   advisory lock, so concurrent enqueues of one thread take turns across processes.
//! - What a thread's last run left it with is a row of `stategraph_run_threads`, written in
//!   the statement that ends the run; a thread is busy while one of its runs is pending or
//!   running.
//! - A run's stream events are rows of `stategraph_run_events`, numbered per run, appended
//!   only by the lease holder, readable from any sequence number (joiners, `Last-Event-ID`).
//! - Changes are announced with `NOTIFY` on a channel of the queue's schema (ids only);
//!   [`PostgresRunQueue::listen`] turns them into [`Notification`](stategraph_runs::Notification)s.
//!   Notifications are a wake-up, not the truth: after a lost connection, read the tables
//!   again.

mod config;
mod enqueue;
mod events;
mod finish;
mod lease;
mod listen;
mod migrations;
mod read;
mod rows;
mod sql;
mod upkeep;

use std::fmt;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use deadpool_postgres::Pool;
use serde_json::Value as Json;
use stategraph_checkpoint::backend::Timeouts;
use stategraph_checkpoint::{Error, Result};
use stategraph_runs::{
    CLAIM_RETENTION, CancelAction, CancelOutcome, Deletion, Enqueued, Expired, Finished, Lease,
    Multitask, NewRun, Notifications, Object, OnceKeys, QueueStats, RunEnd, RunEvent, RunEvents,
    RunFence, RunQuery, RunQueue, RunRow, RunStatus, ThreadEnd, ThreadRow, ThreadState,
    ThreadStatus, check_id, duplicate, rejected,
};
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;

use crate::error::{BACKEND, db};

pub use config::RunQueueConfig;
pub use listen::Listener;
use rows::*;
use sql::*;

/// A durable [`RunQueue`] in PostgreSQL, shared by every process on the database; made by
/// [`RunQueueConfig::connect`]. Cheap to clone: clones share the pool.
///
/// - Runs are rows of `stategraph_runs` (LangGraph's run records, in typed columns), claimed
///   with `SELECT … FOR UPDATE SKIP LOCKED`: the oldest due pending run whose thread has no
///   running run and no older due pending run (FIFO per thread). A unique partial index on
///   `(thread_id) WHERE status = 'running'` makes the database itself refuse a second running
///   run on a thread, whichever process claims it.
/// - A claim is a lease (`worker`, `lease_until`, on the database's clock) kept alive by
///   [`heartbeat`](RunQueue::heartbeat)s; a run whose lease ran out (its worker died) goes back
///   to pending for another worker, or to `error` after its last attempt
///   ([`requeue_expired`](RunQueue::requeue_expired)).
/// - [`finish`](RunQueue::finish) ends a run with everything of its [`RunEnd`] — status,
///   error, output, last events, its thread's state, its deletion, the worker's next claim —
///   in one statement.
/// - [`enqueue`](RunQueue::enqueue) applies LangGraph's multitask strategies under a per-thread
///   transaction advisory lock, so concurrent enqueues of one thread take turns across
///   processes.
/// - A run's stream events are rows of `stategraph_run_events`, numbered per run, appended
///   only by the lease holder, readable from any sequence number (joiners, `Last-Event-ID`).
/// - Changes are announced with `NOTIFY` on a channel of the queue's schema (ids only);
///   [`listen`](Self::listen) turns them into
///   [`Notification`](stategraph_runs::Notification)s. Notifications are a
///   wake-up, not the truth: after a lost connection, read the tables again.
///
/// - [`fence`](RunQueue::fence) gives a run's lease as a condition that a
///   [`PostgresSaver`](crate::PostgresSaver) on the same database checks in each of the
///   run's checkpoint writes (fencing): a worker that stalled past its lease cannot write
///   after another took the run over.
/// - [`delete`](RunQueue::delete) with [`Deletion::EventsEndedBefore`] purges the events of
///   ended runs (and the rows of temporary ones), oldest first, in bounded batches.
///
/// Worker names identify a lease holder: give each executing task its own (say, host, process
/// id and a counter), never two tasks one name.
#[derive(Clone)]
pub struct PostgresRunQueue {
    pool: Pool,
    /// For the listener's dedicated connection (`None`: a database from a user's pool
    /// without them).
    pg: Option<tokio_postgres::Config>,
    /// Where it connects, password removed, for error messages.
    target: String,
    timeouts: Timeouts,
    lease: Duration,
    max_attempts: i32,
    /// The `NOTIFY` channel of the queue's schema.
    channel: String,
    /// The queue's table of runs, qualified by its schema (for fences).
    relation: String,
    /// The database handle it was built from (for fences).
    database: stategraph_runs::DatabaseId,
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

    /// A listener on a connection of its own (not from the pool) for the queue's
    /// notifications: runs enqueued, requeued and finished, stop requests, events.
    pub async fn listen(&self) -> Result<Listener> {
        listen::Listener::connect(self).await
    }
}

#[async_trait]
impl RunEvents for PostgresRunQueue {
    /// Appends events in one statement (one notification, with the last number).
    async fn append_events(
        &self,
        run_id: &str,
        worker: &str,
        events: &[(String, Json)],
    ) -> Result<Option<i64>> {
        events::append_events(self, run_id, worker, events).await
    }

    /// Up to `limit` events of a run after sequence number `after_seq` (0 for all), in order:
    /// for joining a run's stream, or resuming it after a `Last-Event-ID`.
    async fn events_after(
        &self,
        run_id: &str,
        after_seq: i64,
        limit: u32,
    ) -> Result<Vec<RunEvent>> {
        events::events_after(self, run_id, after_seq, limit).await
    }
}

#[async_trait]
impl OnceKeys for PostgresRunQueue {
    /// Takes `key` once: an insert that a unique key refuses to every later caller, in one
    /// statement; now and then (about one call in 256) keys past the retention are deleted
    /// in the same statement.
    async fn claim_once(&self, key: &str) -> Result<bool> {
        upkeep::claim_once(self, key).await
    }
}

#[async_trait]
impl RunQueue for PostgresRunQueue {
    fn lease(&self) -> Duration {
        self.lease
    }

    /// Enqueues a run (see [`RunQueue::enqueue`]) in one transaction holding the thread's
    /// advisory lock, so concurrent enqueues of one thread (from any process) take turns; the
    /// strategy's statements and the insert are sent together.
    async fn enqueue(&self, run: NewRun) -> Result<Enqueued> {
        run.check()?;
        enqueue::enqueue(self, &run).await
    }

    /// Claims a run for `worker` in one statement, skipping runs other claims are taking;
    /// `None` when there is nothing to claim now (including when another process claimed the
    /// thread's run at the same moment).
    async fn claim(&self, worker: &str, run_id: Option<&str>) -> Result<Option<RunRow>> {
        lease::claim(self, worker, run_id).await
    }

    /// Extends `worker`'s lease on a running run by the configured lease, if it still holds
    /// it, and reports a stop request made for the run. A lease that is not held (it ran out
    /// and the run was requeued or taken over, or the run finished) is not extended; one that
    /// ran out but was not taken back yet is (nobody else has the run). Lease times are the
    /// database server's clock, so workers' clocks do not matter.
    async fn heartbeat(&self, run_id: &str, worker: &str) -> Result<Lease> {
        lease::heartbeat(self, run_id, worker).await
    }

    /// Ends the run as `end` says in one statement: its row, its last events, its thread's
    /// state, its deletion and the worker's next claim. (A run given back and a next claim,
    /// or a claim that collided with another, take one transaction of two statements.)
    async fn finish(&self, end: RunEnd<'_>) -> Result<Finished> {
        finish::finish(self, &end).await
    }

    /// Takes back running runs whose lease ran out (their worker died or stalled), in one
    /// statement, each change announced. Call it periodically from any process.
    async fn requeue_expired(&self) -> Result<Vec<Expired>> {
        lease::requeue_expired(self).await
    }

    /// Asks a run to stop: a pending run ends at once (`interrupted`, or deleted for a
    /// rollback); a running one gets its `cancel` set and a notification, and its worker
    /// stops it (it sees the request in its next heartbeat, or in the notification).
    async fn request_cancel(
        &self,
        run_id: &str,
        action: CancelAction,
        reason: &str,
    ) -> Result<CancelOutcome> {
        enqueue::request_cancel(self, run_id, action, reason).await
    }

    async fn list(&self, query: &RunQuery) -> Result<Vec<RunRow>> {
        read::list(self, query).await
    }

    async fn get(&self, run_id: &str) -> Result<Option<RunRow>> {
        read::run(self, run_id).await
    }

    /// Deletes in one statement; rows another session holds are skipped by a purge, not
    /// waited for.
    async fn delete(&self, what: Deletion<'_>) -> Result<u64> {
        upkeep::delete(self, what).await
    }

    async fn threads(&self, thread_ids: &[String]) -> Result<Vec<ThreadRow>> {
        read::threads(self, thread_ids).await
    }

    async fn set_thread(
        &self,
        thread_id: &str,
        state: &ThreadState,
        if_idle: bool,
    ) -> Result<bool> {
        upkeep::set_thread(self, thread_id, state, if_idle).await
    }

    async fn stats(&self) -> Result<QueueStats> {
        read::stats(self).await
    }

    async fn subscribe(&self) -> Result<Notifications> {
        Ok(self.listen().await?.into_notifications())
    }

    /// A fence on this queue's `stategraph_runs` row of the run: a
    /// [`PostgresSaver`](crate::PostgresSaver) built from the same
    /// [`PostgresDatabase`](crate::PostgresDatabase) takes it.
    fn fence(&self, run_id: &str, worker: &str) -> Option<RunFence> {
        Some(RunFence::new(self.database, &self.relation, run_id, worker))
    }
}

impl stategraph_checkpoint::backend::Timed for PostgresRunQueue {
    const BACKEND: &'static str = BACKEND;

    fn timeouts(&self) -> &Timeouts {
        &self.timeouts
    }
}
