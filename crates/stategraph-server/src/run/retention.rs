//! Retention: an ended run keeps its events in the run queue only as long as a client may
//! still want them — a joiner resuming after its `Last-Event-ID`, from any process — then
//! they are purged (the run itself stays with its thread; a stateless run's goes with its
//! events). Each process that started purges, now and then, the events of runs that ended
//! longer ago than the retention, in bounded batches that never hold the queue up.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use stategraph_runs::Deletion;

use crate::app::AppState;

/// How many ended runs one call purges at most.
const BATCH: u32 = 500;

/// The longest pause between two sweeps.
const MAX_SWEEP_EVERY: Duration = Duration::from_secs(60);

/// The shortest.
const MIN_SWEEP_EVERY: Duration = Duration::from_millis(100);

/// How often to look for runs past the retention `keep`: a quarter of it, within bounds.
fn sweep_every(keep: Duration) -> Duration {
    (keep / 4).clamp(MIN_SWEEP_EVERY, MAX_SWEEP_EVERY)
}

/// Starts this process's sweeper (called once, with the worker loops).
pub(crate) fn spawn(state: &Arc<AppState>) {
    let state = Arc::clone(state);
    tokio::spawn(async move {
        let every = sweep_every(state.runs.retention);
        loop {
            tokio::time::sleep(every).await;
            sweep(&state).await;
        }
    });
}

/// Purges the events of runs that ended before the retention, a batch at a time (yielding
/// between batches); how many runs.
pub(crate) async fn sweep(state: &AppState) -> u64 {
    let queue = state.runs.queue.as_ref();
    let mut total = 0;
    loop {
        let Some(cut) = SystemTime::now().checked_sub(state.runs.retention) else {
            return total;
        };
        let purge = Deletion::EventsEndedBefore {
            ended_before: cut,
            limit: BATCH,
        };
        match queue.delete(purge).await {
            Ok(n) => {
                total += n;
                if n > 0 {
                    metrics::counter!("stategraph_server_runs_purged_total").increment(n);
                }
                if n < u64::from(BATCH) {
                    if total > 0 {
                        tracing::debug!(
                            purged = total,
                            "ended runs' events past the retention purged"
                        );
                    }
                    return total;
                }
                tokio::task::yield_now().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "ended runs' events could not be purged; trying again later");
                return total;
            }
        }
    }
}
