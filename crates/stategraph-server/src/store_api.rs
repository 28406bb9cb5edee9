//! The memory store over HTTP: `/store/items` (put, get, delete), `/store/items/search` and
//! `/store/namespaces`. The server's own records (under [`NAMESPACE_ROOT`]) are out of reach.

use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::Query;
use axum::extract::rejection::QueryRejection;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value as Json_, json};
use stategraph_checkpoint::store::{
    IndexFields, ListNamespacesOptions, PutOptions, SearchOptions, StoreError, Ttl,
};

use crate::app::Shared;
use crate::error::ApiError;
use crate::records::NAMESPACE_ROOT;
use crate::threads::parse_body;

/// Most items a search over the whole store reads before hiding the server's records.
const SCAN_LIMIT: usize = 100_000;

fn check_namespace(ns: &[String]) -> Result<(), ApiError> {
    for label in ns {
        if label.is_empty() || label.contains('.') {
            return Err(ApiError::invalid(format!(
                "Namespace label {label:?} must be a non-empty string without periods"
            )));
        }
    }
    if ns.first().is_some_and(|l| l == NAMESPACE_ROOT) {
        return Err(ApiError::invalid(format!(
            "the namespace root `{NAMESPACE_ROOT}` is reserved for the server"
        )));
    }
    Ok(())
}

fn labels(ns: &[String]) -> Vec<&str> {
    ns.iter().map(String::as_str).collect()
}

/// A store error: the request's fault (422) or the backend's (500).
fn store_error(e: StoreError) -> ApiError {
    match e {
        StoreError::InvalidFilter { .. }
        | StoreError::InvalidNamespace { .. }
        | StoreError::InvalidValue { .. }
        | StoreError::InvalidIndexPath { .. } => ApiError::invalid(e.to_string()),
        other => ApiError::from(other),
    }
}

#[derive(Deserialize)]
struct PutBody {
    namespace: Vec<String>,
    key: String,
    value: Json_,
    #[serde(default)]
    index: Option<Json_>,
    #[serde(default)]
    ttl: Option<f64>,
}

/// `PUT /store/items`.
pub(crate) async fn put_item(
    axum::extract::State(state): Shared,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    let body: PutBody = parse_body(&body)?;
    check_namespace(&body.namespace)?;
    let index = match body.index {
        None | Some(Json_::Null) => IndexFields::Default,
        Some(Json_::Bool(false)) => IndexFields::Disabled,
        Some(Json_::Array(fields)) => IndexFields::Fields(
            fields
                .iter()
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect(),
        ),
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "index must be false or a list of paths, got {other}"
            )));
        }
    };
    let ttl = match body.ttl {
        None => Ttl::Default,
        Some(minutes) if minutes.is_finite() && minutes >= 0.0 => {
            Ttl::After(Duration::from_secs_f64(minutes * 60.0))
        }
        Some(other) => return Err(ApiError::invalid(format!("invalid ttl {other}"))),
    };
    state
        .records
        .store()
        .put_with(
            &labels(&body.namespace),
            &body.key,
            body.value,
            PutOptions { index, ttl },
        )
        .await
        .map_err(store_error)?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
pub(crate) struct GetQuery {
    namespace: String,
    key: String,
}

/// `GET /store/items?namespace=a.b&key=k`: the item, or `null`.
pub(crate) async fn get_item(
    axum::extract::State(state): Shared,
    query: Result<Query<GetQuery>, QueryRejection>,
) -> Result<Json<Json_>, ApiError> {
    let Query(query) = query?;
    let ns: Vec<String> = query.namespace.split('.').map(str::to_owned).collect();
    check_namespace(&ns)?;
    let item = state
        .records
        .store()
        .get(&labels(&ns), &query.key)
        .await
        .map_err(store_error)?;
    Ok(Json(item.map_or(Json_::Null, |i| i.to_json())))
}

#[derive(Deserialize)]
struct DeleteBody {
    namespace: Vec<String>,
    key: String,
}

/// `DELETE /store/items`.
pub(crate) async fn delete_item(
    axum::extract::State(state): Shared,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    let body: DeleteBody = parse_body(&body)?;
    check_namespace(&body.namespace)?;
    state
        .records
        .store()
        .delete(&labels(&body.namespace), &body.key)
        .await
        .map_err(store_error)?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct SearchBody {
    namespace_prefix: Vec<String>,
    filter: Option<Json_>,
    limit: Option<usize>,
    offset: Option<usize>,
    query: Option<String>,
    refresh_ttl: Option<bool>,
}

/// `POST /store/items/search`: `{"items": [...]}`.
pub(crate) async fn search_items(
    axum::extract::State(state): Shared,
    body: Bytes,
) -> Result<Json<Json_>, ApiError> {
    let body: SearchBody = parse_body(&body)?;
    check_namespace(&body.namespace_prefix)?;
    let (limit, offset) = (body.limit.unwrap_or(10), body.offset.unwrap_or(0));
    // Over the whole store, the server's records are read and hidden, then paged here.
    let whole = body.namespace_prefix.is_empty();
    let mut options = SearchOptions::new();
    options.query = body.query;
    options.filter = body.filter.filter(|f| !f.is_null());
    options.refresh_ttl = body.refresh_ttl;
    (options.limit, options.offset) = if whole {
        (SCAN_LIMIT, 0)
    } else {
        (limit, offset)
    };
    let items = state
        .records
        .store()
        .search(&labels(&body.namespace_prefix), options)
        .await
        .map_err(store_error)?;
    let items: Vec<Json_> = items
        .iter()
        .filter(|i| i.namespace.first().is_none_or(|l| l != NAMESPACE_ROOT))
        .skip(if whole { offset } else { 0 })
        .take(limit)
        .map(|i| i.to_json())
        .collect();
    Ok(Json(json!({ "items": items })))
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct NamespacesBody {
    prefix: Option<Vec<String>>,
    suffix: Option<Vec<String>>,
    max_depth: Option<usize>,
    limit: Option<usize>,
    offset: Option<usize>,
}

/// `POST /store/namespaces`: `{"namespaces": [[...], ...]}`.
pub(crate) async fn list_namespaces(
    axum::extract::State(state): Shared,
    body: Bytes,
) -> Result<Json<Json_>, ApiError> {
    let body: NamespacesBody = parse_body(&body)?;
    let (limit, offset) = (body.limit.unwrap_or(100), body.offset.unwrap_or(0));
    let options = ListNamespacesOptions {
        prefix: body.prefix,
        suffix: body.suffix,
        max_depth: body.max_depth,
        limit: SCAN_LIMIT,
        offset: 0,
    };
    let found = state
        .records
        .store()
        .list_namespaces(options)
        .await
        .map_err(store_error)?;
    let namespaces: Vec<_> = found
        .into_iter()
        .filter(|ns| ns.first().is_none_or(|l| l != NAMESPACE_ROOT))
        .skip(offset)
        .take(limit)
        .collect();
    Ok(Json(json!({ "namespaces": namespaces })))
}
