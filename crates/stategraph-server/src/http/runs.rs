//! Runs: waited, streamed (server-sent events) and in the background; a thread's runs.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::http::header::{CONTENT_LOCATION, LOCATION};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use serde::Deserialize;
use serde_json::{Value as Json_, json};
use stategraph_runs::{CancelAction, Deletion, RunQuery, RunStatus};

use crate::app::{AppState, Shared};
use crate::error::ApiError;
use crate::http::extract::{Body, Query, RequiredBody, RunIds, RunThreadId, ThreadId};
use crate::records::RunRecord;
use crate::request::RunBody;
use crate::run::plan::Target;
use crate::run::start::{Follow, Started, start};
use crate::run::{Cancel, api_error, cancel, follow};
use crate::stream_event::StreamEvent;

/// Cancels a run when the caller that asked `on_disconnect: "cancel"` goes away before the
/// run ended (dropped with the response body). Cancelling a run that has ended does nothing.
/// It goes with every answer that follows a run (a stream, a join, `runs/wait`), so it also
/// counts them in `stategraph_server_streams_active`.
pub(super) struct DisconnectGuard {
    state: Arc<AppState>,
    run_id: String,
    armed: bool,
    _open: crate::prometheus::OpenStream,
}

impl DisconnectGuard {
    pub(super) fn new(state: &Arc<AppState>, run_id: &str, armed: bool) -> Self {
        Self {
            state: Arc::clone(state),
            run_id: run_id.to_owned(),
            armed,
            _open: crate::prometheus::OpenStream::new(),
        }
    }

    /// The run ended: nothing to cancel any more.
    pub(super) fn disarm(mut self) {
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
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                // Through the queue: the run may execute in another process.
                let (state, run_id) = (Arc::clone(&self.state), self.run_id.clone());
                rt.spawn(async move {
                    let _ = cancel::request(&state, &run_id, &cancel).await;
                });
            }
        }
    }
}

pub(super) fn headers(pairs: &[(axum::http::HeaderName, String)]) -> HeaderMap {
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
    body: RunBody,
) -> Result<Response, ApiError> {
    let cancel_on_disconnect = body.cancel_on_disconnect();
    let started = start_on(Arc::clone(&state), thread, body, Follow::Wait).await?;
    let guard = DisconnectGuard::new(&state, started.run_id(), cancel_on_disconnect);
    let location = locations(&started, "join");
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
#[utoipa::path(
    post,
    path = "/threads/{thread_id}/runs/wait",
    operation_id = "post_threads_runs_wait",
    tag = "Thread Runs",
    params(RunThreadId),
    request_body = RunBody,
    responses((status = 200, description = "The thread's values when the run ends.", body = serde_json::Value))
)]
pub(crate) async fn wait_thread(
    axum::extract::State(state): Shared,
    RunThreadId(thread_id): RunThreadId,
    Body(body): Body<RunBody>,
) -> Result<Response, ApiError> {
    wait(state, Some(thread_id), body).await
}

/// `POST /runs/wait`.
#[utoipa::path(
    post,
    path = "/runs/wait",
    operation_id = "post_runs_wait",
    tag = "Stateless Runs",
    request_body = RunBody,
    responses((status = 200, description = "The run's output when it ends.", body = serde_json::Value))
)]
pub(crate) async fn wait_stateless(
    axum::extract::State(state): Shared,
    Body(body): Body<RunBody>,
) -> Result<Response, ApiError> {
    wait(state, None, body).await
}

async fn sse(
    state: Arc<AppState>,
    thread: Option<String>,
    body: RunBody,
) -> Result<Response, ApiError> {
    let cancel_on_disconnect = body.cancel_on_disconnect();
    let started = start_on(Arc::clone(&state), thread, body, Follow::Stream).await?;
    let run_id = started.run_id().to_owned();
    let guard = DisconnectGuard::new(&state, &run_id, cancel_on_disconnect);
    let location = locations(&started, "stream");
    // `metadata` first, then the run's events; they close once the run's records are final.
    // A resumable run's events carry the ids a client reconnects with (`Last-Event-ID`).
    // The guard goes with the stream.
    let resumable = started.resumable;
    let events = stream::unfold(Some((started.events, guard)), move |st| async move {
        let (mut rx, guard) = st?;
        match rx.recv().await {
            Some(e) => Some((
                Ok::<_, Infallible>(hub_event(&e, resumable)),
                Some((rx, guard)),
            )),
            None => {
                guard.disarm();
                None
            }
        }
    });
    drop(started.done);
    let body = Sse::new(events).keep_alive(
        KeepAlive::new()
            .interval(state.keep_alive)
            .text("heartbeat"),
    );
    Ok((headers(&location), body).into_response())
}

/// Starts a run of `body` on `thread` (`None`: stateless), followed as `follow` says.
async fn start_on(
    state: Arc<AppState>,
    thread: Option<String>,
    body: RunBody,
    follow: Follow,
) -> Result<Started, ApiError> {
    let target = match thread {
        Some(t) => Target::Thread(t),
        None => Target::Stateless,
    };
    start(state, target, body, follow).await
}

/// A started run's `Content-Location` (the run) and, for a run whose thread stays, its
/// `Location` (`…/join` or `…/stream`: where to follow it).
fn locations(started: &Started, follow: &str) -> Vec<(axum::http::HeaderName, String)> {
    if started.stateful {
        let base = format!("/threads/{}/runs/{}", started.thread_id, started.run_id());
        vec![
            (CONTENT_LOCATION, base.clone()),
            (LOCATION, format!("{base}/{follow}")),
        ]
    } else {
        vec![(CONTENT_LOCATION, format!("/runs/{}", started.run_id()))]
    }
}

pub(super) fn event(name: &str, data: &Json_) -> SseEvent {
    SseEvent::default().event(name).data(data.to_string())
}

/// A run's event as SSE, with its `id` when the run is resumable.
pub(super) fn hub_event(e: &StreamEvent, with_id: bool) -> SseEvent {
    let out = event(&e.name, &e.data);
    if with_id { out.id(&*e.id) } else { out }
}

/// `POST /threads/{thread_id}/runs/stream`.
#[utoipa::path(
    post,
    path = "/threads/{thread_id}/runs/stream",
    operation_id = "post_threads_runs_stream",
    tag = "Thread Runs",
    params(RunThreadId),
    request_body = RunBody,
    responses((status = 200, description = "The run's events (server-sent events).", content_type = "text/event-stream"))
)]
pub(crate) async fn stream_thread(
    axum::extract::State(state): Shared,
    RunThreadId(thread_id): RunThreadId,
    Body(body): Body<RunBody>,
) -> Result<Response, ApiError> {
    sse(state, Some(thread_id), body).await
}

/// `POST /runs/stream`.
#[utoipa::path(
    post,
    path = "/runs/stream",
    operation_id = "post_runs_stream",
    tag = "Stateless Runs",
    request_body = RunBody,
    responses((status = 200, description = "The run's events (server-sent events).", content_type = "text/event-stream"))
)]
pub(crate) async fn stream_stateless(
    axum::extract::State(state): Shared,
    Body(body): Body<RunBody>,
) -> Result<Response, ApiError> {
    sse(state, None, body).await
}

/// `POST /threads/{thread_id}/runs`: starts a run in the background.
#[utoipa::path(
    post,
    path = "/threads/{thread_id}/runs",
    operation_id = "post_threads_runs",
    tag = "Thread Runs",
    params(RunThreadId),
    request_body = RunBody,
    responses((status = 200, description = "The run, started in the background.", body = RunRecord))
)]
pub(crate) async fn create_background(
    axum::extract::State(state): Shared,
    RunThreadId(thread_id): RunThreadId,
    Body(body): Body<RunBody>,
) -> Result<Response, ApiError> {
    let started = start_on(state, Some(thread_id), body, Follow::Background).await?;
    let base = format!("/threads/{}/runs/{}", started.thread_id, started.run_id());
    let location = vec![(CONTENT_LOCATION, base)];
    let Started { run, events, .. } = started;
    drop(events);
    Ok((headers(&location), Json(run)).into_response())
}

/// `POST /runs`: starts a stateless run in the background, on a temporary thread (deleted
/// with the run when it ends, unless `on_completion` is `"keep"`).
#[utoipa::path(
    post,
    path = "/runs",
    operation_id = "post_runs",
    tag = "Stateless Runs",
    request_body = RunBody,
    responses((status = 200, description = "The run, started in the background.", body = RunRecord))
)]
pub(crate) async fn create_stateless(
    axum::extract::State(state): Shared,
    Body(body): Body<RunBody>,
) -> Result<Response, ApiError> {
    let started = start_on(state, None, body, Follow::Background).await?;
    let location = vec![(CONTENT_LOCATION, format!("/runs/{}", started.run_id()))];
    let Started { run, events, .. } = started;
    drop(events);
    Ok((headers(&location), Json(run)).into_response())
}

/// `POST /runs/batch`: starts each stateless run of the list in the background, as
/// `POST /runs` does, and answers the runs in the order given. The whole list is read before
/// any run starts, so a body that does not fit starts none (422 naming its index, as an
/// empty list is: the schema asks for one run at least); a run that cannot start (an
/// unknown assistant) fails the request, the runs before it having started.
#[utoipa::path(
    post,
    path = "/runs/batch",
    operation_id = "post_runs_batch",
    tag = "Stateless Runs",
    request_body = Vec<RunBody>,
    responses((status = 200, description = "The runs, started in the background.", body = Vec<RunRecord>))
)]
pub(crate) async fn create_batch(
    axum::extract::State(state): Shared,
    RequiredBody(bodies): RequiredBody<Vec<RunBody>>,
) -> Result<Json<Vec<RunRecord>>, ApiError> {
    if bodies.is_empty() {
        return Err(ApiError::invalid(
            "invalid body: a batch needs at least one run",
        ));
    }
    let mut runs = Vec::with_capacity(bodies.len());
    for body in bodies {
        let started = start_on(Arc::clone(&state), None, body, Follow::Background).await?;
        runs.push(started.run);
    }
    Ok(Json(runs))
}

/// Run `run_id` of thread `thread_id`, as the run queue has it; 404 otherwise.
pub(super) async fn load_run(
    state: &AppState,
    thread_id: &str,
    run_id: &str,
) -> Result<RunRecord, ApiError> {
    match state.runs.queue.get(run_id).await.map_err(api_error)? {
        Some(run) if run.thread_id == thread_id => Ok(RunRecord::of(&run)),
        _ => Err(ApiError::not_found(format!("Run {run_id} not found"))),
    }
}

/// `GET /threads/{thread_id}/runs/{run_id}`.
#[utoipa::path(
    get,
    path = "/threads/{thread_id}/runs/{run_id}",
    operation_id = "get_threads_runs_item",
    tag = "Thread Runs",
    params(RunIds),
    responses((status = 200, description = "The run.", body = RunRecord))
)]
pub(crate) async fn get_one(
    axum::extract::State(state): Shared,
    RunIds { thread_id, run_id }: RunIds,
) -> Result<Json<RunRecord>, ApiError> {
    Ok(Json(load_run(&state, &thread_id, &run_id).await?))
}

/// `DELETE /threads/{thread_id}/runs/{run_id}`: deletes the run's record and the
/// checkpoints it wrote (204). Deliberately, a run still pending or running is cancelled
/// first (LangGraph's server deletes the record under it), so it writes nothing afterwards.
#[utoipa::path(
    delete,
    path = "/threads/{thread_id}/runs/{run_id}",
    operation_id = "delete_threads_runs_item",
    tag = "Thread Runs",
    params(RunIds),
    responses((status = 204, description = "Deleted."))
)]
pub(crate) async fn delete_one(
    axum::extract::State(state): Shared,
    RunIds { thread_id, run_id }: RunIds,
) -> Result<axum::http::StatusCode, ApiError> {
    let run = load_run(&state, &thread_id, &run_id).await?;
    if run.in_flight() {
        let stop = Cancel {
            action: CancelAction::Interrupt,
            reason: format!("run {run_id} was deleted"),
        };
        cancel::cancel_and_settle(&state, std::slice::from_ref(&run_id), &stop).await;
    }
    state
        .saver
        .delete_for_runs(std::slice::from_ref(&run_id))
        .await?;
    state
        .runs
        .queue
        .delete(Deletion::Run(&run_id))
        .await
        .map_err(api_error)?;
    Ok(axum::http::StatusCode::NO_CONTENT)
}

/// `GET /threads/{thread_id}/runs/{run_id}/join`: waits for the run, then answers the
/// thread's values.
#[utoipa::path(
    get,
    path = "/threads/{thread_id}/runs/{run_id}/join",
    operation_id = "get_threads_runs_join",
    tag = "Thread Runs",
    params(RunIds),
    responses((status = 200, description = "The thread's values once the run ended.", body = serde_json::Value))
)]
pub(crate) async fn join(
    axum::extract::State(state): Shared,
    RunIds { thread_id, run_id }: RunIds,
) -> Result<Json<Json_>, ApiError> {
    load_run(&state, &thread_id, &run_id).await?;
    let row = follow::done(&state, &run_id, None).await;
    // The thread's values as the run left them (a stateless run's thread is gone: its
    // answer).
    match crate::threads::load(&state, &thread_id).await {
        Ok(thread) => Ok(Json(thread.values)),
        Err(_) => Ok(Json(follow::outcome(&state, row).await.to_wait_json())),
    }
}

/// Query of `GET /threads/{thread_id}/runs`.
#[derive(Deserialize, Default, utoipa::IntoParams)]
#[serde(default)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListQuery {
    #[serde(deserialize_with = "crate::input::query_count")]
    limit: Option<usize>,
    #[serde(deserialize_with = "crate::input::query_count")]
    offset: Option<usize>,
    status: Option<String>,
}

/// `GET /threads/{thread_id}/runs`: the thread's runs, newest first.
#[utoipa::path(
    get,
    path = "/threads/{thread_id}/runs",
    operation_id = "get_threads_runs",
    tag = "Thread Runs",
    params(ThreadId, ListQuery),
    responses((status = 200, description = "The thread's runs, newest first.", body = Vec<RunRecord>))
)]
pub(crate) async fn list(
    axum::extract::State(state): Shared,
    ThreadId(thread_id): ThreadId,
    Query(query): Query<ListQuery>,
) -> Result<Json<Vec<Json_>>, ApiError> {
    crate::threads::load_head(&state, &thread_id).await?;
    let mut runs =
        RunQuery::thread(&thread_id).page(query.limit.unwrap_or(10), query.offset.unwrap_or(0));
    if let Some(s) = query.status.as_deref() {
        // As the reference: a status that is none of a run's matches no run.
        let Some(status) = RunStatus::parse(s) else {
            return Ok(Json(Vec::new()));
        };
        runs = runs.statuses([status]);
    }
    let rows = state.runs.queue.list(&runs).await.map_err(api_error)?;
    let records: Vec<Json_> = rows
        .iter()
        .map(|r| serde_json::to_value(RunRecord::of(r)).unwrap_or_default())
        .collect();
    Ok(Json(records))
}
