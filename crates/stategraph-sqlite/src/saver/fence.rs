//! Fencing: a saver's checkpoint writes conditioned on a run's lease in the run queue's table
//! of the same file ([`FencingSaver::fenced`](stategraph_runs::FencingSaver::fenced)).

use std::time::SystemTime;

use stategraph_runs::RunFence;

use super::*;
use crate::runs::micros;

/// A run's lease as a condition on a saver's writes: checked first in each write's
/// transaction, which holds the file's write lock until it commits, so no takeover commits
/// between the check and the write.
#[derive(Debug)]
pub(super) struct Fence {
    run_id: String,
    worker: String,
}

impl Fence {
    pub(super) fn new(fence: &RunFence) -> Self {
        Self {
            run_id: fence.run_id.clone(),
            worker: fence.worker.clone(),
        }
    }

    /// Nothing, while the worker holds the run (running, its worker, its lease not run out);
    /// else [`Error::LeaseLost`].
    pub(super) fn check(&self, conn: &Connection) -> Result<()> {
        let held = conn
            .prepare_cached(
                "SELECT 1 FROM stategraph_runs WHERE run_id = ?1 AND worker = ?2 \
                 AND status = 'running' AND lease_until > ?3",
            )
            .and_then(|mut s| {
                s.exists(params![self.run_id, self.worker, micros(SystemTime::now())])
            })
            .map_err(db("checking a run's lease"))?;
        match held {
            true => Ok(()),
            false => Err(Error::LeaseLost {
                run_id: self.run_id.clone(),
                worker: self.worker.clone(),
            }),
        }
    }
}
