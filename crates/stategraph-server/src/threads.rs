//! Threads: their documents joined with what the run queue keeps of them, the graph that
//! runs on each, their deletion, and their TTL.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::Utc;
use serde_json::Value as Json;
use stategraph_checkpoint::PruneStrategy;
use stategraph_runs::{Deletion, RunStatus, ThreadRow, ThreadStatus};
use stategraph_store::filter::json_contains;

use crate::app::AppState;
use crate::crons::CronRecord;
use crate::error::ApiError;
use crate::graph::ServedGraph;
use crate::records::{
    HasGraph, Marker, Object, ThreadDoc, ThreadHead, ThreadRecord, TtlStrategy, filter,
};
use crate::run::{Cancel, api_error, cancel};

/// How many threads one read of the run queue asks about.
const CHUNK: usize = 500;

/// Thread `thread_id`'s document, or 404.
pub(crate) async fn load_doc(state: &AppState, thread_id: &str) -> Result<ThreadDoc, ApiError> {
    state
        .records
        .get::<ThreadDoc>(thread_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("Thread with ID {thread_id} not found")))
}

/// Thread `thread_id` as the API answers it, or 404.
pub(crate) async fn load(state: &AppState, thread_id: &str) -> Result<ThreadRecord, ApiError> {
    let doc = load_doc(state, thread_id).await?;
    Ok(view(state, vec![doc]).await?.remove(0))
}

/// What reading thread `thread_id`'s state needs of its document (404 without one): no
/// status, none of its values.
pub(crate) async fn load_head(state: &AppState, thread_id: &str) -> Result<ThreadHead, ApiError> {
    state
        .records
        .get::<ThreadHead>(thread_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("Thread with ID {thread_id} not found")))
}

/// What the run queue knows of `thread_ids`, by thread.
pub(crate) async fn rows(
    state: &AppState,
    thread_ids: Vec<String>,
) -> Result<std::collections::HashMap<String, ThreadRow>, ApiError> {
    let mut out = std::collections::HashMap::with_capacity(thread_ids.len());
    for chunk in thread_ids.chunks(CHUNK) {
        let found = state.runs.queue.threads(chunk).await.map_err(api_error)?;
        out.extend(found.into_iter().map(|r| (r.thread_id.clone(), r)));
    }
    Ok(out)
}

/// `docs` as the API answers them, in the same order.
pub(crate) async fn view(
    state: &AppState,
    docs: Vec<ThreadDoc>,
) -> Result<Vec<ThreadRecord>, ApiError> {
    let ids = docs.iter().map(|d| d.thread_id.clone()).collect();
    let rows = rows(state, ids).await?;
    Ok(docs
        .into_iter()
        .map(|d| {
            let row = rows.get(&d.thread_id);
            ThreadRecord::of(d, row)
        })
        .collect())
}

/// What a thread search filters on.
#[derive(Default)]
pub(crate) struct ThreadFilter {
    /// Containment in the metadata.
    pub(crate) metadata: Option<Object>,
    /// Containment in the values.
    pub(crate) values: Option<Object>,
    pub(crate) status: Option<ThreadStatus>,
    pub(crate) ids: Option<Vec<String>>,
}

/// Every thread matching `f`, as the API answers them, unsorted.
pub(crate) async fn search_threads(
    state: &AppState,
    f: ThreadFilter,
) -> Result<Vec<ThreadRecord>, ApiError> {
    // The metadata is the store's; the status and values are the queue's, filtered on once
    // read.
    let by = match f.metadata.filter(|m| !m.is_empty()) {
        Some(m) => filter("metadata", Json::Object(m)),
        None => Object::new(),
    };
    let mut docs = state.records.search::<ThreadDoc>(by).await?;
    if let Some(ids) = &f.ids {
        docs.retain(|d| ids.contains(&d.thread_id));
    }
    let mut found = view(state, docs).await?;
    if let Some(status) = f.status {
        found.retain(|t| t.status == status);
    }
    if let Some(values) = f.values.filter(|v| !v.is_empty()) {
        let wanted = Json::Object(values);
        found.retain(|t| json_contains(&t.values, &wanted));
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

/// Deletes a thread with its runs, crons and checkpoints. Deliberately, its runs in flight
/// are stopped first (LangGraph's server only drops the run records), so that none writes
/// checkpoints to the deleted thread.
pub(crate) async fn stop_and_delete(state: &AppState, thread_id: &str) -> Result<(), ApiError> {
    let in_flight = cancel::in_flight(
        state,
        Some(thread_id),
        &[RunStatus::Pending, RunStatus::Running],
    )
    .await?;
    let stop = Cancel {
        action: stategraph_runs::CancelAction::Interrupt,
        reason: format!("thread {thread_id} was deleted"),
    };
    cancel::cancel_and_settle(state, &in_flight, &stop).await;
    state
        .records
        .delete_matching::<CronRecord>(filter("thread_id", thread_id))
        .await?;
    state.saver.delete_thread(thread_id).await?;
    state
        .runs
        .queue
        .delete(Deletion::Thread(thread_id))
        .await
        .map_err(api_error)?;
    state.records.delete::<ThreadDoc>(thread_id).await?;
    Ok(())
}

/// Moves the thread states an earlier version kept in the store's thread documents to the
/// run queue, once per database (a marker document says it was done): without it, threads
/// that last ran before the upgrade would read without values until their next run.
pub(crate) async fn import_legacy_states(state: &AppState) -> Result<(), ApiError> {
    const MARKER: &str = "thread_states_in_run_queue";
    let marked = state.records.get::<Marker>(MARKER).await?.is_some();
    if marked {
        return Ok(());
    }
    let docs = state.records.search::<ThreadDoc>(Object::new()).await?;
    let legacy: Vec<_> = docs
        .iter()
        .filter_map(|d| d.legacy_state().map(|s| (d.thread_id.clone(), s)))
        .collect();
    if !legacy.is_empty() {
        let known = rows(state, legacy.iter().map(|(id, _)| id.clone()).collect()).await?;
        for (id, thread_state) in legacy {
            if known.get(&id).is_none_or(|r| r.state.is_none()) {
                state
                    .runs
                    .queue
                    .set_thread(&id, &thread_state, true)
                    .await
                    .map_err(api_error)?;
            }
        }
    }
    let marker = Marker {
        name: MARKER.to_owned(),
        at: stategraph_checkpoint::now_iso(),
    };
    state.records.put(&marker).await
}

/// How often, by default, a process looks for threads past their TTL
/// ([`ServerBuilder::thread_ttl_sweep`](crate::ServerBuilder::thread_ttl_sweep)).
pub const DEFAULT_THREAD_TTL_SWEEP: Duration = Duration::from_secs(60);

/// This process's sweeper of threads past their TTL.
pub(crate) struct TtlSweeper {
    every: Duration,
    started: AtomicBool,
}

impl TtlSweeper {
    pub(crate) fn new(every: Duration) -> Self {
        Self {
            every,
            started: AtomicBool::new(false),
        }
    }
}

/// Starts this process's TTL sweeper (once).
pub(crate) fn spawn_ttl_sweeper(state: &Arc<AppState>) {
    if state.thread_ttl.started.swap(true, Ordering::SeqCst) {
        return;
    }
    let state = Arc::clone(state);
    tokio::spawn(async move {
        loop {
            if let Err(e) = sweep_ttl(&state).await {
                tracing::warn!(
                    error = e.detail,
                    "threads past their TTL could not be swept"
                );
            }
            tokio::time::sleep(state.thread_ttl.every).await;
        }
    });
}

/// Sweeps the threads whose TTL ran out: those with no activity (a run, a state update, a
/// change of the thread) for longer than their TTL, and no run in flight; `delete` deletes
/// the thread with its runs and checkpoints, `keep_latest` deletes its checkpoints but the
/// latest. How many threads were swept.
pub(crate) async fn sweep_ttl(state: &AppState) -> Result<usize, ApiError> {
    // Threads that have a TTL (an object under `ttl`).
    let with_ttl = filter("ttl", Json::Object(Object::new()));
    let docs: Vec<ThreadDoc> = state
        .records
        .search::<ThreadDoc>(with_ttl)
        .await?
        .into_iter()
        .filter(|d| d.ttl.is_some_and(|t| t.ttl.is_some()))
        .collect();
    if docs.is_empty() {
        return Ok(0);
    }
    let now = Utc::now();
    let mut swept = 0;
    for thread in view_with_ttl(state, docs).await? {
        let (record, ttl) = thread;
        if record.status == ThreadStatus::Busy {
            continue;
        }
        if ttl.expires_at(&record.updated_at).is_none_or(|at| at > now) {
            continue;
        }
        match ttl.strategy {
            TtlStrategy::Delete => stop_and_delete(state, &record.thread_id).await?,
            TtlStrategy::KeepLatest => {
                state
                    .saver
                    .prune(
                        std::slice::from_ref(&record.thread_id),
                        PruneStrategy::KeepLatest,
                    )
                    .await?;
                // Pruned now: its next TTL runs from here.
                if let Some(mut doc) = state.records.get::<ThreadDoc>(&record.thread_id).await? {
                    doc.updated_at = stategraph_checkpoint::now_iso();
                    state.records.put(&doc).await?;
                }
            }
        }
        tracing::info!(thread_id = record.thread_id, strategy = ?ttl.strategy, "a thread's TTL ran out");
        swept += 1;
    }
    Ok(swept)
}

/// `docs` (each with a TTL) as the API answers them, with their TTL.
async fn view_with_ttl(
    state: &AppState,
    docs: Vec<ThreadDoc>,
) -> Result<Vec<(ThreadRecord, crate::records::ThreadTtl)>, ApiError> {
    let ttls: Vec<_> = docs.iter().filter_map(|d| d.ttl).collect();
    Ok(view(state, docs).await?.into_iter().zip(ttls).collect())
}
