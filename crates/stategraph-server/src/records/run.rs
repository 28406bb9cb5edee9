//! A run as the API answers it: the run queue's row of it ([`RunRow`]), with LangGraph's
//! field names.

use serde::{Deserialize, Serialize};
use stategraph_runs::{Multitask, RunRow, RunStatus};

use super::{Object, iso};

/// A run, as `GET /threads/{thread_id}/runs/{run_id}` answers it.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = Run)]
pub(crate) struct RunRecord {
    pub(crate) run_id: String,
    pub(crate) thread_id: String,
    #[serde(default)]
    pub(crate) assistant_id: String,
    pub(crate) created_at: String,
    pub(crate) updated_at: String,
    #[schema(value_type = String)]
    pub(crate) status: RunStatus,
    #[serde(default)]
    pub(crate) metadata: Object,
    /// What the run was asked: input, command, config, context, stream modes, … (as
    /// LangGraph's server records them).
    #[serde(default)]
    pub(crate) kwargs: Object,
    #[serde(default)]
    #[schema(value_type = String)]
    pub(crate) multitask_strategy: Multitask,
    /// Always `null` (LangGraph's server names the tracing project here).
    #[serde(default)]
    pub(crate) langsmith_session_name: Option<String>,
}

impl RunRecord {
    /// The run the queue's `row` is.
    pub(crate) fn of(row: &RunRow) -> Self {
        Self {
            run_id: row.run_id.clone(),
            thread_id: row.thread_id.clone(),
            assistant_id: row.assistant_id.clone(),
            created_at: iso(row.created_at),
            updated_at: iso(row.updated_at),
            status: row.status,
            metadata: row.metadata.clone(),
            kwargs: row.kwargs.clone(),
            multitask_strategy: row.multitask,
            langsmith_session_name: None,
        }
    }

    /// Whether it is pending or running.
    pub(crate) fn in_flight(&self) -> bool {
        !self.status.is_final()
    }
}
