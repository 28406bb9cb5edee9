//! What a request may ask of a run's and a thread's time, and the values a search is sorted
//! and filtered by, against the reference server (`langgraph dev`, started here by
//! `scripts/reference-server.sh`) and stategraph's in the same test: the same requests, the
//! same answers (a transcript each, equal but for [`DELIBERATE`]).
//!
//! - `after_seconds`: the run is created `pending`, dated that much later, its thread busy;
//!   a run enqueued after it on the thread without a delay goes first; it starts once due.
//! - A thread's `ttl`: accepted on create and patch, refused when it does not fit; stategraph
//!   sweeps a thread whose TTL ran out (the reference's in-memory server never does, its
//!   Postgres one does).
//! - `sort_by`, `sort_order`, `status`: values outside their enumerations are refused (422,
//!   worded as the reference's schema words them), a run listing's unknown status finds
//!   nothing.
//!
//! Needs the reference server's environment (`scripts/test.sh` sets it up). Fails, never
//! skips, without it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

#[path = "common/http.rs"]
mod http;

use std::time::{Duration, Instant};

use common::reference::{Reference, transcript_diffs};
use common::seed_server::{seed_graph, serve};
use http::call;
use serde_json::{Value as Json, json};

/// Where the two servers deliberately differ, by transcript key.
const DELIBERATE: &[(&str, &str)] = &[(
    "ttl_swept",
    "the reference's in-memory server accepts a thread's TTL and never sweeps the thread (its \
     Postgres server does); stategraph sweeps it",
)];

/// The port of a base URL `http://127.0.0.1:PORT`.
fn port_of(base: &str) -> u16 {
    base.rsplit(':').next().unwrap().parse().unwrap()
}

fn new_thread(port: u16, body: Json) -> String {
    let (status, thread) = call(port, "POST", "/threads", Some(body));
    assert_eq!(status, 200, "{thread}");
    thread["thread_id"].as_str().unwrap().to_owned()
}

/// The status of run `run` of `thread`.
fn run_status(port: u16, thread: &str, run: &str) -> Json {
    call(port, "GET", &format!("/threads/{thread}/runs/{run}"), None).1["status"].clone()
}

/// The same requests to the server on `port`: what it answered, by key.
fn transcript(port: u16) -> Json {
    let mut out = serde_json::Map::new();
    // Values outside their enumerations.
    for (key, path, body) in [
        (
            "threads_sort_by",
            "/threads/search",
            json!({"sort_by": "nope"}),
        ),
        (
            "threads_sort_order",
            "/threads/search",
            json!({"sort_order": "up"}),
        ),
        (
            "threads_status",
            "/threads/search",
            json!({"status": "sleeping"}),
        ),
        (
            "threads_status_type",
            "/threads/search",
            json!({"status": 5}),
        ),
        (
            "threads_count_status",
            "/threads/count",
            json!({"status": "x"}),
        ),
        (
            "assistants_sort_by",
            "/assistants/search",
            json!({"sort_by": "nope"}),
        ),
        (
            "assistants_sort_order",
            "/assistants/search",
            json!({"sort_order": "up"}),
        ),
        (
            "crons_sort_by",
            "/runs/crons/search",
            json!({"sort_by": "nope"}),
        ),
        (
            "crons_sort_order",
            "/runs/crons/search",
            json!({"sort_order": "up"}),
        ),
    ] {
        let (status, body) = call(port, "POST", path, Some(body));
        out.insert(key.into(), json!([status, body["detail"]]));
    }
    let (status, found) = call(
        port,
        "POST",
        "/threads/search",
        Some(json!({"sort_by": "status", "sort_order": "asc", "limit": 1})),
    );
    out.insert(
        "threads_sorted_by_status".into(),
        json!([status, found.is_array()]),
    );

    // A run that waits its time, and one behind it on the thread that does not.
    let thread = new_thread(port, json!({}));
    let runs = format!("/threads/{thread}/runs");
    let (status, delayed) = call(
        port,
        "POST",
        &runs,
        Some(json!({"assistant_id": "seed", "input": {"foo": "", "bar": []}, "after_seconds": 3})),
    );
    let at = |field: &str| {
        chrono::DateTime::parse_from_rfc3339(delayed[field].as_str().unwrap()).unwrap()
    };
    // Dated when it may start: `after_seconds` after it was made.
    let ahead = (at("created_at") - at("updated_at")).num_milliseconds();
    out.insert(
        "delayed".into(),
        json!([status, delayed["status"], (2000..=3500).contains(&ahead)]),
    );
    let delayed = delayed["run_id"].as_str().unwrap().to_owned();
    let (_, t) = call(port, "GET", &format!("/threads/{thread}"), None);
    out.insert("delayed_thread".into(), t["status"].clone());
    let (status, now) = call(
        port,
        "POST",
        &runs,
        Some(json!({"assistant_id": "seed", "input": {"foo": "", "bar": []}})),
    );
    assert_eq!(status, 200, "{now}");
    let now = now["run_id"].as_str().unwrap().to_owned();
    // The one without a delay ends first (the reference looks at its queue every 0.5 s).
    let start = Instant::now();
    while run_status(port, &thread, &now) != "success" && start.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(50));
    }
    out.insert(
        "before_due".into(),
        json!([
            run_status(port, &thread, &now),
            run_status(port, &thread, &delayed)
        ]),
    );
    let start = Instant::now();
    while run_status(port, &thread, &delayed) != "success"
        && start.elapsed() < Duration::from_secs(8)
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    out.insert("after_due".into(), run_status(port, &thread, &delayed));
    let (_, listed) = call(port, "GET", &format!("{runs}?status=nope"), None);
    out.insert("runs_unknown_status".into(), listed);

    // A thread's TTL.
    for (key, body) in [
        (
            "ttl_strategy",
            json!({"ttl": {"strategy": "later", "ttl": 1}}),
        ),
        ("ttl_type", json!({"ttl": 5})),
        ("ttl_minutes_type", json!({"ttl": {"ttl": "x"}})),
    ] {
        let (status, body) = call(port, "POST", "/threads", Some(body));
        out.insert(key.into(), json!([status, body["detail"]]));
    }
    let patched = new_thread(port, json!({}));
    let (status, _) = call(
        port,
        "PATCH",
        &format!("/threads/{patched}"),
        Some(json!({"ttl": {"strategy": "keep_latest", "ttl": 60}})),
    );
    out.insert("ttl_patch".into(), json!(status));
    let short = new_thread(port, json!({"ttl": {"strategy": "delete", "ttl": 0.02}}));
    std::thread::sleep(Duration::from_secs(3));
    let (status, _) = call(port, "GET", &format!("/threads/{short}"), None);
    out.insert("ttl_swept".into(), json!(status));
    Json::Object(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delays_ttls_and_search_values_match_the_reference_server() {
    let (base, serving, _dir) = serve(|b| {
        b.graph("seed", seed_graph())
            .thread_ttl_sweep(Duration::from_millis(200))
    })
    .await;
    let port = port_of(&base);
    let ours = tokio::task::spawn_blocking(move || transcript(port))
        .await
        .unwrap();
    serving.abort();

    let theirs = tokio::task::spawn_blocking(|| {
        let reference = Reference::start(&[]);
        transcript(reference.port)
    })
    .await
    .unwrap();

    let diffs = transcript_diffs(&ours, &theirs, DELIBERATE);
    assert!(
        diffs.is_empty(),
        "the transcripts differ:\n{}\n\nours: {ours:#}\n\nreference: {theirs:#}",
        diffs.join("\n")
    );
    // What both said, spelled out.
    assert_eq!(ours["delayed"], json!([200, "pending", true]));
    assert_eq!(ours["delayed_thread"], "busy");
    assert_eq!(ours["before_due"], json!(["success", "pending"]));
    assert_eq!(ours["after_due"], "success");
    assert_eq!(ours["threads_sort_by"][0], 422);
    assert_eq!(ours["runs_unknown_status"], json!([]));
    assert_eq!(ours["ttl_strategy"][0], 422);
    assert_eq!(ours["ttl_patch"], 200);
    // The deliberate difference.
    assert_eq!(ours["ttl_swept"], 404, "the thread's TTL ran out: swept");
    assert_eq!(theirs["ttl_swept"], 200);
}
