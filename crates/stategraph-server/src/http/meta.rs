//! `GET /ok` and `GET /info`.

use axum::Json;
use serde_json::{Value as Json_, json};

/// `GET /ok`: the server is up.
#[utoipa::path(
    get,
    path = "/ok",
    operation_id = "get_ok",
    tag = "System",
    responses((status = 200, description = "The server is up.", body = serde_json::Value))
)]
pub(crate) async fn ok() -> Json<Json_> {
    Json(json!({ "ok": true }))
}

/// `GET /info`: version and feature flags.
#[utoipa::path(
    get,
    path = "/info",
    operation_id = "get_info",
    tag = "System",
    responses((status = 200, description = "Version and feature flags.", body = serde_json::Value))
)]
pub(crate) async fn info() -> Json<Json_> {
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "langgraph_py_version": crate::request::LANGGRAPH_VERSION,
        "flags": {
            "assistants": true,
            "crons": false,
            "langsmith": false,
            "langsmith_tracing_replicas": false,
        },
        "host": { "kind": "self-hosted", "project_id": null, "host_revision_id": null,
                  "revision_id": null, "tenant_id": null },
    }))
}
