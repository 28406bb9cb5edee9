//! `stategraph serve` under property-based fuzzing: schemathesis generates requests from the
//! reference Agent Server's own OpenAPI document (valid and invalid ones, and sequences that
//! follow the document's links) and sends them to the server on SQLite and on Postgres, with
//! a fixed seed and then a fresh one each run. The server must answer every one of them:
//! no 5xx for anything a client sends, no panic, no dropped connection.
//!
//! `scripts/api-fuzz-env.sh` installs schemathesis and the document (`scripts/test.sh` runs
//! it); without them the tests fail, naming the script.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value as Json;

mod served;
use served::Served;

/// The operations of the reference document that `stategraph serve` does not serve yet (and
/// one it serves that never answers to the end); they are left out of the document the fuzzer
/// reads.
const NOT_SERVED: &[(&str, &str)] = &[
    ("/assistants/{assistant_id}/subgraphs/{namespace}", "get"),
    ("/threads/{thread_id}/storage", "get"),
    ("/threads/{thread_id}/history", "get"),
    // Served, but a thread's stream never ends: a fuzzer would wait on each request.
    ("/threads/{thread_id}/stream", "get"),
    ("/threads/{thread_id}/stream/events", "post"),
    ("/threads/{thread_id}/commands", "post"),
    ("/a2a/{assistant_id}", "post"),
    ("/mcp/", "get"),
    ("/mcp/", "post"),
    ("/mcp/", "delete"),
    ("/metrics", "get"),
    ("/docs", "get"),
];

/// Where `scripts/api-fuzz-env.sh` installed schemathesis and the reference document.
fn fuzz_env() -> PathBuf {
    let dir = std::env::var_os("STATEGRAPH_API_FUZZ_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default())
                .join(".cache/stategraph/api-fuzz-venv")
        });
    assert!(
        dir.join("bin/schemathesis").exists() && dir.join("reference-openapi.json").exists(),
        "schemathesis is not installed in {}: run `scripts/api-fuzz-env.sh` (scripts/test.sh \
         does) or set STATEGRAPH_API_FUZZ_VENV",
        dir.display()
    );
    dir
}

/// The reference document without the operations in [`NOT_SERVED`], written into `dir`.
fn served_document(env: &Path, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(env.join("reference-openapi.json")).unwrap();
    let mut doc: Json = serde_json::from_str(&text).unwrap();
    let paths = doc["paths"].as_object_mut().unwrap();
    for (path, method) in NOT_SERVED {
        let ops = paths
            .get_mut(*path)
            .and_then(Json::as_object_mut)
            .unwrap_or_else(|| panic!("the reference document has no path {path}"));
        assert!(
            ops.remove(*method).is_some(),
            "the reference document has no {method} {path}"
        );
        if !ops.keys().any(|k| {
            ["get", "put", "post", "delete", "patch", "head", "options"].contains(&k.as_str())
        }) {
            paths.remove(*path);
        }
    }
    let out = dir.join("openapi.json");
    std::fs::write(&out, serde_json::to_vec(&doc).unwrap()).unwrap();
    out
}

/// One schemathesis run with `seed`; panics with its report unless every check passed.
fn schemathesis(env: &Path, document: &Path, served: &mut Served, seed: u64) {
    let out = Command::new(env.join("bin/schemathesis"))
        .arg("run")
        .arg(document)
        .args(["--url", &format!("http://{}", served.addr)])
        .args(["--checks", "not_a_server_error"])
        .args(["--seed", &seed.to_string()])
        .args([
            "--max-examples",
            "15",
            "--workers",
            "2",
            "--request-timeout",
            "30",
        ])
        .args(["--suppress-health-check", "all", "--no-color"])
        .env("SCHEMATHESIS_HOOKS", "")
        // Its example database and caches go to the scratch directory, not the clone.
        .current_dir(document.parent().unwrap())
        .output()
        .expect("running schemathesis");
    let report = String::from_utf8_lossy(&out.stdout);
    let alive = served.child.try_wait().unwrap().is_none();
    let stderr = served.stderr.lock().unwrap().clone();
    assert!(
        out.status.success() && alive && !stderr.contains("panicked"),
        "schemathesis (seed {seed}) against {}: exit {:?}, server alive: {alive}\n{report}\n{}\n\
         server stderr:\n{stderr}",
        served.addr,
        out.status.code(),
        String::from_utf8_lossy(&out.stderr),
    );
}

/// A fixed seed (the same requests every run), then a fresh one (printed; set
/// `STATEGRAPH_API_FUZZ_SEED` to it to run the same requests again).
fn fuzz(db: &str) {
    let env = fuzz_env();
    let dir = tempfile::tempdir().unwrap();
    let document = served_document(&env, dir.path());
    let mut served = Served::start(db, &[]);
    schemathesis(&env, &document, &mut served, 20261126);
    // STATEGRAPH_API_FUZZ_SEED replays a printed one.
    let fresh = std::env::var("STATEGRAPH_API_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos()
                .into()
        });
    eprintln!("api_fuzz: fresh seed {fresh} on {db}");
    schemathesis(&env, &document, &mut served, fresh);
}

#[test]
fn the_http_api_answers_fuzzed_requests_without_server_errors_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    fuzz(&format!(
        "sqlite:{}",
        dir.path().join("fuzz.sqlite").display()
    ));
}

#[test]
fn the_http_api_answers_fuzzed_requests_without_server_errors_on_postgres() {
    let schema = stategraph_testkit::postgres::ScratchSchema::new("sg_fuzz");
    fuzz(&schema.url_with_public());
}
