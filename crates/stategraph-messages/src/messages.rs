//! LangChain chat messages as Rust types, stored exactly as Python LangGraph stores them:
//! ext 5 `[module, class, model_dump(), "model_validate_json"]`, with `model_dump`'s field
//! order, so a chat thread can be shared with Python in both directions.

use serde::{Deserialize, Deserializer, Serialize, Serializer as SerdeSerializer};

use crate::chunk::AiMessageChunk;
use stategraph_value::SerdeError;
use stategraph_value::{Ext, ExtCode, Map, PyObject, Value};

/// A tool call requested by the model (`{"name", "args", "id", "type": "tool_call"}`).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    /// The tool's name.
    pub name: String,
    /// Its arguments.
    pub args: Value,
    /// The call's id, matched by the tool's answer.
    pub id: Option<String>,
}

impl ToolCall {
    /// The stored form: `{"name", "args", "id", "type": "tool_call"}`.
    pub fn to_value(&self) -> Value {
        let mut call = Map::new();
        call.insert("name", self.name.as_str());
        call.insert("args", self.args.clone());
        call.insert("id", self.id.clone());
        call.insert("type", "tool_call");
        Value::Map(call)
    }
}

/// Fields every message has.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct MessageFields {
    /// The content: a string, or a list of content blocks.
    pub content: Value,
    /// Provider-specific extras.
    pub additional_kwargs: Map,
    /// Response metadata (token counts, model name, …).
    pub response_metadata: Map,
    /// An optional name of the author.
    pub name: Option<String>,
    /// The message id (`add_messages` merges by it).
    pub id: Option<String>,
    /// Fields this version does not know, kept so a rewrite loses nothing.
    pub extra: Vec<(String, Value)>,
}

/// A LangChain message.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Message {
    /// From the user (`HumanMessage`).
    Human(MessageFields),
    /// From the model (`AIMessage`), possibly calling tools.
    Ai {
        /// Common fields.
        fields: MessageFields,
        /// Tool calls.
        tool_calls: Vec<ToolCall>,
        /// Tool calls that failed to parse, as stored.
        invalid_tool_calls: Vec<Value>,
        /// Token usage, as stored.
        usage_metadata: Value,
    },
    /// A tool's answer (`ToolMessage`).
    Tool {
        /// Common fields.
        fields: MessageFields,
        /// The call it answers.
        tool_call_id: String,
        /// Extra output not sent to the model.
        artifact: Value,
        /// `"success"` or `"error"`.
        status: String,
    },
    /// Instructions (`SystemMessage`).
    System(MessageFields),
    /// A piece of an AI message as a model streams it (`AIMessageChunk`): what the
    /// `messages` stream mode carries while a model answers.
    AiChunk(AiMessageChunk),
    /// An instruction to `add_messages` to delete the message with this id
    /// (`RemoveMessage`); the id `__remove_all__` clears the whole history before it.
    Remove(MessageFields),
}

impl Message {
    /// A human message with text content.
    pub fn human(content: impl Into<String>) -> Self {
        Message::Human(MessageFields {
            content: Value::from(content.into()),
            ..MessageFields::default()
        })
    }

    /// A system message with text content.
    pub fn system(content: impl Into<String>) -> Self {
        Message::System(MessageFields {
            content: Value::from(content.into()),
            ..MessageFields::default()
        })
    }

    /// An AI message with text content and tool calls.
    pub fn ai(content: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        Message::Ai {
            fields: MessageFields {
                content: Value::from(content.into()),
                ..MessageFields::default()
            },
            tool_calls,
            invalid_tool_calls: Vec::new(),
            usage_metadata: Value::Null,
        }
    }

    /// A `RemoveMessage`: merged by `add_messages`, it deletes the message with `id`.
    pub fn remove(id: impl Into<String>) -> Self {
        Message::Remove(MessageFields {
            content: Value::from(""),
            id: Some(id.into()),
            ..MessageFields::default()
        })
    }

    /// A `RemoveMessage` with the id `__remove_all__`: merged by `add_messages`, it clears
    /// every message before it (what follows it becomes the whole history).
    pub fn remove_all() -> Self {
        Self::remove("__remove_all__")
    }

    /// A successful tool answer to `tool_call_id`.
    pub fn tool(content: impl Into<String>, tool_call_id: impl Into<String>) -> Self {
        Message::Tool {
            fields: MessageFields {
                content: Value::from(content.into()),
                ..MessageFields::default()
            },
            tool_call_id: tool_call_id.into(),
            artifact: Value::Null,
            status: "success".to_owned(),
        }
    }

    /// The same message with an id.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.fields_mut().id = Some(id.into());
        self
    }

    /// The common fields.
    pub fn fields(&self) -> &MessageFields {
        match self {
            Message::Human(f) | Message::System(f) | Message::Remove(f) => f,
            Message::Ai { fields, .. } | Message::Tool { fields, .. } => fields,
            Message::AiChunk(c) => &c.fields,
        }
    }

    fn fields_mut(&mut self) -> &mut MessageFields {
        match self {
            Message::Human(f) | Message::System(f) | Message::Remove(f) => f,
            Message::Ai { fields, .. } | Message::Tool { fields, .. } => fields,
            Message::AiChunk(c) => &mut c.fields,
        }
    }

    /// The text content, when the content is a string.
    pub fn text(&self) -> Option<&str> {
        self.fields().content.as_str()
    }

    fn kind(&self) -> (&'static str, &'static str, &'static str) {
        match self {
            Message::Human(_) => ("langchain_core.messages.human", "HumanMessage", "human"),
            Message::Ai { .. } => ("langchain_core.messages.ai", "AIMessage", "ai"),
            Message::Tool { .. } => ("langchain_core.messages.tool", "ToolMessage", "tool"),
            Message::System(_) => ("langchain_core.messages.system", "SystemMessage", "system"),
            Message::Remove(_) => (
                "langchain_core.messages.modifier",
                "RemoveMessage",
                "remove",
            ),
            Message::AiChunk(_) => (
                "langchain_core.messages.ai",
                "AIMessageChunk",
                "AIMessageChunk",
            ),
        }
    }

    /// The stored form (what Python's `JsonPlusSerializer` writes for the same message).
    pub fn to_value(&self) -> Value {
        if let Message::AiChunk(c) = self {
            return c.to_value();
        }
        let (module, class, kind) = self.kind();
        let f = self.fields();
        let mut m = Map::new();
        m.insert("content", f.content.clone());
        m.insert("additional_kwargs", Value::Map(f.additional_kwargs.clone()));
        m.insert("response_metadata", Value::Map(f.response_metadata.clone()));
        m.insert("type", kind);
        m.insert("name", f.name.clone());
        m.insert("id", f.id.clone());
        match self {
            Message::Ai {
                tool_calls,
                invalid_tool_calls,
                usage_metadata,
                ..
            } => {
                let calls = tool_calls.iter().map(ToolCall::to_value).collect();
                m.insert("tool_calls", Value::List(calls));
                m.insert(
                    "invalid_tool_calls",
                    Value::from(invalid_tool_calls.clone()),
                );
                m.insert("usage_metadata", usage_metadata.clone());
            }
            Message::Tool {
                tool_call_id,
                artifact,
                status,
                ..
            } => {
                m.insert("tool_call_id", tool_call_id.as_str());
                m.insert("artifact", artifact.clone());
                m.insert("status", status.as_str());
            }
            _ => {}
        }
        for (k, v) in &f.extra {
            m.insert(k.as_str(), v.clone());
        }
        Value::Ext(Ext::from_py_object(
            ExtCode::PydanticV2,
            &PyObject::new(module, class, Value::Map(m)).with_method("model_validate_json"),
        ))
    }

    /// Reads a stored message: the ext form Python writes, or a plain map with a `type` key.
    pub fn from_value(value: &Value) -> Result<Self, SerdeError> {
        let shape = |message: String| SerdeError::Shape {
            path: String::new(),
            message,
        };
        let data = match value {
            Value::Ext(e) => {
                e.py_object()
                    .map_err(|source| SerdeError::Decode {
                        tag: "msgpack".into(),
                        source,
                    })?
                    .ok_or_else(|| shape("not a message object".into()))?
                    .data
            }
            Value::Map(_) => value.clone(),
            other => return Err(shape(format!("expected a message, found {}", other.kind()))),
        };
        let Value::Map(map) = data else {
            return Err(shape("message data is not a map".into()));
        };
        let kind = map
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| shape("message without a `type`".into()))?
            .to_owned();
        let mut fields = MessageFields::default();
        let mut tool_calls = Vec::new();
        let mut invalid_tool_calls = Vec::new();
        let mut usage_metadata = Value::Null;
        let mut tool_call_id = String::new();
        let mut artifact = Value::Null;
        let mut status = "success".to_owned();
        let text = |v: &Value| v.as_str().map(str::to_owned);
        for (k, v) in map {
            let Value::Str(k) = k else { continue };
            match &*k {
                "content" => fields.content = v,
                "additional_kwargs" => {
                    fields.additional_kwargs = v.as_map().cloned().unwrap_or_default()
                }
                "response_metadata" => {
                    fields.response_metadata = v.as_map().cloned().unwrap_or_default()
                }
                "type" => {}
                "name" => fields.name = text(&v),
                "id" => fields.id = text(&v),
                "tool_calls" if kind == "ai" => {
                    for c in v.as_list().unwrap_or_default() {
                        let c = c.as_map().cloned().unwrap_or_default();
                        tool_calls.push(ToolCall {
                            name: c
                                .get("name")
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .to_owned(),
                            args: c.get("args").cloned().unwrap_or(Value::Map(Map::new())),
                            id: c.get("id").and_then(Value::as_str).map(str::to_owned),
                        });
                    }
                }
                "invalid_tool_calls" if kind == "ai" => {
                    invalid_tool_calls = v.as_list().unwrap_or_default().to_vec()
                }
                "usage_metadata" if kind == "ai" => usage_metadata = v,
                "tool_call_id" if kind == "tool" => tool_call_id = text(&v).unwrap_or_default(),
                "artifact" if kind == "tool" => artifact = v,
                "status" if kind == "tool" => status = text(&v).unwrap_or_else(|| "success".into()),
                _ => fields.extra.push((k.to_string(), v)),
            }
        }
        Ok(match kind.as_str() {
            "human" => Message::Human(fields),
            "system" => Message::System(fields),
            "remove" => Message::Remove(fields),
            "ai" => Message::Ai {
                fields,
                tool_calls,
                invalid_tool_calls,
                usage_metadata,
            },
            "tool" => Message::Tool {
                fields,
                tool_call_id,
                artifact,
                status,
            },
            "AIMessageChunk" => Message::AiChunk(AiMessageChunk::from_fields(fields)),
            other => return Err(shape(format!("unsupported message type `{other}`"))),
        })
    }
}

impl Serialize for Message {
    fn serialize<S: SerdeSerializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Message::from_value(&v).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stategraph_value::encode;

    fn hex(v: &Value) -> String {
        encode(v).iter().map(|b| format!("{b:02x}")).collect()
    }

    // Bytes Python LangGraph 1.2.22 (langchain-core 1.7.2) wrote for the same messages.
    const HUMAN: &str = "c7890594bd6c616e67636861696e5f636f72652e6d657373616765732e68756d616eac48756d616e4d65737361676586a7636f6e74656e74a26869b16164646974696f6e616c5f6b776172677380b1726573706f6e73655f6d6574616461746180a474797065a568756d616ea46e616d65c0a26964a26831b36d6f64656c5f76616c69646174655f6a736f6e";
    const AI: &str = "c7e00594ba6c616e67636861696e5f636f72652e6d657373616765732e6169a941494d65737361676589a7636f6e74656e74a0b16164646974696f6e616c5f6b776172677380b1726573706f6e73655f6d6574616461746180a474797065a26169a46e616d65c0a26964a461692d31aa746f6f6c5f63616c6c739184a46e616d65a6736561726368a46172677381a171a178a26964a663616c6c5f31a474797065a9746f6f6c5f63616c6cb2696e76616c69645f746f6f6c5f63616c6c7390ae75736167655f6d65746164617461c0b36d6f64656c5f76616c69646174655f6a736f6e";
    const TOOL: &str = "c7bb0594bc6c616e67636861696e5f636f72652e6d657373616765732e746f6f6cab546f6f6c4d65737361676589a7636f6e74656e74a6726573756c74b16164646974696f6e616c5f6b776172677380b1726573706f6e73655f6d6574616461746180a474797065a4746f6f6ca46e616d65c0a26964a6746f6f6c2d31ac746f6f6c5f63616c6c5f6964a663616c6c5f31a86172746966616374c0a6737461747573a773756363657373b36d6f64656c5f76616c69646174655f6a736f6e";
    const SYSTEM: &str = "c7950594be6c616e67636861696e5f636f72652e6d657373616765732e73797374656dad53797374656d4d65737361676586a7636f6e74656e74a86265206272696566b16164646974696f6e616c5f6b776172677380b1726573706f6e73655f6d6574616461746180a474797065a673797374656da46e616d65c0a26964a57379732d31b36d6f64656c5f76616c69646174655f6a736f6e";

    #[test]
    fn bytes_match_python() {
        let call = ToolCall {
            name: "search".into(),
            args: stategraph_value::value!({"q": "x"}),
            id: Some("call_1".into()),
        };
        let cases = [
            (Message::human("hi").with_id("h1"), HUMAN),
            (Message::ai("", vec![call]).with_id("ai-1"), AI),
            (Message::tool("result", "call_1").with_id("tool-1"), TOOL),
            (Message::system("be brief").with_id("sys-1"), SYSTEM),
        ];
        for (m, want) in cases {
            assert_eq!(hex(&m.to_value()), want, "{m:?}");
            let back = Message::from_value(&m.to_value()).unwrap();
            assert_eq!(back, m);
        }
    }

    #[test]
    fn unknown_fields_survive() {
        let mut v = Message::human("hi").to_value();
        if let Value::Ext(e) = &v {
            let mut obj = e.py_object().unwrap().unwrap();
            if let Value::Map(m) = &mut obj.data {
                m.insert("example", false);
            }
            v = Value::Ext(Ext::from_py_object(ExtCode::PydanticV2, &obj));
        }
        let m = Message::from_value(&v).unwrap();
        assert_eq!(m.to_value(), v);
    }
}
