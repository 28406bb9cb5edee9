//! Structured output (LangChain's `response_format`): the agent's final answer as data that
//! fits a JSON schema — asked of the model through a tool it must call (`ToolStrategy`) or
//! through the provider's constrained decoding (`ProviderStrategy`).

use std::sync::Arc;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use stategraph_checkpoint::Value;
use stategraph_messages::{Message, ToolCall};

use crate::model::ToolSpec;

/// Checks a candidate answer against the Rust type it must become.
pub type Validator = Arc<dyn Fn(&serde_json::Value) -> Result<(), String> + Send + Sync>;

/// A schema the answer must fit: its name, description and JSON schema, and (for a Rust
/// type) the check that the answer deserializes into it.
#[derive(Clone)]
pub struct OutputSchema {
    /// The schema's name: the tool's name under [`ToolStrategy`].
    pub name: String,
    /// What the answer is, for the model.
    pub description: String,
    /// The JSON schema.
    pub schema: serde_json::Value,
    validate: Option<Validator>,
}

impl std::fmt::Debug for OutputSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputSchema")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("schema", &self.schema)
            .field("typed", &self.validate.is_some())
            .finish()
    }
}

impl PartialEq for OutputSchema {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.schema == other.schema
    }
}

impl OutputSchema {
    /// The schema of a Rust type (`#[derive(Deserialize, JsonSchema)]`): named after the
    /// type, described by its doc comment; an answer counts only if it deserializes into
    /// `T`.
    pub fn of<T: JsonSchema + DeserializeOwned + 'static>() -> Self {
        let mut schema = serde_json::to_value(schemars::schema_for!(T)).unwrap_or_default();
        let text = |schema: &serde_json::Value, key: &str| {
            schema
                .get(key)
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        };
        let name = text(&schema, "title").unwrap_or_else(|| T::schema_name().into_owned());
        let description = text(&schema, "description").unwrap_or_default();
        if let Some(obj) = schema.as_object_mut() {
            obj.remove("$schema");
        }
        let validate: Validator = Arc::new(|v: &serde_json::Value| {
            serde_json::from_value::<T>(v.clone())
                .map(|_| ())
                .map_err(|e| e.to_string())
        });
        Self {
            name,
            description,
            schema,
            validate: Some(validate),
        }
    }

    /// A JSON schema given as data (LangChain's dict schema): named by its `title` (else
    /// `response_format_` and four random hex digits), described by its `description`;
    /// answers are not validated, as LangChain does not validate them.
    pub fn json(schema: serde_json::Value) -> Self {
        let text = |key: &str| {
            schema
                .get(key)
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        };
        let name = text("title").unwrap_or_else(|| {
            let id = stategraph_checkpoint::uuid4();
            format!("response_format_{}", id.get(..4).unwrap_or_default())
        });
        let description = text("description").unwrap_or_default();
        Self {
            name,
            description,
            schema,
            validate: None,
        }
    }

    /// Checks `answer` (for a Rust type: that it deserializes).
    pub fn check(&self, answer: &serde_json::Value) -> Result<(), String> {
        match &self.validate {
            Some(v) => v(answer).map_err(|e| format!("Failed to parse data to {}: {e}", self.name)),
            None => Ok(()),
        }
    }

    /// The structured-output tool the model is offered under [`ToolStrategy`].
    pub fn tool_spec(&self) -> ToolSpec {
        let mut parameters = self.schema.clone();
        if let Some(obj) = parameters.as_object_mut() {
            obj.remove("title");
            obj.remove("description");
        }
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters,
        }
    }
}

/// What the agent does when the model's structured answer does not fit (ToolStrategy's
/// `handle_errors`).
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum HandleErrors {
    /// Tell the model `"Error: {error}\n Please fix your mistakes."` and ask again (the
    /// default).
    #[default]
    Retry,
    /// Tell the model this text and ask again.
    Message(String),
    /// Fail the run.
    Raise,
    /// The function's text for the errors it answers (`None`: fail the run).
    Custom(ErrorTextFn),
}

/// A function answering a malformed structured answer with the text the model gets
/// (`None`: the run fails).
pub type ErrorTextFn = Arc<dyn Fn(&StructuredOutputError) -> Option<String> + Send + Sync>;

impl std::fmt::Debug for HandleErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HandleErrors::Retry => f.write_str("Retry"),
            HandleErrors::Message(m) => f.debug_tuple("Message").field(m).finish(),
            HandleErrors::Raise => f.write_str("Raise"),
            HandleErrors::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// A structured answer that did not come out right.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StructuredOutputError {
    /// The model called more than one structured-output tool.
    #[error(
        "Model incorrectly returned multiple structured responses ({}) when only one is expected.",
        .tools.join(", ")
    )]
    Multiple {
        /// The tools it called.
        tools: Vec<String>,
    },
    /// The answer does not fit the schema.
    #[error("Failed to parse structured output for tool '{tool}': {message}.")]
    Invalid {
        /// The schema (tool) name.
        tool: String,
        /// What did not fit.
        message: String,
    },
}

/// Structured output through a tool the model must call (LangChain's `ToolStrategy`): one
/// tool per schema; the call's arguments are the answer.
#[derive(Clone, Debug)]
pub struct ToolStrategy {
    /// The schemas (several: the model picks one).
    pub schemas: Vec<OutputSchema>,
    /// The tool message answering the structured call (default: `Returning structured
    /// response: {answer}`).
    pub tool_message_content: Option<String>,
    /// What a malformed answer leads to.
    pub handle_errors: HandleErrors,
}

impl ToolStrategy {
    /// The strategy for one schema, retrying malformed answers.
    pub fn new(schema: OutputSchema) -> Self {
        Self {
            schemas: vec![schema],
            tool_message_content: None,
            handle_errors: HandleErrors::default(),
        }
    }

    /// The strategy for a Rust type.
    pub fn of<T: JsonSchema + DeserializeOwned + 'static>() -> Self {
        Self::new(OutputSchema::of::<T>())
    }

    /// The same strategy with another schema the model may choose.
    pub fn or(mut self, schema: OutputSchema) -> Self {
        self.schemas.push(schema);
        self
    }

    /// The same strategy handling errors as `handle` says.
    pub fn handle_errors(mut self, handle: HandleErrors) -> Self {
        self.handle_errors = handle;
        self
    }

    /// The same strategy answering the structured call with `content`.
    pub fn tool_message_content(mut self, content: impl Into<String>) -> Self {
        self.tool_message_content = Some(content.into());
        self
    }

    /// Whether a retry is asked for and with what text (`None`: the error fails the run).
    fn retry_text(&self, e: &StructuredOutputError) -> Option<String> {
        match &self.handle_errors {
            HandleErrors::Retry => Some(format!("Error: {e}\n Please fix your mistakes.")),
            HandleErrors::Message(m) => Some(m.clone()),
            HandleErrors::Raise => None,
            HandleErrors::Custom(f) => f(e),
        }
    }

    /// Reads the model's answer: the messages to add and the structured answer (when it
    /// came and fits). A malformed answer the policy retries adds a tool message saying so.
    pub(crate) fn read(
        &self,
        out: Message,
    ) -> Result<(Vec<Message>, Option<Value>), StructuredOutputError> {
        let Message::Ai { tool_calls, .. } = &out else {
            return Ok((vec![out], None));
        };
        let picked: Vec<&ToolCall> = tool_calls
            .iter()
            .filter(|c| self.schemas.iter().any(|s| s.name == c.name))
            .collect();
        let reply = |call: &ToolCall, text: String| {
            let mut m = Message::tool(text, call.id.clone().unwrap_or_default());
            if let Message::Tool { fields, .. } = &mut m {
                fields.name = Some(call.name.clone());
            }
            m
        };
        match picked.as_slice() {
            [] => Ok((vec![out], None)),
            [call] => {
                let call = (*call).clone();
                let Some(schema) = self.schemas.iter().find(|s| s.name == call.name) else {
                    return Ok((vec![out], None));
                };
                let json = call.args.to_json();
                match schema.check(&json) {
                    Ok(()) => {
                        let text = self.tool_message_content.clone().unwrap_or_else(|| {
                            format!("Returning structured response: {}", crate::py::repr(&json))
                        });
                        let answer = reply(&call, text);
                        Ok((vec![out, answer], Some(call.args)))
                    }
                    Err(message) => {
                        let e = StructuredOutputError::Invalid {
                            tool: call.name.clone(),
                            message,
                        };
                        let text = self.retry_text(&e).ok_or(e)?;
                        let answer = reply(&call, text);
                        Ok((vec![out, answer], None))
                    }
                }
            }
            many => {
                let e = StructuredOutputError::Multiple {
                    tools: many.iter().map(|c| c.name.clone()).collect(),
                };
                let text = self.retry_text(&e).ok_or(e)?;
                let calls: Vec<ToolCall> = many.iter().map(|c| (*c).clone()).collect();
                let mut messages = vec![out];
                messages.extend(calls.iter().map(|c| reply(c, text.clone())));
                Ok((messages, None))
            }
        }
    }
}

/// Structured output through the provider's constrained decoding (LangChain's
/// `ProviderStrategy`): the answer's text is the JSON.
#[derive(Clone, Debug)]
pub struct ProviderStrategy {
    /// The schema.
    pub schema: OutputSchema,
    /// Whether the provider must follow the schema exactly.
    pub strict: Option<bool>,
}

impl ProviderStrategy {
    /// The strategy for a schema.
    pub fn new(schema: OutputSchema) -> Self {
        Self {
            schema,
            strict: None,
        }
    }

    /// The strategy for a Rust type.
    pub fn of<T: JsonSchema + DeserializeOwned + 'static>() -> Self {
        Self::new(OutputSchema::of::<T>())
    }

    /// The format the provider is asked for.
    pub(crate) fn format(&self) -> crate::model::ResponseFormat {
        crate::model::ResponseFormat {
            name: self.schema.name.clone(),
            description: String::new(),
            schema: self.schema.schema.clone(),
            strict: self.strict,
        }
    }

    /// Reads the model's answer: when it calls no tool, its text must be JSON that fits.
    pub(crate) fn read(&self, out: &Message) -> Result<Option<Value>, StructuredOutputError> {
        let Message::Ai {
            tool_calls, fields, ..
        } = out
        else {
            return Ok(None);
        };
        if !tool_calls.is_empty() {
            return Ok(None);
        }
        let text = match &fields.content {
            Value::Str(s) => s.to_string(),
            Value::List(blocks) => blocks
                .iter()
                .filter_map(|b| {
                    let m = b.as_map()?;
                    (m.get("type").and_then(Value::as_str) == Some("text"))
                        .then(|| m.get("text").and_then(Value::as_str).map(str::to_owned))?
                })
                .collect(),
            _ => String::new(),
        };
        let invalid = |message: String| StructuredOutputError::Invalid {
            tool: self.schema.name.clone(),
            message,
        };
        let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            invalid(format!(
                "Native structured output expected valid JSON for {}, but parsing failed: {e}",
                self.schema.name
            ))
        })?;
        self.schema.check(&json).map_err(invalid)?;
        Ok(Some(Value::from(json)))
    }
}

/// How an agent asks for a structured answer (LangChain's `response_format`).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum ResponseFormat {
    /// Through a tool the model must call.
    Tool(ToolStrategy),
    /// Through the provider's constrained decoding.
    Provider(ProviderStrategy),
    /// The provider's when the model supports it
    /// ([`ChatModel::supports_structured_output`](crate::ChatModel::supports_structured_output)),
    /// else a tool (LangChain's `AutoStrategy`).
    Auto(OutputSchema),
}

impl ResponseFormat {
    /// [`Auto`](Self::Auto) for a Rust type.
    pub fn of<T: JsonSchema + DeserializeOwned + 'static>() -> Self {
        ResponseFormat::Auto(OutputSchema::of::<T>())
    }

    /// The tool strategy the agent is built with: the format's own, or the one `Auto` falls
    /// back to.
    pub(crate) fn tool_strategy(&self) -> Option<ToolStrategy> {
        match self {
            ResponseFormat::Tool(t) => Some(t.clone()),
            ResponseFormat::Auto(s) => Some(ToolStrategy::new(s.clone())),
            ResponseFormat::Provider(_) => None,
        }
    }
}

impl From<ToolStrategy> for ResponseFormat {
    fn from(t: ToolStrategy) -> Self {
        ResponseFormat::Tool(t)
    }
}

impl From<ProviderStrategy> for ResponseFormat {
    fn from(p: ProviderStrategy) -> Self {
        ResponseFormat::Provider(p)
    }
}
