//! The request's parts as handlers take them, read as LangGraph's server reads them and
//! refused as it refuses them: 422 `{"detail": …}` naming what does not fit.
//!
//! - [`Body`]: a JSON body, an empty one read as `{}`; [`RequiredBody`]: one that must be
//!   given; [`Search`]: a search body with its order and paging read apart.
//! - [`Query`]: the query string.
//! - [`ThreadId`], [`RunIds`], [`AssistantId`], [`GraphOrAssistant`], [`RunThreadId`]: path
//!   ids, UUIDs in their canonical form (a path id that is not one is 422 `Invalid thread ID:
//!   must be a UUID`, as the reference answers it).

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use utoipa::openapi::Required;
use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
use uuid::Uuid;

use crate::app::AppState;
use crate::error::ApiError;
use crate::records::Paging;

/// A JSON request body; an empty body (or only whitespace) is `{}`, as the SDKs send
/// none for a request without options.
pub(crate) struct Body<T>(pub(crate) T);

/// A JSON request body that must be given (`POST /threads/{thread_id}/history`, as LangGraph's
/// server requires it): an empty body is 422, as invalid JSON is.
pub(crate) struct RequiredBody<T>(pub(crate) T);

/// A search body: its filters (`T`) and its order and paging, read from the same body on
/// their own (flattening one into the other would hide the name of a field that does not
/// fit from the message).
pub(crate) struct Search<T> {
    pub(crate) body: T,
    pub(crate) paging: Paging,
}

async fn bytes_of<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    Bytes::from_request(req, state)
        .await
        .map_err(|e| ApiError::new(e.status(), e.body_text()))
}

fn is_blank(body: &[u8]) -> bool {
    body.iter().all(u8::is_ascii_whitespace)
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = bytes_of(req, state).await?;
        parse_body(&bytes).map(Body)
    }
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for RequiredBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = bytes_of(req, state).await?;
        if is_blank(&bytes) {
            return Err(ApiError::invalid(
                "Invalid JSON in request body: the request needs a JSON body (`{}` at least)",
            ));
        }
        parse_json(&bytes).map(RequiredBody)
    }
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Search<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = bytes_of(req, state).await?;
        let paging = parse_body(&bytes)?;
        let body = parse_body(&bytes)?;
        Ok(Search { body, paging })
    }
}

/// Parses a JSON request body (an empty body is `{}`), or answers 422 naming the field that
/// does not fit.
pub(crate) fn parse_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    parse_json(if is_blank(body) { b"{}" } else { body })
}

fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed = serde_path_to_error::deserialize(&mut de).map_err(body_error)?;
    // Nothing but whitespace may follow the JSON value.
    de.end()
        .map_err(|e| ApiError::invalid(format!("invalid body: {e}")))?;
    Ok(parsed)
}

/// A body already read as an object, as type `T` reads its fields (a body several types
/// read in part), or 422 naming the field that does not fit.
pub(crate) fn body_fields<T: DeserializeOwned>(
    body: &serde_json::Map<String, serde_json::Value>,
) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(serde_json::Value::Object(body.clone())).map_err(body_error)
}

/// 422 naming where a body does not fit (its path, unless the body as a whole is wrong).
fn body_error(e: serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    let path = e.path().to_string();
    let inner = e.into_inner();
    if path == "." || inner.is_syntax() || inner.is_eof() {
        ApiError::invalid(format!("invalid body: {inner}"))
    } else {
        ApiError::invalid(format!("invalid body: `{path}`: {inner}"))
    }
}

/// The query string, or 422 naming the parameter that does not fit.
pub(crate) struct Query<T>(pub(crate) T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let axum::extract::Query(q) = axum::extract::Query::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::invalid(e.body_text()))?;
        Ok(Query(q))
    }
}

/// The path parameter `name` (a route without it is the router's bug: 500).
async fn param<S: Send + Sync>(
    parts: &mut Parts,
    state: &S,
    name: &str,
) -> Result<String, ApiError> {
    let Path(params) = Path::<Vec<(String, String)>>::from_request_parts(parts, state)
        .await
        .map_err(|e| ApiError::new(e.status(), e.body_text()))?;
    params
        .into_iter()
        .find_map(|(k, v)| (k == name).then_some(v))
        .ok_or_else(|| {
            ApiError::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                format!("route has no `{name}` parameter"),
            )
        })
}

/// `text` as a UUID in its canonical form (lowercase, hyphenated), or 422 `detail`.
pub(crate) fn canonical_uuid(text: &str, detail: &str) -> Result<String, ApiError> {
    Uuid::parse_str(text)
        .map(|u| u.to_string())
        .map_err(|_| ApiError::invalid(detail))
}

/// LangGraph's message for an id of `what` (`thread`, `run`, …) that is not a UUID.
fn not_a_uuid(what: &str) -> String {
    format!("Invalid {what} ID: must be a UUID")
}

/// `text`, an id of `what` (`thread`, `run`, …), as a canonical UUID, or 422 in LangGraph's
/// words (`Invalid thread ID: must be a UUID`).
pub(crate) fn uuid_id(what: &str, text: &str) -> Result<String, ApiError> {
    canonical_uuid(text, &not_a_uuid(what))
}

/// Path `{thread_id}`.
pub(crate) struct ThreadId(pub(crate) String);

impl<S: Send + Sync> FromRequestParts<S> for ThreadId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let id = param(parts, state, "thread_id").await?;
        uuid_id("thread", &id).map(ThreadId)
    }
}

/// Path `{thread_id}` of a route that creates a run on the thread, refused as LangGraph's
/// server refuses it there (`Invalid thread ID`).
pub(crate) struct RunThreadId(pub(crate) String);

impl<S: Send + Sync> FromRequestParts<S> for RunThreadId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let id = param(parts, state, "thread_id").await?;
        canonical_uuid(&id, "Invalid thread ID").map(RunThreadId)
    }
}

/// Path `{thread_id}` and `{run_id}`.
pub(crate) struct RunIds {
    pub(crate) thread_id: String,
    pub(crate) run_id: String,
}

impl<S: Send + Sync> FromRequestParts<S> for RunIds {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let ThreadId(thread_id) = ThreadId::from_request_parts(parts, state).await?;
        let run_id = param(parts, state, "run_id").await?;
        let run_id = uuid_id("run", &run_id)?;
        Ok(RunIds { thread_id, run_id })
    }
}

/// Path `{cron_id}`.
pub(crate) struct CronId(pub(crate) String);

impl<S: Send + Sync> FromRequestParts<S> for CronId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let id = param(parts, state, "cron_id").await?;
        uuid_id("cron", &id).map(CronId)
    }
}

/// Path `{assistant_id}`.
pub(crate) struct AssistantId(pub(crate) String);

impl<S: Send + Sync> FromRequestParts<S> for AssistantId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let id = param(parts, state, "assistant_id").await?;
        uuid_id("assistant", &id).map(AssistantId)
    }
}

/// Path `{assistant_id}` of `GET /assistants/{assistant_id}/graph`, which also takes a
/// graph's name for its default assistant (as LangGraph's server does there only).
pub(crate) struct GraphOrAssistant(pub(crate) String);

impl FromRequestParts<std::sync::Arc<AppState>> for GraphOrAssistant {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &std::sync::Arc<AppState>,
    ) -> Result<Self, ApiError> {
        let id = param(parts, state, "assistant_id").await?;
        if state.graphs.contains_key(&id) {
            return Ok(GraphOrAssistant(crate::assistants::default_assistant_id(
                &id,
            )));
        }
        uuid_id("assistant", &id).map(GraphOrAssistant)
    }
}

/// A path parameter `name` holding a UUID, described for `/openapi.json`.
fn uuid_param(name: &str, description: &str) -> Parameter {
    let schema = ObjectBuilder::new()
        .schema_type(Type::String)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Uuid)));
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Path)
        .required(Required::True)
        .description(Some(description))
        .schema(Some(schema))
        .build()
}

/// Each path extractor describes the parameters it reads, so that an operation's
/// `params(...)` names the extractor its handler takes.
macro_rules! path_params {
    ($($ty:ty => [$(($name:literal, $description:literal)),+]),+ $(,)?) => {$(
        impl utoipa::IntoParams for $ty {
            fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
                vec![$(uuid_param($name, $description)),+]
            }
        }
    )+};
}

path_params! {
    ThreadId => [("thread_id", "The thread's id.")],
    RunThreadId => [("thread_id", "The thread's id.")],
    RunIds => [("thread_id", "The thread's id."), ("run_id", "The run's id.")],
    CronId => [("cron_id", "The cron's id.")],
    AssistantId => [("assistant_id", "The assistant's id.")],
}

impl utoipa::IntoParams for GraphOrAssistant {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        vec![
            ParameterBuilder::new()
                .name("assistant_id")
                .parameter_in(ParameterIn::Path)
                .required(Required::True)
                .description(Some(
                    "The assistant's id, or a graph's name (its default assistant).",
                ))
                .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
                .build(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_canonical() {
        let id = canonical_uuid("1EF7A6D0-0000-6000-8000-000000000000", "x").unwrap();
        assert_eq!(id, "1ef7a6d0-0000-6000-8000-000000000000");
        let e = canonical_uuid("t1", &not_a_uuid("thread")).unwrap_err();
        assert_eq!(e.detail, "Invalid thread ID: must be a UUID");
    }

    #[test]
    fn an_empty_body_is_an_empty_object() {
        let v: serde_json::Value = parse_body(b"  \n").unwrap();
        assert_eq!(v, serde_json::json!({}));
        let e = parse_body::<serde_json::Value>(b"{} x").unwrap_err();
        assert!(e.detail.starts_with("invalid body"), "{}", e.detail);
    }
}
