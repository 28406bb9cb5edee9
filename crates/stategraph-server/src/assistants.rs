//! Assistants: one default assistant per registered graph (its id derived from the graph's
//! name as LangGraph's server derives it), their versions, and how a run names one.

use serde_json::Value as Json_;
use uuid::Uuid;

use crate::app::AppState;
use crate::error::ApiError;
use crate::records::{AssistantRecord, AssistantVersion, filter, version_key};

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
            for graph_id in state.graphs.keys() {
                let id = default_assistant_id(graph_id);
                if let Some(existing) = state.records.get::<AssistantRecord>(&id).await? {
                    // Records written before versions were kept get their first one.
                    let first = version_key(&id, 1);
                    if state
                        .records
                        .get::<AssistantVersion>(&first)
                        .await?
                        .is_none()
                    {
                        state.records.put(&existing.as_version(1)).await?;
                    }
                    continue;
                }
                let mut record = AssistantRecord::new(id, graph_id.clone(), graph_id.clone());
                record
                    .metadata
                    .insert("created_by".into(), Json_::String("system".into()));
                state.records.put(&record.as_version(1)).await?;
                state.records.put(&record).await?;
            }
            Ok::<(), ApiError>(())
        })
        .await
        .map(drop)
}

/// The assistant a run's `assistant_id` names: a graph's name (its default assistant) or an
/// assistant's UUID. As the reference answers: anything else is 422 listing the graphs, an
/// unknown UUID 404.
pub(crate) async fn resolve(state: &AppState, id: &str) -> Result<AssistantRecord, ApiError> {
    let key = key_of(state, id).await?;
    found(state.records.get::<AssistantRecord>(&key).await?)
}

/// The assistant [`resolve`] gives, if `found` (the record read under its
/// [`key_of`]), else 404.
pub(crate) fn found(found: Option<AssistantRecord>) -> Result<AssistantRecord, ApiError> {
    found.ok_or_else(|| ApiError::not_found("Thread or assistant not found."))
}

/// The key of the assistant a run's `assistant_id` names ([`resolve`]), its record not read.
pub(crate) async fn key_of(state: &AppState, id: &str) -> Result<String, ApiError> {
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
    Ok(key)
}

/// Every stored version of assistant `id`, newest first.
pub(crate) async fn versions_of(
    state: &AppState,
    id: &str,
) -> Result<Vec<AssistantVersion>, ApiError> {
    let mut found = state
        .records
        .search::<AssistantVersion>(filter("assistant_id", id))
        .await?;
    found.sort_by_key(|v| std::cmp::Reverse(v.version));
    Ok(found)
}
