//! Cancelling runs: one (`POST /threads/{thread_id}/runs/{run_id}/cancel`) or many
//! (`POST /runs/cancel`).

use axum::Json;
use axum::http::header::{CONTENT_LOCATION, LOCATION};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use stategraph_runs::{CancelAction, CancelOutcome, RunQuery, RunStatus};

use crate::app::Shared;
use crate::error::ApiError;
use crate::http::extract::{Body, Query, RunIds, uuid_id};
use crate::http::runs::headers;
use crate::run::cancel::{CANCEL_SETTLE, cancel_and_settle, request};
use crate::run::{Cancel, api_error, follow};

/// Query of `POST /threads/{thread_id}/runs/{run_id}/cancel`.
#[derive(Deserialize, Default, utoipa::IntoParams)]
#[serde(default)]
#[into_params(parameter_in = Query)]
pub(crate) struct CancelQuery {
    wait: Option<String>,
    action: Option<String>,
}

/// `POST /threads/{thread_id}/runs/{run_id}/cancel`: stops a pending or running run.
///
/// `action=interrupt` (the default) marks it `interrupted` and keeps its checkpoints;
/// `action=rollback` deletes it and its checkpoints. 202 with no body, or with `wait=1` 200
/// once the run has stopped, with `{}`: what its stream sent after the cancel (nothing), as
/// LangGraph's server answers.
#[utoipa::path(
    post,
    path = "/threads/{thread_id}/runs/{run_id}/cancel",
    operation_id = "post_threads_runs_cancel",
    tag = "Thread Runs",
    params(RunIds, CancelQuery),
    responses((status = 202, description = "Cancelling."), (status = 200, description = "With `wait=1`, once the run stopped: `{}` (what its stream sent after the cancel: nothing).", body = serde_json::Value))
)]
pub(crate) async fn cancel(
    axum::extract::State(state): Shared,
    RunIds { thread_id, run_id }: RunIds,
    Query(query): Query<CancelQuery>,
) -> Result<Response, ApiError> {
    let wait = query
        .wait
        .is_some_and(|w| matches!(w.to_lowercase().as_str(), "true" | "yes" | "1"));
    let action = match query.action.as_deref() {
        Some("rollback") => CancelAction::Rollback,
        _ => CancelAction::Interrupt,
    };
    let run = match state.runs.queue.get(&run_id).await.map_err(api_error)? {
        Some(run) if run.thread_id == thread_id => run,
        _ => return Err(ApiError::not_found("No runs found to cancel.")),
    };
    let not_cancelable = || {
        ApiError::not_found(
            "No matching runs to cancel. Please verify the thread ID and run IDs are correct, \
             and the runs haven't been deleted or completed.",
        )
    };
    if !run.in_flight() {
        return Err(not_cancelable());
    }
    let cancel = Cancel {
        action,
        reason: format!(
            "{} requested via POST /threads/{{thread_id}}/runs/{{run_id}}/cancel",
            action.as_str()
        ),
    };
    match request(&state, &run_id, &cancel).await? {
        CancelOutcome::Signalled => {
            follow::settled(&state, &run_id, (!wait).then_some(CANCEL_SETTLE)).await;
        }
        CancelOutcome::Ended => {}
        _ => return Err(not_cancelable()),
    }
    if !wait {
        return Ok(axum::http::StatusCode::ACCEPTED.into_response());
    }
    Ok(stopped(&thread_id, &run_id))
}

/// The answer to a cancel with `wait` once the run stopped. LangGraph's server answers what
/// the run's stream sends after the cancel arrives (its last values, interrupts or error);
/// a cancelled run sends nothing more (it stops, as a pending one never starts), so the
/// answer is `{}`, as the reference server's is.
fn stopped(thread_id: &str, run_id: &str) -> Response {
    let base = format!("/threads/{thread_id}/runs/{run_id}");
    let location = vec![
        (CONTENT_LOCATION, base.clone()),
        (LOCATION, format!("{base}/join")),
    ];
    (headers(&location), Json(serde_json::json!({}))).into_response()
}

/// Body of `POST /runs/cancel` (`RunsCancel`).
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
#[schema(as = RunsCancel)]
pub(crate) struct CancelManyBody {
    status: Option<String>,
    thread_id: Option<String>,
    run_ids: Option<Vec<String>>,
}

/// `POST /runs/cancel`: cancels the runs `run_ids` of `thread_id`, or every run with
/// `status` `pending`, `running` or `all` (both); `action` (query) `interrupt` (default) or
/// `rollback` as for one run. 204; 404 when no run matched or none was pending or running;
/// 422 for a body that does not fit, as LangGraph's server.
#[utoipa::path(
    post,
    path = "/runs/cancel",
    operation_id = "post_runs_cancel",
    tag = "Thread Runs",
    params(CancelQuery),
    request_body = CancelManyBody,
    responses((status = 204, description = "Cancelled."))
)]
pub(crate) async fn cancel_many(
    axum::extract::State(state): Shared,
    Query(query): Query<CancelQuery>,
    Body(body): Body<CancelManyBody>,
) -> Result<Response, ApiError> {
    let action = match query.action.as_deref() {
        Some("rollback") => CancelAction::Rollback,
        _ => CancelAction::Interrupt,
    };
    let candidates = if let Some(status) = body.status.as_deref().filter(|s| !s.is_empty()) {
        let statuses: &[RunStatus] = match status.to_lowercase().as_str() {
            "pending" => &[RunStatus::Pending],
            "running" => &[RunStatus::Running],
            "all" => &[RunStatus::Pending, RunStatus::Running],
            _ => {
                return Err(ApiError::invalid(
                    "Invalid status: must be 'pending', 'running', or 'all'",
                ));
            }
        };
        if body.thread_id.as_deref().is_some_and(|t| !t.is_empty())
            || body.run_ids.as_ref().is_some_and(|r| !r.is_empty())
        {
            return Err(ApiError::invalid(
                "When providing a 'status', 'thread_id' and 'run_ids' must be omitted. The \
                 'status' parameter cancels all runs with the given status, regardless of \
                 thread or run ID.",
            ));
        }
        let query = RunQuery::new().statuses(statuses.iter().copied());
        state.runs.queue.list(&query).await.map_err(api_error)?
    } else {
        let (Some(thread_id), Some(run_ids)) = (body.thread_id, body.run_ids) else {
            return Err(ApiError::invalid(
                "Must provide either a status, or both 'thread_id' and 'run_ids'",
            ));
        };
        let thread_id = uuid_id("thread", &thread_id)?;
        let run_ids = run_ids
            .iter()
            .map(|r| uuid_id("run", r))
            .collect::<Result<Vec<_>, _>>()?;
        let mut found = state
            .runs
            .queue
            .list(&RunQuery::runs(run_ids))
            .await
            .map_err(api_error)?;
        found.retain(|r| r.thread_id == thread_id);
        found
    };
    if candidates.is_empty() {
        return Err(ApiError::not_found("No runs found to cancel."));
    }
    let in_flight: Vec<String> = candidates
        .iter()
        .filter(|r| r.in_flight())
        .map(|r| r.run_id.clone())
        .collect();
    let cancel = Cancel {
        action,
        reason: format!("{} requested via POST /runs/cancel", action.as_str()),
    };
    if cancel_and_settle(&state, &in_flight, &cancel).await == 0 {
        return Err(ApiError::not_found(
            "No matching runs to cancel. Please verify the thread ID and run IDs are correct, \
             and the runs haven't been deleted or completed.",
        ));
    }
    Ok(axum::http::StatusCode::NO_CONTENT.into_response())
}
