//! `/assistants`: the default assistant of each graph, assistants created through
//! `POST /assistants`, their versions, graphs and schemas.

use axum::Json;
use serde::Deserialize;
use serde_json::{Value as Json_, json};
use stategraph_checkpoint::now_iso;
use stategraph_graph::{END, START};
use uuid::Uuid;

use stategraph_runs::{CancelAction, RunQuery, RunStatus};

use crate::app::{AppState, Shared};
use crate::assistants::{ensure, versions_of};
use crate::error::ApiError;
use crate::graph::ServedGraph;
use crate::http::extract::{AssistantId, Body, GraphOrAssistant, Query, Search, uuid_id};
use crate::http::openapi::Searched;
use crate::records::{
    AssistantRecord, AssistantVersion, Object, Record, ThreadDoc, filter, version_key,
};
use crate::run::Cancel;

mod graph;
pub(crate) use graph::*;

#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
#[schema(as = AssistantCreate)]
pub(crate) struct CreateBody {
    assistant_id: Option<String>,
    graph_id: Option<String>,
    config: Option<Object>,
    context: Option<Object>,
    metadata: Option<Object>,
    if_exists: Option<String>,
    name: Option<String>,
    description: Option<String>,
}

/// `POST /assistants`: a new assistant of a registered graph (`if_exists`: `raise`, the
/// default, answers 409 for a taken id; `do_nothing` returns the stored assistant).
#[utoipa::path(
    post,
    path = "/assistants",
    operation_id = "post_assistants",
    tag = "Assistants",
    request_body = CreateBody,
    responses((status = 200, description = "The assistant.", body = AssistantRecord))
)]
pub(crate) async fn create(
    axum::extract::State(state): Shared,
    Body(body): Body<CreateBody>,
) -> Result<Json<AssistantRecord>, ApiError> {
    ensure(&state).await?;
    let id = match body.assistant_id {
        Some(id) => uuid_id("assistant", &id)?,
        None => Uuid::new_v4().to_string(),
    };
    let graph_id = body
        .graph_id
        .ok_or_else(|| ApiError::invalid("graph_id is required"))?;
    check_graph(&state, &graph_id)?;
    let (config, context) = config_and_context(body.config.unwrap_or_default(), body.context)?;
    let context = context.unwrap_or_default();
    if let Some(existing) = state.records.get::<AssistantRecord>(&id).await? {
        if body.if_exists.as_deref() == Some("do_nothing") {
            return Ok(Json(existing));
        }
        return Err(ApiError::conflict(format!("Assistant {id} already exists")));
    }
    let name = body.name.filter(|n| !n.is_empty());
    let mut record = AssistantRecord::new(id, graph_id, name.unwrap_or_else(|| "Untitled".into()));
    record.config = config;
    record.context = context;
    record.metadata = body.metadata.unwrap_or_default();
    record.description = body.description;
    state.records.put(&record.as_version(1)).await?;
    state.records.put(&record).await?;
    Ok(Json(record))
}

/// Config and context kept in step as LangGraph's server keeps them (`configurable` is the
/// context); both given is 400.
type ConfigAndContext = (Object, Option<Object>);

fn config_and_context(
    mut config: Object,
    context: Option<Object>,
) -> Result<ConfigAndContext, ApiError> {
    let configurable = config
        .get("configurable")
        .and_then(Json_::as_object)
        .filter(|c| !c.is_empty())
        .cloned();
    let given = context.as_ref().is_some_and(|c| !c.is_empty());
    match configurable {
        Some(_) if given => Err(ApiError::new(
            axum::http::StatusCode::BAD_REQUEST,
            "Cannot specify both configurable and context. Prefer setting context alone.",
        )),
        Some(c) => Ok((config, Some(c))),
        None => {
            if let Some(c) = context.as_ref().filter(|c| !c.is_empty()) {
                config.insert("configurable".into(), Json_::Object(c.clone()));
            }
            Ok((config, context))
        }
    }
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
#[schema(as = AssistantPatch)]
pub(crate) struct UpdateBody {
    graph_id: Option<String>,
    config: Option<Object>,
    context: Option<Object>,
    metadata: Option<Object>,
    name: Option<String>,
    description: Option<String>,
}

/// `PATCH /assistants/{assistant_id}`: a new version (the highest so far plus one) that
/// becomes the current one; fields not given are kept, `metadata` is merged.
#[utoipa::path(
    patch,
    path = "/assistants/{assistant_id}",
    operation_id = "patch_assistants_item",
    tag = "Assistants",
    params(AssistantId),
    request_body = UpdateBody,
    responses((status = 200, description = "The assistant's new version.", body = AssistantRecord))
)]
pub(crate) async fn update(
    axum::extract::State(state): Shared,
    AssistantId(id): AssistantId,
    Body(body): Body<UpdateBody>,
) -> Result<Json<AssistantRecord>, ApiError> {
    let (config, context) = config_and_context(body.config.unwrap_or_default(), body.context)?;
    if let Some(g) = &body.graph_id {
        check_graph(&state, g)?;
    }
    let mut record = assistant(&state, &id).await?;
    let newest = versions_of(&state, &id)
        .await?
        .first()
        .map_or(record.version, |v| v.version);
    let version = newest.max(record.version).saturating_add(1);
    if let Some(g) = body.graph_id {
        record.graph_id = g;
    }
    if !config.is_empty() {
        record.config = config;
    }
    if let Some(c) = context {
        record.context = c;
    }
    if let Some(m) = body.metadata {
        record.metadata.extend(m);
    }
    if let Some(n) = body.name {
        record.name = n;
    }
    if let Some(d) = body.description {
        record.description = Some(d);
    }
    record.version = version;
    record.updated_at = now_iso();
    state.records.put(&record.as_version(version)).await?;
    state.records.put(&record).await?;
    Ok(Json(record))
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
#[schema(as = AssistantVersionsSearch)]
pub(crate) struct VersionsBody {
    metadata: Option<Object>,
    #[serde(deserialize_with = "crate::input::search_limit")]
    limit: Option<usize>,
    #[serde(deserialize_with = "crate::input::count")]
    offset: Option<usize>,
}

/// `POST /assistants/{assistant_id}/versions`: the versions, newest first (404 when none).
#[utoipa::path(
    post,
    path = "/assistants/{assistant_id}/versions",
    operation_id = "post_assistants_versions",
    tag = "Assistants",
    params(AssistantId),
    request_body = VersionsBody,
    responses((status = 200, description = "The versions, newest first.", body = Vec<AssistantVersion>))
)]
pub(crate) async fn versions(
    axum::extract::State(state): Shared,
    AssistantId(id): AssistantId,
    Body(body): Body<VersionsBody>,
) -> Result<Json<Vec<AssistantVersion>>, ApiError> {
    ensure(&state).await?;
    let mut found = versions_of(&state, &id).await?;
    if let Some(m) = body.metadata.filter(|m| !m.is_empty()) {
        found.retain(|v| m.iter().all(|(k, want)| v.metadata.get(k) == Some(want)));
    }
    let found: Vec<AssistantVersion> = found
        .into_iter()
        .skip(body.offset.unwrap_or(0))
        .take(body.limit.unwrap_or(10))
        .collect();
    if found.is_empty() {
        return Err(ApiError::not_found(format!("Assistant {id} not found")));
    }
    Ok(Json(found))
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
#[schema(as = AssistantSetLatest)]
pub(crate) struct LatestBody {
    #[serde(deserialize_with = "crate::input::version")]
    version: Option<u64>,
}

/// `POST /assistants/{assistant_id}/latest`: makes a stored version the current one. As LangGraph's
/// server: an unknown assistant is 404, and so is a body that names no version (no
/// version matches it).
#[utoipa::path(
    post,
    path = "/assistants/{assistant_id}/latest",
    operation_id = "post_assistants_latest",
    tag = "Assistants",
    params(AssistantId),
    request_body = LatestBody,
    responses((status = 200, description = "The assistant at that version.", body = AssistantRecord))
)]
pub(crate) async fn set_latest(
    axum::extract::State(state): Shared,
    AssistantId(id): AssistantId,
    Body(body): Body<LatestBody>,
) -> Result<Json<AssistantRecord>, ApiError> {
    let mut record = assistant(&state, &id).await?;
    let Some(version) = body.version else {
        return Err(ApiError::not_found(format!(
            "Version not found for assistant {id}: the body gives no `version`"
        )));
    };
    let entry = state
        .records
        .get::<AssistantVersion>(&version_key(&id, version))
        .await?
        .ok_or_else(|| {
            ApiError::not_found(format!("Version {version} not found for assistant {id}"))
        })?;
    record.restore(&entry);
    state.records.put(&record).await?;
    Ok(Json(record))
}

/// 404 unless `graph_id` is a registered graph.
fn check_graph(state: &AppState, graph_id: &str) -> Result<(), ApiError> {
    if state.graphs.contains_key(graph_id) {
        return Ok(());
    }
    let mut known: Vec<&String> = state.graphs.keys().collect();
    known.sort();
    Err(ApiError::not_found(format!(
        "Graph '{graph_id}' not found. Expected one of: {known:?}"
    )))
}

/// Query of `DELETE /assistants/{assistant_id}`.
#[derive(Deserialize, Default, utoipa::IntoParams)]
#[serde(default)]
#[into_params(parameter_in = Query)]
pub(crate) struct DeleteQuery {
    delete_threads: Option<String>,
}

/// `DELETE /assistants/{assistant_id}`: 204, or 404 for an unknown id.
///
/// As LangGraph's server: the assistant's runs in flight are cancelled (`interrupt`), and with
/// `delete_threads=true` the threads whose `metadata.assistant_id` is this assistant (the
/// assistant of their latest run) are deleted too, with their runs and checkpoints. Its
/// crons are deleted with it.
#[utoipa::path(
    delete,
    path = "/assistants/{assistant_id}",
    operation_id = "delete_assistants_item",
    tag = "Assistants",
    params(AssistantId, DeleteQuery),
    responses((status = 204, description = "Deleted."))
)]
pub(crate) async fn delete(
    axum::extract::State(state): Shared,
    AssistantId(id): AssistantId,
    Query(query): Query<DeleteQuery>,
) -> Result<axum::http::StatusCode, ApiError> {
    assistant(&state, &id).await?;
    // The reference reads only `true` (any case).
    let delete_threads = query
        .delete_threads
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let threads: Vec<String> = if delete_threads {
        state
            .records
            .search::<ThreadDoc>(Object::new())
            .await?
            .into_iter()
            .filter(|t| t.metadata.get("assistant_id").and_then(Json_::as_str) == Some(id.as_str()))
            .map(|t| t.thread_id)
            .collect()
    } else {
        Vec::new()
    };
    // Deliberately before the threads go (the reference deletes them first, then cancels
    // the assistant's runs it can still find): the runs in flight on those threads, of any
    // assistant, stop too, so none writes checkpoints to a deleted thread.
    let in_flight: Vec<String> = state
        .runs
        .queue
        .list(&RunQuery::new().statuses([RunStatus::Pending, RunStatus::Running]))
        .await
        .map_err(crate::run::api_error)?
        .into_iter()
        .filter(|run| run.assistant_id == id || threads.contains(&run.thread_id))
        .map(|run| run.run_id)
        .collect();
    let cancel = Cancel {
        action: CancelAction::Interrupt,
        reason: format!("assistant {id} was deleted"),
    };
    crate::run::cancel::cancel_and_settle(&state, &in_flight, &cancel).await;
    for thread_id in &threads {
        crate::threads::stop_and_delete(&state, thread_id).await?;
    }
    for v in versions_of(&state, &id).await? {
        state.records.delete::<AssistantVersion>(&v.key()).await?;
    }
    state
        .records
        .delete_matching::<crate::crons::CronRecord>(filter("assistant_id", id.as_str()))
        .await?;
    state.records.delete::<AssistantRecord>(&id).await?;
    Ok(axum::http::StatusCode::NO_CONTENT)
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
#[schema(as = AssistantSearchRequest)]
pub(crate) struct SearchBody {
    metadata: Option<Object>,
    graph_id: Option<String>,
    name: Option<String>,
}

/// The fields an assistant search sorts by (LangGraph's `AssistantSearchRequest.sort_by`).
const ASSISTANT_SORTS: &[&str] = &[
    "assistant_id",
    "created_at",
    "updated_at",
    "name",
    "graph_id",
];

/// `POST /assistants/search`.
#[utoipa::path(
    post,
    path = "/assistants/search",
    operation_id = "post_assistants_search",
    tag = "Assistants",
    request_body = Searched<SearchBody>,
    responses((status = 200, description = "The assistants found.", body = Vec<AssistantRecord>))
)]
pub(crate) async fn search(
    axum::extract::State(state): Shared,
    Search { body, paging }: Search<SearchBody>,
) -> Result<Json<Vec<Json_>>, ApiError> {
    paging.check(ASSISTANT_SORTS)?;
    Ok(Json(paging.apply(find(&state, body).await?)))
}

/// The assistants a search body selects, unsorted.
async fn find(state: &AppState, body: SearchBody) -> Result<Vec<AssistantRecord>, ApiError> {
    ensure(state).await?;
    let mut filter = Object::new();
    if let Some(m) = body.metadata.filter(|m| !m.is_empty()) {
        filter.insert("metadata".into(), Json_::Object(m));
    }
    if let Some(g) = body.graph_id {
        filter.insert("graph_id".into(), Json_::String(g));
    }
    let mut found = state.records.search::<AssistantRecord>(filter).await?;
    if let Some(name) = body.name {
        let name = name.to_lowercase();
        found.retain(|a| a.name.to_lowercase().contains(&name));
    }
    Ok(found)
}

/// `GET /assistants/{assistant_id}`.
#[utoipa::path(
    get,
    path = "/assistants/{assistant_id}",
    operation_id = "get_assistants_item",
    tag = "Assistants",
    params(AssistantId),
    responses((status = 200, description = "The assistant.", body = AssistantRecord))
)]
pub(crate) async fn get_one(
    axum::extract::State(state): Shared,
    AssistantId(id): AssistantId,
) -> Result<Json<AssistantRecord>, ApiError> {
    Ok(Json(assistant(&state, &id).await?))
}

/// `POST /assistants/count`: as many as `POST /assistants/search` finds with the same
/// filters, unpaged.
#[utoipa::path(
    post,
    path = "/assistants/count",
    operation_id = "post_assistants_count",
    tag = "Assistants",
    request_body = SearchBody,
    responses((status = 200, description = "How many assistants match.", body = usize))
)]
pub(crate) async fn count(
    axum::extract::State(state): Shared,
    Body(body): Body<SearchBody>,
) -> Result<Json<usize>, ApiError> {
    Ok(Json(find(&state, body).await?.len()))
}

/// Query of `GET /assistants/{assistant_id}/graph`.
#[derive(Deserialize, Default, utoipa::IntoParams)]
#[serde(default)]
#[into_params(parameter_in = Query)]
pub(crate) struct GraphQuery {
    xray: Option<String>,
}

/// The record of assistant `id` (a UUID), or 404.
async fn assistant(state: &AppState, id: &str) -> Result<AssistantRecord, ApiError> {
    ensure(state).await?;
    state
        .records
        .get::<AssistantRecord>(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("Assistant {id} not found")))
}
