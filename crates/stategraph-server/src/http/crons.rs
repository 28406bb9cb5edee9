//! Crons: `POST /runs/crons`, `POST /threads/{thread_id}/runs/crons`,
//! `GET`/`PATCH`/`DELETE /runs/crons/{cron_id}`, `POST /runs/crons/search` and
//! `POST /runs/crons/count`.

use axum::Json;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::Value as Json_;

use crate::app::{AppState, Shared};
use crate::crons::{CronPatch, CronRecord, NewCron, OnRunCompleted, Schedule, parse_time};
use crate::error::ApiError;
use crate::http::extract::{CronId, RequiredBody, Search, ThreadId, body_fields, uuid_id};
use crate::http::openapi::{Both, Searched};
use crate::records::{Object, filter};
use crate::request::RunBody;

/// The cron's own fields of a create body.
#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = CronCreate)]
struct CreateFields {
    assistant_id: Option<String>,
    schedule: Option<String>,
    timezone: Option<String>,
    end_time: Option<String>,
    enabled: Option<bool>,
    on_run_completed: Option<OnRunCompleted>,
    metadata: Option<Object>,
    webhook: Option<serde_json::Value>,
}

async fn create_cron(
    state: &AppState,
    thread_id: Option<String>,
    body: Object,
) -> Result<Json<CronRecord>, ApiError> {
    let f: CreateFields = body_fields(&body)?;
    // The run request each tick makes, checked now as a run's body is.
    let _: RunBody = body_fields(&body)?;
    let assistant_ref = f
        .assistant_id
        .ok_or_else(|| ApiError::invalid("invalid body: `assistant_id` is required"))?;
    let schedule_text = f
        .schedule
        .ok_or_else(|| ApiError::invalid("invalid body: `schedule` is required"))?;
    let schedule = Schedule::parse(&schedule_text, f.timezone.as_deref())?;
    if let Some(t) = &f.end_time {
        parse_time("end_time", t)?;
    }
    state.webhooks.check(f.webhook.as_ref()).await?;
    let assistant = crate::assistants::resolve(state, &assistant_ref).await?;
    if let Some(id) = &thread_id
        && state
            .records
            .get::<crate::records::ThreadHead>(id)
            .await?
            .is_none()
    {
        return Err(ApiError::not_found(format!(
            "Thread with ID '{id}' not found. Please verify the ID is correct and the thread \
             hasn't been deleted or expired."
        )));
    }
    // The payload is the body as given, as the reference keeps it.
    let payload = body;
    let cron = CronRecord::new(
        NewCron {
            assistant_id: assistant.assistant_id,
            thread_id,
            schedule: schedule_text,
            timezone: f.timezone,
            end_time: f.end_time,
            enabled: f.enabled.unwrap_or(true),
            on_run_completed: f.on_run_completed,
            metadata: f.metadata.unwrap_or_default(),
            payload,
        },
        &schedule,
    );
    state.records.put(&cron).await?;
    state.crons.wake();
    Ok(Json(cron))
}

/// `POST /runs/crons`: a stateless cron (each tick's run on a new thread).
#[utoipa::path(
    post,
    path = "/runs/crons",
    operation_id = "post_runs_crons",
    tag = "Crons",
    request_body = Both<CreateFields, RunBody>,
    responses((status = 200, description = "The cron.", body = CronRecord))
)]
pub(crate) async fn create(
    axum::extract::State(state): Shared,
    RequiredBody(body): RequiredBody<Object>,
) -> Result<Json<CronRecord>, ApiError> {
    create_cron(&state, None, body).await
}

/// `POST /threads/{thread_id}/runs/crons`: a cron whose runs go on the thread.
#[utoipa::path(
    post,
    path = "/threads/{thread_id}/runs/crons",
    operation_id = "post_threads_runs_crons",
    tag = "Crons",
    params(ThreadId),
    request_body = Both<CreateFields, RunBody>,
    responses((status = 200, description = "The cron.", body = CronRecord))
)]
pub(crate) async fn create_for_thread(
    axum::extract::State(state): Shared,
    ThreadId(thread_id): ThreadId,
    RequiredBody(body): RequiredBody<Object>,
) -> Result<Json<CronRecord>, ApiError> {
    create_cron(&state, Some(thread_id), body).await
}

async fn load(state: &AppState, cron_id: &str) -> Result<CronRecord, ApiError> {
    state
        .records
        .get::<CronRecord>(cron_id)
        .await?
        .ok_or_else(|| ApiError::not_found("Not Found"))
}

/// `GET /runs/crons/{cron_id}`.
#[utoipa::path(
    get,
    path = "/runs/crons/{cron_id}",
    operation_id = "get_runs_crons_item",
    tag = "Crons",
    params(CronId),
    responses((status = 200, description = "The cron.", body = CronRecord))
)]
pub(crate) async fn get_one(
    axum::extract::State(state): Shared,
    CronId(cron_id): CronId,
) -> Result<Json<CronRecord>, ApiError> {
    Ok(Json(load(&state, &cron_id).await?))
}

/// The cron's own fields of a patch body.
#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = CronPatch)]
struct PatchFields {
    schedule: Option<String>,
    timezone: Option<String>,
    enabled: Option<bool>,
    on_run_completed: Option<OnRunCompleted>,
    metadata: Option<Object>,
    webhook: Option<serde_json::Value>,
}

/// `PATCH /runs/crons/{cron_id}`: the fields given replace the cron's (`metadata` merged;
/// the run request's fields merged into its payload; `end_time: null` clears it). A new
/// schedule or time zone restarts the schedule from now.
#[utoipa::path(
    patch,
    path = "/runs/crons/{cron_id}",
    operation_id = "patch_runs_crons_item",
    tag = "Crons",
    params(CronId),
    request_body = Both<PatchFields, RunBody>,
    responses((status = 200, description = "The cron.", body = CronRecord))
)]
pub(crate) async fn update(
    axum::extract::State(state): Shared,
    CronId(cron_id): CronId,
    RequiredBody(body): RequiredBody<Object>,
) -> Result<Json<CronRecord>, ApiError> {
    if body.is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "Request body cannot be empty",
        ));
    }
    let f: PatchFields = body_fields(&body)?;
    let _: RunBody = body_fields(&body)?;
    let end_time = match body.get("end_time") {
        None => None,
        Some(Json_::Null) => Some(Json_::Null),
        Some(Json_::String(t)) => {
            parse_time("end_time", t)?;
            Some(Json_::String(t.clone()))
        }
        Some(_) => {
            return Err(ApiError::invalid(
                "invalid body: `end_time`: must be a date and time or null",
            ));
        }
    };
    state.webhooks.check(f.webhook.as_ref()).await?;
    let mut cron = load(&state, &cron_id).await?;
    let timezone = f.timezone.clone().or_else(|| cron.timezone.clone());
    let restart = if f.schedule.is_some() || f.timezone.is_some() {
        let text = f.schedule.as_deref().unwrap_or(&cron.schedule);
        Some(Schedule::parse(text, timezone.as_deref())?)
    } else {
        None
    };
    // The body is merged into the payload, as the reference merges it (the assistant kept);
    // it is not empty (refused above), so there is always something to update.
    let payload = body;
    let patch = CronPatch {
        schedule: f.schedule,
        timezone: f.timezone,
        end_time,
        enabled: f.enabled,
        on_run_completed: f.on_run_completed,
        metadata: f.metadata,
        payload,
    };
    cron.update(patch, restart.as_ref());
    state.records.put(&cron).await?;
    state.crons.wake();
    Ok(Json(cron))
}

/// `DELETE /runs/crons/{cron_id}` (204).
#[utoipa::path(
    delete,
    path = "/runs/crons/{cron_id}",
    operation_id = "delete_runs_crons_item",
    tag = "Crons",
    params(CronId),
    responses((status = 204, description = "Deleted."))
)]
pub(crate) async fn delete(
    axum::extract::State(state): Shared,
    CronId(cron_id): CronId,
) -> Result<StatusCode, ApiError> {
    load(&state, &cron_id).await?;
    state.records.delete::<CronRecord>(&cron_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The filters of a cron search or count.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
#[schema(as = CronSearch)]
pub(crate) struct Filters {
    assistant_id: Option<String>,
    thread_id: Option<String>,
    enabled: Option<bool>,
    metadata: Option<Object>,
    select: Option<Vec<String>>,
}

/// The fields a search may `select`.
const SELECTABLE: [&str; 14] = [
    "cron_id",
    "assistant_id",
    "thread_id",
    "user_id",
    "end_time",
    "schedule",
    "timezone",
    "payload",
    "next_run_date",
    "metadata",
    "on_run_completed",
    "enabled",
    "created_at",
    "updated_at",
];

/// The sort keys a search takes.
const SORTABLE: [&str; 7] = [
    "cron_id",
    "assistant_id",
    "thread_id",
    "next_run_date",
    "end_time",
    "created_at",
    "updated_at",
];

async fn matching(state: &AppState, f: &Filters) -> Result<Vec<CronRecord>, ApiError> {
    let mut by = Object::new();
    if let Some(a) = &f.assistant_id {
        let id = uuid_id("assistant", a)?;
        by.extend(filter("assistant_id", id));
    }
    if let Some(t) = &f.thread_id {
        let id = uuid_id("thread", t)?;
        by.extend(filter("thread_id", id));
    }
    if let Some(e) = f.enabled {
        by.extend(filter("enabled", e));
    }
    if let Some(m) = f.metadata.clone().filter(|m| !m.is_empty()) {
        by.insert("metadata".into(), Json_::Object(m));
    }
    state.records.search::<CronRecord>(by).await
}

/// `POST /runs/crons/search`: by assistant, thread, `enabled` and metadata; sorted by
/// `sort_by` (default `created_at`, newest first), paged, each cron with the `select`ed
/// fields only if given.
#[utoipa::path(
    post,
    path = "/runs/crons/search",
    operation_id = "post_runs_crons_search",
    tag = "Crons",
    request_body = Searched<Filters>,
    responses((status = 200, description = "The crons found.", body = Vec<CronRecord>))
)]
pub(crate) async fn search(
    axum::extract::State(state): Shared,
    Search { body, paging }: Search<Filters>,
) -> Result<Json<Vec<Json_>>, ApiError> {
    paging.check(&SORTABLE)?;
    if let Some(select) = &body.select
        && let Some(bad) = select.iter().find(|s| !SELECTABLE.contains(&s.as_str()))
    {
        return Err(ApiError::invalid(format!(
            "Invalid select field: '{bad}'. Valid options are: {}",
            SELECTABLE.join(", ")
        )));
    }
    let found = matching(&state, &body).await?;
    let mut page = paging.apply(found);
    if let Some(select) = &body.select {
        for cron in &mut page {
            if let Json_::Object(o) = cron {
                o.retain(|k, _| select.contains(k));
            }
        }
    }
    Ok(Json(page))
}

/// `POST /runs/crons/count`: how many crons match (by assistant, thread and metadata).
#[utoipa::path(
    post,
    path = "/runs/crons/count",
    operation_id = "post_runs_crons_count",
    tag = "Crons",
    request_body = Filters,
    responses((status = 200, description = "How many crons match.", body = usize))
)]
pub(crate) async fn count(
    axum::extract::State(state): Shared,
    crate::http::extract::Body(body): crate::http::extract::Body<Filters>,
) -> Result<Json<usize>, ApiError> {
    Ok(Json(matching(&state, &body).await?.len()))
}
