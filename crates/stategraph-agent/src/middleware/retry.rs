//! `ModelRetryMiddleware`, `ToolRetryMiddleware` and `ModelFallbackMiddleware`: a failed
//! model or tool call is tried again with backoff, or the model call goes to the next
//! model (another provider too).

use std::sync::Arc;
use std::time::Duration;

use stategraph_graph::NodeError;
use stategraph_messages::Message;

use crate::agent::{
    Hooks, Middleware, ModelHandler, ModelRequest, ModelResponse, ToolCallRequest, ToolHandler,
    ToolResult,
};
use crate::model::ChatModel;

/// The waits between tries: `initial * factor^n`, at most `max`, with ±25 % jitter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    /// The first wait.
    pub initial: Duration,
    /// The growth per try (0: always `initial`).
    pub factor: f64,
    /// The longest wait.
    pub max: Duration,
    /// Whether waits vary by ±25 %.
    pub jitter: bool,
}

impl Default for Backoff {
    /// LangChain's: 1 s, doubling, at most 60 s, with jitter.
    fn default() -> Self {
        Self {
            initial: Duration::from_secs(1),
            factor: 2.0,
            max: Duration::from_secs(60),
            jitter: true,
        }
    }
}

impl Backoff {
    /// The wait after try `n` (0-based).
    pub fn delay(&self, n: u32) -> Duration {
        let base = if self.factor == 0.0 {
            self.initial.as_secs_f64()
        } else {
            self.initial.as_secs_f64() * self.factor.powi(i32::try_from(n).unwrap_or(i32::MAX))
        };
        let mut secs = base.min(self.max.as_secs_f64());
        if self.jitter && secs > 0.0 {
            secs += secs * 0.25 * (fastrand::f64() * 2.0 - 1.0);
        }
        Duration::from_secs_f64(secs.max(0.0))
    }
}

/// What happens when the tries run out.
#[derive(Clone, Default)]
pub enum OnFailure {
    /// The agent goes on with a message saying what failed (the default).
    #[default]
    Continue,
    /// The run fails with the last error.
    Error,
    /// The agent goes on with this function's text.
    Message(Arc<dyn Fn(&NodeError) -> String + Send + Sync>),
}

impl std::fmt::Debug for OnFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OnFailure::Continue => "Continue",
            OnFailure::Error => "Error",
            OnFailure::Message(_) => "Message(..)",
        })
    }
}

/// The error's type and text as LangChain's messages show them: `Type: text` from a stored
/// `Type('text')`.
fn describe(e: &NodeError) -> (String, String) {
    let m = &e.message;
    if let Some(open) = m.find('(')
        && m.ends_with(')')
    {
        let kind = m.get(..open).unwrap_or_default().to_owned();
        let inner = m.get(open + 1..m.len() - 1).unwrap_or_default();
        let text = inner
            .strip_prefix('\'')
            .and_then(|s| s.strip_suffix('\''))
            .or_else(|| inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')))
            .unwrap_or(inner);
        return (kind, text.to_owned());
    }
    ("Exception".to_owned(), m.clone())
}

fn attempts(n: u32) -> String {
    if n == 1 {
        "1 attempt".to_owned()
    } else {
        format!("{n} attempts")
    }
}

/// Runs `f` up to `retries + 1` times; control flow is passed on at once (as
/// `u32::MAX` tries). Returns the last error with the number of tries.
async fn with_retries<T, F, Fut>(
    retries: u32,
    backoff: Backoff,
    mut f: F,
) -> Result<T, (NodeError, u32)>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, NodeError>>,
{
    let mut n = 0;
    loop {
        match f().await {
            Ok(v) => return Ok(v),
            Err(e) if e.is_control_flow() => return Err((e, u32::MAX)),
            Err(e) if n >= retries => return Err((e, n + 1)),
            Err(_) => {
                tokio::time::sleep(backoff.delay(n)).await;
                n += 1;
            }
        }
    }
}

/// LangChain's `ModelRetryMiddleware`: a failed model call is tried again (2 retries by
/// default, with [`Backoff`]); when the tries run out the agent goes on with an AI message
/// `"Model call failed after N attempts with Type: error"` (or fails, [`OnFailure::Error`]).
#[derive(Clone, Debug, Default)]
pub struct ModelRetryMiddleware {
    max_retries: u32,
    backoff: Backoff,
    on_failure: OnFailure,
}

impl ModelRetryMiddleware {
    /// Two retries, LangChain's backoff, going on after the last failure.
    pub fn new() -> Self {
        Self {
            max_retries: 2,
            ..Self::default()
        }
    }

    /// Retries after the first try.
    pub fn max_retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }

    /// The waits between tries.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// What the last failure leads to.
    pub fn on_failure(mut self, on_failure: OnFailure) -> Self {
        self.on_failure = on_failure;
        self
    }
}

#[async_trait::async_trait]
impl Middleware for ModelRetryMiddleware {
    fn name(&self) -> String {
        "ModelRetryMiddleware".to_owned()
    }

    fn hooks(&self) -> Hooks {
        Hooks::new().wrap_model_call()
    }

    async fn wrap_model_call(
        &self,
        request: ModelRequest,
        handler: &ModelHandler<'_>,
    ) -> Result<ModelResponse, NodeError> {
        let tried = with_retries(self.max_retries, self.backoff, || {
            handler.call(request.clone())
        })
        .await;
        match tried {
            Ok(r) => Ok(r),
            Err((e, u32::MAX)) => Err(e),
            Err((e, n)) => match &self.on_failure {
                OnFailure::Error => Err(e),
                OnFailure::Continue => {
                    let (kind, text) = describe(&e);
                    Ok(ModelResponse::message(Message::ai(
                        format!(
                            "Model call failed after {} with {kind}: {text}",
                            attempts(n)
                        ),
                        Vec::new(),
                    )))
                }
                OnFailure::Message(f) => Ok(ModelResponse::message(Message::ai(f(&e), Vec::new()))),
            },
        }
    }
}

/// LangChain's `ToolRetryMiddleware`: a failed tool call (of the named tools, or any) is
/// tried again; when the tries run out the model gets an error tool message `"Tool 'name'
/// failed after N attempts with Type: error. Please try again."` (or the run fails).
#[derive(Clone, Debug, Default)]
pub struct ToolRetryMiddleware {
    max_retries: u32,
    backoff: Backoff,
    on_failure: OnFailure,
    tools: Option<Vec<String>>,
}

impl ToolRetryMiddleware {
    /// Two retries of every tool, LangChain's backoff, going on after the last failure.
    pub fn new() -> Self {
        Self {
            max_retries: 2,
            ..Self::default()
        }
    }

    /// Retries after the first try.
    pub fn max_retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }

    /// The waits between tries.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// What the last failure leads to.
    pub fn on_failure(mut self, on_failure: OnFailure) -> Self {
        self.on_failure = on_failure;
        self
    }

    /// Retries only these tools.
    pub fn tools<I: IntoIterator<Item = T>, T: Into<String>>(mut self, tools: I) -> Self {
        self.tools = Some(tools.into_iter().map(Into::into).collect());
        self
    }
}

#[async_trait::async_trait]
impl Middleware for ToolRetryMiddleware {
    fn name(&self) -> String {
        "ToolRetryMiddleware".to_owned()
    }

    fn hooks(&self) -> Hooks {
        Hooks::new().wrap_tool_call()
    }

    async fn wrap_tool_call(
        &self,
        request: ToolCallRequest,
        handler: &ToolHandler<'_>,
    ) -> Result<ToolResult, NodeError> {
        if self
            .tools
            .as_ref()
            .is_some_and(|t| !t.contains(&request.call.name))
        {
            return handler.call(request).await;
        }
        let name = request.call.name.clone();
        let id = request.call.id.clone().unwrap_or_default();
        let tried = with_retries(self.max_retries, self.backoff, || {
            handler.call(request.clone())
        })
        .await;
        let text = match tried {
            Ok(r) => return Ok(r),
            Err((e, u32::MAX)) => return Err(e),
            Err((e, n)) => match &self.on_failure {
                OnFailure::Error => return Err(e),
                OnFailure::Continue => {
                    let (kind, text) = describe(&e);
                    format!(
                        "Tool '{name}' failed after {} with {kind}: {text}. Please try again.",
                        attempts(n)
                    )
                }
                OnFailure::Message(f) => f(&e),
            },
        };
        let mut m = Message::tool(text, id);
        if let Message::Tool { fields, status, .. } = &mut m {
            fields.name = Some(name);
            *status = "error".to_owned();
        }
        Ok(ToolResult::Message(m))
    }
}

/// LangChain's `ModelFallbackMiddleware`: when a model call fails, the same request goes
/// to each fallback model in turn (any provider); the last failure fails the run.
#[derive(Clone)]
pub struct ModelFallbackMiddleware {
    models: Vec<Arc<dyn ChatModel>>,
}

impl std::fmt::Debug for ModelFallbackMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.models.iter().map(|m| m.name().to_owned()))
            .finish()
    }
}

impl ModelFallbackMiddleware {
    /// Falls back to `model`.
    pub fn new(model: impl ChatModel + 'static) -> Self {
        Self {
            models: vec![Arc::new(model)],
        }
    }

    /// And then to `model`.
    pub fn then(mut self, model: impl ChatModel + 'static) -> Self {
        self.models.push(Arc::new(model));
        self
    }
}

#[async_trait::async_trait]
impl Middleware for ModelFallbackMiddleware {
    fn name(&self) -> String {
        "ModelFallbackMiddleware".to_owned()
    }

    fn hooks(&self) -> Hooks {
        Hooks::new().wrap_model_call()
    }

    async fn wrap_model_call(
        &self,
        request: ModelRequest,
        handler: &ModelHandler<'_>,
    ) -> Result<ModelResponse, NodeError> {
        let mut last = match handler.call(request.clone()).await {
            Ok(r) => return Ok(r),
            Err(e) if e.is_control_flow() => return Err(e),
            Err(e) => e,
        };
        for model in &self.models {
            let mut next = request.clone();
            next.model = Arc::clone(model);
            match handler.call(next).await {
                Ok(r) => return Ok(r),
                Err(e) if e.is_control_flow() => return Err(e),
                Err(e) => last = e,
            }
        }
        Err(last)
    }
}
