//! `/threads`: thread records, their state, history and state updates.

use axum::Json;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value as Json_, json};
use stategraph_checkpoint::PruneStrategy;
use stategraph_graph::{AsNode, HistoryOptions, RunConfig, StateSnapshot};
use stategraph_runs::{ThreadState, ThreadStatus};

use crate::app::{AppState, Shared};
use crate::error::ApiError;
use crate::http::extract::{Body, Query, RequiredBody, Search, ThreadId, uuid_id};
use crate::http::openapi::Searched;
use crate::records::{Object, ThreadDoc, ThreadRecord, ThreadTtl};
use crate::run::api_error;
use crate::threads::{
    ThreadFilter, graph_of, load, load_doc, load_head, search_threads, stop_and_delete, view,
};
use crate::wire::{ThreadStates, checkpoint_id_of, checkpoint_json, input_map};

mod state;
pub(crate) use state::*;

/// The fields a thread search sorts by (LangGraph's `ThreadSearchRequest.sort_by`).
const THREAD_SORTS: &[&str] = &[
    "thread_id",
    "status",
    "created_at",
    "updated_at",
    "state_updated_at",
];

/// A thread status named in a request: 422 when it is not one, as the reference words it.
fn thread_status(given: Option<&Json_>) -> Result<Option<ThreadStatus>, ApiError> {
    match given {
        None | Some(Json_::Null) => Ok(None),
        Some(Json_::String(s)) => ThreadStatus::parse(s).map(Some).ok_or_else(|| {
            crate::input::not_one_of(
                &["status"],
                &Json_::from(s.as_str()),
                &["idle", "busy", "interrupted", "error"],
            )
        }),
        Some(other) => Err(crate::input::not_of_type(&["status"], other, "string")),
    }
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
#[schema(as = ThreadCreate)]
pub(crate) struct CreateBody {
    thread_id: Option<String>,
    metadata: Option<Object>,
    if_exists: Option<String>,
    /// Deleted (or pruned) once left alone this long (`{"strategy", "ttl"}`, in minutes).
    #[schema(value_type = Option<ThreadTtl>)]
    ttl: Option<Json_>,
}

/// `POST /threads`.
#[utoipa::path(
    post,
    path = "/threads",
    operation_id = "post_threads",
    tag = "Threads",
    request_body = CreateBody,
    responses((status = 200, description = "The thread.", body = ThreadRecord))
)]
pub(crate) async fn create(
    axum::extract::State(state): Shared,
    Body(body): Body<CreateBody>,
) -> Result<Json<ThreadRecord>, ApiError> {
    let thread_id = match body.thread_id {
        Some(id) => uuid_id("thread", &id)?,
        None => uuid::Uuid::new_v4().to_string(),
    };
    let ttl = ThreadTtl::from_request(body.ttl.as_ref())?;
    if let Some(existing) = state.records.get::<ThreadDoc>(&thread_id).await? {
        return match body.if_exists.as_deref() {
            Some("do_nothing") => Ok(Json(view(&state, vec![existing]).await?.remove(0))),
            _ => Err(ApiError::conflict(format!(
                "Thread {thread_id} already exists"
            ))),
        };
    }
    let mut doc = ThreadDoc::new(&thread_id, body.metadata.unwrap_or_default());
    doc.ttl = ttl;
    state.records.put(&doc).await?;
    Ok(Json(ThreadRecord::of(doc, None)))
}

/// Query of `GET /threads/{thread_id}`.
#[derive(Deserialize, Default, utoipa::IntoParams)]
#[serde(default)]
#[into_params(parameter_in = Query)]
pub(crate) struct GetQuery {
    /// Optional fields to add, comma-separated: `ttl` (the thread's TTL, if it has one).
    include: Option<String>,
}

/// `GET /threads/{thread_id}`; with `?include=ttl`, the thread's TTL (`strategy`,
/// `ttl_minutes`, `expires_at`) when it has one, as LangGraph's server adds it.
#[utoipa::path(
    get,
    path = "/threads/{thread_id}",
    operation_id = "get_threads_item",
    tag = "Threads",
    params(ThreadId, GetQuery),
    responses((status = 200, description = "The thread.", body = ThreadRecord))
)]
pub(crate) async fn get_one(
    axum::extract::State(state): Shared,
    ThreadId(thread_id): ThreadId,
    Query(query): Query<GetQuery>,
) -> Result<Json<Json_>, ApiError> {
    let doc = load_doc(&state, &thread_id).await?;
    let ttl = doc.ttl;
    let thread = view(&state, vec![doc]).await?.remove(0);
    let mut out = serde_json::to_value(&thread)
        .map_err(|e| ApiError::internal(format!("a thread did not serialize: {e}")))?;
    let wanted = query
        .include
        .as_deref()
        .is_some_and(|i| i.split(',').any(|f| f.trim() == "ttl"));
    if wanted
        && let Some(ttl) = ttl
        && let Some(o) = out.as_object_mut()
    {
        let expires = ttl
            .expires_at(&thread.updated_at)
            .map(|t| crate::records::iso(std::time::SystemTime::from(t)));
        o.insert(
            "ttl".into(),
            json!({ "strategy": ttl.strategy, "ttl_minutes": ttl.ttl, "expires_at": expires }),
        );
    }
    Ok(Json(out))
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
#[schema(as = ThreadSearchRequest)]
pub(crate) struct SearchBody {
    metadata: Option<Object>,
    values: Option<Object>,
    /// `idle`, `busy`, `interrupted` or `error`.
    #[schema(value_type = Option<String>)]
    status: Option<Json_>,
    ids: Option<Vec<String>>,
}

/// `POST /threads/search`.
#[utoipa::path(
    post,
    path = "/threads/search",
    operation_id = "post_threads_search",
    tag = "Threads",
    request_body = Searched<SearchBody>,
    responses((status = 200, description = "The threads found.", body = Vec<ThreadRecord>))
)]
pub(crate) async fn search(
    axum::extract::State(state): Shared,
    Search { body, paging }: Search<SearchBody>,
) -> Result<Json<Vec<Json_>>, ApiError> {
    paging.check(THREAD_SORTS)?;
    let filter = ThreadFilter {
        metadata: body.metadata,
        values: body.values,
        status: thread_status(body.status.as_ref())?,
        ids: body.ids,
    };
    let found = search_threads(&state, filter).await?;
    Ok(Json(paging.apply(found)))
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
#[schema(as = ThreadPatch)]
pub(crate) struct PatchBody {
    metadata: Option<Object>,
    /// A new TTL, counted from now (`{"strategy", "ttl"}`, in minutes).
    #[schema(value_type = Option<ThreadTtl>)]
    ttl: Option<Json_>,
}

/// `PATCH /threads/{thread_id}`: merges metadata.
#[utoipa::path(
    patch,
    path = "/threads/{thread_id}",
    operation_id = "patch_threads_item",
    tag = "Threads",
    params(ThreadId),
    request_body = PatchBody,
    responses((status = 200, description = "The thread.", body = ThreadRecord))
)]
pub(crate) async fn patch(
    axum::extract::State(state): Shared,
    ThreadId(thread_id): ThreadId,
    Body(body): Body<PatchBody>,
) -> Result<Json<ThreadRecord>, ApiError> {
    let ttl = ThreadTtl::from_request(body.ttl.as_ref())?;
    let mut doc = load_doc(&state, &thread_id).await?;
    doc.merge_metadata(body.metadata.unwrap_or_default());
    if ttl.is_some() {
        doc.ttl = ttl;
    }
    state.records.put(&doc).await?;
    Ok(Json(view(&state, vec![doc]).await?.remove(0)))
}

/// `DELETE /threads/{thread_id}`: the record and the thread's checkpoints.
#[utoipa::path(
    delete,
    path = "/threads/{thread_id}",
    operation_id = "delete_threads_item",
    tag = "Threads",
    params(ThreadId),
    responses((status = 204, description = "Deleted, with its runs and checkpoints."))
)]
pub(crate) async fn delete(
    axum::extract::State(state): Shared,
    ThreadId(thread_id): ThreadId,
) -> Result<StatusCode, ApiError> {
    load_head(&state, &thread_id).await?;
    stop_and_delete(&state, &thread_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /threads/prune` body.
#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = ThreadPruneRequest)]
pub(crate) struct PruneBody {
    thread_ids: Vec<String>,
    #[serde(default)]
    strategy: Option<String>,
}

/// `POST /threads/prune`: deletes the threads listed (`strategy: "delete"`, the default) as
/// `DELETE /threads/{thread_id}` does, or keeps only each one's latest checkpoint
/// (`"keep_latest"`; LangGraph's in-memory server refuses it); threads that do not exist
/// are skipped. Answers `{"pruned_count": n}`, the threads pruned.
#[utoipa::path(
    post,
    path = "/threads/prune",
    operation_id = "post_threads_prune",
    tag = "Threads",
    request_body = PruneBody,
    responses((status = 200, description = "How many threads were pruned.", body = serde_json::Value))
)]
pub(crate) async fn prune(
    axum::extract::State(state): Shared,
    RequiredBody(body): RequiredBody<PruneBody>,
) -> Result<Json<Json_>, ApiError> {
    let ids = body
        .thread_ids
        .iter()
        .map(|id| uuid_id("thread", id))
        .collect::<Result<Vec<_>, _>>()?;
    let strategy = body.strategy.as_deref().unwrap_or("delete");
    if !matches!(strategy, "delete" | "keep_latest") {
        return Err(ApiError::invalid(format!(
            "Invalid strategy: {strategy}. Expected 'delete' or 'keep_latest'."
        )));
    }
    let mut pruned = 0_usize;
    for id in ids {
        if state
            .records
            .get::<crate::records::ThreadHead>(&id)
            .await?
            .is_none()
        {
            continue;
        }
        if strategy == "delete" {
            stop_and_delete(&state, &id).await?;
        } else {
            state
                .saver
                .prune(std::slice::from_ref(&id), PruneStrategy::KeepLatest)
                .await?;
        }
        pruned += 1;
    }
    Ok(Json(json!({ "pruned_count": pruned })))
}
