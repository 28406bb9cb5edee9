//! `GET /openapi.json` and `GET /docs`: the API's OpenAPI 3.1 document and a page showing it.
//!
//! The document is not written by hand: every handler carries a `#[utoipa::path]` annotation
//! and the router that serves the routes ([`utoipa_axum::router::OpenApiRouter`]) collects
//! them, with the schemas of the request and response types they name, so a route cannot be
//! served without being described. What every operation shares (the error body, the API key)
//! is added here once.

use axum::body::Bytes;

use axum::Extension;
use axum::http::header::CONTENT_TYPE;
use axum::response::{Html, IntoResponse, Response};
use serde::Serialize;
use utoipa::openapi::path::Operation;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    ContentBuilder, InfoBuilder, OpenApi, Ref, RefOr, Required, ResponseBuilder, Tag,
};
use utoipa::{PartialSchema, ToSchema};

/// The body of every error answer: what was wrong, in words.
#[derive(Serialize, ToSchema)]
#[schema(as = ErrorResponse)]
pub(crate) struct ErrorBody {
    /// What was wrong (for a body that does not fit: the field and why).
    detail: String,
}

/// A search request's body: its filters and its order and paging, side by side.
#[derive(Serialize, ToSchema)]
pub(crate) struct Searched<T: ToSchema> {
    #[serde(flatten)]
    filters: T,
    #[serde(flatten)]
    paging: crate::records::Paging,
}

/// A body read as two shapes at once (a cron's own fields and the run request it makes).
#[derive(Serialize, ToSchema)]
pub(crate) struct Both<A: ToSchema, B: ToSchema> {
    #[serde(flatten)]
    first: A,
    #[serde(flatten)]
    second: B,
}

/// The name of the API-key security scheme.
const API_KEY_SCHEME: &str = "x-api-key";

/// Finishes the document the router collected: the API's title and version, the error
/// answers every operation may give, and — when the server has an API key — the key on
/// every route but the public ones.
pub(crate) fn finish(mut doc: OpenApi, api_key: bool, public: &[String]) -> OpenApi {
    doc.info = InfoBuilder::new()
        .title("stategraph Agent Server")
        .version(env!("CARGO_PKG_VERSION"))
        .description(Some(
            "LangGraph's Agent Server API: assistants, threads, runs (with server-sent \
             event streams), crons, the cross-thread store, and the server's metrics.",
        ))
        .build();
    let error = ResponseBuilder::new()
        .description("The request was refused or failed; `detail` says why.")
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorResponse")))
                .build(),
        )
        .build();
    let components = doc.components.get_or_insert_with(Default::default);
    components
        .schemas
        .insert("ErrorResponse".into(), ErrorBody::schema());
    if api_key {
        components.security_schemes.insert(
            API_KEY_SCHEME.into(),
            RefOr::T(SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new(
                "x-api-key",
            )))),
        );
    }
    let mut tags: Vec<String> = Vec::new();
    for (path, item) in doc.paths.paths.iter_mut() {
        let protected = !public.contains(path);
        for op in operations(item) {
            for status in ["4XX", "5XX"] {
                op.responses
                    .responses
                    .entry(status.into())
                    .or_insert_with(|| RefOr::T(error.clone()));
            }
            if api_key && protected {
                op.security = Some(vec![SecurityRequirement::new(
                    API_KEY_SCHEME,
                    Vec::<String>::new(),
                )]);
            }
            for tag in op.tags.iter().flatten() {
                if !tags.contains(tag) {
                    tags.push(tag.clone());
                }
            }
            if let Some(RefOr::T(body)) = op.request_body.as_mut() {
                // A run-creating body may be empty (`{}` is the default), but a body there is.
                body.required = Some(Required::True);
            }
        }
    }
    doc.tags = Some(tags.into_iter().map(Tag::new).collect());
    doc
}

fn operations(item: &mut utoipa::openapi::PathItem) -> impl Iterator<Item = &mut Operation> {
    [
        item.get.as_mut(),
        item.put.as_mut(),
        item.post.as_mut(),
        item.delete.as_mut(),
        item.options.as_mut(),
        item.head.as_mut(),
        item.patch.as_mut(),
        item.trace.as_mut(),
    ]
    .into_iter()
    .flatten()
}

/// The document as served: rendered once, shared by every answer.
#[derive(Clone)]
pub(crate) struct Served {
    json: Bytes,
    page: Bytes,
}

impl Served {
    pub(crate) fn new(doc: &OpenApi) -> Self {
        let json = doc.to_json().unwrap_or_else(|e| {
            // Serializing a document of plain data cannot fail; if it did, say so in it.
            format!(r#"{{"openapi":"3.1.0","info":{{"title":"unavailable: {e}","version":""}}}}"#)
        });
        let page = docs_page(&json);
        Self {
            json: Bytes::from(json),
            page: Bytes::from(page),
        }
    }
}

/// `GET /openapi.json`: this document.
#[utoipa::path(
    get,
    path = "/openapi.json",
    operation_id = "get_openapi",
    tag = "System",
    responses((status = 200, description = "The API's OpenAPI 3.1 document.", body = serde_json::Value))
)]
pub(crate) async fn document(Extension(served): Extension<Served>) -> Response {
    ([(CONTENT_TYPE, "application/json")], served.json).into_response()
}

/// `GET /docs`: a page that shows this document.
#[utoipa::path(
    get,
    path = "/docs",
    operation_id = "get_docs",
    tag = "System",
    responses((status = 200, description = "The API's reference, as a web page.", content_type = "text/html"))
)]
pub(crate) async fn docs(Extension(served): Extension<Served>) -> Response {
    Html(served.page).into_response()
}

/// `POST /mcp/`: the MCP endpoint (streamable HTTP; served by the MCP SDK, described here).
#[utoipa::path(
    post,
    path = "/mcp/",
    operation_id = "post_mcp",
    tag = "MCP",
    request_body(content = serde_json::Value, description = "A JSON-RPC request, notification or response of the Model Context Protocol."),
    responses(
        (status = 200, description = "The JSON-RPC answer (JSON, or server-sent events when the call streams)."),
        (status = 202, description = "A notification or response, accepted.")
    )
)]
#[allow(dead_code, reason = "describes a route that the MCP service answers")]
pub(crate) async fn mcp_post() {}

/// `GET /mcp/`: a session's stream of server-to-client messages.
#[utoipa::path(
    get,
    path = "/mcp/",
    operation_id = "get_mcp",
    tag = "MCP",
    params(("Mcp-Session-Id" = Option<String>, Header, description = "The session.")),
    responses((status = 200, description = "The session's messages (server-sent events).", content_type = "text/event-stream"))
)]
#[allow(dead_code, reason = "describes a route that the MCP service answers")]
pub(crate) async fn mcp_get() {}

/// `DELETE /mcp/`: ends a session.
#[utoipa::path(
    delete,
    path = "/mcp/",
    operation_id = "delete_mcp",
    tag = "MCP",
    params(("Mcp-Session-Id" = Option<String>, Header, description = "The session.")),
    responses((status = 202, description = "The session ended."))
)]
#[allow(dead_code, reason = "describes a route that the MCP service answers")]
pub(crate) async fn mcp_delete() {}

/// The routes served by a service of their own (not handlers), described for the document.
#[derive(utoipa::OpenApi)]
#[openapi(paths(mcp_post, mcp_get, mcp_delete))]
pub(crate) struct Services;

/// A page that renders `json` (the document, inlined so the page needs no second request)
/// with Scalar's API reference viewer, loaded from its CDN.
fn docs_page(json: &str) -> String {
    // The document goes into a <script> element as a JSON string: escaping `<` keeps any
    // `</script>` inside it from closing the element.
    let config = serde_json::json!({ "content": json }).to_string();
    let config = config.replace('<', "\\u003c");
    format!(
        r#"<!doctype html>
<html>
  <head>
    <title>stategraph Agent Server API</title>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
  </head>
  <body>
    <script id="api-reference"></script>
    <script>
      document.getElementById('api-reference').dataset.configuration = JSON.stringify({config});
    </script>
    <script src="https://cdn.jsdelivr.net/npm/@scalar/api-reference"></script>
  </body>
</html>
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_cannot_be_closed_by_the_document() {
        let page = docs_page(r#"{"x":"</script><script>alert(1)</script>"}"#);
        assert_eq!(page.matches("</script>").count(), 3, "{page}");
        assert!(page.contains("\\u003c/script>"));
    }
}
