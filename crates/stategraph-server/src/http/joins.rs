//! Joining a run's stream: `GET /threads/{thread_id}/runs/{run_id}/stream`.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;

use axum::http::HeaderMap;
use axum::http::header::{CONTENT_LOCATION, LOCATION};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use serde_json::{Value as Json_, json};
use tokio::sync::mpsc;

use crate::app::Shared;
use crate::error::ApiError;
use crate::http::extract::{Query, RunIds};
use crate::http::runs::{DisconnectGuard, event, headers, hub_event};
use crate::run::{api_error, follow};
use crate::stream_event::{StreamEvent, resume_after};

/// The stream modes of a join's `stream_mode` query values: each a mode, or a JSON array of
/// them (the SDK's forms). Repeated values add up (LangGraph's server reads the last one only).
fn join_modes(values: &[String]) -> Vec<String> {
    let mut modes = Vec::new();
    for v in values.iter().filter(|v| !v.is_empty()) {
        match serde_json::from_str::<Vec<String>>(v) {
            Ok(list) if v.starts_with('[') => modes.extend(list),
            _ => modes.push(v.clone()),
        }
    }
    modes
}

/// Whether an event named `name` passes a join's `stream_mode` filter (none: every event),
/// as LangGraph's server matches them: by name, `messages*` for `messages`/`messages-tuple`, and
/// a subgraph's `mode|namespace` by its mode.
fn mode_matches(name: &str, modes: &[String]) -> bool {
    if modes.is_empty() || modes.iter().any(|m| m == name) {
        return true;
    }
    if name.starts_with("messages")
        && modes
            .iter()
            .any(|m| m == "messages" || m == "messages-tuple")
    {
        return true;
    }
    name.split_once('|')
        .is_some_and(|(base, _)| modes.iter().any(|m| m == base))
}

/// Whether a query flag is on, as LangGraph's server reads them (`true`, `yes`, `1`).
fn flag_on(v: &str) -> bool {
    matches!(v.to_lowercase().as_str(), "true" | "yes" | "1")
}

/// `GET /threads/{thread_id}/runs/{run_id}/stream`: joins a run's stream.
///
/// As LangGraph's server: the events the run publishes from now on; for a run created with
/// `stream_resumable: true` and a `Last-Event-ID` header, first those after that id (`-1`:
/// all), every event with its `id`. A run that has ended sends nothing more (a resumable one
/// replays after the id while its events are kept). `stream_mode` (query, repeated or a JSON
/// array) filters the events; `cancel_on_disconnect=true` cancels the run (`interrupt`) if
/// the client goes away before it ended. Ids that are not UUIDs are 422; an unknown run is,
/// as LangGraph's server answers it, a 200 stream of one `error` event.
#[utoipa::path(
    get,
    path = "/threads/{thread_id}/runs/{run_id}/stream",
    operation_id = "get_threads_runs_stream",
    tag = "Thread Runs",
    params(RunIds, ("stream_mode" = Option<Vec<String>>, Query, description = "The stream modes to send (repeatable)."), ("cancel_on_disconnect" = Option<bool>, Query, description = "Cancel the run if this client goes away."), ("Last-Event-ID" = Option<String>, Header, description = "Resume after this event.")),
    responses((status = 200, description = "The run's events (server-sent events).", content_type = "text/event-stream"))
)]
pub(crate) async fn join_stream(
    axum::extract::State(state): Shared,
    RunIds { thread_id, run_id }: RunIds,
    request_headers: HeaderMap,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let mut mode_values = Vec::new();
    let mut cancel_on_disconnect = false;
    for (k, v) in pairs {
        match k.as_str() {
            "stream_mode" => mode_values.push(v),
            "cancel_on_disconnect" => cancel_on_disconnect = flag_on(&v),
            _ => {}
        }
    }
    let modes = join_modes(&mode_values);
    let last_event_id = request_headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
        .map(str::to_owned);
    let base = format!("/threads/{thread_id}/runs/{run_id}");
    let location = headers(&[
        (CONTENT_LOCATION, base.clone()),
        (LOCATION, format!("{base}/stream")),
    ]);
    let keep_alive = KeepAlive::new()
        .interval(state.keep_alive)
        .text("heartbeat");
    let found = state
        .runs
        .queue
        .get(&run_id)
        .await
        .map_err(api_error)?
        .filter(|run| run.thread_id == thread_id);
    let Some(run) = found else {
        // The reference streams the 404 as an `error` event (the stream has begun).
        let error = json!({ "error": "HTTPException", "message": "404: Run not found" });
        let body = stream::once(async move { Ok::<_, Infallible>(event("error", &error)) });
        return Ok((location, Sse::new(body).keep_alive(keep_alive)).into_response());
    };
    // The run's events from the queue's log, whichever process runs it: as the reference,
    // a resumable run's after the client's `Last-Event-ID` (`-1`: all of them), otherwise
    // those from now on (nothing for a run that is over).
    let with_id = run
        .kwargs
        .get("resumable")
        .and_then(Json_::as_bool)
        .unwrap_or(false);
    let resume = last_event_id
        .filter(|_| with_id)
        .map(|id| resume_after(&id));
    let from = match &resume {
        Some(_) => 0,
        None => run.events,
    };
    let (tx, rx) = mpsc::channel::<StreamEvent>(256);
    let follower = Arc::clone(&state);
    tokio::spawn(async move {
        follow::events(&follower, &run_id, from, &tx, None).await;
    });
    let guard = DisconnectGuard::new(&state, &run.run_id, cancel_on_disconnect);
    let start: JoinState = (rx, guard, VecDeque::new());
    let body = stream::unfold(Some(start), move |st| {
        let (modes, resume) = (modes.clone(), resume.clone());
        async move {
            let (mut rx, guard, mut queued) = st?;
            loop {
                if let Some(e) = queued.pop_front() {
                    let out = hub_event(&e, with_id);
                    return Some((Ok::<_, Infallible>(out), Some((rx, guard, queued))));
                }
                let Some(first) = rx.recv().await else {
                    guard.disarm();
                    return None;
                };
                let mut batch = vec![first];
                while let Ok(e) = rx.try_recv() {
                    batch.push(e);
                }
                queued.extend(batch.into_iter().filter(|e| {
                    mode_matches(&e.name, &modes) && resume.as_ref().is_none_or(|r| r.after(e))
                }));
            }
        }
    });
    Ok((location, Sse::new(body).keep_alive(keep_alive)).into_response())
}

/// A join's events, the guard that cancels on disconnect, and events read but not sent.
type JoinState = (
    mpsc::Receiver<StreamEvent>,
    DisconnectGuard,
    VecDeque<StreamEvent>,
);
