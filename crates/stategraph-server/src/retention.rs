//! Retention: a finished run stays in the run queue, with its events, only as long as a
//! client may still want them — a joiner resuming after its `Last-Event-ID`, from any
//! process — then it is deleted (its record, what the API lists, stays with its thread).
//! Each process that started deletes, now and then, the runs that ended longer ago than the
//! retention, in bounded batches that never hold the queue up.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use crate::app::AppState;

/// How many finished runs one statement deletes at most.
const BATCH: u32 = 500;

/// The longest pause between two sweeps.
const MAX_SWEEP_EVERY: Duration = Duration::from_secs(60);

/// The shortest.
const MIN_SWEEP_EVERY: Duration = Duration::from_millis(100);

/// How long finished runs are kept, and whether this process sweeps already.
pub(crate) struct Retention {
    pub(crate) keep: Duration,
    started: AtomicBool,
}

impl Retention {
    pub(crate) fn new(keep: Duration) -> Self {
        Self {
            keep,
            started: AtomicBool::new(false),
        }
    }

    /// How often to look for runs past the retention: a quarter of it, within bounds.
    fn sweep_every(&self) -> Duration {
        (self.keep / 4).clamp(MIN_SWEEP_EVERY, MAX_SWEEP_EVERY)
    }
}

/// Starts this process's sweeper (once).
pub(crate) fn spawn(state: &Arc<AppState>) {
    if state.retention.started.swap(true, Ordering::SeqCst) {
        return;
    }
    tokio::spawn(sweep_loop(Arc::clone(state)));
}

async fn sweep_loop(state: Arc<AppState>) {
    let every = state.retention.sweep_every();
    loop {
        tokio::time::sleep(every).await;
        sweep(&state).await;
    }
}

/// Deletes the runs that ended before the retention, a batch at a time (yielding between
/// batches); how many.
pub(crate) async fn sweep(state: &AppState) -> u64 {
    let queue = crate::worker::queue_of(state);
    let mut total = 0;
    loop {
        let Some(cut) = SystemTime::now().checked_sub(state.retention.keep) else {
            return total;
        };
        match queue.purge_finished(cut, BATCH).await {
            Ok(n) => {
                total += n;
                if n > 0 {
                    metrics::counter!("stategraph_server_runs_purged_total").increment(n);
                }
                if n < u64::from(BATCH) {
                    if total > 0 {
                        tracing::debug!(purged = total, "finished runs past the retention deleted");
                    }
                    return total;
                }
                tokio::task::yield_now().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "finished runs could not be deleted; trying again later");
                return total;
            }
        }
    }
}
