//! `stategraph serve` under property-based fuzzing: schemathesis generates requests from the
//! reference Agent Server's own OpenAPI document (valid and invalid ones, and sequences that
//! follow the document's links) and sends them to the server on SQLite and on Postgres, with
//! a fixed seed and then a fresh one each run; then it does the same from the server's own
//! `/openapi.json`, which must first validate as OpenAPI 3.1 and describe every operation of
//! the reference document that the server serves. The server must answer every request:
//! no 5xx for anything a client sends, no panic, no dropped connection.
//!
//! `scripts/api-fuzz-env.sh` installs schemathesis, openapi-spec-validator and the reference
//! document (`scripts/test.sh` runs it); without them the tests fail, naming the script.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value as Json;

mod served;
use served::Served;

/// The operations of the reference document that `stategraph serve` does not serve; they are
/// left out of the document the fuzzer reads.
const NOT_SERVED: &[(&str, &str)] = &[
    ("/assistants/{assistant_id}/subgraphs/{namespace}", "get"),
    ("/threads/{thread_id}/storage", "get"),
    ("/threads/{thread_id}/history", "get"),
    ("/threads/{thread_id}/stream/events", "post"),
    ("/threads/{thread_id}/commands", "post"),
];

/// Operations served but left out of fuzzing: a thread's stream never ends, so a fuzzer would
/// wait on each request.
const NEVER_ENDS: &[(&str, &str)] = &[
    ("/threads/{thread_id}/stream", "get"),
    // A session's stream (the MCP endpoint's GET) stays open.
    ("/mcp/", "get"),
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

/// `doc` without the operations `drop`, written into `dir` as `name`.
fn without(mut doc: Json, drop: &[(&str, &str)], dir: &Path, name: &str) -> PathBuf {
    let paths = doc["paths"].as_object_mut().unwrap();
    for (path, method) in drop {
        let ops = paths
            .get_mut(*path)
            .and_then(Json::as_object_mut)
            .unwrap_or_else(|| panic!("the document has no path {path}"));
        assert!(
            ops.remove(*method).is_some(),
            "the document has no {method} {path}"
        );
        if !ops.keys().any(|k| METHODS.contains(&k.as_str())) {
            paths.remove(*path);
        }
    }
    let out = dir.join(name);
    std::fs::write(&out, serde_json::to_vec(&doc).unwrap()).unwrap();
    out
}

const METHODS: [&str; 7] = ["get", "put", "post", "delete", "patch", "head", "options"];

/// Every `(path, method)` of a document.
fn operations(doc: &Json) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for method in ops.as_object().unwrap().keys() {
            if METHODS.contains(&method.as_str()) {
                out.push((path.clone(), method.clone()));
            }
        }
    }
    out
}

fn reference_document(env: &Path) -> Json {
    let text = std::fs::read_to_string(env.join("reference-openapi.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The server's own `/openapi.json`, after openapi-spec-validator accepted it as an OpenAPI
/// 3.1 document; it must describe every operation of the reference document that the server
/// serves.
fn own_document(env: &Path, served: &Served, reference: &Json) -> Json {
    let script = r#"
import json, sys, urllib.request
from openapi_spec_validator import validate
from openapi_spec_validator.validation import OpenAPIV31SpecValidator
doc = json.load(urllib.request.urlopen(sys.argv[1] + "/openapi.json"))
assert doc["openapi"].startswith("3.1"), doc["openapi"]
validate(doc, cls=OpenAPIV31SpecValidator)
json.dump(doc, sys.stdout)
"#;
    let out = Command::new(env.join("bin/python"))
        .args(["-c", script, &format!("http://{}", served.addr)])
        .output()
        .expect("running openapi-spec-validator");
    assert!(
        out.status.success(),
        "/openapi.json is not a valid OpenAPI 3.1 document:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let own: Json = serde_json::from_slice(&out.stdout).unwrap();
    let ours = operations(&own);
    let missing: Vec<_> = operations(reference)
        .into_iter()
        .filter(|(p, m)| !NOT_SERVED.contains(&(p.as_str(), m.as_str())))
        .filter(|op| !ours.contains(op))
        .collect();
    assert!(
        missing.is_empty(),
        "/openapi.json does not describe these served operations: {missing:?}"
    );
    own
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
            // One worker: schemathesis's workers are threads, and generating cases parses
            // Python source (`ast.parse`), which CPython 3.11 does not do safely from two
            // threads at once ("SystemError: AST constructor recursion depth mismatch",
            // python/cpython#106905): an error of the fuzzer, not of the server.
            "--workers",
            "1",
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
    // The report comes last: a CI log shows a failure's tail, and the server's request log
    // (a line per request) would hide it. Of that log, what is not routine, then its end.
    let lines: Vec<&str> = stderr.lines().collect();
    let unusual: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| !l.contains(" INFO ") || l.contains("status=5"))
        .collect();
    let tail = lines
        .get(lines.len().saturating_sub(20)..)
        .unwrap_or_default();
    assert!(
        out.status.success() && alive && !stderr.contains("panicked"),
        "schemathesis (seed {seed}) against {}: exit {:?}, server alive: {alive}\n\
         server stderr, all but routine request lines ({} of {}):\n{}\n\
         server stderr, last lines:\n{}\n\
         schemathesis stderr:\n{}\n\
         schemathesis report (seed {seed}):\n{report}",
        served.addr,
        out.status.code(),
        unusual.len(),
        lines.len(),
        unusual.join("\n"),
        tail.join("\n"),
        String::from_utf8_lossy(&out.stderr),
    );
}

/// From the reference document: a fixed seed (the same requests every run), then a fresh
/// one (printed; set `STATEGRAPH_API_FUZZ_SEED` to it to run the same requests again). Then
/// from the server's own document, with the fixed seed.
fn fuzz(db: &str) {
    let env = fuzz_env();
    let dir = tempfile::tempdir().unwrap();
    let reference = reference_document(&env);
    let drop: Vec<_> = NOT_SERVED.iter().chain(NEVER_ENDS).copied().collect();
    let document = without(reference.clone(), &drop, dir.path(), "reference.json");
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
    let own = own_document(&env, &served, &reference);
    let own = without(own, NEVER_ENDS, dir.path(), "own.json");
    schemathesis(&env, &own, &mut served, 20261127);
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
