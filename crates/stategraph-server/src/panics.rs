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
use axum::middleware::Next;
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

/// Middleware: answers `req` with its id known to [`panic_response`].
pub(crate) async fn with_request_id(req: Request, next: Next) -> Response {
    let given = req
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty() && v.len() <= MAX_ID_LEN);
    let id: Arc<str> = match given {
        Some(v) => Arc::from(v),
        None => Arc::from(uuid::Uuid::new_v4().to_string()),
    };
    CURRENT.scope(id, next.run(req)).await
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
    // The only trace of the panic besides the panic hook's: it ties the two to the answer.
    eprintln!("stategraph-server: request {id} failed: the handler panicked: {message}");
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
