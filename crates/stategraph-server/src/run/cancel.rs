//! The one way to stop a run, wherever it executes: a request through the run queue, which
//! ends a pending run at once and signals a running one to its worker (this process's at
//! once, another's by the queue's notification or its next heartbeat); then, for callers
//! that wait, the run's end.

use std::time::Duration;

use stategraph_runs::{CancelOutcome, RunQuery, RunStatus};

use super::{Cancel, Stop, api_error, follow};
use crate::app::AppState;
use crate::error::ApiError;

/// How long a cancel without `wait` waits for the run to be over before it answers anyway
/// (a run stops at its next await, so normally at once).
pub(crate) const CANCEL_SETTLE: Duration = Duration::from_secs(1);

/// Asks run `run_id` to stop as `cancel` says; what the queue did.
pub(crate) async fn request(
    state: &AppState,
    run_id: &str,
    cancel: &Cancel,
) -> Result<CancelOutcome, ApiError> {
    let outcome = state
        .runs
        .queue
        .request_cancel(run_id, cancel.action, &cancel.reason)
        .await
        .map_err(api_error)?;
    if outcome == CancelOutcome::Signalled {
        // A run of this process stops at once, whether or not its notification comes.
        state
            .runs
            .dispatch
            .stop(run_id, Stop::Cancel(cancel.clone()));
    }
    Ok(outcome)
}

/// The ids of thread `thread_id`'s runs that are pending or running (every thread's with
/// `None`), those `pick` selects.
pub(crate) async fn in_flight(
    state: &AppState,
    thread_id: Option<&str>,
    statuses: &[RunStatus],
) -> Result<Vec<String>, ApiError> {
    let mut query = match thread_id {
        Some(t) => RunQuery::thread(t),
        None => RunQuery::new(),
    };
    query = query.statuses(statuses.iter().copied()).oldest_first();
    let runs = state.runs.queue.list(&query).await.map_err(api_error)?;
    Ok(runs.into_iter().map(|r| r.run_id).collect())
}

/// Cancels `run_ids` (those pending or running) and waits, up to [`CANCEL_SETTLE`], for them
/// to be over; how many were pending or running.
pub(crate) async fn cancel_and_settle(
    state: &AppState,
    run_ids: &[String],
    cancel: &Cancel,
) -> usize {
    let mut count = 0;
    let mut signalled = Vec::new();
    for id in run_ids {
        match request(state, id, cancel).await {
            Ok(CancelOutcome::Ended) => count += 1,
            Ok(CancelOutcome::Signalled) => signalled.push(id.as_str()),
            _ => {}
        }
    }
    count += signalled.len();
    let settled = signalled
        .iter()
        .map(|id| follow::settled(state, id, Some(CANCEL_SETTLE)));
    futures_util::future::join_all(settled).await;
    count
}
