//! The Agent Server's JSON, rendered once: LangGraph's shapes of state values, interrupts,
//! checkpoints and snapshots from the engine's types (values and interrupts as the engine's
//! stream events render them, so a thread's state, a run's output and its events agree), and
//! the request fields read back into the engine's types.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Value as Json, json};
use stategraph_checkpoint::{CheckpointConfig, CheckpointMetadata, Map, Value};
pub(crate) use stategraph_graph::stream::output_json;
use stategraph_graph::stream::{OutputJson, ValueJson};
use stategraph_graph::{Interrupt, PregelTask, StateSnapshot};

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

/// A checkpoint address as the API's `Checkpoint` object.
pub(crate) fn checkpoint_json(c: &CheckpointConfig) -> Json {
    json!({
        "thread_id": c.thread_id,
        "checkpoint_ns": c.checkpoint_ns,
        "checkpoint_id": c.checkpoint_id,
    })
}

/// Interrupts as the state endpoints show them: `{"value", "id"}` each, as the engine's
/// stream events do.
fn interrupts_json(interrupts: &[Interrupt]) -> Json {
    Json::Array(interrupts.iter().map(Interrupt::to_json).collect())
}

/// A snapshot as the API's `ThreadState`, written straight into the answer (values are not
/// built as JSON trees first: a history of many states is mostly their values), of a graph
/// whose output is `.1` ([`ServedGraph::output_channel`](crate::graph::ServedGraph::output_channel)).
pub(crate) struct ThreadState<'a>(pub(crate) &'a StateSnapshot, pub(crate) Option<&'a str>);

impl Serialize for ThreadState<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (s, output) = (self.0, self.1);
        let id = |c: &Option<CheckpointConfig>| c.as_ref().and_then(|c| c.checkpoint_id.clone());
        let mut m = serializer.serialize_map(Some(10))?;
        m.serialize_entry("values", &OutputJson(&s.values, output))?;
        m.serialize_entry("next", &s.next)?;
        m.serialize_entry("tasks", &Tasks(&s.tasks, output))?;
        m.serialize_entry(
            "metadata",
            &s.metadata.as_deref().map(CheckpointMetadata::to_json),
        )?;
        m.serialize_entry("created_at", &s.created_at)?;
        m.serialize_entry("checkpoint", &s.config.as_ref().map(checkpoint_json))?;
        m.serialize_entry(
            "parent_checkpoint",
            &s.parent_config.as_ref().map(checkpoint_json),
        )?;
        m.serialize_entry("checkpoint_id", &id(&s.config))?;
        m.serialize_entry("parent_checkpoint_id", &id(&s.parent_config))?;
        m.serialize_entry("interrupts", &Each(&s.interrupts, InterruptJson))?;
        m.end()
    }
}

/// Snapshots answered as the API's `ThreadState`s (a thread's history, its state), of a
/// graph whose output is `.1`.
pub(crate) struct ThreadStates<T>(pub(crate) T, pub(crate) Option<&'static str>);

impl Serialize for ThreadStates<Vec<StateSnapshot>> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|s| ThreadState(s, self.1)))
    }
}

impl Serialize for ThreadStates<StateSnapshot> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        ThreadState(&self.0, self.1).serialize(serializer)
    }
}

/// A snapshot's tasks, each as the API's `ThreadTask`.
struct Tasks<'a>(&'a [PregelTask], Option<&'a str>);

impl Serialize for Tasks<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|t| Task(t, self.1)))
    }
}

/// The items of a slice, each written as `F` writes it.
struct Each<'a, T, F>(&'a [T], fn(&'a T) -> F);

impl<'a, T, F: Serialize> Serialize for Each<'a, T, F> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(self.1))
    }
}

/// A task of a snapshot as the API's `ThreadTask` (its result rendered as the graph's
/// output, `.1`).
struct Task<'a>(&'a PregelTask, Option<&'a str>);

impl Serialize for Task<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (t, output) = (self.0, self.1);
        let mut m = serializer.serialize_map(Some(8))?;
        m.serialize_entry("id", &t.id)?;
        m.serialize_entry("name", &t.name)?;
        m.serialize_entry("path", &t.path)?;
        m.serialize_entry("error", &t.error)?;
        m.serialize_entry("interrupts", &Each(&t.interrupts, InterruptJson))?;
        m.serialize_entry("checkpoint", &())?;
        m.serialize_entry("state", &t.state.as_deref().map(|s| ThreadState(s, None)))?;
        m.serialize_entry("result", &t.result.as_ref().map(|r| OutputJson(r, output)))?;
        m.end()
    }
}

/// An interrupt as the state endpoints show it: `{"value", "id"}`, as
/// [`Interrupt::to_json`] (and so the engine's stream events) renders it.
struct InterruptJson<'a>(&'a Interrupt);

impl Serialize for InterruptJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut m = serializer.serialize_map(Some(2))?;
        m.serialize_entry("value", &ValueJson(&self.0.value))?;
        m.serialize_entry("id", &self.0.id)?;
        m.end()
    }
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

/// The body of a run's webhook call, as LangGraph's server sends it: the run's record (its
/// final status), when it started and ended, when the call is made, the values of its
/// thread's last checkpoint (`null` when it has none) and, for a failed run, its error.
pub(crate) fn webhook_payload(
    run: &crate::records::RunRecord,
    started_at: &str,
    values: Option<Json>,
    error: Option<&Json>,
) -> Json {
    let mut out = match serde_json::to_value(run) {
        Ok(Json::Object(o)) => o,
        _ => serde_json::Map::new(),
    };
    let now = stategraph_checkpoint::now_iso();
    out.insert("run_started_at".into(), Json::String(started_at.to_owned()));
    out.insert("run_ended_at".into(), Json::String(now.clone()));
    out.insert("webhook_sent_at".into(), Json::String(now));
    out.insert("values".into(), values.unwrap_or(Json::Null));
    if let Some(e) = error {
        out.insert("error".into(), e.clone());
    }
    Json::Object(out)
}
