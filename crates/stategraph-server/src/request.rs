//! A run request: its body, and what it asks of the engine (config, start, stream modes).

use serde::{Deserialize, Serialize};
use serde_json::{Map as JsonMap, Value as Json_, json};
use stategraph_checkpoint::runs::Multitask;
use stategraph_checkpoint::{Map, Value};
use stategraph_graph::{Durability, Goto, Resume, RunCommand, RunConfig, Send, StreamMode};

use crate::error::ApiError;
use crate::events::EVENTS;
use crate::graph::RunStart;
use crate::records::Object;
use crate::run_options::{IfNotExists, OnCompletion, OnDisconnect};
use crate::wire::{checkpoint_id_of, input_map};

/// A run request's body (`RunCreateStateful` / `RunCreateStateless`).
#[derive(Deserialize, Serialize, Default, Clone, utoipa::ToSchema)]
#[serde(default)]
#[schema(as = RunCreate)]
pub(crate) struct RunBody {
    pub(crate) assistant_id: Option<String>,
    pub(crate) input: Option<serde_json::Value>,
    pub(crate) command: Option<serde_json::Value>,
    pub(crate) config: Option<serde_json::Value>,
    pub(crate) context: Option<serde_json::Value>,
    pub(crate) metadata: Option<Object>,
    pub(crate) stream_mode: Option<serde_json::Value>,
    pub(crate) interrupt_before: Option<serde_json::Value>,
    pub(crate) interrupt_after: Option<serde_json::Value>,
    pub(crate) checkpoint: Option<serde_json::Value>,
    pub(crate) checkpoint_id: Option<String>,
    pub(crate) if_not_exists: Option<IfNotExists>,
    #[schema(value_type = Option<String>)]
    pub(crate) multitask_strategy: Option<Multitask>,
    pub(crate) webhook: Option<serde_json::Value>,
    pub(crate) feedback_keys: Option<serde_json::Value>,
    pub(crate) stream_subgraphs: Option<bool>,
    pub(crate) stream_resumable: Option<bool>,
    pub(crate) checkpoint_during: Option<bool>,
    #[schema(value_type = Option<String>)]
    pub(crate) durability: Option<Durability>,
    pub(crate) on_completion: Option<OnCompletion>,
    pub(crate) on_disconnect: Option<OnDisconnect>,
}

impl RunBody {
    /// Whether the run was created with `stream_resumable: true`.
    pub(crate) fn resumable(&self) -> bool {
        self.stream_resumable.unwrap_or(false)
    }

    /// Whether the caller asked (`on_disconnect: "cancel"`) that the run be cancelled when it
    /// goes away; by default (`"continue"`, as LangGraph's server) the run goes on.
    pub(crate) fn cancel_on_disconnect(&self) -> bool {
        self.on_disconnect == Some(OnDisconnect::Cancel)
    }
}

/// The LangGraph version whose server this one follows, recorded as `langgraph_version` in
/// run and checkpoint metadata as LangGraph's server records its own.
pub(crate) const LANGGRAPH_VERSION: &str = "1.2.22";

/// Objects merged shallowly, later keys winning (LangGraph's `_merge_jsonb`).
pub(crate) fn merge_objects<'a>(
    objects: impl IntoIterator<Item = Option<&'a Json_>>,
) -> JsonMap<String, Json_> {
    let mut out = JsonMap::new();
    for o in objects.into_iter().flatten() {
        if let Some(o) = o.as_object() {
            out.extend(o.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    out
}

fn node_list(v: Option<&Json_>, what: &str) -> Result<Option<Vec<String>>, ApiError> {
    match v {
        None | Some(Json_::Null) => Ok(None),
        Some(Json_::String(s)) => Ok(Some(vec![s.clone()])),
        Some(Json_::Array(a)) => a
            .iter()
            .map(|n| {
                n.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| ApiError::invalid(format!("{what} must list node names")))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(ApiError::invalid(format!(
            "{what} must be \"*\" or a list of node names"
        ))),
    }
}

/// The stream modes a run's body asks for: the engine's modes, and the names as given (which
/// tell `messages-tuple` from `messages`, and name `events`, which the server renders from
/// the engine's `debug` events).
pub(crate) fn stream_modes(v: Option<&Json_>) -> Result<(Vec<StreamMode>, Vec<String>), ApiError> {
    let names = node_list(v, "stream_mode")?.unwrap_or_else(|| vec!["values".into()]);
    let mut modes = Vec::new();
    for n in names.iter().filter(|n| *n != EVENTS) {
        modes.push(StreamMode::from_name(n).ok_or_else(|| {
            ApiError::invalid(format!(
                "unknown stream_mode `{n}` (known: values, messages, messages-tuple, tasks, \
                 checkpoints, updates, events, debug, custom)"
            ))
        })?);
    }
    Ok((modes, names))
}

fn run_config(
    thread_id: &str,
    body: &RunBody,
    configurable: &JsonMap<String, Json_>,
    metadata: &JsonMap<String, Json_>,
) -> Result<RunConfig, ApiError> {
    let mut config = RunConfig::thread(thread_id);
    let given = body.config.as_ref().and_then(Json_::as_object);
    if let Some(c) = given
        .and_then(|c| c.get("configurable"))
        .and_then(Json_::as_object)
    {
        for (k, v) in c {
            match k.as_str() {
                "thread_id" => {}
                "checkpoint_id" => {
                    if let Some(id) = v.as_str() {
                        config = config.with_checkpoint_id(id);
                    }
                }
                "checkpoint_ns" => {
                    config.checkpoint_ns = v.as_str().unwrap_or_default().to_owned();
                }
                _ => config = config.with_configurable(k.clone(), v.clone()),
            }
        }
    }
    if let Some(limit) = given
        .and_then(|c| c.get("recursion_limit"))
        .filter(|l| !l.is_null())
    {
        let limit = crate::input::integer_field(limit, "config.recursion_limit", 1)?;
        config = config.with_recursion_limit(limit);
    }
    if let Some(id) = body
        .checkpoint_id
        .clone()
        .or_else(|| checkpoint_id_of(body.checkpoint.as_ref()))
    {
        config = config.with_checkpoint_id(id);
    }
    if let Some(ns) = body
        .checkpoint
        .as_ref()
        .and_then(|c| c.get("checkpoint_ns"))
        .and_then(Json_::as_str)
    {
        config.checkpoint_ns = ns.to_owned();
    }
    config.interrupt_before = node_list(body.interrupt_before.as_ref(), "interrupt_before")?;
    config.interrupt_after = node_list(body.interrupt_after.as_ref(), "interrupt_after")?;
    for (k, v) in configurable {
        if !matches!(k.as_str(), "thread_id" | "checkpoint_id" | "checkpoint_ns") {
            config = config.with_configurable(k.clone(), v.clone());
        }
    }
    config.metadata.extend(metadata.clone());
    config.subgraph_events = body.stream_subgraphs.unwrap_or(false);
    config.durability = match body.durability {
        Some(d) => d,
        None if body.checkpoint_during == Some(false) => Durability::Exit,
        None => Durability::Async,
    };
    if let Some(ctx) = body.context.clone().filter(|c| !c.is_null()) {
        config = config.with_context(ctx);
    }
    Ok(config)
}

pub(crate) fn run_start(body: &RunBody) -> Result<RunStart, ApiError> {
    if let Some(command) = body.command.as_ref().filter(|c| !c.is_null()) {
        return Ok(RunStart::Command(run_command(command)?));
    }
    match body.input.clone() {
        None | Some(Json_::Null) => Ok(RunStart::Continue),
        Some(v) => Ok(RunStart::Input(input_map(v, "input")?)),
    }
}

/// A run's `command`: `resume` (one answer, or answers by interrupt id), `update` (a map of
/// state keys, or a list of `[key, value]` pairs) and `goto` (a node, a `Send` as
/// `{"node", "input"}`, or a list of them), as LangGraph's `Command`.
fn run_command(command: &Json_) -> Result<RunCommand<Map>, ApiError> {
    let Some(fields) = command.as_object() else {
        return Err(ApiError::invalid("command must be an object"));
    };
    if let Some(k) = fields
        .keys()
        .find(|k| !matches!(k.as_str(), "resume" | "update" | "goto"))
    {
        return Err(ApiError::invalid(format!(
            "command.{k} is not a field of a command (resume, update, goto)"
        )));
    }
    let mut out = RunCommand {
        resume: None,
        update: None,
        goto: Vec::new(),
    };
    match fields.get("resume") {
        None | Some(Json_::Null) => {}
        Some(Json_::Object(map)) if !map.is_empty() && map.keys().all(|k| is_interrupt_id(k)) => {
            out.resume = Some(Resume::ById(
                map.iter()
                    .map(|(k, v)| (k.clone(), Value::from(v.clone())))
                    .collect(),
            ));
        }
        Some(v) => out.resume = Some(Resume::Value(Value::from(v.clone()))),
    }
    match fields.get("update") {
        None | Some(Json_::Null) => {}
        Some(update @ Json_::Object(_)) => {
            out.update = Some(input_map(update.clone(), "command.update")?);
        }
        Some(Json_::Array(pairs)) => {
            let mut map = serde_json::Map::new();
            for (i, pair) in pairs.iter().enumerate() {
                match pair.as_array().map(Vec::as_slice) {
                    Some([Json_::String(k), v]) => {
                        map.insert(k.clone(), v.clone());
                    }
                    _ => {
                        return Err(ApiError::invalid(format!(
                            "command.update[{i}] must be a [key, value] pair"
                        )));
                    }
                }
            }
            out.update = Some(input_map(Json_::Object(map), "command.update")?);
        }
        Some(_) => {
            return Err(ApiError::invalid(
                "command.update must be an object or a list of [key, value] pairs",
            ));
        }
    }
    let gotos = match fields.get("goto") {
        None | Some(Json_::Null) => Vec::new(),
        Some(Json_::Array(items)) => items.iter().collect(),
        Some(one) => vec![one],
    };
    for (i, goto) in gotos.into_iter().enumerate() {
        out.goto.push(match goto {
            Json_::String(node) => Goto::Node(node.clone()),
            Json_::Object(send) => {
                let Some(node) = send.get("node").and_then(Json_::as_str) else {
                    return Err(ApiError::invalid(format!(
                        "command.goto[{i}] is a Send without a `node`"
                    )));
                };
                let arg = input_map(
                    send.get("input")
                        .cloned()
                        .unwrap_or(Json_::Object(Default::default())),
                    "command.goto input",
                )?;
                Goto::Send(Send::new(node, arg))
            }
            _ => {
                return Err(ApiError::invalid(format!(
                    "command.goto[{i}] must be a node name or a Send ({{\"node\", \"input\"}})"
                )));
            }
        });
    }
    Ok(out)
}

/// LangGraph's interrupt ids: 32 lowercase hex digits.
fn is_interrupt_id(key: &str) -> bool {
    key.len() == 32 && key.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// What [`engine_config`] answers: the engine's run config, and the metadata added to the
/// run's record when it starts.
pub(crate) type EngineConfig = (RunConfig, JsonMap<String, Json_>);

/// The engine's config of a run of `body` on `thread_id` with the run's `configurable` and
/// `metadata`, on its `attempt`-th start; with what LangGraph's server adds to the run's metadata
/// when it starts it.
pub(crate) fn engine_config(
    thread_id: &str,
    body: &RunBody,
    configurable: &JsonMap<String, Json_>,
    metadata: &JsonMap<String, Json_>,
    attempt: u32,
) -> Result<EngineConfig, ApiError> {
    let started_metadata = JsonMap::from_iter([
        ("run_attempt".to_owned(), json!(attempt)),
        ("langgraph_version".to_owned(), json!(LANGGRAPH_VERSION)),
    ]);
    let mut engine_metadata = metadata.clone();
    engine_metadata.extend(started_metadata.clone());
    let mut config = run_config(thread_id, body, configurable, &engine_metadata)?;
    // As the reference's checkpointer: the run's metadata goes into every checkpoint's
    // metadata as it is (objects too), with the `thread_id` LangGraph propagates into it.
    config.checkpoint_metadata = engine_metadata;
    config
        .checkpoint_metadata
        .insert("thread_id".into(), json!(thread_id));
    config.queue = true;
    Ok((config, started_metadata))
}
