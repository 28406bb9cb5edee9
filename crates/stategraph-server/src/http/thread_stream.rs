//! Joining a thread's stream: `GET /threads/{thread_id}/stream` — every run of the thread,
//! those pending or running when the client joins and those created after, one after the
//! other as the thread runs them, until the client leaves (the UI's "reconnect to this
//! thread").

use std::collections::{HashSet, VecDeque};
use std::convert::Infallible;

use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use serde_json::json;
use stategraph_runs::{RunQuery, RunStatus};
use tokio::sync::mpsc;

use crate::app::{AppState, Shared};
use crate::error::ApiError;
use crate::http::extract::{Query, ThreadId};
use crate::http::runs::hub_event;
use crate::run::{api_error, follow};
use crate::stream_event::StreamEvent;
use crate::threads::load_head;

/// What a thread stream passes on (`stream_modes`, LangGraph's names).
#[derive(Clone, Copy, Debug, Default)]
struct Modes {
    /// Every event of the runs (the default).
    run_modes: bool,
    /// Each run's start (`metadata` with `run_id` and `attempt`) and end (`metadata` with
    /// `status: "run_done"`).
    lifecycle: bool,
    /// `state_update` events (state updates made outside runs).
    state_update: bool,
}

impl Modes {
    /// `stream_modes` as given: one mode, or several comma-separated (none: `run_modes`);
    /// 422 naming an unknown one.
    fn parse(given: &str) -> Result<Self, ApiError> {
        if given.trim_matches(',').is_empty() {
            return Ok(Self {
                run_modes: true,
                ..Self::default()
            });
        }
        let mut modes = Self::default();
        for mode in given.split(',').map(str::trim).filter(|m| !m.is_empty()) {
            match mode {
                "run_modes" => modes.run_modes = true,
                "lifecycle" => modes.lifecycle = true,
                "state_update" => modes.state_update = true,
                other => {
                    return Err(ApiError::invalid(format!("Invalid stream mode: {other}")));
                }
            }
        }
        Ok(modes)
    }

    fn passes(self, e: &StreamEvent) -> bool {
        if &*e.name == "state_update" {
            return self.state_update;
        }
        if self.run_modes {
            return true;
        }
        self.lifecycle
            && &*e.name == "metadata"
            && (e.data.get("status").and_then(|s| s.as_str()) == Some("run_done")
                || (e.data.get("attempt").is_some() && e.data.get("run_id").is_some()))
    }
}

/// The thread's runs that are pending or running, in queue order.
async fn unfinished(state: &AppState, thread_id: &str) -> Result<Vec<String>, ApiError> {
    let query = RunQuery::thread(thread_id)
        .statuses([RunStatus::Pending, RunStatus::Running])
        .oldest_first();
    let runs = state.runs.queue.list(&query).await.map_err(api_error)?;
    Ok(runs.into_iter().map(|r| r.run_id).collect())
}

/// `GET /threads/{thread_id}/stream`: the events of the thread's runs as they come, each
/// run's followed by `metadata` `{"status": "run_done", "run_id": …}`; `stream_modes`
/// (`run_modes`, the default; `lifecycle`; `state_update`; comma-separated or repeated, also
/// as `stream_mode`, the name LangGraph's SDKs send) chooses which.
/// Each run is streamed from its first event, whichever process runs it. An unknown thread
/// is 404.
#[utoipa::path(
    get,
    path = "/threads/{thread_id}/stream",
    operation_id = "get_threads_stream",
    tag = "Thread Runs",
    params(ThreadId, ("stream_mode" = Option<Vec<String>>, Query, description = "The stream modes to send (repeatable).")),
    responses((status = 200, description = "The events of the thread's runs (server-sent events).", content_type = "text/event-stream"))
)]
pub(crate) async fn join(
    axum::extract::State(state): Shared,
    ThreadId(thread_id): ThreadId,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    // The reference reads `stream_modes`; its SDKs send `stream_mode` (repeated for a list).
    let given: Vec<&str> = pairs
        .iter()
        .filter(|(k, _)| k == "stream_modes" || k == "stream_mode")
        .map(|(_, v)| v.as_str())
        .collect();
    let given = given.join(",");
    let modes = Modes::parse(&given)?;
    load_head(&state, &thread_id).await?;
    // Rung for every new run of the thread: taken before its runs are read, so that none
    // falls between.
    let mut bell = state.runs.dispatch.watch_thread(&thread_id);
    let mut runs: VecDeque<String> = unfinished(&state, &thread_id).await?.into();
    let (tx, rx) = mpsc::channel::<StreamEvent>(256);
    let keep_alive = KeepAlive::new()
        .interval(state.keep_alive)
        .text("heartbeat");
    tokio::spawn(async move {
        let mut seen: HashSet<String> = runs.iter().cloned().collect();
        loop {
            if let Some(run_id) = runs.pop_front() {
                follow::events(&state, &run_id, 0, &tx, None).await;
                let done = json!({ "status": "run_done", "run_id": run_id });
                if tx
                    .send(StreamEvent::new(&run_id, 0, "metadata", done))
                    .await
                    .is_err()
                {
                    return;
                }
                continue;
            }
            // Runs enqueued meanwhile go behind the ones known (a slow timer stands in for a
            // lost notification).
            tokio::select! {
                _ = tokio::time::timeout(std::time::Duration::from_secs(2), bell.changed()) => {}
                () = tx.closed() => return,
            }
            bell.borrow_and_update();
            let found = unfinished(&state, &thread_id).await.unwrap_or_default();
            runs.extend(found.into_iter().filter(|id| seen.insert(id.clone())));
        }
    });
    let body = stream::unfold(rx, move |mut rx| async move {
        loop {
            let e = rx.recv().await?;
            if modes.passes(&e) {
                return Some((Ok::<_, Infallible>(hub_event(&e, false)), rx));
            }
        }
    });
    Ok(Sse::new(body).keep_alive(keep_alive).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_read_as_the_reference_reads_them() {
        let e = |name: &str, data| StreamEvent::new("r", 1, name, data);
        let start = e("metadata", json!({"run_id": "r", "attempt": 1}));
        let done = e("metadata", json!({"status": "run_done", "run_id": "r"}));
        let values = e("values", json!({"a": 1}));
        let default = Modes::parse("").unwrap();
        assert!(default.passes(&start) && default.passes(&values) && default.passes(&done));
        let lifecycle = Modes::parse("lifecycle").unwrap();
        assert!(lifecycle.passes(&start) && lifecycle.passes(&done));
        assert!(!lifecycle.passes(&values));
        let both = Modes::parse("lifecycle,state_update").unwrap();
        assert!(both.passes(&e("state_update", json!({}))));
        assert!(!default.passes(&e("state_update", json!({}))));
        let bad = Modes::parse("values").unwrap_err();
        assert_eq!(bad.detail, "Invalid stream mode: values");
    }
}
