//! `GET /openapi.json` and `GET /docs`: the document describes every route the router serves
//! (each operation answers something other than the unknown-route 404), its references all
//! resolve, its operation ids are unique, and the API key shows in it when the server has one.
//! (`stategraph-cli`'s `api_fuzz` test validates it as OpenAPI 3.1 and fuzzes the server
//! with it.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::HashSet;
use std::sync::Arc;

use axum::Router;
use axum::http::{Method, StatusCode};
use serde_json::Value as Json;
use stategraph_checkpoint::{InMemorySaver, Map, value};
use stategraph_graph::{DynState, END, START, Schema, StateGraph};
use stategraph_server::Server;
use stategraph_store::InMemoryStore;

mod common;
use common::{call, json_call};

fn router(api_key: Option<&str>) -> Router {
    let mut seed = StateGraph::<DynState>::with_schema(Schema::new().last_value("foo"));
    seed.add_node("a", |_s, _c| async {
        Ok(Map::from_iter([("foo", value!("a"))]))
    });
    seed.add_edge(START, "a").add_edge("a", END);
    let mut builder = Server::builder()
        .graph("seed", seed.compile().unwrap())
        .checkpointer(Arc::new(InMemorySaver::new()))
        .store(Arc::new(InMemoryStore::new()));
    if let Some(key) = api_key {
        builder = builder.api_key(key);
    }
    builder.build().unwrap().router()
}

/// Every `$ref` under `v`.
fn refs<'a>(v: &'a Json, out: &mut Vec<&'a str>) {
    match v {
        Json::Object(o) => {
            for (k, v) in o {
                match (k.as_str(), v) {
                    ("$ref", Json::String(r)) => out.push(r),
                    _ => refs(v, out),
                }
            }
        }
        Json::Array(a) => a.iter().for_each(|v| refs(v, out)),
        _ => {}
    }
}

#[tokio::test]
async fn the_document_describes_every_route_and_resolves() {
    let app = router(None);
    let (status, doc) = json_call(&app, Method::GET, "/openapi.json", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["title"], "stategraph Agent Server");
    let paths = doc["paths"].as_object().unwrap();
    let mut ids = HashSet::new();
    let mut operations = 0;
    for (path, item) in paths {
        for (method, op) in item.as_object().unwrap() {
            operations += 1;
            let id = op["operationId"].as_str().unwrap();
            assert!(ids.insert(id.to_owned()), "operationId {id} twice");
            assert!(
                op["responses"]["4XX"].is_object(),
                "{method} {path} does not describe its errors"
            );
            // The route exists: whatever it answers a request with no body and ids that are
            // not UUIDs (refused, 422), it is not the unknown-route answer.
            let uri = path
                .replace("{assistant_id}", "seed")
                .replace("{checkpoint_id}", "x")
                .replace(['{', '}'], "");
            if uri.ends_with("/stream") && method == "get" {
                continue; // a stream of a missing thread/run; its status is checked elsewhere
            }
            let m = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let (status, body) = call(&app, m, &uri, None).await;
            assert!(
                !(status == StatusCode::NOT_FOUND && body.contains("\"Not Found\"")),
                "{method} {path} is described but not served: {status} {body}"
            );
            assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
        }
    }
    assert!(operations >= 59, "only {operations} operations");
    for (path, method) in [
        ("/runs/crons", "post"),
        ("/threads/{thread_id}/runs/{run_id}/stream", "get"),
        ("/store/items", "put"),
        ("/metrics", "get"),
        ("/docs", "get"),
        ("/mcp/", "post"),
    ] {
        assert!(paths[path][method].is_object(), "{method} {path} missing");
    }
    // A run body's fields are described, with their types.
    let run = &doc["components"]["schemas"]["RunCreate"]["properties"];
    assert!(run["assistant_id"].is_object() && run["stream_mode"].is_object());
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(!all.is_empty());
    for r in all {
        let name = r.strip_prefix("#/components/schemas/").unwrap();
        assert!(
            doc["components"]["schemas"][name].is_object(),
            "{r} does not resolve"
        );
    }
}

#[tokio::test]
async fn the_docs_page_shows_the_document() {
    let app = router(None);
    let (status, page) = call(&app, Method::GET, "/docs", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("@scalar/api-reference"));
    assert!(page.contains("/threads/{thread_id}/runs/wait"));
}

#[tokio::test]
async fn with_an_api_key_the_document_asks_for_it_on_protected_routes() {
    let app = router(Some("sesame"));
    // The document and the page are public.
    let (status, doc) = json_call(&app, Method::GET, "/openapi.json", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        doc["components"]["securitySchemes"]["x-api-key"]["in"],
        "header"
    );
    assert_eq!(
        doc["paths"]["/threads"]["post"]["security"][0]["x-api-key"],
        serde_json::json!([])
    );
    assert!(doc["paths"]["/ok"]["get"].get("security").is_none());
    assert_eq!(
        call(&app, Method::GET, "/docs", None).await.0,
        StatusCode::OK
    );
    // Without the key, the API itself is refused.
    assert_eq!(
        call(&app, Method::POST, "/threads", None).await.0,
        StatusCode::FORBIDDEN
    );
}
