//! Several `stategraph serve` processes on one database — replicas behind a balancer, or a
//! rolling restart — on one SQLite file and on one Postgres database:
//!
//! - a thread cron firing every second for 20 s makes one run per tick across the
//!   processes, each run succeeds and applies its effect to the thread once;
//! - a rolling restart (process B started, then process A stopped with SIGTERM while slow
//!   runs execute on it) loses no run and ends none in error: each completes, on A within its
//!   grace or handed to B, which carries it on.
//!
//! Postgres is the local test server (`STATEGRAPH_TEST_POSTGRES_URL`), each test in a schema
//! of its own; a server that cannot be reached fails the tests.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod served;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};
use served::Served;

/// Calls the server at `addr`: the status and the JSON answer (`null` for none).
fn call(addr: &str, method: &str, path: &str, body: Option<Json>) -> (u16, Json) {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    conn.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked {
        unchunk(body)
    } else {
        body.to_owned()
    };
    (
        status,
        serde_json::from_str(body.trim()).unwrap_or(Json::Null),
    )
}

/// A chunked body's content.
fn unchunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// Polls `f` until it answers `Some`, for up to `limit`.
fn poll<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A new thread, created through the process at `addr`.
fn new_thread(addr: &str) -> String {
    let (status, thread) = call(addr, "POST", "/threads", Some(json!({})));
    assert_eq!(status, 200, "{thread}");
    thread["thread_id"].as_str().unwrap().to_owned()
}

/// Every run of `thread` (newest first), through the process at `addr`.
fn runs_of(addr: &str, thread: &str) -> Vec<Json> {
    let (status, runs) = call(
        addr,
        "GET",
        &format!("/threads/{thread}/runs?limit=1000"),
        None,
    );
    assert_eq!(status, 200, "{runs}");
    runs.as_array().unwrap().clone()
}

/// A thread cron every second on `db` for 20 s, with two processes serving it: one run per
/// tick, each `success`, each applied once.
fn a_cron_fires_once_per_tick(db: &str) {
    let a = Served::start(db, &[]);
    let b = Served::start(db, &[]);
    let thread = new_thread(&a.addr);
    let (status, cron) = call(
        &b.addr,
        "POST",
        &format!("/threads/{thread}/runs/crons"),
        Some(json!({"assistant_id": "seed", "schedule": "* * * * * *", "input": {}})),
    );
    assert_eq!(status, 200, "{cron}");
    let cron_id = cron["cron_id"].as_str().unwrap().to_owned();
    std::thread::sleep(Duration::from_secs(20));
    let (status, _) = call(&a.addr, "DELETE", &format!("/runs/crons/{cron_id}"), None);
    assert_eq!(status, 204);
    // What was already enqueued finishes.
    let runs = poll("the cron's runs to end", Duration::from_secs(30), || {
        let runs = runs_of(&b.addr, &thread);
        runs.iter()
            .all(|r| r["status"] != "pending" && r["status"] != "running")
            .then_some(runs)
    });
    assert!(
        (17..=22).contains(&runs.len()),
        "one run per tick of 20 s, not {}: {runs:?}",
        runs.len()
    );
    for run in &runs {
        assert_eq!(run["status"], "success", "{run}");
    }
    // Each process logs the ticks it fired (`cron fired … tick=…`): every tick once across
    // both, one run each. (A scheduler that a busy machine held up fires the ticks it missed
    // in a burst, so runs' creation times say nothing about which tick they belong to.)
    let mut per_tick: BTreeMap<String, usize> = BTreeMap::new();
    for served in [&a, &b] {
        let log = served.stderr.lock().unwrap().clone();
        for line in log.lines().filter(|l| l.contains("cron fired")) {
            let tick = line
                .split_whitespace()
                .find_map(|w| w.strip_prefix("tick="))
                .unwrap_or_else(|| panic!("no tick in {line:?}"))
                .trim_matches('"')
                .to_owned();
            *per_tick.entry(tick).or_default() += 1;
        }
    }
    let twice: Vec<_> = per_tick.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "ticks fired more than once: {twice:?}");
    assert_eq!(
        per_tick.len(),
        runs.len(),
        "fired ticks {per_tick:?}, runs {runs:?}"
    );
    // Each run appended `a` then `b` once.
    let (_, t) = call(&a.addr, "GET", &format!("/threads/{thread}"), None);
    assert_eq!(t["status"], "idle", "{t}");
    assert_eq!(
        t["values"]["bar"].as_array().unwrap().len(),
        2 * runs.len(),
        "{t}"
    );
    for served in [&a, &b] {
        let log = served.stderr.lock().unwrap().clone();
        assert!(!log.contains("panicked"), "{log}");
    }
}

/// Slow runs on process A, process B started, A stopped with SIGTERM: every run completes
/// (on A within its grace, or on B), none fails, each applies once.
fn a_rolling_restart_loses_no_run(db: &str) {
    let mut a = Served::start(db, &["--shutdown-grace", "2"]);
    // Two runs a thread on six threads: 1 s runs end within A's grace, 4 s runs do not.
    let mut runs: Vec<(String, String)> = Vec::new();
    for i in 0..6 {
        let thread = new_thread(&a.addr);
        for seconds in [if i % 2 == 0 { 1 } else { 4 }, 1] {
            let (status, run) = call(
                &a.addr,
                "POST",
                &format!("/threads/{thread}/runs"),
                Some(json!({"assistant_id": "sleep", "input": {"seconds": seconds}})),
            );
            assert_eq!(status, 200, "{run}");
            runs.push((thread.clone(), run["run_id"].as_str().unwrap().to_owned()));
        }
    }
    poll("A to execute runs", Duration::from_secs(20), || {
        let running = runs.iter().filter(|(t, r)| {
            let (_, run) = call(&a.addr, "GET", &format!("/threads/{t}/runs/{r}"), None);
            run["status"] == "running"
        });
        (running.count() >= 3).then_some(())
    });
    let b = Served::start(db, &[]);
    let stopped_at = Instant::now();
    a.terminate();
    let exit = a.child.wait().unwrap();
    assert!(exit.success(), "A exits cleanly after SIGTERM: {exit:?}");
    assert!(
        stopped_at.elapsed() < Duration::from_secs(15),
        "A took {:?} to stop",
        stopped_at.elapsed()
    );
    let log = a.stderr.lock().unwrap().clone();
    assert!(!log.contains("panicked"), "{log}");
    // Everything ends, on A or on B.
    let ended = poll("every run to end", Duration::from_secs(60), || {
        let mut statuses = Vec::new();
        for (t, r) in &runs {
            let (status, run) = call(&b.addr, "GET", &format!("/threads/{t}/runs/{r}"), None);
            assert_eq!(status, 200, "run {r} was lost: {run}");
            if run["status"] == "pending" || run["status"] == "running" {
                return None;
            }
            statuses.push(run);
        }
        Some(statuses)
    });
    for run in &ended {
        assert_eq!(run["status"], "success", "{run}");
    }
    let handed_over = ended
        .iter()
        .filter(|r| r["kwargs"]["config"]["metadata"]["run_attempt"] != 1)
        .count();
    assert!(handed_over >= 1, "the 4 s runs went on on B: {ended:?}");
    // Each run slept (and recorded it) once on its thread.
    let mut by_thread: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (t, r) in &runs {
        by_thread.entry(t.as_str()).or_default().push(r.as_str());
    }
    for (thread, ids) in by_thread {
        let (_, t) = call(&b.addr, "GET", &format!("/threads/{thread}"), None);
        assert_eq!(t["status"], "idle", "{t}");
        assert_eq!(t["values"]["done"], json!(ids), "{t}");
    }
}

/// A fresh SQLite file.
fn sqlite_db(dir: &tempfile::TempDir) -> String {
    format!("sqlite:{}", dir.path().join("replicas.sqlite").display())
}

#[test]
fn sqlite_a_cron_fires_once_per_tick_across_two_processes() {
    let dir = tempfile::tempdir().unwrap();
    a_cron_fires_once_per_tick(&sqlite_db(&dir));
}

#[test]
fn sqlite_a_rolling_restart_loses_no_run() {
    let dir = tempfile::tempdir().unwrap();
    a_rolling_restart_loses_no_run(&sqlite_db(&dir));
}

/// A fresh Postgres schema: its guard and URL.
fn postgres_db() -> (stategraph_testkit::postgres::ScratchSchema, String) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let schema = rt.block_on(stategraph_testkit::postgres::ScratchSchema::create(
        "replicas",
    ));
    let url = schema.url();
    (schema, url)
}

#[test]
fn postgres_a_cron_fires_once_per_tick_across_two_processes() {
    let (_schema, url) = postgres_db();
    a_cron_fires_once_per_tick(&url);
}

#[test]
fn postgres_a_rolling_restart_loses_no_run() {
    let (_schema, url) = postgres_db();
    a_rolling_restart_loses_no_run(&url);
}
