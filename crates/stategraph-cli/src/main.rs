//! `stategraph`: inspect, audit and operate the threads of a stategraph or LangGraph database
//! from the shell.
//!
//! Every command but `graph` takes `--db URL` (`sqlite:PATH`, `postgres://…`, `mysql://…`,
//! `redis://…[?prefix=P]`; or `$STATEGRAPH_DB`) and prints a table, or JSON with `--json`
//! (snapshots with LangGraph's field names). Threads need not have been written by a program
//! at hand: snapshots come from a reader graph inferred from the checkpoints
//! (`stategraph::graph::inspect`), so `next` and `tasks` are what LangGraph computes for graphs
//! built from standard edges. Encrypted threads are read with the key in `LANGGRAPH_AES_KEY`.
//!
//! ```text
//! stategraph --db sqlite:seed_tour.sqlite threads
//! stategraph --db sqlite:seed_tour.sqlite history --thread 1 --json
//! ```

#![cfg_attr(
    not(test),
    warn(clippy::indexing_slicing, clippy::string_slice, clippy::panic)
)]

use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use serde_json::{Value as Json, json};
use stategraph::allowlist::Allowlist;
use stategraph::{
    AesEaxCipher, CheckpointSaver, EncryptedSerializer, JsonPlusSerializer, ListOptions,
    OpenOptions, PruneStrategy, Serializer,
};

mod audit;
mod diff;
mod graph;
mod ops;
mod read;
mod serve;
mod store;
mod table;
mod tree;

/// Inspect, audit and operate the threads of a stategraph / LangGraph checkpoint database.
#[derive(Parser, Debug)]
#[command(name = "stategraph", version, about, long_about = None)]
#[command(after_help = "Examples:\n  \
    stategraph --db sqlite:seed_tour.sqlite threads\n  \
    stategraph --db sqlite:seed_tour.sqlite history --thread 1\n  \
    stategraph --db postgres://postgres@localhost/app state --thread 42 --json\n  \
    stategraph --db sqlite:app.sqlite tree --thread 1 --format mermaid\n  \
    stategraph --db sqlite:app.sqlite diff --thread 1 1ef…a 1ef…b\n  \
    stategraph --db sqlite:app.sqlite repair --thread 1 --checkpoint 1ef… --apply\n  \
    stategraph --db sqlite:app.sqlite store search --ns user-1.memories --query \"food\" --embed minilm\n  \
    stategraph --db sqlite:app.sqlite serve --port 2024\n  \
    stategraph graph my-assistant --url http://localhost:2024 --xray all\n\n\
    Environment: STATEGRAPH_DB (the database), LANGGRAPH_AES_KEY (read and write encrypted \
    threads), STATEGRAPH_API_KEY (serve's and graph's --api-key), STATEGRAPH_WEBHOOKS_ALLOW_PRIVATE (serve's \
    --allow-private-webhooks), N_JOBS_PER_WORKER (serve's --workers), RUST_LOG (the log filter), \
    OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES (serve: export \
    traces over OTLP), NO_COLOR.")]
struct Cli {
    /// The database: sqlite:PATH, postgres://…, mysql://…, redis://…[?prefix=P]
    #[arg(long, global = true, env = "STATEGRAPH_DB")]
    db: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
    /// Refuse stored values carrying Python classes outside LangGraph's safe types (as
    /// LANGGRAPH_STRICT_MSGPACK=true does); such a checkpoint reads as an error naming the
    /// class and where it was found.
    #[arg(long, global = true)]
    strict_msgpack: bool,
    /// How logs are written to standard error: `text` or `json` (one object per line).
    #[arg(long, global = true, default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
    /// Which logs are written when RUST_LOG is not set: error, warn, info, debug, trace
    /// (default: info for `serve`, warn otherwise).
    #[arg(long, global = true)]
    log_level: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List the threads, newest activity first. Reads ids, steps and times only, not the
    /// channel values (a damaged value shows in `history` and `state`).
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
    /// The branch tree of a thread's checkpoints (replays and updates of past checkpoints
    /// start branches). Reads no channel values.
    ///
    /// Example: stategraph --db sqlite:app.sqlite tree --thread 1 --format mermaid
    Tree {
        /// The thread.
        #[arg(long)]
        thread: String,
        /// The namespace; the root by default.
        #[arg(long, default_value = "")]
        ns: String,
        /// text, mermaid or dot (--json prints the nodes and their children).
        #[arg(long, default_value = "text", value_parser = ["text", "mermaid", "dot"])]
        format: String,
    },
    /// What changed between two checkpoints of a thread: state keys added, removed and
    /// changed (lists show the items appended).
    ///
    /// Example: stategraph --db sqlite:app.sqlite diff --thread 1 1ef…a 1ef…b
    Diff {
        /// The thread.
        #[arg(long)]
        thread: String,
        /// The namespace; the root by default.
        #[arg(long, default_value = "")]
        ns: String,
        /// The older checkpoint id.
        from: String,
        /// The newer checkpoint id.
        to: String,
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
    /// Rows and bytes per table and per thread, and the writes-vs-values volume.
    ///
    /// Bytes are the serialized sizes of the stored values (each channel version counted
    /// once, as the blob tables store them), the same on every backend.
    ///
    /// Example: stategraph --db sqlite:app.sqlite stats
    Stats {
        /// Only this thread.
        #[arg(long)]
        thread: Option<String>,
    },
    /// Agent behaviour across threads: writes and bytes per node and per channel.
    ///
    /// Example: stategraph --db sqlite:app.sqlite analyze --since 2026-04-01
    Analyze {
        /// Only threads whose id starts with this.
        #[arg(long)]
        thread_prefix: Option<String>,
        /// Only checkpoints at or after this time (ISO 8601, compared as text).
        #[arg(long)]
        since: Option<String>,
        /// Only checkpoints before this time (ISO 8601, compared as text).
        #[arg(long)]
        until: Option<String>,
    },
    /// Create or upgrade the database's tables (the other commands never change the schema).
    ///
    /// Example: stategraph --db postgres://postgres@localhost/app migrate
    Migrate,
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
    /// Drop old checkpoints: by default keep only the latest of each thread (and the subgraph
    /// checkpoints under it); or the last N, or those younger than a duration, or the whole
    /// line behind the latest plus one checkpoint per step of abandoned branches. Delta keys
    /// a kept checkpoint would lose are re-snapshotted into it first. Shows what would go
    /// unless --apply.
    ///
    /// Example: stategraph --db sqlite:app.sqlite prune --all --keep 20 --apply
    Prune {
        /// The threads to prune.
        #[arg(long = "thread", required_unless_present = "all")]
        threads: Vec<String>,
        /// Every thread in the database.
        #[arg(long, conflicts_with = "threads")]
        all: bool,
        /// Keep the newest N checkpoints of each namespace.
        #[arg(long, conflicts_with_all = ["older_than", "abandoned_branches"])]
        keep: Option<usize>,
        /// Drop checkpoints older than this (`90s`, `30m`, `12h`, `7d`); the newest stays.
        #[arg(long, value_parser = ops::parse_age, conflicts_with = "abandoned_branches")]
        older_than: Option<std::time::Duration>,
        /// On branches left behind by replays and forks, keep one checkpoint per step.
        #[arg(long, conflicts_with = "idle_for")]
        abandoned_branches: bool,
        /// A thread TTL: delete whole threads idle this long (`30d`), keep the others.
        #[arg(long, value_parser = ops::parse_age, conflicts_with_all = ["keep", "older_than"])]
        idle_for: Option<std::time::Duration>,
        /// Delete (without it, only show the plan).
        #[arg(long)]
        apply: bool,
    },
    /// Rebuild a checkpoint whose values are missing from its parent's values plus the writes
    /// stored against the parent (lists concatenate, maps merge, anything else takes the last
    /// write). Shows what it would write unless --apply; never overwrites a stored value.
    ///
    /// Example: stategraph --db sqlite:app.sqlite repair --thread 1 --checkpoint 1ef… --apply
    Repair {
        /// The thread.
        #[arg(long)]
        thread: String,
        /// The checkpoint; the latest by default.
        #[arg(long)]
        checkpoint: Option<String>,
        /// The namespace; the root by default.
        #[arg(long, default_value = "")]
        ns: String,
        /// Write the rebuilt values (without it, only show them).
        #[arg(long)]
        apply: bool,
    },
    /// The cross-thread memory store: put, get, search, delete, namespaces.
    #[command(subcommand)]
    Store(store::StoreCommand),
    /// A graph's drawing as Mermaid text (--json: LangGraph's drawing JSON), as LangGraph's
    /// `get_graph(xray=...).draw_mermaid()` writes it: one `serve` serves (seed, sleep), or
    /// an assistant of any Agent Server, stategraph's or LangGraph's (--url). Needs no
    /// database.
    ///
    /// Example: stategraph graph my-assistant --url http://localhost:2024 --xray all
    Graph(graph::GraphArgs),
    /// Serve LangGraph's Agent Server HTTP API (what `langgraph-sdk` and its UIs call) over
    /// the database, until stopped: its threads, runs and store, with two example graphs,
    /// each also an assistant of its name: `seed` (`foo` last value, `bar` appended; node_a →
    /// node_b, as the `seed_tour` example builds it) and `sleep` (waits the `seconds` of its
    /// input, 1 by default and 60 at most, then appends the run's id to `done`: to try long
    /// runs, cancels and restarts). To serve your own graphs, build them into a binary with
    /// `stategraph::server::Server::builder().graph("name", graph)`.
    ///
    /// Any number of processes may serve one database (`sqlite:` file or `postgres://`): the
    /// run queue in the database is theirs, so each run executes once, a process that stops
    /// (SIGTERM, Ctrl-C) finishes its runs or hands them to the others, and a run whose
    /// process died is taken over. `memory:` serves from this process's memory only.
    ///
    /// Example: stategraph --db sqlite:app.sqlite serve --port 2024
    Serve {
        /// The address to listen on.
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        /// The port (0: any free port, printed on start).
        #[arg(long, default_value_t = 2024)]
        port: u16,
        /// Require this key in header `x-api-key` on every request but `GET /ok` and
        /// `GET /info`.
        #[arg(long, env = "STATEGRAPH_API_KEY")]
        api_key: Option<String>,
        /// Allowed CORS origins, comma-separated (default: any origin).
        #[arg(long, value_delimiter = ',')]
        cors: Vec<String>,
        /// Let runs' and crons' `webhook` URLs reach loopback and private networks
        /// (refused by default, so that a caller cannot make the server call its own
        /// network); for local development.
        #[arg(long, env = "STATEGRAPH_WEBHOOKS_ALLOW_PRIVATE")]
        allow_private_webhooks: bool,
        /// How many background runs this process executes at once (as the reference
        /// server's N_JOBS_PER_WORKER; default 10). Runs a caller waits for or streams
        /// start at once and are not counted.
        #[arg(long, env = "N_JOBS_PER_WORKER", value_parser = clap::value_parser!(u16).range(1..))]
        workers: Option<u16>,
        /// When stopped (SIGTERM, Ctrl-C): how many seconds the runs executing here may go
        /// on before they are handed to another process serving the database, which carries
        /// each on from its last checkpoint (default 10).
        #[arg(long, value_name = "SECONDS", default_value_t = 10)]
        shutdown_grace: u64,
    },
}

/// A failure, printed as one line.
pub(crate) type Failure = String;

/// Any error as a [`Failure`]: its message and its causes', one line.
pub(crate) fn fail(e: impl std::error::Error) -> Failure {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message = format!("{message}: {text}");
        }
        source = cause.source();
    }
    message
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let serving = matches!(cli.command, Command::Serve { .. });
    let level = cli
        .log_level
        .clone()
        .unwrap_or_else(|| if serving { "info" } else { "warn" }.to_owned());
    let options = stategraph::server::telemetry::TelemetryOptions::new()
        .format(cli.log_format.parse().unwrap_or_default())
        .level(level);
    let telemetry = match stategraph::server::telemetry::init(options) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = run(cli).await;
    telemetry.shutdown();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            let message = message.replace('\n', " ");
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), Failure> {
    if let Command::Graph(args) = cli.command {
        println!("{}", graph::run(args, cli.json).await?);
        return Ok(());
    }
    let url = cli
        .db
        .clone()
        .ok_or("no database: pass --db URL or set STATEGRAPH_DB")?;
    if let Command::Store(cmd) = cli.command {
        let out = store::run(&url, cmd, cli.json).await?;
        println!("{out}");
        return Ok(());
    }
    if let Command::Serve {
        host,
        port,
        api_key,
        cors,
        allow_private_webhooks,
        workers,
        shutdown_grace,
    } = cli.command
    {
        let args = serve::ServeArgs {
            host,
            port,
            api_key,
            cors,
            allow_private_webhooks,
            workers,
            shutdown_grace: std::time::Duration::from_secs(shutdown_grace),
        };
        return serve::run(&url, open_options(true, cli.strict_msgpack)?, args).await;
    }
    let saver = open(
        &url,
        matches!(cli.command, Command::Migrate),
        cli.strict_msgpack,
    )
    .await?;
    let out = match cli.command {
        Command::Threads => read::threads(saver.as_ref(), cli.json).await?,
        Command::History { thread, ns, limit } => {
            read::history(saver, &thread, &ns, limit, cli.json).await?
        }
        Command::State {
            thread,
            checkpoint,
            ns,
        } => read::state(saver, &thread, &ns, checkpoint, cli.json).await?,
        Command::Tree { thread, ns, format } => {
            let listed = read::entries(saver.as_ref(), &thread, &ns, None, false).await?;
            if listed.is_empty() {
                return Err(format!("no thread `{thread}` in this database"));
            }
            let nodes = tree::nodes(&listed);
            match (cli.json, format.as_str()) {
                (true, _) => tree::json(&nodes).to_string(),
                (false, "mermaid") => tree::mermaid(&nodes),
                (false, "dot") => tree::dot(&nodes),
                _ => tree::text(&nodes),
            }
        }
        Command::Diff {
            thread,
            ns,
            from,
            to,
        } => diff::run(saver, &thread, &ns, &from, &to, cli.json).await?,
        Command::Writes {
            thread,
            checkpoint,
            ns,
        } => read::writes(saver.as_ref(), &thread, &ns, &checkpoint, cli.json).await?,
        Command::Stats { thread } => audit::stats(saver.as_ref(), thread, cli.json).await?,
        Command::Analyze {
            thread_prefix,
            since,
            until,
        } => {
            let range = audit::Range {
                thread_prefix,
                since,
                until,
            };
            audit::analyze(saver.as_ref(), &range, cli.json).await?
        }
        Command::Migrate => done(
            cli.json,
            json!({"backend": saver.name(), "schema": "up to date"}),
            format!("{}: schema up to date", saver.name()),
        ),
        Command::CopyThread { from, to } => {
            saver.copy_thread(&from, &to).await.map_err(fail)?;
            done(
                cli.json,
                json!({"copied": from, "to": to}),
                format!("copied {from} to {to}"),
            )
        }
        Command::DeleteThread { thread } => {
            // Deleting what is not there is an error here (the library's delete is
            // idempotent): a typo must not read as success.
            let found = match saver.list(&ListOptions::thread(&thread).limit(1)).await {
                Ok(tuples) => !tuples.is_empty(),
                // A damaged checkpoint is still a checkpoint of the thread.
                Err(stategraph::CheckpointError::Serialization { .. }) => true,
                Err(e) => return Err(fail(e)),
            };
            if !found {
                return Err(format!("no thread `{thread}` in this database"));
            }
            saver.delete_thread(&thread).await.map_err(fail)?;
            done(
                cli.json,
                json!({"deleted": thread}),
                format!("deleted {thread}"),
            )
        }
        Command::Prune {
            threads,
            all,
            keep,
            older_than,
            abandoned_branches,
            idle_for,
            apply,
        } => {
            let ago = |age: std::time::Duration| {
                std::time::SystemTime::now()
                    .checked_sub(age)
                    .unwrap_or(std::time::UNIX_EPOCH)
            };
            let strategy = match (keep, older_than, abandoned_branches, idle_for) {
                (Some(n), ..) => PruneStrategy::KeepLast(n),
                (_, Some(age), ..) => PruneStrategy::OlderThan(ago(age)),
                (_, _, true, _) => PruneStrategy::AbandonedBranches,
                (.., Some(age)) => PruneStrategy::IdleSince(ago(age)),
                _ => PruneStrategy::KeepLatest,
            };
            ops::prune(saver, threads, all, strategy, apply, cli.json).await?
        }
        Command::Repair {
            thread,
            checkpoint,
            ns,
            apply,
        } => ops::repair(saver, &thread, &ns, checkpoint, apply, cli.json).await?,
        Command::Store(_) | Command::Serve { .. } | Command::Graph(_) => {
            unreachable!("handled above")
        }
    };
    println!("{out}");
    Ok(())
}

/// How the saver is opened: with `LANGGRAPH_AES_KEY` set, through LangGraph's AES serializer
/// (which still reads unencrypted values); strict about Python classes with
/// `--strict-msgpack` (or `LANGGRAPH_STRICT_MSGPACK`); only `migrate` creates or upgrades
/// tables.
fn open_options(migrate: bool, strict: bool) -> Result<OpenOptions, Failure> {
    let mut plain = JsonPlusSerializer::new();
    if strict {
        plain = plain.strict(Allowlist::safe());
    }
    let serde: Arc<dyn Serializer> = if std::env::var_os("LANGGRAPH_AES_KEY").is_some() {
        let cipher = AesEaxCipher::from_env().map_err(|e| format!("LANGGRAPH_AES_KEY: {e}"))?;
        Arc::new(EncryptedSerializer::new(Arc::new(plain), Arc::new(cipher)))
    } else {
        Arc::new(plain)
    };
    let mut options = OpenOptions::new().serializer(serde);
    if !migrate {
        options = options.existing();
    }
    Ok(options)
}

/// Opens the saver as [`open_options`] says.
async fn open(url: &str, migrate: bool, strict: bool) -> Result<Arc<dyn CheckpointSaver>, Failure> {
    stategraph::open_saver_with(url, open_options(migrate, strict)?)
        .await
        .map_err(|e| format!("cannot open {}: {}", stategraph::redact_url(url), fail(e)))
}

/// What `j` holds at JSON `pointer` (`/metadata/step`), `null` where it holds nothing — as
/// indexing (`j["metadata"]["step"]`) reads it.
pub(crate) fn at<'a>(j: &'a Json, pointer: &str) -> &'a Json {
    static NULL: Json = Json::Null;
    j.pointer(pointer).unwrap_or(&NULL)
}

pub(crate) fn done(as_json: bool, j: Json, text: String) -> String {
    if as_json { j.to_string() } else { text }
}
