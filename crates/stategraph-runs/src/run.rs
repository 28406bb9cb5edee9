//! A run as the queue keeps it: what is enqueued ([`NewRun`]), the stored row ([`RunRow`]),
//! how runs are listed ([`RunQuery`]), and what enqueueing, heartbeats and cancels answer.

use std::time::{Duration, SystemTime};

use serde_json::{Map, Value as Json};

use super::{CancelAction, DEFAULT_MAX_ATTEMPTS, Multitask, RunStatus, check_id};
use crate::Result;

/// A JSON object, as a run's metadata and arguments are kept.
pub type Object = Map<String, Json>;

/// A run to enqueue: LangGraph's run record (assistant, metadata, arguments, multitask
/// strategy) and what the queue does with it (claim it at once, start it later).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct NewRun {
    /// Its id (unique in the queue; at most [`MAX_ID_LEN`](super::MAX_ID_LEN) bytes).
    pub run_id: String,
    /// Its thread's id (at most [`MAX_ID_LEN`](super::MAX_ID_LEN) bytes).
    pub thread_id: String,
    /// The assistant it runs.
    pub assistant_id: String,
    /// Its metadata (LangGraph's run `metadata`).
    pub metadata: Object,
    /// What it was asked: input, command, config, context, stream modes… (LangGraph's run
    /// `kwargs`); the executor reads it back from the claimed row.
    pub kwargs: Object,
    /// What to do if the thread is busy.
    pub multitask: Multitask,
    /// A worker that claims the run as it is enqueued if it may start then (the process
    /// that received a waited or streamed run executes it at once).
    pub claim_for: Option<String>,
    /// How long after its enqueue the run may start (LangGraph's `after_seconds`): its
    /// `created_at` is that much later, and no worker claims it before.
    pub delay: Duration,
    /// Whether its thread lives only as long as the run (a stateless run): the thread's
    /// state is deleted when the run ends, and the run itself once its events are purged.
    pub temporary: bool,
}

impl NewRun {
    /// A run of `thread_id` with the queue's own default strategy, [`Multitask::Reject`],
    /// no assistant, metadata or arguments.
    pub fn new(run_id: impl Into<String>, thread_id: impl Into<String>) -> Self {
        Self {
            run_id: run_id.into(),
            thread_id: thread_id.into(),
            assistant_id: String::new(),
            metadata: Object::new(),
            kwargs: Object::new(),
            multitask: Multitask::Reject,
            claim_for: None,
            delay: Duration::ZERO,
            temporary: false,
        }
    }

    /// Of assistant `assistant_id`.
    pub fn assistant(mut self, assistant_id: impl Into<String>) -> Self {
        self.assistant_id = assistant_id.into();
        self
    }

    /// With `metadata`.
    pub fn metadata(mut self, metadata: Object) -> Self {
        self.metadata = metadata;
        self
    }

    /// With arguments `kwargs`.
    pub fn kwargs(mut self, kwargs: Object) -> Self {
        self.kwargs = kwargs;
        self
    }

    /// With another multitask strategy.
    pub fn multitask(mut self, multitask: Multitask) -> Self {
        self.multitask = multitask;
        self
    }

    /// Claimed by `worker` as it is enqueued, if it may start then: nothing else of its
    /// thread pending or running, and no [`delay`](Self::delay) ([`Enqueued::claimed`]).
    pub fn claimed_by(mut self, worker: impl Into<String>) -> Self {
        self.claim_for = Some(worker.into());
        self
    }

    /// Not claimable before `delay` has passed.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// On a thread that lives only as long as the run ([`temporary`](Self::temporary)).
    pub fn temporary(mut self) -> Self {
        self.temporary = true;
        self
    }

    /// Refuses an empty or over-long id.
    pub fn check(&self) -> Result<()> {
        check_id("run id", &self.run_id)?;
        check_id("thread id", &self.thread_id)
    }
}

/// A run as stored: LangGraph's run record and the queue's own fields.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct RunRow {
    /// Its id.
    pub run_id: String,
    /// Its thread.
    pub thread_id: String,
    /// The assistant it runs.
    pub assistant_id: String,
    /// Its status.
    pub status: RunStatus,
    /// Its metadata.
    pub metadata: Object,
    /// What it was asked (see [`NewRun::kwargs`]).
    pub kwargs: Object,
    /// The multitask strategy it was enqueued with.
    pub multitask: Multitask,
    /// Whether its thread lives only as long as it does ([`NewRun::temporary`]).
    pub temporary: bool,
    /// When it was enqueued, plus its [`delay`](NewRun::delay): the earliest it may start
    /// (LangGraph's `created_at`).
    pub created_at: SystemTime,
    /// When it last changed.
    pub updated_at: SystemTime,
    /// Its place in the queue (increasing with enqueue order).
    pub seq: i64,
    /// How many times it was claimed: 1 the first time, more when a worker took it over
    /// after an earlier one's lease ran out or was given back (the thread may hold that
    /// attempt's checkpoints).
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
    /// How many stream events it has.
    pub events: i64,
    /// The error it finished with, if any.
    pub error: Option<Json>,
    /// What it answered when it ended ([`RunEnd::output`](super::RunEnd::output)), if it
    /// said.
    pub output: Option<Json>,
}

impl RunRow {
    /// A pending run just enqueued at `now`, `seq` in the queue (for implementations of
    /// [`RunQueue`](super::RunQueue)).
    pub fn pending(run: &NewRun, seq: i64, max_attempts: u32, now: SystemTime) -> Self {
        Self {
            run_id: run.run_id.clone(),
            thread_id: run.thread_id.clone(),
            assistant_id: run.assistant_id.clone(),
            status: RunStatus::Pending,
            metadata: run.metadata.clone(),
            kwargs: run.kwargs.clone(),
            multitask: run.multitask,
            temporary: run.temporary,
            created_at: now + run.delay,
            updated_at: now,
            seq,
            attempt: 0,
            max_attempts,
            worker: None,
            lease_until: None,
            cancel: None,
            cancel_reason: String::new(),
            events: 0,
            error: None,
            output: None,
        }
    }

    /// Run `run_id` of `thread_id`, pending, `seq` in the queue, created now, with nothing
    /// else set (for implementations reading rows: set the other fields as stored).
    pub fn new(run_id: impl Into<String>, thread_id: impl Into<String>, seq: i64) -> Self {
        let run = NewRun::new(run_id, thread_id);
        Self::pending(&run, seq, DEFAULT_MAX_ATTEMPTS, SystemTime::now())
    }

    /// Whether it is pending or running.
    pub fn in_flight(&self) -> bool {
        !self.status.is_final()
    }
}

/// Which runs [`RunQueue::list`](super::RunQueue::list) answers, and in what order:
/// by default every run, newest first (by `created_at`, then queue order).
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct RunQuery {
    /// Only this thread's runs.
    pub thread_id: Option<String>,
    /// Only these runs.
    pub run_ids: Option<Vec<String>>,
    /// Only runs with one of these statuses (none: any status).
    pub statuses: Vec<RunStatus>,
    /// Oldest first instead.
    pub oldest_first: bool,
    /// At most this many.
    pub limit: Option<usize>,
    /// After skipping this many.
    pub offset: usize,
}

impl RunQuery {
    /// Every run, newest first.
    pub fn new() -> Self {
        Self::default()
    }

    /// The runs of `thread_id`.
    pub fn thread(thread_id: impl Into<String>) -> Self {
        Self {
            thread_id: Some(thread_id.into()),
            ..Self::default()
        }
    }

    /// Runs `run_ids`.
    pub fn runs<I: IntoIterator<Item = S>, S: Into<String>>(run_ids: I) -> Self {
        Self {
            run_ids: Some(run_ids.into_iter().map(Into::into).collect()),
            ..Self::default()
        }
    }

    /// Only those with one of `statuses`.
    pub fn statuses(mut self, statuses: impl IntoIterator<Item = RunStatus>) -> Self {
        self.statuses = statuses.into_iter().collect();
        self
    }

    /// Oldest first (queue order).
    pub fn oldest_first(mut self) -> Self {
        self.oldest_first = true;
        self
    }

    /// At most `limit`, after skipping `offset`.
    pub fn page(mut self, limit: usize, offset: usize) -> Self {
        self.limit = Some(limit);
        self.offset = offset;
        self
    }

    /// Whether `run` is one it asks for (ignoring order and paging).
    pub fn matches(&self, run: &RunRow) -> bool {
        self.thread_id.as_ref().is_none_or(|t| *t == run.thread_id)
            && self
                .run_ids
                .as_ref()
                .is_none_or(|ids| ids.contains(&run.run_id))
            && (self.statuses.is_empty() || self.statuses.contains(&run.status))
    }

    /// `runs` (those it matches) in its order and page: for implementations that filter in
    /// memory.
    pub fn apply(&self, mut runs: Vec<RunRow>) -> Vec<RunRow> {
        runs.retain(|r| self.matches(r));
        runs.sort_by_key(|r| (r.created_at, r.seq));
        if !self.oldest_first {
            runs.reverse();
        }
        runs.into_iter()
            .skip(self.offset)
            .take(self.limit.unwrap_or(usize::MAX))
            .collect()
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
    /// Whether the run starts its thread's work: nothing else of the thread was pending or
    /// running.
    pub first: bool,
    /// The new run, claimed for [`NewRun::claim_for`] (`None` when it waits its turn).
    pub claimed: Option<RunRow>,
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

/// What [`RunQueue::request_cancel`](super::RunQueue::request_cancel) did.
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

/// A run whose lease ran out, as [`RunQueue::requeue_expired`](super::RunQueue::requeue_expired)
/// left it.
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
