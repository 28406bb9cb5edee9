//! The queue's notifications: changes announced after they happened, as a wake-up (not the
//! truth: after a lost subscription, read the queue again).

use std::fmt;

use tokio::sync::mpsc;

use super::{CancelAction, RunStatus};

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
        /// Its thread.
        thread_id: String,
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

    /// The thread it is about, when it says.
    pub fn thread_id(&self) -> Option<&str> {
        match self {
            Self::Enqueued { thread_id, .. }
            | Self::Requeued { thread_id, .. }
            | Self::Finished { thread_id, .. } => Some(thread_id),
            Self::Cancel { .. } | Self::Event { .. } => None,
        }
    }
}

/// A subscription to a queue's [`Notification`]s; made by [`RunQueue::subscribe`](super::RunQueue::subscribe). Dropping
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
