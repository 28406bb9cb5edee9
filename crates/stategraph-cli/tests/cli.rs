//! The built `stategraph` binary against real SQLite and Postgres databases holding a thread
//! of the seeds' graph: `history --json` and `state --json` equal the library's own snapshots
//! (from the graph itself), `threads`, `writes`, `copy-thread`, `delete-thread`, and one-line
//! errors with a non-zero exit code.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::sync::Arc;

use serde_json::{Value as Json, json};
use stategraph::prelude::*;
use stategraph::{CheckpointSaver, StateSnapshot};

#[derive(State, Clone, Debug, Default)]
struct Seed {
    foo: String,
    #[reducer(append)]
    bar: Vec<String>,
}

fn seed_graph(saver: Arc<dyn CheckpointSaver>) -> CompiledGraph<Seed> {
    let mut g = StateGraph::<Seed>::new();
    g.add_node("node_a", |_s: Arc<Seed>, _c| async {
        Ok(SeedUpdate::default().foo("a").bar(vec!["a".to_owned()]))
    });
    g.add_node("node_b", |_s: Arc<Seed>, _c| async {
        Ok(SeedUpdate::default().foo("b").bar(vec!["b".to_owned()]))
    });
    g.add_edge(START, "node_a")
        .add_edge("node_a", "node_b")
        .add_edge("node_b", END);
    g.compile().unwrap().with_checkpointer(saver)
}

/// Runs the binary; returns (exit code, stdout, stderr).
fn cli(db: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_stategraph"))
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

fn cli_json(db: &str, args: &[&str]) -> Json {
    let (code, out, err) = cli(db, args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

/// A checkpoint cannot say which keys are aggregates: the graph shows `bar: []` before the
/// first write, the CLI (reading without the graph) leaves it out. Everything else is equal.
fn without_empty_lists(mut j: Json) -> Json {
    let strip = |s: &mut Json| {
        if let Some(v) = s["values"].as_object_mut() {
            v.retain(|_, x| x.as_array().is_none_or(|a| !a.is_empty()));
        }
    };
    match &mut j {
        Json::Array(items) => items.iter_mut().for_each(strip),
        other => strip(other),
    }
    j
}

async fn check(saver: Arc<dyn CheckpointSaver>, db: &str) {
    let graph = seed_graph(saver);
    let config = RunConfig::thread("1");
    for _ in 0..2 {
        graph
            .invoke(
                Some(SeedUpdate::default().foo("").bar(Vec::<String>::new())),
                config.clone(),
            )
            .await
            .unwrap();
    }
    let history = graph
        .get_state_history(&config, Default::default())
        .await
        .unwrap();
    let library: Json = history.iter().map(StateSnapshot::to_json).collect();

    // history --json and state --json: the library's snapshots.
    let ours = cli_json(db, &["history", "--thread", "1", "--json"]);
    assert_eq!(ours.as_array().unwrap().len(), 8);
    assert_eq!(
        without_empty_lists(ours),
        without_empty_lists(library.clone())
    );
    let limited = cli_json(db, &["history", "--thread", "1", "--limit", "3", "--json"]);
    assert_eq!(limited.as_array().unwrap().len(), 3);
    let state = cli_json(db, &["state", "--thread", "1", "--json"]);
    assert_eq!(
        state,
        graph.get_state(&config).await.unwrap().to_json(),
        "the latest state"
    );
    let first_step = history[6].config.clone().unwrap().checkpoint_id.unwrap();
    let past = cli_json(
        db,
        &[
            "state",
            "--thread",
            "1",
            "--checkpoint",
            &first_step,
            "--json",
        ],
    );
    assert_eq!(past["next"], json!(["node_a"]));

    // threads
    let threads = cli_json(db, &["threads", "--json"]);
    assert_eq!(threads[0]["thread_id"], "1");
    assert_eq!(threads[0]["checkpoints"], 8);
    let (code, table, _) = cli(db, &["threads"]);
    assert_eq!(code, 0);
    assert!(table.starts_with("THREAD"), "{table}");

    // writes: node_a's writes against the step-0 checkpoint.
    let writes = cli_json(
        db,
        &[
            "writes",
            "--thread",
            "1",
            "--checkpoint",
            &first_step,
            "--json",
        ],
    );
    let channels: Vec<&str> = writes
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["channel"].as_str().unwrap())
        .collect();
    assert_eq!(channels, ["foo", "bar", "branch:to:node_b"]);
    assert!(writes[0]["bytes"].as_u64().unwrap() > 0);
    assert_eq!(writes[0]["task_path"], "~__pregel_pull, node_a");

    // copy-thread, delete-thread
    cli_json(db, &["copy-thread", "--from", "1", "--to", "2", "--json"]);
    let copied = cli_json(db, &["history", "--thread", "2", "--json"]);
    assert_eq!(copied.as_array().unwrap().len(), 8);
    cli_json(db, &["delete-thread", "--thread", "2", "--json"]);

    // Errors: one line, non-zero exit.
    let (code, _, err) = cli(db, &["history", "--thread", "nope"]);
    assert_eq!(code, 1);
    assert_eq!(err.trim(), "error: no thread `nope` in this database");
    let (code, _, err) = cli("oracle://x", &["threads"]);
    assert_eq!(code, 1);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("unknown scheme"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cli.sqlite");
    let saver = Arc::new(stategraph::SqliteSaver::open(&path).unwrap());
    check(saver, &format!("sqlite:{}", path.display())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres() {
    let base = std::env::var("STATEGRAPH_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let schema = format!("sg_cli_{}", stategraph::uuid6(None).replace('-', ""));
    let saver = stategraph::PostgresConfig::from_url(&base)
        .unwrap()
        .schema(schema.clone())
        .connect()
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL at {base} is required: {e}"));
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
    let _drop = {
        let (base, schema) = (base.clone(), schema.clone());
        stategraph_checkpoint::conformance::Cleanup::new(async move {
            if let Ok((client, conn)) = tokio_postgres::connect(&base, tokio_postgres::NoTls).await
            {
                let task = tokio::spawn(conn);
                let _ = client
                    .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                    .await;
                drop(client);
                let _ = task.await;
            }
        })
    };
    check(Arc::new(saver), &url).await;
}
