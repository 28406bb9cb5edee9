//! The middleware LangChain ships for `create_agent`, with its semantics and texts: a
//! person approving tool calls, summarizing a long conversation, limits on model and tool
//! calls, falling back to other models, retrying failed calls, and editing what the model
//! is sent.

mod context_editing;
mod hitl;
mod limits;
mod retry;
mod summarization;

pub use context_editing::{ClearToolUsesEdit, ContextEditingMiddleware};
pub use hitl::{Decision, DecisionKind, DescribeFn, HumanInTheLoopMiddleware, InterruptOnConfig};
pub use limits::{
    CallLimitExceeded, ExitBehavior, ModelCallLimitMiddleware, ToolCallLimitMiddleware,
};
pub use retry::{
    Backoff, ModelFallbackMiddleware, ModelRetryMiddleware, OnFailure, ToolRetryMiddleware,
};
pub use summarization::{ContextSize, SummarizationMiddleware, count_tokens_approximately};

use stategraph_graph::NodeError;

/// A `ValueError` as Python stores it (`ValueError('…')`), for the errors LangChain raises
/// as such.
pub(crate) fn value_error(message: &str) -> NodeError {
    NodeError::from_repr(format!(
        "ValueError({})",
        stategraph_value::py::repr_str(message)
    ))
}
