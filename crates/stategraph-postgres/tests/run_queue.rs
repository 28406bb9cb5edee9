//! The run queue against a real PostgreSQL (`STATEGRAPH_TEST_POSTGRES_URL`, default the local
//! test server), each test in a scratch schema of its own: lifecycle and FIFO per thread,
//! racing workers, lease expiry and takeover, the multitask strategies (and concurrent
//! enqueues of one thread), notifications, events, setup, a silent server. A server that cannot be reached fails the tests.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use stategraph_checkpoint::Error;
use stategraph_checkpoint::backend::Timeouts;
use stategraph_postgres::{
    CancelAction, CancelOutcome, Listener, Multitask, NewRun, Notification, RunQueue,
    RunQueueConfig, RunStatus,
};
use stategraph_testkit::net::{StallingProxy, bounded};
use stategraph_testkit::postgres::{ScratchSchema, connect, server_addr, url, url_via};

/// The bound on any single wait for a notification (so a test cannot hang).
const WAIT: Duration = Duration::from_secs(5);

async fn queue_with(
    schema: &ScratchSchema,
    configure: impl FnOnce(RunQueueConfig) -> RunQueueConfig,
) -> RunQueue {
    let config = RunQueueConfig::from_url(&url())
        .unwrap()
        .schema(schema.name())
        .pool_size(4);
    configure(config)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL at {} is required for these tests: {e}", url()))
}

async fn queue(schema: &ScratchSchema) -> RunQueue {
    queue_with(schema, |c| c).await
}

fn run(id: &str, thread: &str) -> NewRun {
    NewRun::new(id, thread, json!({ "input": id })).multitask(Multitask::Enqueue)
}

/// The next notification satisfying `wanted`, skipping others, within [`WAIT`].
async fn wait_for(
    listener: &mut Listener,
    what: &str,
    wanted: impl Fn(&Notification) -> bool,
) -> Notification {
    tokio::time::timeout(WAIT, async {
        loop {
            let n = listener
                .recv()
                .await
                .expect("the listener's connection closed");
            if wanted(&n) {
                return n;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {what} notification within {WAIT:?}"))
}

#[tokio::test]
async fn lifecycle_and_fifo_per_thread() {
    let schema = ScratchSchema::new("sg_runs");
    let q = queue(&schema).await;
    for (id, thread) in [("r1", "t1"), ("r2", "t1"), ("r3", "t2")] {
        assert_eq!(
            q.enqueue(run(id, thread)).await.unwrap(),
            Default::default()
        );
    }
    let pending = q.get("r1").await.unwrap().unwrap();
    assert_eq!(pending.status, RunStatus::Pending);
    assert_eq!((pending.attempt, pending.max_attempts), (0, 3));
    assert_eq!(pending.payload, json!({ "input": "r1" }));

    let first = q.claim("w1").await.unwrap().unwrap();
    assert_eq!(
        (first.run_id.as_str(), first.thread_id.as_str()),
        ("r1", "t1")
    );
    assert_eq!(first.attempt, 1);
    assert_eq!(first.payload, json!({ "input": "r1" }));
    // r2 waits behind r1 (same thread); r3's thread is free.
    let other = q.claim("w2").await.unwrap().unwrap();
    assert_eq!(other.run_id, "r3");
    assert_eq!(q.claim("w3").await.unwrap(), None);

    let running = q.get("r1").await.unwrap().unwrap();
    assert_eq!(running.status, RunStatus::Running);
    assert_eq!(running.worker.as_deref(), Some("w1"));
    assert!(running.lease_until.is_some());

    let lease = q.heartbeat("r1", "w1").await.unwrap();
    assert!(lease.held);
    assert_eq!(lease.cancel, None);
    assert!(!q.heartbeat("r1", "w2").await.unwrap().held);
    assert!(
        !q.finish("r1", "w2", RunStatus::Success, None)
            .await
            .unwrap()
    );

    assert!(
        q.finish("r1", "w1", RunStatus::Success, None)
            .await
            .unwrap()
    );
    assert!(
        !q.finish("r1", "w1", RunStatus::Success, None)
            .await
            .unwrap()
    );
    assert!(!q.heartbeat("r1", "w1").await.unwrap().held);
    assert_eq!(
        q.get("r1").await.unwrap().unwrap().status,
        RunStatus::Success
    );

    let second = q.claim("w3").await.unwrap().unwrap();
    assert_eq!(second.run_id, "r2");
    let failure = json!({ "error": "ValueError", "message": "boom" });
    assert!(
        q.finish("r2", "w3", RunStatus::Error, Some(&failure))
            .await
            .unwrap()
    );
    let failed = q.get("r2").await.unwrap().unwrap();
    assert_eq!(
        (failed.status, failed.error),
        (RunStatus::Error, Some(failure))
    );

    let order: Vec<String> = q
        .runs_of_thread("t1")
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.run_id)
        .collect();
    assert_eq!(order, ["r1", "r2"]);
    assert!(q.runs_of_thread("nobody").await.unwrap().is_empty());
    assert_eq!(q.get("nothing").await.unwrap(), None);

    let err = q
        .finish("r3", "w2", RunStatus::Running, None)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    let err = q.enqueue(run("", "t1")).await.unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    let err = q.enqueue(run("r9", &"x".repeat(2000))).await.unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    let err = q.enqueue(run("r3", "t9")).await.unwrap_err();
    assert!(
        matches!(&err, Error::Conflict { message } if message.contains("r3")),
        "{err:?}"
    );

    // A finished run can be deleted with its events; a running one cannot.
    assert!(!q.delete("r3").await.unwrap());
    assert!(
        q.finish("r3", "w2", RunStatus::Success, None)
            .await
            .unwrap()
    );
    assert!(q.delete("r3").await.unwrap());
    assert_eq!(q.get("r3").await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_workers_claim_each_run_once_one_per_thread_in_order() {
    const RUNS: usize = 200;
    const THREADS: usize = 20;
    const WORKERS: usize = 8;
    let schema = ScratchSchema::new("sg_runs");
    let q = queue_with(&schema, |c| c.pool_size(WORKERS + 2)).await;
    let mut expected: HashMap<String, Vec<String>> = HashMap::new();
    for i in 0..RUNS {
        let (id, thread) = (format!("r{i:03}"), format!("t{:02}", i % THREADS));
        q.enqueue(run(&id, &thread)).await.unwrap();
        expected.entry(thread).or_default().push(id);
    }

    let running = Arc::new(Mutex::new(HashSet::<String>::new()));
    let order = Arc::new(Mutex::new(HashMap::<String, Vec<String>>::new()));
    let violations = Arc::new(Mutex::new(Vec::<String>::new()));
    let done = Arc::new(AtomicUsize::new(0));
    let claims = Arc::new(Mutex::new(Vec::<(String, u32)>::new()));
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let (q, running, order, violations, done, claims) = (
            q.clone(),
            running.clone(),
            order.clone(),
            violations.clone(),
            done.clone(),
            claims.clone(),
        );
        workers.push(tokio::spawn(async move {
            let worker = format!("w{w}");
            while done.load(Ordering::SeqCst) < RUNS {
                let Some(claimed) = q.claim(&worker).await.unwrap() else {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                };
                if !running.lock().unwrap().insert(claimed.thread_id.clone()) {
                    violations.lock().unwrap().push(format!(
                        "{} claimed while its thread {} was running",
                        claimed.run_id, claimed.thread_id
                    ));
                }
                claims
                    .lock()
                    .unwrap()
                    .push((claimed.run_id.clone(), claimed.attempt));
                order
                    .lock()
                    .unwrap()
                    .entry(claimed.thread_id.clone())
                    .or_default()
                    .push(claimed.run_id.clone());
                tokio::time::sleep(Duration::from_millis(3)).await;
                // Off the set before finishing: the thread's next run is claimable after.
                running.lock().unwrap().remove(&claimed.thread_id);
                let finished = q
                    .finish(&claimed.run_id, &worker, RunStatus::Success, None)
                    .await
                    .unwrap();
                assert!(finished, "{worker} lost the lease of {}", claimed.run_id);
                done.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    tokio::time::timeout(Duration::from_secs(120), async {
        for w in workers {
            w.await.unwrap();
        }
    })
    .await
    .expect("the workers did not finish the runs within 2 minutes");

    assert_eq!(*violations.lock().unwrap(), Vec::<String>::new());
    let claims = claims.lock().unwrap().clone();
    assert_eq!(claims.len(), RUNS, "claims");
    assert!(
        claims.iter().all(|(_, attempt)| *attempt == 1),
        "{claims:?}"
    );
    let distinct: HashSet<&String> = claims.iter().map(|(id, _)| id).collect();
    assert_eq!(distinct.len(), RUNS);
    assert_eq!(*order.lock().unwrap(), expected, "FIFO per thread");
    for thread in expected.keys() {
        for row in q.runs_of_thread(thread).await.unwrap() {
            assert_eq!(
                (row.status, row.attempt),
                (RunStatus::Success, 1),
                "{row:?}"
            );
        }
    }
}

#[tokio::test]
async fn an_expired_lease_is_taken_over_then_ends_in_error() {
    let schema = ScratchSchema::new("sg_runs");
    let lease = Duration::from_millis(300);
    let q = queue_with(&schema, |c| c.lease(lease).max_attempts(2)).await;
    q.enqueue(run("r1", "t1")).await.unwrap();
    assert_eq!(q.claim("w1").await.unwrap().unwrap().attempt, 1);
    assert!(q.requeue_expired().await.unwrap().is_empty(), "not yet");

    tokio::time::sleep(lease + Duration::from_millis(200)).await;
    let expired = q.requeue_expired().await.unwrap();
    assert_eq!(expired.len(), 1);
    assert_eq!(
        (expired[0].run_id.as_str(), expired[0].status),
        ("r1", RunStatus::Pending)
    );
    assert_eq!(
        q.get("r1").await.unwrap().unwrap().status,
        RunStatus::Pending
    );

    let takeover = q.claim("w2").await.unwrap().unwrap();
    assert_eq!((takeover.run_id.as_str(), takeover.attempt), ("r1", 2));
    // The first worker's lease is gone: nothing it does counts.
    assert!(!q.heartbeat("r1", "w1").await.unwrap().held);
    assert_eq!(
        q.append_event("r1", "w1", "values", &json!(1))
            .await
            .unwrap(),
        None
    );
    assert!(
        !q.finish("r1", "w1", RunStatus::Success, None)
            .await
            .unwrap()
    );
    assert_eq!(
        q.append_event("r1", "w2", "values", &json!(2))
            .await
            .unwrap(),
        Some(1)
    );

    // Its last attempt's lease runs out too: error.
    tokio::time::sleep(lease + Duration::from_millis(200)).await;
    let expired = q.requeue_expired().await.unwrap();
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].status, RunStatus::Error);
    let row = q.get("r1").await.unwrap().unwrap();
    assert_eq!((row.status, row.attempt), (RunStatus::Error, 2));
    assert!(row.error.is_some());
    assert_eq!(q.claim("w3").await.unwrap(), None);
    assert!(
        !q.finish("r1", "w2", RunStatus::Success, None)
            .await
            .unwrap()
    );

    // Heartbeats keep a lease alive past its length.
    q.enqueue(run("r2", "t2")).await.unwrap();
    q.claim("w4").await.unwrap().unwrap();
    for _ in 0..6 {
        tokio::time::sleep(lease / 3).await;
        assert!(q.heartbeat("r2", "w4").await.unwrap().held);
    }
    assert!(q.requeue_expired().await.unwrap().is_empty());
    assert!(
        q.finish("r2", "w4", RunStatus::Success, None)
            .await
            .unwrap()
    );

    // A run asked to stop whose worker then dies ends interrupted, not requeued.
    q.enqueue(run("r3", "t3")).await.unwrap();
    q.claim("w5").await.unwrap().unwrap();
    assert_eq!(
        q.request_cancel("r3", CancelAction::Interrupt)
            .await
            .unwrap(),
        CancelOutcome::Signalled
    );
    tokio::time::sleep(lease + Duration::from_millis(200)).await;
    let expired = q.requeue_expired().await.unwrap();
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].status, RunStatus::Interrupted);
}

#[tokio::test]
async fn multitask_strategies() {
    let schema = ScratchSchema::new("sg_runs");
    let q = queue(&schema).await;
    // Another "process": its own pool and listener connection.
    let other = queue(&schema).await;
    let mut listener = other.listen().await.unwrap();

    // reject
    q.enqueue(NewRun::new("a", "t", json!({}))).await.unwrap();
    let err = q
        .enqueue(NewRun::new("b", "t", json!({})).multitask(Multitask::Reject))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Conflict { message } if message.contains("`t`") && message.contains("`a`")),
        "{err:?}"
    );
    assert_eq!(q.get("b").await.unwrap(), None);

    // enqueue: behind the running one
    assert_eq!(q.claim("w1").await.unwrap().unwrap().run_id, "a");
    let err = q
        .enqueue(NewRun::new("b", "t", json!({})).multitask(Multitask::Reject))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
    q.enqueue(run("b", "t")).await.unwrap();
    q.enqueue(run("c", "t")).await.unwrap();
    assert_eq!(q.claim("w2").await.unwrap(), None);

    // interrupt: pending ones end, the running one is signalled
    let done = q
        .enqueue(run("d", "t").multitask(Multitask::Interrupt))
        .await
        .unwrap();
    assert_eq!(done.ended, ["b", "c"]);
    assert_eq!(done.signalled, ["a"]);
    for id in ["b", "c"] {
        assert_eq!(
            q.get(id).await.unwrap().unwrap().status,
            RunStatus::Interrupted
        );
    }
    let lease = q.heartbeat("a", "w1").await.unwrap();
    assert!(lease.held);
    assert_eq!(lease.cancel, Some(CancelAction::Interrupt));
    wait_for(&mut listener, "interrupt", |n| {
        *n == Notification::Cancel {
            run_id: "a".into(),
            action: CancelAction::Interrupt,
        }
    })
    .await;
    // d waits until a stops.
    assert_eq!(q.claim("w2").await.unwrap(), None);
    assert!(
        q.finish("a", "w1", RunStatus::Interrupted, None)
            .await
            .unwrap()
    );
    assert_eq!(q.claim("w2").await.unwrap().unwrap().run_id, "d");

    // rollback: pending ones are deleted, the running one is signalled
    q.enqueue(run("e", "t")).await.unwrap();
    let done = q
        .enqueue(run("f", "t").multitask(Multitask::Rollback))
        .await
        .unwrap();
    assert_eq!(done.ended, ["e"]);
    assert_eq!(done.signalled, ["d"]);
    assert_eq!(q.get("e").await.unwrap(), None);
    let lease = q.heartbeat("d", "w2").await.unwrap();
    assert_eq!(lease.cancel, Some(CancelAction::Rollback));
    assert_eq!(
        q.get("d").await.unwrap().unwrap().cancel,
        Some(CancelAction::Rollback)
    );
    wait_for(&mut listener, "rollback", |n| {
        *n == Notification::Cancel {
            run_id: "d".into(),
            action: CancelAction::Rollback,
        }
    })
    .await;
    // interrupt/rollback on an idle thread just enqueue.
    let done = other
        .enqueue(run("g", "idle").multitask(Multitask::Rollback))
        .await
        .unwrap();
    assert_eq!(done, Default::default());

    // cancelling runs directly
    assert_eq!(
        q.request_cancel("f", CancelAction::Interrupt)
            .await
            .unwrap(),
        CancelOutcome::Ended
    );
    assert_eq!(
        q.get("f").await.unwrap().unwrap().status,
        RunStatus::Interrupted
    );
    assert_eq!(
        q.request_cancel("d", CancelAction::Interrupt)
            .await
            .unwrap(),
        CancelOutcome::Signalled
    );
    assert!(q.finish("d", "w2", RunStatus::Success, None).await.unwrap());
    assert_eq!(
        q.request_cancel("d", CancelAction::Interrupt)
            .await
            .unwrap(),
        CancelOutcome::AlreadyFinished(RunStatus::Success)
    );
    assert_eq!(
        q.request_cancel("nope", CancelAction::Rollback)
            .await
            .unwrap(),
        CancelOutcome::NotFound
    );
    assert_eq!(
        q.request_cancel("g", CancelAction::Rollback).await.unwrap(),
        CancelOutcome::Ended
    );
    assert_eq!(q.get("g").await.unwrap(), None);
}

#[tokio::test]
async fn listeners_hear_their_own_schema_only() {
    let schema = ScratchSchema::new("sg_runs");
    let elsewhere = ScratchSchema::new("sg_runs");
    let q = queue(&schema).await;
    let writer = queue(&schema).await;
    let foreign = queue(&elsewhere).await;
    assert_ne!(q.channel(), foreign.channel());
    let mut mine = q.listen().await.unwrap();
    let mut theirs = foreign.listen().await.unwrap();

    writer.enqueue(run("r1", "t1")).await.unwrap();
    let n = wait_for(&mut mine, "enqueued", |_| true).await;
    assert_eq!(
        n,
        Notification::Enqueued {
            run_id: "r1".into(),
            thread_id: "t1".into()
        }
    );
    writer.claim("w").await.unwrap().unwrap();
    assert_eq!(
        writer
            .append_event("r1", "w", "values", &json!({}))
            .await
            .unwrap(),
        Some(1)
    );
    let n = wait_for(&mut mine, "event", |_| true).await;
    assert_eq!(
        n,
        Notification::Event {
            run_id: "r1".into(),
            seq: 1
        }
    );
    writer
        .request_cancel("r1", CancelAction::Interrupt)
        .await
        .unwrap();
    let n = wait_for(&mut mine, "cancel", |_| true).await;
    assert_eq!(
        n,
        Notification::Cancel {
            run_id: "r1".into(),
            action: CancelAction::Interrupt
        }
    );
    writer
        .finish("r1", "w", RunStatus::Interrupted, None)
        .await
        .unwrap();
    let n = wait_for(&mut mine, "finished", |_| true).await;
    assert_eq!(
        n,
        Notification::Finished {
            run_id: "r1".into(),
            status: Some(RunStatus::Interrupted)
        }
    );

    // The other schema's listener heard none of that: the first thing it hears is its own.
    foreign.enqueue(run("x1", "tx")).await.unwrap();
    let n = wait_for(&mut theirs, "foreign enqueued", |_| true).await;
    assert_eq!(n.run_id(), "x1");
    // …and this one does not hear the other schema's.
    writer.enqueue(run("r2", "t2")).await.unwrap();
    let n = wait_for(&mut mine, "enqueued", |_| true).await;
    assert_eq!(n.run_id(), "r2");
    assert!(mine.receiver().try_recv().is_err());
}

#[tokio::test]
async fn events_are_numbered_and_resumable() {
    let schema = ScratchSchema::new("sg_runs");
    let q = queue(&schema).await;
    q.enqueue(run("r1", "t1")).await.unwrap();
    assert_eq!(
        q.append_event("r1", "w1", "values", &json!(0))
            .await
            .unwrap(),
        None,
        "pending"
    );
    q.claim("w1").await.unwrap().unwrap();
    assert_eq!(
        q.append_event("r1", "w2", "values", &json!(0))
            .await
            .unwrap(),
        None,
        "not the holder"
    );
    for (i, event) in ["metadata", "values", "updates"].into_iter().enumerate() {
        let seq = q
            .append_event("r1", "w1", event, &json!({ "i": i }))
            .await
            .unwrap();
        assert_eq!(seq, Some(i64::try_from(i).unwrap() + 1));
    }
    let all = q.events_after("r1", 0, 100).await.unwrap();
    let seqs: Vec<(i64, &str)> = all.iter().map(|e| (e.seq, e.event.as_str())).collect();
    assert_eq!(seqs, [(1, "metadata"), (2, "values"), (3, "updates")]);
    assert_eq!(all[2].data, json!({ "i": 2 }));
    let rest: Vec<i64> = q
        .events_after("r1", 1, 100)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(rest, [2, 3]);
    assert_eq!(q.events_after("r1", 0, 1).await.unwrap().len(), 1);
    assert!(q.events_after("r1", 3, 100).await.unwrap().is_empty());
    assert!(q.events_after("nope", 0, 100).await.unwrap().is_empty());
    assert_eq!(q.get("r1").await.unwrap().unwrap().events, 3);

    assert!(
        q.finish("r1", "w1", RunStatus::Success, None)
            .await
            .unwrap()
    );
    assert_eq!(
        q.append_event("r1", "w1", "values", &json!(0))
            .await
            .unwrap(),
        None,
        "finished"
    );
    assert_eq!(q.events_after("r1", 0, 100).await.unwrap().len(), 3);
    // Events go with their run.
    assert!(q.delete("r1").await.unwrap());
    assert!(q.events_after("r1", 0, 100).await.unwrap().is_empty());
}

#[tokio::test]
async fn setup_is_idempotent_and_safe_concurrently() {
    let schema = ScratchSchema::new("sg_runs");
    // Without setup on a fresh schema: the missing tables are named.
    let err = RunQueueConfig::from_url(&url())
        .unwrap()
        .schema(schema.name())
        .without_setup()
        .connect()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::NotFound { what } if what.contains("stategraph_runs")),
        "{err:?}"
    );

    let (a, b) = tokio::join!(queue(&schema), queue(&schema));
    a.enqueue(run("r1", "t1")).await.unwrap();
    assert_eq!(b.get("r1").await.unwrap().unwrap().thread_id, "t1");
    let again = queue(&schema).await;
    assert_eq!(again.get("r1").await.unwrap().unwrap().run_id, "r1");
    let plain = queue_with(&schema, RunQueueConfig::without_setup).await;
    assert_eq!(plain.claim("w").await.unwrap().unwrap().run_id, "r1");

    let client = connect().await;
    let versions: Vec<i32> = client
        .query(
            &format!(
                "SELECT v FROM \"{}\".stategraph_run_migrations ORDER BY v",
                schema.name()
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, [0]);
    // The database itself refuses a second running run on a thread.
    let err = client
        .batch_execute(&format!(
            "INSERT INTO \"{0}\".stategraph_runs (run_id, thread_id, status, payload, max_attempts) \
             VALUES ('r2', 't1', 'running', '{{}}', 1)",
            schema.name()
        ))
        .await
        .unwrap_err();
    assert_eq!(
        err.code(),
        Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_rejecting_enqueues_of_a_thread_take_turns_across_processes() {
    let schema = ScratchSchema::new("sg_runs");
    let (a, b) = (queue(&schema).await, queue(&schema).await);
    let tries: Vec<_> = (0..12)
        .map(|i| {
            let q = if i % 2 == 0 { a.clone() } else { b.clone() };
            tokio::spawn(async move {
                q.enqueue(NewRun::new(format!("r{i}"), "t", json!({})))
                    .await
            })
        })
        .collect();
    let mut accepted = 0;
    for t in tries {
        match t.await.unwrap() {
            Ok(_) => accepted += 1,
            Err(Error::Conflict { .. }) => {}
            Err(other) => panic!("{other:?}"),
        }
    }
    assert_eq!(accepted, 1, "exactly one run of a busy thread is accepted");
    assert_eq!(a.runs_of_thread("t").await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_silent_server_times_out_queue_operations() {
    let proxy = StallingProxy::start(server_addr()).await;
    let schema = ScratchSchema::new("sg_runs");
    let limit = Duration::from_millis(800);
    let q = RunQueueConfig::from_url(&url_via(proxy.addr()))
        .unwrap()
        .schema(schema.name())
        .pool_size(1)
        .timeouts(Timeouts {
            connect: Some(limit),
            statement: Some(limit),
            ..Timeouts::default()
        })
        .connect()
        .await
        .unwrap();
    q.enqueue(run("r1", "t1")).await.unwrap();
    proxy.go_silent();
    let timed_out = |err: Error, op: &str| {
        assert!(
            matches!(&err, Error::Timeout { operation, after, .. } if operation == op && *after == limit),
            "{op}: {err:?}"
        );
    };
    timed_out(bounded(q.claim("w")).await.unwrap_err(), "claiming a run");
    timed_out(
        bounded(q.enqueue(run("r2", "t2"))).await.unwrap_err(),
        "enqueuing a run",
    );
    timed_out(
        bounded(q.append_event("r1", "w", "values", &json!(1)))
            .await
            .unwrap_err(),
        "appending a run event",
    );
    let err = bounded(q.listen()).await.unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
}
