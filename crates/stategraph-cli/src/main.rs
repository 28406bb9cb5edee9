//! `stategraph`: inspect and operate the threads of a stategraph or LangGraph database from
//! the shell.
//!
//! Every command takes `--db URL` (`sqlite:PATH`, `postgres://…`, `mysql://…`, `redis://…`;
//! or `$STATEGRAPH_DB`) and prints a table, or JSON with `--json` (snapshots with LangGraph's
//! field names). Threads need not have been written by a program at hand: snapshots come from
//! a reader graph inferred from the checkpoints (`stategraph::graph::inspect`), so `next` and
//! `tasks` are what LangGraph computes for graphs built from standard edges.
//!
//! ```text
//! stategraph --db sqlite:seed_tour.sqlite threads
//! stategraph --db sqlite:seed_tour.sqlite history --thread 1 --json
//! ```

use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use serde_json::{Value as Json, json};
use stategraph::graph::inspect::reader_graph;
use stategraph::{
    CheckpointConfig, CheckpointSaver, JsonPlusSerializer, ListOptions, RunConfig, Serializer,
    StateSnapshot,
};

mod table;

/// Inspect and operate the threads of a stategraph / LangGraph checkpoint database.
#[derive(Parser, Debug)]
#[command(name = "stategraph", version, about, long_about = None)]
#[command(after_help = "Examples:\n  \
    stategraph --db sqlite:seed_tour.sqlite threads\n  \
    stategraph --db sqlite:seed_tour.sqlite history --thread 1\n  \
    stategraph --db postgres://postgres@localhost/app state --thread 42 --json\n  \
    stategraph --db sqlite:app.sqlite writes --thread 1 --checkpoint 1ef…")]
struct Cli {
    /// The database: sqlite:PATH, postgres://…, mysql://…, redis://…
    #[arg(long, global = true, env = "STATEGRAPH_DB")]
    db: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List the threads, newest activity first.
    ///
    /// Example: stategraph --db sqlite:app.sqlite threads
    Threads,
    /// A thread's checkpoints, newest first, as state snapshots.
    ///
    /// Example: stategraph --db sqlite:app.sqlite history --thread 1 --limit 5
    History {
        /// The thread.
        #[arg(long)]
        thread: String,
        /// The namespace (a subgraph's, e.g. `sub:…`); the root by default.
        #[arg(long, default_value = "")]
        ns: String,
        /// At most this many.
        #[arg(long)]
        limit: Option<usize>,
    },
    /// A thread's state: the latest checkpoint, or the one given.
    ///
    /// Example: stategraph --db sqlite:app.sqlite state --thread 1 --json
    State {
        /// The thread.
        #[arg(long)]
        thread: String,
        /// A checkpoint id; the latest by default.
        #[arg(long)]
        checkpoint: Option<String>,
        /// The namespace; the root by default.
        #[arg(long, default_value = "")]
        ns: String,
    },
    /// The writes stored against one checkpoint: which task wrote what, and how big.
    ///
    /// Example: stategraph --db sqlite:app.sqlite writes --thread 1 --checkpoint 1ef…
    Writes {
        /// The thread.
        #[arg(long)]
        thread: String,
        /// The checkpoint id.
        #[arg(long)]
        checkpoint: String,
        /// The namespace; the root by default.
        #[arg(long, default_value = "")]
        ns: String,
    },
    /// Copy a thread (every namespace, same checkpoint ids) to a new thread id.
    ///
    /// Example: stategraph --db sqlite:app.sqlite copy-thread --from 1 --to 1-backup
    CopyThread {
        /// The source thread.
        #[arg(long)]
        from: String,
        /// The new thread (must not exist).
        #[arg(long)]
        to: String,
    },
    /// Delete a thread: every checkpoint, write and blob.
    ///
    /// Example: stategraph --db sqlite:app.sqlite delete-thread --thread 1
    DeleteThread {
        /// The thread.
        #[arg(long)]
        thread: String,
    },
}

/// A failure, printed as one line.
type Failure = String;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), Failure> {
    let url = cli
        .db
        .clone()
        .ok_or("no database: pass --db URL or set STATEGRAPH_DB")?;
    let saver = stategraph::open_saver(&url)
        .await
        .map_err(|e| format!("cannot open {}: {e}", stategraph::redact_url(&url)))?;
    let out = match cli.command {
        Command::Threads => threads(saver.as_ref(), cli.json).await?,
        Command::History { thread, ns, limit } => {
            history(saver, &thread, &ns, limit, cli.json).await?
        }
        Command::State {
            thread,
            checkpoint,
            ns,
        } => state(saver, &thread, &ns, checkpoint, cli.json).await?,
        Command::Writes {
            thread,
            checkpoint,
            ns,
        } => writes(saver.as_ref(), &thread, &ns, &checkpoint, cli.json).await?,
        Command::CopyThread { from, to } => {
            saver
                .copy_thread(&from, &to)
                .await
                .map_err(|e| e.to_string())?;
            done(
                cli.json,
                json!({"copied": from, "to": to}),
                format!("copied {from} to {to}"),
            )
        }
        Command::DeleteThread { thread } => {
            saver
                .delete_thread(&thread)
                .await
                .map_err(|e| e.to_string())?;
            done(
                cli.json,
                json!({"deleted": thread}),
                format!("deleted {thread}"),
            )
        }
    };
    println!("{out}");
    Ok(())
}

fn done(as_json: bool, j: Json, text: String) -> String {
    if as_json { j.to_string() } else { text }
}

async fn threads(saver: &dyn CheckpointSaver, as_json: bool) -> Result<String, Failure> {
    let all = saver
        .list(&ListOptions::all())
        .await
        .map_err(|e| e.to_string())?;
    // Newest first already: the first tuple seen of a thread is its latest.
    let mut rows: Vec<(String, usize, String, Option<i64>, String)> = Vec::new();
    for t in &all {
        match rows.iter_mut().find(|r| r.0 == t.config.thread_id) {
            Some(r) => r.1 += 1,
            None => rows.push((
                t.config.thread_id.clone(),
                1,
                t.checkpoint.id.clone(),
                t.metadata.step,
                t.checkpoint.ts.clone(),
            )),
        }
    }
    rows.sort_by(|a, b| b.4.cmp(&a.4).then_with(|| a.0.cmp(&b.0)));
    if as_json {
        let list: Vec<Json> = rows
            .iter()
            .map(|(thread, n, id, step, ts)| {
                json!({"thread_id": thread, "checkpoints": n, "latest_checkpoint_id": id,
                       "step": step, "updated_at": ts})
            })
            .collect();
        return Ok(Json::Array(list).to_string());
    }
    Ok(table::render(
        &["THREAD", "CHECKPOINTS", "LATEST", "STEP", "UPDATED"],
        rows.iter()
            .map(|(thread, n, id, step, ts)| {
                vec![
                    thread.clone(),
                    n.to_string(),
                    id.clone(),
                    step.map_or_else(String::new, |s| s.to_string()),
                    ts.clone(),
                ]
            })
            .collect(),
    ))
}

/// The reader graph for `thread`/`ns`, attached to `saver`; `None` when the thread is empty.
async fn reader(
    saver: Arc<dyn CheckpointSaver>,
    thread: &str,
    ns: &str,
) -> Result<stategraph::CompiledGraph<stategraph::DynState>, Failure> {
    let mut at = CheckpointConfig::new(thread);
    at.checkpoint_ns = ns.to_owned();
    let latest = saver
        .get_tuple(&at)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| {
            if ns.is_empty() {
                format!("no thread `{thread}` in this database")
            } else {
                format!("thread `{thread}` has no namespace `{ns}`")
            }
        })?;
    Ok(reader_graph(&latest.checkpoint)
        .map_err(|e| e.to_string())?
        .with_checkpointer(saver))
}

fn run_config(thread: &str, ns: &str, checkpoint: Option<String>) -> RunConfig {
    let mut config = RunConfig::thread(thread);
    config.checkpoint_ns = ns.to_owned();
    config.checkpoint_id = checkpoint;
    config
}

async fn history(
    saver: Arc<dyn CheckpointSaver>,
    thread: &str,
    ns: &str,
    limit: Option<usize>,
    as_json: bool,
) -> Result<String, Failure> {
    let graph = reader(saver, thread, ns).await?;
    let options = ListOptions {
        limit,
        ..ListOptions::default()
    };
    let snapshots = graph
        .get_state_history(&run_config(thread, ns, None), options)
        .await
        .map_err(|e| e.to_string())?;
    if as_json {
        let list: Vec<Json> = snapshots.iter().map(StateSnapshot::to_json).collect();
        return Ok(Json::Array(list).to_string());
    }
    Ok(table::render(
        &["CHECKPOINT", "STEP", "SOURCE", "NEXT", "VALUES"],
        snapshots
            .iter()
            .map(|s| {
                let meta = s.metadata.as_ref();
                vec![
                    s.config
                        .as_ref()
                        .and_then(|c| c.checkpoint_id.clone())
                        .unwrap_or_default(),
                    meta.and_then(|m| m.step)
                        .map_or_else(String::new, |s| s.to_string()),
                    meta.and_then(|m| m.source)
                        .map_or_else(String::new, |s| s.to_string()),
                    s.next.join(","),
                    table::shorten(&s.to_json()["values"].to_string(), 60),
                ]
            })
            .collect(),
    ))
}

async fn state(
    saver: Arc<dyn CheckpointSaver>,
    thread: &str,
    ns: &str,
    checkpoint: Option<String>,
    as_json: bool,
) -> Result<String, Failure> {
    let graph = reader(saver, thread, ns).await?;
    let snapshot = graph
        .get_state(&run_config(thread, ns, checkpoint))
        .await
        .map_err(|e| e.to_string())?;
    let j = snapshot.to_json();
    if as_json {
        return Ok(j.to_string());
    }
    let mut rows: Vec<Vec<String>> = Vec::new();
    if let Some(values) = j["values"].as_object() {
        for (k, v) in values {
            rows.push(vec![k.clone(), table::shorten(&v.to_string(), 100)]);
        }
    }
    let header = format!(
        "checkpoint {}  step {}  next [{}]\n",
        j["config"]["configurable"]["checkpoint_id"]
            .as_str()
            .unwrap_or("-"),
        j["metadata"]["step"],
        snapshot.next.join(", ")
    );
    Ok(header + &table::render(&["KEY", "VALUE"], rows))
}

async fn writes(
    saver: &dyn CheckpointSaver,
    thread: &str,
    ns: &str,
    checkpoint: &str,
    as_json: bool,
) -> Result<String, Failure> {
    let mut at = CheckpointConfig::new(thread);
    at.checkpoint_ns = ns.to_owned();
    at.checkpoint_id = Some(checkpoint.to_owned());
    let tuple = saver
        .get_tuple(&at)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no checkpoint `{checkpoint}` in thread `{thread}`"))?;
    let serde = JsonPlusSerializer::new();
    let mut rows = Vec::new();
    for w in &tuple.pending_writes {
        let bytes = serde
            .dumps_typed(&w.value)
            .map(|(_, b)| b.len())
            .map_err(|e| e.to_string())?;
        rows.push((w, bytes));
    }
    if as_json {
        let list: Vec<Json> = rows
            .iter()
            .map(|(w, bytes)| {
                json!({"task_id": w.task_id, "idx": w.idx, "channel": w.channel,
                       "bytes": bytes, "task_path": w.task_path,
                       "value": w.value.to_json()})
            })
            .collect();
        return Ok(Json::Array(list).to_string());
    }
    Ok(table::render(
        &["TASK", "IDX", "CHANNEL", "BYTES", "TASK_PATH"],
        rows.iter()
            .map(|(w, bytes)| {
                vec![
                    w.task_id.clone(),
                    w.idx.to_string(),
                    w.channel.clone(),
                    bytes.to_string(),
                    w.task_path.clone(),
                ]
            })
            .collect(),
    ))
}
