//! The built `stategraph` binary on threads Python LangGraph wrote (the pinned packages of
//! `scripts/python-env.sh`): `history --json` equals Python's own `get_state_history` — values,
//! next, tasks, metadata, config, parent config — on SQLite and Postgres, for a thread with
//! an `update_state`, one left at an interrupt, and one encrypted with `LANGGRAPH_AES_KEY`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use serde_json::Value as Json;
use stategraph_testkit::postgres::ScratchSchema;
use stategraph_testkit::python::seed_graph_py as py;

const AES_KEY: &str = "0123456789abcdef0123456789abcdef";

/// Runs the binary with `key` in `LANGGRAPH_AES_KEY`; returns (exit code, stdout, stderr).
fn cli(key: Option<&str>, db: &str, args: &[&str]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_stategraph"));
    match key {
        Some(k) => cmd.env("LANGGRAPH_AES_KEY", k),
        None => cmd.env_remove("LANGGRAPH_AES_KEY"),
    };
    let out = cmd
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("STATEGRAPH_DB")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// The binary's snapshots in the script's shape: configs flattened to their `configurable`,
/// and (on both sides) empty lists left out of `values` — a checkpoint cannot say which keys
/// are aggregates, so the binary shows a list only once something was written to it.
fn normalized(history: &Json) -> Vec<Json> {
    history
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let mut j = s.clone();
            for key in ["config", "parent_config"] {
                if j[key].get("configurable").is_some() {
                    j[key] = j[key]["configurable"].clone();
                }
            }
            if let Some(v) = j["values"].as_object_mut() {
                v.retain(|_, x| x.as_array().is_none_or(|a| !a.is_empty()));
            }
            j
        })
        .collect()
}

/// Python writes threads on `db`; the binary's history of each (reading `url`) equals Python's.
fn check(db: &str, url: &str, key: Option<&str>) {
    let cases: [(&str, &str, &[&str]); 3] = [
        ("seed", "seed", &["run", "run", "update_as_a", "run"]),
        ("route", "route", &["run"]),
        ("hitl", "hitl", &["run"]),
    ];
    for (graph, thread, actions) in cases {
        py(key, db, graph, thread, actions);
        let theirs = py(key, db, graph, thread, &["history"]);
        let (code, out, err) = cli(key, url, &["history", "--thread", thread, "--json"]);
        assert_eq!(code, 0, "{thread}: {err}");
        let ours: Json = serde_json::from_str(&out).unwrap();
        let theirs = normalized(&theirs["history"]);
        assert!(theirs.len() >= 2, "{thread}");
        assert_eq!(normalized(&ours), theirs, "{thread}");
    }
    // The interrupted thread: `next` and the pending interrupt, as Python shows them.
    let (_, out, _) = cli(key, url, &["state", "--thread", "hitl", "--json"]);
    let state: Json = serde_json::from_str(&out).unwrap();
    assert_eq!(state["next"], serde_json::json!(["ask"]));
    assert_eq!(
        state["tasks"][0]["interrupts"][0]["value"]["question"],
        "approve?"
    );
}

#[test]
fn sqlite_threads_written_by_python() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("py.sqlite");
    let db = path.display().to_string();
    // Python's SqliteSaver creates its tables on first use.
    check(&db, &format!("sqlite:{db}"), None);
}

/// Postgres, both sides encrypting with `LANGGRAPH_AES_KEY`; without the key, or with another,
/// the binary fails with one line naming where the bytes are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encrypted_postgres_threads_written_by_python() {
    let schema = ScratchSchema::create("sg_clipy").await;
    let url = schema.url();
    tokio::task::spawn_blocking({
        let url = url.clone();
        move || check(&url, &url, Some(AES_KEY))
    })
    .await
    .unwrap();

    let (code, _, err) = tokio::task::spawn_blocking({
        let url = url.clone();
        move || cli(None, &url, &["history", "--thread", "seed"])
    })
    .await
    .unwrap();
    assert_eq!(code, 1);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("thread `seed`"), "{err}");
    let (code, _, err) = tokio::task::spawn_blocking(move || {
        cli(
            Some("fedcba9876543210fedcba9876543210"),
            &url,
            &["history", "--thread", "seed"],
        )
    })
    .await
    .unwrap();
    assert_eq!(code, 1);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("thread `seed`"), "{err}");
}

/// `graph --url` asking the reference Agent Server (`langgraph dev`, installed by
/// `scripts/reference-server.sh install`) for its `nested` graph draws exactly what Python's
/// `get_graph(xray=...).draw_mermaid()` draws for that graph, with and without xray.
#[test]
fn graph_draws_a_python_servers_assistant_as_python_draws_it() {
    let root = stategraph_testkit::python::repo_root();
    let script = root.join("scripts/reference-server.sh");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = Command::new(&script)
        .args(["start", &port.to_string()])
        .output()
        .unwrap();
    assert!(
        started.status.success(),
        "the reference server did not start (install it with `scripts/reference-server.sh \
         install`; scripts/test.sh does): {}",
        String::from_utf8_lossy(&started.stderr)
    );
    let pid = String::from_utf8(started.stdout).unwrap().trim().to_owned();
    let url = format!("http://127.0.0.1:{port}");
    let drawn = |xray: Option<&str>| {
        let mut args = vec!["graph", "nested", "--url", url.as_str()];
        args.extend(xray.map(|x| ["--xray", x]).into_iter().flatten());
        let (code, out, err) = cli(None, "memory:", &args);
        assert_eq!(code, 0, "{err}");
        out
    };
    let (plain, xray) = (drawn(None), drawn(Some("all")));
    let _ = Command::new(&script).args(["stop", &pid]).status();

    // Python's own drawings of the graph the server serves.
    let venv = std::env::var("STATEGRAPH_REF_VENV").unwrap_or_else(|_| {
        format!(
            "{}/.cache/stategraph/ref-venv",
            std::env::var("HOME").unwrap()
        )
    });
    let program = "import json, sys; sys.path.insert(0, sys.argv[1]); import graphs; \
                   print(json.dumps([graphs.nested.get_graph(xray=x).draw_mermaid() \
                   for x in (False, True)]))";
    let out = Command::new(format!("{venv}/bin/python"))
        .args(["-c", program])
        .arg(root.join("bench/agent-server/reference"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let python: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();
    // The binary prints the text and a newline.
    assert_eq!(plain, format!("{}\n", python[0]));
    assert_eq!(xray, format!("{}\n", python[1]));
    assert!(xray.contains("\tsubgraph sub\n"));
}
