//! Fencing: checkpoint writes conditioned on a run's lease, checked by the saver in the
//! write's own transaction.

/// A run's lease as a condition on the checkpoint writes made for the run (fencing): a saver
/// on the queue's database that takes it
/// ([`CheckpointSaver::fenced`](crate::CheckpointSaver::fenced)) commits a write only if, in
/// the same transaction, the run is still running and held by `worker` with its lease not run
/// out. A worker that stalled past its lease (a pause, a frozen VM) and wakes up has its next
/// write refused with [`Error::LeaseLost`](crate::Error::LeaseLost), writing nothing. Made by
/// the run queue (`RunQueue::fence` of `stategraph-runs`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunFence {
    /// The database that holds the queue, as the queue identifies it: a saver fences writes
    /// only on the same database.
    pub database: String,
    /// The queue's table of runs, as SQL names it.
    pub relation: String,
    /// The run.
    pub run_id: String,
    /// The worker that holds its lease.
    pub worker: String,
}

impl RunFence {
    /// The fence of `run_id` held by `worker`, on `relation` of `database` (for
    /// implementations of a run queue).
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
