//! [`RunQueue`]: the durable record of an Agent Server's runs — which run of a thread goes
//! next, who executes it (a lease kept alive by heartbeats), how it is asked to stop, what it
//! streamed — behind one trait with several implementations:
//! [`InMemoryRunQueue`] (one process; the default of the embedded server) and
//! `stategraph_postgres::PostgresRunQueue` (every process on one database). Each passes the
//! shared conformance suite (`run_queue_conformance!`, feature `conformance`).
//!
//! The rules every implementation keeps:
//! - **FIFO per thread, one running run per thread.** A worker claims the oldest pending run
//!   whose thread has no running run and no older pending run.
//! - **Multitask strategies** ([`Multitask`]) are applied at enqueue, atomically with it:
//!   `reject` refuses a run on a busy thread, `enqueue` queues it, `interrupt` / `rollback`
//!   end the thread's pending runs and ask its running run to stop.
//! - **Leases.** A claim holds the run until it finishes, its worker stops heartbeating (the
//!   run goes back to pending for another worker, or to `error` after its last attempt), or it
//!   is taken back; only the lease holder appends events or finishes the run.
//! - **Events** are numbered per run from 1 and readable from any number (joiners,
//!   `Last-Event-ID`).
//! - **Fencing** (where a saver can check it): [`RunQueue::fence`] gives the lease as a
//!   condition on the run's checkpoint writes, so a worker that stalled past its lease cannot
//!   write once another took the run over.
//! - **Retention**: [`RunQueue::purge_finished`] deletes finished runs with their events.
//! - **Records with transitions** (where the queue shares a database with the store that keeps
//!   them): [`RecordWrites`] go with the enqueue or the end of a run, in its transaction —
//!   written if and only if the queue change is made.
//! - **Notifications** ([`Notification`]) announce changes after they happened; they are a
//!   wake-up, not the truth: after a lost subscription, read the queue again.
//!
//! ```
//! use serde_json::json;
//! use stategraph_checkpoint::runs::{InMemoryRunQueue, Multitask, NewRun, RunQueue, RunStatus};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> stategraph_checkpoint::Result<()> {
//! let queue = InMemoryRunQueue::new();
//! queue
//!     .enqueue(NewRun::new("run-1", "thread-1", json!({"input": "hi"})).multitask(Multitask::Enqueue))
//!     .await?;
//! let run = queue.claim("worker-1").await?.expect("a pending run");
//! queue.append_events(&run.run_id, "worker-1", &[("values".into(), json!({"n": 1}))]).await?;
//! assert!(queue.heartbeat(&run.run_id, "worker-1").await?.held);
//! queue.finish(&run.run_id, "worker-1", RunStatus::Success, None).await?;
//! assert_eq!(queue.events_after("run-1", 0, 10).await?[0].seq, 1);
//! # Ok(()) }
//! ```

mod memory;

use std::collections::BTreeSet;
use std::fmt;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use tokio::sync::mpsc;

use crate::store::StoreLocation;
use crate::{Error, Result};

pub use memory::{DEFAULT_KEEP_FINISHED, InMemoryRunQueue};

/// The lease a claim or heartbeat grants unless a queue is configured otherwise.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// How many claims a run gets unless a queue is configured otherwise.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;

/// How long a key taken by [`RunQueue::claim_once`] is remembered at least; a key claimed
/// again after that may be new again.
pub const CLAIM_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// The longest run or thread id a queue accepts, in bytes.
pub const MAX_ID_LEN: usize = 1024;

/// What enqueueing a run does when its thread already has a pending or running run
/// (LangGraph's `multitask_strategy`; serialized by its LangGraph name).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Multitask {
    /// Refuse the new run: an `Error::Conflict` naming the thread and its busy run.
    Reject,
    /// Queue the new run behind the thread's others (FIFO per thread). The default of
    /// LangGraph's server.
    #[default]
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

    /// How the thread's runs in flight are asked to stop, if they are.
    pub fn cancel_action(self) -> Option<CancelAction> {
        match self {
            Self::Interrupt => Some(CancelAction::Interrupt),
            Self::Rollback => Some(CancelAction::Rollback),
            Self::Reject | Self::Enqueue => None,
        }
    }
}

/// How a run is asked to stop (LangGraph's cancel `action`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CancelAction {
    /// Stop the run; it ends `interrupted` and its checkpoints are kept.
    #[default]
    Interrupt,
    /// Stop the run and delete it with what it wrote.
    Rollback,
}

impl CancelAction {
    /// Its name in LangGraph's API (`interrupt`, `rollback`).
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

/// A run's status (LangGraph's run statuses; serialized by name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
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
    /// Its name in LangGraph's API.
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

/// A thread's status (LangGraph's thread statuses; serialized by name).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThreadStatus {
    /// No run pending or running, and the last one did not stop on an interrupt or fail.
    #[default]
    Idle,
    /// A run is pending or running.
    Busy,
    /// The last run stopped on an interrupt (or was cancelled mid-step): the thread waits.
    Interrupted,
    /// The last run failed.
    Error,
}

impl ThreadStatus {
    /// Its name in LangGraph's API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Busy => "busy",
            Self::Interrupted => "interrupted",
            Self::Error => "error",
        }
    }

    /// The status of a name, or `None`.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "idle" => Self::Idle,
            "busy" => Self::Busy,
            "interrupted" => Self::Interrupted,
            "error" => Self::Error,
            _ => return None,
        })
    }
}

impl fmt::Display for ThreadStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
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
    /// When the run pending longest was enqueued, if any is pending.
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

/// A run to enqueue.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct NewRun {
    /// Its id (unique in the queue; at most [`MAX_ID_LEN`] bytes).
    pub run_id: String,
    /// Its thread's id (at most [`MAX_ID_LEN`] bytes).
    pub thread_id: String,
    /// What the executor needs to run it (input, config, assistant…).
    pub payload: Json,
    /// What to do if the thread is busy.
    pub multitask: Multitask,
    /// A worker that claims the run in the same step if it is next on its thread (the process
    /// that received a streamed run executes it at once).
    pub claim_for: Option<String>,
    /// Records written in the same transaction, if the run is enqueued
    /// ([`RunQueue::writes_records_at`]).
    pub records: Option<RecordWrites>,
}

impl NewRun {
    /// A run of `thread_id` with the queue's own default strategy, [`Multitask::Reject`].
    pub fn new(run_id: impl Into<String>, thread_id: impl Into<String>, payload: Json) -> Self {
        Self {
            run_id: run_id.into(),
            thread_id: thread_id.into(),
            payload,
            multitask: Multitask::Reject,
            claim_for: None,
            records: None,
        }
    }

    /// With another multitask strategy.
    pub fn multitask(mut self, multitask: Multitask) -> Self {
        self.multitask = multitask;
        self
    }

    /// Claimed by `worker` as it is enqueued, if nothing else of its thread is pending or
    /// running ([`Enqueued::claimed`]).
    pub fn claimed_by(mut self, worker: impl Into<String>) -> Self {
        self.claim_for = Some(worker.into());
        self
    }

    /// With `records` written in the enqueue's transaction, only if the run is enqueued (for
    /// a queue that [`writes_records_at`](RunQueue::writes_records_at) their store; others
    /// refuse the run).
    pub fn records(mut self, records: RecordWrites) -> Self {
        self.records = Some(records);
        self
    }

    /// Refuses an empty or over-long id.
    pub fn check(&self) -> Result<()> {
        check_id("run id", &self.run_id)?;
        check_id("thread id", &self.thread_id)
    }
}

/// A change of one record of a [`Store`](crate::store::Store) (a document under a namespace
/// and a key), made by a run queue in the transaction of a queue change: an Agent Server's
/// thread and run records change with the runs they describe.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum RecordWrite {
    /// Stores `value` (a JSON object) under `key` of `namespace`, created or replaced, without
    /// a TTL and without vectors.
    Put {
        /// The record's namespace.
        namespace: Vec<String>,
        /// Its key.
        key: String,
        /// The whole record.
        value: Json,
    },
    /// Sets the top-level `fields` of the object stored under `key` of `namespace`, keeping
    /// its other fields as they are (a change made meanwhile by someone else to another field
    /// stays); nothing when no record is stored there.
    Merge {
        /// The record's namespace.
        namespace: Vec<String>,
        /// Its key.
        key: String,
        /// The fields set.
        fields: serde_json::Map<String, Json>,
    },
    /// Deletes the record (nothing if there is none).
    Delete {
        /// The record's namespace.
        namespace: Vec<String>,
        /// Its key.
        key: String,
    },
}

/// How a worker ends a run it holds, for [`RunQueue::finish_and_claim`]: its final status,
/// its error, its last stream events and the records written with its end.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct RunEnd<'a> {
    /// The run.
    pub run_id: &'a str,
    /// The worker that holds it.
    pub worker: &'a str,
    /// Its final status (a status that is not final is `Error::InvalidInput`).
    pub status: RunStatus,
    /// Its error, if it failed.
    pub error: Option<&'a Json>,
    /// Its last events, appended with its end ([`RunQueue::finish_with_events`]).
    pub events: &'a [(String, Json)],
    /// Records written with its end ([`RunQueue::finish_with_records`]).
    pub records: Option<&'a RecordWrites>,
}

impl<'a> RunEnd<'a> {
    /// Run `run_id`, held by `worker`, ends `status`, with no error, events or records.
    pub fn new(run_id: &'a str, worker: &'a str, status: RunStatus) -> Self {
        Self {
            run_id,
            worker,
            status,
            error: None,
            events: &[],
            records: None,
        }
    }

    /// With `error`.
    pub fn error(mut self, error: Option<&'a Json>) -> Self {
        self.error = error;
        self
    }

    /// With its last `events`.
    pub fn events(mut self, events: &'a [(String, Json)]) -> Self {
        self.events = events;
        self
    }

    /// With `records` written with its end.
    pub fn records(mut self, records: Option<&'a RecordWrites>) -> Self {
        self.records = records;
        self
    }
}

/// [`RecordWrite`]s of the store at `at`, made together with a queue change
/// ([`NewRun::records`], [`RunQueue::finish_with_records`]).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct RecordWrites {
    /// The store's table.
    pub at: StoreLocation,
    /// The changes, in order.
    pub writes: Vec<RecordWrite>,
    /// Changes made after `writes` by an enqueue only if the run's thread has no other
    /// pending or running run at that moment (the records of a run that starts its thread's
    /// work: its status, its graph); ignored by the end of a run.
    pub if_idle: Vec<RecordWrite>,
}

impl RecordWrites {
    /// `writes` to the store at `at`.
    pub fn new(at: StoreLocation, writes: Vec<RecordWrite>) -> Self {
        Self {
            at,
            writes,
            if_idle: Vec::new(),
        }
    }

    /// With `writes` made by the enqueue only if the run's thread is idle then
    /// ([`if_idle`](Self::if_idle)).
    pub fn if_idle(mut self, writes: Vec<RecordWrite>) -> Self {
        self.if_idle = writes;
        self
    }

    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.if_idle.is_empty()
    }

    /// Refuses them ([`records_unsupported`]) unless there is nothing to write or `queue`
    /// [`writes_records_at`](RunQueue::writes_records_at) their store: what a queue checks
    /// before the change they go with.
    pub fn check_writable_by<Q: RunQueue + ?Sized>(&self, queue: &Q) -> Result<()> {
        if self.is_empty() || queue.writes_records_at(&self.at) {
            Ok(())
        } else {
            Err(records_unsupported(&self.at))
        }
    }
}

/// The error of a queue asked to write records it cannot write.
pub fn records_unsupported(at: &StoreLocation) -> Error {
    Error::InvalidInput {
        what: "records".into(),
        message: format!(
            "this run queue cannot write records of the {} store `{}` in its \
             transactions (ask `writes_records_at` first, and write them through the store \
             otherwise)",
            at.backend, at.relation
        ),
    }
}

/// What enqueueing did.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Enqueued {
    /// Pending runs ended by the strategy: `interrupted` ([`Multitask::Interrupt`]) or
    /// deleted ([`Multitask::Rollback`]).
    pub ended: Vec<String>,
    /// Running runs asked to stop (their `cancel` is set; their workers see it).
    pub signalled: Vec<String>,
    /// The new run, claimed for [`NewRun::claim_for`] (`None` when it waits its turn).
    pub claimed: Option<ClaimedRun>,
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

impl ClaimedRun {
    /// A claim of `run_id` (for implementations of [`RunQueue`]).
    pub fn new(
        run_id: impl Into<String>,
        thread_id: impl Into<String>,
        payload: Json,
        attempt: u32,
    ) -> Self {
        Self {
            run_id: run_id.into(),
            thread_id: thread_id.into(),
            payload,
            attempt,
        }
    }
}

/// A run's lease as a condition on the checkpoint writes made for the run (fencing): a saver
/// on the queue's database that takes it ([`CheckpointSaver::fenced`](crate::CheckpointSaver::fenced))
/// commits a write only if, in the same transaction, the run is still running and held by
/// `worker` with its lease not run out — and keeps the run's row from being taken over until
/// the write commits. A worker that stalled past its lease (a pause, a frozen VM) and wakes
/// up has its next write refused with [`Error::LeaseLost`], writing
/// nothing. Made by [`RunQueue::fence`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunFence {
    /// The database that holds the queue, as its server identifies it: a saver fences writes
    /// only on the same database.
    pub database: String,
    /// The queue's table of runs, qualified, as SQL names it.
    pub relation: String,
    /// The run.
    pub run_id: String,
    /// The worker that holds its lease.
    pub worker: String,
}

impl RunFence {
    /// The fence of `run_id` held by `worker`, on `relation` of `database` (for
    /// implementations of [`RunQueue`]).
    pub fn new(
        database: impl Into<String>,
        relation: impl Into<String>,
        run_id: impl Into<String>,
        worker: impl Into<String>,
    ) -> Self {
        Self {
            database: database.into(),
            relation: relation.into(),
            run_id: run_id.into(),
            worker: worker.into(),
        }
    }
}

/// The answer to a heartbeat.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Lease {
    /// Whether the worker still holds the run (its lease was extended); if not, it must stop
    /// without writing anything more.
    pub held: bool,
    /// A stop request for the run, if one was made (the fallback to the notification).
    pub cancel: Option<CancelAction>,
    /// Why it was asked to stop, as the request said (empty: not said).
    pub reason: String,
}

impl Lease {
    /// A lease that is held, with the stop request made for its run, if any.
    pub fn held(cancel: Option<CancelAction>) -> Self {
        Self {
            held: true,
            cancel,
            reason: String::new(),
        }
    }

    /// With why the run was asked to stop.
    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = reason.into();
        self
    }

    /// A lease the worker no longer holds.
    pub fn lost() -> Self {
        Self {
            held: false,
            cancel: None,
            reason: String::new(),
        }
    }
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

impl Expired {
    /// Run `run_id` of `thread_id`, now `status`.
    pub fn new(run_id: impl Into<String>, thread_id: impl Into<String>, status: RunStatus) -> Self {
        Self {
            run_id: run_id.into(),
            thread_id: thread_id.into(),
            status,
        }
    }
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
    /// Why the stop request was made (empty: not said).
    pub cancel_reason: String,
    /// How many events it has.
    pub events: i64,
    /// The error it finished with, if any.
    pub error: Option<Json>,
    /// When it was enqueued.
    pub created_at: SystemTime,
    /// When it last changed.
    pub updated_at: SystemTime,
}

impl RunRow {
    /// Run `run_id` of `thread_id` with `status`, `payload` and queue position `seq`, never
    /// claimed, with no events, created now (for implementations of [`RunQueue`]: set the
    /// other fields as stored).
    pub fn new(
        run_id: impl Into<String>,
        thread_id: impl Into<String>,
        status: RunStatus,
        payload: Json,
        seq: i64,
    ) -> Self {
        let now = SystemTime::now();
        Self {
            run_id: run_id.into(),
            thread_id: thread_id.into(),
            status,
            payload,
            seq,
            attempt: 0,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            worker: None,
            lease_until: None,
            cancel: None,
            cancel_reason: String::new(),
            events: 0,
            error: None,
            created_at: now,
            updated_at: now,
        }
    }

    /// A pending run just enqueued (for implementations of [`RunQueue`]).
    pub fn pending(run: &NewRun, seq: i64, max_attempts: u32, now: SystemTime) -> Self {
        Self {
            run_id: run.run_id.clone(),
            thread_id: run.thread_id.clone(),
            status: RunStatus::Pending,
            payload: run.payload.clone(),
            seq,
            attempt: 0,
            max_attempts,
            worker: None,
            lease_until: None,
            cancel: None,
            cancel_reason: String::new(),
            events: 0,
            error: None,
            created_at: now,
            updated_at: now,
        }
    }
}

/// A change in the queue, announced after it happened. Notifications carry ids only: read
/// the run or its events for the rest.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Notification {
    /// A run was enqueued (also one claimed as it was enqueued, for those following its
    /// thread).
    Enqueued {
        /// The run.
        run_id: String,
        /// Its thread.
        thread_id: String,
        /// Whether an idle worker may claim it now: it is pending and nothing else of its
        /// thread was pending or running. A run that waits its turn becomes claimable when
        /// the run before it ends, and the worker that ends that run claims again by itself,
        /// so only these enqueues need to wake a worker.
        claimable: bool,
    },
    /// A run whose lease ran out is pending again: idle workers may claim it.
    Requeued {
        /// The run.
        run_id: String,
        /// Its thread.
        thread_id: String,
    },
    /// A running run was asked to stop: its worker should stop it.
    Cancel {
        /// The run.
        run_id: String,
        /// How.
        action: CancelAction,
        /// Why, as the request said (empty: not said).
        reason: String,
    },
    /// A run has a new stream event.
    Event {
        /// The run.
        run_id: String,
        /// The event's number.
        seq: i64,
    },
    /// A run ended (its thread's next run may now be claimed); `status` is `None` when it
    /// was deleted (a pending run ended by a rollback).
    Finished {
        /// The run.
        run_id: String,
        /// Its final status, or `None` if it was deleted.
        status: Option<RunStatus>,
    },
}

impl Notification {
    /// The run it is about.
    pub fn run_id(&self) -> &str {
        match self {
            Self::Enqueued { run_id, .. }
            | Self::Requeued { run_id, .. }
            | Self::Cancel { run_id, .. }
            | Self::Event { run_id, .. }
            | Self::Finished { run_id, .. } => run_id,
        }
    }
}

/// A subscription to a queue's [`Notification`]s; made by [`RunQueue::subscribe`]. Dropping
/// it ends the subscription.
///
/// Notifications made while nobody was subscribed are not delivered, and a subscriber that
/// falls far behind may miss some: after subscribing (and after [`recv`](Self::recv) returned
/// `None` and a new subscription was made), read the queue for what may have been missed.
pub struct Notifications {
    receiver: mpsc::Receiver<Notification>,
    _guard: Box<dyn std::any::Any + Send + Sync>,
}

impl fmt::Debug for Notifications {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Notifications").finish_non_exhaustive()
    }
}

impl Notifications {
    /// Notifications from `receiver`; `guard` (a connection, say) lives as long as they do.
    pub fn new(
        receiver: mpsc::Receiver<Notification>,
        guard: impl std::any::Any + Send + Sync,
    ) -> Self {
        Self {
            receiver,
            _guard: Box::new(guard),
        }
    }

    /// The next notification; `None` once the subscription is lost (subscribe again, then
    /// read the queue for what was missed).
    pub async fn recv(&mut self) -> Option<Notification> {
        self.receiver.recv().await
    }
}

/// A durable queue of Agent Server runs; see the [module docs](self) for the rules every
/// implementation keeps, and `run_queue_conformance!` for the suite that checks them.
///
/// Worker names identify a lease holder: give each executing task its own (say, host,
/// process id and a counter), never two tasks one name.
#[async_trait]
pub trait RunQueue: Send + Sync + fmt::Debug {
    /// The lease a claim or heartbeat grants.
    fn lease(&self) -> Duration;

    /// Enqueues a run as `pending` (or claims it at once for [`NewRun::claim_for`] when
    /// nothing else of its thread is pending or running), applying its multitask strategy
    /// to the thread's pending and running runs first, atomically: concurrent enqueues of one
    /// thread take turns.
    ///
    /// Errors: [`Multitask::Reject`] on a busy thread, or a run id already in the queue, is
    /// an `Error::Conflict` naming them; an empty or over-long id is `Error::InvalidInput`.
    async fn enqueue(&self, run: NewRun) -> Result<Enqueued>;

    /// Claims the next run for `worker`: the oldest pending run whose thread has no running
    /// run and no older pending run. It becomes `running` with `worker`'s lease; `None` when
    /// there is nothing to claim now.
    async fn claim(&self, worker: &str) -> Result<Option<ClaimedRun>>;

    /// Claims run `run_id` for `worker` if it is pending and next on its thread (no running
    /// run, no older pending run); `None` otherwise (it waits its turn, another worker has
    /// it, or it is over).
    async fn claim_run(&self, run_id: &str, worker: &str) -> Result<Option<ClaimedRun>>;

    /// Extends `worker`'s lease on a running run, if it still holds it, and reports a stop
    /// request made for the run. A lease that is not held (taken back, or the run finished)
    /// is not extended.
    async fn heartbeat(&self, run_id: &str, worker: &str) -> Result<Lease>;

    /// Ends a running run `worker` holds with a final `status` (and an error, if any);
    /// `false` when the worker no longer holds it (nothing changes then). A status that is
    /// not final is `Error::InvalidInput`.
    async fn finish(
        &self,
        run_id: &str,
        worker: &str,
        status: RunStatus,
        error: Option<&Json>,
    ) -> Result<bool>;

    /// [`finish`](Self::finish), with the run's last stream events appended first, as
    /// [`append_events`](Self::append_events) would: both happen, or (the worker no longer
    /// holds the run: `false`) neither. Backends that can do both in one statement or
    /// transaction do (the default makes two calls), so that a run's last events cost no
    /// commit of their own.
    async fn finish_with_events(
        &self,
        run_id: &str,
        worker: &str,
        status: RunStatus,
        error: Option<&Json>,
        events: &[(String, Json)],
    ) -> Result<bool> {
        if !status.is_final() {
            return Err(not_final(status));
        }
        if !events.is_empty() && self.append_events(run_id, worker, events).await?.is_none() {
            return Ok(false);
        }
        self.finish(run_id, worker, status, error).await
    }

    /// Whether this queue can write [`RecordWrites`] of the store at `at` in its own
    /// transactions ([`NewRun::records`], [`finish_with_records`](Self::finish_with_records)):
    /// the same backend on the same database. `false` by default.
    fn writes_records_at(&self, at: &StoreLocation) -> bool {
        let _ = at;
        false
    }

    /// [`finish_with_events`](Self::finish_with_events), with `records` written in the same
    /// transaction: all of it happens, or (the worker no longer holds the run: `false`) none
    /// of it. Only for a queue that [`writes_records_at`](Self::writes_records_at) their
    /// store; the default refuses records (and without any, finishes as
    /// `finish_with_events`).
    async fn finish_with_records(
        &self,
        run_id: &str,
        worker: &str,
        status: RunStatus,
        error: Option<&Json>,
        events: &[(String, Json)],
        records: &RecordWrites,
    ) -> Result<bool> {
        if !records.is_empty() {
            return Err(records_unsupported(&records.at));
        }
        self.finish_with_events(run_id, worker, status, error, events)
            .await
    }

    /// Ends a run as [`finish_with_records`](Self::finish_with_records) (or, without
    /// records, [`finish_with_events`](Self::finish_with_events)) does, then claims the
    /// worker's next run as [`claim`](Self::claim) does — the ended run's thread's next run
    /// among the others, if it is the oldest that may be claimed. A queue on a database does
    /// both in one transaction, so a worker that goes from run to run commits once between
    /// them. Answers whether the worker still held the ended run (`false`: nothing of the end
    /// happened) and the run it claimed (claimed either way).
    async fn finish_and_claim(&self, end: RunEnd<'_>) -> Result<(bool, Option<ClaimedRun>)> {
        let ended = self.finish_run(end).await?;
        Ok((ended, self.claim(end.worker).await?))
    }

    /// Ends a run as `end` says, claiming nothing:
    /// [`finish_with_records`](Self::finish_with_records) with its records, else
    /// [`finish_with_events`](Self::finish_with_events). Whether the worker still held it.
    async fn finish_run(&self, end: RunEnd<'_>) -> Result<bool> {
        let RunEnd {
            run_id,
            worker,
            status,
            error,
            events,
            records,
        } = end;
        match records {
            Some(records) => {
                self.finish_with_records(run_id, worker, status, error, events, records)
                    .await
            }
            None => {
                self.finish_with_events(run_id, worker, status, error, events)
                    .await
            }
        }
    }

    /// Takes back running runs whose lease ran out: each goes back to `pending` (keeping its
    /// place in its thread's queue), to `error` if that was its last attempt, or to
    /// `interrupted` if it had been asked to stop. Call it periodically.
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

    /// Appends stream events, in order, to a running run `worker` holds, numbering them after
    /// the run's previous events; the number of the last one (or of the run's last event
    /// when `events` is empty), `None` when the worker no longer holds the run (nothing is
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

    /// A run, or `None`.
    async fn get(&self, run_id: &str) -> Result<Option<RunRow>>;

    /// The runs of a thread, in queue order.
    async fn runs_of_thread(&self, thread_id: &str) -> Result<Vec<RunRow>>;

    /// The threads that have a pending or running run.
    async fn busy_threads(&self) -> Result<BTreeSet<String>>;

    /// How many runs are pending and running, and since when the oldest pending one waits
    /// (for metrics: LangGraph's `lg_api_num_pending_runs`, `lg_api_num_running_runs`,
    /// `lg_api_pending_runs_wait_time_max`).
    async fn stats(&self) -> Result<QueueStats>;

    /// Deletes a run that is not running, with its events; `false` when there is no such run
    /// or it is running.
    async fn delete(&self, run_id: &str) -> Result<bool>;

    /// The fence of run `run_id` held by `worker`, for a saver to condition the run's
    /// checkpoint writes on ([`RunFence`]); `None` (the default) for a queue no saver can
    /// check in its own transactions (one in memory: its runs die with its process).
    fn fence(&self, run_id: &str, worker: &str) -> Option<RunFence> {
        let _ = (run_id, worker);
        None
    }

    /// Deletes up to `limit` runs that finished (any final status) before `ended_before`,
    /// with their events, oldest first; how many it deleted. Pending and running runs are
    /// never deleted. A server calls it in bounded batches to keep finished runs only as long
    /// as they are wanted (joiners, `Last-Event-ID`); a run it deleted reads as unknown
    /// ([`get`](Self::get) `None`, no events), as one deleted with [`delete`](Self::delete).
    async fn purge_finished(&self, ended_before: SystemTime, limit: u32) -> Result<u64>;

    /// A subscription to the queue's notifications.
    async fn subscribe(&self) -> Result<Notifications>;

    /// Takes `key` for the caller, once for every process sharing the queue: `true` for the
    /// first caller, `false` for every later one (and for concurrent ones that lost), in one
    /// atomic step. Keys are remembered for at least [`CLAIM_RETENTION`]. The server's cron
    /// scheduler claims each due tick of a cron this way, so that however many processes
    /// see it due, one creates its run.
    ///
    /// Errors: an empty or over-long key is `Error::InvalidInput`.
    async fn claim_once(&self, key: &str) -> Result<bool>;
}

/// Refuses an empty or over-long id (`what` names it in the error).
pub fn check_id(what: &str, id: &str) -> Result<()> {
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

/// The error of enqueueing run `run_id` with [`Multitask::Reject`] on `thread_id`, busy with
/// `busy` (`status`): the same words from every implementation.
pub fn rejected(thread_id: &str, run_id: &str, busy: &str, status: RunStatus) -> Error {
    Error::Conflict {
        message: format!(
            "thread `{thread_id}` is busy with run `{busy}` ({status}); run `{run_id}` was \
             rejected (multitask strategy `reject`)"
        ),
    }
}

/// The error of enqueueing a run whose id is already in the queue.
pub fn duplicate(run_id: &str) -> Error {
    Error::Conflict {
        message: format!("run `{run_id}` is already in the queue"),
    }
}

/// The error of finishing a run with a status that is not final.
pub fn not_final(status: RunStatus) -> Error {
    Error::invalid(
        "run status",
        format!("a run finishes with a final status, not `{status}`"),
    )
}

/// The error a run that expired on its last attempt is left with.
pub fn lease_expired_error(attempt: u32, max_attempts: u32) -> Json {
    serde_json::json!({
        "error": "LeaseExpired",
        "message": format!("the lease of attempt {attempt} of {max_attempts} ran out"),
    })
}
