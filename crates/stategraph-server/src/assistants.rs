//! Assistants: one default assistant per registered graph (its id derived from the graph's
//! name as LangGraph's server derives it), their versions, and how a run names one.

use serde_json::{Map as JsonMap, Value as Json_, json};
use stategraph_checkpoint::now_iso;
use uuid::Uuid;

use crate::app::AppState;
use crate::error::ApiError;
use crate::records::{Kind, field_str};

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
            crate::worker::recover(state).await?;
            for graph_id in state.graphs.keys() {
                let id = default_assistant_id(graph_id);
                if let Some(existing) = state.records.get(Kind::Assistant, &id).await? {
                    // Records written before versions were kept get their first one.
                    if state
                        .records
                        .get(Kind::AssistantVersion, &format!("{id}:1"))
                        .await?
                        .is_none()
                    {
                        put_version(state, &existing, 1).await?;
                    }
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
                put_version(state, &record, 1).await?;
                state.records.put(Kind::Assistant, &id, record).await?;
            }
            Ok::<(), ApiError>(())
        })
        .await
        .map(drop)
}

/// The assistant a run's `assistant_id` names: a graph's name (its default assistant) or an
/// assistant's UUID. As the reference answers: anything else is 422 listing the graphs, an
/// unknown UUID 404.
pub(crate) async fn resolve(state: &AppState, id: &str) -> Result<Json_, ApiError> {
    ensure(state).await?;
    let key = if state.graphs.contains_key(id) {
        default_assistant_id(id)
    } else {
        match Uuid::parse_str(id) {
            Ok(uuid) => uuid.to_string(),
            Err(_) => {
                let graphs: Vec<&str> = state.graphs.keys().map(String::as_str).collect();
                return Err(ApiError::invalid(format!(
                    "Invalid assistant: '{id}'. Must be either:\n- A valid assistant UUID, or\n\
                     - One of the registered graphs: {}",
                    graphs.join(", ")
                )));
            }
        }
    };
    state
        .records
        .get(Kind::Assistant, &key)
        .await?
        .ok_or_else(|| ApiError::not_found("Thread or assistant not found."))
}

/// Stores `assistant` (an assistant record) as its version `version`.
pub(crate) async fn put_version(
    state: &AppState,
    assistant: &Json_,
    version: u64,
) -> Result<(), ApiError> {
    let id = field_str(assistant, "assistant_id");
    let mut entry = JsonMap::new();
    for key in [
        "assistant_id",
        "graph_id",
        "config",
        "context",
        "metadata",
        "name",
        "description",
    ] {
        entry.insert(
            key.into(),
            assistant.get(key).cloned().unwrap_or(Json_::Null),
        );
    }
    entry.insert("version".into(), json!(version));
    entry.insert("created_at".into(), json!(now_iso()));
    state
        .records
        .put(
            Kind::AssistantVersion,
            &format!("{id}:{version}"),
            Json_::Object(entry),
        )
        .await
}

/// Every stored version of assistant `id`, newest first.
pub(crate) async fn versions_of(state: &AppState, id: &str) -> Result<Vec<Json_>, ApiError> {
    let mut filter = JsonMap::new();
    filter.insert("assistant_id".into(), json!(id));
    let mut found = state.records.search(Kind::AssistantVersion, filter).await?;
    found.sort_by_key(|v| std::cmp::Reverse(v.get("version").and_then(Json_::as_u64)));
    Ok(found)
}
