//! Tasks: a task is the run a message started (its id `"{context_id}:{run_id}"`) and the
//! runs that continued it (each recording the task's id in its `metadata.a2a.task_id`); its
//! state is its latest run's status — `input-required` when that run ended with the thread
//! interrupted. `GetTask`, `CancelTask` and `ListTasks` read the run records and the thread.

use std::collections::HashMap;

use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime};
use serde_json::{Value as Json, json};
use stategraph_checkpoint::now_iso;
use stategraph_graph::{AsNode, HistoryOptions as Checkpoints, RunConfig};
use stategraph_runs::{RunStatus, ThreadStatus};

use super::card::HISTORY_SCOPE_HEADER;
use super::parts::{self, HistoryOptions, Object, Scope, set, text_part};
use super::{Call, RpcError, RpcResult, code, v1_state};
use crate::app::AppState;
use crate::records::{RunRecord, ThreadRecord};
use crate::threads::{graph_of, load};

mod list;
pub(crate) use list::*;

/// The most messages a history may be asked for.
const MAX_HISTORY_LENGTH: u64 = 10;

/// The most threads `ListTasks` looks through without a `contextId`.
const CONTEXT_SCAN_LIMIT: usize = 1000;

/// The task states after which a task takes no more messages.
const TERMINAL: [&str; 4] = [
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
];

/// Whether a task in `state` is over.
pub(super) fn is_terminal(state: &str) -> bool {
    TERMINAL.contains(&state)
}

/// A task id: the context (thread) and the run that started it.
pub(super) fn task_id(context_id: &str, run_id: &str) -> String {
    format!("{context_id}:{run_id}")
}

/// A run's `metadata.a2a`.
fn a2a_of(run: &RunRecord) -> Option<&Object> {
    run.metadata.get("a2a").and_then(Json::as_object)
}

fn a2a_str<'a>(run: &'a RunRecord, key: &str) -> Option<&'a str> {
    a2a_of(run)
        .and_then(|a| a.get(key))
        .and_then(Json::as_str)
        .filter(|s| !s.is_empty())
}

/// The task a run belongs to.
fn task_of(context_id: &str, run: &RunRecord) -> String {
    a2a_str(run, "task_id").map_or_else(|| task_id(context_id, &run.run_id), str::to_owned)
}

/// The task ids of a context's runs of `assistant_id`, by the id each task's first message
/// was stamped with.
fn ids_by_start(
    runs: &[RunRecord],
    context_id: &str,
    assistant_id: &str,
) -> HashMap<String, String> {
    runs.iter()
        .filter(|r| r.assistant_id == assistant_id)
        .filter_map(|r| {
            Some((
                a2a_str(r, "task_start_id")?.to_owned(),
                task_of(context_id, r),
            ))
        })
        .collect()
}

/// The task ids of a context's runs of `assistant_id`, by the id each task's first message
/// was stamped with (empty, and logged, when the runs cannot be read).
pub(super) async fn context_task_ids(
    state: &AppState,
    context_id: &str,
    assistant_id: &str,
) -> HashMap<String, String> {
    match runs_of(state, context_id).await {
        Ok(runs) => ids_by_start(&runs, context_id, assistant_id),
        Err(e) => {
            tracing::warn!(context_id, error = %e.message, "a2a: a context's tasks are unknown");
            HashMap::new()
        }
    }
}

/// A task state for a run's status; a run that succeeded with its thread interrupted (given
/// for the context's latest run only) awaits input.
fn state_of(run: &RunRecord, thread: Option<&ThreadRecord>) -> &'static str {
    match run.status {
        RunStatus::Pending => "TASK_STATE_SUBMITTED",
        RunStatus::Running => "TASK_STATE_WORKING",
        RunStatus::Success if thread.is_some_and(|t| t.status == ThreadStatus::Interrupted) => {
            "TASK_STATE_INPUT_REQUIRED"
        }
        RunStatus::Success => "TASK_STATE_COMPLETED",
        RunStatus::Interrupted => "TASK_STATE_CANCELED",
        RunStatus::Error | RunStatus::Timeout => "TASK_STATE_FAILED",
    }
}

/// A context's runs, newest first.
async fn runs_of(state: &AppState, context_id: &str) -> Result<Vec<RunRecord>, RpcError> {
    let rows = state
        .runs
        .queue
        .list(&stategraph_runs::RunQuery::thread(context_id))
        .await
        .map_err(|e| RpcError::internal("listing a context's runs", &e.to_string()))?;
    let mut runs: Vec<RunRecord> = rows.iter().map(RunRecord::of).collect();
    runs.sort_by(|a, b| (&b.created_at, &b.run_id).cmp(&(&a.created_at, &a.run_id)));
    Ok(runs)
}

/// A task as found.
pub(super) struct Task {
    pub(super) task_id: String,
    pub(super) context_id: String,
    /// Its latest run.
    pub(super) run: RunRecord,
    pub(super) state: &'static str,
    pub(super) ids_by_start: HashMap<String, String>,
}

/// The task `task_id` names (in `context_id`, when given) among `assistant_id`'s, or `None`
/// when there is none.
pub(super) async fn resolve(
    state: &AppState,
    task_id: &str,
    context_id: Option<&str>,
    assistant_id: &str,
) -> Result<Option<Task>, RpcError> {
    let (parsed_context, anchor) = match task_id.split_once(':') {
        Some((c, r)) => (Some(c), r),
        None => (None, task_id),
    };
    if let (Some(p), Some(c)) = (parsed_context, context_id)
        && p != c
    {
        return Ok(None);
    }
    let Some(context_id) = context_id.or(parsed_context).filter(|c| !c.is_empty()) else {
        return Ok(None);
    };
    let Ok(anchor) = uuid::Uuid::parse_str(anchor).map(|u| u.to_string()) else {
        return Ok(None);
    };
    let internal = |e: crate::error::ApiError| RpcError::internal("reading a task", &e.detail);
    let Some(anchor_run) = state
        .runs
        .queue
        .get(&anchor)
        .await
        .map_err(|e| internal(crate::run::api_error(e)))?
        .map(|r| RunRecord::of(&r))
    else {
        return Ok(None);
    };
    if anchor_run.thread_id != context_id || anchor_run.assistant_id != assistant_id {
        return Ok(None);
    }
    if a2a_str(&anchor_run, "task_id").is_some_and(|t| t != task_id) {
        return Ok(None);
    }
    let thread = match load(state, context_id).await {
        Ok(t) => t,
        Err(e) if e.status.is_client_error() => return Ok(None),
        Err(e) => return Err(internal(e)),
    };
    let runs = runs_of(state, context_id).await?;
    let newest = runs.first().map(|r| r.run_id.clone());
    let latest = runs
        .iter()
        .filter(|r| r.assistant_id == assistant_id)
        .find(|r| r.run_id == anchor || a2a_str(r, "task_id") == Some(task_id))
        .cloned()
        .unwrap_or(anchor_run);
    let is_newest = newest.as_deref() == Some(latest.run_id.as_str());
    Ok(Some(Task {
        task_id: task_id.to_owned(),
        context_id: context_id.to_owned(),
        state: state_of(&latest, is_newest.then_some(&thread)),
        ids_by_start: ids_by_start(&runs, context_id, assistant_id),
        run: latest,
    }))
}

/// The messages of a run's last checkpoint, its first added message stamped with `task_id`
/// unless it is stamped already; and the messages the run added (`None` when unknown).
pub(super) async fn run_messages(
    state: &AppState,
    context_id: &str,
    run_id: &str,
    task_id: &str,
) -> Result<(Vec<Json>, Option<Vec<Json>>), RpcError> {
    let internal = |e: &dyn std::fmt::Display| RpcError::internal("reading a task's messages", e);
    let thread = match load(state, context_id).await {
        Ok(t) => t,
        Err(_) => return Ok((Vec::new(), None)),
    };
    let graph = graph_of(state, &thread).map_err(|e| internal(&e.detail))?;
    let config = RunConfig::thread(context_id);
    let latest = |source: Option<&str>| {
        let mut options = Checkpoints::new().limit(1).filter("run_id", run_id);
        if let Some(s) = source {
            options = options.filter("source", s);
        }
        let config = &config;
        async move {
            let found = graph.history(config, options).await?;
            Ok::<_, stategraph_graph::GraphError>(found.first().map(|s| {
                crate::wire::output_json(&s.values, graph.output_channel())
                    .get("messages")
                    .and_then(Json::as_array)
                    .cloned()
                    .unwrap_or_default()
            }))
        }
    };
    let Some(messages) = latest(None).await.map_err(|e| internal(&e))? else {
        return Ok((Vec::new(), None));
    };
    let Some(before) = latest(Some("input")).await.map_err(|e| internal(&e))? else {
        return Ok((messages, None));
    };
    let added_from = added_from(&before, &messages);
    let mut messages = messages;
    let added = added_from.map(|i| messages.get(i..).unwrap_or_default().to_vec());
    if let Some(Json::Object(first)) = added_from.and_then(|i| messages.get_mut(i)) {
        let kwargs = first
            .entry("additional_kwargs")
            .or_insert_with(|| json!({}));
        if !kwargs.is_object() {
            *kwargs = json!({});
        }
        if let Some(kwargs) = kwargs.as_object_mut() {
            let a2a = kwargs.entry("a2a").or_insert_with(|| json!({}));
            if !a2a.is_object() {
                *a2a = json!({});
            }
            let stamped = ["task_id", "task_start_id"].iter().any(|k| {
                a2a.get(*k)
                    .and_then(Json::as_str)
                    .is_some_and(|s| !s.is_empty())
            });
            if !stamped {
                set(a2a, "task_id", json!(task_id));
            }
        }
    }
    Ok((messages, added))
}

/// Where the messages a run added start: after `before` when the run's messages begin with
/// it, else after the last message whose id `before` has (ids must be unique there).
fn added_from(before: &[Json], messages: &[Json]) -> Option<usize> {
    if messages.get(..before.len()) == Some(before) {
        return Some(before.len());
    }
    let ids: Vec<&str> = before
        .iter()
        .filter_map(|m| m.get("id").and_then(Json::as_str))
        .collect();
    let unique = ids.len() == before.len()
        && ids.iter().collect::<std::collections::HashSet<_>>().len() == ids.len();
    if !unique {
        return None;
    }
    let last = messages.iter().rposition(|m| {
        m.get("id")
            .and_then(Json::as_str)
            .is_some_and(|id| ids.contains(&id))
    });
    Some(last.map_or(0, |i| i + 1))
}

/// `historyLength`: absent, or an integer from 0 to 10.
pub(super) fn history_length(v: Option<&Json>) -> Result<Option<usize>, RpcError> {
    let refused = || RpcError::params("historyLength must be a non-negative integer");
    match v {
        None | Some(Json::Null) => Ok(None),
        Some(Json::Number(n)) => {
            let n = n.as_u64().ok_or_else(refused)?;
            if n > MAX_HISTORY_LENGTH {
                return Err(RpcError::params(format!(
                    "historyLength cannot exceed {MAX_HISTORY_LENGTH}"
                )));
            }
            Ok(usize::try_from(n).ok())
        }
        Some(_) => Err(refused()),
    }
}

/// The history scope: `historyScope` in `options`, else the scope header, else `context`.
pub(super) fn history_scope(options: &Object, call: &Call) -> Result<Scope, RpcError> {
    let given = match options.get("historyScope") {
        Some(Json::Null) | None => call
            .headers
            .get(HISTORY_SCOPE_HEADER)
            .map(|v| Json::String(v.to_str().unwrap_or_default().to_owned())),
        Some(v) => Some(v.clone()),
    };
    match given.as_ref().map(|v| v.as_str()) {
        None | Some(Some("context")) => Ok(Scope::Context),
        Some(Some("task")) => Ok(Scope::Task),
        Some(_) => Err(RpcError::params("historyScope must be 'context' or 'task'")),
    }
}

/// A task's history as `options` asks (none when its length is 0).
async fn task_history(
    state: &AppState,
    task: &Task,
    options: HistoryOptions,
) -> Result<Option<Vec<Json>>, RpcError> {
    if options.length == Some(0) {
        return Ok(None);
    }
    let (messages, _) =
        run_messages(state, &task.context_id, &task.run.run_id, &task.task_id).await?;
    parts::history(
        &messages,
        &task.task_id,
        &task.context_id,
        options,
        Some(&task.ids_by_start),
    )
    .map(Some)
    .map_err(|e| RpcError::new(code::INVALID_AGENT_RESPONSE, e))
}

/// The `id` (and `contextId`) of a task call.
fn ids(params: &Object) -> Result<(String, Option<String>), RpcError> {
    let id = params
        .get("id")
        .filter(|v| !v.is_null() && v.as_str() != Some("") && v.as_bool() != Some(false));
    let Some(id) = id else {
        return Err(RpcError::params("Missing required parameter: id (task_id)"));
    };
    let context = params.get("contextId").filter(|v| !v.is_null());
    match (id.as_str(), context.map(Json::as_str)) {
        (Some(id), None) => Ok((id.to_owned(), None)),
        (Some(id), Some(Some(c))) => Ok((id.to_owned(), Some(c.to_owned()))),
        _ => Err(RpcError::params("Task id and contextId must be strings")),
    }
}

/// `GetTask`: a task's state and history.
pub(super) async fn get(call: &Call) -> RpcResult {
    let (id, context) = ids(&call.params)?;
    let scope = history_scope(&call.params, call);
    let Some(task) = resolve(&call.state, &id, context.as_deref(), &call.assistant_id).await?
    else {
        let place = context
            .map(|c| format!(" in context '{c}'"))
            .unwrap_or_default();
        return Err(RpcError::new(
            code::TASK_NOT_FOUND,
            format!("Task not found: {id}{place}"),
        ));
    };
    let length = history_length(call.params.get("historyLength"))?;
    let options = HistoryOptions {
        length,
        scope: scope?,
    };
    let history = task_history(&call.state, &task, options).await?;
    let mut status = json!({ "state": task.state, "timestamp": task.run.updated_at });
    let said = match task.state {
        "TASK_STATE_COMPLETED" => Some("Task completed successfully".to_owned()),
        "TASK_STATE_FAILED" => Some(format!(
            "Task failed with status: {}",
            task.run.status.as_str()
        )),
        _ => None,
    };
    if let Some(text) = said {
        set(
            &mut status,
            "message",
            json!({
                "kind": "message",
                "role": "ROLE_AGENT",
                "parts": [text_part(text)],
                "messageId": uuid::Uuid::new_v4().to_string(),
                "taskId": task.task_id,
            }),
        );
    }
    let mut out = json!({
        "kind": "task",
        "id": task.task_id,
        "contextId": task.context_id,
        "status": status,
    });
    if let Some(h) = history {
        set(&mut out, "history", Json::Array(h));
    }
    Ok(out)
}

/// `CancelTask`: stops a task's run (a task awaiting input: ends its interrupt, so the
/// thread takes new messages, and records the task canceled).
pub(super) async fn cancel(call: &Call) -> RpcResult {
    let (id, context) = ids(&call.params)?;
    let state = &call.state;
    let task = resolve(state, &id, context.as_deref(), &call.assistant_id)
        .await
        .map_err(|_| RpcError::new(code::INTERNAL_ERROR, "Failed to check task status"))?
        .ok_or_else(|| RpcError::new(code::TASK_NOT_FOUND, format!("Task not found: {id}")))?;
    if is_terminal(task.state) {
        return Err(RpcError::new(
            code::TASK_NOT_CANCELABLE,
            "Task is not cancelable in its current state",
        ));
    }
    let failed = |e: &dyn std::fmt::Display| {
        tracing::error!(task_id = %id, error = %e, "a2a: cancelling a task failed");
        RpcError::new(code::INTERNAL_ERROR, format!("Failed to cancel task: {e}"))
    };
    if task.state == "TASK_STATE_INPUT_REQUIRED" {
        end_interrupt(state, &task)
            .await
            .map_err(|e| failed(&e.detail))?;
    } else if task.run.in_flight() {
        let how = crate::run::Cancel {
            action: stategraph_runs::CancelAction::Interrupt,
            reason: "the A2A task was canceled".into(),
        };
        let run = std::slice::from_ref(&task.run.run_id);
        crate::run::cancel::cancel_and_settle(state, run, &how).await;
    } else {
        return Err(RpcError::new(
            code::TASK_NOT_CANCELABLE,
            "Task has no active run to cancel",
        ));
    }
    Ok(json!({
        "kind": "task",
        "id": id,
        "contextId": task.context_id,
        "status": {
            "state": "TASK_STATE_CANCELED",
            "timestamp": now_iso(),
            "message": {
                "kind": "message",
                "role": "ROLE_AGENT",
                "parts": [text_part("Task was canceled")],
                "messageId": uuid::Uuid::new_v4().to_string(),
                "taskId": id,
            },
        },
    }))
}

/// Cancels a task awaiting input: its interrupt ends (the thread's state moves on as if the
/// graph had finished, so the thread is idle) and a run recorded `interrupted` under the
/// task's id makes its state `canceled`.
async fn end_interrupt(state: &AppState, task: &Task) -> Result<(), crate::error::ApiError> {
    use stategraph_runs::{CancelAction, Multitask, NewRun, ThreadState};
    let thread = load(state, &task.context_id).await?;
    let graph = graph_of(state, &thread)?;
    let config = RunConfig::thread(&task.context_id);
    graph
        .update_state(&config, None, AsNode::from(stategraph_graph::END))
        .await?;
    let snapshot = graph.get_state(&config, false).await?;
    let interrupts = crate::wire::thread_interrupts(&snapshot);
    let status = if interrupts.as_object().is_some_and(|o| !o.is_empty()) {
        ThreadStatus::Interrupted
    } else {
        ThreadStatus::Idle
    };
    let settled = ThreadState::new(
        status,
        crate::wire::output_json(&snapshot.values, graph.output_channel()),
        interrupts,
    );
    let queue = &state.runs.queue;
    queue
        .set_thread(&task.context_id, &settled, false)
        .await
        .map_err(crate::run::api_error)?;
    // A run recorded `interrupted` under the task's id: enqueued never to start (a century
    // away), then ended as a pending run is by a cancel.
    let mut a2a = a2a_of(&task.run).cloned().unwrap_or_default();
    a2a.insert(
        "task_id".into(),
        json!(task_of(&task.context_id, &task.run)),
    );
    let marker_id = stategraph_checkpoint::uuid6(None);
    let marker = NewRun::new(&marker_id, &task.context_id)
        .assistant(&task.run.assistant_id)
        .metadata(Object::from_iter([("a2a".to_owned(), Json::Object(a2a))]))
        .multitask(Multitask::Enqueue)
        .delay(std::time::Duration::from_secs(100 * 365 * 24 * 3600));
    queue.enqueue(marker).await.map_err(crate::run::api_error)?;
    queue
        .request_cancel(&marker_id, CancelAction::Interrupt, "Task was canceled")
        .await
        .map_err(crate::run::api_error)?;
    Ok(())
}

#[cfg(test)]
mod tests;
