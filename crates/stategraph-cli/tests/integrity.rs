//! The CLI on databases that are missing, damaged or edited by hand: read commands change
//! nothing, damage stays local to the checkpoint that carries it, and every failure is a
//! non-zero exit with a message naming what was wrong.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use serde_json::Value as Json;
use stategraph::prelude::*;
use stategraph::{CheckpointSaver, Ext, ExtCode};

/// Runs the binary with `env`; returns (exit code, stdout, stderr).
fn cli_env(db: &str, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_stategraph"));
    cmd.arg("--db")
        .arg(db)
        .args(args)
        .env_remove("STATEGRAPH_DB")
        .env_remove("LANGGRAPH_AES_KEY")
        .env_remove("LANGGRAPH_STRICT_MSGPACK");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn cli(db: &str, args: &[&str]) -> (i32, String, String) {
    cli_env(db, args, &[])
}

fn sqlite_url(path: &Path) -> String {
    format!("sqlite:{}", path.display())
}

#[derive(State, Clone, Debug, Default)]
struct Notes {
    #[reducer(append)]
    notes: Vec<String>,
    n: i64,
}

/// START → note → END, each run adding a note and counting.
fn graph(saver: Arc<dyn CheckpointSaver>) -> CompiledGraph<Notes> {
    let mut g = StateGraph::<Notes>::new();
    g.add_node("note", |s, _c| async move {
        Ok(NotesUpdate::default()
            .notes([format!("note {}", s.n)])
            .n(s.n + 1))
    });
    g.add_edge(START, "note").add_edge("note", END);
    g.compile().unwrap().with_checkpointer(saver)
}

/// Runs the graph `runs` times on `thread`; returns the thread's checkpoint ids, oldest
/// first (three per run: input, loop step, done).
async fn chain(saver: Arc<dyn CheckpointSaver>, thread: &str, runs: usize) -> Vec<String> {
    let g = graph(Arc::clone(&saver));
    for _ in 0..runs {
        g.invoke(NotesUpdate::default(), RunConfig::thread(thread))
            .await
            .unwrap();
    }
    let mut ids: Vec<String> = saver
        .list(&ListOptions::thread(thread))
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.checkpoint.id.to_string())
        .collect();
    ids.reverse();
    ids
}

fn sql(path: &Path, statement: &str, params: &[&dyn rusqlite::ToSql]) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute(statement, params).unwrap();
}

#[test]
fn read_commands_leave_a_database_without_tables_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.sqlite");
    sql(&path, "CREATE TABLE unrelated (x INTEGER)", &[]);
    let before = std::fs::read(&path).unwrap();
    for args in [
        &["threads"][..],
        &["history", "--thread", "1"],
        &["state", "--thread", "1"],
        &["tree", "--thread", "1"],
        &["stats"],
    ] {
        let (code, _, err) = cli(&sqlite_url(&path), args);
        assert_ne!(code, 0, "{args:?} must fail");
        assert!(
            err.contains("checkpoint tables checkpoints, writes") && err.contains("migrate"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the file is unchanged"
    );
    assert!(
        !dir.path().join("other.sqlite-wal").exists(),
        "not switched to WAL"
    );
    let (code, _, err) = cli(
        &sqlite_url(&dir.path().join("missing.sqlite")),
        &["threads"],
    );
    assert_ne!(code, 0);
    assert!(err.contains("missing.sqlite"), "{err}");
    assert!(!dir.path().join("missing.sqlite").exists(), "not created");
    // Only `migrate` creates them.
    let (code, _, err) = cli(&sqlite_url(&path), &["migrate"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = cli(&sqlite_url(&path), &["threads", "--json"]);
    assert_eq!((code, out.trim()), (0, "[]"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mysql_database_that_does_not_exist_is_reported_not_created() {
    use mysql_async::prelude::Queryable;
    let base = stategraph_testkit::services::mysql_url();
    let name = stategraph_testkit::services::scratch_name("sg_absent");
    let url = stategraph_testkit::mysql::url_of(&base, &name);
    let (code, _, err) = tokio::task::spawn_blocking({
        let url = url.clone();
        move || cli(&url, &["threads"])
    })
    .await
    .unwrap();
    assert_ne!(code, 0);
    assert!(err.contains("not found") && err.contains(&name), "{err}");
    let mut conn = mysql_async::Conn::from_url(base.as_str())
        .await
        .unwrap_or_else(|e| panic!("MariaDB at {base} is required for this test: {e}"));
    let found: Option<String> = conn
        .exec_first(
            "SELECT CAST(schema_name AS CHAR) FROM information_schema.schemata \
             WHERE schema_name = ?",
            (name.as_str(),),
        )
        .await
        .unwrap();
    assert_eq!(found, None, "the database was not created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_thread_that_does_not_exist_fails() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.sqlite");
    let saver: Arc<dyn CheckpointSaver> =
        Arc::new(SqliteConfig::file(&path).connect().await.unwrap());
    chain(saver, "real", 1).await;
    let url = sqlite_url(&path);
    let (code, out, err) = cli(&url, &["delete-thread", "--thread", "no-such"]);
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("no thread `no-such`"), "{err}");
    let (code, _, err) = cli(&url, &["delete-thread", "--thread", "real"]);
    assert_eq!(code, 0, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tree_shows_self_parented_and_looped_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.sqlite");
    let saver: Arc<dyn CheckpointSaver> =
        Arc::new(SqliteConfig::file(&path).connect().await.unwrap());
    let ids = chain(Arc::clone(&saver), "t", 2).await;
    drop(saver);
    assert_eq!(ids.len(), 6);
    // The newest checkpoint points at itself; the oldest at the third (a loop of three).
    let set_parent = |id: &str, parent: &str| {
        sql(
            &path,
            "UPDATE checkpoints SET parent_checkpoint_id = ?1 WHERE checkpoint_id = ?2",
            &[&parent, &id],
        );
    };
    set_parent(&ids[5], &ids[5]);
    set_parent(&ids[0], &ids[2]);
    let url = sqlite_url(&path);
    let (code, out, err) = cli(&url, &["tree", "--thread", "t"]);
    assert_eq!(code, 0, "{err}");
    for id in &ids {
        assert!(out.contains(id.as_str()), "{id} missing from:\n{out}");
    }
    assert!(out.contains("the chain loops"), "{out}");
    let (code, out, err) = cli(&url, &["tree", "--thread", "t", "--json"]);
    assert_eq!(code, 0, "{err}");
    let nodes: Json = serde_json::from_str(&out).unwrap();
    assert_eq!(nodes.as_array().unwrap().len(), 6);
    let (code, out, err) = cli(&url, &["history", "--thread", "t", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        serde_json::from_str::<Json>(&out)
            .unwrap()
            .as_array()
            .unwrap()
            .len(),
        6
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_checkpoint_is_listed_with_its_error_and_the_rest_still_reads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.sqlite");
    let saver: Arc<dyn CheckpointSaver> =
        Arc::new(SqliteConfig::file(&path).connect().await.unwrap());
    let ids = chain(Arc::clone(&saver), "t", 1).await;
    drop(saver);
    assert_eq!(ids.len(), 3);
    let junk: Vec<u8> = (0..64_u8)
        .map(|b| b.wrapping_mul(37).wrapping_add(11))
        .collect();
    sql(
        &path,
        "UPDATE checkpoints SET checkpoint = ?1 WHERE checkpoint_id = ?2",
        &[&junk, &ids[2]],
    );
    let url = sqlite_url(&path);
    let (code, out, err) = cli(&url, &["history", "--thread", "t", "--json"]);
    assert_eq!(code, 0, "{err}");
    let rows: Json = serde_json::from_str(&out).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 3, "{out}");
    assert_eq!(
        rows[0]["config"]["configurable"]["checkpoint_id"],
        ids[2].as_str()
    );
    assert!(
        rows[0]["error"].as_str().unwrap().contains("cannot decode"),
        "{out}"
    );
    for (row, id) in rows.iter().skip(1).zip([&ids[1], &ids[0]]) {
        assert_eq!(row["config"]["configurable"]["checkpoint_id"], id.as_str());
        assert!(
            row.get("error").is_none() && row.get("values").is_some(),
            "{row}"
        );
    }
    let (code, out, err) = cli(&url, &["history", "--thread", "t"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("DAMAGED"), "{out}");
    // An intact older checkpoint reads; the damaged one is a typed error naming it.
    let (code, out, err) = cli(
        &url,
        &["state", "--thread", "t", "--checkpoint", &ids[1], "--json"],
    );
    assert_eq!(code, 0, "{err}");
    let snapshot: Json = serde_json::from_str(&out).unwrap();
    assert_eq!(
        snapshot["config"]["configurable"]["checkpoint_id"],
        ids[1].as_str()
    );
    let (code, _, err) = cli(&url, &["state", "--thread", "t", "--checkpoint", &ids[2]]);
    assert_ne!(code, 0);
    assert!(
        err.contains(&ids[2]) && err.contains("cannot decode"),
        "{err}"
    );
    let (code, _, err) = cli(&url, &["tree", "--thread", "t"]);
    assert_eq!(code, 0, "{err}");
    // `threads` lists the thread, marked damaged, with the rest of the database.
    let saver: Arc<dyn CheckpointSaver> =
        Arc::new(SqliteConfig::file(&path).connect().await.unwrap());
    chain(saver, "intact", 1).await;
    let (code, out, err) = cli(&url, &["threads", "--json"]);
    assert_eq!(code, 0, "{err}");
    let threads: Json = serde_json::from_str(&out).unwrap();
    assert_eq!(threads.as_array().unwrap().len(), 2, "{out}");
    assert_eq!(threads[0]["thread_id"], "intact");
    assert!(threads[0].get("damaged").is_none(), "{out}");
    assert_eq!(threads[1]["thread_id"], "t");
    assert_eq!(threads[1]["checkpoints"], 3);
    assert_eq!(threads[1]["latest_checkpoint_id"], ids[2].as_str());
    assert!(
        threads[1]["damaged"]
            .as_str()
            .unwrap()
            .contains("cannot decode"),
        "{out}"
    );
    let (code, out, err) = cli(&url, &["threads"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("DAMAGED") && out.contains("intact"), "{out}");
    // The latest state falls back to nothing: `state` without an id names the damage.
    let (code, _, err) = cli(&url, &["state", "--thread", "t"]);
    assert_ne!(code, 0);
    assert!(err.contains(&ids[2]), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_checkpoint_id_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.sqlite");
    let saver: Arc<dyn CheckpointSaver> =
        Arc::new(SqliteConfig::file(&path).connect().await.unwrap());
    chain(saver, "t", 1).await;
    let (code, out, err) = cli(
        &sqlite_url(&path),
        &["state", "--thread", "t", "--checkpoint", "1ef-no-such"],
    );
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("no checkpoint `1ef-no-such`"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_msgpack_refuses_classes_outside_the_allowlist() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.sqlite");
    let saver: Arc<dyn CheckpointSaver> =
        Arc::new(SqliteConfig::file(&path).connect().await.unwrap());
    chain(Arc::clone(&saver), "t", 1).await;
    // The newest checkpoint again, with a value of an application class in a new channel.
    let latest = saver
        .get_tuple(&CheckpointConfig::new("t"))
        .await
        .unwrap()
        .unwrap();
    let mut cp = (*latest.checkpoint).clone();
    cp.id = stategraph::CheckpointId::for_step(2);
    let thing = Ext::python(
        ExtCode::ConstructorKwArgs,
        "myapp.models",
        "Thing",
        stategraph::value!({"x": 1}),
    );
    cp.channel_values.insert("thing".into(), Value::Ext(thing));
    cp.channel_versions
        .insert("thing", stategraph::ChannelVersion::Int(1));
    let versions = cp.channel_versions.clone();
    saver
        .put(&latest.config, &cp, &latest.metadata, &versions)
        .await
        .unwrap();
    let url = sqlite_url(&path);
    let (code, _, err) = cli(&url, &["state", "--thread", "t"]);
    assert_eq!(code, 0, "permissive by default, as LangGraph: {err}");
    for (args, env) in [
        (&["--strict-msgpack", "state", "--thread", "t"][..], &[][..]),
        (
            &["state", "--thread", "t"][..],
            &[("LANGGRAPH_STRICT_MSGPACK", "true")][..],
        ),
    ] {
        let (code, _, err) = cli_env(&url, args, env);
        assert_ne!(code, 0, "{args:?} {env:?}");
        assert!(
            err.contains("myapp.models") && err.contains("Thing"),
            "{err}"
        );
    }
}
