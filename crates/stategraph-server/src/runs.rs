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

use stategraph_checkpoint::runs::CancelAction;

use crate::app::{AppState, Cancel, Shared};
use crate::error::ApiError;
use crate::exec::{Started, start, start_background};
use crate::hub::{HubReader, StreamEvent};
use crate::records::{Kind, field_str};
use crate::request::RunBody;
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
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                // The run may be in another process: ask through the queue (a stateless run,
                // not the queue's, is this process's).
                let (state, run_id) = (Arc::clone(&self.state), self.run_id.clone());
                rt.spawn(async move {
                    if let Ok(crate::worker::Cancelled::NotQueued) =
                        crate::worker::request_cancel(&state, &run_id, cancel.action).await
                    {
                        let _ = state.cancel_run(&run_id, &cancel);
                    }
                });
                return;
            }
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
    let cancel_on_disconnect = body.cancel_on_disconnect();
    let started = start(Arc::clone(&state), thread, body).await?;
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
    let cancel_on_disconnect = body.cancel_on_disconnect();
    let started = start(Arc::clone(&state), thread, body).await?;
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

fn event(name: &str, data: &Json_) -> SseEvent {
    SseEvent::default().event(name).data(data.to_string())
}

/// A run's event as SSE, with its `id` when the run is resumable.
fn hub_event(e: &StreamEvent, with_id: bool) -> SseEvent {
    let out = event(&e.name, &e.data);
    if with_id { out.id(&*e.id) } else { out }
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
    let started = start_background(state, thread_id, body).await?;
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

/// `DELETE /threads/{thread_id}/runs/{run_id}`: deletes the run's record and the
/// checkpoints it wrote (204). Deliberately, a run still pending or running is cancelled
/// first (the reference deletes the record under it), so it writes nothing afterwards.
pub(crate) async fn delete_one(
    axum::extract::State(state): Shared,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> Result<axum::http::StatusCode, ApiError> {
    if uuid::Uuid::parse_str(&thread_id).is_err() {
        return Err(ApiError::invalid("Invalid thread ID: must be a UUID"));
    }
    if uuid::Uuid::parse_str(&run_id).is_err() {
        return Err(ApiError::invalid("Invalid run ID: must be a UUID"));
    }
    let run = load_run(&state, &thread_id, &run_id).await?;
    if matches!(field_str(&run, "status"), "pending" | "running") {
        let cancel = Cancel {
            action: CancelAction::Interrupt,
            reason: format!("run {run_id} was deleted"),
        };
        cancel_and_settle(&state, std::slice::from_ref(&run_id), &cancel).await;
    }
    state
        .saver
        .delete_for_runs(std::slice::from_ref(&run_id))
        .await?;
    state.records.delete(Kind::Run, &run_id).await?;
    Ok(axum::http::StatusCode::NO_CONTENT)
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
    #[serde(deserialize_with = "crate::input::query_count")]
    limit: Option<usize>,
    #[serde(deserialize_with = "crate::input::query_count")]
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
    {
        use crate::worker::{Cancelled, request_cancel, settle};
        match request_cancel(&state, &run_id, action).await? {
            Cancelled::NotQueued => {}
            Cancelled::Finished => return Err(not_cancelable()),
            outcome => {
                if matches!(outcome, Cancelled::Signalled) {
                    settle(&state, &run_id, (!wait).then_some(CANCEL_SETTLE)).await;
                }
                if !wait {
                    return Ok(axum::http::StatusCode::ACCEPTED.into_response());
                }
                let thread = load(&state, &thread_id).await?;
                let base = format!("/threads/{thread_id}/runs/{run_id}");
                let location = vec![
                    (CONTENT_LOCATION, base.clone()),
                    (LOCATION, format!("{base}/join")),
                ];
                let values = thread.get("values").cloned().unwrap_or(Json_::Null);
                return Ok((headers(&location), Json(values)).into_response());
            }
        }
    }
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

/// The stream modes of a join's `stream_mode` query values: each a mode, or a JSON array of
/// them (the SDK's forms). Repeated values add up (the reference reads the last one only).
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
/// as the reference matches them: by name, `messages*` for `messages`/`messages-tuple`, and
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

/// Whether a query flag is on, as the reference reads them (`true`, `yes`, `1`).
fn flag_on(v: &str) -> bool {
    matches!(v.to_lowercase().as_str(), "true" | "yes" | "1")
}

/// `GET /threads/{thread_id}/runs/{run_id}/stream`: joins a run's stream.
///
/// As the reference: the events the run publishes from now on; for a run created with
/// `stream_resumable: true` and a `Last-Event-ID` header, first those after that id (`-1`:
/// all), every event with its `id`. A run that has ended sends nothing more (a resumable one
/// replays after the id while its events are kept). `stream_mode` (query, repeated or a JSON
/// array) filters the events; `cancel_on_disconnect=true` cancels the run (`interrupt`) if
/// the client goes away before it ended. Ids that are not UUIDs are 422; an unknown run is,
/// as the reference answers it, a 200 stream of one `error` event.
pub(crate) async fn join_stream(
    axum::extract::State(state): Shared,
    Path((thread_id, run_id)): Path<(String, String)>,
    request_headers: HeaderMap,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(pairs) = query?;
    if uuid::Uuid::parse_str(&thread_id).is_err() {
        return Err(ApiError::invalid("Invalid thread ID: must be a UUID"));
    }
    if uuid::Uuid::parse_str(&run_id).is_err() {
        return Err(ApiError::invalid("Invalid run ID: must be a UUID"));
    }
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
    let found = match state.records.get(Kind::Run, &run_id).await? {
        Some(run) => field_str(&run, "thread_id") == thread_id,
        None => false,
    };
    if !found {
        // The reference streams the 404 as an `error` event (the stream has begun).
        let error = json!({ "error": "HTTPException", "message": "404: Run not found" });
        let body = stream::once(async move { Ok::<_, Infallible>(event("error", &error)) });
        return Ok((location, Sse::new(body).keep_alive(keep_alive)).into_response());
    }
    // The run's hub when it executes (or executed lately) in this process; otherwise its
    // events come from the queue's log, whichever process runs it (the ids are the same).
    let (reader, with_id) = match state.hubs.get(&run_id) {
        Some(hub) => {
            let with_id = hub.resumable();
            let reader = hub.reader(last_event_id.as_deref());
            drop(hub);
            (JoinSource::Hub(reader), with_id)
        }
        None => {
            let (rx, with_id) =
                crate::worker::join(&state, &run_id, last_event_id.as_deref()).await?;
            (JoinSource::Queue(rx), with_id)
        }
    };
    let guard = DisconnectGuard::new(&state, &run_id, cancel_on_disconnect);
    let start: JoinState = (reader, guard, std::collections::VecDeque::new());
    let body = stream::unfold(Some(start), move |st| {
        let modes = modes.clone();
        async move {
            let (mut reader, guard, mut queued) = st?;
            loop {
                if let Some(e) = queued.pop_front() {
                    let out = hub_event(&e, with_id);
                    return Some((Ok::<_, Infallible>(out), Some((reader, guard, queued))));
                }
                match reader.next_batch().await {
                    Some(batch) => {
                        queued.extend(batch.into_iter().filter(|e| mode_matches(&e.name, &modes)))
                    }
                    None => {
                        guard.disarm();
                        return None;
                    }
                }
            }
        }
    });
    Ok((location, Sse::new(body).keep_alive(keep_alive)).into_response())
}

/// A join's reader, the guard that cancels on disconnect, and events read but not sent.
type JoinState = (
    JoinSource,
    DisconnectGuard,
    std::collections::VecDeque<StreamEvent>,
);

/// Where a join reads a run's events: the run's hub in this process, or the run queue's log.
enum JoinSource {
    Hub(HubReader),
    Queue(tokio::sync::mpsc::Receiver<StreamEvent>),
}

impl JoinSource {
    /// The next events, waiting for at least one; `None` once the run is over and all were
    /// read.
    async fn next_batch(&mut self) -> Option<Vec<StreamEvent>> {
        match self {
            JoinSource::Hub(reader) => reader.next_batch().await,
            JoinSource::Queue(rx) => {
                let mut batch = vec![rx.recv().await?];
                while let Ok(e) = rx.try_recv() {
                    batch.push(e);
                }
                Some(batch)
            }
        }
    }
}

/// The ids of the runs still `pending` or `running` whose record `pick` selects, among
/// those matching `filter` (record fields).
pub(crate) async fn in_flight(
    state: &AppState,
    filter: &serde_json::Map<String, Json_>,
    pick: impl Fn(&Json_) -> bool,
) -> Result<Vec<String>, ApiError> {
    let mut ids = Vec::new();
    for status in ["pending", "running"] {
        let mut filter = filter.clone();
        filter.insert("status".into(), json!(status));
        for run in state.records.search(Kind::Run, filter).await? {
            if pick(&run) {
                ids.push(field_str(&run, "run_id").to_owned());
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
            match request_cancel(state, id, cancel.action).await {
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

/// Body of `POST /runs/cancel` (`RunsCancel`).
#[derive(Deserialize, Default)]
#[serde(default)]
struct CancelManyBody {
    status: Option<String>,
    thread_id: Option<String>,
    run_ids: Option<Vec<String>>,
}

/// `POST /runs/cancel`: cancels the runs `run_ids` of `thread_id`, or every run with
/// `status` `pending`, `running` or `all` (both); `action` (query) `interrupt` (default) or
/// `rollback` as for one run. 204; 404 when no run matched or none was pending or running;
/// 422 for a body that does not fit, as the reference.
pub(crate) async fn cancel_many(
    axum::extract::State(state): Shared,
    query: Result<Query<CancelQuery>, QueryRejection>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let Query(query) = query?;
    let body: CancelManyBody = parse_body(&body)?;
    let action = match query.action.as_deref() {
        Some("rollback") => CancelAction::Rollback,
        _ => CancelAction::Interrupt,
    };
    let mut candidates: Vec<Json_> = Vec::new();
    if let Some(status) = body.status.as_deref().filter(|s| !s.is_empty()) {
        let statuses: &[&str] = match status.to_lowercase().as_str() {
            "pending" => &["pending"],
            "running" => &["running"],
            "all" => &["pending", "running"],
            _ => {
                return Err(ApiError::invalid(
                    "Invalid status: must be 'pending', 'running', or 'all'",
                ));
            }
        };
        if body.thread_id.as_deref().is_some_and(|t| !t.is_empty())
            || body.run_ids.as_ref().is_some_and(|r| !r.is_empty())
        {
            return Err(ApiError::invalid(
                "When providing a 'status', 'thread_id' and 'run_ids' must be omitted. The \
                 'status' parameter cancels all runs with the given status, regardless of \
                 thread or run ID.",
            ));
        }
        for s in statuses {
            let mut filter = serde_json::Map::new();
            filter.insert("status".into(), json!(s));
            candidates.extend(state.records.search(Kind::Run, filter).await?);
        }
    } else {
        let (Some(thread_id), Some(run_ids)) = (body.thread_id, body.run_ids) else {
            return Err(ApiError::invalid(
                "Must provide either a status, or both 'thread_id' and 'run_ids'",
            ));
        };
        if uuid::Uuid::parse_str(&thread_id).is_err() {
            return Err(ApiError::invalid("Invalid thread ID: must be a UUID"));
        }
        if run_ids.iter().any(|r| uuid::Uuid::parse_str(r).is_err()) {
            return Err(ApiError::invalid("Invalid run ID: must be a UUID"));
        }
        for run_id in &run_ids {
            if let Some(run) = state.records.get(Kind::Run, run_id).await?
                && field_str(&run, "thread_id") == thread_id
            {
                candidates.push(run);
            }
        }
    }
    if candidates.is_empty() {
        return Err(ApiError::not_found("No runs found to cancel."));
    }
    let in_flight: Vec<String> = candidates
        .iter()
        .filter(|r| matches!(field_str(r, "status"), "pending" | "running"))
        .map(|r| field_str(r, "run_id").to_owned())
        .collect();
    let cancel = Cancel {
        action,
        reason: format!("{} requested via POST /runs/cancel", action.as_str()),
    };
    if cancel_and_settle(&state, &in_flight, &cancel).await == 0 {
        return Err(ApiError::not_found(
            "No matching runs to cancel. Please verify the thread ID and run IDs are correct, \
             and the runs haven't been deleted or completed.",
        ));
    }
    Ok(axum::http::StatusCode::NO_CONTENT.into_response())
}
