//! Metrics scraped by a real Prometheus (Debian's, `scripts/prometheus.sh install`, or the
//! binary `STATEGRAPH_TEST_PROMETHEUS` names): the server answers a load of runs, Prometheus
//! scrapes `GET /metrics` every second, and its query API gives back the run and request
//! counts that were made and a latency quantile within the buckets; `promtool check metrics`
//! finds nothing to say about the exposition.
//!
//! One test per binary: the metrics recorder is the process's.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value as Json, json};

mod common;
#[path = "common/http.rs"]
mod http;
use common::seed_server::{seed_graph, serve, serve_on};
use http::{call, call_raw};
use stategraph_testkit::postgres::ScratchSchema;

/// Kills Prometheus when the test ends, however it ends.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A free loopback port.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Prometheus's answer to instant query `query`.
fn query(prometheus: &str, query: &str) -> Json {
    let url = format!("{prometheus}/api/v1/query");
    let mut r = ureq::get(&url).query("query", query).call().unwrap();
    let body: Json = r.body_mut().read_json().unwrap();
    assert_eq!(body["status"], "success", "{query}: {body}");
    body["data"]["result"].clone()
}

/// The single value of instant query `q`, if it has one.
fn value(prometheus: &str, q: &str) -> Option<f64> {
    let result = query(prometheus, q);
    result.as_array()?.first()?["value"][1]
        .as_str()?
        .parse()
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_the_runs_and_requests_that_were_made() {
    let binary =
        std::env::var("STATEGRAPH_TEST_PROMETHEUS").unwrap_or_else(|_| "prometheus".to_owned());
    let (base, serving, _dir) = serve(|b| b.graph("seed", seed_graph())).await;
    let port: u16 = base.rsplit(':').next().unwrap().parse().unwrap();

    // The exposition itself: valid, every metric described, as promtool reads it.
    let (status, text) = call_raw(port, "GET", "/metrics", None);
    assert_eq!(status, 200, "{text}");
    let promtool = std::path::Path::new(&binary).with_file_name("promtool");
    let promtool = if promtool.is_file() {
        promtool
    } else {
        "promtool".into()
    };
    let mut check = Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {}: {e} (install it with scripts/prometheus.sh install)",
                promtool.display()
            )
        });
    check
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let checked = check.wait_with_output().unwrap();
    assert!(
        checked.status.success(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );

    // A load of runs: waited ones on their own threads, and background ones joined.
    const WAITED: usize = 12;
    const BACKGROUND: usize = 5;
    let body = json!({"assistant_id": "seed", "input": {"foo": "", "bar": []}});
    let load = tokio::task::spawn_blocking(move || {
        for _ in 0..WAITED {
            let (status, t) = call(port, "POST", "/threads", Some(json!({})));
            assert_eq!(status, 200);
            let thread = t["thread_id"].as_str().unwrap();
            let path = format!("/threads/{thread}/runs/wait");
            let (status, out) = call(port, "POST", &path, Some(body.clone()));
            assert_eq!((status, &out["foo"]), (200, &json!("b")), "{out}");
        }
        let (_, t) = call(port, "POST", "/threads", Some(json!({})));
        let thread = t["thread_id"].as_str().unwrap().to_owned();
        for _ in 0..BACKGROUND {
            let path = format!("/threads/{thread}/runs");
            let (status, run) = call(port, "POST", &path, Some(body.clone()));
            assert_eq!(status, 200, "{run}");
            let join = format!("{path}/{}/join", run["run_id"].as_str().unwrap());
            assert_eq!(call(port, "GET", &join, None).0, 200);
        }
    });
    load.await.unwrap();

    // Prometheus, scraping every second.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
             scrape_configs:\n  - job_name: stategraph\n    static_configs:\n      \
             - targets: ['127.0.0.1:{port}']\n"
        ),
    )
    .unwrap();
    let web = free_port();
    let prometheus = format!("http://127.0.0.1:{web}");
    let _child = Child(
        Command::new(&binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{web}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start {binary}: {e} (install it with scripts/prometheus.sh install)")
            }),
    );
    let runs = "stategraph_server_runs_total{status=\"success\"}";
    let mut counted = None;
    for _ in 0..300 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if ureq::get(&format!("{prometheus}/-/ready")).call().is_err() {
            continue;
        }
        counted = value(&prometheus, runs);
        if counted.is_some() {
            break;
        }
    }
    let expected = (WAITED + BACKGROUND) as f64;
    assert_eq!(counted, Some(expected), "{runs}");
    assert_eq!(
        value(&prometheus, "up{job=\"stategraph\"}"),
        Some(1.0),
        "the target is scraped"
    );
    let waits = "lg_api_http_requests_total\
                 {method=\"POST\",path=\"/threads/{thread_id}/runs/wait\",status=\"200\"}";
    assert_eq!(value(&prometheus, waits), Some(WAITED as f64), "{waits}");
    let joins = "lg_api_http_requests_total{path=\"/threads/{thread_id}/runs/{run_id}/join\"}";
    assert_eq!(
        value(&prometheus, joins),
        Some(BACKGROUND as f64),
        "{joins}"
    );
    assert_eq!(
        value(&prometheus, "lg_api_http_requests_total{path=\"/metrics\"}"),
        None,
        "the meta routes are not counted"
    );
    // The runs' median duration, from their histogram: a run of two nodes on SQLite takes
    // well under a second (a bucket bound; at least the smallest bucket's).
    let median = value(
        &prometheus,
        "histogram_quantile(0.5, sum by (le) (stategraph_server_run_duration_seconds_bucket))",
    )
    .unwrap();
    assert!(median > 0.0 && median <= 1.0, "median run: {median} s");
    let steps = value(
        &prometheus,
        "sum(stategraph_graph_step_duration_seconds_count)",
    )
    .unwrap();
    assert!(steps >= 3.0 * expected, "three super-steps a run: {steps}");
    let saves = value(
        &prometheus,
        "sum(stategraph_checkpoint_call_duration_seconds_count{backend=\"sqlite\"})",
    )
    .unwrap_or_else(|| {
        let (_, text) = call_raw(port, "GET", "/metrics", None);
        panic!("no checkpoint calls: {text}")
    });
    assert!(saves > 0.0, "checkpoint calls by backend");
    for gauge in [
        "lg_api_num_pending_runs",
        "lg_api_num_running_runs",
        "lg_api_workers_active",
    ] {
        assert_eq!(
            value(&prometheus, gauge),
            Some(0.0),
            "{gauge} after the load"
        );
    }
    assert_eq!(value(&prometheus, "lg_api_workers_max"), Some(10.0));

    // LangGraph's JSON summary of the same figures.
    let (status, summary) = call(port, "GET", "/metrics?format=json", None);
    assert_eq!(status, 200, "{summary}");
    assert_eq!(summary["queue"]["n_pending"], 0);
    assert_eq!(summary["workers"]["max"], 10);
    let waited = summary["api"]["http_requests_total"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["path"] == "/threads/{thread_id}/runs/wait" && s["status"] == "200")
        .cloned();
    assert_eq!(
        waited,
        Some(
            json!({"method": "POST", "path": "/threads/{thread_id}/runs/wait",
                    "status": "200", "count": WAITED})
        ),
        "{summary}"
    );
    serving.abort();

    // On Postgres: the pools' figures, LangGraph's names, by pool.
    let schema = ScratchSchema::create("metrics").await;
    let url = schema.url();
    let (pg_base, serving) = serve_on(&url, |b| b.graph("seed", seed_graph())).await;
    let pg_port: u16 = pg_base.rsplit(':').next().unwrap().parse().unwrap();
    let text = tokio::task::spawn_blocking(move || {
        let (_, t) = call(pg_port, "POST", "/threads", Some(json!({})));
        let path = format!("/threads/{}/runs/wait", t["thread_id"].as_str().unwrap());
        let body = json!({"assistant_id": "seed", "input": {"foo": "", "bar": []}});
        assert_eq!(call(pg_port, "POST", &path, Some(body)).0, 200);
        call_raw(pg_port, "GET", "/metrics", None).1
    })
    .await
    .unwrap();
    for pool in ["saver", "store"] {
        for gauge in ["lg_api_pg_pool_max", "lg_api_pg_pool_size"] {
            let sample = format!("{gauge}{{pool=\"{pool}\"}} ");
            let line = text.lines().find(|l| l.starts_with(&sample));
            let n: f64 = line
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {sample}: {text}"));
            assert!(n >= 1.0, "{sample}{n}");
        }
    }
    serving.abort();
}
