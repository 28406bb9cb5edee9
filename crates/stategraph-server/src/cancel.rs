//! Cancelling runs wherever they run: through the run queue for runs on threads, in this
//! process for stateless runs; and waiting, briefly, for their records to be final.

use std::time::Duration;

use stategraph_checkpoint::runs::RunStatus;

use crate::app::{AppState, Cancel};
use crate::error::ApiError;
use crate::records::{Object, RunRecord};

/// How long a cancel without `wait` waits for the run's records to be final before it
/// answers anyway (a run stops at its next await, so normally at once).
pub(crate) const CANCEL_SETTLE: Duration = Duration::from_secs(1);

/// The ids of the runs still `pending` or `running` whose record `pick` selects, among
/// those matching `filter` (record fields).
pub(crate) async fn in_flight(
    state: &AppState,
    filter: &Object,
    pick: impl Fn(&RunRecord) -> bool,
) -> Result<Vec<String>, ApiError> {
    let mut ids = Vec::new();
    for status in [RunStatus::Pending, RunStatus::Running] {
        let mut filter = filter.clone();
        filter.insert("status".into(), status.as_str().into());
        for run in state.records.search::<RunRecord>(filter).await? {
            if pick(&run) {
                ids.push(run.run_id);
            }
        }
    }
    Ok(ids)
}

/// Cancels `run_ids` (those pending or running) and waits, up to [`CANCEL_SETTLE`], for
/// their records to be final; how many were pending or running.
pub(crate) async fn cancel_and_settle(
    state: &AppState,
    run_ids: &[String],
    cancel: &Cancel,
) -> usize {
    {
        // Queued runs stop wherever they run; the others are this process's.
        use crate::worker::{Cancelled, request_cancel, settle};
        let mut count = 0;
        let mut local = Vec::new();
        let mut signalled = Vec::new();
        for id in run_ids {
            match request_cancel(state, id, cancel).await {
                Ok(Cancelled::Ended) => count += 1,
                Ok(Cancelled::Signalled) => signalled.push(id.as_str()),
                Ok(Cancelled::Finished) => {}
                Ok(Cancelled::NotQueued) | Err(_) => local.push(id.clone()),
            }
        }
        count += signalled.len();
        let settled = signalled
            .iter()
            .map(|id| settle(state, id, Some(CANCEL_SETTLE)));
        futures_util::future::join_all(settled).await;
        count + local_cancel_and_settle(state, &local, cancel).await
    }
}

/// [`cancel_and_settle`] for runs in flight in this process.
async fn local_cancel_and_settle(state: &AppState, run_ids: &[String], cancel: &Cancel) -> usize {
    let mut ended: Vec<_> = run_ids
        .iter()
        .filter_map(|id| state.cancel_run(id, cancel))
        .collect();
    let count = ended.len();
    // Each wait drops its `Ref` at once (a `Ref` may not cross an await).
    let all = futures_util::future::join_all(ended.iter_mut().map(|e| async move {
        let _ = e.wait_for(|ended| *ended).await;
    }));
    let _ = tokio::time::timeout(CANCEL_SETTLE, all).await;
    count
}
