//! Errors as the Agent Server answers them: a status and `{"detail": ...}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use stategraph_checkpoint::Error as CheckpointError;
use stategraph_graph::GraphError;
use stategraph_store::StoreError;

/// An error answered to a request: its HTTP status and a message for `detail`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The message sent as `{"detail": message}`.
    pub detail: String,
}

impl ApiError {
    /// An error with this status and message.
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Self {
            status,
            detail: detail.into(),
        }
    }

    /// 404 Not Found.
    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, detail)
    }

    /// 422 Unprocessable Entity: the request body does not fit.
    pub fn invalid(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, detail)
    }

    /// 409 Conflict.
    pub fn conflict(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, detail)
    }

    /// 500 Internal Server Error: the server's fault, not the request's.
    pub fn internal(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, detail)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(json!({ "detail": self.detail }))).into_response()
    }
}

impl From<axum::extract::rejection::QueryRejection> for ApiError {
    fn from(e: axum::extract::rejection::QueryRejection) -> Self {
        Self::invalid(e.body_text())
    }
}

/// A store error: what the request got wrong (a namespace, a value, a filter, an index path)
/// is 422, the rest is the backend's fault (500).
impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        let status = match &e {
            StoreError::InvalidFilter { .. }
            | StoreError::InvalidNamespace { .. }
            | StoreError::InvalidValue { .. }
            | StoreError::InvalidIndexPath { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Self::new(status, e.to_string())
    }
}

/// A checkpointer error: what the request named does not exist (404), is invalid (422) or
/// conflicts with the thread (409); the rest is the backend's fault (500).
impl From<CheckpointError> for ApiError {
    fn from(e: CheckpointError) -> Self {
        Self::from_checkpoint(&e)
    }
}

impl From<GraphError> for ApiError {
    fn from(e: GraphError) -> Self {
        let status = match &e {
            GraphError::InvalidUpdate { .. }
            | GraphError::InvalidArgument { .. }
            | GraphError::InvalidConfig(_)
            | GraphError::NothingToResume
            | GraphError::AmbiguousResume { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            GraphError::NotFound { .. } => StatusCode::NOT_FOUND,
            // The checkpointer's own error says whose fault it is.
            GraphError::Checkpoint(inner) => return Self::from_checkpoint(inner),
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Self::new(status, e.to_string())
    }
}

impl ApiError {
    /// The answer to a checkpointer error (borrowed, as a [`GraphError`] holds it).
    fn from_checkpoint(e: &CheckpointError) -> Self {
        let status = match e {
            CheckpointError::NotFound { .. } => StatusCode::NOT_FOUND,
            CheckpointError::InvalidInput { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            CheckpointError::Conflict { .. } => StatusCode::CONFLICT,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Self::new(status, e.to_string())
    }
}

/// The name of a graph error as LangGraph's error events give it (the exception class).
pub(crate) fn error_name(e: &GraphError) -> &'static str {
    match e {
        GraphError::InvalidUpdate { .. } => "InvalidUpdateError",
        GraphError::RecursionLimit { .. } => "GraphRecursionError",
        GraphError::NodeFailed { .. } => "NodeError",
        GraphError::NothingToResume | GraphError::AmbiguousResume { .. } => "ValueError",
        _ => "GraphError",
    }
}
