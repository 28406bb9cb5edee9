//! Assistants: one default assistant per registered graph.

use axum::Json;
use axum::body::Bytes;
use axum::extract::Path;
use serde::Deserialize;
use serde_json::{Map as JsonMap, Value as Json_, json};
use stategraph_checkpoint::now_iso;
use stategraph_graph::{END, START};
use uuid::Uuid;

use crate::app::{AppState, Shared};
use crate::error::ApiError;
use crate::records::{Kind, field_str, sort_and_page};
use crate::threads::parse_body;

/// LangGraph's namespace for default assistant ids (`uuid5(NAMESPACE_GRAPH, graph_id)`).
const NAMESPACE_GRAPH: Uuid = Uuid::from_u128(0x6ba7b821_9dad_11d1_80b4_00c04fd430c8);

/// The default assistant id of graph `graph_id`, as LangGraph's server derives it.
pub(crate) fn default_assistant_id(graph_id: &str) -> String {
    Uuid::new_v5(&NAMESPACE_GRAPH, graph_id.as_bytes()).to_string()
}

/// Writes the default assistants once per process (keeping records already stored).
pub(crate) async fn ensure(state: &AppState) -> Result<(), ApiError> {
    state
        .assistants_ready
        .get_or_try_init(|| async {
            recover(state).await?;
            for graph_id in state.graphs.keys() {
                let id = default_assistant_id(graph_id);
                if state.records.get(Kind::Assistant, &id).await?.is_some() {
                    continue;
                }
                let now = now_iso();
                let record = json!({
                    "assistant_id": id,
                    "graph_id": graph_id,
                    "config": {},
                    "context": {},
                    "created_at": now,
                    "updated_at": now,
                    "metadata": { "created_by": "system" },
                    "version": 1,
                    "name": graph_id,
                    "description": null,
                });
                state.records.put(Kind::Assistant, &id, record).await?;
            }
            Ok::<(), ApiError>(())
        })
        .await
        .map(drop)
}

/// Runs recorded as running by an earlier process (which ended) failed; their threads are
/// no longer busy.
async fn recover(state: &AppState) -> Result<(), ApiError> {
    let now = now_iso();
    for (kind, status, new_status) in [
        (Kind::Run, "running", "error"),
        (Kind::Run, "pending", "error"),
        (Kind::Thread, "busy", "idle"),
    ] {
        let mut filter = JsonMap::new();
        filter.insert("status".into(), json!(status));
        for mut record in state.records.search(kind, filter).await? {
            let key_field = match kind {
                Kind::Run => "run_id",
                _ => "thread_id",
            };
            let key = field_str(&record, key_field).to_owned();
            if let Some(o) = record.as_object_mut() {
                o.insert("status".into(), json!(new_status));
                o.insert("updated_at".into(), json!(now));
            }
            state.records.put(kind, &key, record).await?;
        }
    }
    Ok(())
}

/// The assistant record named by an assistant id or a graph id.
pub(crate) async fn resolve(state: &AppState, id: &str) -> Result<Json_, ApiError> {
    ensure(state).await?;
    let key = if state.graphs.contains_key(id) {
        default_assistant_id(id)
    } else {
        id.to_owned()
    };
    state
        .records
        .get(Kind::Assistant, &key)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("Assistant \"{id}\" not found")))
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct SearchBody {
    metadata: Option<JsonMap<String, Json_>>,
    graph_id: Option<String>,
    name: Option<String>,
    limit: Option<usize>,
    offset: Option<usize>,
    sort_by: Option<String>,
    sort_order: Option<String>,
}

/// `POST /assistants/search`.
pub(crate) async fn search(
    axum::extract::State(state): Shared,
    body: Bytes,
) -> Result<Json<Vec<Json_>>, ApiError> {
    let body: SearchBody = parse_body(&body)?;
    Ok(Json(find(&state, body).await?))
}

async fn find(state: &AppState, body: SearchBody) -> Result<Vec<Json_>, ApiError> {
    ensure(state).await?;
    let mut filter = JsonMap::new();
    if let Some(m) = body.metadata.filter(|m| !m.is_empty()) {
        filter.insert("metadata".into(), Json_::Object(m));
    }
    if let Some(g) = body.graph_id {
        filter.insert("graph_id".into(), Json_::String(g));
    }
    let mut found = state.records.search(Kind::Assistant, filter).await?;
    if let Some(name) = body.name {
        let name = name.to_lowercase();
        found.retain(|a| field_str(a, "name").to_lowercase().contains(&name));
    }
    let key = body.sort_by.unwrap_or_else(|| "created_at".into());
    let desc = body.sort_order.as_deref() != Some("asc");
    Ok(sort_and_page(
        found,
        &key,
        desc,
        body.offset.unwrap_or(0),
        body.limit.unwrap_or(10),
    ))
}

/// `GET /assistants/{assistant_id}`.
pub(crate) async fn get_one(
    axum::extract::State(state): Shared,
    Path(id): Path<String>,
) -> Result<Json<Json_>, ApiError> {
    Ok(Json(resolve(&state, &id).await?))
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct CountBody {
    metadata: Option<JsonMap<String, Json_>>,
    graph_id: Option<String>,
    name: Option<String>,
}

/// `POST /assistants/count`.
pub(crate) async fn count(
    axum::extract::State(state): Shared,
    body: Bytes,
) -> Result<Json<usize>, ApiError> {
    let body: CountBody = parse_body(&body)?;
    let search = SearchBody {
        metadata: body.metadata,
        graph_id: body.graph_id,
        name: body.name,
        limit: Some(usize::MAX),
        ..SearchBody::default()
    };
    Ok(Json(find(&state, search).await?.len()))
}

/// `GET /assistants/{assistant_id}/graph`: the graph's nodes and edges, in LangGraph's
/// drawing JSON.
pub(crate) async fn graph(
    axum::extract::State(state): Shared,
    Path(id): Path<String>,
) -> Result<Json<Json_>, ApiError> {
    let assistant = resolve(&state, &id).await?;
    let graph_id = field_str(&assistant, "graph_id");
    let graph = state
        .graphs
        .get(graph_id)
        .ok_or_else(|| ApiError::not_found(format!("Graph \"{graph_id}\" not found")))?;
    let topology = graph.topology();
    let nodes: Vec<Json_> = topology
        .nodes
        .iter()
        .map(|n| {
            if n == START || n == END {
                json!({ "id": n, "type": "schema", "data": n })
            } else {
                json!({
                    "id": n,
                    "type": "runnable",
                    "data": {
                        "id": ["langgraph", "_internal", "_runnable", "RunnableCallable"],
                        "name": n,
                    },
                })
            }
        })
        .collect();
    let edges: Vec<Json_> = topology
        .edges
        .iter()
        .map(|e| {
            let mut edge = json!({ "source": e.source, "target": e.target });
            if e.conditional
                && let Some(o) = edge.as_object_mut()
            {
                o.insert("conditional".into(), Json_::Bool(true));
            }
            edge
        })
        .collect();
    Ok(Json(json!({ "nodes": nodes, "edges": edges })))
}
