//! Fencing: a run's checkpoint writes conditioned on its lease, checked by a saver on the
//! queue's database in each write's own transaction.

use std::sync::Arc;

use stategraph_checkpoint::CheckpointSaver;

/// A checkpointer that can condition its writes on a run's lease ([`RunFence`]): the savers
/// of databases with a run queue (SQLite, Postgres) implement it, and a server given one
/// ([`ServerBuilder::fencing_checkpointer`] of `stategraph-server`) writes each run's
/// checkpoints through [`fenced`](Self::fenced).
///
/// [`ServerBuilder::fencing_checkpointer`]: https://docs.rs/stategraph-server
pub trait FencingSaver: CheckpointSaver {
    /// This saver with its writes fenced by `fence`: each write commits only while the run's
    /// worker holds the lease, checked in the write's own transaction, else fails with
    /// [`Error::LeaseLost`](stategraph_checkpoint::Error::LeaseLost) having written nothing.
    /// `None` when the fence is of another database than this saver's.
    fn fenced(&self, fence: &RunFence) -> Option<Arc<dyn CheckpointSaver>>;
}

/// A run's lease as a condition on the checkpoint writes made for the run (fencing): a saver
/// on the queue's database that takes it
/// ([`FencingSaver::fenced`]) commits a write only if, in
/// the same transaction, the run is still running and held by `worker` with its lease not run
/// out. A worker that stalled past its lease (a pause, a frozen VM) and wakes up has its next
/// write refused with [`Error::LeaseLost`](stategraph_checkpoint::Error::LeaseLost), writing nothing. Made by
/// [`RunQueue::fence`](crate::RunQueue::fence).
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
    /// implementations of [`RunQueue`](crate::RunQueue)).
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
