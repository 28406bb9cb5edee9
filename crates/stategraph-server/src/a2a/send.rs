//! `SendMessage` and `SendStreamingMessage`: a message becomes a run of the assistant on the
//! message's context (a thread, created when new), and the run's end the task's answer.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use serde_json::{Value as Json, json};
use stategraph_checkpoint::now_iso;
use stategraph_runs::ThreadStatus;
use tokio::sync::mpsc;

use super::parts::{self, HistoryOptions, Object, Role, Scope, set};
use super::tasks::{self, history_length, history_scope, is_terminal, resolve, run_messages};
use super::{Call, RpcError, RpcResult, code};
use crate::app::AppState;
use crate::error::ApiError;
use crate::request::RunBody;
use crate::run::Outcome;
use crate::run::start::{Follow, Started};
use crate::run_options::IfNotExists;

mod streaming;
pub(crate) use streaming::*;

/// Headers that name the A2A extensions a client activates.
const EXTENSION_HEADERS: [&str; 2] = ["A2A-Extensions", "X-A2A-Extensions"];

/// A message, checked and turned into a run request.
struct Prepared {
    /// The client's message.
    message: Object,
    /// The context (thread) the run goes on.
    context_id: String,
    /// The task it continues, if it continues one.
    task_id: Option<String>,
    /// The id the message was stamped with when it starts a task.
    task_start_id: Option<String>,
    /// The task ids of the context, by start id (for history).
    ids_by_start: HashMap<String, String>,
    /// Whether the input is data only (no messages, no command): the answer is read from
    /// the messages the run added.
    data_only: bool,
    /// The run's request.
    body: RunBody,
    history: HistoryOptions,
    /// Whether to answer as soon as the run is started (A2A 1.0's `returnImmediately`).
    return_immediately: bool,
}

/// The client's message checked, its task found (when it continues one), its parts turned
/// into the run's input or a resume command.
async fn prepare(call: &Call) -> Result<Prepared, RpcError> {
    let state = &call.state;
    let params = &call.params;
    let configuration = match params.get("configuration") {
        None | Some(Json::Null) => Object::new(),
        Some(Json::Object(c)) => c.clone(),
        Some(_) => {
            return Err(RpcError::params(
                "Invalid params: 'configuration' must be an object",
            ));
        }
    };
    let length = history_length(configuration.get("historyLength"))?;
    let scope = history_scope(&configuration, call)?;
    let Some(Json::Object(message)) = params.get("message") else {
        return Err(RpcError::params("Missing 'message' in params"));
    };
    let non_empty = |key: &str| {
        message
            .get(key)
            .filter(|v| !v.is_null() && v.as_str() != Some(""))
    };
    let message_id = match non_empty("messageId") {
        Some(Json::String(id)) => id.clone(),
        Some(other) => other.to_string(),
        None => return Err(RpcError::params("Missing required 'messageId' in message")),
    };
    let Some(role) = non_empty("role") else {
        return Err(RpcError::params("Missing required 'role' in message"));
    };
    let role = match role.as_str() {
        Some("ROLE_AGENT" | "agent") => Role::Agent,
        _ => Role::User,
    };
    let parts = match message.get("parts") {
        None | Some(Json::Null) => Vec::new(),
        Some(Json::Array(p)) => p.clone(),
        Some(_) => return Err(RpcError::params("Invalid params: 'parts' must be an array")),
    };
    if parts.is_empty() {
        return Err(RpcError::params("Message must contain at least one part"));
    }
    let assistant = super::card::assistant(state, &call.assistant_id).await?;
    let wants_messages = parts.iter().any(|p| {
        ["text", "file", "raw", "url"]
            .iter()
            .any(|k| p.get(*k).is_some())
    });
    if wants_messages {
        let (fields, _) = super::card::input_fields(state, &assistant);
        if !fields.iter().any(|f| f == "messages") {
            return Err(RpcError::params(format!(
                "Assistant '{}' (graph '{}') does not support A2A conversational messages. \
                 Graph input schema must include a 'messages' field to accept text or file \
                 parts. Available input fields: {}",
                assistant.assistant_id,
                assistant.graph_id,
                parts::py_list(&fields)
            )));
        }
    }
    let string_or_none = |key: &str, what: &str| match message.get(key) {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(RpcError::params(format!("{what} must be a string"))),
    };
    let requested_context = string_or_none("contextId", "contextId")?;
    let existing_task = string_or_none("taskId", "taskId")?;
    // A context is a thread: its id is a canonical UUID.
    let requested_context =
        match requested_context {
            None => None,
            Some(ctx) => Some(uuid::Uuid::parse_str(&ctx).map(|u| u.to_string()).map_err(
                |_| {
                    RpcError::params(format!(
                        "Invalid request: contextId '{ctx}' is not a UUID (a context is a thread)"
                    ))
                },
            )?),
        };

    let (context_id, task_id, task_start_id, ids_by_start) = match &existing_task {
        None => {
            let context = requested_context
                .clone()
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
            (
                context,
                None,
                Some(stategraph_checkpoint::uuid6(None)),
                HashMap::new(),
            )
        }
        Some(id) => {
            let task = resolve(state, id, requested_context.as_deref(), &call.assistant_id)
                .await?
                .ok_or_else(|| {
                    RpcError::new(code::TASK_NOT_FOUND, format!("Task not found: {id}"))
                })?;
            if is_terminal(task.state) {
                return Err(RpcError::new(
                    code::UNSUPPORTED_OPERATION,
                    "A terminal task cannot accept another message",
                ));
            }
            (task.context_id, Some(task.task_id), None, task.ids_by_start)
        }
    };

    // The message's stamp: which task it belongs to, what the client attached.
    let mut stamp = Object::new();
    if let Some(t) = &task_id {
        stamp.insert("task_id".into(), json!(t));
    }
    if let Some(s) = &task_start_id {
        stamp.insert("task_start_id".into(), json!(s));
    }
    match message.get("metadata") {
        None | Some(Json::Null) => {}
        Some(Json::Object(m)) if m.is_empty() => {}
        Some(Json::Object(m)) => {
            stamp.insert("metadata".into(), Json::Object(m.clone()));
        }
        Some(_) => return Err(RpcError::params("Invalid A2A message metadata")),
    }
    let extensions = extensions(call);
    if !extensions.is_empty() {
        stamp.insert("extensions".into(), json!(extensions));
    }
    let mut input = parts::input_of(&parts, role, &message_id, &stamp)
        .map_err(|e| RpcError::new(code::CONTENT_TYPE_NOT_SUPPORTED, e))?;

    // A LangGraph command the message carries, or the answer to an interrupt.
    let mut command = message.get("command").filter(|c| !c.is_null()).cloned();
    let resumes = command
        .as_ref()
        .and_then(|c| c.get("resume"))
        .is_some_and(truthy);
    if resumes && requested_context.is_none() {
        return Err(RpcError::params(
            "contextId is required when resuming a task with command.resume",
        ));
    }
    if resumes && existing_task.is_none() {
        return Err(RpcError::params("taskId is required when resuming a task"));
    }
    if command.is_none() {
        let resume_context = if existing_task.is_some() {
            Some(context_id.as_str())
        } else {
            requested_context.as_deref()
        };
        let from_data = parts::parts_resume(&parts).map_err(RpcError::params)?;
        if let Some(value) = from_data {
            if resume_context.is_none() || existing_task.is_none() {
                return Err(RpcError::params(
                    "contextId and taskId are required when resuming a task",
                ));
            }
            if !awaits_input(state, &context_id).await {
                return Err(RpcError::params("Task is not awaiting input"));
            }
            input.remove("resume");
            command = Some(json!({ "resume": value }));
        } else if let Some(text) = parts::parts_text(&parts)
            && resume_context.is_some()
            && existing_task.is_some()
            && awaits_input(state, &context_id).await
        {
            input.remove("messages");
            command = Some(json!({ "resume": text }));
        }
    }
    if existing_task.is_some() && command.is_none() {
        tracing::warn!(task_id = ?existing_task, "a2a: a message to a task that is not awaiting input starts a new run of it");
    }
    let data_only = command.is_none() && !input.contains_key("messages");

    let mut a2a = Object::new();
    if let Some(t) = &task_id {
        a2a.insert("task_id".into(), json!(t));
    }
    if let Some(s) = &task_start_id {
        a2a.insert("task_start_id".into(), json!(s));
    }
    let body = RunBody {
        assistant_id: Some(call.assistant_id.clone()),
        input: (!input.is_empty() || command.is_none()).then_some(Json::Object(input)),
        command,
        context: params.get("context").filter(|c| !c.is_null()).cloned(),
        metadata: Some(Object::from_iter([("a2a".to_owned(), Json::Object(a2a))])),
        if_not_exists: Some(IfNotExists::Create),
        ..RunBody::default()
    };
    Ok(Prepared {
        message: message.clone(),
        context_id,
        task_id,
        task_start_id,
        ids_by_start,
        data_only,
        body,
        history: HistoryOptions { length, scope },
        return_immediately: configuration
            .get("returnImmediately")
            .and_then(Json::as_bool)
            .unwrap_or(false),
    })
}

/// Whether a JSON value counts as given (Python's truthiness).
fn truthy(v: &Json) -> bool {
    match v {
        Json::Null => false,
        Json::Bool(b) => *b,
        Json::Number(n) => n.as_f64() != Some(0.0),
        Json::String(s) => !s.is_empty(),
        Json::Array(a) => !a.is_empty(),
        Json::Object(o) => !o.is_empty(),
    }
}

/// The extensions the request's headers activate, each once.
fn extensions(call: &Call) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in EXTENSION_HEADERS {
        for value in call.headers.get_all(name) {
            for ext in value.to_str().unwrap_or_default().split(',') {
                let ext = ext.trim();
                if !ext.is_empty() && !out.iter().any(|e| e == ext) {
                    out.push(ext.to_owned());
                }
            }
        }
    }
    out
}

/// Whether the context's thread is interrupted (read a few times: the run that stopped on
/// the interrupt may be settling its thread).
async fn awaits_input(state: &AppState, context_id: &str) -> bool {
    for attempt in 0..3 {
        match crate::threads::load(state, context_id).await {
            Ok(t) if t.status == ThreadStatus::Interrupted => return true,
            Ok(_) if attempt < 2 => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            _ => return false,
        }
    }
    false
}

/// A run that could not start, as LangGraph's server words it.
fn start_error(e: &ApiError, assistant_id: &str, context_id: &str) -> RpcError {
    let detail = &e.detail;
    match e.status {
        StatusCode::NOT_FOUND if detail.to_lowercase().contains("thread") => {
            RpcError::params(format!(
                "Thread '{context_id}' not found. Please create the thread first before \
                 sending messages to it."
            ))
        }
        StatusCode::NOT_FOUND => RpcError::params(format!("Assistant '{assistant_id}' not found")),
        StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY => {
            RpcError::params(format!("Invalid request: {detail}"))
        }
        StatusCode::FORBIDDEN => RpcError::params("Access denied to assistant or thread"),
        s if s.is_server_error() => RpcError::internal("starting a run", detail),
        _ => RpcError::params(format!("Failed to create run: {detail}")),
    }
}

/// Starts the prepared run; its task's id.
async fn start(
    call: &Call,
    p: &mut Prepared,
    follow: Follow,
) -> Result<(Started, String), RpcError> {
    let started = crate::run::start::start(
        Arc::clone(&call.state),
        crate::run::plan::Target::Thread(p.context_id.clone()),
        p.body.clone(),
        follow,
    )
    .await
    .map_err(|e| start_error(&e, &call.assistant_id, &p.context_id))?;
    p.context_id.clone_from(&started.thread_id);
    let task_id = match &p.task_id {
        Some(t) => t.clone(),
        None => {
            let id = tasks::task_id(&p.context_id, started.run_id());
            p.ids_by_start =
                tasks::context_task_ids(&call.state, &p.context_id, &call.assistant_id).await;
            if let Some(start) = &p.task_start_id {
                p.ids_by_start.insert(start.clone(), id.clone());
            }
            id
        }
    };
    Ok((started, task_id))
}

/// The messages a data-only run added (`None`: the run's answer is the current turn's).
async fn added_turn(
    state: &AppState,
    p: &Prepared,
    run_id: &str,
    task_id: &str,
) -> Result<Option<Vec<Json>>, RpcError> {
    if !p.data_only {
        return Ok(None);
    }
    let (_, added) = run_messages(state, &p.context_id, run_id, task_id).await?;
    Ok(added)
}

/// The task's first shape: submitted, its history the client's message.
fn submitted(p: &Prepared, task_id: &str) -> Json {
    let mut message = Object::from_iter([("kind".to_owned(), json!("message"))]);
    message.extend(p.message.clone());
    message.insert("taskId".into(), json!(task_id));
    message.insert("contextId".into(), json!(p.context_id));
    json!({
        "kind": "task",
        "id": task_id,
        "contextId": p.context_id,
        "history": [message],
        "status": { "state": "TASK_STATE_SUBMITTED", "timestamp": now_iso() },
    })
}

/// `SendMessage`: runs the assistant and answers the task when the run ends (or at once,
/// submitted, with `returnImmediately`).
pub(super) async fn send(call: &Call) -> RpcResult {
    let mut p = prepare(call).await?;
    let follow = if p.return_immediately {
        Follow::Background
    } else {
        Follow::Wait
    };
    let (started, task_id) = start(call, &mut p, follow).await?;
    let run_id = started.run_id().to_owned();
    if p.return_immediately {
        return Ok(submitted(&p, &task_id));
    }
    let Started { events, done, .. } = started;
    drop(events);
    let outcome = done
        .await
        .map_err(|_| RpcError::internal("waiting for a run", &"the run stopped before it ended"))?;
    let state = &call.state;
    let mut result = outcome.to_wait_json();
    let mut turn = None;
    let task_scoped = p.history.scope == Scope::Task && p.history.length != Some(0);
    if p.data_only || task_scoped {
        let (messages, added) = run_messages(state, &p.context_id, &run_id, &task_id).await?;
        if let Some(o) = result.as_object_mut() {
            o.insert("messages".into(), Json::Array(messages));
        }
        if p.data_only {
            turn = added;
        }
    }
    task_answer(
        &p,
        &task_id,
        &result,
        &outcome,
        turn.as_deref(),
        &call.assistant_id,
    )
}

/// The task a run's end makes: failed, awaiting input (the interrupts as an artifact), or
/// completed (the answer as an artifact); its history the conversation.
fn task_answer(
    p: &Prepared,
    task_id: &str,
    result: &Json,
    outcome: &Outcome,
    turn: Option<&[Json]>,
    assistant_id: &str,
) -> RpcResult {
    let invalid = |e: String| RpcError::new(code::INVALID_AGENT_RESPONSE, e);
    let messages = result
        .get("messages")
        .and_then(Json::as_array)
        .cloned()
        .unwrap_or_default();
    let mut task = json!({ "kind": "task", "id": task_id, "contextId": p.context_id });
    if p.history.length != Some(0) {
        let history = parts::history(
            &messages,
            task_id,
            &p.context_id,
            p.history,
            Some(&p.ids_by_start),
        )
        .map_err(invalid)?;
        set(&mut task, "history", Json::Array(history));
    }
    if let Some(e) = &outcome.error {
        let name = e.get("error").and_then(Json::as_str).unwrap_or("Error");
        let text = format!("Error executing assistant: {name}");
        set(
            &mut task,
            "status",
            json!({
                "state": "TASK_STATE_FAILED",
                "message": parts::agent_message(vec![parts::text_part(text)], task_id, &p.context_id),
            }),
        );
    } else if !outcome.interrupts.is_empty() {
        set(
            &mut task,
            "status",
            json!({ "state": "TASK_STATE_INPUT_REQUIRED", "timestamp": now_iso() }),
        );
        set(
            &mut task,
            "artifacts",
            json!([parts::interrupt_artifact(&outcome.interrupts)]),
        );
    } else {
        let answer = parts::answer(result, turn).map_err(invalid)?;
        set(
            &mut task,
            "status",
            json!({ "state": "TASK_STATE_COMPLETED", "timestamp": now_iso() }),
        );
        set(
            &mut task,
            "artifacts",
            json!([parts::answer_artifact(answer, assistant_id)]),
        );
    }
    Ok(task)
}
