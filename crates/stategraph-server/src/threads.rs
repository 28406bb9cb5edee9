//! Threads: their records, with the status the run queue gives them, and the graph that runs
//! on each.

use crate::app::AppState;
use crate::error::ApiError;
use crate::graph::ServedGraph;
use crate::records::{HasGraph, Object, RunRecord, ThreadHead, ThreadRecord, filter};
use crate::worker::{api_error, queue_of};

/// The thread record, or 404, with its status as the run queue has it
/// ([`ThreadRecord::live`]).
pub(crate) async fn load(state: &AppState, thread_id: &str) -> Result<ThreadRecord, ApiError> {
    let found = state.records.get::<ThreadRecord>(thread_id).await?;
    live(state, thread_id, found).await
}

/// What reading thread `thread_id`'s state needs of its record (404 without one): no live
/// status, none of its values.
pub(crate) async fn load_head(state: &AppState, thread_id: &str) -> Result<ThreadHead, ApiError> {
    state
        .records
        .get::<ThreadHead>(thread_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("Thread with ID {thread_id} not found")))
}

/// Thread `thread_id` as [`load`] gives it, its record `found` already read.
pub(crate) async fn live(
    state: &AppState,
    thread_id: &str,
    found: Option<ThreadRecord>,
) -> Result<ThreadRecord, ApiError> {
    let mut thread = found
        .ok_or_else(|| ApiError::not_found(format!("Thread with ID {thread_id} not found")))?;
    let busy = queue_of(state)
        .runs_of_thread(thread_id)
        .await
        .map_err(api_error)?
        .iter()
        .any(|r| !r.status.is_final());
    thread.live(busy);
    Ok(thread)
}

/// Every thread record matching `filter` (store filter syntax on its fields) and, if given,
/// of status `status`, each with its live status.
pub(crate) async fn search_threads(
    state: &AppState,
    filter: Object,
    status: Option<&str>,
) -> Result<Vec<ThreadRecord>, ApiError> {
    // The status is the queue's: filtered on after it is read, not in the store.
    let busy = queue_of(state).busy_threads().await.map_err(api_error)?;
    let mut found = state.records.search::<ThreadRecord>(filter).await?;
    for thread in &mut found {
        let is_busy = busy.contains(&thread.thread_id);
        thread.live(is_busy);
    }
    if let Some(status) = status {
        found.retain(|t| t.status.as_str() == status);
    }
    Ok(found)
}

/// The graph that runs on a thread: the one its runs used, else the only (or first) one.
pub(crate) fn graph_of<'a>(
    state: &'a AppState,
    thread: &impl HasGraph,
) -> Result<&'a dyn ServedGraph, ApiError> {
    let graph = match thread.graph_id() {
        Some(id) => state.graphs.get(id),
        None => state.graphs.values().next(),
    };
    graph
        .map(AsRef::as_ref)
        .ok_or_else(|| ApiError::not_found("No graph serves this thread"))
}

/// Deletes a thread's record, its runs' records, its crons and its checkpoints (as the
/// reference cascades a thread's deletion to its runs and crons).
pub(crate) async fn delete_with_runs(state: &AppState, thread_id: &str) -> Result<(), ApiError> {
    let of_thread = || filter("thread_id", thread_id);
    state
        .records
        .delete_matching::<RunRecord>(of_thread())
        .await?;
    state
        .records
        .delete_matching::<crate::crons::CronRecord>(of_thread())
        .await?;
    state.saver.delete_thread(thread_id).await?;
    state.records.delete::<ThreadRecord>(thread_id).await?;
    Ok(())
}
