//! How a run ends ([`RunEnd`]) and what the queue keeps of the threads its runs leave
//! ([`ThreadState`], [`ThreadRow`]): a thread's status, values, interrupts and error change
//! in the transaction of the run that changes them.

use std::time::SystemTime;

use serde_json::Value as Json;

use super::{Object, RunRow, RunStatus, ThreadStatus, not_final};
use crate::Result;

/// What a run (or a state update) left its thread with: LangGraph's thread `status`,
/// `values`, `interrupts` and `error`.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ThreadState {
    /// `idle`, `interrupted` or `error` (a thread reads `busy` while a run of it is pending or
    /// running, whatever its state says).
    pub status: ThreadStatus,
    /// The values of its latest checkpoint (`null` before the first).
    pub values: Json,
    /// The interrupts it waits on, by task id (an object; empty when none).
    pub interrupts: Json,
    /// The error its last run ended with (`null` for none).
    pub error: Json,
}

impl ThreadState {
    /// A thread left `status` with `values` and `interrupts`, without error.
    pub fn new(status: ThreadStatus, values: Json, interrupts: Json) -> Self {
        Self {
            status,
            values,
            interrupts,
            error: Json::Null,
        }
    }

    /// With `error`.
    pub fn error(mut self, error: Json) -> Self {
        self.error = error;
        self
    }
}

/// A thread as the queue knows it: its live status and the state its last run (or state
/// update) left.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ThreadRow {
    /// The thread.
    pub thread_id: String,
    /// `busy` while a run of it is pending or running, else its state's status (`idle`
    /// without one).
    pub status: ThreadStatus,
    /// What its last run (or state update) left, if any did.
    pub state: Option<ThreadState>,
    /// When that state was written.
    pub updated_at: Option<SystemTime>,
}

impl ThreadRow {
    /// Thread `thread_id` (for implementations), `busy` or not, with `state` written at
    /// `updated_at`.
    pub fn new(
        thread_id: impl Into<String>,
        busy: bool,
        state: Option<(ThreadState, SystemTime)>,
    ) -> Self {
        let (state, updated_at) = match state {
            Some((s, at)) => (Some(s), Some(at)),
            None => (None, None),
        };
        let status = match (&state, busy) {
            (_, true) => ThreadStatus::Busy,
            (Some(s), false) => s.status,
            (None, false) => ThreadStatus::Idle,
        };
        Self {
            thread_id: thread_id.into(),
            status,
            state,
            updated_at,
        }
    }
}

/// What becomes of a run's thread as the run ends.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub enum ThreadEnd<'a> {
    /// Its state stays as it is.
    #[default]
    Keep,
    /// Its state becomes this.
    Settle(&'a ThreadState),
    /// The thread lived only for the run: its state is deleted.
    Delete,
}

/// How a worker ends a run it holds ([`RunQueue::finish`](super::RunQueue::finish)): its final
/// status and error, what it answered, its last stream events, what it left its thread with,
/// and whether the worker claims its next run in the same step. All of it happens, or (the
/// worker no longer holds the run) none of it.
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
    /// What it answered (what `runs/wait` returns), kept on its row.
    pub output: Option<&'a Json>,
    /// Its arguments as it ran with them, replacing those it was enqueued with (LangGraph's
    /// server adds the attempt and the version its engine ran with to `config.metadata`);
    /// `None` keeps them.
    pub kwargs: Option<&'a Object>,
    /// Its last events, appended with its end, numbered after the run's others.
    pub events: &'a [(String, Json)],
    /// What becomes of its thread's state.
    pub thread: ThreadEnd<'a>,
    /// Whether the run is deleted with its events as it ends (a rollback).
    pub delete: bool,
    /// Whether the worker claims its next run in the same step, as
    /// [`claim`](super::RunQueue::claim) would ([`Finished::next`]).
    pub claim_next: bool,
}

impl<'a> RunEnd<'a> {
    /// Run `run_id`, held by `worker`, ends `status`, with nothing else.
    pub fn new(run_id: &'a str, worker: &'a str, status: RunStatus) -> Self {
        Self {
            run_id,
            worker,
            status,
            error: None,
            output: None,
            kwargs: None,
            events: &[],
            thread: ThreadEnd::Keep,
            delete: false,
            claim_next: false,
        }
    }

    /// With `error`.
    pub fn error(mut self, error: Option<&'a Json>) -> Self {
        self.error = error;
        self
    }

    /// With what it answered.
    pub fn output(mut self, output: Option<&'a Json>) -> Self {
        self.output = output;
        self
    }

    /// With the arguments it ran with.
    pub fn kwargs(mut self, kwargs: Option<&'a Object>) -> Self {
        self.kwargs = kwargs;
        self
    }

    /// With its last `events`.
    pub fn events(mut self, events: &'a [(String, Json)]) -> Self {
        self.events = events;
        self
    }

    /// Leaving its thread as `thread` says.
    pub fn thread(mut self, thread: ThreadEnd<'a>) -> Self {
        self.thread = thread;
        self
    }

    /// Deleted (with its events) as it ends.
    pub fn deleted(mut self) -> Self {
        self.delete = true;
        self
    }

    /// Claiming the worker's next run with its end.
    pub fn claim_next(mut self) -> Self {
        self.claim_next = true;
        self
    }

    /// Run `run_id`, held by `worker`, given back: it waits for another claim (a worker
    /// that stops, as a process shutting down does), without the attempt counting.
    pub fn released(run_id: &'a str, worker: &'a str) -> Self {
        Self::new(run_id, worker, RunStatus::Pending)
    }

    /// Whether it gives the run back rather than ending it.
    pub fn is_release(&self) -> bool {
        self.status == RunStatus::Pending
    }

    /// Refuses a status that neither ends the run nor gives it back (`running`).
    pub fn check(&self) -> Result<()> {
        if self.status.is_final() || self.is_release() {
            Ok(())
        } else {
            Err(not_final(self.status))
        }
    }
}

/// What [`RunQueue::finish`](super::RunQueue::finish) did.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Finished {
    /// Whether the worker still held the run (`false`: nothing of its end happened).
    pub ended: bool,
    /// The worker's next run, when [`RunEnd::claim_next`] asked for one and one could be
    /// claimed (claimed whether or not `ended`).
    pub next: Option<RunRow>,
}

impl Finished {
    /// What a finish did (for implementations).
    pub fn new(ended: bool, next: Option<RunRow>) -> Self {
        Self { ended, next }
    }
}
