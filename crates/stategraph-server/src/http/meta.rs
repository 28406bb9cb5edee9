//! `GET /ok` and `GET /info`.

use axum::Json;
use serde_json::{Value as Json_, json};

/// `GET /ok`: the server is up.
pub(crate) async fn ok() -> Json<Json_> {
    Json(json!({ "ok": true }))
}

/// `GET /info`: version and feature flags.
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
