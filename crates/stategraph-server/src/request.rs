//! A run request: its body, and what it asks of the engine (config, start, stream modes).

use serde::{Deserialize, Serialize};
use serde_json::{Map as JsonMap, Value as Json_};
use stategraph_checkpoint::{Map, Value};
use stategraph_graph::{Durability, Goto, Resume, RunCommand, Send, StreamMode};
use stategraph_runs::Multitask;

use crate::error::ApiError;
use crate::records::Object;
use crate::run_options::{IfNotExists, OnCompletion, OnDisconnect};
use crate::wire::input_map;

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
    /// Seconds to wait before the run may start (LangGraph's `after_seconds`).
    pub(crate) after_seconds: Option<f64>,
}

impl RunBody {
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

pub(crate) fn node_list(v: Option<&Json_>, what: &str) -> Result<Option<Vec<String>>, ApiError> {
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
/// tell `messages-tuple` from `messages`).
pub(crate) fn stream_modes(v: Option<&Json_>) -> Result<(Vec<StreamMode>, Vec<String>), ApiError> {
    let names = node_list(v, "stream_mode")?.unwrap_or_else(|| vec!["values".into()]);
    let mut modes = Vec::new();
    for n in &names {
        modes.push(StreamMode::from_name(n).ok_or_else(|| {
            ApiError::invalid(format!(
                "unknown stream_mode `{n}` (known: values, messages, messages-tuple, tasks, \
                 checkpoints, updates, events, debug, custom)"
            ))
        })?);
    }
    Ok((modes, names))
}

/// A run's `command`: `resume` (one answer, or answers by interrupt id), `update` (a map of
/// state keys, or a list of `[key, value]` pairs) and `goto` (a node, a `Send` as
/// `{"node", "input"}`, or a list of them), as LangGraph's `Command`.
pub(crate) fn run_command(command: &Json_) -> Result<RunCommand<Map>, ApiError> {
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
