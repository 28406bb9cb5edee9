//! `ModelCallLimitMiddleware` and `ToolCallLimitMiddleware`: caps on how many times an
//! agent calls its model, or its tools, per thread and per run.

use stategraph_checkpoint::{Map, Value};
use stategraph_graph::{ChannelSpec, NodeContext, NodeError};
use stategraph_messages::{Message, ToolCall};

use crate::agent::{AgentState, AgentUpdate, HookResult, Hooks, Jump, Middleware, StateKey};

/// What happens when a limit is reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ExitBehavior {
    /// The agent stops with an AI message saying which limit was hit (the default of the
    /// model-call limit).
    #[default]
    End,
    /// The run fails.
    Error,
    /// Blocked tool calls are answered with an error and the agent goes on (tool-call limit
    /// only; its default).
    Continue,
}

/// The error of a limit with [`ExitBehavior::Error`].
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct CallLimitExceeded {
    message: String,
}

fn int(state: &AgentState, key: &str) -> i64 {
    state.get(key).and_then(Value::as_i64).unwrap_or(0)
}

/// LangChain's `ModelCallLimitMiddleware`: before each model call, if the thread has
/// called the model `thread_limit` times (or this run `run_limit` times), the agent ends
/// with `"Model call limits exceeded: …"` (or fails, with [`ExitBehavior::Error`]). The
/// thread's count is checkpointed; the run's is not (it restarts with each run).
#[derive(Clone, Debug, Default)]
pub struct ModelCallLimitMiddleware {
    thread_limit: Option<i64>,
    run_limit: Option<i64>,
    exit_behavior: ExitBehavior,
}

const THREAD_MODEL: &str = "thread_model_call_count";
const RUN_MODEL: &str = "run_model_call_count";

impl ModelCallLimitMiddleware {
    /// No limit yet: set one with [`thread_limit`](Self::thread_limit) or
    /// [`run_limit`](Self::run_limit).
    pub fn new() -> Self {
        Self::default()
    }

    /// At most `n` model calls per thread.
    pub fn thread_limit(mut self, n: i64) -> Self {
        self.thread_limit = Some(n);
        self
    }

    /// At most `n` model calls per run.
    pub fn run_limit(mut self, n: i64) -> Self {
        self.run_limit = Some(n);
        self
    }

    /// [`ExitBehavior::End`] (default) or [`ExitBehavior::Error`].
    pub fn exit_behavior(mut self, b: ExitBehavior) -> Self {
        self.exit_behavior = b;
        self
    }
}

#[async_trait::async_trait]
impl Middleware for ModelCallLimitMiddleware {
    fn name(&self) -> String {
        "ModelCallLimitMiddleware".to_owned()
    }

    fn hooks(&self) -> Hooks {
        Hooks::new().before_model([Jump::End]).after_model([])
    }

    fn state_keys(&self) -> Vec<StateKey> {
        vec![
            StateKey::private(THREAD_MODEL, ChannelSpec::LastValue),
            StateKey::private(RUN_MODEL, ChannelSpec::Untracked { guard: true }),
        ]
    }

    async fn before_model(&self, state: &AgentState, _ctx: &NodeContext) -> HookResult {
        if self.thread_limit.is_none() && self.run_limit.is_none() {
            return Err(super::value_error(
                "At least one limit must be specified (thread_limit or run_limit)",
            ));
        }
        let thread = int(state, THREAD_MODEL);
        let run = int(state, RUN_MODEL);
        let mut hit = Vec::new();
        if let Some(l) = self.thread_limit.filter(|l| thread >= *l) {
            hit.push(format!("thread limit ({thread}/{l})"));
        }
        if let Some(l) = self.run_limit.filter(|l| run >= *l) {
            hit.push(format!("run limit ({run}/{l})"));
        }
        if hit.is_empty() {
            return Ok(None);
        }
        let message = format!("Model call limits exceeded: {}", hit.join(", "));
        if self.exit_behavior == ExitBehavior::Error {
            return Err(NodeError::from(CallLimitExceeded { message }));
        }
        Ok(Some(
            AgentUpdate::new()
                .jump_to(Jump::End)
                .messages([Message::ai(message, Vec::new())]),
        ))
    }

    async fn after_model(&self, state: &AgentState, _ctx: &NodeContext) -> HookResult {
        Ok(Some(
            AgentUpdate::new()
                .set(THREAD_MODEL, int(state, THREAD_MODEL) + 1)
                .set(RUN_MODEL, int(state, RUN_MODEL) + 1),
        ))
    }
}

/// LangChain's `ToolCallLimitMiddleware`: after each model answer, calls beyond the limit
/// (of one tool, or of all) are blocked. With [`ExitBehavior::Continue`] (default) each
/// blocked call is answered `"Tool call limit exceeded. …"` and the others run; with
/// [`ExitBehavior::End`] no call of the answer runs and the agent ends with an AI message
/// saying which limit was hit; with [`ExitBehavior::Error`] the run fails.
#[derive(Clone, Debug)]
pub struct ToolCallLimitMiddleware {
    tool_name: Option<String>,
    thread_limit: Option<i64>,
    run_limit: Option<i64>,
    exit_behavior: ExitBehavior,
}

const THREAD_TOOL: &str = "thread_tool_call_count";
const RUN_TOOL: &str = "run_tool_call_count";

impl Default for ToolCallLimitMiddleware {
    fn default() -> Self {
        Self::new()
    }
}

impl ToolCallLimitMiddleware {
    /// A limit on every tool's calls (set it with [`thread_limit`](Self::thread_limit) or
    /// [`run_limit`](Self::run_limit)).
    pub fn new() -> Self {
        Self {
            tool_name: None,
            thread_limit: None,
            run_limit: None,
            exit_behavior: ExitBehavior::Continue,
        }
    }

    /// A limit on the calls of one tool (named `ToolCallLimitMiddleware[tool]`).
    pub fn for_tool(tool: impl Into<String>) -> Self {
        Self {
            tool_name: Some(tool.into()),
            ..Self::new()
        }
    }

    /// At most `n` calls per thread.
    pub fn thread_limit(mut self, n: i64) -> Self {
        self.thread_limit = Some(n);
        self
    }

    /// At most `n` calls per run.
    pub fn run_limit(mut self, n: i64) -> Self {
        self.run_limit = Some(n);
        self
    }

    /// What reaching the limit does.
    pub fn exit_behavior(mut self, b: ExitBehavior) -> Self {
        self.exit_behavior = b;
        self
    }

    fn check(&self) -> Result<(), NodeError> {
        match (self.thread_limit, self.run_limit) {
            (None, None) => Err(super::value_error(
                "At least one limit must be specified (thread_limit or run_limit)",
            )),
            (Some(t), Some(r)) if r > t => Err(super::value_error(&format!(
                "run_limit ({r}) cannot exceed thread_limit ({t}). The run limit should be \
                 less than or equal to the thread limit."
            ))),
            _ => Ok(()),
        }
    }

    fn exceeds(&self, thread: i64, run: i64) -> bool {
        self.thread_limit.is_some_and(|l| thread + 1 > l)
            || self.run_limit.is_some_and(|l| run + 1 > l)
    }

    fn final_text(&self, thread: i64, run: i64) -> String {
        let what = match &self.tool_name {
            Some(t) => format!("'{t}' tool"),
            None => "Tool".to_owned(),
        };
        let mut parts = Vec::new();
        if let Some(l) = self.thread_limit.filter(|l| thread > *l) {
            parts.push(format!("thread limit exceeded ({thread}/{l} calls)"));
        }
        if let Some(l) = self.run_limit.filter(|l| run > *l) {
            parts.push(format!("run limit exceeded ({run}/{l} calls)"));
        }
        format!("{what} call limit reached: {}.", parts.join(" and "))
    }
}

fn error_reply(call: &ToolCall, text: &str) -> Message {
    let mut m = Message::tool(text, call.id.clone().unwrap_or_default());
    if let Message::Tool { fields, status, .. } = &mut m {
        fields.name = Some(call.name.clone());
        *status = "error".to_owned();
    }
    m
}

#[async_trait::async_trait]
impl Middleware for ToolCallLimitMiddleware {
    fn name(&self) -> String {
        match &self.tool_name {
            Some(t) => format!("ToolCallLimitMiddleware[{t}]"),
            None => "ToolCallLimitMiddleware".to_owned(),
        }
    }

    fn hooks(&self) -> Hooks {
        Hooks::new().after_model([Jump::End])
    }

    fn state_keys(&self) -> Vec<StateKey> {
        vec![
            StateKey::private(THREAD_TOOL, ChannelSpec::LastValue),
            StateKey::private(RUN_TOOL, ChannelSpec::Untracked { guard: true }),
        ]
    }

    async fn after_model(&self, state: &AgentState, _ctx: &NodeContext) -> HookResult {
        self.check()?;
        let Some(Message::Ai { tool_calls, .. }) = state.last_ai() else {
            return Ok(None);
        };
        if tool_calls.is_empty() {
            return Ok(None);
        }
        let key = self.tool_name.as_deref().unwrap_or("__all__");
        let counts = |k: &str| {
            state
                .get(k)
                .and_then(Value::as_map)
                .cloned()
                .unwrap_or_default()
        };
        let mut thread_counts = counts(THREAD_TOOL);
        let mut run_counts = counts(RUN_TOOL);
        let current_thread = thread_counts.get(key).and_then(Value::as_i64).unwrap_or(0);
        let current_run = run_counts.get(key).and_then(Value::as_i64).unwrap_or(0);
        let (mut thread, mut run) = (current_thread, current_run);
        let mut allowed = 0;
        let mut blocked: Vec<&ToolCall> = Vec::new();
        for call in tool_calls {
            if self.tool_name.as_ref().is_some_and(|t| *t != call.name) {
                continue;
            }
            if self.exceeds(thread, run) {
                blocked.push(call);
            } else {
                allowed += 1;
                thread += 1;
                run += 1;
            }
        }
        let blocked_n = i64::try_from(blocked.len()).unwrap_or(i64::MAX);
        thread_counts.insert(key, thread);
        run_counts.insert(key, run + blocked_n);
        let counts_update = |t: &Map, r: &Map| {
            AgentUpdate::new()
                .set(THREAD_TOOL, Value::Map(t.clone()))
                .set(RUN_TOOL, Value::Map(r.clone()))
        };
        if blocked.is_empty() {
            return Ok((allowed > 0).then(|| counts_update(&thread_counts, &run_counts)));
        }
        let final_run = run + blocked_n;
        if self.exit_behavior == ExitBehavior::Error {
            return Err(NodeError::from(CallLimitExceeded {
                message: self.final_text(thread + blocked_n, final_run),
            }));
        }
        let text = match &self.tool_name {
            Some(t) => format!("Tool call limit exceeded. Do not call '{t}' again."),
            None => "Tool call limit exceeded. Do not make additional tool calls.".to_owned(),
        };
        let mut messages: Vec<Message> = blocked.iter().map(|c| error_reply(c, &text)).collect();
        if self.exit_behavior == ExitBehavior::End {
            let blocked_ids: Vec<&Option<String>> = blocked.iter().map(|c| &c.id).collect();
            messages.extend(tool_calls.iter().filter(|c| !blocked_ids.contains(&&c.id)).map(|c| {
                error_reply(
                    c,
                    "Execution stopped before this tool call could run because another tool \
                     call in the same batch exceeded the limit.",
                )
            }));
            messages.push(Message::ai(
                self.final_text(thread + blocked_n, final_run),
                Vec::new(),
            ));
            thread_counts.insert(key, current_thread);
            return Ok(Some(
                counts_update(&thread_counts, &run_counts)
                    .jump_to(Jump::End)
                    .messages(messages),
            ));
        }
        Ok(Some(
            counts_update(&thread_counts, &run_counts).messages(messages),
        ))
    }
}
