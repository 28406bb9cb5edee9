//! LangGraph's JSON shapes from the engine's types, and back.

use serde_json::{Map as JsonMap, Value as Json, json};
use stategraph_checkpoint::{CheckpointConfig, CheckpointMetadata, Map, Value};
use stategraph_graph::stream::value_json;
use stategraph_graph::{Interrupt, StateSnapshot, Values};

use crate::error::ApiError;

/// A JSON object of state keys as the engine's raw input map.
pub(crate) fn input_map(v: Json, what: &str) -> Result<Map, ApiError> {
    match v {
        Json::Object(o) => Ok(o.into_iter().map(|(k, v)| (k, Value::from(v))).collect()),
        other => Err(ApiError::invalid(format!(
            "{what} must be an object of state keys, got {other}"
        ))),
    }
}

/// State values as JSON.
pub(crate) fn values_json(values: &Values) -> Json {
    Json::Object(
        values
            .iter()
            .map(|(k, v)| (k.clone(), value_json(v)))
            .collect::<JsonMap<_, _>>(),
    )
}

/// A checkpoint address as the API's `Checkpoint` object.
pub(crate) fn checkpoint_json(c: &CheckpointConfig) -> Json {
    json!({
        "thread_id": c.thread_id,
        "checkpoint_ns": c.checkpoint_ns,
        "checkpoint_id": c.checkpoint_id,
    })
}

/// An interrupt as the state endpoints show it: `{"value", "id"}`.
fn interrupt_json(i: &Interrupt) -> Json {
    json!({"value": value_json(&i.value), "id": i.id})
}

fn interrupts_json(interrupts: &[Interrupt]) -> Json {
    Json::Array(interrupts.iter().map(interrupt_json).collect())
}

/// An interrupt as a run's output and stream events carry it: LangGraph's `Interrupt`
/// object with all its fields (`response_schema` is never set here).
pub(crate) fn interrupt_output(i: &Interrupt) -> Json {
    json!({"value": value_json(&i.value), "id": i.id, "response_schema": null})
}

/// A snapshot as the API's `ThreadState`.
pub(crate) fn thread_state(s: &StateSnapshot) -> Json {
    let tasks: Vec<Json> = s
        .tasks
        .iter()
        .map(|t| {
            json!({
                "id": t.id,
                "name": t.name,
                "path": t.path,
                "error": t.error,
                "interrupts": interrupts_json(&t.interrupts),
                "checkpoint": null,
                "state": t.state.as_deref().map(thread_state),
                "result": t.result.as_ref().map(values_json),
            })
        })
        .collect();
    json!({
        "values": values_json(&s.values),
        "next": s.next,
        "tasks": tasks,
        "metadata": s.metadata.as_ref().map(CheckpointMetadata::to_json),
        "created_at": s.created_at,
        "checkpoint": s.config.as_ref().map(checkpoint_json),
        "parent_checkpoint": s.parent_config.as_ref().map(checkpoint_json),
        "checkpoint_id": s.config.as_ref().and_then(|c| c.checkpoint_id.clone()),
        "parent_checkpoint_id": s.parent_config.as_ref().and_then(|c| c.checkpoint_id.clone()),
        "interrupts": interrupts_json(&s.interrupts),
    })
}

/// A thread's `interrupts` field: pending interrupts by task id.
pub(crate) fn thread_interrupts(s: &StateSnapshot) -> Json {
    Json::Object(
        s.tasks
            .iter()
            .filter(|t| !t.interrupts.is_empty())
            .map(|t| (t.id.clone(), interrupts_json(&t.interrupts)))
            .collect(),
    )
}

/// The checkpoint id a request names: a string, or an object with `checkpoint_id`.
pub(crate) fn checkpoint_id_of(v: Option<&Json>) -> Option<String> {
    match v? {
        Json::String(s) => Some(s.clone()),
        Json::Object(o) => o
            .get("checkpoint_id")
            .and_then(Json::as_str)
            .map(str::to_owned),
        _ => None,
    }
}
