//! Tools from several MCP servers at once ([`MultiServerMcpClient`]).

use super::*;

/// How the tools of several servers are named.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolNames {
    /// As each server names them; two servers offering one name is an
    /// [`McpError::NameClash`] (the adapters' default, `tool_name_prefix=False`, which lets
    /// the later tool hide the earlier).
    #[default]
    AsGiven,
    /// Every name prefixed `{server}_{tool}` (the adapters' `tool_name_prefix=True`).
    Prefixed,
    /// Only the names more than one server offers are prefixed.
    PrefixOnClash,
}

/// The servers a [`MultiServerMcpClient`] connects to.
#[derive(Clone, Debug, Default)]
pub struct MultiServerMcpClientBuilder {
    pub(super) servers: Vec<(String, McpServer)>,
    pub(super) names: ToolNames,
}

impl MultiServerMcpClientBuilder {
    /// Adds a server called `name` (the prefix of its tools' names where they are prefixed).
    pub fn server(mut self, name: impl Into<String>, server: McpServer) -> Self {
        self.servers.push((name.into(), server));
        self
    }

    /// How the tools are named (default [`ToolNames::AsGiven`]).
    pub fn tool_names(mut self, names: ToolNames) -> Self {
        self.names = names;
        self
    }

    /// Connects to every server at once; the first that cannot be reached is the error.
    pub async fn connect(self) -> Result<MultiServerMcpClient, Error> {
        let mut seen = std::collections::BTreeSet::new();
        if let Some((dup, _)) = self.servers.iter().find(|(n, _)| !seen.insert(n.as_str())) {
            return Err(Error::InvalidRequest(format!(
                "two MCP servers are named `{dup}`"
            )));
        }
        let clients = futures_util::future::try_join_all(
            self.servers
                .into_iter()
                .map(|(name, server)| McpClient::connect(name, server)),
        )
        .await?;
        Ok(MultiServerMcpClient {
            clients,
            names: self.names,
        })
    }
}

/// Connections to several named MCP servers, and their tools together (the adapters'
/// `MultiServerMCPClient`).
#[derive(Debug)]
pub struct MultiServerMcpClient {
    pub(super) clients: Vec<Arc<McpClient>>,
    pub(super) names: ToolNames,
}

impl MultiServerMcpClient {
    /// The servers to connect to.
    pub fn builder() -> MultiServerMcpClientBuilder {
        MultiServerMcpClientBuilder::default()
    }

    /// The client of the server called `name`.
    pub fn client(&self, name: &str) -> Option<&Arc<McpClient>> {
        self.clients.iter().find(|c| c.name == name)
    }

    /// The connected clients, in the order the servers were added.
    pub fn clients(&self) -> &[Arc<McpClient>] {
        &self.clients
    }

    /// Every server's tools, in the order the servers were added, named as
    /// [`ToolNames`] says.
    pub async fn tools(&self) -> Result<Vec<Arc<dyn Tool>>, Error> {
        let lists =
            futures_util::future::try_join_all(self.clients.iter().map(|c| c.list_tools())).await?;
        // Which server first offers each name, and whether another does too.
        let mut owners: BTreeMap<&str, (&str, bool)> = BTreeMap::new();
        for (client, tools) in self.clients.iter().zip(&lists) {
            for t in tools.iter() {
                owners
                    .entry(&t.name)
                    .and_modify(|o| o.1 = true)
                    .or_insert((&client.name, false));
            }
        }
        let mut out: Vec<Arc<dyn Tool>> = Vec::new();
        for (client, tools) in self.clients.iter().zip(&lists) {
            for t in tools.iter() {
                let (first, clash) = owners.get(t.name.as_ref()).copied().unwrap_or_default();
                let prefixed = match self.names {
                    ToolNames::Prefixed => true,
                    ToolNames::PrefixOnClash => clash,
                    ToolNames::AsGiven if clash && first != client.name => {
                        return Err(McpError::NameClash {
                            tool: t.name.to_string(),
                            first: first.to_owned(),
                            second: client.name.clone(),
                        }
                        .into());
                    }
                    ToolNames::AsGiven => false,
                };
                let name = if prefixed {
                    format!("{}_{}", client.name, t.name)
                } else {
                    t.name.to_string()
                };
                out.push(Arc::new(McpTool::new(client, t, name)));
            }
        }
        Ok(out)
    }
}
