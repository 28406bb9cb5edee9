//! Runs: every run — on a thread or stateless, in the background, waited for or streamed —
//! goes through the server's run queue, the one owner of its record, its events and its end.
//!
//! - [`plan`]: a request resolved into what the queue stores (pure, unit-tested).
//! - [`start`]: the front door: the thread's document, the enqueue (claimed at once by the
//!   request's process when the run may start now), and how the caller follows it.
//! - [`execute`]: the one executor of a claimed run: its graph's events appended to the
//!   queue's log, a stop request honoured at the next await, its end (status, output, the
//!   state it left its thread with) told to the queue in one step.
//! - [`follow`]: the one way to read a run: its events from the queue's log, woken by the
//!   queue's notifications ([`dispatch`]), and its outcome once it is over.
//! - [`workers`]: this process's worker loops, the upkeep that takes back expired leases, and
//!   the drain of a process that shuts down.
//! - [`cancel`]: the one way to stop a run, wherever it executes: through the queue.

pub(crate) mod cancel;
pub(crate) mod dispatch;
mod execute;
pub(crate) mod follow;
mod kwargs;
mod lease;
pub(crate) mod plan;
pub(crate) mod retention;
mod settle;
pub(crate) mod start;
pub(crate) mod workers;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value as Json, json};
use stategraph_checkpoint::Error;
use stategraph_runs::{CancelAction, RunQueue};

use crate::error::ApiError;

pub(crate) use kwargs::RunKwargs;

/// How a run is asked to stop.
#[derive(Clone, Debug)]
pub(crate) struct Cancel {
    pub(crate) action: CancelAction,
    /// Why (the error recorded on its thread).
    pub(crate) reason: String,
}

impl Cancel {
    /// A stop request from the queue, with the reason its maker gave (or, without one, the
    /// action's name).
    pub(crate) fn of(action: CancelAction, reason: &str) -> Self {
        Self {
            action,
            reason: if reason.is_empty() {
                format!("{} requested", action.as_str())
            } else {
                reason.to_owned()
            },
        }
    }
}

/// What stops a run executing in this process.
#[derive(Clone, Debug)]
pub(crate) enum Stop {
    /// A cancel (through the queue, from any process).
    Cancel(Cancel),
    /// This process shuts down: the run stops and is given back to the queue, for another
    /// worker to carry on from its last checkpoint.
    Release,
}

/// How a run ended, as `runs/wait` and its other callers read it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Outcome {
    /// The last state values streamed.
    pub(crate) values: Json,
    /// Interrupts the run stopped on.
    pub(crate) interrupts: Vec<Json>,
    /// `{"error", "message"}` when it failed.
    pub(crate) error: Option<Json>,
}

impl Outcome {
    /// What `runs/wait` answers: the values, with `__interrupt__` if the run stopped on
    /// interrupts, or `{"__error__": …}`.
    pub(crate) fn to_wait_json(&self) -> Json {
        if let Some(e) = &self.error {
            return json!({ "__error__": e });
        }
        let mut values = self.values.clone();
        if !self.interrupts.is_empty()
            && let Some(o) = values.as_object_mut()
        {
            o.insert("__interrupt__".into(), Json::Array(self.interrupts.clone()));
        }
        values
    }

    /// The outcome whose `runs/wait` answer is `answer`.
    pub(crate) fn from_wait_json(answer: Json) -> Self {
        let mut values = answer;
        if let Some(e) = values.get("__error__") {
            return Self {
                values: Json::Object(Default::default()),
                interrupts: Vec::new(),
                error: Some(e.clone()),
            };
        }
        let interrupts = match values
            .as_object_mut()
            .and_then(|o| o.remove("__interrupt__"))
        {
            Some(Json::Array(list)) => list,
            _ => Vec::new(),
        };
        Self {
            values,
            interrupts,
            error: None,
        }
    }
}

/// Worker loops per process unless [`ServerBuilder::workers`](crate::ServerBuilder::workers)
/// says otherwise: the reference server's `N_JOBS_PER_WORKER` default. A run spends most of
/// its time waiting on the database (and on models), so one process keeps several in flight.
pub const DEFAULT_WORKERS: usize = 10;

/// How long, by default, a process that shuts down waits for the runs it executes to end
/// before it gives the rest back to the queue
/// ([`ServerBuilder::shutdown_grace`](crate::ServerBuilder::shutdown_grace)).
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// The server's run queue and this process's side of it.
pub(crate) struct Runs {
    pub(crate) queue: Arc<dyn RunQueue>,
    /// The process's subscription to the queue, turned into wake-ups and stop requests.
    pub(crate) dispatch: dispatch::Dispatch,
    workers: usize,
    /// This process's worker names: `{prefix}-{index}`, `{prefix}-caller-{n}`.
    prefix: String,
    names: AtomicU64,
    started: AtomicBool,
    /// How many of the worker loops execute a run now.
    active: AtomicUsize,
    /// Raised when the process shuts down: no more claims.
    pub(crate) draining: tokio::sync::watch::Sender<bool>,
    /// How long a shutdown waits for the runs executing here.
    pub(crate) grace: Duration,
    /// How long ended runs keep their events.
    pub(crate) retention: Duration,
}

impl Runs {
    pub(crate) fn new(
        queue: Arc<dyn RunQueue>,
        workers: usize,
        grace: Duration,
        retention: Duration,
    ) -> Self {
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "host".into());
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        let prefix = format!(
            "{host}-{}-{}",
            std::process::id(),
            nonce.get(..8).unwrap_or(&nonce)
        );
        Self {
            queue,
            dispatch: dispatch::Dispatch::default(),
            workers,
            prefix,
            names: AtomicU64::new(0),
            started: AtomicBool::new(false),
            active: AtomicUsize::new(0),
            draining: tokio::sync::watch::Sender::new(false),
            grace,
            retention,
        }
    }

    /// This process's worker loops, and how many of them execute a run now.
    pub(crate) fn workers_in_use(&self) -> (usize, usize) {
        (self.workers, self.active.load(Ordering::Relaxed))
    }

    /// A worker name of this process no other task has: for a run a caller follows, claimed
    /// by the task that received it.
    pub(crate) fn caller_name(&self) -> String {
        let n = self.names.fetch_add(1, Ordering::Relaxed);
        format!("{}-caller-{n}", self.prefix)
    }

    /// Whether the process is shutting down.
    pub(crate) fn is_draining(&self) -> bool {
        *self.draining.borrow()
    }
}

/// The queue's error as an API error: a conflict is LangGraph's 409 of a busy thread.
pub(crate) fn api_error(e: Error) -> ApiError {
    match e {
        Error::Conflict { .. } => ApiError::conflict(
            "Thread is already running a task. Wait for it to finish or choose a different \
             multitask strategy.",
        ),
        e => ApiError::from(e),
    }
}
