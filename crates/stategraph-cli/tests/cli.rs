//! The built `stategraph` binary against real SQLite, Postgres, MariaDB and Redis databases
//! holding threads of the seeds' graph (with a branch from `update_state` on a past
//! checkpoint) and of a graph with a subgraph. Each behaviour is a module with one test per
//! backend, on a fresh database of its own: `history --json` and `state --json` equal the
//! library's own snapshots (from the graphs themselves, root and subgraph namespaces), `tree`
//! shows the fork, `diff`, `writes`, `stats`, `analyze`, `copy-thread`, `prune`,
//! `delete-thread`, `repair` (values deleted from the database come back equal), `store`, and
//! one-line errors with a non-zero exit code.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::sync::Arc;

use serde_json::{Value as Json, json};
use stategraph::prelude::*;
use stategraph::{CheckpointSaver, StateSnapshot};

mod served;

#[derive(State, Clone, Debug, Default)]
struct Seed {
    foo: String,
    #[reducer(append)]
    bar: Vec<String>,
}

#[derive(State, Clone, Debug, Default)]
struct Report {
    question: String,
    #[reducer(append)]
    notes: Vec<String>,
}

fn research() -> StateGraph<Report> {
    let mut g = StateGraph::<Report>::new();
    g.add_node("search", |s, _c| async move {
        Ok(ReportUpdate::default().notes([format!("searched: {}", s.question)]))
    });
    g.add_node("read", |_s, _c| async {
        Ok(ReportUpdate::default().notes(["read 3 sources"]))
    });
    g.add_edge(START, "search").add_edge("search", "read");
    g
}

/// START → research (a subgraph: search → read) → write.
fn report_graph(saver: Arc<dyn CheckpointSaver>) -> CompiledGraph<Report> {
    let mut g = StateGraph::<Report>::new();
    g.add_subgraph("research", research().compile().unwrap());
    g.add_node("write", |s, _c| async move {
        Ok(ReportUpdate::default().notes([format!("wrote from {} notes", s.notes.len())]))
    });
    g.add_edge(START, "research").add_edge("research", "write");
    g.compile().unwrap().with_checkpointer(saver)
}

fn seed_graph(saver: Arc<dyn CheckpointSaver>) -> CompiledGraph<Seed> {
    let mut g = StateGraph::<Seed>::new();
    g.add_node("node_a", |_s, _c| async {
        Ok(SeedUpdate::default().foo("a").bar(["a"]))
    });
    g.add_node("node_b", |_s, _c| async {
        Ok(SeedUpdate::default().foo("b").bar(["b"]))
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
        .env_remove("LANGGRAPH_AES_KEY")
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

/// Which database a test runs on, and how to reach it behind the saver's back.
enum Kind {
    Sqlite,
    /// The Postgres URL (with the test's search_path).
    Postgres(String),
    /// The MariaDB URL of the test's database.
    MySql(String),
    Redis,
    MongoDb,
}

/// A fresh database with a saver on it, the URL the binary reads it by, and the guard that
/// removes it.
struct Db {
    saver: Arc<dyn CheckpointSaver>,
    url: String,
    kind: Kind,
    _guard: Box<dyn std::any::Any + Send>,
}

impl Db {
    /// A fresh SQLite file.
    async fn sqlite() -> Self {
        let (saver, file) = stategraph_testkit::sqlite::saver().await;
        Self {
            saver: Arc::new(saver),
            url: file.url(),
            kind: Kind::Sqlite,
            _guard: Box::new(file),
        }
    }

    /// A fresh schema on the Postgres test server (`public`, where pgvector's type lives,
    /// after it on the search path).
    async fn postgres() -> Self {
        let (saver, schema) = stategraph_testkit::postgres::saver().await;
        let url = schema.url_with_public();
        Self {
            saver: Arc::new(saver),
            url: url.clone(),
            kind: Kind::Postgres(url),
            _guard: Box::new(schema),
        }
    }

    /// A fresh database on the MariaDB test server.
    async fn mariadb() -> Self {
        let (saver, database) = stategraph_testkit::mysql::saver().await;
        let url = database.url();
        Self {
            saver: Arc::new(saver),
            url: url.clone(),
            kind: Kind::MySql(url),
            _guard: Box::new(database),
        }
    }

    /// A fresh key prefix on the Redis test server.
    async fn redis() -> Self {
        let (saver, prefix) = stategraph_testkit::redis::saver().await;
        Self {
            saver: Arc::new(saver),
            url: prefix.url(),
            kind: Kind::Redis,
            _guard: Box::new(prefix),
        }
    }

    /// A fresh database on the MongoDB test server.
    async fn mongodb() -> Self {
        let (saver, database) = stategraph_testkit::mongodb::saver().await;
        Self {
            saver: Arc::new(saver),
            url: database.url(),
            kind: Kind::MongoDb,
            _guard: Box::new(database),
        }
    }
}

/// Expands each listed `async fn behaviour(db: Db)` into a module `behaviour` with one test
/// per backend: `sqlite`, `postgres`, `mariadb`, `redis` and `mongodb` (or the backends listed in
/// `on [...]`).
macro_rules! on_every_backend {
    (on $backends:tt: $($behaviour:ident),* $(,)?) => {
        $(behaviour_on!($behaviour $backends);)*
    };
    ($($behaviour:ident),* $(,)?) => {
        on_every_backend!(on [sqlite, postgres, mariadb, redis, mongodb]: $($behaviour),*);
    };
}

/// One test per backend of `behaviour`, in a module of that name.
macro_rules! behaviour_on {
    ($behaviour:ident [$($backend:ident),*]) => {
        mod $behaviour {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $backend() {
                    super::$behaviour(super::Db::$backend().await).await;
                }
            )*
        }
    };
}

on_every_backend!(
    history_and_state_equal_the_library_snapshots,
    threads_lists_the_thread,
    writes_lists_the_writes_of_a_checkpoint,
    diff_shows_what_changed_between_checkpoints,
    stats_and_analyze_count_what_the_runs_stored,
    copy_thread_then_prune_and_delete_thread,
    tree_shows_the_fork,
    repair_restores_deleted_values,
    repair_refuses_what_cannot_be_rebuilt,
    subgraph_namespace_reads_like_the_subgraphs_history,
    delta_thread_reads_and_prunes_like_the_graph,
    errors_are_one_line_with_nonzero_exit,
);

on_every_backend!(on [sqlite, postgres]: store_puts_gets_searches_and_deletes);

/// Loses the stored values of one checkpoint, as a failed or partial write would: the
/// checkpoint record stays (id, versions, metadata), its values go — inline ones by
/// rewriting the record without them, blob rows (Postgres, MariaDB) by deleting them.
async fn lose_values(db: &Db, t: &CheckpointTuple) {
    let parent = t.parent_config.clone().unwrap();
    let bare = t.checkpoint.without_values();
    db.saver
        .put(
            &parent,
            &bare,
            &t.metadata,
            &stategraph::ChannelVersions::new(),
        )
        .await
        .unwrap();
    let parent_versions = db
        .saver
        .get_tuple(&parent)
        .await
        .unwrap()
        .unwrap()
        .checkpoint
        .channel_versions
        .clone();
    // The blob rows of the versions this checkpoint introduced.
    let own: Vec<(String, String)> = t
        .checkpoint
        .channel_versions
        .iter()
        .filter(|(c, v)| parent_versions.get(c) != Some(*v))
        .map(|(c, v)| (c.to_owned(), v.to_string()))
        .collect();
    match &db.kind {
        Kind::Postgres(url) => {
            let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                .await
                .unwrap();
            tokio::spawn(conn);
            for (channel, version) in &own {
                client
                    .execute(
                        "DELETE FROM checkpoint_blobs WHERE thread_id = $1 AND channel = $2 \
                         AND version = $3",
                        &[&t.config.thread_id, channel, version],
                    )
                    .await
                    .unwrap();
            }
        }
        Kind::MySql(url) => {
            use mysql_async::prelude::Queryable;
            let mut conn = mysql_async::Conn::from_url(url.as_str()).await.unwrap();
            for (channel, version) in &own {
                conn.exec_drop(
                    "DELETE FROM checkpoint_blobs WHERE thread_id = ? AND channel = ? AND version = ?",
                    (&t.config.thread_id, channel, version),
                )
                .await
                .unwrap();
            }
            conn.disconnect().await.unwrap();
        }
        Kind::Sqlite | Kind::Redis | Kind::MongoDb => {}
    }
}

/// What the behaviours start from: thread `1` with two runs of the seeds' graph (8
/// checkpoints), and the library's own view of it.
struct Runs {
    graph: CompiledGraph<Seed>,
    config: RunConfig,
    /// The library's history, newest first.
    history: Vec<StateSnapshot>,
    /// The first run's step-0 checkpoint.
    first_step: CheckpointId,
    /// The latest checkpoint.
    last: CheckpointId,
}

async fn two_runs(db: &Db) -> Runs {
    let graph = seed_graph(Arc::clone(&db.saver));
    let config = RunConfig::thread("1");
    for _ in 0..2 {
        graph
            .invoke(
                SeedUpdate::default().foo("").bar(Vec::<String>::new()),
                config.clone(),
            )
            .await
            .unwrap();
    }
    let history = graph
        .get_state_history(&config, Default::default())
        .await
        .unwrap();
    let first_step = history[6].config.clone().unwrap().checkpoint_id.unwrap();
    let last = history[0].config.clone().unwrap().checkpoint_id.unwrap();
    Runs {
        graph,
        config,
        history,
        first_step,
        last,
    }
}

/// Updating a past checkpoint (the first run's step 0) starts a branch; returns the id of the
/// update's checkpoint.
async fn fork(runs: &Runs) -> CheckpointId {
    let mut at_step0 = RunConfig::thread("1");
    at_step0.checkpoint_id = Some(runs.first_step.clone());
    runs.graph
        .update_state(&at_step0, SeedUpdate::default().foo("x"), "node_a")
        .await
        .unwrap()
        .checkpoint_id
        .unwrap()
}

/// `history --json` and `state --json`: the library's snapshots.
async fn history_and_state_equal_the_library_snapshots(db: Db) {
    let url = db.url.as_str();
    let Runs {
        graph,
        config,
        history,
        first_step,
        ..
    } = two_runs(&db).await;
    let library: Json = history.iter().map(StateSnapshot::to_json).collect();
    let ours = cli_json(url, &["history", "--thread", "1", "--json"]);
    assert_eq!(ours.as_array().unwrap().len(), 8);
    assert_eq!(
        without_empty_lists(ours),
        without_empty_lists(library.clone())
    );
    let limited = cli_json(url, &["history", "--thread", "1", "--limit", "3", "--json"]);
    assert_eq!(limited.as_array().unwrap().len(), 3);
    let state = cli_json(url, &["state", "--thread", "1", "--json"]);
    assert_eq!(
        state,
        graph.get_state(&config).await.unwrap().to_json(),
        "the latest state"
    );
    let (code, table, _) = cli(url, &["history", "--thread", "1"]);
    assert_eq!(code, 0);
    assert!(table.starts_with("CHECKPOINT"), "{table}");
    assert_eq!(table.lines().count(), 9, "{table}");
    let past = cli_json(
        url,
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
}

async fn threads_lists_the_thread(db: Db) {
    let url = db.url.as_str();
    two_runs(&db).await;
    let threads = cli_json(url, &["threads", "--json"]);
    assert_eq!(threads[0]["thread_id"], "1");
    assert_eq!(threads[0]["checkpoints"], 8);
    let (code, table, _) = cli(url, &["threads"]);
    assert_eq!(code, 0);
    assert!(table.starts_with("THREAD"), "{table}");
}

/// node_a's writes against the step-0 checkpoint.
async fn writes_lists_the_writes_of_a_checkpoint(db: Db) {
    let url = db.url.as_str();
    let Runs { first_step, .. } = two_runs(&db).await;
    let writes = cli_json(
        url,
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
}

/// From the first run's step 0 to the end of the second run, and within the second run.
async fn diff_shows_what_changed_between_checkpoints(db: Db) {
    let url = db.url.as_str();
    let Runs {
        history,
        first_step,
        last,
        ..
    } = two_runs(&db).await;
    let d = cli_json(
        url,
        &["diff", "--thread", "1", &first_step, &last, "--json"],
    );
    assert_eq!(
        d["changes"],
        json!({
            "foo": {"change": "replaced", "from": "", "to": "b"},
            "bar": {"change": "appended", "items": ["a", "b", "a", "b"]},
        })
    );
    let second_start = history[3].config.clone().unwrap().checkpoint_id.unwrap();
    let d = cli_json(
        url,
        &["diff", "--thread", "1", &second_start, &last, "--json"],
    );
    assert_eq!(
        d["changes"],
        json!({"bar": {"change": "appended", "items": ["a", "b"]}}),
        "foo is `b` at both ends"
    );
    let (code, text, _) = cli(url, &["diff", "--thread", "1", &second_start, &last]);
    assert_eq!(code, 0);
    assert!(text.contains("appended"), "{text}");
}

/// `stats` and `analyze`: counts that follow from the runs.
async fn stats_and_analyze_count_what_the_runs_stored(db: Db) {
    let url = db.url.as_str();
    two_runs(&db).await;
    let stats = cli_json(url, &["stats", "--json"]);
    let stored_writes: usize = db
        .saver
        .list(&ListOptions::thread("1"))
        .await
        .unwrap()
        .iter()
        .map(|t| t.pending_writes.len())
        .sum();
    assert_eq!(stats["tables"]["checkpoints"]["rows"], 8);
    assert_eq!(stats["tables"]["writes"]["rows"], stored_writes);
    assert_eq!(stats["threads"][0]["thread_id"], "1");
    assert!(stats["tables"]["values"]["bytes"].as_u64().unwrap() > 0);
    let (code, text, _) = cli(url, &["stats"]);
    assert_eq!(code, 0);
    assert!(text.contains("writes / values"), "{text}");
    let analyze = cli_json(url, &["analyze", "--json"]);
    let node_a = analyze["by_node"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["node"] == "node_a")
        .unwrap();
    assert_eq!(
        node_a["writes"], 6,
        "two runs × (foo, bar, branch:to:node_b)"
    );
    let none = cli_json(url, &["analyze", "--since", "2999-01-01", "--json"]);
    assert_eq!(none["checkpoints"], 0);
}

/// `copy-thread`, `prune` (a plan, then applied), `delete-thread`.
async fn copy_thread_then_prune_and_delete_thread(db: Db) {
    let url = db.url.as_str();
    two_runs(&db).await;
    let state = cli_json(url, &["state", "--thread", "1", "--json"]);
    cli_json(url, &["copy-thread", "--from", "1", "--to", "2", "--json"]);
    let copied = cli_json(url, &["history", "--thread", "2", "--json"]);
    assert_eq!(copied.as_array().unwrap().len(), 8);
    let plan = cli_json(url, &["prune", "--thread", "2", "--json"]);
    assert_eq!(plan["deleted"], 7);
    assert_eq!(plan["applied"], false);
    assert_eq!(
        cli_json(url, &["history", "--thread", "2", "--json"])
            .as_array()
            .unwrap()
            .len(),
        8,
        "a plan deletes nothing"
    );
    let idle = cli_json(url, &["prune", "--all", "--idle-for", "1d", "--json"]);
    assert_eq!(
        idle["deleted"], 0,
        "nothing here has been idle for a day: {idle}"
    );
    let pruned = cli_json(url, &["prune", "--thread", "2", "--apply", "--json"]);
    assert_eq!(pruned["deleted"], 7);
    let left = cli_json(url, &["history", "--thread", "2", "--json"]);
    assert_eq!(left.as_array().unwrap().len(), 1);
    assert_eq!(
        left[0]["values"], state["values"],
        "the latest state survives"
    );
    cli_json(url, &["delete-thread", "--thread", "2", "--json"]);
    let (code, _, _) = cli(url, &["state", "--thread", "2"]);
    assert_eq!(code, 1);
}

/// Updating a past checkpoint starts a branch; the tree shows the fork, and the history
/// still equals the library's (the branch included).
async fn tree_shows_the_fork(db: Db) {
    let url = db.url.as_str();
    let runs = two_runs(&db).await;
    let fork = fork(&runs).await;
    let Runs {
        graph,
        config,
        first_step,
        ..
    } = runs;
    let nodes = cli_json(url, &["tree", "--thread", "1", "--json"]);
    assert_eq!(nodes.as_array().unwrap().len(), 9);
    let forked = nodes
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["checkpoint_id"] == first_step.as_str())
        .unwrap();
    assert_eq!(forked["children"].as_array().unwrap().len(), 2, "{forked}");
    assert!(
        forked["children"]
            .as_array()
            .unwrap()
            .contains(&json!(fork))
    );
    let (code, mermaid, _) = cli(url, &["tree", "--thread", "1", "--format", "mermaid"]);
    assert_eq!(code, 0);
    assert!(mermaid.starts_with("graph TD"), "{mermaid}");
    let name = |id: &str| -> String { id.chars().filter(char::is_ascii_alphanumeric).collect() };
    let edge = format!("c{} --> c{}", name(&first_step), name(&fork));
    assert!(mermaid.contains(&edge), "{mermaid}");
    let (_, text, _) = cli(url, &["tree", "--thread", "1"]);
    assert_eq!(text.lines().count(), 9, "{text}");
    let (_, dot, _) = cli(url, &["tree", "--thread", "1", "--format", "dot"]);
    assert!(
        dot.contains(&format!("\"{first_step}\" -> \"{fork}\"")),
        "{dot}"
    );
    // After the fork, the history still equals the library's (the branch included).
    let history = graph
        .get_state_history(&config, Default::default())
        .await
        .unwrap();
    let library: Json = history.iter().map(StateSnapshot::to_json).collect();
    assert_eq!(
        without_empty_lists(cli_json(url, &["history", "--thread", "1", "--json"])),
        without_empty_lists(library)
    );
}

/// The values of a loop checkpoint and of an update checkpoint (on the fork) are lost from
/// the database; `repair` shows what it would restore, then restores values equal to the
/// originals.
async fn repair_restores_deleted_values(db: Db) {
    let url = db.url.as_str();
    let runs = two_runs(&db).await;
    let fork = fork(&runs).await;
    let Runs { graph, last, .. } = runs;
    let mut at_fork = RunConfig::thread("1");
    at_fork.checkpoint_id = Some(fork.clone());
    let updated = graph
        .update_state(&at_fork, SeedUpdate::default().foo("y"), "node_a")
        .await
        .unwrap()
        .checkpoint_id
        .unwrap();
    for (id, restored_keys) in [
        (last.as_str(), &["bar"][..]),
        (updated.as_str(), &["foo"][..]),
    ] {
        let mut at = RunConfig::thread("1");
        at.checkpoint_id = Some(id.into());
        let original = graph.get_state(&at).await.unwrap().to_json();
        let stored = db
            .saver
            .get_tuple(&stategraph::CheckpointConfig::new("1").with_checkpoint_id(id))
            .await
            .unwrap()
            .unwrap();
        lose_values(&db, &stored).await;
        let stored_keys = || async {
            db.saver
                .get_tuple(&stategraph::CheckpointConfig::new("1").with_checkpoint_id(id))
                .await
                .unwrap()
                .unwrap()
                .checkpoint
                .channel_values
                .keys()
                .cloned()
                .collect::<Vec<String>>()
        };
        let lost = stored_keys().await;
        for key in restored_keys {
            assert!(!lost.contains(&(*key).to_owned()), "{id}: `{key}` is gone");
        }
        let plan = cli_json(
            url,
            &["repair", "--thread", "1", "--checkpoint", id, "--json"],
        );
        assert_eq!(plan["applied"], false);
        for key in restored_keys {
            assert_eq!(plan["channels"][key]["status"], "restore", "{plan}");
            assert_eq!(
                plan["channels"][key]["value"], original["values"][key],
                "{plan}"
            );
        }
        assert_eq!(stored_keys().await, lost, "a dry run writes nothing");
        let (code, text, _) = cli(url, &["repair", "--thread", "1", "--checkpoint", id]);
        assert_eq!(code, 0);
        assert!(text.contains("would restore"), "{text}");
        let applied = cli_json(
            url,
            &[
                "repair",
                "--thread",
                "1",
                "--checkpoint",
                id,
                "--apply",
                "--json",
            ],
        );
        assert_eq!(applied["applied"], true);
        for key in restored_keys {
            assert!(
                stored_keys().await.contains(&(*key).to_owned()),
                "{id}: `{key}` is back"
            );
        }
        let repaired = graph.get_state(&at).await.unwrap().to_json();
        assert_eq!(
            repaired, original,
            "{id}: the library reads the original values"
        );
        let again = cli_json(
            url,
            &["repair", "--thread", "1", "--checkpoint", id, "--json"],
        );
        assert_eq!(again["restored"], 0, "nothing left to restore: {again}");
    }
}

/// An update of a checkpoint the thread had moved past, and the first checkpoint of a
/// thread, cannot be rebuilt: one line, exit code 1.
async fn repair_refuses_what_cannot_be_rebuilt(db: Db) {
    let url = db.url.as_str();
    let runs = two_runs(&db).await;
    let fork = fork(&runs).await;
    // The fork updated a checkpoint the thread had moved past: its writes were not recorded.
    let (code, _, err) = cli(url, &["repair", "--thread", "1", "--checkpoint", &fork]);
    assert_eq!(code, 1);
    assert!(err.contains("cannot be rebuilt"), "{err}");
    let (code, _, err) = cli(
        url,
        &[
            "repair",
            "--thread",
            "1",
            "--checkpoint",
            &runs
                .history
                .last()
                .unwrap()
                .config
                .clone()
                .unwrap()
                .checkpoint_id
                .unwrap(),
        ],
    );
    assert_eq!(code, 1);
    assert!(err.contains("no parent"), "{err}");
}

/// Errors: one line, non-zero exit.
async fn errors_are_one_line_with_nonzero_exit(db: Db) {
    let url = db.url.as_str();
    let Runs { first_step, .. } = two_runs(&db).await;
    let (code, _, err) = cli(url, &["history", "--thread", "nope"]);
    assert_eq!(code, 1);
    assert_eq!(err.trim(), "error: no thread `nope` in this database");
    let (code, _, err) = cli(url, &["diff", "--thread", "1", &first_step, "nope"]);
    assert_eq!(code, 1);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("nope"), "{err}");
    let (code, _, err) = cli("oracle://x", &["threads"]);
    assert_eq!(code, 1);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("unknown scheme"), "{err}");
}

/// A thread of a graph with a subgraph: the subgraph's namespace reads like the subgraph's
/// own history.
async fn subgraph_namespace_reads_like_the_subgraphs_history(db: Db) {
    let url = db.url.as_str();
    let graph = report_graph(Arc::clone(&db.saver));
    let config = RunConfig::thread("report");
    graph
        .invoke(
            ReportUpdate::default().question("what is Pregel?"),
            config.clone(),
        )
        .await
        .unwrap();
    let root: Json = graph
        .get_state_history(&config, Default::default())
        .await
        .unwrap()
        .iter()
        .map(StateSnapshot::to_json)
        .collect();
    assert_eq!(
        without_empty_lists(cli_json(url, &["history", "--thread", "report", "--json"])),
        without_empty_lists(root)
    );
    let ns = db
        .saver
        .list(&ListOptions::thread("report"))
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.config.checkpoint_ns)
        .find(|ns| ns.starts_with("research:"))
        .expect("the subgraph's namespace");
    let inner = research()
        .compile()
        .unwrap()
        .with_checkpointer(Arc::clone(&db.saver));
    let mut sub = RunConfig::thread("report");
    sub.checkpoint_ns = ns.clone();
    let library: Json = inner
        .get_state_history(&sub, Default::default())
        .await
        .unwrap()
        .iter()
        .map(StateSnapshot::to_json)
        .collect();
    assert!(library.as_array().unwrap().len() >= 3);
    let cli_sub = cli_json(
        url,
        &["history", "--thread", "report", "--ns", &ns, "--json"],
    );
    assert_eq!(without_empty_lists(cli_sub), without_empty_lists(library));
    let nodes = cli_json(url, &["tree", "--thread", "report", "--ns", &ns, "--json"]);
    assert!(nodes.as_array().unwrap().len() >= 3);
    let (code, _, err) = cli(
        url,
        &["history", "--thread", "report", "--ns", "research:nope"],
    );
    assert_eq!(code, 1);
    assert!(err.contains("has no namespace"), "{err}");
}

/// A chat stored as deltas: the binary reads it as the graph does, and `prune --apply`
/// re-snapshots the kept checkpoint first, so the pruned thread still reads the same.
async fn delta_thread_reads_and_prunes_like_the_graph(db: Db) {
    let url = db.url.as_str();
    let mut g = StateGraph::<Seed>::new();
    g.add_node("node_a", |_s, _c| async {
        Ok(SeedUpdate::default().foo("a").bar(["a"]))
    });
    g.add_edge(START, "node_a");
    g.delta_storage(3);
    let graph = g
        .compile()
        .unwrap()
        .with_checkpointer(Arc::clone(&db.saver));
    let config = RunConfig::thread("deltas");
    for _ in 0..4 {
        graph
            .invoke(SeedUpdate::default().bar(["in"]), config.clone())
            .await
            .unwrap();
    }
    let latest = graph.get_state(&config).await.unwrap().to_json();
    assert_eq!(latest["values"]["bar"].as_array().unwrap().len(), 8);
    let ours = cli_json(url, &["state", "--thread", "deltas", "--json"]);
    assert_eq!(ours["values"], latest["values"]);
    // Delta keys left out by design are not "missing".
    let repair = cli_json(url, &["repair", "--thread", "deltas", "--json"]);
    assert_eq!(repair["restored"], 0, "{repair}");
    let plan = cli_json(url, &["prune", "--thread", "deltas", "--json"]);
    assert_eq!(
        plan["threads"][0]["note"], "re-snapshots delta keys first",
        "{plan}"
    );
    let kept3 = cli_json(
        url,
        &[
            "prune", "--thread", "deltas", "--keep", "3", "--apply", "--json",
        ],
    );
    assert_eq!(kept3["threads"][0]["kept"], 3, "{kept3}");
    let left = cli_json(url, &["history", "--thread", "deltas", "--json"]);
    assert_eq!(left.as_array().unwrap().len(), 3);
    assert_eq!(left[0]["values"], latest["values"]);
    let (code, _, err) = cli(url, &["prune", "--thread", "deltas", "--older-than", "7w"]);
    assert_eq!(code, 2, "a bad duration is a usage error: {err}");
    let pruned = cli_json(url, &["prune", "--thread", "deltas", "--apply", "--json"]);
    assert!(pruned["deleted"].as_u64().unwrap() > 0);
    let left = cli_json(url, &["history", "--thread", "deltas", "--json"]);
    assert_eq!(left.as_array().unwrap().len(), 1);
    assert_eq!(left[0]["values"], latest["values"]);
    assert_eq!(
        graph.get_state(&config).await.unwrap().to_json()["values"],
        latest["values"]
    );
    cli_json(url, &["delete-thread", "--thread", "deltas", "--json"]);
}

/// `store` on a database with a store (SQLite, Postgres): put with the local model, get,
/// search by meaning and by filter, namespaces, delete.
async fn store_puts_gets_searches_and_deletes(db: Db) {
    let url = db.url.as_str();
    let memories = [
        ("m1", "I like pizza", "food"),
        ("m2", "I work as a nurse at night", "work"),
        ("m3", "My sister lives in Lisbon", "family"),
    ];
    for (key, text, kind) in memories {
        let value = json!({"text": text, "kind": kind}).to_string();
        cli_json(
            url,
            &[
                "store",
                "put",
                "--ns",
                "user-1.memories",
                "--key",
                key,
                "--value",
                &value,
                "--embed",
                "minilm",
                "--fields",
                "text",
                "--json",
            ],
        );
    }
    cli_json(
        url,
        &[
            "store",
            "put",
            "--ns",
            "user-2.memories",
            "--key",
            "m1",
            "--value",
            r#"{"text": "I like sushi", "kind": "food"}"#,
            "--embed",
            "minilm",
            "--json",
        ],
    );
    let item = cli_json(
        url,
        &[
            "store",
            "get",
            "--ns",
            "user-1.memories",
            "--key",
            "m1",
            "--json",
        ],
    );
    assert_eq!(item["value"]["text"], "I like pizza");
    assert_eq!(item["namespace"], json!(["user-1", "memories"]));
    let hits = cli_json(
        url,
        &[
            "store",
            "search",
            "--ns",
            "user-1",
            "--query",
            "what does the user like to eat?",
            "--embed",
            "minilm",
            "--limit",
            "2",
            "--json",
        ],
    );
    assert_eq!(hits.as_array().unwrap().len(), 2);
    assert_eq!(hits[0]["key"], "m1", "{hits}");
    assert_eq!(hits[0]["namespace"], json!(["user-1", "memories"]));
    assert!(hits[0]["score"].as_f64().unwrap() > hits[1]["score"].as_f64().unwrap());
    let food = cli_json(
        url,
        &[
            "store",
            "search",
            "--filter",
            r#"{"kind": "food"}"#,
            "--json",
        ],
    );
    let mut found: Vec<String> = food
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            format!(
                "{}/{}",
                h["namespace"][0].as_str().unwrap(),
                h["key"].as_str().unwrap()
            )
        })
        .collect();
    found.sort();
    assert_eq!(found, ["user-1/m1", "user-2/m1"]);
    let namespaces = cli_json(url, &["store", "namespaces", "--max-depth", "1", "--json"]);
    assert_eq!(namespaces, json!([["user-1"], ["user-2"]]));
    let (code, out, _) = cli(
        url,
        &[
            "store", "search", "--ns", "user-1", "--query", "food", "--embed", "minilm",
        ],
    );
    assert_eq!(code, 0);
    assert!(out.starts_with("NAMESPACE"), "{out}");
    cli_json(
        url,
        &[
            "store",
            "delete",
            "--ns",
            "user-1.memories",
            "--key",
            "m1",
            "--json",
        ],
    );
    let (code, _, err) = cli(
        url,
        &["store", "get", "--ns", "user-1.memories", "--key", "m1"],
    );
    assert_eq!(code, 1);
    assert_eq!(
        err.trim(),
        "error: no item `m1` in namespace `user-1.memories`"
    );
    let (code, _, err) = cli(url, &["store", "search", "--query", "food"]);
    assert_eq!(code, 1);
    assert!(err.contains("--embed minilm"), "{err}");
    let (code, _, err) = cli(
        url,
        &["store", "put", "--ns", "a", "--key", "k", "--value", "{"],
    );
    assert_eq!(code, 1);
    assert!(err.contains("--value is not JSON"), "{err}");
}

/// The Postgres test server (for `store_reads_change_nothing`).
fn postgres_base() -> String {
    stategraph_testkit::postgres::url()
}

/// A fresh schema on the test server: its URL (search_path: the schema, then `public` where
/// pgvector's type lives), its name, and a guard dropping it.
fn postgres_schema() -> (String, String, stategraph_testkit::postgres::ScratchSchema) {
    let schema = stategraph_testkit::postgres::ScratchSchema::new("sg_cli");
    (schema.url_with_public(), schema.name().to_owned(), schema)
}

/// A SQLite file that does not exist is not created.
#[test]
fn a_missing_sqlite_file_is_not_created() {
    let missing = stategraph_testkit::sqlite::ScratchFile::new("missing.sqlite");
    let (code, _, err) = cli(&missing.url(), &["threads"]);
    assert_eq!(code, 1);
    assert!(err.contains("not found"), "{err}");
    assert!(!missing.path().exists());
}

/// A Postgres database without the tables: one line that says what to do; `migrate` creates
/// them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_without_tables_says_to_run_migrate() {
    let schema = stategraph_testkit::postgres::ScratchSchema::create("sg_cli").await;
    // (Only the test's schema on the search path: `public` may hold other tests' tables.)
    let own_only = schema.url();
    let (code, _, err) = cli(&own_only, &["threads"]);
    assert_eq!(code, 1);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("stategraph migrate"), "{err}");
    let migrated = cli_json(&own_only, &["migrate", "--json"]);
    assert_eq!(migrated["schema"], "up to date");
    assert_eq!(cli_json(&own_only, &["threads", "--json"]), json!([]));
}

/// Read-only `store` commands change nothing: on a database without the store's tables they
/// fail with one line naming the tables, and the database stays exactly as it was.
mod store_reads_change_nothing {
    use super::*;

    /// The reads, and `delete` (which has nothing to delete there either).
    const READS: [&[&str]; 4] = [
        &["store", "get", "--ns", "a.b", "--key", "k"],
        &["store", "search", "--ns", "a", "--filter", r#"{"v": 1}"#],
        &["store", "namespaces"],
        &["store", "delete", "--ns", "a", "--key", "k"],
    ];

    /// A SQLite database without any table, in rollback-journal mode (not WAL): its one page,
    /// as SQLite writes it.
    fn empty_sqlite_database() -> Vec<u8> {
        let mut page = vec![0u8; 4096];
        page[..16].copy_from_slice(b"SQLite format 3\0");
        page[16..18].copy_from_slice(&4096u16.to_be_bytes());
        page[18..20].copy_from_slice(&[1, 1]); // file format versions: 1 = rollback journal
        page[21..24].copy_from_slice(&[64, 32, 32]);
        page[24..28].copy_from_slice(&1u32.to_be_bytes()); // change counter
        page[28..32].copy_from_slice(&1u32.to_be_bytes()); // size in pages
        page[44..48].copy_from_slice(&4u32.to_be_bytes()); // schema format
        page[56..60].copy_from_slice(&1u32.to_be_bytes()); // UTF-8
        page[92..96].copy_from_slice(&1u32.to_be_bytes());
        page[96..100].copy_from_slice(&3_045_001u32.to_be_bytes());
        page[100] = 0x0d; // an empty leaf table page: the schema
        page[105..107].copy_from_slice(&4096u16.to_be_bytes());
        page
    }

    #[test]
    fn sqlite_file_without_store_tables() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain.sqlite");
        let bytes = empty_sqlite_database();
        std::fs::write(&path, &bytes).unwrap();
        let url = format!("sqlite:{}", path.display());
        for args in READS {
            let (code, out, err) = cli(&url, args);
            let after = std::fs::read(&path).unwrap();
            assert!(
                after == bytes,
                "{args:?} changed the file: {} bytes, file format versions {:?} (2 = WAL)",
                after.len(),
                after.get(18..20)
            );
            let files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
            assert_eq!(files.len(), 1, "{args:?} left files beside the database");
            assert_eq!(code, 1, "{args:?}: {out}");
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(err.contains("store, store_migrations"), "{args:?}: {err}");
        }
        assert_eq!(bytes[18..20], [1, 1], "still not in WAL mode");

        // A missing file is not created.
        let missing = dir.path().join("missing.sqlite");
        let (code, _, err) = cli(&format!("sqlite:{}", missing.display()), READS[0]);
        assert_eq!(code, 1);
        assert!(err.contains("does not exist"), "{err}");
        assert!(!missing.exists());

        // A put sets the store up, as it always has; then the reads work.
        cli_json(
            &url,
            &[
                "store",
                "put",
                "--ns",
                "a.b",
                "--key",
                "k",
                "--value",
                r#"{"v": 1}"#,
                "--json",
            ],
        );
        let item = cli_json(
            &url,
            &["store", "get", "--ns", "a.b", "--key", "k", "--json"],
        );
        assert_eq!(item["value"], json!({"v": 1}));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_schema_without_store_tables() {
        let (url, schema, _drop) = postgres_schema();
        let (client, conn) = tokio_postgres::connect(&postgres_base(), tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("PostgreSQL at {} is required: {e}", postgres_base()));
        tokio::spawn(conn);
        client
            .batch_execute(&format!("CREATE SCHEMA \"{schema}\""))
            .await
            .unwrap();
        // (Only the test's schema on the search path: `public` may hold other tests' tables.)
        let own_only = url.replace("%2Cpublic", "");
        for args in READS {
            let (code, out, err) = cli(&own_only, args);
            let tables: i64 = client
                .query_one(
                    "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1",
                    &[&schema],
                )
                .await
                .unwrap()
                .get(0);
            assert_eq!(tables, 0, "{args:?} created tables");
            assert_eq!(code, 1, "{args:?}: {out}");
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(err.contains("store, store_migrations"), "{args:?}: {err}");
        }
    }
}

/// One HTTP/1.1 request on a fresh connection (with `x-api-key` if given): the status code
/// and the JSON answer (`Null` if none). `runs/wait` streams its answer (keep-alive newlines
/// first), so the JSON is the line that parses.
fn http(addr: &str, method: &str, path: &str, body: &str, key: Option<&str>) -> (u16, Json) {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let key = key.map_or(String::new(), |k| format!("x-api-key: {k}\r\n"));
    write!(
        conn,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{key}Content-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = String::new();
    conn.read_to_string(&mut raw).unwrap();
    let status = raw[9..12].parse().unwrap();
    let json = raw
        .lines()
        .find_map(|l| {
            serde_json::from_str::<Json>(l.trim())
                .ok()
                .filter(Json::is_object)
        })
        .unwrap_or(Json::Null);
    (status, json)
}

#[test]
fn serve_answers_the_agent_server_api_over_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("served.sqlite").display());
    let server = served::Served::start(&db, &["--api-key", "k3y"]);
    let addr = server.addr.clone();
    assert_eq!(http(&addr, "GET", "/ok", "", None).0, 200);
    // The key guards the API.
    let (status, body) = http(&addr, "POST", "/threads", "{}", None);
    assert_eq!(status, 403, "{body}");
    let (_, thread) = http(&addr, "POST", "/threads", "{}", Some("k3y"));
    let id = thread["thread_id"].as_str().unwrap().to_owned();
    let (status, out) = http(
        &addr,
        "POST",
        &format!("/threads/{id}/runs/wait"),
        r#"{"assistant_id": "seed", "input": {"foo": "", "bar": []}}"#,
        Some("k3y"),
    );
    assert_eq!(status, 200);
    assert_eq!(out, json!({"foo": "b", "bar": ["a", "b"]}));
    drop(server);
    // What the server ran is in the database the other commands read.
    let (code, stdout, stderr) = cli(&db, &["state", "--thread", &id, "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let state: Json = serde_json::from_str(&stdout).unwrap();
    assert_eq!(state["values"], json!({"foo": "b", "bar": ["a", "b"]}));
}

#[test]
fn graph_draws_a_served_graph_and_an_assistant_of_a_server() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("drawn.sqlite").display());
    let server = served::Served::start(&db, &["--api-key", "k3y"]);
    let url = format!("http://{}", server.addr);
    // Drawn here, as `serve` serves it.
    let (code, local, stderr) = cli(&db, &["graph", "seed"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(local.starts_with("---\nconfig:\n  flowchart:\n    curve: linear\n---\ngraph TD;\n"));
    for line in [
        "\t__start__([<p>__start__</p>]):::first\n",
        "\t__start__ --> node_a;\n",
        "\tnode_a --> node_b;\n",
        "\tnode_b --> __end__;\n",
    ] {
        assert!(local.contains(line), "{line:?} is missing from {local}");
    }
    // Asked of the server (the graph id stands for its default assistant): the same drawing.
    let (code, remote, stderr) = cli(&db, &["graph", "seed", "--url", &url, "--api-key", "k3y"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(remote, local);
    let remote = cli_json(
        &db,
        &[
            "graph",
            "sleep",
            "--url",
            &url,
            "--api-key",
            "k3y",
            "--json",
        ],
    );
    assert_eq!(remote, cli_json(&db, &["graph", "sleep", "--json"]));
    assert_eq!(remote["nodes"][1]["id"], "sleep");
    // Failures name what failed.
    let (code, _, stderr) = cli(&db, &["graph", "seed", "--url", &url, "--api-key", "wrong"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("answered 403"), "{stderr}");
    let (code, _, stderr) = cli(&db, &["graph", "nope", "--url", &url, "--api-key", "k3y"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("answered 422 Unprocessable Entity: Invalid assistant ID: must be a UUID"),
        "{stderr}"
    );
    let unknown = "00000000-0000-4000-8000-000000000000";
    let (code, _, stderr) = cli(&db, &["graph", unknown, "--url", &url, "--api-key", "k3y"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("answered 404"), "{stderr}");
    let (code, _, stderr) = cli(&db, &["graph", "nope"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("no graph `nope`"), "{stderr}");
    let (code, _, stderr) = cli(&db, &["graph", "seed", "--xray", "deep"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("neither `all` nor a depth"), "{stderr}");
}
