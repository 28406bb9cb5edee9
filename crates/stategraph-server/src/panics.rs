//! A panic while a request is answered (a bug, here or in a backend) becomes a 500 with a JSON
//! `{"detail": …, "request_id": …}` body and an `x-request-id` header, instead of a dropped
//! connection; the same id goes with the panic's message to standard error, so that the
//! answer a client got can be found in the server's log.
//!
//! Every request has an id: its `x-request-id` header when it has a usable one (as
//! LangGraph's server takes it), else a new UUID.

use std::any::Any;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::json;

/// The header that carries a request's id.
const REQUEST_ID: &str = "x-request-id";

/// The longest request id taken from a request's header.
const MAX_ID_LEN: usize = 200;

tokio::task_local! {
    /// The id of the request being answered.
    static CURRENT: Arc<str>;
}

/// The id of request `req`: its `x-request-id` when usable (as LangGraph's server takes it),
/// else a new UUID.
pub(crate) fn request_id(req: &Request) -> Arc<str> {
    let given = req
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty() && v.len() <= MAX_ID_LEN);
    match given {
        Some(v) => Arc::from(v),
        None => Arc::from(uuid::Uuid::new_v4().to_string()),
    }
}

/// Runs `answer` (a request's) with its id `id` known to [`panic_response`].
pub(crate) async fn with_request_id<F: std::future::Future>(id: Arc<str>, answer: F) -> F::Output {
    CURRENT.scope(id, answer).await
}

/// The answer to a request whose handler panicked with `panic` (tower-http's `CatchPanic`
/// calls it while the request's future is polled, so within [`with_request_id`]).
pub(crate) fn panic_response(panic: Box<dyn Any + Send + 'static>) -> Response<Body> {
    let id = CURRENT
        .try_with(Arc::clone)
        .unwrap_or_else(|_| Arc::from(uuid::Uuid::new_v4().to_string()));
    let message = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("(no message)");
    // Besides the panic hook's output: it ties the panic to the answer.
    tracing::error!(
        request_id = &*id,
        panic = message,
        "the request's handler panicked"
    );
    let body = json!({
        "detail": format!(
            "Internal server error: the server failed while answering this request \
             (request id {id}); its log has the details under that id"
        ),
        "request_id": &*id,
    });
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Ok(v) = HeaderValue::from_str(&id) {
        headers.insert(REQUEST_ID, v);
    }
    response
}
