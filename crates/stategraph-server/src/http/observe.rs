//! Every request observed: its id (the `x-request-id` it came with, or a new one), a span
//! (`http.request`: method, route template, status; never bodies, headers or API keys), one
//! log line when it is answered, and LangGraph's HTTP metrics (`lg_api_http_requests_total`
//! and `lg_api_http_requests_latency`, in milliseconds, by method and route template; as the
//! reference, not for its meta routes).

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;
use tracing::field::Empty;

use crate::panics;

/// Routes LangGraph's server leaves out of its HTTP metrics.
const UNCOUNTED: [&str; 5] = ["/ok", "/info", "/metrics", "/docs", "/openapi.json"];

/// Middleware: answers `req`, observed.
pub(crate) async fn observe(req: Request, next: Next) -> Response {
    let id = panics::request_id(&req);
    let method = req.method().as_str().to_owned();
    // The route template, not the path: ids stay out of labels and span names.
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_owned();
    let span = tracing::info_span!(
        "http.request",
        otel.name = format_args!("{method} {route}"),
        otel.kind = "server",
        http.request.method = method.as_str(),
        http.route = route.as_str(),
        http.response.status_code = Empty,
        request_id = &*id,
    );
    let started = Instant::now();
    let response = panics::with_request_id(id, next.run(req))
        .instrument(span.clone())
        .await;
    let elapsed = started.elapsed();
    let status = response.status().as_u16();
    span.record("http.response.status_code", status);
    span.in_scope(|| {
        tracing::info!(
            status,
            latency_ms = elapsed.as_secs_f64() * 1000.0,
            "{method} {route}"
        );
    });
    if !UNCOUNTED.contains(&route.as_str()) {
        let status_label = status.to_string();
        metrics::counter!(
            "lg_api_http_requests_total",
            "method" => method.clone(),
            "path" => route.clone(),
            "status" => status_label,
        )
        .increment(1);
        metrics::histogram!(
            "lg_api_http_requests_latency",
            "method" => method,
            "path" => route,
        )
        .record(elapsed.as_secs_f64() * 1000.0);
    }
    let kind = match status {
        400..=499 => Some("client"),
        500..=599 => Some("server"),
        _ => None,
    };
    if let Some(kind) = kind {
        metrics::counter!("stategraph_server_errors_total", "kind" => kind).increment(1);
    }
    response
}
