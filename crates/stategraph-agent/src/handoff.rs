//! Handoffs between agents: a tool that ends the agent it is called from and hands the
//! conversation to another node of the graph the agent runs in (a `Command` to the parent
//! graph), the building block of supervisors and swarms.

use std::sync::Arc;

use async_trait::async_trait;
use stategraph_checkpoint::{Map, Value};
use stategraph_messages::{Message, MessageFields};

use crate::error::{Error, Result};
use crate::tool::{Tool, ToolCommand, ToolContext, ToolOutput};

/// The key a swarm keeps its active agent under.
pub const ACTIVE_AGENT: &str = "active_agent";

/// The key of a handoff tool's answer's `response_metadata` naming where it handed over to.
pub const HANDOFF_DESTINATION: &str = "__handoff_destination";

/// A tool handing the conversation over to `agent`, a node of the graph the calling agent
/// runs in; see [`create_handoff_tool`].
#[derive(Clone, Debug)]
pub struct HandoffTool {
    name: String,
    description: String,
    agent: String,
    active_agent_key: Option<String>,
    /// Whether the tool's answer carries `response_metadata.__handoff_destination` (the
    /// supervisor's handoff does, the swarm's does not).
    mark_answer: bool,
}

/// The tool `transfer_to_{agent}` (the name lower-cased, whitespace as `_`): when the model
/// calls it, the agent it runs in stops and `agent` — another node of the parent graph —
/// runs next, with the conversation so far plus the tool's answer `"Successfully
/// transferred to {agent}"` (LangGraph's `Command(goto=agent, graph=Command.PARENT,
/// update={"messages": …})`). The calling agent must run as a node (a subgraph) of that
/// graph, and both must share the `messages` key.
///
/// ```
/// use stategraph_agent::{Tool, handoff::create_handoff_tool};
/// let to_billing = create_handoff_tool("billing", None);
/// assert_eq!(to_billing.name(), "transfer_to_billing");
/// assert_eq!(to_billing.description(), "Ask agent 'billing' for help");
/// ```
pub fn create_handoff_tool(agent: &str, description: Option<&str>) -> HandoffTool {
    HandoffTool {
        name: format!("transfer_to_{}", normalize(agent)),
        description: description
            .map_or_else(|| format!("Ask agent '{agent}' for help"), str::to_owned),
        agent: agent.to_owned(),
        active_agent_key: None,
        mark_answer: true,
    }
}

/// An agent's name as it appears in a tool name: trimmed, lower-cased, each run of
/// whitespace one `_`.
fn normalize(agent: &str) -> String {
    agent
        .split_whitespace()
        .collect::<Vec<_>>()
        .join("_")
        .to_lowercase()
}

impl HandoffTool {
    /// The same tool also writing the destination to `key` (a swarm's
    /// [`ACTIVE_AGENT`], which routes the next turn back to it).
    pub fn with_active_agent(mut self, key: impl Into<String>) -> Self {
        self.active_agent_key = Some(key.into());
        self
    }

    /// The same tool named `name` instead of `transfer_to_{agent}`.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The agent it hands over to.
    pub fn agent(&self) -> &str {
        &self.agent
    }
}

#[async_trait]
impl Tool for HandoffTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object", "properties": {}})
    }

    fn handoff_destination(&self) -> Option<&str> {
        Some(&self.agent)
    }

    async fn call(&self, _args: Value, ctx: ToolContext) -> Result<ToolOutput> {
        let state = ctx.state().ok_or_else(|| {
            Error::InvalidRequest(format!(
                "`{}` hands over to another node of the graph the agent runs in; call it from \
                 an agent running in a graph",
                self.name
            ))
        })?;
        let mut messages: Vec<Value> = state
            .get("messages")
            .and_then(Value::as_list)
            .map(|l| l.to_vec())
            .unwrap_or_default();
        let mut metadata = Map::new();
        if self.mark_answer {
            metadata.insert(HANDOFF_DESTINATION, self.agent.as_str());
        }
        let answer = Message::Tool {
            fields: MessageFields {
                content: Value::from(format!("Successfully transferred to {}", self.agent)),
                response_metadata: metadata,
                name: Some(self.name.clone()),
                ..MessageFields::default()
            },
            tool_call_id: ctx.tool_call_id.clone(),
            artifact: Value::Null,
            status: "success".to_owned(),
        };
        messages.push(answer.to_value());
        let mut command = ToolCommand::new().set("messages", Value::from(messages));
        if let Some(key) = &self.active_agent_key {
            command = command.set(key.as_str(), self.agent.as_str());
        }
        Ok(command.goto(self.agent.as_str()).to_parent().into())
    }
}

impl From<HandoffTool> for Arc<dyn Tool> {
    fn from(t: HandoffTool) -> Self {
        Arc::new(t)
    }
}

/// A swarm's handoff tool (`langgraph_swarm.create_handoff_tool`): as
/// [`create_handoff_tool`], and it also makes `agent` the swarm's [`ACTIVE_AGENT`], so the
/// next turn of the conversation starts with it; its answer carries no response metadata.
///
/// ```
/// use stategraph_agent::{Tool, handoff::create_swarm_handoff_tool};
/// let to_bob = create_swarm_handoff_tool("Bob", Some("Transfer to Bob"));
/// assert_eq!(to_bob.name(), "transfer_to_bob");
/// assert_eq!(to_bob.handoff_destination(), Some("Bob"));
/// ```
pub fn create_swarm_handoff_tool(agent: &str, description: Option<&str>) -> HandoffTool {
    HandoffTool {
        active_agent_key: Some(ACTIVE_AGENT.to_owned()),
        mark_answer: false,
        ..create_handoff_tool(agent, description)
    }
}
