//! The traits: [`RunQueue`] (runs and the threads they leave), [`RunEvents`] (each run's
//! stream events), [`OnceKeys`] (keys taken once across processes).

use std::fmt;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use serde_json::Value as Json;

use super::{
    CancelAction, CancelOutcome, Enqueued, Expired, Finished, Lease, NewRun, Notifications, RunEnd,
    RunFence, RunQuery, RunRow, RunStatus, ThreadRow, ThreadState,
};
use crate::Result;

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

impl RunEvent {
    /// Event number `seq` of a run.
    pub fn new(seq: i64, event: impl Into<String>, data: Json) -> Self {
        Self {
            seq,
            event: event.into(),
            data,
        }
    }
}

/// What a queue holds right now ([`RunQueue::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueStats {
    /// Runs waiting for a worker.
    pub pending: u64,
    /// Runs a worker holds.
    pub running: u64,
    /// When the run pending longest became claimable, if any is pending.
    pub oldest_pending: Option<SystemTime>,
}

impl QueueStats {
    /// Figures as given.
    pub fn new(pending: u64, running: u64, oldest_pending: Option<SystemTime>) -> Self {
        Self {
            pending,
            running,
            oldest_pending,
        }
    }
}

/// What [`RunQueue::delete`] deletes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Deletion<'a> {
    /// One run that is not running, with its events.
    Run(&'a str),
    /// Every run of a thread that is not running, their events, and the thread's state.
    Thread(&'a str),
    /// The events of up to `limit` runs that ended before `ended_before`, oldest first, and
    /// those runs themselves when they were [temporary](super::NewRun::temporary): what a
    /// server keeps only as long as a client may resume a stream.
    EventsEndedBefore {
        /// The cut.
        ended_before: SystemTime,
        /// The most runs one call purges.
        limit: u32,
    },
}

/// A run's stream events: numbered per run from 1, appended only by the worker holding the
/// run, readable from any number by anyone (joiners, `Last-Event-ID`), from any process
/// sharing the queue.
#[async_trait]
pub trait RunEvents: Send + Sync {
    /// Appends events, in order, to a running run `worker` holds, numbering them after the
    /// run's previous events; the number of the last one (or of the run's last event when
    /// `events` is empty), `None` when the worker no longer holds the run (nothing is
    /// written then).
    async fn append_events(
        &self,
        run_id: &str,
        worker: &str,
        events: &[(String, Json)],
    ) -> Result<Option<i64>>;

    /// Up to `limit` events of a run after number `after_seq` (0 for all), in order.
    async fn events_after(&self, run_id: &str, after_seq: i64, limit: u32)
    -> Result<Vec<RunEvent>>;

    /// How long a worker gathers a run's events before it appends them (what is still
    /// gathered when the run ends goes with its [`finish`](RunQueue::finish)): a queue on a
    /// database pays a commit per append, one in memory nothing. 20 ms by default.
    fn batch_delay(&self) -> Duration {
        Duration::from_millis(20)
    }
}

/// Keys taken once across every process sharing a queue (a cron's due ticks).
#[async_trait]
pub trait OnceKeys: Send + Sync {
    /// Takes `key` for the caller: `true` for the first caller, `false` for every later one
    /// (and for concurrent ones that lost), in one atomic step. Keys are remembered for at
    /// least [`CLAIM_RETENTION`](super::CLAIM_RETENTION).
    ///
    /// Errors: an empty or over-long key is `Error::InvalidInput`.
    async fn claim_once(&self, key: &str) -> Result<bool>;
}

/// The one owner of an Agent Server's runs: their records, their order, who executes them,
/// how they are asked to stop, how they end, and what they leave their threads with. See the
/// [module docs](super) for the rules every implementation keeps, and
/// `run_queue_conformance!` for the suite that checks them.
///
/// Worker names identify a lease holder: give each executing task its own (say, host,
/// process id and a counter), never two tasks one name.
#[async_trait]
pub trait RunQueue: RunEvents + OnceKeys + fmt::Debug {
    /// The lease a claim or heartbeat grants.
    fn lease(&self) -> Duration;

    /// Enqueues a run as `pending` (or claims it at once for [`NewRun::claim_for`] when it
    /// may start now), applying its multitask strategy to the thread's pending and running
    /// runs first, atomically: concurrent enqueues of one thread take turns.
    ///
    /// Errors: [`Multitask::Reject`](super::Multitask::Reject) on a busy thread, or a run id
    /// already in the queue, is an `Error::Conflict` naming them; an empty or over-long id
    /// is `Error::InvalidInput`.
    async fn enqueue(&self, run: NewRun) -> Result<Enqueued>;

    /// Claims a run for `worker`: the oldest claimable pending run (its `created_at` reached)
    /// whose thread has no running run and no older claimable pending run — or, with
    /// `run_id`, that run only if it is such a run. It becomes `running` with `worker`'s
    /// lease; `None` when there is nothing to claim now.
    async fn claim(&self, worker: &str, run_id: Option<&str>) -> Result<Option<RunRow>>;

    /// Extends `worker`'s lease on a running run, if it still holds it, and reports a stop
    /// request made for the run. A lease that is not held (taken back, or the run finished)
    /// is not extended.
    async fn heartbeat(&self, run_id: &str, worker: &str) -> Result<Lease>;

    /// Ends the attempt of a running run `worker` holds, as `end` says, in one step: its
    /// status, error and output, its last events, its thread's state (and, with
    /// [`RunEnd::claim_next`], the worker's next run). A status that is not final is
    /// `Error::InvalidInput`, but for `pending`: the worker gives the run back (it stops, as
    /// a process that shuts down does) and the run waits for another claim without the
    /// attempt counting against its [`max_attempts`](RunRow::max_attempts).
    async fn finish(&self, end: RunEnd<'_>) -> Result<Finished>;

    /// Takes back running runs whose lease ran out: each goes back to `pending` (keeping its
    /// place in its thread's queue), to `error` if that was its last attempt (its thread's
    /// state becomes `error` with the same error), or to `interrupted` if it had been asked
    /// to stop. Call it periodically.
    async fn requeue_expired(&self) -> Result<Vec<Expired>>;

    /// Asks a run to stop: a pending run ends at once (`interrupted`, or deleted for a
    /// rollback); a running one gets its cancel set, with `reason` (why, in words; empty for
    /// none), which its worker hears by the notification or its next heartbeat, wherever it
    /// runs.
    async fn request_cancel(
        &self,
        run_id: &str,
        action: CancelAction,
        reason: &str,
    ) -> Result<CancelOutcome>;

    /// The runs `query` asks for, in its order.
    async fn list(&self, query: &RunQuery) -> Result<Vec<RunRow>>;

    /// A run, or `None`.
    async fn get(&self, run_id: &str) -> Result<Option<RunRow>> {
        Ok(self
            .list(&RunQuery::runs([run_id]))
            .await?
            .into_iter()
            .next())
    }

    /// Deletes what `what` names; how many runs it deleted (or, for
    /// [`Deletion::EventsEndedBefore`], purged). Running runs are never deleted: stop them
    /// first.
    async fn delete(&self, what: Deletion<'_>) -> Result<u64>;

    /// The threads of `thread_ids` the queue knows (with a run, or a state), each with its
    /// live status; others are left out.
    async fn threads(&self, thread_ids: &[String]) -> Result<Vec<ThreadRow>>;

    /// Sets a thread's state (a state update, a copied thread); with `if_idle`, only if no
    /// run of the thread is pending or running (`false` then, nothing written).
    async fn set_thread(&self, thread_id: &str, state: &ThreadState, if_idle: bool)
    -> Result<bool>;

    /// How many runs are pending and running, and since when the oldest pending one waits
    /// (for metrics: LangGraph's `lg_api_num_pending_runs`, `lg_api_num_running_runs`,
    /// `lg_api_pending_runs_wait_time_max`).
    async fn stats(&self) -> Result<QueueStats> {
        let runs = self
            .list(&RunQuery::new().statuses([RunStatus::Pending, RunStatus::Running]))
            .await?;
        let pending = runs.iter().filter(|r| r.status == RunStatus::Pending);
        let oldest = pending.clone().map(|r| r.created_at).min();
        let pending = pending.count() as u64;
        Ok(QueueStats::new(
            pending,
            runs.len() as u64 - pending,
            oldest,
        ))
    }

    /// A subscription to the queue's notifications.
    async fn subscribe(&self) -> Result<Notifications>;

    /// The fence of run `run_id` held by `worker`, for a saver to condition the run's
    /// checkpoint writes on ([`RunFence`]); `None` (the default) for a queue no saver can
    /// check in its own transactions (one in memory: its runs die with its process).
    fn fence(&self, run_id: &str, worker: &str) -> Option<RunFence> {
        let _ = (run_id, worker);
        None
    }
}
