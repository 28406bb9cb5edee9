//! `HumanInTheLoopMiddleware`: a person approves, edits, rejects or answers the model's
//! tool calls before they run, through one interrupt per model answer whose payload is
//! LangChain's (`action_requests`, `review_configs`), so Agent Chat UI shows and answers it.

use std::sync::Arc;

use stategraph_checkpoint::{Map, Value};
use stategraph_graph::{ChannelSpec, NodeContext, NodeError};
use stategraph_messages::{Message, ToolCall};

use super::value_error;
use crate::agent::{
    AgentState, AgentUpdate, HookResult, Hooks, Middleware, StateKey, ToolCallRequest, ToolHandler,
    ToolResult,
};

/// The private state key where edited calls wait for the tools node.
const EDITED: &str = "hitl_edited_tool_calls";

/// The default text put before the result of a call a reviewer edited.
const EDIT_NOTICE: &str = "Note: a human reviewer replaced this tool call before it ran. The \
    call recorded in your message is the one you produced, not the one that executed. This \
    was intentional and authorized. Do not re-issue your original call.";

/// What a reviewer may decide about a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecisionKind {
    /// Run it as it is.
    Approve,
    /// Run another call instead (other arguments, or another tool).
    Edit,
    /// Do not run it; tell the model why.
    Reject,
    /// Do not run it; answer in the tool's place.
    Respond,
}

impl DecisionKind {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionKind::Approve => "approve",
            DecisionKind::Edit => "edit",
            DecisionKind::Reject => "reject",
            DecisionKind::Respond => "respond",
        }
    }
}

/// A reviewer's decision, as resumed (`{"type": "approve"}`, `{"type": "edit",
/// "edited_action": {"name", "args"}}`, `{"type": "reject", "message"?}`, `{"type":
/// "respond", "message"}`).
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Run the call.
    Approve,
    /// Run this call instead.
    Edit {
        /// The tool.
        name: String,
        /// Its arguments.
        args: Value,
    },
    /// Do not run it (the reason, if any, goes to the model).
    Reject(Option<String>),
    /// Do not run it; this is the tool's answer.
    Respond(String),
}

impl Decision {
    /// The value resumed with.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        match self {
            Decision::Approve => m.insert("type", "approve"),
            Decision::Edit { name, args } => {
                m.insert("type", "edit");
                let mut action = Map::new();
                action.insert("name", name.as_str());
                action.insert("args", args.clone());
                m.insert("edited_action", Value::Map(action));
            }
            Decision::Reject(reason) => {
                m.insert("type", "reject");
                if let Some(r) = reason {
                    m.insert("message", r.as_str());
                }
            }
            Decision::Respond(text) => {
                m.insert("type", "respond");
                m.insert("message", text.as_str());
            }
        }
        Value::Map(m)
    }

    /// The answer to one interrupt: `{"decisions": [...]}`.
    pub fn answer(decisions: &[Decision]) -> Value {
        let mut m = Map::new();
        m.insert(
            "decisions",
            Value::from(decisions.iter().map(Decision::to_value).collect::<Vec<_>>()),
        );
        Value::Map(m)
    }
}

/// A function describing a call for the reviewer.
pub type DescribeFn = Arc<dyn Fn(&ToolCall, &AgentState) -> String + Send + Sync>;

/// How one tool's calls are reviewed.
#[derive(Clone)]
pub struct InterruptOnConfig {
    /// The decisions the reviewer may make.
    pub allowed_decisions: Vec<DecisionKind>,
    /// What the reviewer is told (default: the prefix, the tool and its arguments).
    pub description: Option<DescribeFn>,
}

impl std::fmt::Debug for InterruptOnConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterruptOnConfig")
            .field("allowed_decisions", &self.allowed_decisions)
            .field("description", &self.description.as_ref().map(|_| ".."))
            .finish()
    }
}

impl InterruptOnConfig {
    /// Review with these decisions allowed.
    pub fn new(allowed: impl IntoIterator<Item = DecisionKind>) -> Self {
        Self {
            allowed_decisions: allowed.into_iter().collect(),
            description: None,
        }
    }

    /// With a fixed description.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        let text = text.into();
        self.description = Some(Arc::new(move |_, _| text.clone()));
        self
    }

    /// With a description made for each call.
    pub fn describe(
        mut self,
        f: impl Fn(&ToolCall, &AgentState) -> String + Send + Sync + 'static,
    ) -> Self {
        self.description = Some(Arc::new(f));
        self
    }
}

impl From<bool> for InterruptOnConfig {
    /// `true`: every decision allowed (`false` is not reviewed; see
    /// [`HumanInTheLoopMiddleware::interrupt_on`]).
    fn from(on: bool) -> Self {
        if on {
            Self::new([
                DecisionKind::Approve,
                DecisionKind::Edit,
                DecisionKind::Reject,
                DecisionKind::Respond,
            ])
        } else {
            Self::new([])
        }
    }
}

/// LangChain's `HumanInTheLoopMiddleware` (batched): after each model answer, the calls of
/// tools named in [`interrupt_on`](Self::interrupt_on) are put to a reviewer in one
/// interrupt `{"action_requests": [{name, args, description}], "review_configs":
/// [{action_name, allowed_decisions}]}`; the run is resumed with `{"decisions": [...]}`,
/// one per call in order ([`Decision::answer`]). Edited calls run in place of the model's
/// (which stays in its message) and their result says so; rejected and answered calls do
/// not run.
#[derive(Clone, Debug)]
pub struct HumanInTheLoopMiddleware {
    interrupt_on: Vec<(String, InterruptOnConfig)>,
    description_prefix: String,
    edit_notice: Option<String>,
}

impl Default for HumanInTheLoopMiddleware {
    fn default() -> Self {
        Self::new()
    }
}

impl HumanInTheLoopMiddleware {
    /// Reviews nothing until [`interrupt_on`](Self::interrupt_on) names tools.
    pub fn new() -> Self {
        Self {
            interrupt_on: Vec::new(),
            description_prefix: "Tool execution requires approval".to_owned(),
            edit_notice: Some(EDIT_NOTICE.to_owned()),
        }
    }

    /// Reviews the calls of `tool` (`true`: every decision allowed; `false`: not reviewed;
    /// or an [`InterruptOnConfig`]).
    ///
    /// # Panics
    /// Never; a config allowing no decision is not reviewed either.
    pub fn interrupt_on(
        mut self,
        tool: impl Into<String>,
        config: impl Into<InterruptOnConfig>,
    ) -> Self {
        let config = config.into();
        let tool = tool.into();
        self.interrupt_on.retain(|(t, _)| *t != tool);
        if !config.allowed_decisions.is_empty() {
            self.interrupt_on.push((tool, config));
        }
        self
    }

    /// The first line of the default description.
    pub fn description_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.description_prefix = prefix.into();
        self
    }

    /// The text put before an edited call's result (`None`: nothing).
    pub fn edit_notice(mut self, notice: Option<String>) -> Self {
        self.edit_notice = notice;
        self
    }

    fn config(&self, tool: &str) -> Option<&InterruptOnConfig> {
        self.interrupt_on
            .iter()
            .find(|(t, _)| t == tool)
            .map(|(_, c)| c)
    }

    /// The notice for a call run as `name(args)`.
    fn notice(&self, notice: &str, name: &str, args: &Value, has_content: bool) -> String {
        let text = format!(
            "{notice} Executed instead: {name} with arguments {}.",
            crate::py::json_dumps(&args.to_json())
        );
        if has_content {
            format!("{text}\n\nTool response:")
        } else {
            text
        }
    }

    fn annotate(&self, message: &mut Message, name: &str, args: &Value) {
        let Some(notice) = &self.edit_notice else {
            return;
        };
        let fields = match message {
            Message::Tool { fields, .. } => fields,
            _ => return,
        };
        match &fields.content {
            Value::Str(s) => {
                let text = self.notice(notice, name, args, !s.is_empty());
                if s.contains(&text) {
                    return;
                }
                let sep = if s.is_empty() { "" } else { "\n" };
                fields.content = Value::from(format!("{text}{sep}{s}"));
            }
            Value::List(blocks) => {
                let text = self.notice(notice, name, args, !blocks.is_empty());
                if blocks.iter().any(|b| b.to_string().contains(&text)) {
                    return;
                }
                let all_text = !blocks.is_empty() && blocks.iter().all(|b| b.as_str().is_some());
                let first = if all_text {
                    Value::from(text)
                } else {
                    let mut m = Map::new();
                    m.insert("type", "text");
                    m.insert("text", text);
                    Value::Map(m)
                };
                let mut out = vec![first];
                out.extend(blocks.iter().cloned());
                fields.content = Value::from(out);
            }
            _ => {}
        }
    }
}

/// A reviewer's answer message in place of the tool's.
fn answer_message(call: &ToolCall, decision: &Decision) -> Message {
    let id = call.id.clone().unwrap_or_default();
    let (text, status) = match decision {
        Decision::Respond(text) => (text.clone(), "success"),
        Decision::Reject(Some(reason)) if !reason.is_empty() => (
            format!(
                "User rejected the tool call for `{}` with reason: {reason}",
                call.name
            ),
            "error",
        ),
        _ => (
            format!(
                "User rejected the tool call for `{}` with id {id}. The tool was not executed. \
                 Do not retry this tool call unless the user explicitly requests it.",
                call.name
            ),
            "error",
        ),
    };
    let mut m = Message::tool(text, id);
    if let Message::Tool {
        fields, status: s, ..
    } = &mut m
    {
        fields.name = Some(call.name.clone());
        *s = status.to_owned();
    }
    m
}

/// Reads one stored decision.
fn read_decision(v: &Value) -> Result<(DecisionKind, Decision), String> {
    let m = v
        .as_map()
        .ok_or_else(|| format!("a decision must be a map, found {v}"))?;
    let text = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_owned);
    match text("type").as_deref() {
        Some("approve") => Ok((DecisionKind::Approve, Decision::Approve)),
        Some("edit") => {
            let action = m
                .get("edited_action")
                .and_then(Value::as_map)
                .ok_or("an edit decision needs `edited_action`")?;
            let name = action
                .get("name")
                .and_then(Value::as_str)
                .ok_or("an edited action needs a `name`")?
                .to_owned();
            let args = action
                .get("args")
                .cloned()
                .unwrap_or(Value::Map(Map::new()));
            Ok((DecisionKind::Edit, Decision::Edit { name, args }))
        }
        Some("reject") => Ok((DecisionKind::Reject, Decision::Reject(text("message")))),
        Some("respond") => Ok((
            DecisionKind::Respond,
            Decision::Respond(text("message").ok_or("a respond decision needs a `message`")?),
        )),
        _ => Err(format!("unknown decision {v}")),
    }
}

#[async_trait::async_trait]
impl Middleware for HumanInTheLoopMiddleware {
    fn name(&self) -> String {
        "HumanInTheLoopMiddleware".to_owned()
    }

    fn hooks(&self) -> Hooks {
        Hooks::new().after_model([]).wrap_tool_call()
    }

    fn state_keys(&self) -> Vec<StateKey> {
        vec![StateKey::private(EDITED, ChannelSpec::LastValue)]
    }

    async fn after_model(&self, state: &AgentState, ctx: &NodeContext) -> HookResult {
        let Some(ai @ Message::Ai { tool_calls, .. }) = state.last_ai() else {
            return Ok(None);
        };
        if tool_calls.is_empty() {
            return Ok(None);
        }
        let mut actions = Vec::new();
        let mut reviews = Vec::new();
        let mut gated = Vec::new();
        for (i, call) in tool_calls.iter().enumerate() {
            let Some(config) = self.config(&call.name) else {
                continue;
            };
            let description = match &config.description {
                Some(f) => f(call, state),
                None => format!(
                    "{}\n\nTool: {}\nArgs: {}",
                    self.description_prefix,
                    call.name,
                    crate::py::repr(&call.args.to_json())
                ),
            };
            let mut action = Map::new();
            action.insert("name", call.name.as_str());
            action.insert("args", call.args.clone());
            action.insert("description", description);
            actions.push(Value::Map(action));
            let mut review = Map::new();
            review.insert("action_name", call.name.as_str());
            review.insert(
                "allowed_decisions",
                Value::from(
                    config
                        .allowed_decisions
                        .iter()
                        .map(|d| Value::from(d.as_str()))
                        .collect::<Vec<_>>(),
                ),
            );
            reviews.push(Value::Map(review));
            gated.push(i);
        }
        if gated.is_empty() {
            let edits_left = state
                .get(EDITED)
                .and_then(Value::as_map)
                .is_some_and(|m| !m.is_empty());
            return Ok(edits_left.then(|| AgentUpdate::new().set(EDITED, Value::Map(Map::new()))));
        }
        let mut request = Map::new();
        request.insert("action_requests", Value::from(actions));
        request.insert("review_configs", Value::from(reviews));
        let answer = ctx.interrupt(Value::Map(request))?;
        let decisions = answer
            .as_map()
            .and_then(|m| m.get("decisions"))
            .and_then(Value::as_list)
            .ok_or_else(|| {
                value_error(&format!(
                    "The answer to a tool review must be {{\"decisions\": [...]}}, got {answer}"
                ))
            })?;
        if decisions.len() != gated.len() {
            return Err(value_error(&format!(
                "Number of human decisions ({}) does not match number of hanging tool calls ({}).",
                decisions.len(),
                gated.len()
            )));
        }
        let mut answers = Vec::new();
        let mut edited = Map::new();
        for (&i, decision) in gated.iter().zip(decisions.iter()) {
            let Some(call) = tool_calls.get(i) else {
                continue;
            };
            let allowed = self
                .config(&call.name)
                .map(|c| c.allowed_decisions.clone())
                .unwrap_or_default();
            let (kind, parsed) = read_decision(decision).map_err(|e| value_error(&e))?;
            if !allowed.contains(&kind) {
                let names: Vec<&str> = allowed.iter().map(|d| d.as_str()).collect();
                return Err(value_error(&format!(
                    "Unexpected human decision: {decision}. Decision type '{}' is not allowed \
                     for tool '{}'. Expected one of {names:?} based on the tool's configuration.",
                    kind.as_str(),
                    call.name
                )));
            }
            match &parsed {
                Decision::Approve => {}
                Decision::Edit { name, args } => {
                    if let Some(id) = &call.id {
                        let mut action = Map::new();
                        action.insert("name", name.as_str());
                        action.insert("args", args.clone());
                        edited.insert(id.as_str(), Value::Map(action));
                    }
                }
                Decision::Reject(_) | Decision::Respond(_) => {
                    answers.push(answer_message(call, &parsed));
                }
            }
        }
        let mut messages = vec![ai.clone()];
        messages.extend(answers);
        Ok(Some(
            AgentUpdate::new()
                .messages(messages)
                .set(EDITED, Value::Map(edited)),
        ))
    }

    async fn wrap_tool_call(
        &self,
        mut request: ToolCallRequest,
        handler: &ToolHandler<'_>,
    ) -> Result<ToolResult, NodeError> {
        let edit = request
            .call
            .id
            .as_deref()
            .and_then(|id| request.state.get(EDITED)?.as_map()?.get(id).cloned());
        let Some(edit) = edit else {
            return handler.call(request).await;
        };
        let action = edit.as_map().cloned().unwrap_or_default();
        let name = action
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or(&request.call.name)
            .to_owned();
        let args = action
            .get("args")
            .cloned()
            .unwrap_or(Value::Map(Map::new()));
        if name != request.call.name {
            let tool = request.tools.iter().find(|t| t.name() == name).cloned();
            let Some(tool) = tool else {
                let mut names: Vec<&str> = request.tools.iter().map(|t| t.name()).collect();
                names.sort_unstable();
                return Err(value_error(&format!(
                    "Reviewer edited tool call {} to {}, which is not an available tool. \
                     Available tools: {}.",
                    stategraph_value::py::repr_str(request.call.id.as_deref().unwrap_or_default()),
                    stategraph_value::py::repr_str(&name),
                    names.join(", ")
                )));
            };
            request.tool = Some(tool);
        }
        request.call.name.clone_from(&name);
        request.call.args = args.clone();
        let call_id = request.call.id.clone().unwrap_or_default();
        let mut result = handler.call(request).await?;
        match &mut result {
            ToolResult::Message(m) => self.annotate(m, &name, &args),
            // A command carries the tool message in its update.
            ToolResult::Command(c) => {
                c.map_tool_messages(&call_id, |m| self.annotate(m, &name, &args));
            }
        }
        Ok(result)
    }
}
