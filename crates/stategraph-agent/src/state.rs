//! `MessagesState`: a conversation as graph state (LangGraph's `MessagesState`).

use stategraph_checkpoint::{Map, Value};
use stategraph_graph::{GraphError, Reducer, Schema, State, Values};
use stategraph_messages::Message;

/// A graph state of one key, `messages`, merged with LangGraph's `add_messages` (by id:
/// replace, remove, append), stored as Python stores it — so a chat thread is shared with
/// Python LangGraph in both directions.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MessagesState {
    /// The conversation, oldest first.
    pub messages: Vec<Message>,
}

/// An update of [`MessagesState`]: messages to merge in.
#[derive(Clone, Debug, Default)]
pub struct MessagesUpdate {
    messages: Option<Vec<Message>>,
    raw: Map,
}

impl MessagesUpdate {
    /// Messages to merge into the conversation.
    pub fn messages(messages: impl IntoIterator<Item = Message>) -> Self {
        Self {
            messages: Some(messages.into_iter().collect()),
            raw: Map::new(),
        }
    }

    /// A map given as it is: for a `Send` whose argument is not a state update (LangGraph's
    /// `tool_call_with_context`). As a node's update, each key must be a state key.
    pub fn raw(map: Map) -> Self {
        Self {
            messages: None,
            raw: map,
        }
    }
}

impl From<Vec<Message>> for MessagesUpdate {
    fn from(messages: Vec<Message>) -> Self {
        Self::messages(messages)
    }
}

impl State for MessagesState {
    type Update = MessagesUpdate;

    fn schema() -> Schema {
        Schema::new().reducer("messages", Reducer::add_messages())
    }

    fn from_values(values: &Values) -> Result<Self, GraphError> {
        Ok(Self {
            messages: messages_reusing(values, None)?,
        })
    }

    fn from_values_reusing(
        values: &Values,
        previous: Option<(Self, &Values)>,
    ) -> Result<Self, GraphError> {
        Ok(Self {
            messages: messages_reusing(values, previous.map(|(p, b)| (p.messages, b)))?,
        })
    }

    fn into_writes(update: MessagesUpdate) -> Result<Vec<(String, Value)>, GraphError> {
        let mut writes = Vec::new();
        if let Some(messages) = update.messages {
            writes.push((
                "messages".to_owned(),
                Value::from(messages.iter().map(Message::to_value).collect::<Vec<_>>()),
            ));
        }
        for (k, v) in update.raw {
            let key = k
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| GraphError::InvalidUpdate {
                    channel: k.to_string(),
                    message: "state keys must be strings".into(),
                })?;
            writes.push((key, v));
        }
        Ok(writes)
    }
}

/// The `messages` of `values`, converting only what is new since `previous` (the messages
/// read from the values `before`) when there is one.
pub(crate) fn messages_reusing(
    values: &Values,
    previous: Option<(Vec<Message>, &Values)>,
) -> Result<Vec<Message>, GraphError> {
    match previous {
        Some((old, before)) => stategraph_graph::reuse_vec_field(
            "messages",
            values.get("messages"),
            before.get("messages"),
            old,
        ),
        None => match values.get("messages") {
            Some(v) => read_messages(v),
            None => Ok(Vec::new()),
        },
    }
}

pub(crate) fn read_messages(v: &Value) -> Result<Vec<Message>, GraphError> {
    let Some(items) = v.as_list() else {
        return Err(GraphError::Decode {
            key: "messages".into(),
            message: format!("expected a list of messages, found {}", v.kind()),
        });
    };
    items
        .iter()
        .enumerate()
        .map(|(i, m)| {
            Message::from_value(m).map_err(|e| GraphError::Decode {
                key: "messages".into(),
                message: format!("at `[{i}]`: {e}"),
            })
        })
        .collect()
}
