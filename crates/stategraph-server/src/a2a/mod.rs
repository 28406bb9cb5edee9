//! `/a2a/{assistant_id}`: every assistant as an agent of the Agent2Agent protocol (A2A,
//! JSON-RPC 2.0 over HTTP), as LangGraph's server serves it.
//!
//! - **Agent card**: `GET /a2a/{assistant_id}` (and its `/.well-known/agent-card.json`),
//!   or `GET /.well-known/agent-card.json?assistant_id=…`: the assistant's name,
//!   description and one skill, streaming supported.
//! - **Messages**: `SendMessage` (`message/send`) runs the assistant on the message's
//!   context — a thread, created if new — and answers the task when the run ends: the
//!   run's answer (the last AI message of the turn) as an artifact, the conversation as
//!   history. `SendStreamingMessage` (`message/stream`) answers the same as server-sent
//!   events: the task, `working` updates as the run streams messages, the answer, the end.
//! - **Tasks**: a task is a run (its id `"{context_id}:{run_id}"`); a message with the
//!   task's id continues it — the answer to an interrupt resumes the thread (the text, or
//!   a data part's `resume`). `GetTask`, `CancelTask` and `ListTasks` read and stop them.
//! - **Dialects**: A2A 1.0's method names (`SendMessage`, what `a2a-sdk` 1.x sends) get 1.0
//!   answers (`ROLE_AGENT`, `TASK_STATE_COMPLETED`, stream results wrapped by kind); the
//!   0.3 names (`message/send`) get 0.3's (`agent`, `completed`, unwrapped tasks).
//!
//! Errors are JSON-RPC errors (HTTP 200) with A2A's codes; a request whose `Accept` does
//! not allow the answer's media type is HTTP 400. The routes sit behind the API key.

mod card;
mod parts;
mod send;
mod tasks;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query};
use axum::http::{HeaderMap, StatusCode, header::ACCEPT};
use axum::response::{IntoResponse, Response};
use serde_json::{Value as Json, json};

use crate::app::{AppState, Shared};

/// JSON-RPC and A2A error codes.
pub(super) mod code {
    /// The body is not JSON.
    pub(crate) const PARSE_ERROR: i64 = -32700;
    /// Not a JSON-RPC request.
    pub(crate) const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
    /// The params do not fit the method.
    pub(crate) const INVALID_PARAMS: i64 = -32602;
    /// The server failed.
    pub(crate) const INTERNAL_ERROR: i64 = -32603;
    /// No such task.
    pub(crate) const TASK_NOT_FOUND: i64 = -32001;
    /// The task cannot be cancelled now.
    pub(crate) const TASK_NOT_CANCELABLE: i64 = -32002;
    /// Not possible on this task.
    pub(crate) const UNSUPPORTED_OPERATION: i64 = -32004;
    /// A part this agent does not take.
    pub(crate) const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;
    /// The agent's answer cannot be A2A parts.
    pub(crate) const INVALID_AGENT_RESPONSE: i64 = -32006;
}

/// A JSON-RPC error.
#[derive(Debug, Clone)]
pub(crate) struct RpcError {
    pub(crate) code: i64,
    pub(crate) message: String,
}

impl RpcError {
    pub(crate) fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// `-32602`: the params do not fit.
    pub(crate) fn params(message: impl Into<String>) -> Self {
        Self::new(code::INVALID_PARAMS, message)
    }

    /// `-32603`, logged with what failed.
    pub(crate) fn internal(what: &str, cause: &dyn std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "a2a: {what}");
        Self::new(code::INTERNAL_ERROR, "Internal server error")
    }

    fn to_json(&self) -> Json {
        json!({ "code": self.code, "message": self.message })
    }
}

/// A method's answer.
pub(crate) type RpcResult = Result<Json, RpcError>;

/// Which version of A2A a request speaks, by its method's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// A2A 1.0: `SendMessage`, `ROLE_USER`, `TASK_STATE_WORKING`.
    V1,
    /// A2A 0.3: `message/send`, `user`, `working`.
    Legacy,
}

impl Dialect {
    /// A method's name as 1.0 has it, and the dialect its name is of.
    fn of(method: &str) -> (&str, Dialect) {
        match method {
            "message/send" => ("SendMessage", Dialect::Legacy),
            "message/stream" => ("SendStreamingMessage", Dialect::Legacy),
            "tasks/get" => ("GetTask", Dialect::Legacy),
            "tasks/cancel" => ("CancelTask", Dialect::Legacy),
            other => (other, Dialect::V1),
        }
    }

    /// `value` (tasks, messages, events as they are built here) in this dialect.
    pub(crate) fn render(self, value: Json) -> Json {
        match self {
            Dialect::V1 => v1(value),
            Dialect::Legacy => legacy(value),
        }
    }

    /// A streamed event (a task, message, status or artifact update) in this dialect: 1.0
    /// wraps it in an object naming its kind.
    pub(crate) fn streamed(self, event: Json) -> Json {
        match self {
            Dialect::Legacy => legacy(event),
            Dialect::V1 => {
                let key = match event.get("kind").and_then(Json::as_str) {
                    Some("task") => "task",
                    Some("status-update") => "statusUpdate",
                    Some("artifact-update") => "artifactUpdate",
                    _ => "message",
                };
                json!({ key: v1(event) })
            }
        }
    }
}

/// 0.3's names of roles and task states.
fn legacy_name(v: &str) -> Option<&'static str> {
    Some(match v {
        "ROLE_USER" => "user",
        "ROLE_AGENT" => "agent",
        "TASK_STATE_SUBMITTED" => "submitted",
        "TASK_STATE_WORKING" => "working",
        "TASK_STATE_COMPLETED" => "completed",
        "TASK_STATE_FAILED" => "failed",
        "TASK_STATE_CANCELED" => "canceled",
        "TASK_STATE_INPUT_REQUIRED" => "input-required",
        "TASK_STATE_REJECTED" => "rejected",
        "TASK_STATE_AUTH_REQUIRED" => "auth-required",
        _ => return None,
    })
}

/// 1.0's name of a task state given in either dialect.
pub(crate) fn v1_state(v: &str) -> Option<&'static str> {
    const STATES: [&str; 8] = [
        "TASK_STATE_SUBMITTED",
        "TASK_STATE_WORKING",
        "TASK_STATE_COMPLETED",
        "TASK_STATE_FAILED",
        "TASK_STATE_CANCELED",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_REJECTED",
        "TASK_STATE_AUTH_REQUIRED",
    ];
    STATES
        .into_iter()
        .find(|s| *s == v || legacy_name(s) == Some(v))
}

/// `value` with 0.3's role and state names.
fn legacy(value: Json) -> Json {
    match value {
        Json::Object(o) => Json::Object(
            o.into_iter()
                .map(|(k, v)| {
                    let v = match (&*k, v) {
                        ("role" | "state", Json::String(s)) => {
                            Json::String(legacy_name(&s).map_or(s, str::to_owned))
                        }
                        (_, v) => legacy(v),
                    };
                    (k, v)
                })
                .collect(),
        ),
        Json::Array(a) => Json::Array(a.into_iter().map(legacy).collect()),
        other => other,
    }
}

/// `value` with file parts in 1.0's form (`raw` or `url`, `mediaType`, `filename`).
fn v1(value: Json) -> Json {
    match value {
        Json::Object(mut o) => {
            if o.get("kind").and_then(Json::as_str) == Some("file")
                && let Some(Json::Object(file)) = o.remove("file")
            {
                for (from, to) in [
                    ("bytes", "raw"),
                    ("uri", "url"),
                    ("mimeType", "mediaType"),
                    ("name", "filename"),
                ] {
                    if let Some(v) = file.get(from) {
                        o.insert(to.into(), v.clone());
                    }
                }
                return Json::Object(o);
            }
            Json::Object(o.into_iter().map(|(k, v)| (k, v1(v))).collect())
        }
        Json::Array(a) => Json::Array(a.into_iter().map(v1).collect()),
        other => other,
    }
}

/// A JSON-RPC answer (HTTP 200, as JSON-RPC errors are too).
fn rpc_answer(id: &Json, outcome: Result<Json, RpcError>) -> Response {
    let body = match outcome {
        Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
        Err(e) => json!({ "jsonrpc": "2.0", "id": id, "error": e.to_json() }),
    };
    axum::Json(body).into_response()
}

/// A plain HTTP error `{"error": message}`.
fn http_error(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(json!({ "error": message }))).into_response()
}

/// Whether an `Accept` header allows `media` (`*/*` and `type/*` do).
fn accepts(headers: &HeaderMap, media: &str) -> bool {
    let (kind, _) = media.split_once('/').unwrap_or((media, ""));
    headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|range| {
            range
                .split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
        .any(|range| {
            range == "*/*"
                || range == media
                || range
                    .strip_suffix("/*")
                    .is_some_and(|prefix| prefix == kind)
        })
}

/// The methods this endpoint answers (1.0 names).
const METHODS: [&str; 6] = [
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "CancelTask",
    "ListTasks",
    "GetExtendedAgentCard",
];

/// `POST /a2a/{assistant_id}`: a JSON-RPC request to the assistant's agent.
#[utoipa::path(
    post,
    path = "/a2a/{assistant_id}",
    operation_id = "post_a2a",
    tag = "A2A",
    params(
        ("assistant_id" = String, Path, format = Uuid, description = "The assistant to talk to."),
        ("Accept" = String, Header, description = "`text/event-stream` for `SendStreamingMessage` (`message/stream`), `application/json` for the other methods."),
    ),
    request_body(content = serde_json::Value, description = "A JSON-RPC 2.0 request: `method` one of `SendMessage`, `SendStreamingMessage`, `GetTask`, `CancelTask`, `ListTasks`, `GetExtendedAgentCard` (A2A 1.0) or `message/send`, `message/stream`, `tasks/get`, `tasks/cancel` (A2A 0.3), with its `params`."),
    responses(
        (status = 200, description = "The JSON-RPC answer (errors too), or for a streaming message its events (server-sent events, each a JSON-RPC answer).", body = serde_json::Value),
        (status = 202, description = "A JSON-RPC response sent to the server: accepted, not answered."),
        (status = 400, description = "The `Accept` header does not allow the answer's media type.", body = serde_json::Value),
    )
)]
pub(crate) async fn post(
    axum::extract::State(state): Shared,
    Path(assistant_id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let null = Json::Null;
    let Ok(message) = serde_json::from_slice::<Json>(&body) else {
        let e = RpcError::new(code::PARSE_ERROR, "Invalid JSON payload");
        return rpc_answer(&null, Err(e));
    };
    let Json::Object(message) = message else {
        let e = RpcError::new(
            code::INVALID_REQUEST,
            "Invalid message format: expected object",
        );
        return rpc_answer(&null, Err(e));
    };
    let id = message.get("id").cloned().unwrap_or(Json::Null);
    let valid_id = matches!(id, Json::String(_) | Json::Number(_) | Json::Null);
    if message.get("jsonrpc").and_then(Json::as_str) != Some("2.0") {
        let e = RpcError::new(
            code::INVALID_REQUEST,
            "Invalid JSON-RPC message: missing or invalid jsonrpc version",
        );
        return rpc_answer(if valid_id { &id } else { &null }, Err(e));
    }
    if !valid_id {
        let e = RpcError::new(
            code::INVALID_REQUEST,
            "Invalid JSON-RPC request: 'id' must be a string, number, or null",
        );
        return rpc_answer(&null, Err(e));
    }
    let (method, dialect) = match message.get("method") {
        None | Some(Json::Null) => (None, Dialect::V1),
        Some(Json::String(m)) => {
            let (m, d) = Dialect::of(m);
            (Some(m.to_owned()), d)
        }
        Some(_) => {
            let e = RpcError::new(
                code::METHOD_NOT_FOUND,
                "Method not found: method must be a string",
            );
            return rpc_answer(&id, Err(e));
        }
    };
    if let Some(m) = &method
        && !METHODS.contains(&m.as_str())
    {
        let e = RpcError::new(code::METHOD_NOT_FOUND, format!("Method not found: {m}"));
        return rpc_answer(&id, Err(e));
    }
    let params = message.get("params").cloned().unwrap_or_else(|| json!({}));
    let sends = matches!(
        method.as_deref(),
        Some("SendMessage" | "SendStreamingMessage")
    );
    if sends {
        if !params.is_object() {
            let e = RpcError::params("Invalid params: must be an object");
            return rpc_answer(&id, Err(e));
        }
        if !params.get("message").is_some_and(Json::is_object) {
            let e = RpcError::params("Missing or invalid 'message' in params");
            return rpc_answer(&id, Err(e));
        }
    }
    let streaming = method.as_deref() == Some("SendStreamingMessage");
    if streaming && !accepts(&headers, "text/event-stream") {
        return http_error(
            StatusCode::BAD_REQUEST,
            "Accept header must include text/event-stream for streaming",
        );
    }
    if !streaming && !accepts(&headers, "application/json") {
        return http_error(
            StatusCode::BAD_REQUEST,
            "Accept header must include application/json",
        );
    }
    let Some(method) = method else {
        if !id.is_null() && (message.contains_key("result") || message.contains_key("error")) {
            // A JSON-RPC response: nothing to answer.
            return StatusCode::ACCEPTED.into_response();
        }
        let e = if id.is_null() {
            RpcError::new(
                code::INVALID_REQUEST,
                "Invalid message format: must be a JSON-RPC request or notification",
            )
        } else {
            RpcError::new(
                code::INVALID_REQUEST,
                "Invalid JSON-RPC request: missing 'method' field",
            )
        };
        return rpc_answer(&id, Err(e));
    };
    if id.is_null() {
        let e = RpcError::new(
            code::INVALID_REQUEST,
            "Invalid message format: must be a JSON-RPC request or notification",
        );
        return rpc_answer(&null, Err(e));
    }
    let Ok(assistant_id) = uuid::Uuid::parse_str(&assistant_id).map(|u| u.to_string()) else {
        let e = RpcError::params("Invalid assistant ID: must be a UUID");
        return rpc_answer(&id, Err(e));
    };
    let Json::Object(params) = params else {
        let e = RpcError::params("Invalid params: must be an object");
        return rpc_answer(&id, Err(e));
    };
    let call = Call {
        state,
        headers,
        assistant_id,
        params,
        dialect,
    };
    let outcome = match method.as_str() {
        "SendStreamingMessage" => return send::stream(call, id).await,
        "SendMessage" => send::send(&call).await.map(|task| match dialect {
            // 1.0's answer names what it is (a task; a message otherwise).
            Dialect::V1 => json!({ "task": task }),
            Dialect::Legacy => task,
        }),
        "GetTask" => tasks::get(&call).await,
        "CancelTask" => tasks::cancel(&call).await,
        "ListTasks" => tasks::list(&call).await,
        _ => card::extended(&call).await,
    };
    rpc_answer(&id, outcome.map(|r| dialect.render(r)))
}

/// A method call: the request and its params.
pub(crate) struct Call {
    pub(crate) state: Arc<AppState>,
    pub(crate) headers: HeaderMap,
    /// The assistant, a canonical UUID.
    pub(crate) assistant_id: String,
    pub(crate) params: parts::Object,
    pub(crate) dialect: Dialect,
}

/// `GET /a2a/{assistant_id}`: the assistant's agent card.
#[utoipa::path(
    get,
    path = "/a2a/{assistant_id}",
    operation_id = "get_a2a",
    tag = "A2A",
    params(("assistant_id" = String, Path, description = "The assistant's id (or a graph's name: its default assistant).")),
    responses(
        (status = 200, description = "The assistant's A2A agent card.", body = serde_json::Value),
        (status = 400, description = "No such assistant, or its `metadata.a2a` modes are not arrays of strings.", body = serde_json::Value),
    )
)]
pub(crate) async fn agent_card(
    axum::extract::State(state): Shared,
    Path(assistant_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    card::answer(&state, &headers, &assistant_id).await
}

/// The query of `GET /.well-known/agent-card.json`.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct CardQuery {
    /// The assistant whose card to answer.
    assistant_id: Option<String>,
}

/// `GET /.well-known/agent-card.json?assistant_id=…`: an assistant's agent card at the
/// domain's well-known place.
#[utoipa::path(
    get,
    path = "/.well-known/agent-card.json",
    operation_id = "get_well_known_agent_card",
    tag = "A2A",
    params(CardQuery),
    responses(
        (status = 200, description = "The assistant's A2A agent card.", body = serde_json::Value),
        (status = 400, description = "No `assistant_id`, or no such assistant.", body = serde_json::Value),
    )
)]
pub(crate) async fn domain_card(
    axum::extract::State(state): Shared,
    query: Result<Query<CardQuery>, axum::extract::rejection::QueryRejection>,
    headers: HeaderMap,
) -> Response {
    let assistant_id = query.ok().and_then(|Query(q)| q.assistant_id);
    match assistant_id.filter(|a| !a.is_empty()) {
        Some(id) => card::answer(&state, &headers, &id).await,
        None => card::refused(&RpcError::params(
            "Missing required query parameter: assistant_id",
        )),
    }
}

/// Where A2A clients also look for what the documented routes answer: the agent's URL with a
/// trailing slash, and its card at the agent's well-known path (and that path's older name).
pub(crate) fn aliases() -> axum::Router<Arc<AppState>> {
    use axum::routing::get;
    axum::Router::new()
        .route("/a2a/{assistant_id}/", get(agent_card).post(post))
        .route(
            "/a2a/{assistant_id}/.well-known/agent-card.json",
            get(agent_card),
        )
        .route(
            "/a2a/{assistant_id}/.well-known/agent.json",
            get(agent_card),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_ranges_are_read_as_http_reads_them() {
        let mut h = HeaderMap::new();
        assert!(!accepts(&h, "application/json"));
        h.insert(ACCEPT, "text/*;q=0.5, application/xml".parse().unwrap());
        assert!(accepts(&h, "text/event-stream"));
        assert!(!accepts(&h, "application/json"));
        h.insert(ACCEPT, "*/*".parse().unwrap());
        assert!(accepts(&h, "application/json"));
    }

    #[test]
    fn dialects_render_roles_states_and_files() {
        let task = json!({
            "kind": "task",
            "status": {"state": "TASK_STATE_INPUT_REQUIRED"},
            "history": [{"role": "ROLE_USER", "parts": [
                {"kind": "file", "file": {"bytes": "aGk=", "mimeType": "image/png", "name": "a.png"}}
            ]}],
        });
        let old = Dialect::Legacy.render(task.clone());
        assert_eq!(old["status"]["state"], "input-required");
        assert_eq!(old["history"][0]["role"], "user");
        assert_eq!(old["history"][0]["parts"][0]["file"]["bytes"], "aGk=");
        let new = Dialect::V1.streamed(task);
        assert_eq!(new["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
        assert_eq!(
            new["task"]["history"][0]["parts"][0],
            json!({"kind": "file", "raw": "aGk=", "mediaType": "image/png", "filename": "a.png"})
        );
        let update = json!({"kind": "status-update", "status": {"state": "TASK_STATE_WORKING"}});
        assert!(Dialect::V1.streamed(update.clone())["statusUpdate"].is_object());
        assert_eq!(
            Dialect::Legacy.streamed(update)["status"]["state"],
            "working"
        );
        assert_eq!(
            v1_state("input-required"),
            Some("TASK_STATE_INPUT_REQUIRED")
        );
        assert_eq!(v1_state("TASK_STATE_FAILED"), Some("TASK_STATE_FAILED"));
        assert_eq!(v1_state("done"), None);
    }
}
