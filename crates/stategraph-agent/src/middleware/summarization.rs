//! `SummarizationMiddleware`: when the conversation grows past a threshold, the older part
//! is replaced by a summary a model writes, keeping the most recent messages (and never
//! splitting a tool call from its answers).

use std::sync::Arc;

use stategraph_checkpoint::{Map, Value};
use stategraph_graph::{NodeContext, NodeError};
use stategraph_messages::Message;

use crate::agent::{AgentState, AgentUpdate, HookResult, Hooks, Middleware};
use crate::model::{ChatModel, ChatRequest};

/// An amount of conversation: a number of messages, or of (approximate) tokens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ContextSize {
    /// This many messages.
    Messages(usize),
    /// This many tokens.
    Tokens(usize),
}

/// The prompt the summary is asked with; `{messages}` is replaced by the conversation.
const DEFAULT_PROMPT: &str = "Summarize the conversation below so that it can replace it. \
Keep the user's goal, every fact, decision, name, number and tool result that later turns may \
need, and what remains to be done; leave out greetings and repetition. Write plain prose, at \
most a few paragraphs.\n\n<messages>\n{messages}\n</messages>";

/// LangChain's approximate token count (`count_tokens_approximately`): four characters a
/// token, plus three tokens a message, counting text content, tool calls' JSON and names.
pub fn count_tokens_approximately(messages: &[Message]) -> usize {
    let mut tokens = 0.0f64;
    for m in messages {
        let f = m.fields();
        let mut chars = match &f.content {
            Value::Str(s) => s.chars().count(),
            Value::List(blocks) => blocks
                .iter()
                .map(|b| match b {
                    Value::Str(s) => s.chars().count(),
                    Value::Map(m) => m.get("text").and_then(Value::as_str).map_or_else(
                        || b.to_json().to_string().chars().count(),
                        |t| t.chars().count(),
                    ),
                    other => other.to_string().chars().count(),
                })
                .sum(),
            _ => 0,
        };
        if let Message::Ai { tool_calls, .. } = m
            && !tool_calls.is_empty()
        {
            let calls: Vec<serde_json::Value> =
                tool_calls.iter().map(|c| c.to_value().to_json()).collect();
            chars += serde_json::Value::from(calls).to_string().chars().count();
        }
        if let Message::Tool { tool_call_id, .. } = m {
            chars += tool_call_id.chars().count();
        }
        if let Some(name) = &f.name {
            chars += name.chars().count();
        }
        #[allow(
            clippy::cast_precision_loss,
            reason = "character counts of a conversation"
        )]
        let t = (chars as f64 / 4.0).ceil() + 3.0;
        tokens += t;
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a non-negative count"
    )]
    let n = tokens.ceil() as usize;
    n
}

/// LangChain's `SummarizationMiddleware`: before each model call, when any trigger is met
/// (a number of messages, or of approximate tokens), the messages before the last `keep`
/// are summarized by `model` and the conversation becomes `RemoveMessage(__remove_all__)`,
/// a human message `"Here is a summary of the conversation to date:\n\n{summary}"` (with
/// `additional_kwargs.lc_source = "summarization"`) and the kept messages. With no
/// trigger it never summarizes. The summary model's answer is not streamed.
#[derive(Clone)]
pub struct SummarizationMiddleware {
    model: Arc<dyn ChatModel>,
    triggers: Vec<ContextSize>,
    keep: ContextSize,
    prompt: String,
}

impl std::fmt::Debug for SummarizationMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SummarizationMiddleware")
            .field("model", &self.model.name())
            .field("triggers", &self.triggers)
            .field("keep", &self.keep)
            .finish_non_exhaustive()
    }
}

impl SummarizationMiddleware {
    /// Summarizes with `model`, keeping the last 20 messages, once a trigger is set.
    pub fn new(model: impl ChatModel + 'static) -> Self {
        Self {
            model: Arc::new(model),
            triggers: Vec::new(),
            keep: ContextSize::Messages(20),
            prompt: DEFAULT_PROMPT.to_owned(),
        }
    }

    /// Summarizes when the conversation reaches `size` (several triggers: any of them).
    pub fn trigger(mut self, size: ContextSize) -> Self {
        self.triggers.push(size);
        self
    }

    /// How much of the conversation's end is kept as it is.
    pub fn keep(mut self, size: ContextSize) -> Self {
        self.keep = size;
        self
    }

    /// The prompt; `{messages}` is replaced by the conversation to summarize.
    pub fn prompt(mut self, prompt: impl Into<String>) -> Self {
        self.prompt = prompt.into();
        self
    }

    fn validate(&self) -> Result<(), NodeError> {
        for size in self.triggers.iter().chain(std::iter::once(&self.keep)) {
            let (param, v) = match size {
                ContextSize::Messages(n) => ("messages", *n),
                ContextSize::Tokens(n) => ("tokens", *n),
            };
            if v == 0 && !std::ptr::eq(size, &self.keep) {
                return Err(super::value_error(&format!(
                    "{param} thresholds must be greater than 0, got {v}."
                )));
            }
        }
        Ok(())
    }

    fn should_summarize(&self, messages: &[Message], tokens: usize) -> bool {
        self.triggers.iter().any(|t| match t {
            ContextSize::Messages(n) => messages.len() >= *n,
            ContextSize::Tokens(n) => tokens >= *n,
        })
    }

    fn cutoff(&self, messages: &[Message]) -> usize {
        match self.keep {
            ContextSize::Messages(keep) => {
                if messages.len() <= keep {
                    return 0;
                }
                safe_cutoff(messages, messages.len() - keep)
            }
            ContextSize::Tokens(budget) => {
                // The smallest suffix within the budget.
                let mut start = messages.len();
                while start > 0
                    && count_tokens_approximately(messages.get(start - 1..).unwrap_or_default())
                        <= budget
                {
                    start -= 1;
                }
                safe_cutoff(messages, start)
            }
        }
    }

    async fn summary(&self, messages: &[Message]) -> Result<String, NodeError> {
        if messages.is_empty() {
            return Ok("No previous conversation history.".to_owned());
        }
        let text = buffer_string(messages);
        let prompt = self.prompt.replace("{messages}", &text);
        let request = ChatRequest::new([Message::human(prompt.trim_end())]);
        let answer = self.model.invoke(&request).await.map_err(NodeError::from)?;
        Ok(message_text(&answer).trim().to_owned())
    }
}

/// The text of a message's content (text blocks joined).
fn message_text(m: &Message) -> String {
    match &m.fields().content {
        Value::Str(s) => s.to_string(),
        Value::List(blocks) => blocks
            .iter()
            .filter_map(|b| match b {
                Value::Str(s) => Some(s.to_string()),
                Value::Map(m) if m.get("type").and_then(Value::as_str) == Some("text") => {
                    m.get("text").and_then(Value::as_str).map(str::to_owned)
                }
                _ => None,
            })
            .collect(),
        _ => String::new(),
    }
}

/// The conversation as text for the summary prompt, one XML element per message.
fn buffer_string(messages: &[Message]) -> String {
    let mut out = Vec::with_capacity(messages.len());
    for m in messages {
        let role = match m {
            Message::Human(_) => "human",
            Message::Ai { .. } | Message::AiChunk(_) => "ai",
            Message::Tool { .. } => "tool",
            Message::System(_) => "system",
            _ => "message",
        };
        let mut text = message_text(m);
        if let Message::Ai { tool_calls, .. } = m {
            for c in tool_calls {
                text.push_str(&format!(
                    "\n<tool_call name=\"{}\">{}</tool_call>",
                    c.name,
                    c.args.to_json()
                ));
            }
        }
        out.push(format!("<{role}>{text}</{role}>"));
    }
    out.join("\n")
}

/// LangChain's `_find_safe_cutoff_point`: a cutoff on a tool message moves back to the AI
/// message that called it (or, failing that, past the tool messages).
fn safe_cutoff(messages: &[Message], cutoff: usize) -> usize {
    let is_tool = |i: usize| matches!(messages.get(i), Some(Message::Tool { .. }));
    if !is_tool(cutoff) {
        return cutoff;
    }
    let mut ids = std::collections::HashSet::new();
    let mut idx = cutoff;
    while let Some(Message::Tool { tool_call_id, .. }) = messages.get(idx) {
        if !tool_call_id.is_empty() {
            ids.insert(tool_call_id.as_str());
        }
        idx += 1;
    }
    for i in (0..cutoff).rev() {
        if let Some(Message::Ai { tool_calls, .. }) = messages.get(i)
            && tool_calls
                .iter()
                .any(|c| c.id.as_deref().is_some_and(|id| ids.contains(id)))
        {
            return i;
        }
    }
    idx
}

#[async_trait::async_trait]
impl Middleware for SummarizationMiddleware {
    fn name(&self) -> String {
        "SummarizationMiddleware".to_owned()
    }

    fn hooks(&self) -> Hooks {
        Hooks::new().before_model([])
    }

    async fn before_model(&self, state: &AgentState, _ctx: &NodeContext) -> HookResult {
        self.validate()?;
        let mut messages = state.messages.clone();
        for m in &mut messages {
            if m.fields().id.is_none() {
                *m = m.clone().with_id(stategraph_checkpoint::uuid4());
            }
        }
        let tokens = count_tokens_approximately(&messages);
        if !self.should_summarize(&messages, tokens) {
            return Ok(None);
        }
        let cutoff = self.cutoff(&messages);
        if cutoff == 0 {
            return Ok(None);
        }
        let (old, kept) = messages.split_at(cutoff.min(messages.len()));
        let summary = self.summary(old).await?;
        let mut note = Message::human(format!(
            "Here is a summary of the conversation to date:\n\n{summary}"
        ));
        if let Message::Human(f) = &mut note {
            let mut kwargs = Map::new();
            kwargs.insert("lc_source", "summarization");
            f.additional_kwargs = kwargs;
        }
        let mut out = vec![Message::remove_all(), note];
        out.extend(kept.iter().cloned());
        Ok(Some(AgentUpdate::new().messages(out)))
    }
}
