//! This process's side of the run queue: worker loops that claim runs and execute them, the
//! subscription that wakes them ([`dispatch::listen`]), the upkeep that takes back runs whose
//! lease ran out, and the drain of a process that shuts down (no more claims; the runs
//! executing here finish within a grace period, the rest are given back to the queue).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{Stop, dispatch, execute::execute, retention};
use crate::app::AppState;

/// How long an idle worker loop waits for a wake-up before it looks at the queue anyway
/// (a notification may be lost; a delayed run comes due): one claim a process, not busy
/// polling.
const IDLE_LOOK: Duration = Duration::from_secs(2);

/// Starts the server's worker loops, its subscription and its upkeep (once).
pub(crate) fn spawn(state: &Arc<AppState>) {
    let runs = &state.runs;
    if runs.started.swap(true, Ordering::SeqCst) {
        return;
    }
    crate::prometheus::spawn_upkeep();
    tokio::spawn(dispatch::listen(Arc::clone(state)));
    tokio::spawn(requeue_loop(Arc::clone(state)));
    tokio::spawn(idle_look(Arc::clone(state)));
    retention::spawn(state);
    for i in 0..runs.workers {
        let worker = format!("{}-{i}", runs.prefix);
        tokio::spawn(worker_loop(Arc::clone(state), worker));
    }
}

/// Every [`IDLE_LOOK`], wakes one idle worker loop, if any, to look at the queue: what a lost
/// notification (or a run that came due) left claimable is claimed within that time, at the
/// cost of one claim per process.
async fn idle_look(state: Arc<AppState>) {
    let mut every = tokio::time::interval(IDLE_LOOK);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let (workers, active) = state.runs.workers_in_use();
        if active < workers && !state.runs.is_draining() {
            state.runs.dispatch.wake.notify_one();
        }
    }
}

/// Takes back runs whose lease ran out, every half lease.
async fn requeue_loop(state: Arc<AppState>) {
    let queue = Arc::clone(&state.runs.queue);
    let every = (queue.lease() / 2).max(Duration::from_millis(20));
    loop {
        tokio::time::sleep(every).await;
        if let Err(e) = queue.requeue_expired().await {
            tracing::debug!(error = %e, "runs whose lease ran out could not be taken back now");
        }
    }
}

/// Claims and executes runs, one at a time, as `worker`: the next run comes with the end of
/// the last one while there are runs to claim; then the loop waits to be woken. Stops
/// claiming once the process drains.
async fn worker_loop(state: Arc<AppState>, worker: String) {
    let runs = &state.runs;
    let queue = Arc::clone(&runs.queue);
    let mut draining = runs.draining.subscribe();
    loop {
        if *draining.borrow() {
            return;
        }
        // Registered before the claim, so that a wake-up during it is not missed.
        let woken = runs.dispatch.wake.notified();
        match queue.claim(&worker, None).await {
            Ok(Some(claimed)) => {
                runs.active.fetch_add(1, Ordering::Relaxed);
                let mut next = Some(claimed);
                while let Some(claimed) = next {
                    next = execute(&state, claimed, &worker, true).await.next;
                }
                runs.active.fetch_sub(1, Ordering::Relaxed);
            }
            Ok(None) => {
                tokio::select! {
                    () = woken => {}
                    _ = draining.changed() => {}
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "a claim failed; trying again");
                tokio::time::sleep(IDLE_LOOK / 4).await;
            }
        }
    }
}

/// Drains this process as it shuts down: no run is claimed any more; the runs executing
/// here are given `grace` to end; those still running then are stopped and given back to
/// the queue (another process's worker carries each on from its last checkpoint). Returns
/// once no run executes here.
pub(crate) async fn drain(state: &AppState) {
    let runs = &state.runs;
    runs.draining.send_replace(true);
    let deadline = tokio::time::Instant::now() + runs.grace;
    while !runs.dispatch.running_here().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let left = runs.dispatch.running_here();
    if !left.is_empty() {
        tracing::info!(
            runs = left.len(),
            "shutting down: the runs still executing here go back to the queue"
        );
    }
    for run_id in &left {
        runs.dispatch.stop(run_id, Stop::Release);
    }
    // Each gives its run back once its saves are committed.
    let limit = tokio::time::Instant::now() + Duration::from_secs(30);
    while !runs.dispatch.running_here().is_empty() && tokio::time::Instant::now() < limit {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
