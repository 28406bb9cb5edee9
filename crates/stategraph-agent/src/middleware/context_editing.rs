//! `ContextEditingMiddleware` with `ClearToolUsesEdit`: when the conversation sent to the
//! model grows past a token threshold, older tool results are replaced by a placeholder —
//! in what the model is sent, never in the state.

use stategraph_checkpoint::{Map, Value};
use stategraph_graph::NodeError;
use stategraph_messages::Message;

use super::summarization::count_tokens_approximately;
use crate::agent::{Hooks, Middleware, ModelHandler, ModelRequest, ModelResponse};

/// LangChain's `ClearToolUsesEdit`: above `trigger` tokens, the results of all but the last
/// `keep` tool calls become `placeholder` (until `clear_at_least` tokens are reclaimed,
/// when that is more than 0), except those of `exclude_tools`.
#[derive(Clone, Debug, PartialEq)]
pub struct ClearToolUsesEdit {
    /// The token count above which results are cleared.
    pub trigger: usize,
    /// Tokens to reclaim at least (0: clear every candidate).
    pub clear_at_least: usize,
    /// The most recent results kept.
    pub keep: usize,
    /// Whether the cleared calls' arguments are cleared too.
    pub clear_tool_inputs: bool,
    /// Tools whose results are never cleared.
    pub exclude_tools: Vec<String>,
    /// What a cleared result says.
    pub placeholder: String,
}

impl Default for ClearToolUsesEdit {
    fn default() -> Self {
        Self {
            trigger: 100_000,
            clear_at_least: 0,
            keep: 3,
            clear_tool_inputs: false,
            exclude_tools: Vec::new(),
            placeholder: "[cleared]".to_owned(),
        }
    }
}

impl ClearToolUsesEdit {
    fn apply(&self, messages: &mut [Message], count: impl Fn(&[Message]) -> usize) {
        let tokens = count(messages);
        if tokens <= self.trigger {
            return;
        }
        let tool_positions: Vec<usize> = messages
            .iter()
            .enumerate()
            .filter(|(_, m)| matches!(m, Message::Tool { .. }))
            .map(|(i, _)| i)
            .collect();
        let candidates = tool_positions.len().saturating_sub(self.keep);
        let mut reclaimed = 0usize;
        for &i in tool_positions.iter().take(candidates) {
            let Some(Message::Tool {
                fields,
                tool_call_id,
                ..
            }) = messages.get(i)
            else {
                continue;
            };
            let cleared = fields
                .response_metadata
                .get("context_editing")
                .and_then(Value::as_map)
                .and_then(|m| m.get("cleared"))
                == Some(&Value::Bool(true));
            if cleared {
                continue;
            }
            let call_id = tool_call_id.clone();
            let owner = messages
                .get(..i)
                .unwrap_or_default()
                .iter()
                .rposition(|m| match m {
                    Message::Ai { tool_calls, .. } => tool_calls
                        .iter()
                        .any(|c| c.id.as_deref() == Some(call_id.as_str())),
                    _ => false,
                });
            let Some(owner) = owner else { continue };
            let name = messages
                .get(owner)
                .and_then(|m| match m {
                    Message::Ai { tool_calls, .. } => tool_calls
                        .iter()
                        .find(|c| c.id.as_deref() == Some(call_id.as_str()))
                        .map(|c| c.name.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            if self.exclude_tools.contains(&name) {
                continue;
            }
            let before = messages
                .get(i)
                .map_or(0, |m| count(std::slice::from_ref(m)));
            if let Some(Message::Tool {
                fields, artifact, ..
            }) = messages.get_mut(i)
            {
                fields.content = Value::from(self.placeholder.as_str());
                *artifact = Value::Null;
                let mut note = Map::new();
                note.insert("cleared", true);
                note.insert("strategy", "clear_tool_uses");
                fields
                    .response_metadata
                    .insert("context_editing", Value::Map(note));
            }
            if self.clear_tool_inputs
                && let Some(Message::Ai {
                    fields, tool_calls, ..
                }) = messages.get_mut(owner)
            {
                for c in tool_calls.iter_mut() {
                    if c.id.as_deref() == Some(call_id.as_str()) {
                        c.args = Value::Map(Map::new());
                    }
                }
                let mut ids: Vec<String> = fields
                    .response_metadata
                    .get("context_editing")
                    .and_then(Value::as_map)
                    .and_then(|m| m.get("cleared_tool_inputs"))
                    .and_then(Value::as_list)
                    .map(|l| {
                        l.iter()
                            .filter_map(|v| v.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                if !ids.contains(&call_id) {
                    ids.push(call_id.clone());
                }
                ids.sort();
                let mut note = Map::new();
                note.insert(
                    "cleared_tool_inputs",
                    Value::from(ids.into_iter().map(Value::from).collect::<Vec<_>>()),
                );
                fields
                    .response_metadata
                    .insert("context_editing", Value::Map(note));
            }
            let after = messages
                .get(i)
                .map_or(0, |m| count(std::slice::from_ref(m)));
            reclaimed += before.saturating_sub(after);
            if self.clear_at_least > 0 && reclaimed >= self.clear_at_least {
                break;
            }
        }
    }
}

/// LangChain's `ContextEditingMiddleware`: applies its edits ([`ClearToolUsesEdit`] by
/// default) to a copy of the conversation before each model call; the state keeps every
/// message as it was.
#[derive(Clone, Debug)]
pub struct ContextEditingMiddleware {
    edits: Vec<ClearToolUsesEdit>,
}

impl Default for ContextEditingMiddleware {
    fn default() -> Self {
        Self::new()
    }
}

impl ContextEditingMiddleware {
    /// One [`ClearToolUsesEdit`] with LangChain's defaults.
    pub fn new() -> Self {
        Self {
            edits: vec![ClearToolUsesEdit::default()],
        }
    }

    /// These edits instead, applied in order.
    pub fn edits(mut self, edits: impl IntoIterator<Item = ClearToolUsesEdit>) -> Self {
        self.edits = edits.into_iter().collect();
        self
    }
}

#[async_trait::async_trait]
impl Middleware for ContextEditingMiddleware {
    fn name(&self) -> String {
        "ContextEditingMiddleware".to_owned()
    }

    fn hooks(&self) -> Hooks {
        Hooks::new().wrap_model_call()
    }

    async fn wrap_model_call(
        &self,
        mut request: ModelRequest,
        handler: &ModelHandler<'_>,
    ) -> Result<ModelResponse, NodeError> {
        let system: Vec<Message> = request.system_message.iter().cloned().collect();
        for edit in &self.edits {
            let system = system.clone();
            edit.apply(&mut request.messages, |msgs: &[Message]| {
                let mut all = system.clone();
                all.extend(msgs.iter().cloned());
                count_tokens_approximately(&all)
            });
        }
        handler.call(request).await
    }
}
