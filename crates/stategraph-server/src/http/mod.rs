//! The HTTP API: a router per resource family, each handler in the file of its resource,
//! taking typed extractors ([`extract`]). The meta routes (`/ok`, `/info`) are public; every
//! other route, and unknown paths, sit behind the API key when one is set.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::http::header::CONTENT_LOCATION;
use axum::http::{HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::{AppState, Cors};
use crate::error::ApiError;
use crate::panics;

mod assistants;
mod cancel;
mod crons;
pub(crate) mod extract;
mod joins;
mod meta;
mod observe;
mod openapi;
mod runs;
mod store;
mod thread_stream;
mod threads;

pub(crate) use assistants::state_schema;
pub use store::MAX_STORE_TTL_MINUTES;

/// The API's routes over `state`: CORS as `cors` says, the API key `api_key` (if any)
/// required on every route but the public ones.
pub(crate) fn router(state: &Arc<AppState>, cors: &Cors, api_key: Option<&str>) -> Router {
    crate::prometheus::install();
    let (public, public_doc) = OpenApiRouter::new()
        .routes(routes!(meta::ok))
        .routes(routes!(meta::info))
        .routes(routes!(openapi::document))
        .routes(routes!(openapi::docs))
        .split_for_parts();
    // The routes anyone may call, also when the server has an API key.
    let public_paths: Vec<String> = public_doc.paths.paths.keys().cloned().collect();
    let (protected, protected_doc) = protected_routes().split_for_parts();
    let mut doc = public_doc;
    doc.merge(protected_doc);
    doc.merge(<openapi::Services as utoipa::OpenApi>::openapi());
    let doc = openapi::finish(doc, api_key.is_some(), &public_paths);
    let public = public.layer(axum::Extension(openapi::Served::new(&doc)));
    let protected = protected
        .nest_service("/mcp", crate::mcp::service(state))
        .merge(crate::a2a::aliases())
        .fallback(not_found)
        .with_state(Arc::clone(state));
    // Before the first request is answered: the default assistants exist.
    let ready = Arc::clone(state);
    let protected = protected.layer(axum::middleware::from_fn(move |req, next| {
        ready_first(Arc::clone(&ready), req, next)
    }));
    let protected = match api_key {
        Some(key) => {
            let key: Arc<[u8]> = Arc::from(key.as_bytes());
            protected.layer(axum::middleware::from_fn(move |req, next| {
                check_api_key(Arc::clone(&key), req, next)
            }))
        }
        None => protected,
    };
    // A handler that panics is answered 500 with the request's id, not by a dropped
    // connection (inside CORS, so that browsers can read the answer).
    public
        .merge(protected)
        .layer(CatchPanicLayer::custom(panics::panic_response))
        .layer(axum::middleware::from_fn(observe::observe))
        .layer(cors_layer(cors))
}

/// Every route but the public ones, each with its description for `/openapi.json`.
fn protected_routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new()
        .routes(routes!(crate::prometheus::scrape))
        .routes(routes!(assistants::create))
        .routes(routes!(assistants::search))
        .routes(routes!(assistants::count))
        .routes(routes!(
            assistants::get_one,
            assistants::update,
            assistants::delete
        ))
        .routes(routes!(assistants::graph))
        .routes(routes!(assistants::schemas))
        .routes(routes!(assistants::subgraphs))
        .routes(routes!(assistants::versions))
        .routes(routes!(assistants::set_latest))
        .routes(routes!(threads::create))
        .routes(routes!(threads::search))
        .routes(routes!(threads::count))
        .routes(routes!(threads::prune))
        .routes(routes!(thread_stream::join))
        .routes(routes!(threads::copy))
        .routes(routes!(threads::get_one, threads::patch, threads::delete))
        .routes(routes!(threads::get_state, threads::update_state))
        .routes(routes!(threads::post_state_at))
        .routes(routes!(threads::get_state_at))
        .routes(routes!(threads::history, threads::history_get))
        .routes(routes!(runs::list, runs::create_background))
        .routes(routes!(runs::wait_thread))
        .routes(routes!(runs::stream_thread))
        .routes(routes!(runs::get_one, runs::delete_one))
        .routes(routes!(runs::join))
        .routes(routes!(joins::join_stream))
        .routes(routes!(cancel::cancel_many))
        .routes(routes!(
            store::get_item,
            store::put_item,
            store::delete_item
        ))
        .routes(routes!(store::search_items))
        .routes(routes!(store::list_namespaces))
        .routes(routes!(runs::create_stateless))
        .routes(routes!(crons::create))
        .routes(routes!(crons::search))
        .routes(routes!(crons::count))
        .routes(routes!(crons::get_one, crons::update, crons::delete))
        .routes(routes!(crons::create_for_thread))
        .routes(routes!(runs::create_batch))
        .routes(routes!(runs::wait_stateless))
        .routes(routes!(runs::stream_stateless))
        .routes(routes!(cancel::cancel))
        .routes(routes!(crate::a2a::post, crate::a2a::agent_card))
        .routes(routes!(crate::a2a::domain_card))
}

/// The CORS layer: `langgraph dev`'s defaults (Starlette's `CORSMiddleware`).
fn cors_layer(cors: &Cors) -> CorsLayer {
    let layer = CorsLayer::new()
        .allow_methods([
            Method::DELETE,
            Method::GET,
            Method::HEAD,
            Method::OPTIONS,
            Method::PATCH,
            Method::POST,
            Method::PUT,
        ])
        .allow_headers(AllowHeaders::mirror_request())
        .expose_headers([
            HeaderName::from_static("x-pagination-total"),
            HeaderName::from_static("x-pagination-next"),
            CONTENT_LOCATION,
        ])
        .max_age(Duration::from_secs(600));
    match cors {
        Cors::Any => layer.allow_origin(AllowOrigin::any()),
        Cors::Origins(origins) => layer
            .allow_origin(AllowOrigin::list(
                origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()),
            ))
            .allow_credentials(true),
    }
}

/// Makes sure the default assistants exist, and this process follows the run queue (its
/// worker loops and its subscription run), before a request is answered.
async fn ready_first(state: Arc<AppState>, req: Request, next: Next) -> Response {
    crate::run::workers::spawn(&state);
    match crate::assistants::ensure(&state).await {
        Ok(()) => next.run(req).await,
        Err(e) => e.into_response(),
    }
}

/// Answers 403 unless the request carries header `x-api-key` equal to `key`.
async fn check_api_key(key: Arc<[u8]>, req: Request, next: Next) -> Response {
    match req.headers().get("x-api-key") {
        Some(given) if constant_time_eq(given.as_bytes(), &key) => next.run(req).await,
        Some(_) => ApiError::new(StatusCode::FORBIDDEN, "Invalid API key").into_response(),
        None => {
            ApiError::new(StatusCode::FORBIDDEN, "Missing authentication headers").into_response()
        }
    }
}

/// Whether `a == b`, in time that depends on their lengths only.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// Unknown paths, answered as LangGraph's server server does.
async fn not_found() -> ApiError {
    ApiError::not_found("Not Found")
}
