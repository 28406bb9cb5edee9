//! Requests to a server's router without a socket (`Router::oneshot`), shared by the tests.

#![allow(clippy::unwrap_used, dead_code)]

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::Value as Json;
use tower::ServiceExt;

/// Sends `method uri` with `body` as JSON; the status and the body as text.
pub(crate) async fn call(
    app: &Router,
    method: Method,
    uri: &str,
    body: Option<Json>,
) -> (StatusCode, String) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
        .unwrap();
    let res = app.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let bytes = axum::body::to_bytes(res.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

/// Like [`call`], the body parsed as JSON (`null` when it is not).
pub(crate) async fn json_call(
    app: &Router,
    method: Method,
    uri: &str,
    body: Option<Json>,
) -> (StatusCode, Json) {
    let (status, text) = call(app, method, uri, body).await;
    (status, serde_json::from_str(&text).unwrap_or(Json::Null))
}
