//! The harness itself: every workload on every backend prints the contract's fields with
//! plausible values; the Python side prints the same fields; the report turns real results
//! of both sides into a table and charts. Real services and the pinned Python LangGraph;
//! fails, never skips, without them.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeSet;

use serde_json::Value as Json;
use stategraph_bench::{BackendKind, Params, workloads};
use stategraph_testkit::python::{python_interpreter, repo_root, run_python_json};

const BACKENDS: [BackendKind; 6] = [
    BackendKind::None,
    BackendKind::Memory,
    BackendKind::Sqlite,
    BackendKind::Postgres,
    BackendKind::Mysql,
    BackendKind::Redis,
];

/// A size that keeps each workload to a fraction of a second.
fn small(workload: &str) -> usize {
    match workload {
        "wide_state_15x600" => 30,
        "fanout_to_subgraph_100x" | "react_agent_100x" => 3,
        _ => 6,
    }
}

fn params(workload: &str, backend: BackendKind) -> Params {
    Params {
        n: Some(small(workload)),
        runs: Some(2),
        ..Params::new(workload, backend)
    }
}

fn keys(r: &Json) -> BTreeSet<String> {
    r.as_object().unwrap().keys().cloned().collect()
}

fn check(r: &Json, workload: &str, backend: BackendKind) {
    let n = small(workload);
    let what = format!("{workload} on {}: {r}", backend.as_str());
    assert_eq!(r["workload"], workload, "{what}");
    assert_eq!(r["backend"], backend.as_str(), "{what}");
    assert_eq!(r["n"], n, "{what}");
    assert_eq!(r["durability"], "async", "{what}");
    let median = r["median_ms"].as_f64().unwrap();
    let min = r["min_ms"].as_f64().unwrap();
    assert!(median > 0.0 && min > 0.0 && min <= median, "{what}");
    let units = [
        "ms_per_step",
        "ms_per_invoke",
        "ms_per_checkpoint",
        "ms_per_commit",
    ];
    assert_eq!(
        units.iter().filter(|u| r[**u].is_number()).count(),
        1,
        "one per-unit figure: {what}"
    );
    if backend.persistent() {
        assert!(r["db_bytes"].as_u64().unwrap() > 0, "{what}");
        let rows = r["rows"].as_object().unwrap();
        assert!(rows.values().any(|v| v.as_u64().unwrap() > 0), "{what}");
    } else {
        assert!(r.get("db_bytes").is_none(), "{what}");
    }
    match workload {
        "linear" | "sequential_1000" => assert_eq!(r["steps"], n, "{what}"),
        "chat" => {
            assert_eq!(r["turn_ms"].as_array().unwrap().len(), n, "{what}");
            assert!(r["first20_ms"].as_f64().unwrap() > 0.0, "{what}");
            if backend.persistent() {
                let last = r["bytes_by_turn"]
                    .as_array()
                    .unwrap()
                    .last()
                    .unwrap()
                    .clone();
                assert_eq!(last[0], n, "{what}");
                assert_eq!(last[1], r["db_bytes"], "{what}");
            }
        }
        "history" => assert_eq!(r["checkpoints"], 3 * n, "{what}"),
        "commit_floor" => {
            assert_eq!(r["row_bytes"], n, "{what}");
            assert!(r["ms_per_commit"].as_f64().unwrap() > 0.0, "{what}");
        }
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_workload_runs_on_every_backend() {
    for workload in workloads::NAMES {
        for backend in BACKENDS {
            let result = stategraph_bench::run(&params(workload, backend)).await;
            if *workload == "history" && backend == BackendKind::None {
                let e = result.unwrap_err().to_string();
                assert!(e.contains("needs a checkpointer"), "{e}");
                continue;
            }
            if *workload == "commit_floor" && !backend.persistent() {
                let e = result.unwrap_err().to_string();
                assert!(e.contains("no commit to measure"), "{e}");
                continue;
            }
            let r = result.unwrap_or_else(|e| panic!("{workload} on {backend:?}: {e}"));
            check(&r, workload, backend);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_chat_stores_less_than_full() {
    let mut sizes = Vec::new();
    for delta in [false, true] {
        let p = Params {
            n: Some(40),
            delta,
            snapshot_every: 20,
            ..Params::new("chat", BackendKind::Sqlite)
        };
        let r = stategraph_bench::run(&p).await.unwrap();
        assert_eq!(r["delta"], delta);
        sizes.push(r["db_bytes"].as_u64().unwrap());
    }
    assert!(
        sizes[1] < sizes[0],
        "delta {} vs full {}",
        sizes[1],
        sizes[0]
    );
}

#[tokio::test]
async fn unknown_workloads_are_named() {
    let e = stategraph_bench::run(&Params::new("linaer", BackendKind::Memory))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("`linaer`") && e.contains("linear"), "{e}");
}

/// Runs `bench/python/run.py` with the pinned Python LangGraph.
fn python(args: &[&str]) -> Json {
    let script = repo_root().join("bench/python/run.py").into_os_string();
    let args = std::iter::once(script)
        .chain(args.iter().map(Into::into))
        .chain(["--json".into()]);
    run_python_json(args, "")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_sides_print_the_same_fields_and_the_report_compares_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = Vec::new();
    // The commit floor is a property of the database, measured by one harness (below).
    let cases: Vec<(&str, BackendKind, bool)> = workloads::NAMES
        .iter()
        .filter(|w| **w != "commit_floor")
        .map(|w| {
            let b = if w.starts_with("linear") || *w == "chat" || *w == "history" {
                BackendKind::Sqlite
            } else {
                BackendKind::Memory
            };
            (*w, b, false)
        })
        .chain([
            ("chat", BackendKind::Sqlite, true),
            ("chat", BackendKind::Postgres, false),
        ])
        .collect();
    for (workload, backend, delta) in cases {
        let p = Params {
            delta,
            ..params(workload, backend)
        };
        let rust = stategraph_bench::run(&p).await.unwrap();
        let n = small(workload).to_string();
        let mut args = vec![
            workload,
            "--backend",
            backend.as_str(),
            "--n",
            &n,
            "--runs",
            "2",
        ];
        if delta {
            args.push("--delta");
        }
        let py = python(&args);
        check(&py, workload, backend);
        assert_eq!(py["impl"], "python");
        // The read floor is the database's and the driver's, measured once, by stategraph.
        let floor = [
            "read_floor_ms",
            "read_floor_ms_per_checkpoint",
            "read_bytes",
        ];
        let mut shared = keys(&rust);
        shared.retain(|k| !floor.contains(&k.as_str()));
        assert_eq!(shared, keys(&py), "{workload} on {backend:?}");
        if workload == "history" {
            assert_eq!(
                rust["checkpoints"], py["checkpoints"],
                "same history length"
            );
            if matches!(backend, BackendKind::Sqlite | BackendKind::Postgres) {
                assert!(rust["read_floor_ms"].as_f64().unwrap() > 0.0, "{rust}");
                assert!(rust["read_bytes"].as_u64().unwrap() > 0, "{rust}");
            }
        }
        if workload == "linear" {
            assert_eq!(
                rust["rows"], py["rows"],
                "the same rows per table on SQLite"
            );
        }
        lines.push(rust.to_string());
        lines.push(py.to_string());
    }
    // Python has no MySQL or Redis saver in the pinned set: it says so and exits 2.
    let out = std::process::Command::new(python_interpreter())
        .arg(repo_root().join("bench/python/run.py"))
        .args(["linear", "--backend", "redis", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));

    // The floor every SQLite time is also shown as a multiple of.
    let floor = Params {
        n: Some(2048),
        runs: Some(5),
        ..Params::new("commit_floor", BackendKind::Sqlite)
    };
    lines.push(stategraph_bench::run(&floor).await.unwrap().to_string());

    let results = dir.path().join("results.jsonl");
    std::fs::write(&results, lines.join("\n")).unwrap();
    let charts = dir.path().join("charts");
    let report = stategraph_bench::report::report_file(&results, Some(&charts)).unwrap();
    assert!(report.contains("langgraph 1.2.22"), "{report}");
    assert!(report.contains("stategraph 0.1.0"), "{report}");
    for row in [
        "| linear | sqlite | ms per step |",
        "| chat --delta | sqlite |",
    ] {
        let line = report
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| {
                panic!("no row {row}: {report}");
            });
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // | workload | backend | figure | stategraph | Python | ratio | ÷ floor | ÷ floor | target |
        assert!(cells[6].ends_with('×'), "a ratio in {line}");
        assert!(
            cells[7].parse::<f64>().unwrap() > 0.0,
            "a floor multiple in {line}"
        );
        assert!(
            cells[8].parse::<f64>().unwrap() > 0.0,
            "a floor multiple in {line}"
        );
    }
    assert!(
        report.contains("| commit_floor | sqlite | ms per commit (2.0 kB row) |"),
        "{report}"
    );
    let chat = report
        .lines()
        .find(|l| l.starts_with("| chat | sqlite | ms per invoke |"))
        .unwrap();
    assert!(
        chat.ends_with("≥ 6×: met |") || chat.ends_with("≥ 6×: missed |"),
        "the target of {chat}"
    );
    assert!(
        report.contains("chat: stategraph --delta vs Python full"),
        "{report}"
    );
    for file in [
        "chat-latency-sqlite.svg",
        "chat-bytes-sqlite.svg",
        "chat-bytes-postgres.svg",
    ] {
        let svg = std::fs::read_to_string(charts.join(file)).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("<polyline"),
            "{file}"
        );
        assert!(
            svg.contains("Python LangGraph") && svg.contains("stategraph"),
            "{file}"
        );
        if file.ends_with("sqlite.svg") {
            assert!(svg.contains("stategraph (delta)"), "{file}");
        }
    }
}
