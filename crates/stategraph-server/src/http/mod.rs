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
use axum::routing::{get, post};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};

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
mod runs;
mod store;
mod thread_stream;
mod threads;

pub use store::MAX_STORE_TTL_MINUTES;

/// The API's routes over `state`: CORS as `cors` says, the API key `api_key` (if any)
/// required on every route but the public ones.
pub(crate) fn router(state: &Arc<AppState>, cors: &Cors, api_key: Option<&str>) -> Router {
    let public = Router::new()
        .route("/ok", get(meta::ok))
        .route("/info", get(meta::info));
    crate::prometheus::install();
    let protected = protected_routes()
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

/// Every route but the public ones.
fn protected_routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/metrics", get(crate::prometheus::scrape))
        .route("/assistants", post(assistants::create))
        .route("/assistants/search", post(assistants::search))
        .route("/assistants/count", post(assistants::count))
        .route(
            "/assistants/{assistant_id}",
            get(assistants::get_one)
                .patch(assistants::update)
                .delete(assistants::delete),
        )
        .route("/assistants/{assistant_id}/graph", get(assistants::graph))
        .route(
            "/assistants/{assistant_id}/schemas",
            get(assistants::schemas),
        )
        .route(
            "/assistants/{assistant_id}/subgraphs",
            get(assistants::subgraphs),
        )
        .route(
            "/assistants/{assistant_id}/versions",
            post(assistants::versions),
        )
        .route(
            "/assistants/{assistant_id}/latest",
            post(assistants::set_latest),
        )
        .route("/threads", post(threads::create))
        .route("/threads/search", post(threads::search))
        .route("/threads/count", post(threads::count))
        .route("/threads/prune", post(threads::prune))
        .route("/threads/{thread_id}/stream", get(thread_stream::join))
        .route("/threads/{thread_id}/copy", post(threads::copy))
        .route(
            "/threads/{thread_id}",
            get(threads::get_one)
                .patch(threads::patch)
                .delete(threads::delete),
        )
        .route(
            "/threads/{thread_id}/state",
            get(threads::get_state).post(threads::update_state),
        )
        .route(
            "/threads/{thread_id}/state/checkpoint",
            post(threads::post_state_at),
        )
        .route(
            "/threads/{thread_id}/state/{checkpoint_id}",
            get(threads::get_state_at),
        )
        .route("/threads/{thread_id}/history", post(threads::history))
        .route(
            "/threads/{thread_id}/runs",
            get(runs::list).post(runs::create_background),
        )
        .route("/threads/{thread_id}/runs/wait", post(runs::wait_thread))
        .route(
            "/threads/{thread_id}/runs/stream",
            post(runs::stream_thread),
        )
        .route(
            "/threads/{thread_id}/runs/{run_id}",
            get(runs::get_one).delete(runs::delete_one),
        )
        .route("/threads/{thread_id}/runs/{run_id}/join", get(runs::join))
        .route(
            "/threads/{thread_id}/runs/{run_id}/stream",
            get(joins::join_stream),
        )
        .route("/runs/cancel", post(cancel::cancel_many))
        .route(
            "/store/items",
            get(store::get_item)
                .put(store::put_item)
                .delete(store::delete_item),
        )
        .route("/store/items/search", post(store::search_items))
        .route("/store/namespaces", post(store::list_namespaces))
        .route("/runs", post(runs::create_stateless))
        .route("/runs/crons", post(crons::create))
        .route("/runs/crons/search", post(crons::search))
        .route("/runs/crons/count", post(crons::count))
        .route(
            "/runs/crons/{cron_id}",
            get(crons::get_one)
                .patch(crons::update)
                .delete(crons::delete),
        )
        .route(
            "/threads/{thread_id}/runs/crons",
            post(crons::create_for_thread),
        )
        .route("/runs/batch", post(runs::create_batch))
        .route("/runs/wait", post(runs::wait_stateless))
        .route("/runs/stream", post(runs::stream_stateless))
        .route(
            "/threads/{thread_id}/runs/{run_id}/cancel",
            post(cancel::cancel),
        )
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

/// Makes sure the default assistants exist before a request is answered.
async fn ready_first(state: Arc<AppState>, req: Request, next: Next) -> Response {
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

/// Unknown paths, answered as the reference server does.
async fn not_found() -> ApiError {
    ApiError::not_found("Not Found")
}
