//! `SqliteRunQueue`: the shared run queue conformance suite on a fresh file per case, and
//! what is SQLite's own: fencing a saver's writes by a run's lease, notifications and keys
//! taken once across processes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;
use stategraph_checkpoint::{
    Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource, Error,
    SaveOp,
};
use stategraph_conformance::runs::{QueueOptions, RunQueueFixture};
use stategraph_runs::{
    CancelAction, FencingSaver, Multitask, NewRun, Notification, Notifications, OnceKeys, RunEnd,
    RunEvents, RunQueue, RunStatus,
};
use stategraph_sqlite::{
    SqliteConfig, SqliteRunQueue, SqliteRunQueueConfig, SqliteSaver, Synchronous,
};

/// A handle on the queue in `path`, a database of its own: two handles on one file have a
/// writer connection each and contend for the file as processes do.
async fn open(path: PathBuf, options: QueueOptions, level: Synchronous) -> SqliteRunQueue {
    SqliteRunQueueConfig::file(path)
        .lease(options.lease)
        .max_attempts(options.max_attempts)
        .synchronous(level)
        .connect()
        .await
        .expect("open the queue")
}

async fn make(options: QueueOptions) -> RunQueueFixture {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("runs.sqlite");
    let queue = open(path.clone(), options, Synchronous::Full).await;
    let other = open(path.clone(), options, Synchronous::Normal).await;
    RunQueueFixture::new(queue, other, move || {
        let path = path.clone();
        async move { Arc::new(open(path, options, Synchronous::Off).await) as Arc<dyn RunQueue> }
    })
    .with_guard(dir)
}

stategraph_conformance::run_queue_conformance!(make);

// ---- Fencing ----

/// A new checkpoint of `thread` after `parent`.
fn checkpoint(
    saver: &SqliteSaver,
    thread: &str,
    parent: Option<&str>,
) -> (CheckpointConfig, Checkpoint) {
    let mut config = CheckpointConfig::new(thread);
    if let Some(parent) = parent {
        config = config.with_checkpoint_id(parent);
    }
    let mut cp = Checkpoint::empty();
    cp.channel_values.insert("n".into(), "one".into());
    cp.channel_versions
        .insert("n", saver.get_next_version(None));
    (config, cp)
}

async fn put(
    saver: &dyn CheckpointSaver,
    config: &CheckpointConfig,
    cp: &Checkpoint,
) -> stategraph_checkpoint::Result<CheckpointConfig> {
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 1);
    saver.put(config, cp, &meta, &cp.channel_versions).await
}

fn lease_lost(result: stategraph_checkpoint::Result<impl std::fmt::Debug>, worker: &str) {
    match result {
        Err(Error::LeaseLost { run_id, worker: w }) => {
            assert_eq!((run_id.as_str(), w.as_str()), ("r1", worker))
        }
        other => panic!("expected the lease of r1 lost by {worker}, got {other:?}"),
    }
}

/// A saver fenced by a run's lease writes while the worker holds it, and writes nothing once
/// the lease ran out or another worker took the run over; a fence of another database handle
/// (the same file opened again included) fences nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_saver_writes_only_while_the_lease_is_held() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fence.sqlite");
    let lease = Duration::from_millis(300);
    let db = SqliteConfig::file(&path).open();
    let queue = db.run_queue().lease(lease).connect().await.unwrap();
    let saver = db.saver().connect().await.unwrap();
    queue.enqueue(NewRun::new("r1", "t1")).await.unwrap();
    queue.claim("w1", None).await.unwrap().unwrap();
    let fence = queue.fence("r1", "w1").expect("a queue fences");
    assert_eq!(fence.relation, "stategraph_runs");
    assert_eq!(fence.database, db.id());
    let fenced = saver.fenced(&fence).expect("the same database");

    // Held: puts, writes and batches go through.
    let (config, cp) = checkpoint(&saver, "t1", None);
    let stored = put(fenced.as_ref(), &config, &cp).await.unwrap();
    fenced
        .put_writes(&stored, &[("n".to_owned(), "two".into())], "task-1", "")
        .await
        .unwrap();
    let (next_config, next) = checkpoint(&saver, "t1", Some(cp.id.as_str()));
    let batch = [SaveOp::Put {
        config: next_config.clone(),
        checkpoint: Box::new(next.clone()),
        metadata: CheckpointMetadata::new(CheckpointSource::Loop, 2),
        new_versions: next.channel_versions.clone(),
        expected_latest: Some(cp.id.clone()),
    }];
    fenced.apply_batch(&batch).await.unwrap();
    assert!(
        saver
            .get_tuple(&CheckpointConfig::new("t1").with_checkpoint_id(next.id.as_str()))
            .await
            .unwrap()
            .is_some()
    );

    // The lease runs out: refused, before any takeover.
    tokio::time::sleep(lease + Duration::from_millis(200)).await;
    let (late_config, late) = checkpoint(&saver, "t1", Some(next.id.as_str()));
    lease_lost(put(fenced.as_ref(), &late_config, &late).await, "w1");

    // Taken over by w2: w1's writes are refused and write nothing; w2's go through.
    assert_eq!(queue.requeue_expired().await.unwrap().len(), 1);
    assert_eq!(queue.claim("w2", None).await.unwrap().unwrap().attempt, 2);
    lease_lost(put(fenced.as_ref(), &late_config, &late).await, "w1");
    lease_lost(
        fenced
            .put_writes(&stored, &[("n".to_owned(), "three".into())], "task-2", "")
            .await,
        "w1",
    );
    let (batch_config, batched) = checkpoint(&saver, "t1", Some(next.id.as_str()));
    let batch = [SaveOp::Put {
        config: batch_config,
        checkpoint: Box::new(batched.clone()),
        metadata: CheckpointMetadata::new(CheckpointSource::Loop, 3),
        new_versions: batched.channel_versions.clone(),
        expected_latest: Some(next.id.clone()),
    }];
    lease_lost(fenced.apply_batch(&batch).await, "w1");
    for id in [late.id.as_str(), batched.id.as_str()] {
        let config = CheckpointConfig::new("t1").with_checkpoint_id(id);
        assert!(
            saver.get_tuple(&config).await.unwrap().is_none(),
            "nothing written"
        );
    }
    let first = saver.get_tuple(&stored).await.unwrap().unwrap();
    assert_eq!(
        first.pending_writes.len(),
        1,
        "only the write made while held"
    );
    let takeover = saver.fenced(&queue.fence("r1", "w2").unwrap()).unwrap();
    put(takeover.as_ref(), &late_config, &late).await.unwrap();
    // Once w2 finished, its fence is gone too.
    queue
        .finish(RunEnd::new("r1", "w2", RunStatus::Success))
        .await
        .unwrap();
    let (after_config, after) = checkpoint(&saver, "t1", Some(late.id.as_str()));
    lease_lost(put(takeover.as_ref(), &after_config, &after).await, "w2");

    // Another file's fence, the same file opened again, a saver in memory: no fence.
    let elsewhere = SqliteRunQueueConfig::file(dir.path().join("other.sqlite"))
        .connect()
        .await
        .unwrap();
    assert!(
        saver
            .fenced(&elsewhere.fence("r1", "w1").unwrap())
            .is_none()
    );
    let again = SqliteConfig::file(&path).connect().await.unwrap();
    assert!(again.fenced(&fence).is_none(), "another handle of the file");
    let memory = SqliteSaver::connect("sqlite::memory:").await.unwrap();
    assert!(memory.fenced(&fence).is_none());
}

/// A saver and a queue built from one in-memory database share it: the saver fences by the
/// queue's runs in the same database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_memory_database_fences_its_own_runs() {
    let db = stategraph_sqlite::SqliteDatabase::from_url("sqlite::memory:").unwrap();
    let queue = db.run_queue().connect().await.unwrap();
    let saver = db.saver().connect().await.unwrap();
    queue.enqueue(NewRun::new("r1", "t1")).await.unwrap();
    queue.claim("w1", None).await.unwrap().unwrap();
    let fenced = saver.fenced(&queue.fence("r1", "w1").unwrap()).unwrap();
    let (config, cp) = checkpoint(&saver, "t1", None);
    put(fenced.as_ref(), &config, &cp).await.unwrap();
    queue
        .finish(RunEnd::new("r1", "w1", RunStatus::Success))
        .await
        .unwrap();
    let (next_config, next) = checkpoint(&saver, "t1", Some(cp.id.as_str()));
    lease_lost(put(fenced.as_ref(), &next_config, &next).await, "w1");
    let other = SqliteRunQueue::connect("sqlite::memory:").await.unwrap();
    assert!(saver.fenced(&other.fence("r1", "w1").unwrap()).is_none());
}

// ---- Across processes ----

/// The file a child process works on.
const FILE: &str = "STATEGRAPH_TEST_QUEUE_FILE";
/// What it does there: `notify` or `claim_once`.
const ROLE: &str = "STATEGRAPH_TEST_QUEUE_ROLE";
/// When it starts (Unix microseconds).
const START: &str = "STATEGRAPH_TEST_QUEUE_START";

/// The keys the processes of `cron_ticks_are_claimed_once_across_processes` race for.
const TICKS: usize = 40;

fn micros_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

fn sleep_until(start: u64) {
    std::thread::sleep(Duration::from_micros(start.saturating_sub(micros_now())));
}

fn tick(i: usize) -> String {
    format!("cron:1:tick-{i}")
}

/// Takes every tick it can on `queue`: those it won.
async fn take_ticks(queue: &impl OnceKeys) -> Vec<String> {
    let mut won = Vec::new();
    for i in 0..TICKS {
        if queue.claim_once(&tick(i)).await.unwrap() {
            won.push(tick(i));
        }
    }
    won
}

/// The child process: works on the file as its role says.
#[test]
#[ignore = "a child process of the cross-process tests"]
fn queue_child() {
    let (Ok(file), Ok(role)) = (std::env::var(FILE), std::env::var(ROLE)) else {
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let queue = SqliteRunQueueConfig::file(&file).connect().await.unwrap();
        match role.as_str() {
            "notify" => {
                queue
                    .enqueue(NewRun::new("r1", "t1").multitask(Multitask::Enqueue))
                    .await
                    .unwrap();
                queue.claim("child", Some("r1")).await.unwrap().unwrap();
                queue
                    .append_events("r1", "child", &[("values".to_owned(), json!({"n": 1}))])
                    .await
                    .unwrap();
                queue
                    .request_cancel("r1", CancelAction::Interrupt, "from the child")
                    .await
                    .unwrap();
                queue
                    .finish(RunEnd::new("r1", "child", RunStatus::Interrupted))
                    .await
                    .unwrap();
            }
            "claim_once" => {
                sleep_until(std::env::var(START).unwrap().parse().unwrap());
                for key in take_ticks(&queue).await {
                    println!("won {key}");
                }
            }
            other => panic!("unknown role {other}"),
        }
    });
}

/// Starts this test binary as a child in `role` on `file`.
fn child(file: &Path, role: &str, start: u64) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "queue_child",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(FILE, file)
        .env(ROLE, role)
        .env(START, start.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn succeeded(out: &Output) -> String {
    assert!(
        out.status.success(),
        "the child failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The next notification, within 10 s.
async fn next(notes: &mut Notifications) -> Notification {
    tokio::time::timeout(Duration::from_secs(10), notes.recv())
        .await
        .expect("a notification within 10 s")
        .expect("the subscription lives")
}

/// A subscriber hears what another process does on the file: an enqueue, an event, a stop
/// request, an end; with its handle's own changes delivered directly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_cross_processes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify.sqlite");
    let queue = SqliteRunQueueConfig::file(&path).connect().await.unwrap();
    let mut notes = queue.subscribe().await.unwrap();
    let worker = tokio::task::spawn_blocking({
        let path = path.clone();
        move || child(&path, "notify", 0).wait_with_output().unwrap()
    });
    let expected = [
        Notification::Enqueued {
            run_id: "r1".into(),
            thread_id: "t1".into(),
            claimable: true,
        },
        Notification::Event {
            run_id: "r1".into(),
            seq: 1,
        },
        Notification::Cancel {
            run_id: "r1".into(),
            action: CancelAction::Interrupt,
            reason: "from the child".into(),
        },
        Notification::Finished {
            run_id: "r1".into(),
            thread_id: "t1".into(),
            status: Some(RunStatus::Interrupted),
        },
    ];
    for want in &expected {
        assert_eq!(&next(&mut notes).await, want);
    }
    succeeded(&worker.await.unwrap());
    // This handle's own change, heard directly.
    queue.enqueue(NewRun::new("r2", "t2")).await.unwrap();
    assert!(
        matches!(next(&mut notes).await, Notification::Enqueued { run_id, .. } if run_id == "r2")
    );
    // With its last subscription dropped, the handle stops listening.
    drop(notes);
    let other = SqliteRunQueueConfig::file(&path).connect().await.unwrap();
    let mut again = other.subscribe().await.unwrap();
    queue.enqueue(NewRun::new("r3", "t3")).await.unwrap();
    assert!(
        matches!(next(&mut again).await, Notification::Enqueued { run_id, .. } if run_id == "r3")
    );
}

/// A cron's tick is taken once: by one of two handles on the file, and by one of several
/// processes racing for it at the same moment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_ticks_are_claimed_once_across_processes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cron.sqlite");
    let queue = SqliteRunQueueConfig::file(&path).connect().await.unwrap();
    let other = SqliteRunQueueConfig::file(&path)
        .synchronous(Synchronous::Normal)
        .connect()
        .await
        .unwrap();
    assert!(queue.claim_once("cron:0:tick").await.unwrap());
    assert!(!other.claim_once("cron:0:tick").await.unwrap());

    let start = micros_now() + 500_000;
    let children: Vec<_> = (0..2).map(|_| child(&path, "claim_once", start)).collect();
    let here = tokio::task::spawn(async move {
        tokio::time::sleep(Duration::from_micros(start.saturating_sub(micros_now()))).await;
        take_ticks(&other).await
    });
    let mut won: Vec<String> = here.await.unwrap();
    let mut by_process = vec![won.len()];
    for c in children {
        let out = tokio::task::spawn_blocking(move || c.wait_with_output().unwrap())
            .await
            .unwrap();
        // The harness prints its own words on the line of the first.
        let stdout = succeeded(&out);
        let keys: Vec<String> = stdout
            .split("won ")
            .skip(1)
            .filter_map(|rest| rest.split_whitespace().next())
            .map(str::to_owned)
            .collect();
        by_process.push(keys.len());
        won.extend(keys);
    }
    eprintln!("ticks taken by each process: {by_process:?}");
    let distinct: HashSet<&String> = won.iter().collect();
    assert_eq!(distinct.len(), won.len(), "a tick taken twice: {won:?}");
    assert_eq!(won.len(), TICKS, "every tick taken once: {won:?}");
}

/// The names registered in the file's listeners table.
fn registered(path: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare("SELECT name FROM stategraph_run_listeners")
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// A handle with subscribers is registered as a listener until its last subscription is
/// dropped; a registration nobody listens at (a process that died) is removed by the next
/// change that sends to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listeners_are_registered_while_subscribed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("listeners.sqlite");
    let queue = SqliteRunQueueConfig::file(&path).connect().await.unwrap();
    assert!(registered(&path).is_empty());
    let first = queue.subscribe().await.unwrap();
    let second = queue.subscribe().await.unwrap();
    let names = registered(&path);
    assert_eq!(names.len(), 1, "one socket a handle: {names:?}");
    drop(first);
    assert_eq!(registered(&path), names, "a subscription is left");
    drop(second);
    for _ in 0..100 {
        if registered(&path).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        registered(&path).is_empty(),
        "unregistered with its last subscription"
    );

    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute(
        "INSERT INTO stategraph_run_listeners (name, pid, registered_at) VALUES ('gone', 1, 0)",
        [],
    )
    .unwrap();
    queue.enqueue(NewRun::new("r1", "t1")).await.unwrap();
    assert!(registered(&path).is_empty(), "nobody listens at `gone`");
}

/// Any text round-trips through events, outputs and errors (NUL included), and a queue in
/// memory serves its one handle, notifications included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_text_round_trips_and_memory_queues_work() {
    let queue = SqliteRunQueue::connect("sqlite::memory:").await.unwrap();
    let mut notes = queue.subscribe().await.unwrap();
    queue
        .enqueue(NewRun::new("r\u{0}1", "t\u{0}1"))
        .await
        .unwrap();
    assert!(matches!(
        next(&mut notes).await,
        Notification::Enqueued {
            claimable: true,
            ..
        }
    ));
    let run = queue.claim("w", None).await.unwrap().unwrap();
    assert_eq!(run.run_id, "r\u{0}1");
    let text = json!({ "text": "nul \u{0} ünï €𝄞 \u{7f}", "list": [null, 1.5, "\u{0}"] });
    let events = [("va\u{0}lues".to_owned(), text.clone())];
    queue
        .append_events(&run.run_id, "w", &events)
        .await
        .unwrap();
    queue
        .finish(
            RunEnd::new(&run.run_id, "w", RunStatus::Error)
                .error(Some(&text))
                .output(Some(&text))
                .events(&events),
        )
        .await
        .unwrap();
    let logged = queue.events_after(&run.run_id, 0, 10).await.unwrap();
    assert_eq!(logged.len(), 2);
    assert!(
        logged
            .iter()
            .all(|e| e.event == "va\u{0}lues" && e.data == text)
    );
    let row = queue.get(&run.run_id).await.unwrap().unwrap();
    assert_eq!(
        (row.error.as_ref(), row.output.as_ref()),
        (Some(&text), Some(&text))
    );
}
