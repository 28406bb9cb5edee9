//! Running a graph for a run request: records before and after, events to the caller.

use std::sync::Arc;

use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::{Map as JsonMap, Value as Json_, json};
use stategraph_checkpoint::{Value, now_iso, uuid6};
use stategraph_graph::{Resume, RunConfig, StateSnapshot, StreamMode};
use tokio::sync::{mpsc, oneshot};

use crate::app::AppState;
use crate::assistants;
use crate::convert::{checkpoint_id_of, input_map, thread_interrupts, values_json};
use crate::error::{ApiError, error_name};
use crate::graph::{Event, RunStart, ServedGraph};
use crate::records::{Kind, field_str};
use crate::threads::{load, new_thread};

/// A run request's body (`RunCreateStateful` / `RunCreateStateless`).
#[derive(Deserialize, Default, Clone)]
#[serde(default)]
pub(crate) struct RunBody {
    assistant_id: Option<String>,
    input: Option<Json_>,
    command: Option<Json_>,
    config: Option<Json_>,
    context: Option<Json_>,
    metadata: Option<JsonMap<String, Json_>>,
    stream_mode: Option<Json_>,
    interrupt_before: Option<Json_>,
    interrupt_after: Option<Json_>,
    checkpoint: Option<Json_>,
    checkpoint_id: Option<String>,
    if_not_exists: Option<String>,
    multitask_strategy: Option<String>,
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
    /// Events of the stream modes asked for, then `error` if the run failed; closed once the
    /// run's records are final.
    pub(crate) events: mpsc::Receiver<Event>,
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

fn stream_modes(v: Option<&Json_>) -> Result<Vec<StreamMode>, ApiError> {
    let names = node_list(v, "stream_mode")?.unwrap_or_else(|| vec!["values".into()]);
    names
        .iter()
        .map(|n| {
            StreamMode::from_name(n)
                .ok_or_else(|| ApiError::invalid(format!("unknown stream_mode `{n}`")))
        })
        .collect()
}

fn run_config(
    thread_id: &str,
    body: &RunBody,
    run_id: &str,
    graph_id: &str,
    assistant_id: &str,
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
        .and_then(Json_::as_u64)
    {
        config = config.with_recursion_limit(usize::try_from(limit).unwrap_or(usize::MAX));
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
    config = config
        .with_configurable("run_id", run_id)
        .with_configurable("graph_id", graph_id)
        .with_configurable("assistant_id", assistant_id);
    if let Some(m) = &body.metadata {
        config.metadata.extend(m.clone());
    }
    if let Some(ctx) = body.context.clone().filter(|c| !c.is_null()) {
        config = config.with_context(ctx);
    }
    config.queue = body.multitask_strategy.as_deref() == Some("enqueue");
    Ok(config)
}

fn run_start(body: &RunBody) -> Result<RunStart, ApiError> {
    if let Some(command) = body.command.as_ref().filter(|c| !c.is_null()) {
        let Some(command) = command.as_object() else {
            return Err(ApiError::invalid("command must be an object"));
        };
        if command.keys().any(|k| k != "resume") {
            return Err(ApiError::invalid(
                "only `command.resume` is supported (not `update` or `goto`)",
            ));
        }
        let resume = command.get("resume").cloned().unwrap_or(Json_::Null);
        return Ok(RunStart::Resume(Resume::Value(Value::from(resume))));
    }
    match body.input.clone() {
        None | Some(Json_::Null) => Ok(RunStart::Continue),
        Some(v) => Ok(RunStart::Input(input_map(v, "input")?)),
    }
}

/// Starts a run of `body` on `thread_id` (`None`: a stateless run on a temporary thread).
pub(crate) async fn start(
    state: Arc<AppState>,
    thread_id: Option<String>,
    body: RunBody,
) -> Result<Started, ApiError> {
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
    let modes = stream_modes(body.stream_mode.as_ref())?;
    let start = run_start(&body)?;
    let stateful = thread_id.is_some();
    let thread_id = thread_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let run_id = uuid6(None);
    let config = run_config(&thread_id, &body, &run_id, &graph_id, &assistant_id)?;

    if stateful {
        let mut thread = match load(&state, &thread_id).await {
            Ok(t) => t,
            Err(e)
                if e.status == axum::http::StatusCode::NOT_FOUND
                    && body.if_not_exists.as_deref() == Some("create") =>
            {
                new_thread(&thread_id, JsonMap::new())
            }
            Err(e) => return Err(e),
        };
        if field_str(&thread, "status") == "busy" && !config.queue {
            return Err(ApiError::conflict(format!(
                "Thread {thread_id} is already running a run"
            )));
        }
        if let Some(obj) = thread.as_object_mut() {
            obj.insert("status".into(), json!("busy"));
            obj.insert("updated_at".into(), json!(now_iso()));
            if let Some(Json_::Object(m)) = obj.get_mut("metadata") {
                m.insert("graph_id".into(), json!(graph_id));
                m.insert("assistant_id".into(), json!(assistant_id));
            }
        }
        state.records.put(Kind::Thread, &thread_id, thread).await?;
    }
    let now = now_iso();
    let mut run = json!({
        "run_id": run_id,
        "thread_id": thread_id,
        "assistant_id": assistant_id,
        "created_at": now,
        "updated_at": now,
        "status": "running",
        "metadata": body.metadata.clone().unwrap_or_default(),
        "kwargs": {
            "input": body.input,
            "command": body.command,
            "config": body.config,
            "context": body.context,
            "stream_mode": modes.iter().map(|m| m.as_str()).collect::<Vec<_>>(),
            "interrupt_before": body.interrupt_before,
            "interrupt_after": body.interrupt_after,
        },
        "multitask_strategy": body.multitask_strategy.clone().unwrap_or_else(|| "reject".into()),
    });
    if stateful {
        state.records.put(Kind::Run, &run_id, run.clone()).await?;
    } else if let Some(o) = run.as_object_mut() {
        o.insert("status".into(), json!("running"));
    }

    let (tx, events) = mpsc::channel(64);
    let (done_tx, done) = oneshot::channel();
    let mut engine_modes = modes.clone();
    if !engine_modes.contains(&StreamMode::Values) {
        engine_modes.push(StreamMode::Values);
    }
    let wanted: Vec<&'static str> = modes.iter().map(|m| m.as_str()).collect();
    let task_state = Arc::clone(&state);
    let task_thread = thread_id.clone();
    let task_run = run.clone();
    tokio::spawn(async move {
        let mut stream = graph.stream(start, config, &engine_modes);
        let mut values = Json_::Object(JsonMap::new());
        let mut error = None;
        while let Some(item) = stream.next().await {
            match item {
                Ok((name, data)) => {
                    if name == "values" {
                        values = data.clone();
                    }
                    if wanted.contains(&name) {
                        // A caller that went away does not stop the run.
                        let _ = tx.send((name, data)).await;
                    }
                }
                Err(e) => {
                    error = Some(json!({ "error": error_name(&e), "message": e.to_string() }));
                    break;
                }
            }
        }
        drop(stream);
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
                        .map(stategraph_graph::Interrupt::to_json)
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
            )
            .await;
        } else {
            // A stateless run's thread is temporary.
            let _ = task_state.saver.delete_thread(&task_thread).await;
        }
        if let Some(e) = &outcome.error {
            let _ = tx.send(("error", e.clone())).await;
        }
        let _ = done_tx.send(outcome);
    });
    Ok(Started {
        run,
        thread_id,
        events,
        done,
    })
}

/// Marks the run finished and the thread idle, interrupted or in error, with its values.
async fn finish_records(
    state: &AppState,
    thread_id: &str,
    mut run: Json_,
    snapshot: Option<&StateSnapshot>,
    outcome: &Outcome,
) {
    let interrupted = snapshot.is_some_and(|s| !s.next.is_empty() || !s.interrupts.is_empty());
    let (run_status, thread_status) = match (&outcome.error, interrupted) {
        (Some(_), _) => ("error", "error"),
        // As LangGraph's server: a run that stopped on an interrupt succeeded (its run status
        // `interrupted` means cancelled), and its thread waits, `interrupted`.
        (None, true) => ("success", "interrupted"),
        (None, false) => ("success", "idle"),
    };
    let now = now_iso();
    if let Ok(mut thread) = load(state, thread_id).await {
        if let Some(obj) = thread.as_object_mut() {
            obj.insert("status".into(), json!(thread_status));
            obj.insert("updated_at".into(), json!(now));
            if let Some(s) = snapshot {
                obj.insert("values".into(), values_json(&s.values));
                obj.insert("interrupts".into(), thread_interrupts(s));
            }
            obj.insert("error".into(), outcome.error.clone().unwrap_or(Json_::Null));
        }
        let _ = state.records.put(Kind::Thread, thread_id, thread).await;
    }
    if let Some(obj) = run.as_object_mut() {
        obj.insert("status".into(), json!(run_status));
        obj.insert("updated_at".into(), json!(now));
    }
    let run_id = field_str(&run, "run_id").to_owned();
    let _ = state.records.put(Kind::Run, &run_id, run).await;
}
