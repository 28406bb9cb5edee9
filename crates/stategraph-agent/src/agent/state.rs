//! The state of an agent `create_agent` builds: the conversation, the structured answer,
//! the ephemeral `jump_to`, and whatever keys its middleware add.

use stategraph_checkpoint::{Map, Value};
use stategraph_graph::{ChannelSpec, GraphError, Reducer, SEND_ARG, Schema, State, Values};
use stategraph_messages::Message;

/// Where a middleware hook may send the agent instead of the next node (LangChain's
/// `jump_to`): the tools, the model (the loop's entry), or the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Jump {
    /// Run the tool calls of the last AI message.
    Tools,
    /// Call the model again (through the `before_model` hooks).
    Model,
    /// Leave the loop (through the `after_agent` hooks).
    End,
}

impl Jump {
    /// The stored name: `"tools"`, `"model"` or `"end"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Jump::Tools => "tools",
            Jump::Model => "model",
            Jump::End => "end",
        }
    }

    /// The jump a stored name means.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "tools" => Some(Jump::Tools),
            "model" => Some(Jump::Model),
            "end" => Some(Jump::End),
            _ => None,
        }
    }
}

/// The state key of the conversation.
pub const MESSAGES: &str = "messages";
/// The state key of the structured answer.
pub const STRUCTURED_RESPONSE: &str = "structured_response";
/// The ephemeral state key a hook's jump is written to.
pub const JUMP_TO: &str = "jump_to";

/// An agent's state (LangChain's `AgentState`): the conversation merged with
/// `add_messages`, the structured answer when a response format is set, and the raw values
/// of every key the agent's middleware declare.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AgentState {
    /// The conversation, oldest first.
    pub messages: Vec<Message>,
    /// The structured answer of the last turn (a response format was set and the model gave
    /// one), as JSON-like data.
    pub structured_response: Option<Value>,
    /// A jump a hook of this step asked for.
    pub jump_to: Option<Jump>,
    /// Every other key's value (the middleware's state keys).
    pub values: Values,
}

impl AgentState {
    /// The value of a middleware's state key.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.values.get(key)
    }

    /// The last AI message of the conversation.
    pub fn last_ai(&self) -> Option<&Message> {
        self.messages
            .iter()
            .rev()
            .find(|m| matches!(m, Message::Ai { .. }))
    }

    /// The structured answer as a Rust type.
    pub fn structured<T: serde::de::DeserializeOwned>(&self) -> Result<Option<T>, GraphError> {
        self.structured_response
            .as_ref()
            .filter(|v| !v.is_null())
            .map(|v| stategraph_graph::from_value(STRUCTURED_RESPONSE, v))
            .transpose()
    }
}

/// An update of an [`AgentState`] (LangGraph's dict update or `Command(update=…)`): writes in
/// the order they are made, each to one state key.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AgentUpdate {
    writes: Vec<(String, Value)>,
}

impl AgentUpdate {
    /// No writes.
    pub fn new() -> Self {
        Self::default()
    }

    /// Messages to merge into the conversation.
    pub fn messages(self, messages: impl IntoIterator<Item = Message>) -> Self {
        let list = messages
            .into_iter()
            .map(|m| m.to_value())
            .collect::<Vec<_>>();
        self.set(MESSAGES, Value::from(list))
    }

    /// A jump for the next edge to take.
    pub fn jump_to(self, jump: Jump) -> Self {
        self.set(JUMP_TO, jump.as_str())
    }

    /// The structured answer (`Value::Null` clears it).
    pub fn structured_response(self, value: impl Into<Value>) -> Self {
        self.set(STRUCTURED_RESPONSE, value)
    }

    /// A write of `value` to `key`.
    pub fn set(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.writes.push((key.into(), value.into()));
        self
    }

    /// The writes of `other` after these.
    pub fn extend(&mut self, other: AgentUpdate) {
        self.writes.extend(other.writes);
    }

    /// Whether it writes nothing.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// The writes, in order.
    pub fn writes(&self) -> &[(String, Value)] {
        &self.writes
    }

    /// A `Send` argument that is `value` itself (a list of tool calls, as LangChain's agent
    /// sends them to its tools).
    pub(crate) fn send_arg(value: Value) -> Self {
        Self::new().set(SEND_ARG, value)
    }

    /// From a map of key → value (a dict update).
    pub fn from_map(map: Map) -> Result<Self, GraphError> {
        Ok(Self {
            writes: <stategraph_graph::DynState as State>::into_writes(map)?,
        })
    }
}

impl State for AgentState {
    type Update = AgentUpdate;

    fn schema() -> Schema {
        Schema::new()
            .reducer(MESSAGES, Reducer::add_messages())
            .key(JUMP_TO, ChannelSpec::Ephemeral { guard: true })
            .last_value(STRUCTURED_RESPONSE)
    }

    fn from_values(values: &Values) -> Result<Self, GraphError> {
        Self::from_values_reusing(values, None)
    }

    fn from_values_reusing(
        values: &Values,
        previous: Option<(Self, &Values)>,
    ) -> Result<Self, GraphError> {
        let messages =
            crate::state::messages_reusing(values, previous.map(|(p, b)| (p.messages, b)))?;
        let jump_to = match values.get(JUMP_TO) {
            None | Some(Value::Null) => None,
            Some(v) => {
                Some(
                    v.as_str()
                        .and_then(Jump::parse)
                        .ok_or_else(|| GraphError::Decode {
                            key: JUMP_TO.into(),
                            message: format!("expected \"tools\", \"model\" or \"end\", found {v}"),
                        })?,
                )
            }
        };
        let structured_response = values.get(STRUCTURED_RESPONSE).cloned();
        let rest = values
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), MESSAGES | JUMP_TO | STRUCTURED_RESPONSE))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Ok(Self {
            messages,
            structured_response,
            jump_to,
            values: rest,
        })
    }

    fn into_writes(update: AgentUpdate) -> Result<Vec<(String, Value)>, GraphError> {
        Ok(update.writes)
    }
}
