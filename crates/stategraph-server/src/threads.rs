//! Threads: records, state, history and state updates.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map as JsonMap, Value as Json_, json};
use stategraph_checkpoint::now_iso;
use stategraph_graph::{AsNode, HistoryOptions, RunConfig};

use crate::app::{AppState, Shared};
use crate::convert::{checkpoint_id_of, checkpoint_json, input_map, thread_state};
use crate::error::ApiError;
use crate::graph::ServedGraph;
use crate::records::{Kind, Paging, field_str};
use crate::worker::{api_error, queue_of};

/// Parses a JSON request body (an empty body is `{}`), or answers 422 naming the field that
/// does not fit.
pub(crate) fn parse_body<T: DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    let body: &[u8] = if body.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        body
    };
    parse_json(body)
}

/// Parses a JSON request body that must be given (as the reference requires it, e.g. of
/// `POST /threads/{thread_id}/history`): an empty body is 422, as invalid JSON is.
pub(crate) fn parse_required_body<T: DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::invalid(
            "Invalid JSON in request body: the request needs a JSON body (`{}` at least)",
        ));
    }
    parse_json(body)
}

fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." || inner.is_syntax() || inner.is_eof() {
            ApiError::invalid(format!("invalid body: {inner}"))
        } else {
            ApiError::invalid(format!("invalid body: `{path}`: {inner}"))
        }
    })?;
    // Nothing but whitespace may follow the JSON value.
    de.end()
        .map_err(|e| ApiError::invalid(format!("invalid body: {e}")))?;
    Ok(parsed)
}

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
async fn search_threads(
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

#[derive(Deserialize, Default)]
#[serde(default)]
struct CreateBody {
    thread_id: Option<String>,
    metadata: Option<JsonMap<String, Json_>>,
    if_exists: Option<String>,
}

/// `POST /threads`.
pub(crate) async fn create(
    axum::extract::State(state): Shared,
    body: Bytes,
) -> Result<Json<Json_>, ApiError> {
    let body: CreateBody = parse_body(&body)?;
    let thread_id = body
        .thread_id
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    if let Some(existing) = state.records.get(Kind::Thread, &thread_id).await? {
        return match body.if_exists.as_deref() {
            Some("do_nothing") => Ok(Json(existing)),
            _ => Err(ApiError::conflict(format!(
                "Thread {thread_id} already exists"
            ))),
        };
    }
    let record = new_thread(&thread_id, body.metadata.unwrap_or_default());
    state
        .records
        .put(Kind::Thread, &thread_id, record.clone())
        .await?;
    Ok(Json(record))
}

/// `GET /threads/{thread_id}`.
pub(crate) async fn get_one(
    axum::extract::State(state): Shared,
    Path(thread_id): Path<String>,
) -> Result<Json<Json_>, ApiError> {
    Ok(Json(load(&state, &thread_id).await?))
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct SearchBody {
    metadata: Option<JsonMap<String, Json_>>,
    values: Option<JsonMap<String, Json_>>,
    status: Option<String>,
    ids: Option<Vec<String>>,
}

/// `POST /threads/search`.
pub(crate) async fn search(
    axum::extract::State(state): Shared,
    body: Bytes,
) -> Result<Json<Vec<Json_>>, ApiError> {
    // The same body, read twice: its filters, and its order and paging.
    let paging: Paging = parse_body(&body)?;
    let body: SearchBody = parse_body(&body)?;
    let filter = thread_filter(body.metadata, body.values, body.status);
    let mut found = search_threads(&state, filter).await?;
    if let Some(ids) = body.ids {
        found.retain(|t| ids.iter().any(|id| id == field_str(t, "thread_id")));
    }
    Ok(Json(paging.apply(found)))
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct PatchBody {
    metadata: Option<JsonMap<String, Json_>>,
}

/// `PATCH /threads/{thread_id}`: merges metadata.
pub(crate) async fn patch(
    axum::extract::State(state): Shared,
    Path(thread_id): Path<String>,
    body: Bytes,
) -> Result<Json<Json_>, ApiError> {
    let body: PatchBody = parse_body(&body)?;
    let mut record = load(&state, &thread_id).await?;
    if let Some(obj) = record.as_object_mut() {
        let mut metadata = obj
            .get("metadata")
            .and_then(Json_::as_object)
            .cloned()
            .unwrap_or_default();
        metadata.extend(body.metadata.unwrap_or_default());
        obj.insert("metadata".into(), Json_::Object(metadata));
        obj.insert("updated_at".into(), Json_::String(now_iso()));
    }
    state
        .records
        .put(Kind::Thread, &thread_id, record.clone())
        .await?;
    Ok(Json(record))
}

/// `DELETE /threads/{thread_id}`: the record and the thread's checkpoints.
pub(crate) async fn delete(
    axum::extract::State(state): Shared,
    Path(thread_id): Path<String>,
) -> Result<StatusCode, ApiError> {
    load(&state, &thread_id).await?;
    // Deliberately first (the reference only drops the run records): the thread's runs in
    // flight stop, so none writes checkpoints to the deleted thread.
    let filter = JsonMap::from_iter([("thread_id".to_owned(), json!(thread_id))]);
    let in_flight = crate::runs::in_flight(&state, &filter, |_| true).await?;
    let cancel = crate::app::Cancel {
        action: crate::app::CancelAction::Interrupt,
        reason: format!("thread {thread_id} was deleted"),
    };
    crate::runs::cancel_and_settle(&state, &in_flight, &cancel).await;
    delete_with_runs(&state, &thread_id).await?;
    Ok(StatusCode::NO_CONTENT)
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

/// Query of the state endpoints.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct StateQuery {
    subgraphs: Option<String>,
}

impl StateQuery {
    /// Whether `subgraphs` is on: `true` or `True`, as the reference reads it (any other
    /// value is off, not an error).
    fn subgraphs(&self) -> bool {
        matches!(self.subgraphs.as_deref(), Some("true" | "True"))
    }
}

async fn state_at(
    state: &AppState,
    thread_id: &str,
    checkpoint: Option<&Json_>,
    subgraphs: bool,
) -> Result<Json_, ApiError> {
    let thread = load(state, thread_id).await?;
    let graph = graph_of(state, &thread)?;
    let mut config = RunConfig::thread(thread_id);
    if let Some(id) = checkpoint_id_of(checkpoint) {
        config = config.with_checkpoint_id(id);
    }
    if let Some(ns) = checkpoint
        .and_then(|c| c.get("checkpoint_ns"))
        .and_then(Json_::as_str)
    {
        ns.clone_into(&mut config.checkpoint_ns);
    }
    let snapshot = graph.get_state(&config, subgraphs).await?;
    Ok(thread_state(&snapshot))
}

/// `GET /threads/{thread_id}/state`.
pub(crate) async fn get_state(
    axum::extract::State(state): Shared,
    Path(thread_id): Path<String>,
    query: Result<Query<StateQuery>, QueryRejection>,
) -> Result<Json<Json_>, ApiError> {
    let Query(query) = query?;
    let subgraphs = query.subgraphs();
    Ok(Json(state_at(&state, &thread_id, None, subgraphs).await?))
}

/// `GET /threads/{thread_id}/state/{checkpoint_id}`.
pub(crate) async fn get_state_at(
    axum::extract::State(state): Shared,
    Path((thread_id, checkpoint_id)): Path<(String, String)>,
    query: Result<Query<StateQuery>, QueryRejection>,
) -> Result<Json<Json_>, ApiError> {
    let Query(query) = query?;
    let checkpoint = Json_::String(checkpoint_id);
    let subgraphs = query.subgraphs();
    Ok(Json(
        state_at(&state, &thread_id, Some(&checkpoint), subgraphs).await?,
    ))
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct CheckpointBody {
    checkpoint: Option<Json_>,
    subgraphs: Option<bool>,
}

/// `POST /threads/{thread_id}/state/checkpoint`.
pub(crate) async fn post_state_at(
    axum::extract::State(state): Shared,
    Path(thread_id): Path<String>,
    body: Bytes,
) -> Result<Json<Json_>, ApiError> {
    let body: CheckpointBody = parse_body(&body)?;
    let subgraphs = body.subgraphs.unwrap_or(false);
    Ok(Json(
        state_at(&state, &thread_id, body.checkpoint.as_ref(), subgraphs).await?,
    ))
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct CountBody {
    metadata: Option<JsonMap<String, Json_>>,
    values: Option<JsonMap<String, Json_>>,
    status: Option<String>,
}

/// `POST /threads/count`.
pub(crate) async fn count(
    axum::extract::State(state): Shared,
    body: Bytes,
) -> Result<Json<usize>, ApiError> {
    let body: CountBody = parse_body(&body)?;
    let filter = thread_filter(body.metadata, body.values, body.status);
    Ok(Json(search_threads(&state, filter).await?.len()))
}

fn thread_filter(
    metadata: Option<JsonMap<String, Json_>>,
    values: Option<JsonMap<String, Json_>>,
    status: Option<String>,
) -> JsonMap<String, Json_> {
    let mut filter = JsonMap::new();
    if let Some(m) = metadata.filter(|m| !m.is_empty()) {
        filter.insert("metadata".into(), Json_::Object(m));
    }
    if let Some(v) = values.filter(|m| !m.is_empty()) {
        filter.insert("values".into(), Json_::Object(v));
    }
    if let Some(s) = status {
        filter.insert("status".into(), Json_::String(s));
    }
    filter
}

/// `POST /threads/{thread_id}/copy`: a new thread with the same checkpoints and metadata. A
/// thread without checkpoints yet (no run, no state update) copies to a thread without
/// checkpoints, as the reference copies it.
pub(crate) async fn copy(
    axum::extract::State(state): Shared,
    Path(thread_id): Path<String>,
) -> Result<Json<Json_>, ApiError> {
    let source = load(&state, &thread_id).await?;
    let new_id = uuid::Uuid::new_v4().to_string();
    match state.saver.copy_thread(&thread_id, &new_id).await {
        // The saver has nothing of a thread that has no checkpoint: nothing to copy.
        Ok(()) | Err(stategraph_checkpoint::Error::NotFound { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    let metadata = source
        .get("metadata")
        .and_then(Json_::as_object)
        .cloned()
        .unwrap_or_default();
    let mut record = new_thread(&new_id, metadata);
    if let Some(obj) = record.as_object_mut() {
        for key in ["values", "interrupts", "error", "status", "config"] {
            if let Some(v) = source.get(key) {
                obj.insert(key.into(), v.clone());
            }
        }
    }
    state
        .records
        .put(Kind::Thread, &new_id, record.clone())
        .await?;
    Ok(Json(record))
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct UpdateBody {
    values: Option<Json_>,
    as_node: Option<String>,
    checkpoint: Option<Json_>,
    checkpoint_id: Option<String>,
}

/// `POST /threads/{thread_id}/state`: `update_state(values, as_node)`.
pub(crate) async fn update_state(
    axum::extract::State(state): Shared,
    Path(thread_id): Path<String>,
    body: Bytes,
) -> Result<Json<Json_>, ApiError> {
    let body: UpdateBody = parse_body(&body)?;
    crate::assistants::ensure(&state).await?;
    let mut thread = load(&state, &thread_id).await?;
    if field_str(&thread, "status") == "busy" {
        return Err(ApiError::conflict("Thread is busy with a run"));
    }
    let graph = graph_of(&state, &thread)?;
    let mut config = RunConfig::thread(&thread_id);
    if let Some(id) = body
        .checkpoint_id
        .or_else(|| checkpoint_id_of(body.checkpoint.as_ref()))
    {
        config = config.with_checkpoint_id(id);
    }
    let values = match body.values {
        None | Some(Json_::Null) => None,
        Some(v) => Some(input_map(v, "values")?),
    };
    let as_node = body.as_node.map_or(AsNode::Inferred, AsNode::from);
    let at = graph.update_state(&config, values, as_node).await?;
    // The thread's cached values follow the new checkpoint.
    let snapshot = graph
        .get_state(&RunConfig::thread(&thread_id), false)
        .await?;
    if let Some(obj) = thread.as_object_mut() {
        obj.insert(
            "values".into(),
            crate::convert::values_json(&snapshot.values),
        );
        obj.insert(
            "interrupts".into(),
            crate::convert::thread_interrupts(&snapshot),
        );
        let now = now_iso();
        obj.insert("updated_at".into(), Json_::String(now.clone()));
        obj.insert("state_updated_at".into(), Json_::String(now));
    }
    state.records.put(Kind::Thread, &thread_id, thread).await?;
    // `configurable` and `checkpoint_id` repeat it, as the reference still sends them.
    let checkpoint_id = at.checkpoint_id.clone();
    let at = checkpoint_json(&at);
    Ok(Json(json!({
        "checkpoint_id": checkpoint_id,
        "configurable": at,
        "checkpoint": at,
    })))
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct HistoryBody {
    #[serde(deserialize_with = "crate::input::search_limit")]
    limit: Option<usize>,
    before: Option<Json_>,
    metadata: Option<JsonMap<String, Json_>>,
    checkpoint: Option<Json_>,
}

/// `POST /threads/{thread_id}/history`: snapshots, newest first. The body is required, as the
/// reference requires it.
pub(crate) async fn history(
    axum::extract::State(state): Shared,
    Path(thread_id): Path<String>,
    body: Bytes,
) -> Result<Json<Vec<Json_>>, ApiError> {
    let body: HistoryBody = parse_required_body(&body)?;
    let thread = load(&state, &thread_id).await?;
    let graph = graph_of(&state, &thread)?;
    let mut config = RunConfig::thread(&thread_id);
    if let Some(id) = checkpoint_id_of(body.checkpoint.as_ref()) {
        config = config.with_checkpoint_id(id);
    }
    let mut options = HistoryOptions::new().limit(body.limit.unwrap_or(10));
    if let Some(before) = checkpoint_id_of(body.before.as_ref()) {
        options = options.before(before);
    }
    for (k, v) in body.metadata.unwrap_or_default() {
        options = options.filter(k, v);
    }
    let snapshots = graph.history(&config, options).await?;
    Ok(Json(snapshots.iter().map(thread_state).collect()))
}
