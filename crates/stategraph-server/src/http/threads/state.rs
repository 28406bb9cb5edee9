//! A thread's state and history: `GET`/`POST .../state`, `update_state`, `.../history`.

use super::*;

/// Query of the state endpoints.
#[derive(Deserialize, Default, utoipa::IntoParams)]
#[serde(default)]
#[into_params(parameter_in = Query)]
pub(crate) struct StateQuery {
    pub(super) subgraphs: Option<String>,
}

impl StateQuery {
    /// Whether `subgraphs` is on: `true` or `True`, as LangGraph's server reads it (any other
    /// value is off, not an error).
    pub(super) fn subgraphs(&self) -> bool {
        matches!(self.subgraphs.as_deref(), Some("true" | "True"))
    }
}

pub(super) async fn state_at(
    state: &AppState,
    thread_id: &str,
    checkpoint: Option<&Json_>,
    subgraphs: bool,
) -> Result<ThreadStates<StateSnapshot>, ApiError> {
    let thread = load_head(state, thread_id).await?;
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
    Ok(ThreadStates(snapshot, graph.output_channel()))
}

/// `GET /threads/{thread_id}/state`.
#[utoipa::path(
    get,
    path = "/threads/{thread_id}/state",
    operation_id = "get_threads_state",
    tag = "Threads",
    params(ThreadId, StateQuery),
    responses((status = 200, description = "The thread's state.", body = serde_json::Value))
)]
pub(crate) async fn get_state(
    axum::extract::State(state): Shared,
    ThreadId(thread_id): ThreadId,
    Query(query): Query<StateQuery>,
) -> Result<Json<ThreadStates<StateSnapshot>>, ApiError> {
    let subgraphs = query.subgraphs();
    Ok(Json(state_at(&state, &thread_id, None, subgraphs).await?))
}

/// `GET /threads/{thread_id}/state/{checkpoint_id}`.
#[utoipa::path(
    get,
    path = "/threads/{thread_id}/state/{checkpoint_id}",
    operation_id = "get_threads_state_item",
    tag = "Threads",
    params(ThreadId, ("checkpoint_id" = String, Path, description = "The checkpoint's id."), StateQuery),
    responses((status = 200, description = "The thread's state at that checkpoint.", body = serde_json::Value))
)]
pub(crate) async fn get_state_at(
    axum::extract::State(state): Shared,
    ThreadId(thread_id): ThreadId,
    axum::extract::Path((_, checkpoint_id)): axum::extract::Path<(String, String)>,
    Query(query): Query<StateQuery>,
) -> Result<Json<ThreadStates<StateSnapshot>>, ApiError> {
    let checkpoint = Json_::String(checkpoint_id);
    let subgraphs = query.subgraphs();
    Ok(Json(
        state_at(&state, &thread_id, Some(&checkpoint), subgraphs).await?,
    ))
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
#[schema(as = ThreadStateCheckpointRequest)]
pub(crate) struct CheckpointBody {
    pub(super) checkpoint: Option<serde_json::Value>,
    pub(super) subgraphs: Option<bool>,
}

/// `POST /threads/{thread_id}/state/checkpoint`.
#[utoipa::path(
    post,
    path = "/threads/{thread_id}/state/checkpoint",
    operation_id = "post_threads_state_checkpoint",
    tag = "Threads",
    params(ThreadId),
    request_body = CheckpointBody,
    responses((status = 200, description = "The thread's state at that checkpoint.", body = serde_json::Value))
)]
pub(crate) async fn post_state_at(
    axum::extract::State(state): Shared,
    ThreadId(thread_id): ThreadId,
    Body(body): Body<CheckpointBody>,
) -> Result<Json<ThreadStates<StateSnapshot>>, ApiError> {
    let subgraphs = body.subgraphs.unwrap_or(false);
    Ok(Json(
        state_at(&state, &thread_id, body.checkpoint.as_ref(), subgraphs).await?,
    ))
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
#[schema(as = ThreadCountRequest)]
pub(crate) struct CountBody {
    pub(super) metadata: Option<Object>,
    pub(super) values: Option<Object>,
    /// `idle`, `busy`, `interrupted` or `error`.
    #[schema(value_type = Option<String>)]
    pub(super) status: Option<Json_>,
}

/// `POST /threads/count`.
#[utoipa::path(
    post,
    path = "/threads/count",
    operation_id = "post_threads_count",
    tag = "Threads",
    request_body = CountBody,
    responses((status = 200, description = "How many threads match.", body = usize))
)]
pub(crate) async fn count(
    axum::extract::State(state): Shared,
    Body(body): Body<CountBody>,
) -> Result<Json<usize>, ApiError> {
    let filter = ThreadFilter {
        metadata: body.metadata,
        values: body.values,
        status: thread_status(body.status.as_ref())?,
        ids: None,
    };
    let found = search_threads(&state, filter).await?;
    Ok(Json(found.len()))
}

/// `POST /threads/{thread_id}/copy`: a new thread with the same checkpoints and metadata. A
/// thread without checkpoints yet (no run, no state update) copies to a thread without
/// checkpoints, as LangGraph's server copies it.
#[utoipa::path(
    post,
    path = "/threads/{thread_id}/copy",
    operation_id = "post_threads_copy",
    tag = "Threads",
    params(ThreadId),
    responses((status = 200, description = "The copy.", body = ThreadRecord))
)]
pub(crate) async fn copy(
    axum::extract::State(state): Shared,
    ThreadId(thread_id): ThreadId,
) -> Result<Json<ThreadRecord>, ApiError> {
    let source = load_doc(&state, &thread_id).await?;
    let new_id = uuid::Uuid::new_v4().to_string();
    match state.saver.copy_thread(&thread_id, &new_id).await {
        // The saver has nothing of a thread that has no checkpoint: nothing to copy.
        Ok(()) | Err(stategraph_checkpoint::Error::NotFound { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    // Its state as the queue keeps it, copied too (a busy source's copy is not busy).
    let rows = crate::threads::rows(&state, vec![thread_id.clone()]).await?;
    if let Some(copied) = rows.get(&thread_id).and_then(|r| r.state.clone()) {
        state
            .runs
            .queue
            .set_thread(&new_id, &copied, false)
            .await
            .map_err(api_error)?;
    }
    let doc = source.copied_to(&new_id);
    state.records.put(&doc).await?;
    Ok(Json(view(&state, vec![doc]).await?.remove(0)))
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
#[schema(as = ThreadStateUpdate)]
pub(crate) struct UpdateBody {
    pub(super) values: Option<serde_json::Value>,
    pub(super) as_node: Option<String>,
    pub(super) checkpoint: Option<serde_json::Value>,
    pub(super) checkpoint_id: Option<String>,
}

/// `POST /threads/{thread_id}/state`: `update_state(values, as_node)`.
#[utoipa::path(
    post,
    path = "/threads/{thread_id}/state",
    operation_id = "post_threads_state",
    tag = "Threads",
    params(ThreadId),
    request_body = UpdateBody,
    responses((status = 200, description = "The new checkpoint's config.", body = serde_json::Value))
)]
pub(crate) async fn update_state(
    axum::extract::State(state): Shared,
    ThreadId(thread_id): ThreadId,
    Body(body): Body<UpdateBody>,
) -> Result<Json<Json_>, ApiError> {
    crate::assistants::ensure(&state).await?;
    let thread = load(&state, &thread_id).await?;
    if thread.status == ThreadStatus::Busy {
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
    // The thread's state follows the new checkpoint, as LangGraph's server sets it: waiting
    // (`interrupted`) when nodes are next, else `idle`, without error.
    let snapshot = graph
        .get_state(&RunConfig::thread(&thread_id), false)
        .await?;
    let status = if snapshot.next.is_empty() {
        ThreadStatus::Idle
    } else {
        ThreadStatus::Interrupted
    };
    let settled = ThreadState::new(
        status,
        crate::wire::output_json(&snapshot.values, graph.output_channel()),
        crate::wire::thread_interrupts(&snapshot),
    );
    let set = state
        .runs
        .queue
        .set_thread(&thread_id, &settled, true)
        .await
        .map_err(api_error)?;
    if !set {
        return Err(ApiError::conflict("Thread is busy with a run"));
    }
    // `configurable` and `checkpoint_id` repeat it, as the reference still sends them.
    let checkpoint_id = at.checkpoint_id.clone();
    let at = checkpoint_json(&at);
    Ok(Json(json!({
        "checkpoint_id": checkpoint_id,
        "configurable": at,
        "checkpoint": at,
    })))
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
#[schema(as = ThreadStateSearch)]
pub(crate) struct HistoryBody {
    #[serde(deserialize_with = "crate::input::search_limit")]
    pub(super) limit: Option<usize>,
    pub(super) before: Option<serde_json::Value>,
    pub(super) metadata: Option<Object>,
    pub(super) checkpoint: Option<serde_json::Value>,
}

/// `POST /threads/{thread_id}/history`: snapshots, newest first. The body is required, as LangGraph's
/// server requires it.
#[utoipa::path(
    post,
    path = "/threads/{thread_id}/history",
    operation_id = "post_threads_history",
    tag = "Threads",
    params(ThreadId),
    request_body = HistoryBody,
    responses((status = 200, description = "The thread's states, newest first.", body = Vec<serde_json::Value>))
)]
pub(crate) async fn history(
    axum::extract::State(state): Shared,
    ThreadId(thread_id): ThreadId,
    RequiredBody(body): RequiredBody<HistoryBody>,
) -> Result<Json<ThreadStates<Vec<StateSnapshot>>>, ApiError> {
    // As the reference: one state unless `limit` says more (the SDK always sends one).
    let mut options = HistoryOptions::new().limit(body.limit.unwrap_or(1));
    if let Some(before) = checkpoint_id_of(body.before.as_ref()) {
        options = options.before(before);
    }
    for (k, v) in body.metadata.unwrap_or_default() {
        options = options.filter(k, v);
    }
    let at = checkpoint_id_of(body.checkpoint.as_ref());
    list_history(&state, &thread_id, at, options)
        .await
        .map(Json)
}

/// Query of `GET /threads/{thread_id}/history`.
#[derive(Deserialize, Default, utoipa::IntoParams)]
#[serde(default)]
#[into_params(parameter_in = Query)]
pub(crate) struct HistoryQuery {
    /// How many states, newest first (default 1, as the reference's).
    pub(super) limit: Option<String>,
    /// Only states older than this checkpoint id.
    pub(super) before: Option<String>,
}

/// `GET /threads/{thread_id}/history`: the query-string form of the history, as the
/// reference serves it (`limit` default 1; a `limit` that is not an integer is 422).
#[utoipa::path(
    get,
    path = "/threads/{thread_id}/history",
    operation_id = "get_threads_history",
    tag = "Threads",
    params(ThreadId, HistoryQuery),
    responses((status = 200, description = "The thread's states, newest first.", body = Vec<serde_json::Value>))
)]
pub(crate) async fn history_get(
    axum::extract::State(state): Shared,
    ThreadId(thread_id): ThreadId,
    Query(query): Query<HistoryQuery>,
) -> Result<Json<ThreadStates<Vec<StateSnapshot>>>, ApiError> {
    let limit = match query.limit.as_deref() {
        None => 1,
        Some(text) => text
            .trim()
            .parse::<usize>()
            .map_err(|_| ApiError::invalid(format!("Invalid limit {text}")))?,
    };
    let mut options = HistoryOptions::new().limit(limit);
    if let Some(before) = query.before.filter(|b| !b.is_empty()) {
        options = options.before(before);
    }
    list_history(&state, &thread_id, None, options)
        .await
        .map(Json)
}

/// The thread's states as the history endpoints answer them, newest first.
pub(super) async fn list_history(
    state: &AppState,
    thread_id: &str,
    at: Option<String>,
    options: HistoryOptions,
) -> Result<ThreadStates<Vec<StateSnapshot>>, ApiError> {
    let thread = load_head(state, thread_id).await?;
    let graph = graph_of(state, &thread)?;
    let mut config = RunConfig::thread(thread_id);
    if let Some(id) = at {
        config = config.with_checkpoint_id(id);
    }
    Ok(ThreadStates(
        graph.history(&config, options).await?,
        graph.output_channel(),
    ))
}
