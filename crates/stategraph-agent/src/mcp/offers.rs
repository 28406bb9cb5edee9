//! What a server offers, as the client hands it out: prompts, resources and tools.

use super::*;

/// A prompt a server offers ([`McpClient::list_prompts`]).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[non_exhaustive]
pub struct McpPrompt {
    /// Its name, for [`McpClient::get_prompt`].
    pub name: String,
    /// What it is for.
    #[serde(default)]
    pub description: Option<String>,
    /// The arguments it takes.
    #[serde(default)]
    pub arguments: Vec<McpPromptArgument>,
}

/// An argument of an [`McpPrompt`].
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[non_exhaustive]
pub struct McpPromptArgument {
    /// Its name.
    pub name: String,
    /// What it is.
    #[serde(default)]
    pub description: Option<String>,
    /// Whether the prompt needs it.
    #[serde(default)]
    pub required: bool,
}

/// A resource a server offers ([`McpClient::list_resources`]).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct McpResource {
    /// Where it is, for [`McpClient::read_resource`].
    pub uri: String,
    /// Its name.
    pub name: String,
    /// What it is.
    #[serde(default)]
    pub description: Option<String>,
    /// Its MIME type, when the server says.
    #[serde(default)]
    pub mime_type: Option<String>,
}

/// One part of a resource's contents ([`McpClient::read_resource`]).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct McpResourceContents {
    /// The part's URI.
    pub uri: String,
    /// Its MIME type, when the server says.
    pub mime_type: Option<String>,
    /// The data.
    pub data: ResourceData,
}

/// The data of a resource part.
#[derive(Clone, Debug, PartialEq)]
pub enum ResourceData {
    /// Text.
    Text(String),
    /// Bytes (sent base64-encoded).
    Bytes(Vec<u8>),
}

/// One tool of an MCP server, as a [`Tool`]: its name (prefixed with the server's when asked),
/// description and input schema as the server lists them.
pub struct McpTool {
    pub(super) client: Arc<McpClient>,
    pub(super) name: String,
    pub(super) remote: String,
    pub(super) description: String,
    pub(super) parameters: Json,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("server", &self.client.name)
            .field("name", &self.name)
            .field("remote", &self.remote)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    pub(super) fn new(client: &Arc<McpClient>, tool: &rmcp::model::Tool, name: String) -> Self {
        Self {
            client: Arc::clone(client),
            name,
            remote: tool.name.to_string(),
            description: tool.description.as_deref().unwrap_or_default().to_owned(),
            parameters: Json::Object((*tool.input_schema).clone()),
        }
    }

    /// The server it belongs to.
    pub fn server(&self) -> &str {
        &self.client.name
    }

    /// Its name on the server (without a prefix).
    pub fn remote_name(&self) -> &str {
        &self.remote
    }
}

#[async_trait::async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Json {
        self.parameters.clone()
    }

    async fn call(&self, args: Value, _ctx: ToolContext) -> Result<ToolOutput, Error> {
        self.client.call_tool(&self.remote, args.to_json()).await
    }
}
