//! A swarm of agents (`langgraph_swarm`): agents that hand the conversation to one another
//! with handoff tools, and a graph that remembers which agent spoke last, so the next turn
//! of the conversation starts with it.

use stategraph_checkpoint::Value;
use stategraph_graph::{
    CompiledGraph, Goto, GraphError, Reducer, START, Schema, State, StateGraph, Values,
};
use stategraph_messages::Message;

use crate::agent::{Agent, AgentState};
use crate::handoff::ACTIVE_AGENT;
use crate::react::ReactAgent;
use crate::state::{MessagesState, messages_reusing};

/// A swarm's state (`langgraph_swarm.SwarmState`): the conversation, merged with
/// `add_messages`, and the agent that spoke last.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SwarmState {
    /// The conversation, oldest first.
    pub messages: Vec<Message>,
    /// The agent the next turn starts with (`None`: the swarm's default agent).
    pub active_agent: Option<String>,
}

/// An update of [`SwarmState`].
#[derive(Clone, Debug, Default)]
pub struct SwarmUpdate {
    messages: Option<Vec<Message>>,
    active_agent: Option<String>,
}

impl SwarmUpdate {
    /// Messages to merge into the conversation (a turn's input).
    pub fn messages(messages: impl IntoIterator<Item = Message>) -> Self {
        Self {
            messages: Some(messages.into_iter().collect()),
            active_agent: None,
        }
    }

    /// The same update also making `agent` the active one (the next turn starts with it).
    pub fn active_agent(mut self, agent: impl Into<String>) -> Self {
        self.active_agent = Some(agent.into());
        self
    }
}

impl State for SwarmState {
    type Update = SwarmUpdate;

    fn schema() -> Schema {
        Schema::new()
            .reducer("messages", Reducer::add_messages())
            .last_value(ACTIVE_AGENT)
    }

    fn from_values(values: &Values) -> Result<Self, GraphError> {
        Self::from_values_reusing(values, None)
    }

    fn from_values_reusing(
        values: &Values,
        previous: Option<(Self, &Values)>,
    ) -> Result<Self, GraphError> {
        let messages = messages_reusing(values, previous.map(|(p, b)| (p.messages, b)))?;
        let active_agent = match values.get(ACTIVE_AGENT) {
            None | Some(Value::Null) => None,
            Some(Value::Str(s)) => Some(s.to_string()),
            Some(other) => {
                return Err(GraphError::Decode {
                    key: ACTIVE_AGENT.into(),
                    message: format!("expected an agent's name, found {}", other.kind()),
                });
            }
        };
        Ok(Self {
            messages,
            active_agent,
        })
    }

    fn into_writes(update: SwarmUpdate) -> Result<Vec<(String, Value)>, GraphError> {
        let mut writes = Vec::new();
        if let Some(messages) = update.messages {
            writes.push((
                "messages".to_owned(),
                Value::from(messages.iter().map(Message::to_value).collect::<Vec<_>>()),
            ));
        }
        if let Some(agent) = update.active_agent {
            writes.push((ACTIVE_AGENT.to_owned(), Value::from(agent)));
        }
        Ok(writes)
    }
}

/// Adds a compiled agent to the swarm's graph.
type AddFn = Box<dyn FnOnce(&mut StateGraph<SwarmState>, &str) + Send>;

/// One agent of a swarm: its name (the node's), the agents its handoff tools lead to, and
/// its compiled graph. Made from a named [`Agent`] or [`ReactAgent`], or from any compiled
/// graph with [`SwarmAgent::new`].
pub struct SwarmAgent {
    name: String,
    destinations: Vec<String>,
    add: Result<AddFn, GraphError>,
}

impl std::fmt::Debug for SwarmAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SwarmAgent")
            .field("name", &self.name)
            .field("destinations", &self.destinations)
            .finish_non_exhaustive()
    }
}

impl SwarmAgent {
    /// `graph`, a compiled agent, as the swarm's node `name`, handing over to
    /// `destinations` (the agents its handoff tools name). Its state must have `messages`.
    pub fn new<S: State, I, T>(
        name: impl Into<String>,
        graph: CompiledGraph<S>,
        destinations: I,
    ) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        Self {
            name: name.into(),
            destinations: destinations.into_iter().map(Into::into).collect(),
            add: Ok(Box::new(move |g, name| {
                g.add_subgraph(name, graph);
            })),
        }
    }

    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The agents it can hand over to.
    pub fn destinations(&self) -> &[String] {
        &self.destinations
    }

    fn failed(name: String, error: GraphError) -> Self {
        Self {
            name,
            destinations: Vec::new(),
            add: Err(error),
        }
    }
}

fn unnamed() -> GraphError {
    GraphError::InvalidConfig(
        "a swarm's agents need names (the nodes they run as): set one with `.name(..)`".into(),
    )
}

impl From<Agent> for SwarmAgent {
    fn from(agent: Agent) -> Self {
        let Some(name) = agent.agent_name().map(str::to_owned) else {
            return Self::failed(String::new(), unnamed());
        };
        let destinations = agent.handoff_destinations();
        match agent.build() {
            Ok(graph) => Self::new::<AgentState, _, _>(name, graph, destinations),
            Err(e) => Self::failed(name, e),
        }
    }
}

impl From<ReactAgent> for SwarmAgent {
    fn from(agent: ReactAgent) -> Self {
        let Some(name) = agent.agent_name().map(str::to_owned) else {
            return Self::failed(String::new(), unnamed());
        };
        let destinations = agent.handoff_destinations();
        match agent.build() {
            Ok(graph) => Self::new::<MessagesState, _, _>(name, graph, destinations),
            Err(e) => Self::failed(name, e),
        }
    }
}

/// `langgraph_swarm.create_swarm`: a graph over [`SwarmState`] with one node per agent
/// (named after it), whose entry goes to the active agent — the one a handoff made active
/// ([`create_swarm_handoff_tool`](crate::handoff::create_swarm_handoff_tool)), else
/// `default_active_agent`. An agent's turn ends the run; the next turn of the thread starts
/// where the last one stopped. Compile it with a checkpointer to keep the conversation.
///
/// Fails when there are no agents, when one has no name or two share one, or when
/// `default_active_agent` is none of them.
///
/// ```
/// use std::sync::Arc;
/// use stategraph_agent::agent::create_agent;
/// use stategraph_agent::handoff::create_swarm_handoff_tool;
/// use stategraph_agent::swarm::create_swarm;
/// use stategraph_agent::{OpenAiConfig, Tool};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // Any OpenAI-compatible server; nothing is sent until the swarm runs.
/// let model = OpenAiConfig::new("gpt-4o-mini").base_url("http://127.0.0.1:8080/v1").build()?;
/// let to_bob: Arc<dyn Tool> = create_swarm_handoff_tool("Bob", None).into();
/// let to_alice: Arc<dyn Tool> = create_swarm_handoff_tool("Alice", None).into();
/// let alice = create_agent(model.clone(), [to_bob]).name("Alice").system_prompt("You are Alice.");
/// let bob = create_agent(model, [to_alice]).name("Bob").system_prompt("You are Bob.");
/// let swarm = create_swarm([alice.into(), bob.into()], "Alice")?.compile()?;
/// assert_eq!(swarm.topology().nodes, ["__start__", "Alice", "Bob"]);
/// # Ok(()) }
/// ```
pub fn create_swarm(
    agents: impl IntoIterator<Item = SwarmAgent>,
    default_active_agent: &str,
) -> Result<StateGraph<SwarmState>, GraphError> {
    let mut members = Vec::new();
    for agent in agents {
        if members.iter().any(|(name, _, _)| *name == agent.name) {
            return Err(GraphError::InvalidConfig(format!(
                "two of the swarm's agents are named {:?}",
                agent.name
            )));
        }
        members.push((agent.name, agent.destinations, agent.add?));
    }
    if members.is_empty() {
        return Err(GraphError::InvalidConfig(
            "a swarm needs at least one agent".into(),
        ));
    }
    let names: Vec<&String> = members.iter().map(|(name, _, _)| name).collect();
    if !names.iter().any(|n| *n == default_active_agent) {
        return Err(GraphError::InvalidConfig(format!(
            "the default active agent {default_active_agent:?} is none of the swarm's agents \
             {names:?}"
        )));
    }
    let mut graph = StateGraph::<SwarmState>::new();
    let default = default_active_agent.to_owned();
    graph
        .add_conditional_edges(START, move |s: &SwarmState| {
            let to = s.active_agent.as_deref().unwrap_or(&default);
            Ok(vec![Goto::from(to.to_owned())])
        })
        .name("route_to_active_agent")
        .path_map(names);
    for (name, destinations, add) in members {
        add(&mut graph, &name);
        graph.add_destinations(name.as_str(), destinations);
    }
    Ok(graph)
}
