//! Runs: waited, streamed (server-sent events) and in the background.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query};
use axum::http::header::{CONTENT_LOCATION, LOCATION};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use serde::Deserialize;
use serde_json::{Value as Json_, json};

use crate::app::{AppState, Cancel, CancelAction, Shared};
use crate::error::ApiError;
use crate::exec::{RunBody, Started, start};
use crate::records::{Kind, field_str};
use crate::threads::{load, parse_body};

/// How often `join` looks at a background run.
const JOIN_POLL: Duration = Duration::from_millis(50);

/// Cancels a run when the caller that asked `on_disconnect: "cancel"` goes away before the
/// run ended (dropped with the response body). Cancelling a run that has ended does nothing.
struct DisconnectGuard {
    state: Arc<AppState>,
    run_id: String,
    armed: bool,
}

impl DisconnectGuard {
    fn new(state: &Arc<AppState>, run_id: &str, armed: bool) -> Self {
        Self {
            state: Arc::clone(state),
            run_id: run_id.to_owned(),
            armed,
        }
    }

    /// The run ended: nothing to cancel any more.
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for DisconnectGuard {
    fn drop(&mut self) {
        if self.armed {
            let cancel = Cancel {
                action: CancelAction::Interrupt,
                reason: "client disconnected from the run stream (on_disconnect=cancel)".into(),
            };
            let _ = self.state.cancel_run(&self.run_id, &cancel);
        }
    }
}

fn headers(pairs: &[(axum::http::HeaderName, String)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (name, value) in pairs {
        if let Ok(v) = HeaderValue::from_str(value) {
            h.insert(name.clone(), v);
        }
    }
    h
}

async fn wait(
    state: Arc<AppState>,
    thread: Option<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body: RunBody = parse_body(&body)?;
    let stateful = thread.is_some();
    let cancel_on_disconnect = body.cancel_on_disconnect();
    let started = start(Arc::clone(&state), thread, body).await?;
    let guard = DisconnectGuard::new(&state, started.run_id(), cancel_on_disconnect);
    let location = if stateful {
        let base = format!("/threads/{}/runs/{}", started.thread_id, started.run_id());
        vec![
            (CONTENT_LOCATION, base.clone()),
            (LOCATION, format!("{base}/join")),
        ]
    } else {
        vec![(CONTENT_LOCATION, format!("/runs/{}", started.run_id()))]
    };
    let Started { events, done, .. } = started;
    drop(events);
    // Like LangGraph's server, the answer streams: a newline every `keep_alive` while the
    // run goes on (JSON parsers skip leading whitespace), then the output.
    let every = state.keep_alive;
    let body = stream::unfold(Some((done, guard)), move |st| async move {
        let (mut done, guard) = st?;
        tokio::select! {
            outcome = &mut done => {
                guard.disarm();
                let out = match outcome {
                    Ok(o) => o.to_wait_json(),
                    Err(_) => json!({
                        "__error__": { "error": "RuntimeError", "message": "the run stopped" }
                    }),
                };
                Some((Ok::<_, Infallible>(Bytes::from(out.to_string())), None))
            }
            () = tokio::time::sleep(every) => {
                Some((Ok(Bytes::from_static(b"\n")), Some((done, guard))))
            }
        }
    });
    let mut headers = headers(&location);
    headers.insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok((headers, axum::body::Body::from_stream(body)).into_response())
}

/// `POST /threads/{thread_id}/runs/wait`.
pub(crate) async fn wait_thread(
    axum::extract::State(state): Shared,
    Path(thread_id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    wait(state, Some(thread_id), body).await
}

/// `POST /runs/wait`.
pub(crate) async fn wait_stateless(
    axum::extract::State(state): Shared,
    body: Bytes,
) -> Result<Response, ApiError> {
    wait(state, None, body).await
}

async fn sse(
    state: Arc<AppState>,
    thread: Option<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body: RunBody = parse_body(&body)?;
    let stateful = thread.is_some();
    let cancel_on_disconnect = body.cancel_on_disconnect();
    let started = start(Arc::clone(&state), thread, body).await?;
    let run_id = started.run_id().to_owned();
    let guard = DisconnectGuard::new(&state, &run_id, cancel_on_disconnect);
    let location = if stateful {
        let base = format!("/threads/{}/runs/{run_id}", started.thread_id);
        vec![
            (CONTENT_LOCATION, base.clone()),
            (LOCATION, format!("{base}/stream")),
        ]
    } else {
        vec![(CONTENT_LOCATION, format!("/runs/{run_id}"))]
    };
    let metadata = json!({ "run_id": run_id, "attempt": 1 });
    let first = stream::once(async move { Ok::<_, Infallible>(event("metadata", &metadata)) });
    // The events close once the run's records are final; the guard goes with the stream.
    let rest = stream::unfold(Some((started.events, guard)), |st| async move {
        let (mut rx, guard) = st?;
        match rx.recv().await {
            Some((name, data)) => {
                Some((Ok::<_, Infallible>(event(&name, &data)), Some((rx, guard))))
            }
            None => {
                guard.disarm();
                None
            }
        }
    });
    drop(started.done);
    let body = Sse::new(futures_util::StreamExt::chain(first, rest)).keep_alive(
        KeepAlive::new()
            .interval(state.keep_alive)
            .text("heartbeat"),
    );
    Ok((headers(&location), body).into_response())
}

fn event(name: &str, data: &Json_) -> SseEvent {
    SseEvent::default().event(name).data(data.to_string())
}

/// `POST /threads/{thread_id}/runs/stream`.
pub(crate) async fn stream_thread(
    axum::extract::State(state): Shared,
    Path(thread_id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    sse(state, Some(thread_id), body).await
}

/// `POST /runs/stream`.
pub(crate) async fn stream_stateless(
    axum::extract::State(state): Shared,
    body: Bytes,
) -> Result<Response, ApiError> {
    sse(state, None, body).await
}

/// `POST /threads/{thread_id}/runs`: starts a run in the background.
pub(crate) async fn create_background(
    axum::extract::State(state): Shared,
    Path(thread_id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body: RunBody = parse_body(&body)?;
    let started = start(state, Some(thread_id), body).await?;
    let base = format!("/threads/{}/runs/{}", started.thread_id, started.run_id());
    let location = vec![(CONTENT_LOCATION, base)];
    let Started { run, events, .. } = started;
    drop(events);
    Ok((headers(&location), Json(run)).into_response())
}

async fn load_run(state: &AppState, thread_id: &str, run_id: &str) -> Result<Json_, ApiError> {
    match state.records.get(Kind::Run, run_id).await? {
        Some(run) if field_str(&run, "thread_id") == thread_id => Ok(run),
        _ => Err(ApiError::not_found(format!("Run {run_id} not found"))),
    }
}

/// `GET /threads/{thread_id}/runs/{run_id}`.
pub(crate) async fn get_one(
    axum::extract::State(state): Shared,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> Result<Json<Json_>, ApiError> {
    Ok(Json(load_run(&state, &thread_id, &run_id).await?))
}

/// `GET /threads/{thread_id}/runs/{run_id}/join`: waits for the run, then answers the
/// thread's values.
pub(crate) async fn join(
    axum::extract::State(state): Shared,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> Result<Json<Json_>, ApiError> {
    loop {
        let run = load_run(&state, &thread_id, &run_id).await?;
        if !matches!(field_str(&run, "status"), "pending" | "running") {
            break;
        }
        tokio::time::sleep(JOIN_POLL).await;
    }
    let thread = load(&state, &thread_id).await?;
    Ok(Json(thread.get("values").cloned().unwrap_or(Json_::Null)))
}

/// Query of `GET /threads/{thread_id}/runs`.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct ListQuery {
    limit: Option<usize>,
    offset: Option<usize>,
    status: Option<String>,
}

/// `GET /threads/{thread_id}/runs`: the thread's runs, newest first.
pub(crate) async fn list(
    axum::extract::State(state): Shared,
    Path(thread_id): Path<String>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Vec<Json_>>, ApiError> {
    let Query(query) = query?;
    load(&state, &thread_id).await?;
    let mut filter = serde_json::Map::new();
    filter.insert("thread_id".into(), Json_::String(thread_id));
    if let Some(s) = query.status {
        filter.insert("status".into(), Json_::String(s));
    }
    let runs = state.records.search(Kind::Run, filter).await?;
    Ok(Json(crate::records::sort_and_page(
        runs,
        "created_at",
        true,
        query.offset.unwrap_or(0),
        query.limit.unwrap_or(10),
    )))
}

/// Query of `POST /threads/{thread_id}/runs/{run_id}/cancel`.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct CancelQuery {
    wait: Option<String>,
    action: Option<String>,
}

/// How long a cancel without `wait` waits for the run's records to be final before it
/// answers anyway (a run stops at its next await, so normally at once).
const CANCEL_SETTLE: Duration = Duration::from_secs(1);

/// `POST /threads/{thread_id}/runs/{run_id}/cancel`: stops a pending or running run.
///
/// `action=interrupt` (the default) marks it `interrupted` and keeps its checkpoints;
/// `action=rollback` deletes it and its checkpoints. 202 with no body, or with `wait=1` 200
/// and the thread's values once the run has stopped.
pub(crate) async fn cancel(
    axum::extract::State(state): Shared,
    Path((thread_id, run_id)): Path<(String, String)>,
    query: Result<Query<CancelQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query?;
    if uuid::Uuid::parse_str(&thread_id).is_err() {
        return Err(ApiError::invalid("Invalid thread ID: must be a UUID"));
    }
    if uuid::Uuid::parse_str(&run_id).is_err() {
        return Err(ApiError::invalid("Invalid run ID: must be a UUID"));
    }
    let wait = query
        .wait
        .is_some_and(|w| matches!(w.to_lowercase().as_str(), "true" | "yes" | "1"));
    let action = match query.action.as_deref() {
        Some("rollback") => CancelAction::Rollback,
        _ => CancelAction::Interrupt,
    };
    let run = match state.records.get(Kind::Run, &run_id).await? {
        Some(run) if field_str(&run, "thread_id") == thread_id => run,
        _ => return Err(ApiError::not_found("No runs found to cancel.")),
    };
    let not_cancelable = || {
        ApiError::not_found(
            "No matching runs to cancel. Please verify the thread ID and run IDs are correct, \
             and the runs haven't been deleted or completed.",
        )
    };
    if !matches!(field_str(&run, "status"), "pending" | "running") {
        return Err(not_cancelable());
    }
    let cancel = Cancel {
        action,
        reason: format!(
            "{} requested via POST /threads/{{thread_id}}/runs/{{run_id}}/cancel",
            action.as_str()
        ),
    };
    let mut ended = state
        .cancel_run(&run_id, &cancel)
        .ok_or_else(not_cancelable)?;
    if !wait {
        let _ = tokio::time::timeout(CANCEL_SETTLE, ended.wait_for(|e| *e)).await;
        return Ok(axum::http::StatusCode::ACCEPTED.into_response());
    }
    let _ = ended.wait_for(|e| *e).await;
    let thread = load(&state, &thread_id).await?;
    let base = format!("/threads/{thread_id}/runs/{run_id}");
    let location = vec![
        (CONTENT_LOCATION, base.clone()),
        (LOCATION, format!("{base}/join")),
    ];
    let values = thread.get("values").cloned().unwrap_or(Json_::Null);
    Ok((headers(&location), Json(values)).into_response())
}
