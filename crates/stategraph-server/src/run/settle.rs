//! What a run's end records: its status, and the state it left its thread with, as
//! LangGraph's server records them.

use serde_json::{Map as JsonMap, Value as Json, json};
use stategraph_graph::{Interrupt, StateSnapshot, Values};
use stategraph_runs::{CancelAction, RunStatus, ThreadState, ThreadStatus};

use super::{Cancel, Outcome};
use crate::wire::{output_json, thread_interrupts};

/// How a run left its thread: what the thread's state and the run's outcome say of it.
pub(super) struct Left {
    /// The thread's latest values.
    pub(super) values: Json,
    /// Its pending interrupts by task id, as the thread's state keeps them.
    pub(super) thread_interrupts: Json,
    /// Its pending interrupts, as a run's outcome lists them.
    pub(super) interrupts: Vec<Json>,
    /// The thread waits: nodes are next, or interrupts wait for answers.
    pub(super) waiting: bool,
}

impl Left {
    /// The thread as its latest state says, of a graph whose output is `output`
    /// ([`ServedGraph::output_channel`](crate::graph::ServedGraph::output_channel)).
    pub(super) fn of(s: &StateSnapshot, output: Option<&str>) -> Self {
        Self {
            values: output_json(&s.values, output),
            thread_interrupts: thread_interrupts(s),
            interrupts: s.interrupts.iter().map(Interrupt::to_object_json).collect(),
            waiting: !s.next.is_empty() || !s.interrupts.is_empty(),
        }
    }

    /// The thread a completed run left: its final values, nothing next, no interrupts (the
    /// state it would be read back as, without the read).
    pub(super) fn completed(values: &Values, output: Option<&str>) -> Self {
        Self {
            values: output_json(values, output),
            thread_interrupts: Json::Object(JsonMap::new()),
            interrupts: Vec::new(),
            waiting: false,
        }
    }
}

/// How a run ended, as its record says: `interrupted` when cancelled (or deleted by a
/// rollback), `error` when it failed, else `success` (a run that stopped on an interrupt
/// succeeded: its run status `interrupted` means cancelled, as LangGraph's server says).
pub(super) fn run_status(outcome: &Outcome, cancel: Option<&Cancel>) -> RunStatus {
    match (&outcome.error, cancel) {
        (_, Some(_)) => RunStatus::Interrupted,
        (Some(_), None) => RunStatus::Error,
        (None, None) => RunStatus::Success,
    }
}

/// The error a cancel leaves on the run's thread, as LangGraph's server records the
/// `UserInterrupt` / `UserRollback` it raises in the run.
pub(super) fn cancel_error(cancel: &Cancel) -> Json {
    let name = match cancel.action {
        CancelAction::Interrupt => "UserInterrupt",
        CancelAction::Rollback => "UserRollback",
    };
    json!({ "error": name, "message": cancel.reason })
}

/// The state a run that ended `status` leaves its thread with: `error` after a failure,
/// `interrupted` when the thread waits (nodes next, interrupts to answer), else `idle`; its
/// values and interrupts as `left` (the thread's latest state; `None` when it could not be
/// read: those of `before`, the state it had); the run's error, or the cancel's.
pub(super) fn thread_state(
    status: RunStatus,
    left: Option<&Left>,
    before: Option<&ThreadState>,
    outcome: &Outcome,
    cancel: Option<&Cancel>,
) -> ThreadState {
    let waiting = left.is_some_and(|l| l.waiting);
    let thread_status = match status {
        RunStatus::Error => ThreadStatus::Error,
        _ if waiting => ThreadStatus::Interrupted,
        _ => ThreadStatus::Idle,
    };
    let (values, interrupts) = match (left, before) {
        (Some(l), _) => (l.values.clone(), l.thread_interrupts.clone()),
        (None, Some(b)) => (b.values.clone(), b.interrupts.clone()),
        (None, None) => (Json::Null, Json::Object(JsonMap::new())),
    };
    let error = match cancel {
        Some(c) => cancel_error(c),
        None => outcome.error.clone().unwrap_or(Json::Null),
    };
    ThreadState::new(thread_status, values, interrupts).error(error)
}
