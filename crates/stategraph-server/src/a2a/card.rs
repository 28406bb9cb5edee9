//! Agent cards: what an A2A client reads first — the assistant's name, description, where
//! to send messages (`{base}/a2a/{assistant_id}`, JSON-RPC, A2A 1.0), and one skill.

use axum::http::{HeaderMap, StatusCode, header::HOST};
use axum::response::{IntoResponse, Response};
use serde_json::{Value as Json, json};

use super::parts::Object;
use super::{Call, RpcError, RpcResult, code};
use crate::app::AppState;
use crate::records::AssistantRecord;

/// The history-scope extension: a client picks whole-context or task-only history.
pub(super) const HISTORY_SCOPE_EXTENSION: &str =
    "https://langchain.com/a2a/extensions/history-scope/v1";

/// The header that picks the history scope when the params do not.
pub(super) const HISTORY_SCOPE_HEADER: &str = "LangGraph-A2A-History-Scope";

/// The media types an agent takes and gives unless its assistant's `metadata.a2a` says.
const DEFAULT_MODES: [&str; 2] = ["application/json", "text/plain"];

/// The assistant `id` names (its UUID, or a graph's name for its default assistant), or
/// `-32602` in LangGraph's words.
pub(super) async fn assistant(state: &AppState, id: &str) -> Result<AssistantRecord, RpcError> {
    crate::assistants::resolve(state, id).await.map_err(|e| {
        if e.status == StatusCode::NOT_FOUND {
            RpcError::params(format!("Assistant '{id}' not found"))
        } else {
            RpcError::params(format!("Failed to get assistant '{id}': {}", e.detail))
        }
    })
}

/// The input fields of `assistant`'s graph (its input schema's properties) and the
/// required ones.
pub(super) fn input_fields(state: &AppState, assistant: &AssistantRecord) -> (Vec<String>, Json) {
    let schema = state
        .graphs
        .get(&assistant.graph_id)
        .map(|g| crate::http::state_schema(g.as_ref()))
        .unwrap_or(Json::Null);
    let fields = schema
        .get("properties")
        .and_then(Json::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    let required = schema.get("required").cloned().unwrap_or_else(|| json!([]));
    (fields, required)
}

/// `metadata.a2a.{field}` of an assistant: its media modes, or the defaults.
fn modes(a2a: Option<&Object>, field: &str) -> Result<Vec<String>, RpcError> {
    let refused = || {
        RpcError::params(format!(
            "Assistant metadata.a2a.{field} must be a non-empty array of strings."
        ))
    };
    match a2a.and_then(|m| m.get(field)) {
        None | Some(Json::Null) => Ok(DEFAULT_MODES.map(str::to_owned).to_vec()),
        Some(Json::Array(items)) if !items.is_empty() => items
            .iter()
            .map(|m| {
                m.as_str()
                    .map(str::trim)
                    .filter(|m| !m.is_empty())
                    .map(str::to_owned)
                    .ok_or_else(refused)
            })
            .collect(),
        Some(_) => Err(refused()),
    }
}

/// The URL this server is reached at, as the request says (`X-Forwarded-Proto`, `Host`).
fn base_url(headers: &HeaderMap) -> String {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(',').next().unwrap_or_default().trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let scheme = header("x-forwarded-proto").unwrap_or_else(|| "http".into());
    let host = header(HOST.as_str()).unwrap_or_else(|| "localhost".into());
    format!("{scheme}://{host}")
}

/// The agent card of the assistant `id` names.
pub(super) async fn card(state: &AppState, headers: &HeaderMap, id: &str) -> RpcResult {
    let assistant = assistant(state, id).await?;
    let a2a = match assistant.metadata.get("a2a") {
        None | Some(Json::Null) => None,
        Some(Json::Object(m)) => Some(m),
        Some(_) => {
            return Err(RpcError::params(
                "Assistant metadata.a2a must be an object.",
            ));
        }
    };
    let input_modes = modes(a2a, "input_modes")?;
    let output_modes = modes(a2a, "output_modes")?;
    let (mut fields, required) = input_fields(state, &assistant);
    fields.sort();
    let supports_messages = fields.iter().any(|f| f == "messages");
    let name = &assistant.name;
    let description = assistant
        .description
        .clone()
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| format!("{name} assistant"));
    let assistant_id = &assistant.assistant_id;
    let url = format!("{}/a2a/{assistant_id}", base_url(headers));
    Ok(json!({
        "name": name,
        "description": description,
        "url": url,
        "supportedInterfaces": [
            { "url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0" }
        ],
        "capabilities": {
            "streaming": true,
            "pushNotifications": false,
            "stateTransitionHistory": false,
            "extensions": [{
                "uri": HISTORY_SCOPE_EXTENSION,
                "description": "Choose task-only or full-context response history",
                "required": false,
                "params": {
                    "header": HISTORY_SCOPE_HEADER,
                    "values": ["context", "task"],
                    "default": "context",
                    "methods": ["SendMessage", "GetTask", "ListTasks"],
                },
            }],
        },
        "defaultInputModes": input_modes,
        "defaultOutputModes": output_modes,
        "skills": [{
            "id": format!("{assistant_id}-main"),
            "name": format!("{name} Capabilities"),
            "description": description,
            "tags": ["assistant", "langgraph"],
            "examples": [],
            "inputModes": input_modes,
            "outputModes": output_modes,
            "metadata": {
                "inputSchema": {
                    "required": required,
                    "properties": fields,
                    "supportsA2A": supports_messages,
                },
            },
        }],
        "version": env!("CARGO_PKG_VERSION"),
    }))
}

/// A card request's answer: the card, or 400 with the JSON-RPC error.
pub(super) async fn answer(state: &AppState, headers: &HeaderMap, id: &str) -> Response {
    match card(state, headers, id).await {
        Ok(card) => axum::Json(card).into_response(),
        Err(e) => refused(&e),
    }
}

/// A refused card request: 400 (500 for a server failure) with `{"error": {code, message}}`.
pub(super) fn refused(e: &RpcError) -> Response {
    let status = if e.code == code::INTERNAL_ERROR {
        StatusCode::INTERNAL_SERVER_ERROR
    } else {
        StatusCode::BAD_REQUEST
    };
    (status, axum::Json(json!({ "error": e.to_json() }))).into_response()
}

/// `GetExtendedAgentCard`: the same card (no caller sees more than another).
pub(super) async fn extended(call: &Call) -> RpcResult {
    card(&call.state, &call.headers, &call.assistant_id).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_default_and_are_checked() {
        assert_eq!(modes(None, "input_modes").unwrap(), DEFAULT_MODES);
        let custom = json!({"input_modes": [" text/plain "]});
        assert_eq!(
            modes(custom.as_object(), "input_modes").unwrap(),
            ["text/plain"]
        );
        let bad = json!({"output_modes": []});
        let e = modes(bad.as_object(), "output_modes").unwrap_err();
        assert_eq!(
            e.message,
            "Assistant metadata.a2a.output_modes must be a non-empty array of strings."
        );
    }

    #[test]
    fn the_base_url_follows_the_request() {
        let mut h = HeaderMap::new();
        assert_eq!(base_url(&h), "http://localhost");
        h.insert(HOST, "agents.example.com:8443".parse().unwrap());
        h.insert("x-forwarded-proto", "https, http".parse().unwrap());
        assert_eq!(base_url(&h), "https://agents.example.com:8443");
    }
}
