//! The statuses of runs and threads, and the choices a run is made with: its multitask
//! strategy and how it is asked to stop.

use std::fmt;

use serde::{Deserialize, Serialize};

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
