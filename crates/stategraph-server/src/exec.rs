//! Running a graph for a run request: records before and after, events to the caller.

use std::sync::Arc;

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Map as JsonMap, Value as Json_, json};
use stategraph_checkpoint::Map;
use stategraph_checkpoint::{Value, now_iso, uuid6};
use stategraph_graph::{
    Durability, Goto, Resume, RunCommand, RunConfig, Send, StateSnapshot, StreamMode,
};
use tokio::sync::{mpsc, oneshot, watch};

use crate::app::{AppState, Cancel, CancelAction};
use crate::assistants;
use crate::convert::{checkpoint_id_of, input_map, thread_interrupts, values_json};
use crate::error::{ApiError, error_name};
use crate::events::{EVENTS, Events};
use crate::graph::{RunStart, ServedGraph};
use crate::hub::{HubCloser, StreamEvent};
use crate::records::{Kind, field_str};
use crate::run_options::{IfNotExists, Multitask, OnCompletion, OnDisconnect};
use crate::threads::{load, new_thread};

/// A run request's body (`RunCreateStateful` / `RunCreateStateless`).
#[derive(Deserialize, Serialize, Default, Clone)]
#[serde(default)]
pub(crate) struct RunBody {
    assistant_id: Option<String>,
    input: Option<Json_>,
    command: Option<Json_>,
    config: Option<Json_>,
    context: Option<Json_>,
    metadata: Option<JsonMap<String, Json_>>,
    pub(crate) stream_mode: Option<Json_>,
    interrupt_before: Option<Json_>,
    interrupt_after: Option<Json_>,
    checkpoint: Option<Json_>,
    checkpoint_id: Option<String>,
    if_not_exists: Option<IfNotExists>,
    multitask_strategy: Option<Multitask>,
    webhook: Option<Json_>,
    feedback_keys: Option<Json_>,
    stream_subgraphs: Option<bool>,
    stream_resumable: Option<bool>,
    checkpoint_during: Option<bool>,
    durability: Option<Durability>,
    on_completion: Option<OnCompletion>,
    on_disconnect: Option<OnDisconnect>,
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
const LANGGRAPH_VERSION: &str = "1.2.22";

/// Objects merged shallowly, later keys winning (the reference's `_merge_jsonb`).
fn merge_objects<'a>(
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

/// How a run ended.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    /// The last state values streamed.
    pub(crate) values: Json_,
    /// Interrupts the run stopped on.
    pub(crate) interrupts: Vec<Json_>,
    /// `{"error", "message"}` when it failed.
    pub(crate) error: Option<Json_>,
}

impl Outcome {
    /// What `runs/wait` answers: the values, with `__interrupt__` if the run stopped on
    /// interrupts, or `{"__error__": …}`.
    pub(crate) fn to_wait_json(&self) -> Json_ {
        if let Some(e) = &self.error {
            return json!({ "__error__": e });
        }
        let mut values = self.values.clone();
        if !self.interrupts.is_empty()
            && let Some(o) = values.as_object_mut()
        {
            o.insert(
                "__interrupt__".into(),
                Json_::Array(self.interrupts.clone()),
            );
        }
        values
    }
}

/// A started run.
pub(crate) struct Started {
    pub(crate) run: Json_,
    pub(crate) thread_id: String,
    /// Whether the run's thread outlives it (a thread run, or a stateless run with
    /// `on_completion: "keep"`).
    pub(crate) stateful: bool,
    /// `metadata`, the events of the stream modes asked for, then `error` if the run failed,
    /// as the run's hub numbered them; closed once the run's records are final.
    pub(crate) events: mpsc::Receiver<StreamEvent>,
    /// Whether the run was created with `stream_resumable: true` (its events carry ids).
    pub(crate) resumable: bool,
    pub(crate) done: oneshot::Receiver<Outcome>,
}

impl Started {
    /// The run's id.
    pub(crate) fn run_id(&self) -> &str {
        field_str(&self.run, "run_id")
    }
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

/// Starts a run of `body` on `thread_id` (`None`: a stateless run on a temporary thread).
///
/// A run on a thread is recorded `pending` and waits for the thread's earlier runs (the
/// `enqueue` strategy, the default; `reject` fails instead while the thread is busy;
/// `interrupt` and `rollback` cancel the thread's runs in flight with that action), then
/// becomes `running`.
pub(crate) async fn start(
    state: Arc<AppState>,
    thread_id: Option<String>,
    body: RunBody,
) -> Result<Started, ApiError> {
    start_with(state, thread_id, body, false).await
}

/// Starts a background run of `body` on `thread_id`, as [`start`] but without following
/// its events when it goes through a run queue.
pub(crate) async fn start_background(
    state: Arc<AppState>,
    thread_id: String,
    body: RunBody,
) -> Result<Started, ApiError> {
    start_with(state, Some(thread_id), body, true).await
}

/// [`start`]; with a run queue, a run on a thread is recorded `pending` and enqueued for
/// whichever process's worker claims it, and unless `background` its events and outcome are
/// followed from the queue.
async fn start_with(
    state: Arc<AppState>,
    thread_id: Option<String>,
    body: RunBody,
    background: bool,
) -> Result<Started, ApiError> {
    // Only a queued run tells a background run from one whose caller follows it.
    #[cfg(not(feature = "postgres"))]
    let _ = background;
    let assistant_ref = body
        .assistant_id
        .clone()
        .ok_or_else(|| ApiError::invalid("assistant_id is required"))?;
    let assistant = assistants::resolve(&state, &assistant_ref).await?;
    let graph_id = field_str(&assistant, "graph_id").to_owned();
    let assistant_id = field_str(&assistant, "assistant_id").to_owned();
    let graph: Arc<dyn ServedGraph> = state
        .graphs
        .get(&graph_id)
        .cloned()
        .ok_or_else(|| ApiError::not_found(format!("Graph \"{graph_id}\" not found")))?;
    let (modes, mode_names) = stream_modes(body.stream_mode.as_ref())?;
    let start = run_start(&body)?;
    // A stateless run deletes its thread when it ends (`on_completion: "delete"`, the
    // default); with `"keep"` the thread is created as any thread is and stays.
    let mut body = body;
    let thread_id = match body.on_completion.unwrap_or_default() {
        OnCompletion::Delete => thread_id,
        OnCompletion::Keep => {
            if thread_id.is_none() {
                body.if_not_exists = Some(IfNotExists::Create);
            }
            Some(thread_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string()))
        }
    };
    let stateful = thread_id.is_some();
    let queued = stateful && state.has_queue();
    let thread_id = thread_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let run_id = uuid6(None);
    let strategy = body.multitask_strategy.unwrap_or_default();

    // The run's `configurable` and `context` as the reference builds them.
    let given_config = body.config.clone().filter(Json_::is_object);
    let given_configurable = given_config
        .as_ref()
        .and_then(|c| c.get("configurable"))
        .filter(|c| c.is_object())
        .cloned();
    let given_context = body
        .context
        .clone()
        .filter(|c| c.as_object().is_some_and(|o| !o.is_empty()));
    if given_context.is_some()
        && given_configurable
            .as_ref()
            .and_then(Json_::as_object)
            .is_some_and(|c| !c.is_empty())
    {
        return Err(ApiError::new(
            axum::http::StatusCode::BAD_REQUEST,
            "Cannot specify both configurable and context. Prefer setting context alone. \
             Context was introduced in LangGraph 0.6.0 and is the long term planned \
             replacement for configurable.",
        ));
    }
    let context = match &given_context {
        Some(c) => c.clone(),
        None => given_configurable
            .clone()
            .unwrap_or_else(|| Json_::Object(JsonMap::new())),
    };
    let mut configurable = match &given_context {
        Some(c) => merge_objects([Some(c)]),
        None => merge_objects([given_configurable.as_ref()]),
    };
    if let Some(id) = body
        .checkpoint_id
        .clone()
        .or_else(|| checkpoint_id_of(body.checkpoint.as_ref()))
    {
        configurable.insert("checkpoint_id".into(), json!(id));
    }
    if let Some(Json_::Object(c)) = &body.checkpoint {
        configurable.extend(c.clone());
    }
    configurable.insert("langgraph_auth_user".into(), Json_::Null);
    configurable.insert("langgraph_auth_user_id".into(), json!(""));
    configurable.insert("langgraph_auth_permissions".into(), json!([]));
    if configurable
        .get("langgraph_request_id")
        .is_none_or(Json_::is_null)
    {
        configurable.insert(
            "langgraph_request_id".into(),
            json!(uuid::Uuid::new_v4().to_string()),
        );
    }
    let user_id = configurable
        .get("user_id")
        .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
        .cloned()
        .unwrap_or_else(|| json!(""));
    configurable.insert("run_id".into(), json!(run_id));
    configurable.insert("thread_id".into(), json!(thread_id));
    configurable.insert("graph_id".into(), json!(graph_id));
    configurable.insert("assistant_id".into(), json!(assistant_id));
    configurable.insert("user_id".into(), user_id);

    let records_guard = state.thread_records.lock().await;
    let mut thread_metadata = None;
    if stateful {
        let mut thread = match load(&state, &thread_id).await {
            Ok(t) => t,
            Err(e)
                if e.status == axum::http::StatusCode::NOT_FOUND
                    && body.if_not_exists == Some(IfNotExists::Create) =>
            {
                new_thread(&thread_id, JsonMap::new())
            }
            Err(e) => return Err(e),
        };
        let busy = field_str(&thread, "status") == "busy";
        // With a queue, the queue itself refuses a run on a busy thread (whichever process
        // runs its other runs).
        if busy && strategy == Multitask::Reject && !queued {
            return Err(ApiError::conflict(
                "Thread is already running a task. Wait for it to finish or choose a \
                 different multitask strategy.",
            ));
        }
        if let Some(obj) = thread.as_object_mut() {
            if !busy {
                obj.insert("status".into(), json!("busy"));
                obj.insert("updated_at".into(), json!(now_iso()));
                if let Some(Json_::Object(m)) = obj.get_mut("metadata") {
                    m.insert("graph_id".into(), json!(graph_id));
                    m.insert("assistant_id".into(), json!(assistant_id));
                }
                // The reference's merge: the assistant's config, the thread's, the run's,
                // then `configurable` from the assistant's and the thread's only.
                let mut config = merge_objects([
                    assistant.get("config"),
                    obj.get("config"),
                    given_config.as_ref(),
                ]);
                let kept = merge_objects([
                    assistant.get("config").and_then(|c| c.get("configurable")),
                    obj.get("config").and_then(|c| c.get("configurable")),
                ]);
                config.insert("configurable".into(), Json_::Object(kept));
                obj.insert("config".into(), Json_::Object(config));
            }
            thread_metadata = obj.get("metadata").cloned();
        }
        state.records.put(Kind::Thread, &thread_id, thread).await?;
    }
    let mut metadata = merge_objects([
        assistant.get("metadata"),
        thread_metadata.as_ref(),
        given_config.as_ref().and_then(|c| c.get("metadata")),
    ]);
    if let Some(m) = &body.metadata {
        metadata.extend(m.clone());
    }
    metadata.insert("assistant_id".into(), json!(assistant_id));

    let mut kwargs_config = merge_objects([assistant.get("config"), given_config.as_ref()]);
    kwargs_config.insert("configurable".into(), Json_::Object(configurable.clone()));
    kwargs_config.insert("metadata".into(), Json_::Object(metadata.clone()));
    let checkpoint_during = body.checkpoint_during.unwrap_or(true);
    let durability = body.durability.map_or(
        if checkpoint_during { "async" } else { "exit" },
        Durability::as_str,
    );
    let temporary = !stateful && body.on_completion.unwrap_or_default() == OnCompletion::Delete;
    // A temporary thread lives and dies with its run, unseen by any other request: its
    // checkpoints are kept in memory, so a stateless run writes nothing to the database
    // (and a process killed mid-run leaves nothing behind). The store is still the server's.
    let graph = if temporary {
        graph.with_saver(Arc::new(stategraph_checkpoint::InMemorySaver::new()))
    } else {
        graph
    };
    let now = now_iso();
    let run = json!({
        "run_id": run_id,
        "thread_id": thread_id,
        "assistant_id": assistant_id,
        "created_at": now,
        "updated_at": now,
        "status": "pending",
        "metadata": metadata,
        "kwargs": {
            "input": body.input,
            "command": body.command,
            "config": kwargs_config,
            "context": merge_objects([assistant.get("context"), Some(&context)]),
            "stream_mode": modes
                .iter()
                .map(|m| m.as_str())
                .chain(mode_names.iter().any(|n| n == EVENTS).then_some(EVENTS))
                .collect::<Vec<_>>(),
            "interrupt_before": body.interrupt_before,
            "interrupt_after": body.interrupt_after,
            "webhook": body.webhook,
            "feedback_keys": body.feedback_keys,
            "temporary": temporary,
            "subgraphs": body.stream_subgraphs.unwrap_or(false),
            "resumable": body.stream_resumable.unwrap_or(false),
            "checkpoint_during": checkpoint_during,
            "durability": durability,
        },
        "multitask_strategy": strategy.as_str(),
        "langsmith_session_name": null,
    });
    let (config, started_metadata) = engine_config(&thread_id, &body, &configurable, &metadata, 1)?;
    if queued {
        drop(records_guard);
        #[cfg(feature = "postgres")]
        return crate::queue::enqueue(
            &state,
            run,
            thread_id,
            body,
            strategy,
            (!background).then_some(graph),
        )
        .await;
        #[cfg(not(feature = "postgres"))]
        unreachable!("a queue needs the `postgres` feature");
    }
    // The run's events go through its hub, for joiners (`GET …/runs/{run_id}/stream`); it
    // exists before the run's record so that whoever finds the run finds its hub.
    let resumable = body.resumable();
    let hub = state.hubs.open(&run_id, resumable);
    // Deliberately at creation (the reference publishes it when a worker starts the run):
    // the caller of `runs/stream` gets it at once, even while the run waits its turn.
    let metadata_event = hub.publish("metadata", json!({ "run_id": run_id, "attempt": 1 }));
    let (turn, control) = if stateful {
        if let Err(e) = state.records.put(Kind::Run, &run_id, run.clone()).await {
            state.hubs.discard(&run_id, &hub);
            return Err(e);
        }
        let control = state.register_run(&run_id, &thread_id);
        if let Some(action) = strategy.cancel_action() {
            // The runs in flight stop (at their next await) before this one takes its turn.
            let cancel = Cancel {
                action,
                reason: format!(
                    "superseded by run {run_id} (multitask_strategy={})",
                    strategy.as_str()
                ),
            };
            state.cancel_thread_runs(&thread_id, &run_id, &cancel);
        }
        (Some(state.enter_thread(&thread_id)), Some(control))
    } else {
        (None, None)
    };
    drop(records_guard);

    let (tx, events) = mpsc::channel(64);
    // A new channel has room: the caller of `runs/stream` gets `metadata` first.
    let _ = tx.try_send(metadata_event);
    let hub = HubCloser::new(&state.hubs, &run_id, hub);
    let (done_tx, done) = oneshot::channel();
    let engine_modes = engine_modes(&modes, &mode_names);
    let wanted = Wanted::new(&modes, &mode_names);
    tokio::spawn(execute(Exec {
        state: Arc::clone(&state),
        graph,
        start,
        config,
        engine_modes,
        wanted,
        run: run.clone(),
        thread_id: thread_id.clone(),
        stateful,
        hub,
        tx,
        done_tx,
        control,
        turn,
        started_metadata,
        sink: None,
    }));
    Ok(Started {
        run,
        thread_id,
        stateful,
        events,
        resumable,
        done,
    })
}

/// What [`engine_config`] answers: the engine's run config, and the metadata added to the
/// run's record when it starts.
pub(crate) type EngineConfig = (RunConfig, JsonMap<String, Json_>);

/// The engine's config of a run of `body` on `thread_id` with the run's `configurable` and
/// `metadata`, on its `attempt`-th start; with what the reference adds to the run's metadata
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

/// A run ready to execute: everything [`execute`] needs.
pub(crate) struct Exec {
    pub(crate) state: Arc<AppState>,
    pub(crate) graph: Arc<dyn ServedGraph>,
    pub(crate) start: RunStart,
    pub(crate) config: RunConfig,
    /// The modes the engine streams (those asked for, and `values`).
    pub(crate) engine_modes: Vec<StreamMode>,
    /// The modes the caller asked for.
    pub(crate) wanted: Wanted,
    /// The run's record (`pending`).
    pub(crate) run: Json_,
    pub(crate) thread_id: String,
    pub(crate) stateful: bool,
    pub(crate) hub: HubCloser,
    /// The caller's events (a dropped receiver does not stop the run).
    pub(crate) tx: mpsc::Sender<StreamEvent>,
    pub(crate) done_tx: oneshot::Sender<Outcome>,
    /// The run's cancel signal and ended flag (a run on a thread).
    pub(crate) control: Option<(watch::Receiver<Option<Cancel>>, watch::Sender<bool>)>,
    /// The thread's turn lock (in-process runs on a thread).
    pub(crate) turn: Option<Arc<tokio::sync::Mutex<()>>>,
    /// Added to the run's config metadata when it starts.
    pub(crate) started_metadata: JsonMap<String, Json_>,
    /// Where published events are copied too (the run queue's event log).
    pub(crate) sink: Option<mpsc::UnboundedSender<(String, Json_)>>,
}

/// Runs a prepared run to its end: waits its turn on the thread, streams the graph to the
/// hub (and the sink), and writes the final records. Its outcome and the cancel that stopped
/// it, if any; `None` for a run cancelled before it started.
pub(crate) async fn execute(x: Exec) -> Option<(Outcome, Option<Cancel>)> {
    let Exec {
        state: task_state,
        graph,
        start,
        config,
        engine_modes,
        mut wanted,
        run: mut task_run,
        thread_id: task_thread,
        stateful,
        hub,
        tx,
        done_tx,
        control,
        turn,
        started_metadata,
        sink,
    } = x;
    let publish = |name: &str, data: Json_| -> StreamEvent {
        if let Some(sink) = &sink {
            let _ = sink.send((name.to_owned(), data.clone()));
        }
        hub.hub().publish(name.to_owned(), data)
    };
    {
        let (mut cancel_rx, ended) = match control {
            Some((rx, ended)) => (Some(rx), Some(ended)),
            None => (None, None),
        };
        let task_run_id = field_str(&task_run, "run_id").to_owned();
        // One run per thread at a time, in the order they were created; a run cancelled
        // while it waits never starts.
        let _turn = match turn {
            Some(lock) => tokio::select! {
                guard = lock.lock_owned() => Some(guard),
                cancel = cancelled(cancel_rx.as_mut()) => {
                    drop(tx);
                    let _ = done_tx.send(Outcome {
                        values: Json_::Object(JsonMap::new()),
                        interrupts: Vec::new(),
                        error: None,
                    });
                    cancel_pending(&task_state, graph.as_ref(), &task_thread, task_run, &cancel).await;
                    task_state.unregister_run(&task_run_id);
                    drop(hub);
                    if let Some(e) = ended {
                        e.send_replace(true);
                    }
                    return None;
                }
            },
            None => None,
        };
        if let Some(obj) = task_run.as_object_mut() {
            obj.insert("status".into(), json!("running"));
            obj.insert("updated_at".into(), json!(now_iso()));
            if let Some(Json_::Object(m)) = obj
                .get_mut("kwargs")
                .and_then(|k| k.get_mut("config"))
                .and_then(|c| c.get_mut("metadata"))
            {
                m.extend(started_metadata);
            }
        }
        if stateful {
            let _ = task_state
                .records
                .put(Kind::Run, &task_run_id, task_run.clone())
                .await;
        }
        for (name, data) in wanted.begin(&task_run) {
            let event = publish(&name, data);
            let _ = tx.send(event).await;
        }
        let mut stream = graph.stream(start, config, &engine_modes);
        let mut values = Json_::Object(JsonMap::new());
        let mut error = None;
        let mut cancel = None;
        'run: loop {
            let item = tokio::select! {
                item = stream.next() => item,
                c = cancelled(cancel_rx.as_mut()) => {
                    cancel = Some(c);
                    break;
                }
            };
            match item {
                None => break,
                Some(Ok((name, data))) => {
                    if name == "values" {
                        values = data.clone();
                    }
                    for (name, data) in wanted.render(name, data) {
                        let event = publish(&name, data);
                        // A caller that went away does not stop the run; a cancel does,
                        // even while a slow reader holds the event back.
                        tokio::select! {
                            _ = tx.send(event) => {}
                            c = cancelled(cancel_rx.as_mut()) => {
                                cancel = Some(c);
                                break 'run;
                            }
                        }
                    }
                }
                Some(Err(e)) => {
                    error = Some(json!({ "error": error_name(&e), "message": e.to_string() }));
                    break;
                }
            }
        }
        // Dropping the stream stops a cancelled run; what it checkpointed stays, unless the
        // cancel rolls it back.
        drop(stream);
        if error.is_none() && cancel.is_none() {
            for (name, data) in wanted.end(&values) {
                let event = publish(&name, data);
                let _ = tx.send(event).await;
            }
        }
        if cancel
            .as_ref()
            .is_some_and(|c| c.action == CancelAction::Rollback)
        {
            // The stopped run's background writer may still be committing what it queued:
            // delete after it, or its last checkpoints outlive the rollback.
            graph.wait_for_saves(&task_thread).await;
            let _ = task_state
                .saver
                .delete_for_runs(std::slice::from_ref(&task_run_id))
                .await;
        }
        let snapshot = graph
            .get_state(&RunConfig::thread(&task_thread), false)
            .await
            .ok();
        let outcome = Outcome {
            values,
            interrupts: snapshot
                .as_ref()
                .map(|s| {
                    s.interrupts
                        .iter()
                        .map(crate::convert::interrupt_output)
                        .collect()
                })
                .unwrap_or_default(),
            error,
        };
        if stateful {
            finish_records(
                &task_state,
                &task_thread,
                task_run,
                snapshot.as_ref(),
                &outcome,
                cancel.as_ref(),
            )
            .await;
            task_state.unregister_run(&task_run_id);
        }
        // A temporary thread's checkpoints go with the in-memory saver of its run.
        if let Some(e) = &outcome.error {
            // Deliberately kept in a resumable run's log too (the reference publishes the
            // error live only), so that a client that reconnects learns how the run ended.
            let event = publish("error", e.clone());
            let _ = tx.send(event).await;
        }
        drop(hub);
        let _ = done_tx.send(outcome.clone());
        if let Some(e) = ended {
            e.send_replace(true);
        }
        Some((outcome, cancel))
    }
}

/// Marks the run finished and the thread idle, interrupted or in error (busy while more of
/// its runs wait), with its values.
async fn finish_records(
    state: &AppState,
    thread_id: &str,
    mut run: Json_,
    snapshot: Option<&StateSnapshot>,
    outcome: &Outcome,
    cancel: Option<&Cancel>,
) {
    let interrupted = snapshot.is_some_and(|s| !s.next.is_empty() || !s.interrupts.is_empty());
    let (run_status, thread_status) = match (&outcome.error, interrupted) {
        // A cancelled run is `interrupted` (or deleted by a rollback); its thread waits at
        // the checkpoint the run got to (or started from).
        _ if cancel.is_some() => (
            "interrupted",
            if interrupted { "interrupted" } else { "idle" },
        ),
        (Some(_), _) => ("error", "error"),
        // As LangGraph's server: a run that stopped on an interrupt succeeded (its run status
        // `interrupted` means cancelled), and its thread waits, `interrupted`.
        (None, true) => ("success", "interrupted"),
        (None, false) => ("success", "idle"),
    };
    let _records = state.thread_records.lock().await;
    #[cfg_attr(not(feature = "postgres"), allow(unused_mut))]
    let mut waiting = state.leave_thread(thread_id);
    #[cfg(feature = "postgres")]
    if waiting == 0 && state.has_queue() {
        waiting = crate::queue::pending_on(state, thread_id).await;
    }
    let thread_status = if waiting > 0 { "busy" } else { thread_status };
    let now = now_iso();
    if let Ok(mut thread) = load(state, thread_id).await {
        if let Some(obj) = thread.as_object_mut() {
            obj.insert("status".into(), json!(thread_status));
            obj.insert("updated_at".into(), json!(now));
            obj.insert("state_updated_at".into(), json!(now));
            if let Some(s) = snapshot {
                obj.insert("values".into(), values_json(&s.values));
                obj.insert("interrupts".into(), thread_interrupts(s));
            }
            let error = match cancel {
                Some(c) => cancel_error(c),
                None => outcome.error.clone().unwrap_or(Json_::Null),
            };
            obj.insert("error".into(), error);
        }
        let _ = state.records.put(Kind::Thread, thread_id, thread).await;
    }
    let run_id = field_str(&run, "run_id").to_owned();
    if cancel.is_some_and(|c| c.action == CancelAction::Rollback) {
        let _ = state.records.delete(Kind::Run, &run_id).await;
        return;
    }
    if let Some(obj) = run.as_object_mut() {
        obj.insert("status".into(), json!(run_status));
        obj.insert("updated_at".into(), json!(now));
    }
    let _ = state.records.put(Kind::Run, &run_id, run).await;
}

/// The error a cancel leaves on the run's thread, as LangGraph's server records the
/// `UserInterrupt` / `UserRollback` it raises in the run.
fn cancel_error(cancel: &Cancel) -> Json_ {
    let name = match cancel.action {
        CancelAction::Interrupt => "UserInterrupt",
        CancelAction::Rollback => "UserRollback",
    };
    json!({ "error": name, "message": cancel.reason })
}

/// Resolves when the run is asked to stop; never for a run that cannot be cancelled (`None`,
/// a stateless run) or whose cancel signal is gone.
async fn cancelled(rx: Option<&mut watch::Receiver<Option<Cancel>>>) -> Cancel {
    let Some(rx) = rx else {
        return std::future::pending().await;
    };
    loop {
        if let Some(c) = rx.borrow_and_update().clone() {
            return c;
        }
        if rx.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}

/// Records a run cancelled before it started: `interrupted`, or deleted by a rollback; its
/// thread stays busy while other runs wait, else goes back to its checkpoint's status.
async fn cancel_pending(
    state: &AppState,
    graph: &dyn ServedGraph,
    thread_id: &str,
    mut run: Json_,
    cancel: &Cancel,
) {
    let _records = state.thread_records.lock().await;
    let waiting = state.leave_thread(thread_id);
    let run_id = field_str(&run, "run_id").to_owned();
    if cancel.action == CancelAction::Rollback {
        let _ = state.records.delete(Kind::Run, &run_id).await;
    } else {
        if let Some(obj) = run.as_object_mut() {
            obj.insert("status".into(), json!("interrupted"));
            obj.insert("updated_at".into(), json!(now_iso()));
        }
        let _ = state.records.put(Kind::Run, &run_id, run).await;
    }
    if waiting > 0 {
        return;
    }
    let snapshot = graph
        .get_state(&RunConfig::thread(thread_id), false)
        .await
        .ok();
    let interrupted = snapshot
        .as_ref()
        .is_some_and(|s| !s.next.is_empty() || !s.interrupts.is_empty());
    if let Ok(mut thread) = load(state, thread_id).await {
        if let Some(obj) = thread.as_object_mut() {
            let status = if interrupted { "interrupted" } else { "idle" };
            obj.insert("status".into(), json!(status));
            obj.insert("updated_at".into(), json!(now_iso()));
        }
        let _ = state.records.put(Kind::Thread, thread_id, thread).await;
    }
}

/// The events a run's caller asked for, rendered as the reference renders them.
pub(crate) struct Wanted {
    modes: Vec<&'static str>,
    messages: Option<crate::messages::Rendering>,
    accumulated: crate::messages::Accumulator,
    /// Whether `events` was asked for.
    events_wanted: bool,
    /// The `events` rendering, once the run has started.
    events: Option<Events>,
}

impl Wanted {
    pub(crate) fn new(modes: &[StreamMode], names: &[String]) -> Self {
        Self {
            modes: modes.iter().map(|m| m.as_str()).collect(),
            messages: crate::messages::Rendering::of(names),
            accumulated: crate::messages::Accumulator::default(),
            events_wanted: names.iter().any(|n| n == EVENTS),
            events: None,
        }
    }

    /// The events to publish when the run `run` (its record) starts: the graph's
    /// `on_chain_start` if `events` was asked for.
    fn begin(&mut self, run: &Json_) -> Vec<(String, Json_)> {
        if !self.events_wanted {
            return Vec::new();
        }
        let (events, start) = Events::start(run);
        self.events = Some(events);
        vec![(EVENTS.to_owned(), start)]
    }

    /// The events to publish when the run ended without error, with its last `values`.
    fn end(&self, values: &Json_) -> Vec<(String, Json_)> {
        self.events
            .as_ref()
            .map(|e| (EVENTS.to_owned(), e.end(values)))
            .into_iter()
            .collect()
    }

    /// The events to publish for one engine event: none if its mode was not asked for;
    /// `messages` events as `messages-tuple` or `messages` asked; `events` from the root
    /// graph's `debug` events.
    fn render(&mut self, name: String, data: Json_) -> Vec<(String, Json_)> {
        let mut out = Vec::new();
        if name == "debug"
            && let Some(events) = &mut self.events
        {
            out.extend(
                events
                    .debug(&data)
                    .into_iter()
                    .map(|e| (EVENTS.to_owned(), e)),
            );
        }
        let base = name.split('|').next().unwrap_or_default();
        if !self.modes.contains(&base) {
            return out;
        }
        match (base, self.messages) {
            ("messages", Some(crate::messages::Rendering::Accumulated)) => {
                out.extend(self.accumulated.events(&data));
            }
            _ => out.push((name, data)),
        }
        out
    }
}

/// The modes the engine streams for a run that asked for `modes` (named `names`): those,
/// `values` (the run's outcome is its last values) and, for `events`, `debug`.
pub(crate) fn engine_modes(modes: &[StreamMode], names: &[String]) -> Vec<StreamMode> {
    let mut engine = modes.to_vec();
    if !engine.contains(&StreamMode::Values) {
        engine.push(StreamMode::Values);
    }
    if names.iter().any(|n| n == EVENTS) && !engine.contains(&StreamMode::Debug) {
        engine.push(StreamMode::Debug);
    }
    engine
}
