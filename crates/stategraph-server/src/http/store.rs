//! The memory store over HTTP: `/store/items` (put, get, delete), `/store/items/search` and
//! `/store/namespaces`. The server's own records (under [`NAMESPACE_ROOT`]) are out of reach.

use std::time::Duration;

use axum::Json;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value as Json_, json};
use stategraph_store::{
    GetOp, IndexFields, ListNamespacesOptions, Op, OpResult, PutOptions, SearchOptions, StoreError,
    Ttl,
};

use crate::app::Shared;
use crate::error::ApiError;
use crate::http::extract::{Body, Query};
use crate::records::NAMESPACE_ROOT;

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

/// The longest TTL, in minutes, that `PUT /store/items` gives an item: 1000 years (of 365.25
/// days). A longer `ttl` (LangGraph's server takes any number of minutes) is clamped to it:
/// the item still outlives anyone who reads it, and its expiry stays a date that every
/// backend, and LangGraph's own store reading the same database, can hold.
pub const MAX_STORE_TTL_MINUTES: f64 = 525_960_000.0;

/// The TTL a put's `ttl` (minutes; `null` or absent: the store's default) asks for.
fn ttl_of(minutes: Option<f64>) -> Result<Ttl, ApiError> {
    let Some(minutes) = minutes else {
        return Ok(Ttl::Default);
    };
    if minutes.is_nan() || minutes <= 0.0 {
        return Err(ApiError::invalid(format!(
            "`ttl` must be a number of minutes above 0 (or null for the store's default), got \
             {}",
            Json_::from(minutes)
        )));
    }
    let seconds = minutes.min(MAX_STORE_TTL_MINUTES) * 60.0;
    let ttl = Duration::try_from_secs_f64(seconds)
        .map_err(|e| ApiError::invalid(format!("`ttl` of {minutes} minutes: {e}")))?;
    // The stores keep times to the microsecond: a shorter TTL would be none at all.
    Ok(Ttl::After(ttl.max(Duration::from_micros(1))))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = StorePutRequest)]
pub(crate) struct PutBody {
    namespace: Vec<String>,
    key: String,
    value: serde_json::Value,
    #[serde(default)]
    index: Option<serde_json::Value>,
    #[serde(default)]
    ttl: Option<f64>,
}

/// `PUT /store/items`: 204. An empty `namespace` is 400, as LangGraph's server answers it (its
/// store refuses it); `ttl` is in minutes, at most [`MAX_STORE_TTL_MINUTES`].
#[utoipa::path(
    put,
    path = "/store/items",
    operation_id = "put_store_items",
    tag = "Store",
    request_body = PutBody,
    responses((status = 204, description = "Stored."))
)]
pub(crate) async fn put_item(
    axum::extract::State(state): Shared,
    Body(body): Body<PutBody>,
) -> Result<StatusCode, ApiError> {
    if body.namespace.is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "Namespace cannot be empty.",
        ));
    }
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
    let ttl = ttl_of(body.ttl)?;
    state
        .records
        .store()
        .put_with(
            &labels(&body.namespace),
            &body.key,
            body.value,
            PutOptions { index, ttl },
        )
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct GetQuery {
    namespace: String,
    key: String,
    refresh_ttl: Option<String>,
}

/// `GET /store/items?namespace=a.b&key=k`: the item, or `null`. `refresh_ttl=true` pushes
/// its expiry back by its TTL, any other value leaves it (as LangGraph's server reads the flag);
/// without it the store's `refresh_on_read` decides.
#[utoipa::path(
    get,
    path = "/store/items",
    operation_id = "get_store_items",
    tag = "Store",
    params(GetQuery),
    responses((status = 200, description = "The item, or null.", body = serde_json::Value))
)]
pub(crate) async fn get_item(
    axum::extract::State(state): Shared,
    Query(query): Query<GetQuery>,
) -> Result<Json<Json_>, ApiError> {
    let ns: Vec<String> = query.namespace.split('.').map(str::to_owned).collect();
    check_namespace(&ns)?;
    let store = state.records.store();
    let item = match query.refresh_ttl {
        None => store.get(&labels(&ns), &query.key).await?,
        Some(flag) => {
            let op = GetOp {
                namespace: ns,
                key: query.key,
                refresh_ttl: flag.eq_ignore_ascii_case("true"),
            };
            match store.batch(vec![Op::Get(op)]).await?.pop() {
                Some(OpResult::Get(item)) => item,
                _ => {
                    return Err(StoreError::Internal(
                        "a get answered something else than an item".into(),
                    )
                    .into());
                }
            }
        }
    };
    Ok(Json(item.map_or(Json_::Null, |i| i.to_json())))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = StoreDeleteRequest)]
pub(crate) struct DeleteBody {
    namespace: Vec<String>,
    key: String,
}

/// `DELETE /store/items`: 204, also when there was nothing to delete (an empty `namespace`
/// holds no item, as LangGraph's server finds).
#[utoipa::path(
    delete,
    path = "/store/items",
    operation_id = "delete_store_items",
    tag = "Store",
    request_body = DeleteBody,
    responses((status = 204, description = "Deleted."))
)]
pub(crate) async fn delete_item(
    axum::extract::State(state): Shared,
    Body(body): Body<DeleteBody>,
) -> Result<StatusCode, ApiError> {
    check_namespace(&body.namespace)?;
    if body.namespace.is_empty() {
        return Ok(StatusCode::NO_CONTENT);
    }
    state
        .records
        .store()
        .delete(&labels(&body.namespace), &body.key)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
#[schema(as = StoreSearchRequest)]
pub(crate) struct SearchBody {
    /// `null` is no prefix, as the schema allows (LangGraph's server answers it 500).
    #[serde(deserialize_with = "null_is_empty")]
    namespace_prefix: Vec<String>,
    filter: Option<serde_json::Value>,
    #[serde(deserialize_with = "crate::input::count")]
    limit: Option<usize>,
    #[serde(deserialize_with = "crate::input::count")]
    offset: Option<usize>,
    query: Option<String>,
    refresh_ttl: Option<bool>,
}

/// A list of labels where `null` is the empty list.
fn null_is_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(Option::<Vec<String>>::deserialize(d)?.unwrap_or_default())
}

/// `POST /store/items/search`: `{"items": [...]}`.
#[utoipa::path(
    post,
    path = "/store/items/search",
    operation_id = "post_store_items_search",
    tag = "Store",
    request_body = SearchBody,
    responses((status = 200, description = "`{\"items\": [...]}`.", body = serde_json::Value))
)]
pub(crate) async fn search_items(
    axum::extract::State(state): Shared,
    Body(body): Body<SearchBody>,
) -> Result<Json<Json_>, ApiError> {
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
        .await?;
    let items: Vec<Json_> = items
        .iter()
        .filter(|i| i.namespace.first().is_none_or(|l| l != NAMESPACE_ROOT))
        .skip(if whole { offset } else { 0 })
        .take(limit)
        .map(|i| i.to_json())
        .collect();
    Ok(Json(json!({ "items": items })))
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
#[schema(as = StoreListNamespacesRequest)]
pub(crate) struct NamespacesBody {
    prefix: Option<Vec<String>>,
    suffix: Option<Vec<String>>,
    #[serde(deserialize_with = "crate::input::count")]
    max_depth: Option<usize>,
    #[serde(deserialize_with = "crate::input::count")]
    limit: Option<usize>,
    #[serde(deserialize_with = "crate::input::count")]
    offset: Option<usize>,
}

/// `POST /store/namespaces`: `{"namespaces": [[...], ...]}`.
#[utoipa::path(
    post,
    path = "/store/namespaces",
    operation_id = "post_store_namespaces",
    tag = "Store",
    request_body = NamespacesBody,
    responses((status = 200, description = "`{\"namespaces\": [[...], ...]}`.", body = serde_json::Value))
)]
pub(crate) async fn list_namespaces(
    axum::extract::State(state): Shared,
    Body(body): Body<NamespacesBody>,
) -> Result<Json<Json_>, ApiError> {
    let (limit, offset) = (body.limit.unwrap_or(100), body.offset.unwrap_or(0));
    // Cut to depth 0, the server's records would show as `[]`: they are listed one label
    // deep, hidden, and what is left is cut to nothing.
    let options = ListNamespacesOptions {
        prefix: body.prefix,
        suffix: body.suffix,
        max_depth: body.max_depth.map(|d| d.max(1)),
        limit: SCAN_LIMIT,
        offset: 0,
    };
    let found = state.records.store().list_namespaces(options).await?;
    let mut found: Vec<_> = found
        .into_iter()
        .filter(|ns| ns.first().is_none_or(|l| l != NAMESPACE_ROOT))
        .collect();
    if body.max_depth == Some(0) {
        found.truncate(1);
        found.iter_mut().for_each(Vec::clear);
    }
    let namespaces: Vec<_> = found.into_iter().skip(offset).take(limit).collect();
    Ok(Json(json!({ "namespaces": namespaces })))
}
