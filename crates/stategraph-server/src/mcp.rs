//! `/mcp`: every assistant as a tool of an MCP server over streamable HTTP (the official Rust
//! SDK, `rmcp`), as LangGraph's server exposes them.
//!
//! - `tools/list`: one tool per assistant, named after the assistant (whitespace runs become
//!   `_`, characters other than letters, digits, `_`, `-` and `.` are dropped, 128 at most;
//!   a name taken by an earlier assistant is left out), its input schema the assistant's
//!   graph's (a `messages` channel is offered as a string: the user's message).
//! - `tools/call`: a stateless run of that assistant with the arguments as its input (a
//!   `messages` string becomes one human message); the answer is the run's output values as
//!   JSON text, or — when the run failed — an error result naming the error.
//! - Sessions (`Mcp-Session-Id`) are kept by the SDK's in-memory session manager; the route
//!   sits behind the server's API key like the rest of the API.

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value as Json, json};

use crate::app::AppState;
use crate::records::AssistantRecord;
use crate::request::RunBody;

/// The longest tool name.
const MAX_NAME: usize = 128;

/// The MCP endpoint's service over `state`: a session per client, answers as JSON when the
/// call needs no stream, any `Host` accepted (the server's own listener decides who reaches
/// it).
pub(crate) fn service(state: &Arc<AppState>) -> StreamableHttpService<Tools, LocalSessionManager> {
    let state = Arc::clone(state);
    StreamableHttpService::new(
        move || {
            Ok(Tools {
                state: Arc::clone(&state),
            })
        },
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default()
            .disable_allowed_hosts()
            .with_json_response(true),
    )
}

/// The MCP server: the assistants as tools.
#[derive(Clone)]
pub(crate) struct Tools {
    state: Arc<AppState>,
}

/// A tool's name for an assistant named `name`.
fn tool_name(name: &str) -> String {
    let mut out = String::new();
    let mut space = false;
    for c in name.chars() {
        if c.is_whitespace() {
            space = true;
            continue;
        }
        if space {
            out.push('_');
            space = false;
        }
        if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
            out.push(c);
        }
    }
    if space {
        out.push('_');
    }
    out.chars().take(MAX_NAME).collect()
}

/// What a `messages` channel is offered as.
fn message_property() -> Json {
    json!({
        "type": "string",
        "title": "Messages",
        "description": "The user message to send to the agent."
    })
}

impl Tools {
    /// The assistants, oldest first, each with its tool name (the first of each name).
    async fn assistants(&self) -> Result<Vec<(String, AssistantRecord)>, McpError> {
        crate::assistants::ensure(&self.state)
            .await
            .map_err(internal)?;
        let mut all = self
            .state
            .records
            .search::<AssistantRecord>(Default::default())
            .await
            .map_err(internal)?;
        all.sort_by(|a, b| a.created_at.cmp(&b.created_at));
        let mut out: Vec<(String, AssistantRecord)> = Vec::new();
        for a in all {
            let name = tool_name(&a.name);
            if name.is_empty() || out.iter().any(|(n, _)| *n == name) {
                tracing::warn!(assistant_id = %a.assistant_id, name = %a.name, "mcp: no tool for an assistant whose name is empty or taken");
                continue;
            }
            out.push((name, a));
        }
        Ok(out)
    }

    /// The tool of `assistant`: its graph's input schema, `messages` offered as a string.
    fn tool(&self, name: String, assistant: &AssistantRecord) -> Option<Tool> {
        let graph = self.state.graphs.get(&assistant.graph_id)?;
        // A graph's input schema is its state's.
        let mut schema = match crate::http::state_schema(graph.as_ref()) {
            Json::Object(o) => o,
            _ => JsonObject::new(),
        };
        schema.entry("type").or_insert_with(|| json!("object"));
        if let Some(Json::Object(props)) = schema.get_mut("properties")
            && let Some(m) = props.get_mut("messages")
        {
            *m = message_property();
        }
        let description = assistant
            .description
            .clone()
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| format!("Tool based on the {} assistant", assistant.name));
        Some(
            Tool::new(name, description, Arc::new(schema))
                .with_title(assistant.name.clone())
                .with_annotations(
                    ToolAnnotations::new()
                        .read_only(false)
                        .destructive(false)
                        .idempotent(false)
                        .open_world(true),
                ),
        )
    }
}

fn internal(e: crate::error::ApiError) -> McpError {
    McpError::internal_error(e.detail, None)
}

impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("stategraph", env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = self
            .assistants()
            .await?
            .into_iter()
            .filter_map(|(name, a)| self.tool(name, &a))
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let wanted: &str = &request.name;
        let assistant = self
            .assistants()
            .await?
            .into_iter()
            .find(|(name, _)| name == wanted)
            .map(|(_, a)| a)
            .ok_or_else(|| McpError::invalid_params(format!("Unknown tool: {wanted}"), None))?;
        let mut input = request.arguments.unwrap_or_default();
        if let Some(Json::String(text)) = input.get("messages") {
            let message = json!([{ "type": "human", "content": text }]);
            input.insert("messages".into(), message);
        }
        let body = RunBody {
            assistant_id: Some(assistant.assistant_id.clone()),
            input: Some(Json::Object(input)),
            ..RunBody::default()
        };
        let started = crate::run::start::start(
            Arc::clone(&self.state),
            crate::run::plan::Target::Stateless,
            body,
            crate::run::start::Follow::Wait,
        )
        .await
        .map_err(|e| McpError::invalid_params(Cow::Owned(e.detail), None))?;
        let crate::run::start::Started { done, .. } = started;
        let outcome = done
            .await
            .map_err(|_| McpError::internal_error("the run stopped before it ended", None))?;
        Ok(match &outcome.error {
            Some(e) => {
                let name = e.get("error").and_then(Json::as_str).unwrap_or("Error");
                let text = match e.get("message").and_then(Json::as_str) {
                    Some(m) if !m.is_empty() => format!("{name}: {m}"),
                    _ => name.to_owned(),
                };
                CallToolResult::error(vec![ContentBlock::text(text)])
            }
            None => CallToolResult::success(vec![ContentBlock::text(
                outcome.to_wait_json().to_string(),
            )]),
        }
        .into())
    }
}

#[cfg(test)]
mod tests {
    use super::tool_name;

    #[test]
    fn tool_names_keep_what_mcp_allows() {
        assert_eq!(tool_name("seed"), "seed");
        assert_eq!(tool_name("my  agent\tv2"), "my_agent_v2");
        assert_eq!(tool_name("héllo/wörld!"), "hllowrld");
        assert_eq!(tool_name(&"x".repeat(200)).len(), 128);
    }
}
