//! Several Agent Server processes on one PostgreSQL through the run queue: throughput of a
//! short graph with 1, 2 and 4 server processes (each with the server's default number of
//! worker loops, or `STATEGRAPH_BENCH_SCALE_WORKERS`), and how long a cancel sent to one
//! process takes to stop a run executing in another.
//!
//! `cargo bench -p stategraph-tests --bench scale_out --features server,postgres [-- RUNS]`
//! (default 400 runs over 100 threads). The server processes are this binary itself, re-run
//! with `STATEGRAPH_BENCH_SCALE_SERVE` set. Uses `STATEGRAPH_TEST_POSTGRES_URL` (default the
//! local PostgreSQL) and a scratch schema it drops at the end. Figures go to stdout; nothing
//! here asserts a speed.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};
use stategraph::RunQueueConfig;
use stategraph::prelude::*;
use stategraph::server::Server;
use stategraph_postgres::{RunQueue, RunStatus};

#[path = "../tests/common/http.rs"]
mod http;
#[path = "../tests/common/procs.rs"]
mod procs;
use http::call;
use procs::{Killed, serve_announced, spawn_announced};

const SERVE: &str = "STATEGRAPH_BENCH_SCALE_SERVE";
const URL: &str = "STATEGRAPH_BENCH_SCALE_URL";
const SCHEMA: &str = "STATEGRAPH_BENCH_SCALE_SCHEMA";
const PORT_FILE: &str = "STATEGRAPH_BENCH_SCALE_PORT_FILE";
/// Worker loops per server process (unset: the server's default).
const WORKERS: &str = "STATEGRAPH_BENCH_SCALE_WORKERS";

/// How long an idle PostgreSQL session may keep its statistics before they reach
/// `pg_stat_database` (its idle flush interval is 10 s).
const STATS_FLUSH: Duration = Duration::from_secs(11);

#[derive(State, Clone, Debug, Default)]
struct Log {
    #[reducer(append)]
    log: Vec<String>,
}

/// START → step → END: one append, no waiting (the queue and the database are the cost).
fn short_graph() -> CompiledGraph<Log> {
    let mut g = StateGraph::<Log>::new();
    g.add_node("step", |_s, _c| async {
        Ok(LogUpdate::default().log(["step"]))
    });
    g.add_edge(START, "step").add_edge("step", END);
    g.compile().unwrap()
}

/// START → slow (sleeps an hour) → END: a run to cancel.
fn slow_graph() -> CompiledGraph<Log> {
    let mut g = StateGraph::<Log>::new();
    g.add_node("slow", |_s, _c| async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok(LogUpdate::default().log(["slow"]))
    });
    g.add_edge(START, "slow").add_edge("slow", END);
    g.compile().unwrap()
}

fn queue_config(url: &str, schema: &str) -> RunQueueConfig {
    RunQueueConfig::from_url(url)
        .unwrap()
        .schema(schema)
        .lease(Duration::from_secs(10))
}

/// The queue of a server process, on its database handle (the same lease).
fn queue_config_on(db: &stategraph::PostgresDatabase) -> RunQueueConfig {
    db.run_queue().lease(Duration::from_secs(10))
}

/// With a schema URL: the database URL with `options=-c search_path=SCHEMA,public`, so the
/// saver and the store use the scratch schema.
fn schema_url(url: &str, schema: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}options=-c%20search_path%3D{schema}%2Cpublic")
}

/// The server side: serves `short` and `slow` with a queue (and `WORKERS` worker loops).
async fn serve() {
    let (url, schema, port_file) = (
        std::env::var(URL).unwrap(),
        std::env::var(SCHEMA).unwrap(),
        std::env::var(PORT_FILE).unwrap(),
    );
    // Saver, store and queue built from one database handle (one pool; fenced writes).
    let db = stategraph::PostgresConfig::from_url(&url)
        .unwrap()
        .schema(&schema)
        .open()
        .unwrap();
    let saver = Arc::new(db.saver().connect().await.unwrap());
    let store = Arc::new(db.store().connect().await.unwrap());
    let queue = queue_config_on(&db).connect().await.unwrap();
    let mut builder = Server::builder()
        .graph("short", short_graph())
        .graph("slow", slow_graph())
        .fencing_checkpointer(saver)
        .store(store)
        .run_queue(queue);
    if let Some(n) = std::env::var(WORKERS).ok().and_then(|n| n.parse().ok()) {
        builder = builder.workers(n);
    }
    let server = builder.build().unwrap();
    serve_announced(server, &PathBuf::from(port_file)).await;
}

fn spawn_server(dir: &Path, url: &str, schema: &str, i: usize) -> (Killed, u16) {
    let port_file = dir.join(format!("port-{i}"));
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .env(SERVE, "1")
        .env(URL, url)
        .env(SCHEMA, schema)
        .env(PORT_FILE, &port_file);
    spawn_announced(command, &port_file)
}

fn new_thread(port: u16) -> String {
    let (status, thread) = call(port, "POST", "/threads", Some(json!({})));
    assert_eq!(status, 200, "{thread}");
    thread["thread_id"].as_str().unwrap().to_owned()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// How many of the schema's queued runs have finished successfully (one query).
async fn finished(admin: &tokio_postgres::Client, schema: &str) -> usize {
    let row = admin
        .query_one(
            &format!("SELECT count(*) FROM \"{schema}\".stategraph_runs WHERE status = 'success'"),
            &[],
        )
        .await
        .unwrap();
    usize::try_from(row.get::<_, i64>(0)).unwrap()
}

/// The database's transaction and row counters (`pg_stat_database`).
async fn counters(admin: &tokio_postgres::Client) -> [i64; 2] {
    let row = admin
        .query_one(
            "SELECT xact_commit, tup_inserted + tup_updated + tup_deleted \
             FROM pg_stat_database WHERE datname = current_database()",
            &[],
        )
        .await
        .unwrap();
    [row.get(0), row.get(1)]
}

fn main() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    if std::env::var(SERVE).is_ok() {
        rt.block_on(serve());
        return;
    }
    let runs: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(400);
    let threads_n = (runs / 4).max(1);
    let url = std::env::var("STATEGRAPH_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let dir = tempfile::tempdir().unwrap();
    let workers = std::env::var(WORKERS).unwrap_or_else(|_| "the server's default".into());
    println!(
        "scale_out: {runs} runs of a one-node graph over {threads_n} threads, worker loops per process: {workers}"
    );
    for processes in [1, 2, 4] {
        let schema = format!("sgb_scale_{}", &stategraph::uuid4().replace('-', "")[..12]);
        let db = schema_url(&url, &schema);
        // Tables made once, before the processes start.
        let (queue, admin) = rt.block_on(async {
            let (admin, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .unwrap();
            tokio::spawn(conn);
            admin
                .batch_execute(&format!("CREATE SCHEMA \"{schema}\""))
                .await
                .unwrap();
            stategraph::open_saver(&db).await.unwrap();
            stategraph::open_store(&db, StoreOptions::new())
                .await
                .unwrap();
            (queue_config(&url, &schema).connect().await.unwrap(), admin)
        });
        let servers: Vec<(Killed, u16)> = (0..processes)
            .map(|i| spawn_server(dir.path(), &url, &schema, i))
            .collect();
        let ports: Vec<u16> = servers.iter().map(|s| s.1).collect();
        let threads: Vec<String> = (0..threads_n)
            .map(|i| new_thread(ports[i % ports.len()]))
            .collect();
        if processes == 1 {
            // PostgreSQL flushes a session's counters at most once a second while it works, and
            // an idle session's within ten: wait, so that the set-up's statements (tables,
            // threads) are counted before the window, not in it.
            std::thread::sleep(STATS_FLUSH);
        }
        let before = rt.block_on(counters(&admin));
        // Submitted by 16 clients at once, round-robin over the processes, so that the
        // workers, not one client's round trips, set the pace.
        let began = Instant::now();
        std::thread::scope(|scope| {
            for client in 0..16 {
                let (threads, ports) = (&threads, &ports);
                scope.spawn(move || {
                    for i in (client..runs).step_by(16) {
                        let thread = &threads[i % threads.len()];
                        let (status, run) = call(
                            ports[i % ports.len()],
                            "POST",
                            &format!("/threads/{thread}/runs"),
                            Some(json!({
                                "assistant_id": "short",
                                "input": {},
                                "multitask_strategy": "enqueue",
                            })),
                        );
                        assert_eq!(status, 200, "{run}");
                    }
                });
            }
        });
        let submitted = began.elapsed();
        let deadline = Instant::now() + Duration::from_secs(600);
        while rt.block_on(finished(&admin, &schema)) < runs {
            assert!(Instant::now() < deadline, "runs did not finish");
            std::thread::sleep(Duration::from_millis(50));
        }
        let took = began.elapsed().as_secs_f64();
        println!(
            "{processes} process(es): {:.0} runs/s ({runs} runs in {took:.2} s; submitting took {:.2} s)",
            runs as f64 / took,
            submitted.as_secs_f64()
        );
        if processes == 1 {
            // What a run costs the database, from its own counters: the server exits first,
            // so its sessions flush their statistics (includes the HTTP side's records).
            drop(servers);
            std::thread::sleep(Duration::from_millis(1500));
            let after = rt.block_on(counters(&admin));
            println!(
                "database work per run (1 process): {:.1} commits, {:.1} rows written",
                (after[0] - before[0]) as f64 / runs as f64,
                (after[1] - before[1]) as f64 / runs as f64
            );
            rt.block_on(admin.batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE")))
                .unwrap();
            continue;
        }

        if processes == 2 {
            // Cancel latency: a slow run executing somewhere, cancelled through the other
            // process (`wait=1` answers once the run is stopped and recorded).
            let mut samples = Vec::new();
            for i in 0..40 {
                let (a, b) = (ports[i % 2], ports[(i + 1) % 2]);
                let thread = new_thread(a);
                let (status, run) = call(
                    a,
                    "POST",
                    &format!("/threads/{thread}/runs"),
                    Some(json!({"assistant_id": "slow", "input": {}})),
                );
                assert_eq!(status, 200, "{run}");
                let run_id = run["run_id"].as_str().unwrap().to_owned();
                while rt
                    .block_on(queue.get(&run_id))
                    .unwrap()
                    .is_none_or(|r| r.status != RunStatus::Running)
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
                let t = Instant::now();
                let (status, _) = call(
                    b,
                    "POST",
                    &format!("/threads/{thread}/runs/{run_id}/cancel?wait=1"),
                    None::<Json>,
                );
                samples.push(t.elapsed().as_secs_f64() * 1e3);
                assert_eq!(status, 200);
            }
            samples.sort_by(f64::total_cmp);
            println!(
                "cancel from the other process (wait=1, {} runs): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
                samples.len(),
                percentile(&samples, 0.5),
                percentile(&samples, 0.99),
                samples[samples.len() - 1]
            );
        }
        drop(servers);
        rt.block_on(admin.batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE")))
            .unwrap();
    }
}
