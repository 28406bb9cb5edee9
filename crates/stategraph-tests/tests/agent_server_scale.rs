//! Three Agent Server processes on one PostgreSQL schema (saver, store and run queue), two
//! workers each, run 300 background runs over 30 threads while one process after another is
//! killed with SIGKILL and restarted: every run succeeds, each node's effect is applied
//! exactly once per run, each thread's history is one chain, and no run finishes twice.
//! And with two processes: cancel (one run, or `POST /runs/cancel`), join, `runs/wait`,
//! `runs/stream` and the `reject` / `interrupt` multitask strategies work through either
//! process, wherever the run runs.
//!
//! The server processes are this test binary itself, re-run on `server_process_entry` (with
//! `--ignored --exact`) with `STATEGRAPH_TEST_SCALE_URL` set, as in `agent_server_kill.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};
use stategraph::prelude::*;
use stategraph::server::Server;
use stategraph_postgres::{
    CancelAction, CancelOutcome, Notification, PostgresRunQueue, RunEnd, RunEvents, RunQuery,
    RunQueue, RunQueueConfig, RunStatus,
};
use stategraph_testkit::postgres::ScratchSchema;

#[path = "common/http.rs"]
mod http;
#[path = "common/procs.rs"]
mod procs;
use http::{call, call_raw, call_with};
use procs::{Killed, serve_announced, spawn_entry};

const URL: &str = "STATEGRAPH_TEST_SCALE_URL";
const SCHEMA: &str = "STATEGRAPH_TEST_SCALE_SCHEMA";
const PORT_FILE: &str = "STATEGRAPH_TEST_SCALE_PORT_FILE";
/// Where a server process reaches its run queue, if not at the URL (a proxy).
const QUEUE_URL: &str = "STATEGRAPH_TEST_SCALE_QUEUE_URL";
/// A server process's lease in milliseconds, if not [`LEASE`].
const LEASE_MS: &str = "STATEGRAPH_TEST_SCALE_LEASE_MS";

const PROCESSES: usize = 3;
const THREADS: usize = 30;
const RUNS_PER_THREAD: usize = 10;
const LEASE: Duration = Duration::from_secs(2);

#[derive(State, Clone, Debug, Default)]
struct Log {
    #[reducer(append)]
    log: Vec<String>,
}

/// START → a → b → END; each node sleeps 150 ms, then appends `{node}:{run_id}`.
fn graph() -> CompiledGraph<Log> {
    let mut g = StateGraph::<Log>::new();
    for node in ["a", "b"] {
        g.add_node(node, move |_s, c| {
            let run = c
                .configurable("run_id")
                .and_then(Json::as_str)
                .unwrap_or("?")
                .to_owned();
            async move {
                tokio::time::sleep(Duration::from_millis(150)).await;
                Ok(LogUpdate::default().log([format!("{node}:{run}")]))
            }
        });
    }
    g.add_edge(START, "a").add_edge("a", "b").add_edge("b", END);
    g.compile().unwrap()
}

/// START → `node` (sleeps `sleep`, then appends `{node}:{run_id}`) → END.
fn sleeper(node: &'static str, sleep: Duration) -> CompiledGraph<Log> {
    let mut g = StateGraph::<Log>::new();
    g.add_node(node, move |_s, c| {
        let run = c
            .configurable("run_id")
            .and_then(Json::as_str)
            .unwrap_or("?")
            .to_owned();
        async move {
            tokio::time::sleep(sleep).await;
            Ok(LogUpdate::default().log([format!("{node}:{run}")]))
        }
    });
    g.add_edge(START, node).add_edge(node, END);
    g.compile().unwrap()
}

/// START → pause (sleeps 1.5 s, then appends `pause:{run_id}`) → END.
fn pause_graph() -> CompiledGraph<Log> {
    sleeper("pause", Duration::from_millis(1500))
}

/// START → quick (appends `quick:{run_id}` at once) → END.
fn quick_graph() -> CompiledGraph<Log> {
    sleeper("quick", Duration::ZERO)
}

/// START → late (sleeps twice the lease, then appends `late:{run_id}`) → END.
fn late_graph() -> CompiledGraph<Log> {
    sleeper("late", LEASE * 2)
}

/// START → slow (sleeps an hour) → END.
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
        .lease(LEASE)
        .max_attempts(20)
}

/// The server side: serves `graph` as `ab`, `late_graph` as `late`, `quick_graph` as
/// `quick`, `slow_graph` as `slow` and `pause_graph` as `pause` with a queue and two workers on the schema (reached at
/// `STATEGRAPH_TEST_SCALE_QUEUE_URL` when set), on a free port it writes to the port file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the server side of the scale test, which runs it; not a test itself"]
async fn server_process_entry() {
    let (Ok(url), Ok(schema), Ok(port_file)) = (
        std::env::var(URL),
        std::env::var(SCHEMA),
        std::env::var(PORT_FILE),
    ) else {
        panic!("run only by the scale test, with {URL} set");
    };
    // Saver, store and queue built from one database handle (one pool; fenced writes); the
    // queue's connections go their own way when told to (a proxy that can stall them).
    let db = stategraph::PostgresConfig::from_url(&url)
        .unwrap()
        .schema(&schema)
        .open()
        .unwrap();
    let saver = Arc::new(db.saver().connect().await.unwrap());
    let store = Arc::new(db.store().connect().await.unwrap());
    let mut config = db.run_queue().lease(LEASE).max_attempts(20);
    if let Ok(queue_url) = std::env::var(QUEUE_URL) {
        config = config.separate_pool(stategraph::PostgresConfig::from_url(&queue_url).unwrap());
    }
    if let Ok(ms) = std::env::var(LEASE_MS) {
        config = config.lease(Duration::from_millis(ms.parse().unwrap()));
    }
    let queue = config.connect().await.unwrap();
    let server = Server::builder()
        .graph("ab", graph())
        .graph("late", late_graph())
        .graph("quick", quick_graph())
        .graph("slow", slow_graph())
        .graph("pause", pause_graph())
        .fencing_checkpointer(saver)
        .store(store)
        .run_queue(queue)
        .workers(2)
        .build()
        .unwrap();
    serve_announced(server, &PathBuf::from(port_file)).await;
}

/// Starts server process `i`; it and its port.
fn spawn_server(dir: &Path, url: &str, schema: &str, i: usize) -> (Killed, u16) {
    spawn_server_with(dir, url, schema, i, &[])
}

/// [`spawn_server`] with more environment.
fn spawn_server_with(
    dir: &Path,
    url: &str,
    schema: &str,
    i: usize,
    more: &[(&str, &str)],
) -> (Killed, u16) {
    let port_file = dir.join(format!("port-{i}"));
    let mut env = vec![
        (URL, url),
        (SCHEMA, schema),
        (PORT_FILE, port_file.to_str().unwrap()),
    ];
    env.extend_from_slice(more);
    spawn_entry("server_process_entry", &env, &port_file)
}

/// A small pseudo-random number (no dependency needed for picking a process).
fn random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn runs_survive_killed_server_processes_and_each_runs_exactly_once() {
    let began = Instant::now();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let schema = rt.block_on(ScratchSchema::create("scale"));
    let url = schema.url();
    let name = schema.name().to_owned();
    // Tables made once here, before the processes race to make them.
    let queue = rt.block_on(async {
        stategraph::open_saver(&url).await.unwrap();
        stategraph::open_store(&url, StoreOptions::new())
            .await
            .unwrap();
        queue_config(&url, &name).connect().await.unwrap()
    });
    // Every `finished` announcement, by run.
    let finished: Arc<Mutex<BTreeMap<String, Vec<Option<RunStatus>>>>> = Arc::default();
    let mut listener = rt.block_on(queue.listen()).unwrap();
    let seen = Arc::clone(&finished);
    rt.spawn(async move {
        while let Some(n) = listener.recv().await {
            if let Notification::Finished { run_id, status, .. } = n {
                seen.lock().unwrap().entry(run_id).or_default().push(status);
            }
        }
    });

    let dir = tempfile::tempdir().unwrap();
    let mut servers: Vec<(Killed, u16)> = (0..PROCESSES)
        .map(|i| spawn_server(dir.path(), &url, &name, i))
        .collect();

    // 30 threads, 10 runs each (interleaved), all `enqueue`.
    let port = servers[0].1;
    let threads: Vec<String> = (0..THREADS).map(|_| new_thread(port)).collect();
    let mut runs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for round in 0..RUNS_PER_THREAD {
        for (t, thread_id) in threads.iter().enumerate() {
            let port = servers[(round + t) % PROCESSES].1;
            runs.entry(thread_id.clone())
                .or_default()
                .push(enqueue_ab(port, thread_id));
        }
    }
    let total = THREADS * RUNS_PER_THREAD;
    println!("submitted {total} runs in {:?}", began.elapsed());

    // Kill a random process every ~2 s and restart it, until every run is over.
    let hard_deadline = began + Duration::from_secs(120);
    let mut seed = u64::from(std::process::id()) | 1;
    let mut kills = 0;
    let mut last_kill = Instant::now() - Duration::from_secs(1);
    let counts = |queue: &PostgresRunQueue| {
        rt.block_on(async {
            let mut done = 0;
            for ids in runs.values() {
                for id in ids {
                    if queue.get(id).await.unwrap().unwrap().status.is_final() {
                        done += 1;
                    }
                }
            }
            done
        })
    };
    loop {
        let done = counts(&queue);
        if done == total {
            break;
        }
        assert!(
            Instant::now() < hard_deadline,
            "only {done} of {total} runs over after {:?} ({kills} kills)",
            began.elapsed()
        );
        if last_kill.elapsed() >= Duration::from_secs(2) {
            let i = usize::try_from(random(&mut seed) % PROCESSES as u64).unwrap();
            servers[i].0.0.kill().unwrap();
            servers[i].0.0.wait().unwrap();
            kills += 1;
            servers[i] = spawn_server(dir.path(), &url, &name, i);
            last_kill = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let elapsed = began.elapsed();

    // The queue: every run succeeded, once.
    let mut takeovers = 0;
    let mut attempts = BTreeMap::<u32, usize>::new();
    rt.block_on(async {
        for ids in runs.values() {
            for id in ids {
                let row = queue.get(id).await.unwrap().unwrap();
                assert_eq!(row.status, RunStatus::Success, "{row:?}");
                assert!(row.attempt >= 1, "{row:?}");
                // What a follower reads: each event once, whatever the attempts.
                let logged = queue.events_after(id, 0, 1000).await.unwrap();
                let mut seen = std::collections::BTreeSet::new();
                for e in logged.iter().filter(|e| e.event != "metadata") {
                    assert!(
                        seen.insert((e.event.clone(), e.data.to_string())),
                        "run {id} (attempt {}) logged {} {} twice",
                        row.attempt,
                        e.event,
                        e.data
                    );
                }
                *attempts.entry(row.attempt).or_default() += 1;
                if row.attempt > 1 {
                    takeovers += 1;
                }
            }
        }
    });
    // Announcements arrive after the commit: give the last ones a moment.
    std::thread::sleep(Duration::from_millis(500));
    {
        let finished = finished.lock().unwrap();
        for ids in runs.values() {
            for id in ids {
                assert_eq!(
                    finished.get(id).map(Vec::as_slice),
                    Some(&[Some(RunStatus::Success)][..]),
                    "run {id} finished other than once"
                );
            }
        }
    }

    // Each thread: every run's `a` and `b` once, in run order; one chain of checkpoints.
    let port = servers[0].1;
    let mut resumed = 0;
    for (thread_id, ids) in &runs {
        let (status, run_list) = call(
            port,
            "GET",
            &format!("/threads/{thread_id}/runs?limit=100"),
            None,
        );
        assert_eq!(status, 200, "{run_list}");
        for run in run_list.as_array().unwrap() {
            assert_eq!(run["status"], "success", "{run}");
        }
        let (status, thread) = call(port, "GET", &format!("/threads/{thread_id}"), None);
        assert_eq!(status, 200, "{thread}");
        assert_eq!(thread["status"], "idle", "{thread}");
        let (status, state) = call(port, "GET", &format!("/threads/{thread_id}/state"), None);
        assert_eq!(status, 200, "{state}");
        let expected: Vec<String> = ids
            .iter()
            .flat_map(|r| [format!("a:{r}"), format!("b:{r}")])
            .collect();
        assert_eq!(
            state["values"]["log"],
            json!(expected),
            "thread {thread_id}"
        );
        let (status, history) = call(
            port,
            "POST",
            &format!("/threads/{thread_id}/history"),
            Some(json!({"limit": 1000})),
        );
        assert_eq!(status, 200, "{history}");
        let history = history.as_array().unwrap();
        // Newest first: each checkpoint's parent is the next one; the oldest has none.
        for pair in history.windows(2) {
            assert_eq!(
                pair[0]["parent_checkpoint"]["checkpoint_id"],
                pair[1]["checkpoint"]["checkpoint_id"],
                "thread {thread_id}: history is not one chain"
            );
        }
        assert!(history.last().unwrap()["parent_checkpoint"].is_null());
        // Runs a later attempt carried on from an earlier attempt's checkpoints.
        let mut by_run: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
        for c in history {
            if let (Some(run), Some(attempt)) = (
                c["metadata"]["run_id"].as_str(),
                c["metadata"]["run_attempt"].as_i64(),
            ) {
                by_run.entry(run).or_default().push(attempt);
            }
        }
        resumed += by_run
            .values()
            .filter(|a| a.iter().any(|&x| x > 1) && a.contains(&1))
            .count();
    }
    println!(
        "{total} runs over {THREADS} threads on {PROCESSES} processes in {elapsed:?}: \
         {kills} kills, {takeovers} runs taken over after a lost lease (runs by claims: \
         {attempts:?}), {resumed} of them resumed from a killed attempt's checkpoints"
    );
    assert!(kills > 0);
    drop(servers);
}

/// Polls `f` until it answers `Some`, for up to 20 seconds.
fn poll<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Two server processes on a fresh schema (saver, store and queue set up), and the queue.
struct Pair {
    queue: PostgresRunQueue,
    a: u16,
    b: u16,
    _servers: (Killed, Killed),
    _dir: tempfile::TempDir,
    _schema: ScratchSchema,
}

/// A fresh schema with the saver's, the store's and the queue's tables made (before server
/// processes race to make them): the schema, its URL and name, and a queue on it.
async fn fresh_schema(prefix: &str) -> (ScratchSchema, String, String, PostgresRunQueue) {
    let schema = ScratchSchema::create(prefix).await;
    let (url, name) = (schema.url(), schema.name().to_owned());
    stategraph::open_saver(&url).await.unwrap();
    stategraph::open_store(&url, StoreOptions::new())
        .await
        .unwrap();
    let queue = queue_config(&url, &name).connect().await.unwrap();
    (schema, url, name, queue)
}

/// A new thread on the server at `port` and a background run of `assistant` on it, once a
/// worker has claimed it: the thread's and the run's ids.
fn claimed_run(
    rt: &tokio::runtime::Runtime,
    queue: &PostgresRunQueue,
    port: u16,
    assistant: &str,
) -> (String, String) {
    let thread = new_thread(port);
    let (status, run) = call(
        port,
        "POST",
        &format!("/threads/{thread}/runs"),
        Some(json!({"assistant_id": assistant, "input": {}})),
    );
    assert_eq!(status, 200, "{run}");
    let run = run["run_id"].as_str().unwrap().to_owned();
    poll("a worker to claim the run", || {
        let row = rt.block_on(queue.get(&run)).unwrap()?;
        (row.status == RunStatus::Running).then_some(())
    });
    (thread, run)
}

impl Pair {
    async fn start(prefix: &str) -> Self {
        let (schema, url, name, queue) = fresh_schema(prefix).await;
        let dir = tempfile::tempdir().unwrap();
        let (ka, a) = spawn_server(dir.path(), &url, &name, 0);
        let (kb, b) = spawn_server(dir.path(), &url, &name, 1);
        Self {
            queue,
            a,
            b,
            _servers: (ka, kb),
            _dir: dir,
            _schema: schema,
        }
    }
}

#[test]
fn cancel_join_wait_stream_and_multitask_work_from_any_process() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let pair = rt.block_on(Pair::start("scale_api"));
    let (queue, a, b) = (&pair.queue, pair.a, pair.b);
    // A `slow` run submitted to `port` on `thread`, once it is running (in any process).
    let running_slow_run = |port, thread: &str| {
        let (status, run) = call(
            port,
            "POST",
            &format!("/threads/{thread}/runs"),
            Some(json!({"assistant_id": "slow", "input": {}})),
        );
        assert_eq!(status, 200, "{run}");
        let run_id = run["run_id"].as_str().unwrap().to_owned();
        poll("the slow run to be running", || {
            let row = rt.block_on(queue.get(&run_id)).unwrap().unwrap();
            (row.status == RunStatus::Running).then_some(())
        });
        run_id
    };

    // A run cancelled through the process that does not run it.
    let thread = new_thread(a);
    let run_id = running_slow_run(a, &thread);
    let worker = rt
        .block_on(queue.get(&run_id))
        .unwrap()
        .unwrap()
        .worker
        .unwrap();
    let a_runs_it = worker.contains(&format!("-{}-", pair._servers.0.0.id()));
    let other = if a_runs_it { b } else { a };
    let (status, _) = call(
        other,
        "POST",
        &format!("/threads/{thread}/runs/{run_id}/cancel?wait=1"),
        None,
    );
    assert_eq!(status, 200);
    let row = rt.block_on(queue.get(&run_id)).unwrap().unwrap();
    assert_eq!(row.status, RunStatus::Interrupted, "{row:?}");
    let (_, run) = call(a, "GET", &format!("/threads/{thread}/runs/{run_id}"), None);
    assert_eq!(run["status"], "interrupted", "{run}");
    // The thread says why, in the words of the process that was asked (whichever ran it).
    let (_, t) = call(a, "GET", &format!("/threads/{thread}"), None);
    assert_eq!(
        t["error"],
        json!({
            "error": "UserInterrupt",
            "message": "interrupt requested via POST /threads/{thread_id}/runs/{run_id}/cancel"
        }),
        "{t}"
    );

    // Multitask strategies across processes: `reject` is 409 while the thread's run runs
    // elsewhere; `interrupt` stops it wherever it runs, and the new run runs.
    let thread = new_thread(a);
    let slow = running_slow_run(a, &thread);
    let (status, body) = call(
        b,
        "POST",
        &format!("/threads/{thread}/runs"),
        Some(json!({"assistant_id": "ab", "input": {}, "multitask_strategy": "reject"})),
    );
    assert_eq!(status, 409, "{body}");
    let (status, run) = call(
        b,
        "POST",
        &format!("/threads/{thread}/runs"),
        Some(json!({"assistant_id": "ab", "input": {}, "multitask_strategy": "interrupt"})),
    );
    assert_eq!(status, 200, "{run}");
    let next = run["run_id"].as_str().unwrap().to_owned();
    let (status, values) = call(
        a,
        "GET",
        &format!("/threads/{thread}/runs/{next}/join"),
        None,
    );
    assert_eq!(status, 200, "{values}");
    assert_eq!(
        values["log"],
        json!([format!("a:{next}"), format!("b:{next}")])
    );
    let row = rt.block_on(queue.get(&slow)).unwrap().unwrap();
    assert_eq!(row.status, RunStatus::Interrupted, "{row:?}");

    // Bulk cancel (`POST /runs/cancel`) through A of a run running anywhere.
    let thread = new_thread(b);
    let slow = running_slow_run(b, &thread);
    let (status, body) = call(
        a,
        "POST",
        "/runs/cancel",
        Some(json!({"thread_id": thread, "run_ids": [slow]})),
    );
    assert!(status == 204 || status == 200, "{status} {body}");
    poll("the bulk-cancelled run to be interrupted", || {
        let row = rt.block_on(queue.get(&slow)).unwrap().unwrap();
        (row.status == RunStatus::Interrupted).then_some(())
    });

    // A background run submitted to A, joined through B.
    let thread = new_thread(a);
    let (status, run) = call(
        a,
        "POST",
        &format!("/threads/{thread}/runs"),
        Some(json!({"assistant_id": "ab", "input": {}})),
    );
    assert_eq!(status, 200, "{run}");
    let first = run["run_id"].as_str().unwrap().to_owned();
    let (status, values) = call(
        b,
        "GET",
        &format!("/threads/{thread}/runs/{first}/join"),
        None,
    );
    assert_eq!(status, 200, "{values}");
    assert_eq!(
        values["log"],
        json!([format!("a:{first}"), format!("b:{first}")])
    );

    // `runs/wait` through B: the queued run's outcome.
    let (status, values) = call(
        b,
        "POST",
        &format!("/threads/{thread}/runs/wait"),
        Some(json!({"assistant_id": "ab", "input": {}})),
    );
    assert_eq!(status, 200, "{values}");
    let log = values["log"].as_array().unwrap();
    assert_eq!(log.len(), 4, "{values}");
    let second = log[2]
        .as_str()
        .unwrap()
        .strip_prefix("a:")
        .unwrap()
        .to_owned();
    assert_eq!(log[3], format!("b:{second}"));
    let row = rt.block_on(queue.get(&second)).unwrap().unwrap();
    assert_eq!(row.status, RunStatus::Success, "{row:?}");

    // `runs/stream` through A: the queued run's events, `metadata` first.
    let (status, sse) = call_raw(
        a,
        "POST",
        &format!("/threads/{thread}/runs/stream"),
        Some(json!({"assistant_id": "ab", "input": {}, "stream_mode": ["values", "updates"]})),
    );
    assert_eq!(status, 200, "{sse}");
    let events: Vec<(String, Json)> = sse_events(&sse)
        .into_iter()
        .map(|(_, n, d)| (n, d))
        .collect();
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"metadata"), "{names:?}");
    assert_eq!(
        names.iter().filter(|n| **n == "updates").count(),
        2,
        "{names:?}"
    );
    let last_values = &events.iter().rev().find(|(n, _)| n == "values").unwrap().1;
    assert_eq!(
        last_values["log"].as_array().unwrap().len(),
        6,
        "{last_values}"
    );

    // A resumable run streamed through A; a client that lost the stream reconnects to B with
    // its `Last-Event-ID` and gets the rest, with the same ids (`-1`: all of them).
    let (status, sse) = call_raw(
        a,
        "POST",
        &format!("/threads/{thread}/runs/stream"),
        Some(json!({
            "assistant_id": "ab", "input": {}, "stream_mode": ["values", "updates"],
            "stream_resumable": true,
        })),
    );
    assert_eq!(status, 200, "{sse}");
    let streamed = sse_events(&sse);
    assert!(streamed.len() >= 4, "{streamed:?}");
    assert!(
        streamed.iter().all(|(id, _, _)| id.is_some()),
        "{streamed:?}"
    );
    let run_id = streamed[0].2["run_id"].as_str().unwrap().to_owned();
    let join = |last: &str| {
        let (status, sse) = call_with(
            b,
            "GET",
            &format!("/threads/{thread}/runs/{run_id}/stream"),
            None,
            &[("last-event-id", last)],
        );
        assert_eq!(status, 200, "{sse}");
        sse_events(&sse)
    };
    let key = |e: &Vec<(Option<String>, String, Json)>| -> Vec<(String, String)> {
        e.iter()
            .map(|(id, n, _)| {
                let seq = id.as_deref().unwrap().rsplit_once('-').unwrap().1;
                (seq.to_owned(), n.clone())
            })
            .collect()
    };
    assert_eq!(key(&join("-1")), key(&streamed));
    let second_id = streamed[1].0.clone().unwrap();
    assert_eq!(key(&join(&second_id)), key(&streamed)[2..].to_vec());
}

/// A streamed run holds its thread in every process: a background run of the same thread
/// submitted to another process waits (`pending`) until the streamed run ended, the thread
/// stays `busy` until the last of them ended, and the runs' effects do not interleave.
#[test]
fn a_streamed_run_holds_its_thread_across_processes() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let pair = rt.block_on(Pair::start("scale_turns"));
    let (queue, a, b) = (&pair.queue, pair.a, pair.b);
    let thread = new_thread(a);

    let streamer = std::thread::spawn({
        let thread = thread.clone();
        move || {
            call_raw(
                a,
                "POST",
                &format!("/threads/{thread}/runs/stream"),
                Some(json!({"assistant_id": "pause", "input": {}, "stream_mode": "values"})),
            )
        }
    });
    let streamed = poll("the streamed run to be running", || {
        let runs = rt.block_on(queue.list(&RunQuery::thread(&thread))).unwrap();
        runs.iter()
            .find(|r| r.status == RunStatus::Running)
            .map(|r| r.run_id.clone())
    });
    let queued = enqueue_ab(b, &thread);
    // While the streamed run runs in A, B's workers leave the thread's next run alone.
    for _ in 0..5 {
        let row = rt.block_on(queue.get(&queued)).unwrap().unwrap();
        let streaming = rt.block_on(queue.get(&streamed)).unwrap().unwrap();
        if streaming.status != RunStatus::Running {
            break;
        }
        assert_eq!(row.status, RunStatus::Pending, "{row:?}");
        let (_, t) = call(b, "GET", &format!("/threads/{thread}"), None);
        assert_eq!(t["status"], "busy", "{t}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, sse) = streamer.join().unwrap();
    assert_eq!(status, 200, "{sse}");
    // The thread is busy until the queued run ended too, in either process's eyes.
    let (_, t) = call(a, "GET", &format!("/threads/{thread}"), None);
    let row = rt.block_on(queue.get(&queued)).unwrap().unwrap();
    if !row.status.is_final() {
        assert_eq!(t["status"], "busy", "{t} {row:?}");
    }
    let (status, values) = call(
        a,
        "GET",
        &format!("/threads/{thread}/runs/{queued}/join"),
        None,
    );
    assert_eq!(status, 200, "{values}");
    assert_eq!(
        values["log"],
        json!([
            format!("pause:{streamed}"),
            format!("a:{queued}"),
            format!("b:{queued}")
        ])
    );
    for port in [a, b] {
        let (_, t) = call(port, "GET", &format!("/threads/{thread}"), None);
        assert_eq!(t["status"], "idle", "{t}");
    }
    for id in [&streamed, &queued] {
        let row = rt.block_on(queue.get(id)).unwrap().unwrap();
        assert_eq!(row.status, RunStatus::Success, "{row:?}");
    }
}

/// A thread's status is the queue's, whichever process put the run there and whatever the
/// thread's record says: a run another process enqueued and claimed after this thread's record
/// was settled `idle` (the lost update of a status kept in the record) reads `busy` on every
/// process, and a run of it with `reject` is refused, until that run ended.
#[test]
fn a_threads_status_is_the_queues() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let pair = rt.block_on(Pair::start("scale_status"));
    let (queue, a, b) = (&pair.queue, pair.a, pair.b);
    let thread = new_thread(a);
    assert_eq!(thread_status(a, &thread), "idle");
    // Another process's run of the thread, enqueued and claimed behind the record's back.
    let run = stategraph::uuid4().to_string();
    let new_run = stategraph_postgres::NewRun::new(&run, &thread).claimed_by("elsewhere");
    let enqueued = rt.block_on(queue.enqueue(new_run)).unwrap();
    assert_eq!(enqueued.claimed.map(|c| c.run_id), Some(run.clone()));
    for port in [a, b] {
        assert_eq!(thread_status(port, &thread), "busy");
        let (status, body) = call(
            port,
            "POST",
            &format!("/threads/{thread}/runs"),
            Some(json!({"assistant_id": "ab", "input": {}, "multitask_strategy": "reject"})),
        );
        assert_eq!(status, 409, "{body}");
    }
    let (_, found) = call(
        b,
        "POST",
        "/threads/search",
        Some(json!({"status": "busy", "limit": 100})),
    );
    assert!(
        found
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["thread_id"] == thread.as_str()),
        "{found}"
    );
    let end = RunEnd::new(&run, "elsewhere", RunStatus::Success);
    assert!(rt.block_on(queue.finish(end)).unwrap().ended);
    for port in [a, b] {
        assert_eq!(thread_status(port, &thread), "idle");
    }
}

/// A new thread, created through the process on `port`.
fn new_thread(port: u16) -> String {
    let (status, thread) = call(port, "POST", "/threads", Some(json!({})));
    assert_eq!(status, 200, "{thread}");
    thread["thread_id"].as_str().unwrap().to_owned()
}

/// A background run of `ab` on `thread`, enqueued through the process on `port`: its id.
fn enqueue_ab(port: u16, thread: &str) -> String {
    let (status, run) = call(
        port,
        "POST",
        &format!("/threads/{thread}/runs"),
        Some(json!({"assistant_id": "ab", "input": {}, "multitask_strategy": "enqueue"})),
    );
    assert_eq!(status, 200, "{run}");
    run["run_id"].as_str().unwrap().to_owned()
}

/// A thread's status as `GET /threads/{thread_id}` on `port` answers it.
fn thread_status(port: u16, thread: &str) -> String {
    let (status, t) = call(port, "GET", &format!("/threads/{thread}"), None);
    assert_eq!(status, 200, "{t}");
    t["status"].as_str().unwrap().to_owned()
}

/// The events of an SSE body: id (if any), name, data.
fn sse_events(sse: &str) -> Vec<(Option<String>, String, Json)> {
    let mut events = Vec::new();
    for block in sse.split("\n\n") {
        let (mut id, mut name, mut data) = (None, None, None);
        for line in block.lines() {
            if let Some(i) = line.strip_prefix("id: ") {
                id = Some(i.to_owned());
            } else if let Some(n) = line.strip_prefix("event: ") {
                name = Some(n.to_owned());
            } else if let Some(d) = line.strip_prefix("data: ") {
                data = Some(serde_json::from_str::<Json>(d).unwrap());
            }
        }
        if let (Some(n), Some(d)) = (name, data) {
            events.push((id, n, d));
        }
    }
    events
}

/// Sends `signal` (`STOP`, `CONT`) to process `pid`.
fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid}");
}

/// How many checkpoints and writes the thread has in the database.
async fn thread_rows(db: &tokio_postgres::Client, thread: &str) -> (i64, i64) {
    let count = |table: &str| format!("SELECT count(*) FROM {table} WHERE thread_id = $1");
    let checkpoints = db
        .query_one(&count("checkpoints"), &[&thread])
        .await
        .unwrap();
    let writes = db
        .query_one(&count("checkpoint_writes"), &[&thread])
        .await
        .unwrap();
    (checkpoints.get(0), writes.get(0))
}

/// A process frozen (SIGSTOP) past its lease while it runs a run: another process takes the
/// run over and finishes it; the frozen one wakes (SIGCONT) with its node's result in hand
/// and stops — its heartbeat finds the lease gone, or the fence refuses its write, whichever
/// comes first. The database holds nothing more after it woke, the run and its thread keep
/// what the new worker recorded (`success`, `idle`), and the node's effect is in the thread
/// once. (`a_worker_that_lost_its_lease_cannot_write_a_checkpoint` isolates the fence.)
#[test]
fn a_worker_frozen_past_its_lease_is_fenced_out() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (schema, url, name, queue) = rt.block_on(fresh_schema("scale_fence"));
    let db = rt.block_on(schema.client());
    let dir = tempfile::tempdir().unwrap();
    let (frozen, a) = spawn_server(dir.path(), &url, &name, 0);
    let (thread, run) = claimed_run(&rt, &queue, a, "pause");
    // Mid-node (it sleeps 1.5 s): frozen for longer than the lease.
    std::thread::sleep(Duration::from_millis(300));
    signal(frozen.0.id(), "STOP");
    let (_other, b) = spawn_server(dir.path(), &url, &name, 1);
    let row = poll("another process to take the run over and finish it", || {
        let row = rt.block_on(queue.get(&run)).unwrap()?;
        (row.status.is_final()).then_some(row)
    });
    assert_eq!((row.status, row.attempt), (RunStatus::Success, 2));
    let rows = rt.block_on(thread_rows(&db, &thread));
    let (_, record) = call(b, "GET", &format!("/threads/{thread}/runs/{run}"), None);
    assert_eq!(record["status"], "success", "{record}");

    // The frozen process wakes up with its node's result: nothing of it lands.
    signal(frozen.0.id(), "CONT");
    std::thread::sleep(LEASE + Duration::from_secs(1));
    assert_eq!(
        rt.block_on(thread_rows(&db, &thread)),
        rows,
        "no checkpoint or write after the lease was lost"
    );
    let row = rt.block_on(queue.get(&run)).unwrap().unwrap();
    assert_eq!((row.status, row.attempt), (RunStatus::Success, 2));
    for port in [a, b] {
        let (_, record) = call(port, "GET", &format!("/threads/{thread}/runs/{run}"), None);
        assert_eq!(record["status"], "success", "{record}");
        assert_eq!(thread_status(port, &thread), "idle");
        let (_, state) = call(port, "GET", &format!("/threads/{thread}/state"), None);
        assert_eq!(
            state["values"]["log"],
            json!([format!("pause:{run}")]),
            "{state}"
        );
    }
    drop(frozen);
}

/// How many checkpoints of the thread the run's first attempt wrote.
async fn first_attempt_checkpoints(db: &tokio_postgres::Client, thread: &str) -> i64 {
    db.query_one(
        "SELECT count(*) FROM checkpoints WHERE thread_id = $1 \
         AND metadata->>'run_attempt' = '1'",
        &[&thread],
    )
    .await
    .unwrap()
    .get(0)
}

/// Fencing when a worker's heartbeats stop reaching the queue while it keeps working (its
/// queue connection stalls; its checkpointer's does not): its lease runs out, another
/// process takes the run over, and when the first worker's node returns — after the
/// takeover, with the old lease — its writes are refused in the database. The new worker
/// finishes the run: `success`, the node's effect once, nothing of the first attempt written
/// after the takeover. (Unfenced, the old worker's writes land first and the new worker's
/// run then fails on a checkpoint conflict.)
#[test]
fn a_worker_that_lost_its_lease_cannot_write_a_checkpoint() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (schema, url, name, queue) = rt.block_on(fresh_schema("scale_fenced"));
    let db = rt.block_on(schema.client());
    let proxy = rt.block_on(stategraph_testkit::net::StallingProxy::start(
        stategraph_testkit::postgres::server_addr(),
    ));
    let proxied = stategraph_testkit::postgres::url_via(proxy.addr());
    let dir = tempfile::tempdir().unwrap();
    let (_stalled, a) = spawn_server_with(dir.path(), &url, &name, 0, &[(QUEUE_URL, &proxied)]);
    let (thread, run) = claimed_run(&rt, &queue, a, "late");
    std::thread::sleep(Duration::from_millis(300));
    // Its heartbeats stop reaching the queue; its node goes on.
    proxy.go_silent();
    let (_other, b) = spawn_server(dir.path(), &url, &name, 1);
    poll("another process to take the run over", || {
        let row = rt.block_on(queue.get(&run)).unwrap()?;
        (row.attempt == 2).then_some(())
    });
    let written_before = rt.block_on(first_attempt_checkpoints(&db, &thread));
    let row = poll("the run to end", || {
        // Meanwhile the fenced-out worker's node returns: it records nothing either (no
        // `error` run or thread from it).
        let (_, record) = call(b, "GET", &format!("/threads/{thread}/runs/{run}"), None);
        assert_ne!(record["status"], "error", "{record}");
        let row = rt.block_on(queue.get(&run)).unwrap()?;
        row.status.is_final().then_some(row)
    });
    assert_eq!(
        (row.status, row.attempt),
        (RunStatus::Success, 2),
        "{row:?}"
    );
    assert_eq!(
        rt.block_on(first_attempt_checkpoints(&db, &thread)),
        written_before,
        "the first attempt wrote nothing after the takeover"
    );
    let (_, record) = call(b, "GET", &format!("/threads/{thread}/runs/{run}"), None);
    assert_eq!(record["status"], "success", "{record}");
    assert_eq!(thread_status(b, &thread), "idle");
    let (_, state) = call(b, "GET", &format!("/threads/{thread}/state"), None);
    assert_eq!(
        state["values"]["log"],
        json!([format!("late:{run}")]),
        "{state}"
    );
}

/// Postgres ends the server processes' connections (`pg_terminate_backend`) every 100 ms
/// while runs execute: every run ends once and succeeds — a checkpoint write that lost its
/// connection stops that attempt and the queue runs the run again from its last stored
/// checkpoint —, each node's effect lands once per run, and no thread is left busy.
#[test]
fn runs_survive_terminated_database_connections() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (schema, url, name, queue) = rt.block_on(fresh_schema("scale_term"));
    let db = rt.block_on(schema.client());
    // The server processes' connections, told apart by their application name.
    let app = name.clone();
    let tagged = stategraph_testkit::services::with_param(&url, &format!("application_name={app}"));
    let dir = tempfile::tempdir().unwrap();
    let (_a, a) = spawn_server(dir.path(), &tagged, &name, 0);
    let (_b, b) = spawn_server(dir.path(), &tagged, &name, 1);
    let mut runs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for t in 0..6 {
        let port = if t % 2 == 0 { a } else { b };
        let thread = new_thread(port);
        for _ in 0..5 {
            runs.entry(thread.clone())
                .or_default()
                .push(enqueue_ab(port, &thread));
        }
    }
    let all: Vec<&String> = runs.values().flatten().collect();
    let mut terminated = 0_i64;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let over = all
            .iter()
            .filter(|id| {
                rt.block_on(queue.get(id))
                    .unwrap()
                    .is_some_and(|r| r.status.is_final())
            })
            .count();
        if over == all.len() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{over} of {} runs over",
            all.len()
        );
        let row = rt
            .block_on(db.query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE application_name = $1",
                &[&app],
            ))
            .unwrap();
        terminated += row.get::<_, i64>(0);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(terminated > 0, "no connection was terminated");
    for (thread, ids) in &runs {
        for id in ids {
            let row = rt.block_on(queue.get(id)).unwrap().unwrap();
            assert_eq!(row.status, RunStatus::Success, "{row:?}");
        }
        assert_eq!(thread_status(a, thread), "idle");
        let (_, state) = call(b, "GET", &format!("/threads/{thread}/state"), None);
        let expected: Vec<String> = ids
            .iter()
            .flat_map(|r| [format!("a:{r}"), format!("b:{r}")])
            .collect();
        assert_eq!(state["values"]["log"], json!(expected), "thread {thread}");
    }
    println!("{terminated} connections terminated");
}

/// A stop request made while the process that runs the run has no listener (Postgres ended
/// its connection) reaches the run once the process listens again — not at the run's next
/// heartbeat, which with this process's ten-minute lease is minutes away.
#[test]
fn a_cancel_made_while_a_process_had_no_listener_stops_its_run() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (schema, url, name, queue) = rt.block_on(fresh_schema("scale_relisten"));
    let db = rt.block_on(schema.client());
    let app = name.clone();
    let tagged = stategraph_testkit::services::with_param(&url, &format!("application_name={app}"));
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = spawn_server_with(dir.path(), &tagged, &name, 0, &[(LEASE_MS, "600000")]);
    let (_thread, run) = claimed_run(&rt, &queue, port, "slow");
    let listeners = |db: &tokio_postgres::Client| {
        rt.block_on(db.query_one(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE application_name = $1 AND query LIKE 'LISTEN%'",
            &[&app],
        ))
        .unwrap()
        .get::<_, i64>(0)
    };
    poll("the server to listen", || {
        (listeners(&db) == 1).then_some(())
    });
    let ended = rt
        .block_on(db.query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = $1 AND query LIKE 'LISTEN%'",
            &[&app],
        ))
        .unwrap()
        .get::<_, i64>(0);
    assert_eq!(ended, 1);
    poll("the listener's connection to end", || {
        (listeners(&db) == 0).then_some(())
    });
    // Asked through the database, while no notification can reach the process.
    let outcome = rt
        .block_on(queue.request_cancel(&run, CancelAction::Interrupt, "asked while deaf"))
        .unwrap();
    assert_eq!(outcome, CancelOutcome::Signalled);
    poll("the run to stop", || {
        let row = rt.block_on(queue.get(&run)).unwrap().unwrap();
        (row.status == RunStatus::Interrupted).then_some(())
    });
    assert_eq!(listeners(&db), 1, "the process listens again");
}

/// How many times the race of [`a_threads_status_follows_its_runs_under_racing_processes`]
/// is run: 1,000 (about 200 s on a 2-core machine), or `STATEGRAPH_TEST_RACES`.
fn races() -> usize {
    std::env::var("STATEGRAPH_TEST_RACES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000)
}

/// Two processes race on one thread, over and over: one's run finishes while the other
/// enqueues the next (each a `runs/wait`, sent at once). After every round the thread's
/// status is what its runs say (`idle`: both succeeded), from either process, and its state
/// holds each run's effect once.
#[test]
fn a_threads_status_follows_its_runs_under_racing_processes() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let pair = rt.block_on(Pair::start("scale_race"));
    let (a, b) = (pair.a, pair.b);
    let thread = new_thread(a);
    let path = format!("/threads/{thread}/runs/wait");
    let body = json!({"assistant_id": "quick", "input": {}, "multitask_strategy": "enqueue"});
    let began = Instant::now();
    let mut effects = 0;
    let races = races();
    for round in 0..races {
        let (first, second) = if round % 2 == 0 { (a, b) } else { (b, a) };
        let (one, two) = std::thread::scope(|s| {
            let one = s.spawn(|| call(first, "POST", &path, Some(body.clone())));
            let two = s.spawn(|| call(second, "POST", &path, Some(body.clone())));
            (one.join().unwrap(), two.join().unwrap())
        });
        assert_eq!(
            (one.0, two.0),
            (200, 200),
            "round {round}: {} / {}",
            one.1,
            two.1
        );
        effects += 2;
        for port in [a, b] {
            assert_eq!(thread_status(port, &thread), "idle", "round {round}");
        }
    }
    let (_, state) = call(b, "GET", &format!("/threads/{thread}/state"), None);
    let log = state["values"]["log"].as_array().unwrap();
    assert_eq!(log.len(), effects, "each run's node once");
    let (_, runs) = call(
        a,
        "GET",
        &format!("/threads/{thread}/runs?limit=10000"),
        None,
    );
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), effects);
    assert!(runs.iter().all(|r| r["status"] == "success"));
    let mut ran: Vec<String> = runs
        .iter()
        .map(|r| format!("quick:{}", r["run_id"].as_str().unwrap()))
        .collect();
    let mut logged: Vec<String> = log.iter().map(|v| v.as_str().unwrap().to_owned()).collect();
    ran.sort();
    logged.sort();
    assert_eq!(logged, ran, "the runs' effects, each once");
    println!("{races} races in {:?}", began.elapsed());
}
