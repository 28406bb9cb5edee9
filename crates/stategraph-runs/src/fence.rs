//! Fencing: a run's checkpoint writes conditioned on its lease, checked by a saver on the
//! queue's database in each write's own transaction.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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
    /// `None` when the fence is of another database handle than the one this saver was built
    /// from.
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
    /// The database handle the queue was built from: a saver built from the same handle
    /// fences writes by it.
    pub database: DatabaseId,
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
        database: DatabaseId,
        relation: impl Into<String>,
        run_id: impl Into<String>,
        worker: impl Into<String>,
    ) -> Self {
        Self {
            database,
            relation: relation.into(),
            run_id: run_id.into(),
            worker: worker.into(),
        }
    }
}

/// One opened database handle, as the saver and the run queue built from it know it: a
/// queue's [`RunFence`] names it, and a saver fences writes only by a fence of its own
/// handle — the one place both can condition a write on the run's row in one transaction.
///
/// Minted once per handle ([`DatabaseId::new`]); clones of a handle, and everything built
/// from it, share the id. Two handles opened on the same database have different ids: a
/// saver and a queue meant to fence each other are built from one handle.
///
/// ```
/// use stategraph_runs::DatabaseId;
/// let a = DatabaseId::new();
/// assert_eq!(a, a.clone());
/// assert_ne!(a, DatabaseId::new());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DatabaseId(u64);

impl DatabaseId {
    /// A new id, distinct from every other of this process.
    #[allow(clippy::new_without_default)] // a default would hide that each call mints one
    pub fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}
