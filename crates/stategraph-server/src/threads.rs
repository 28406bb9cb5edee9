//! Threads: their records, with the status the run queue gives them, and the graph that runs
//! on each.

use serde_json::{Map as JsonMap, Value as Json_, json};
use stategraph_checkpoint::now_iso;

use crate::app::AppState;
use crate::error::ApiError;
use crate::graph::ServedGraph;
use crate::records::{Kind, field_str};
use crate::worker::{api_error, queue_of};

/// A new thread record.
pub(crate) fn new_thread(thread_id: &str, metadata: JsonMap<String, Json_>) -> Json_ {
    let now = now_iso();
    json!({
        "thread_id": thread_id,
        "created_at": now,
        "updated_at": now,
        "state_updated_at": now,
        "metadata": metadata,
        "status": "idle",
        "config": {},
        "values": null,
    })
}

/// The thread record, or 404, with its status as the run queue has it ([`live_status`]).
pub(crate) async fn load(state: &AppState, thread_id: &str) -> Result<Json_, ApiError> {
    let mut thread = state
        .records
        .get(Kind::Thread, thread_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("Thread with ID {thread_id} not found")))?;
    let busy = queue_of(state)
        .runs_of_thread(thread_id)
        .await
        .map_err(api_error)?
        .iter()
        .any(|r| !r.status.is_final());
    live_status(&mut thread, busy);
    Ok(thread)
}

/// Sets a thread record's status from the run queue, which is the truth across processes:
/// `busy` while a run of the thread is pending or running (in any process), else the status
/// its last run left (a `busy` no run holds any more, left by a process that died mid-run,
/// reads `idle`). So a process settling the thread as its run ends cannot hide the run
/// another process enqueued meanwhile.
pub(crate) fn live_status(thread: &mut Json_, busy: bool) {
    let recorded = field_str(thread, "status");
    let status = match (busy, recorded) {
        (true, _) => "busy",
        (false, "busy") => "idle",
        _ => return,
    };
    if let Some(o) = thread.as_object_mut() {
        o.insert("status".into(), json!(status));
    }
}

/// Every thread record matching `filter` (store filter syntax, and `status`), each with its
/// live status.
pub(crate) async fn search_threads(
    state: &AppState,
    mut filter: JsonMap<String, Json_>,
) -> Result<Vec<Json_>, ApiError> {
    // The status is the queue's: filtered on after it is read, not in the store.
    let status = filter.remove("status");
    let busy = queue_of(state).busy_threads().await.map_err(api_error)?;
    let mut found = state.records.search(Kind::Thread, filter).await?;
    for thread in &mut found {
        let id = field_str(thread, "thread_id").to_owned();
        live_status(thread, busy.contains(&id));
    }
    if let Some(status) = status {
        found.retain(|t| t.get("status") == Some(&status));
    }
    Ok(found)
}

/// The graph that runs on a thread: the one its runs used, else the only (or first) one.
pub(crate) fn graph_of<'a>(
    state: &'a AppState,
    thread: &Json_,
) -> Result<&'a dyn ServedGraph, ApiError> {
    let named = thread
        .get("metadata")
        .and_then(|m| m.get("graph_id"))
        .and_then(Json_::as_str);
    let graph = match named {
        Some(id) => state.graphs.get(id),
        None => state.graphs.values().next(),
    };
    graph
        .map(AsRef::as_ref)
        .ok_or_else(|| ApiError::not_found("No graph serves this thread"))
}

/// Deletes a thread's record, its runs' records and its checkpoints (as the reference
/// cascades a thread's deletion to its runs).
pub(crate) async fn delete_with_runs(state: &AppState, thread_id: &str) -> Result<(), ApiError> {
    let mut filter = JsonMap::new();
    filter.insert("thread_id".into(), json!(thread_id));
    for run in state.records.search(Kind::Run, filter).await? {
        state
            .records
            .delete(Kind::Run, crate::records::field_str(&run, "run_id"))
            .await?;
    }
    state.saver.delete_thread(thread_id).await?;
    state.records.delete(Kind::Thread, thread_id).await?;
    Ok(())
}
