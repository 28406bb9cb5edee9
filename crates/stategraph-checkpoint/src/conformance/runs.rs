//! The shared conformance suite of [`RunQueue`] implementations: one `pub async fn` per
//! behaviour, run by every implementation with
//! [`run_queue_conformance!`](crate::run_queue_conformance).
//!
//! ```text
//! async fn make(options: QueueOptions) -> RunQueueFixture {
//!     let queue = MyRunQueue::connect(URL).lease(options.lease).max_attempts(options.max_attempts);
//!     let other = /* a second handle on the same queue, as another process has */;
//!     RunQueueFixture::new(queue, other)
//! }
//! stategraph_checkpoint::run_queue_conformance!(make);
//! ```
//!
//! Each case asks for a fresh, empty queue.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::{Value as Json, json};

use crate::Error;
use crate::runs::*;

/// What a case needs of its queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueOptions {
    /// The lease a claim or heartbeat grants.
    pub lease: Duration,
    /// How many claims a run gets.
    pub max_attempts: u32,
}

impl Default for QueueOptions {
    fn default() -> Self {
        Self {
            lease: DEFAULT_LEASE,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
        }
    }
}

/// A queue under test: two handles on it (as two processes have), plus anything that must
/// live as long as they do.
pub struct RunQueueFixture {
    queue: Arc<dyn RunQueue>,
    other: Arc<dyn RunQueue>,
    _guard: Option<Box<dyn std::any::Any + Send>>,
}

impl RunQueueFixture {
    /// A fixture around `queue`, and `other`, a second handle on the same queue (its own
    /// connections, where the implementation has any).
    pub fn new(queue: impl RunQueue + 'static, other: impl RunQueue + 'static) -> Self {
        Self {
            queue: Arc::new(queue),
            other: Arc::new(other),
            _guard: None,
        }
    }

    /// Keeps `guard` alive until the fixture is dropped.
    pub fn with_guard(mut self, guard: impl std::any::Any + Send) -> Self {
        self._guard = Some(Box::new(guard));
        self
    }

    /// The queue.
    pub fn queue(&self) -> &Arc<dyn RunQueue> {
        &self.queue
    }

    /// The second handle on it.
    pub fn other(&self) -> &Arc<dyn RunQueue> {
        &self.other
    }
}

/// How cases get queues: the implementation's factory, boxed.
pub type MakeQueue<'a> =
    &'a (dyn Fn(QueueOptions) -> Pin<Box<dyn Future<Output = RunQueueFixture> + Send>> + Sync);

/// Expands to one `#[tokio::test]` per run queue conformance case, each calling
/// `$factory(options).await` for a fresh [`RunQueueFixture`].
#[macro_export]
macro_rules! run_queue_conformance {
    ($factory:path) => {
        $crate::__run_queue_conformance_cases!($factory;
            runs_lifecycle_and_fifo_per_thread, runs_refuse_bad_ids_and_statuses,
            runs_racing_workers_claim_each_run_once_in_order, runs_expired_lease_is_taken_over,
            runs_heartbeats_keep_a_lease, runs_cancelled_run_whose_worker_died_is_interrupted,
            runs_reject_refuses_a_busy_thread, runs_interrupt_and_rollback_strategies,
            runs_request_cancel_outcomes, runs_events_are_numbered_and_resumable,
            runs_claim_at_enqueue_when_the_thread_is_free, runs_claim_a_given_run_in_its_turn,
            runs_busy_threads, runs_stats_count_pending_and_running,
            runs_notifications_announce_changes,
            runs_concurrent_rejecting_enqueues_take_turns,
            runs_claim_once_gives_a_key_to_one_caller, runs_finished_runs_are_purged,
            runs_finish_appends_the_last_events, runs_records_of_a_foreign_store_are_refused,
            runs_finish_and_claim_goes_on_to_the_next_run,
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __run_queue_conformance_cases {
    ($factory:path; $($case:ident),* $(,)?) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let make = |o| -> ::std::pin::Pin<Box<dyn ::std::future::Future<
                    Output = $crate::conformance::runs::RunQueueFixture> + Send>> {
                    Box::pin($factory(o))
                };
                $crate::conformance::runs::$case(&make).await;
            }
        )*
    };
}

/// The bound on any single wait for a notification.
const WAIT: Duration = Duration::from_secs(5);

fn run(id: &str, thread: &str) -> NewRun {
    NewRun::new(id, thread, json!({ "input": id })).multitask(Multitask::Enqueue)
}

async fn fresh(make: MakeQueue<'_>) -> RunQueueFixture {
    make(QueueOptions::default()).await
}

async fn status(q: &dyn RunQueue, id: &str) -> Option<RunStatus> {
    q.get(id).await.unwrap().map(|r| r.status)
}

async fn event(q: &dyn RunQueue, id: &str, worker: &str, data: Json) -> Option<i64> {
    q.append_events(id, worker, &[("values".to_owned(), data)])
        .await
        .unwrap()
}

/// The next notification satisfying `wanted`, skipping others, within [`WAIT`].
async fn wait_for(
    n: &mut Notifications,
    what: &str,
    wanted: impl Fn(&Notification) -> bool,
) -> Notification {
    tokio::time::timeout(WAIT, async {
        loop {
            let got = n.recv().await.expect("the subscription ended");
            if wanted(&got) {
                return got;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {what} notification within {WAIT:?}"))
}

/// Claims, heartbeats and finishes; FIFO per thread; one running run per thread; only the
/// lease holder counts; finished runs can be deleted, running ones not.
pub async fn runs_lifecycle_and_fifo_per_thread(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    for (id, thread) in [("r1", "t1"), ("r2", "t1"), ("r3", "t2")] {
        assert_eq!(
            q.enqueue(run(id, thread)).await.unwrap(),
            Enqueued::default()
        );
    }
    let pending = q.get("r1").await.unwrap().unwrap();
    assert_eq!(pending.status, RunStatus::Pending);
    assert_eq!(pending.attempt, 0);
    assert_eq!(pending.payload, json!({ "input": "r1" }));
    assert!(pending.seq < q.get("r2").await.unwrap().unwrap().seq);

    let first = q.claim("w1").await.unwrap().unwrap();
    assert_eq!(
        (first.run_id.as_str(), first.thread_id.as_str()),
        ("r1", "t1")
    );
    assert_eq!(
        (first.attempt, &first.payload),
        (1, &json!({ "input": "r1" }))
    );
    // r2 waits behind r1 (same thread); r3's thread is free.
    assert_eq!(q.claim("w2").await.unwrap().unwrap().run_id, "r3");
    assert_eq!(q.claim("w3").await.unwrap(), None);

    let running = q.get("r1").await.unwrap().unwrap();
    assert_eq!(running.status, RunStatus::Running);
    assert_eq!(running.worker.as_deref(), Some("w1"));
    assert!(running.lease_until.is_some());

    assert_eq!(q.heartbeat("r1", "w1").await.unwrap(), Lease::held(None));
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
    assert_eq!(status(q, "r1").await, Some(RunStatus::Success));

    assert_eq!(q.claim("w3").await.unwrap().unwrap().run_id, "r2");
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
    // The second handle sees the same queue.
    assert_eq!(
        status(f.other().as_ref(), "r2").await,
        Some(RunStatus::Error)
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
    assert!(!q.delete("r3").await.unwrap());
}

/// Empty and over-long ids, a duplicate run id and a status that is not final are refused
/// with typed errors.
pub async fn runs_refuse_bad_ids_and_statuses(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    for bad in [
        run("", "t1"),
        run("r9", &"x".repeat(MAX_ID_LEN + 1)),
        run("r9", ""),
    ] {
        let err = q.enqueue(bad).await.unwrap_err();
        assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    }
    q.enqueue(run("r1", "t1")).await.unwrap();
    let err = q.enqueue(run("r1", "t2")).await.unwrap_err();
    assert!(
        matches!(&err, Error::Conflict { message } if message.contains("r1")),
        "{err:?}"
    );
    q.claim("w").await.unwrap().unwrap();
    for not_final in [RunStatus::Running, RunStatus::Pending] {
        let err = q.finish("r1", "w", not_final, None).await.unwrap_err();
        assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    }
    assert_eq!(status(q, "r1").await, Some(RunStatus::Running));
}

/// Eight workers on two handles race for 120 runs of 12 threads: each run is claimed once,
/// never while its thread runs another, in enqueue order per thread.
pub async fn runs_racing_workers_claim_each_run_once_in_order(make: MakeQueue<'_>) {
    const RUNS: usize = 120;
    const THREADS: usize = 12;
    const WORKERS: usize = 8;
    let f = fresh(make).await;
    let mut expected: HashMap<String, Vec<String>> = HashMap::new();
    for i in 0..RUNS {
        let (id, thread) = (format!("r{i:03}"), format!("t{:02}", i % THREADS));
        f.queue().enqueue(run(&id, &thread)).await.unwrap();
        expected.entry(thread).or_default().push(id);
    }
    let running = Arc::new(Mutex::new(HashSet::<String>::new()));
    let order = Arc::new(Mutex::new(HashMap::<String, Vec<String>>::new()));
    let violations = Arc::new(Mutex::new(Vec::<String>::new()));
    let claims = Arc::new(Mutex::new(Vec::<(String, u32)>::new()));
    let done = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let q = Arc::clone(if w % 2 == 0 { f.queue() } else { f.other() });
        let (running, order, violations, claims, done) = (
            running.clone(),
            order.clone(),
            violations.clone(),
            claims.clone(),
            done.clone(),
        );
        workers.push(tokio::spawn(async move {
            let worker = format!("w{w}");
            while done.load(Ordering::SeqCst) < RUNS {
                let Some(claimed) = q.claim(&worker).await.unwrap() else {
                    tokio::time::sleep(Duration::from_millis(2)).await;
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
                tokio::time::sleep(Duration::from_millis(2)).await;
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
}

/// A run whose lease ran out goes back to pending and is taken over (attempt 2); the first
/// worker's lease is gone; on its last attempt it ends in `error`.
pub async fn runs_expired_lease_is_taken_over(make: MakeQueue<'_>) {
    let lease = Duration::from_millis(300);
    let f = make(QueueOptions {
        lease,
        max_attempts: 2,
    })
    .await;
    let q = f.queue().as_ref();
    assert_eq!(q.lease(), lease);
    q.enqueue(run("r1", "t1")).await.unwrap();
    assert_eq!(q.claim("w1").await.unwrap().unwrap().attempt, 1);
    assert!(q.requeue_expired().await.unwrap().is_empty(), "not yet");

    tokio::time::sleep(lease + Duration::from_millis(200)).await;
    let expired = q.requeue_expired().await.unwrap();
    assert_eq!(expired, [Expired::new("r1", "t1", RunStatus::Pending)]);
    assert_eq!(status(q, "r1").await, Some(RunStatus::Pending));

    let takeover = f.other().claim("w2").await.unwrap().unwrap();
    assert_eq!((takeover.run_id.as_str(), takeover.attempt), ("r1", 2));
    // The first worker's lease is gone: nothing it does counts.
    assert!(!q.heartbeat("r1", "w1").await.unwrap().held);
    assert_eq!(event(q, "r1", "w1", json!(1)).await, None);
    assert!(
        !q.finish("r1", "w1", RunStatus::Success, None)
            .await
            .unwrap()
    );
    assert_eq!(event(q, "r1", "w2", json!(2)).await, Some(1));

    // Its last attempt's lease runs out too: error.
    tokio::time::sleep(lease + Duration::from_millis(200)).await;
    let expired = q.requeue_expired().await.unwrap();
    assert_eq!(expired, [Expired::new("r1", "t1", RunStatus::Error)]);
    let row = q.get("r1").await.unwrap().unwrap();
    assert_eq!((row.status, row.attempt), (RunStatus::Error, 2));
    assert_eq!(
        row.error.as_ref().and_then(|e| e.get("error")),
        Some(&json!("LeaseExpired"))
    );
    assert_eq!(q.claim("w3").await.unwrap(), None);
    assert!(
        !q.finish("r1", "w2", RunStatus::Success, None)
            .await
            .unwrap()
    );
}

/// Heartbeats keep a lease alive past its length.
pub async fn runs_heartbeats_keep_a_lease(make: MakeQueue<'_>) {
    let lease = Duration::from_millis(300);
    let f = make(QueueOptions {
        lease,
        max_attempts: 2,
    })
    .await;
    let q = f.queue().as_ref();
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
}

/// A run asked to stop whose worker then dies ends `interrupted`, not requeued.
pub async fn runs_cancelled_run_whose_worker_died_is_interrupted(make: MakeQueue<'_>) {
    let lease = Duration::from_millis(300);
    let f = make(QueueOptions {
        lease,
        max_attempts: 3,
    })
    .await;
    let q = f.queue().as_ref();
    q.enqueue(run("r3", "t3")).await.unwrap();
    q.claim("w5").await.unwrap().unwrap();
    assert_eq!(
        q.request_cancel("r3", CancelAction::Interrupt, "")
            .await
            .unwrap(),
        CancelOutcome::Signalled
    );
    tokio::time::sleep(lease + Duration::from_millis(200)).await;
    let expired = q.requeue_expired().await.unwrap();
    assert_eq!(expired, [Expired::new("r3", "t3", RunStatus::Interrupted)]);
    assert_eq!(q.claim("w6").await.unwrap(), None);
}

/// `reject` refuses a run while its thread has a pending or running run, naming both.
pub async fn runs_reject_refuses_a_busy_thread(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
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
    assert_eq!(q.claim("w1").await.unwrap().unwrap().run_id, "a");
    let err = f
        .other()
        .enqueue(NewRun::new("b", "t", json!({})))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
    assert!(q.finish("a", "w1", RunStatus::Success, None).await.unwrap());
    q.enqueue(NewRun::new("b", "t", json!({}))).await.unwrap();
}

/// `interrupt` ends the thread's pending runs and signals its running one; `rollback`
/// deletes the pending ones and signals with a rollback; on an idle thread both just enqueue.
pub async fn runs_interrupt_and_rollback_strategies(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    let mut notes = f.other().subscribe().await.unwrap();
    q.enqueue(run("a", "t")).await.unwrap();
    q.claim("w1").await.unwrap().unwrap();
    q.enqueue(run("b", "t")).await.unwrap();
    q.enqueue(run("c", "t")).await.unwrap();
    assert_eq!(q.claim("w2").await.unwrap(), None);

    let done = q
        .enqueue(run("d", "t").multitask(Multitask::Interrupt))
        .await
        .unwrap();
    assert_eq!(
        (done.ended.as_slice(), done.signalled.as_slice()),
        (&["b".to_owned(), "c".to_owned()][..], &["a".to_owned()][..])
    );
    assert_eq!(done.claimed, None);
    for id in ["b", "c"] {
        assert_eq!(status(q, id).await, Some(RunStatus::Interrupted));
    }
    assert_eq!(
        q.heartbeat("a", "w1").await.unwrap(),
        Lease::held(Some(CancelAction::Interrupt))
    );
    assert_eq!(
        q.get("a").await.unwrap().unwrap().cancel,
        Some(CancelAction::Interrupt)
    );
    wait_for(&mut notes, "interrupt", |n| {
        *n == Notification::Cancel {
            run_id: "a".into(),
            action: CancelAction::Interrupt,
            reason: String::new(),
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

    q.enqueue(run("e", "t")).await.unwrap();
    let done = q
        .enqueue(run("f", "t").multitask(Multitask::Rollback))
        .await
        .unwrap();
    assert_eq!(
        (done.ended.as_slice(), done.signalled.as_slice()),
        (&["e".to_owned()][..], &["d".to_owned()][..])
    );
    assert_eq!(q.get("e").await.unwrap(), None);
    assert_eq!(
        q.heartbeat("d", "w2").await.unwrap().cancel,
        Some(CancelAction::Rollback)
    );
    wait_for(&mut notes, "rollback", |n| {
        *n == Notification::Cancel {
            run_id: "d".into(),
            action: CancelAction::Rollback,
            reason: String::new(),
        }
    })
    .await;
    // On an idle thread they just enqueue.
    let done = f
        .other()
        .enqueue(run("g", "idle").multitask(Multitask::Rollback))
        .await
        .unwrap();
    assert_eq!(done, Enqueued::default());
}

/// Cancelling directly: a pending run ends at once (or is deleted by a rollback), a running
/// one is signalled, a finished one says so, an unknown one is not found.
pub async fn runs_request_cancel_outcomes(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    q.enqueue(run("d", "t")).await.unwrap();
    q.enqueue(run("f", "t")).await.unwrap();
    q.enqueue(run("g", "u")).await.unwrap();
    q.claim("w2").await.unwrap().unwrap();
    assert_eq!(
        q.request_cancel("f", CancelAction::Interrupt, "")
            .await
            .unwrap(),
        CancelOutcome::Ended
    );
    assert_eq!(status(q, "f").await, Some(RunStatus::Interrupted));
    let mut notes = f.other().subscribe().await.unwrap();
    assert_eq!(
        q.request_cancel("d", CancelAction::Interrupt, "the user pressed stop")
            .await
            .unwrap(),
        CancelOutcome::Signalled
    );
    // The reason reaches the worker wherever it runs: by notification and by heartbeat.
    let n = wait_for(&mut notes, "cancel", |n| {
        matches!(n, Notification::Cancel { .. })
    })
    .await;
    assert_eq!(
        n,
        Notification::Cancel {
            run_id: "d".into(),
            action: CancelAction::Interrupt,
            reason: "the user pressed stop".into(),
        }
    );
    let lease = f.other().heartbeat("d", "w2").await.unwrap();
    assert_eq!(lease.cancel, Some(CancelAction::Interrupt));
    assert_eq!(lease.reason, "the user pressed stop");
    assert!(q.finish("d", "w2", RunStatus::Success, None).await.unwrap());
    assert_eq!(
        q.request_cancel("d", CancelAction::Interrupt, "")
            .await
            .unwrap(),
        CancelOutcome::AlreadyFinished(RunStatus::Success)
    );
    assert_eq!(
        q.request_cancel("nope", CancelAction::Rollback, "")
            .await
            .unwrap(),
        CancelOutcome::NotFound
    );
    assert_eq!(
        f.other()
            .request_cancel("g", CancelAction::Rollback, "")
            .await
            .unwrap(),
        CancelOutcome::Ended
    );
    assert_eq!(q.get("g").await.unwrap(), None);
}

/// Events are numbered from 1 per run, appended only by the lease holder (in batches, in
/// order), readable after any number, and deleted with their run.
pub async fn runs_events_are_numbered_and_resumable(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    q.enqueue(run("r1", "t1")).await.unwrap();
    assert_eq!(event(q, "r1", "w1", json!(0)).await, None, "pending");
    q.claim("w1").await.unwrap().unwrap();
    assert_eq!(event(q, "r1", "w2", json!(0)).await, None, "not the holder");
    let batch: Vec<(String, Json)> = ["metadata", "values", "updates"]
        .iter()
        .enumerate()
        .map(|(i, e)| ((*e).to_owned(), json!({ "i": i })))
        .collect();
    assert_eq!(q.append_events("r1", "w1", &batch).await.unwrap(), Some(3));
    assert_eq!(q.append_events("r1", "w1", &[]).await.unwrap(), Some(3));
    assert_eq!(event(q, "r1", "w1", json!({ "i": 3 })).await, Some(4));
    let all = f.other().events_after("r1", 0, 100).await.unwrap();
    let seqs: Vec<(i64, &str)> = all.iter().map(|e| (e.seq, e.event.as_str())).collect();
    assert_eq!(
        seqs,
        [
            (1, "metadata"),
            (2, "values"),
            (3, "updates"),
            (4, "values")
        ]
    );
    assert_eq!(all[2].data, json!({ "i": 2 }));
    let rest: Vec<i64> = q
        .events_after("r1", 1, 2)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(rest, [2, 3]);
    assert!(q.events_after("r1", 4, 100).await.unwrap().is_empty());
    assert!(q.events_after("nope", 0, 100).await.unwrap().is_empty());
    assert_eq!(q.get("r1").await.unwrap().unwrap().events, 4);
    assert!(
        q.finish("r1", "w1", RunStatus::Success, None)
            .await
            .unwrap()
    );
    assert_eq!(event(q, "r1", "w1", json!(0)).await, None, "finished");
    assert_eq!(q.events_after("r1", 0, 100).await.unwrap().len(), 4);
    assert!(q.delete("r1").await.unwrap());
    assert!(q.events_after("r1", 0, 100).await.unwrap().is_empty());
}

/// Finishing with the run's last events appends them after the earlier ones and ends the
/// run, together; a worker that does not hold the run changes nothing, and a status that is
/// not final is refused before anything is written.
pub async fn runs_finish_appends_the_last_events(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    q.enqueue(run("r1", "t1")).await.unwrap();
    q.claim("w1").await.unwrap().unwrap();
    assert_eq!(event(q, "r1", "w1", json!({ "i": 0 })).await, Some(1));
    let last: Vec<(String, Json)> = (1..3)
        .map(|i| ("values".to_owned(), json!({ "i": i })))
        .collect();
    let refused = q
        .finish_with_events("r1", "w1", RunStatus::Running, None, &last)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, crate::Error::InvalidInput { .. }),
        "{refused}"
    );
    assert!(
        !q.finish_with_events("r1", "w2", RunStatus::Success, None, &last)
            .await
            .unwrap(),
        "not the holder"
    );
    assert_eq!(q.get("r1").await.unwrap().unwrap().events, 1);
    assert!(
        q.finish_with_events("r1", "w1", RunStatus::Success, None, &last)
            .await
            .unwrap()
    );
    let row = f.other().get("r1").await.unwrap().unwrap();
    assert_eq!((row.status, row.events), (RunStatus::Success, 3));
    let logged: Vec<(i64, Json)> = f
        .other()
        .events_after("r1", 0, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.seq, e.data))
        .collect();
    assert_eq!(
        logged,
        [
            (1, json!({ "i": 0 })),
            (2, json!({ "i": 1 })),
            (3, json!({ "i": 2 }))
        ]
    );
    assert!(
        !q.finish_with_events("r1", "w1", RunStatus::Error, None, &last)
            .await
            .unwrap(),
        "already finished"
    );
    assert_eq!(q.events_after("r1", 0, 100).await.unwrap().len(), 3);
    // Without events it is `finish`.
    q.enqueue(run("r2", "t1")).await.unwrap();
    q.claim("w1").await.unwrap().unwrap();
    assert!(
        q.finish_with_events("r2", "w1", RunStatus::Success, None, &[])
            .await
            .unwrap()
    );
    assert_eq!(status(q, "r2").await, Some(RunStatus::Success));
}

/// A worker ends its run and claims its next in one step: the oldest run that may be claimed
/// (the ended run's thread's next once it is the oldest), with the end's events; one that no
/// longer holds its run changes nothing of it but still claims; a status that is not final
/// and records the queue cannot write are refused before anything changes.
pub async fn runs_finish_and_claim_goes_on_to_the_next_run(make: MakeQueue<'_>) {
    use crate::runs::{RecordWrite, RecordWrites};
    use crate::store::StoreLocation;
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    for (id, thread) in [("a1", "ta"), ("b1", "tb"), ("a2", "ta"), ("c1", "tc")] {
        q.enqueue(run(id, thread)).await.unwrap();
    }
    assert_eq!(q.claim("w1").await.unwrap().unwrap().run_id, "a1");
    let refused = q
        .finish_and_claim(RunEnd::new("a1", "w1", RunStatus::Running))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, crate::Error::InvalidInput { .. }),
        "{refused}"
    );
    let nowhere = RecordWrites::new(
        StoreLocation::new("nowhere", "no database", "no_table"),
        vec![RecordWrite::Delete {
            namespace: vec!["records".into()],
            key: "k".into(),
        }],
    );
    let refused = q
        .finish_and_claim(RunEnd::new("a1", "w1", RunStatus::Success).records(Some(&nowhere)))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, crate::Error::InvalidInput { .. }),
        "{refused}"
    );
    assert_eq!(status(q, "a1").await, Some(RunStatus::Running));
    assert_eq!(status(q, "b1").await, Some(RunStatus::Pending));

    // b1 is older than a2: it comes next, with a1's end and its last events.
    let last = [("values".to_owned(), json!({ "last": true }))];
    let (ended, next) = q
        .finish_and_claim(RunEnd::new("a1", "w1", RunStatus::Success).events(&last))
        .await
        .unwrap();
    assert!(ended);
    let next = next.expect("the next run");
    assert_eq!((next.run_id.as_str(), next.attempt), ("b1", 1));
    let a1 = f.other().get("a1").await.unwrap().unwrap();
    assert_eq!((a1.status, a1.events), (RunStatus::Success, 1));
    let b1 = f.other().get("b1").await.unwrap().unwrap();
    assert_eq!(
        (b1.status, b1.worker.as_deref()),
        (RunStatus::Running, Some("w1"))
    );

    // Then a2, now next on its thread; an error goes with b1's end.
    let error = json!({ "error": "ValueError", "message": "m" });
    let (ended, next) = q
        .finish_and_claim(RunEnd::new("b1", "w1", RunStatus::Error).error(Some(&error)))
        .await
        .unwrap();
    assert!(ended);
    assert_eq!(next.unwrap().run_id, "a2");
    let b1 = f.other().get("b1").await.unwrap().unwrap();
    assert_eq!((b1.status, b1.error), (RunStatus::Error, Some(error)));

    // Not the holder: a2 stays as it is, and w2 still gets c1.
    let (ended, next) = q
        .finish_and_claim(RunEnd::new("a2", "w2", RunStatus::Success))
        .await
        .unwrap();
    assert!(!ended, "not the holder");
    assert_eq!(next.unwrap().run_id, "c1");
    assert_eq!(status(q, "a2").await, Some(RunStatus::Running));

    // Nothing left to claim.
    for (id, worker) in [("a2", "w1"), ("c1", "w2")] {
        let (ended, next) = q
            .finish_and_claim(RunEnd::new(id, worker, RunStatus::Success))
            .await
            .unwrap();
        assert!(ended, "{id}");
        assert_eq!(next, None, "{id}");
        assert_eq!(status(q, id).await, Some(RunStatus::Success));
    }
}

/// Records of a store the queue cannot write in its transactions (another database, here
/// one that does not exist) are refused with the change they go with, never dropped: the run
/// is not enqueued, a running run is not finished.
pub async fn runs_records_of_a_foreign_store_are_refused(make: MakeQueue<'_>) {
    use crate::runs::{RecordWrite, RecordWrites};
    use crate::store::StoreLocation;
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    let nowhere = StoreLocation::new("nowhere", "no database", "no_table");
    assert!(!q.writes_records_at(&nowhere));
    let records = RecordWrites::new(
        nowhere,
        vec![RecordWrite::Delete {
            namespace: vec!["records".into()],
            key: "k".into(),
        }],
    );
    let refused = q
        .enqueue(run("r1", "t1").records(records.clone()))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, crate::Error::InvalidInput { .. }),
        "{refused}"
    );
    assert_eq!(status(q, "r1").await, None, "not enqueued");
    q.enqueue(run("r2", "t1")).await.unwrap();
    q.claim("w1").await.unwrap().unwrap();
    let refused = q
        .finish_with_records("r2", "w1", RunStatus::Success, None, &[], &records)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, crate::Error::InvalidInput { .. }),
        "{refused}"
    );
    assert_eq!(status(q, "r2").await, Some(RunStatus::Running));
    // Without records, it finishes.
    let none = RecordWrites::new(records.at.clone(), Vec::new());
    assert!(
        q.finish_with_records("r2", "w1", RunStatus::Success, None, &[], &none)
            .await
            .unwrap()
    );
    assert_eq!(status(q, "r2").await, Some(RunStatus::Success));
}

/// Finished runs are purged oldest first, at most the limit given per call, with their
/// events; runs that ended after the time given, and pending and running runs, stay.
pub async fn runs_finished_runs_are_purged(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    let pause = || tokio::time::sleep(Duration::from_millis(30));
    for (id, thread, end) in [
        ("a", "t1", RunStatus::Success),
        ("b", "t2", RunStatus::Error),
        ("c", "t3", RunStatus::Interrupted),
    ] {
        q.enqueue(run(id, thread)).await.unwrap();
        q.claim_run(id, "w").await.unwrap().unwrap();
        assert_eq!(event(q, id, "w", json!(1)).await, Some(1));
        assert!(q.finish(id, "w", end, None).await.unwrap());
        pause().await;
    }
    pause().await;
    let cut = SystemTime::now();
    pause().await;
    q.enqueue(run("late", "t4")).await.unwrap();
    q.claim_run("late", "w").await.unwrap().unwrap();
    assert!(
        q.finish("late", "w", RunStatus::Success, None)
            .await
            .unwrap()
    );
    q.enqueue(run("waiting", "t5")).await.unwrap();
    q.enqueue(run("busy", "t6")).await.unwrap();
    q.claim_run("busy", "w").await.unwrap().unwrap();

    assert_eq!(q.purge_finished(cut, 2).await.unwrap(), 2, "the limit");
    assert_eq!(status(q, "a").await, None);
    assert_eq!(status(q, "b").await, None);
    assert!(q.events_after("a", 0, 10).await.unwrap().is_empty());
    assert_eq!(status(q, "c").await, Some(RunStatus::Interrupted));
    assert_eq!(q.purge_finished(cut, 10).await.unwrap(), 1);
    assert_eq!(q.purge_finished(cut, 10).await.unwrap(), 0);
    assert_eq!(status(f.other().as_ref(), "c").await, None);
    assert_eq!(status(q, "late").await, Some(RunStatus::Success));
    // Whenever the cut, runs in flight stay.
    let later = SystemTime::now() + Duration::from_secs(3600);
    assert_eq!(q.purge_finished(later, 10).await.unwrap(), 1);
    assert_eq!(status(q, "late").await, None);
    assert_eq!(status(q, "waiting").await, Some(RunStatus::Pending));
    assert_eq!(status(q, "busy").await, Some(RunStatus::Running));
    assert_eq!(q.purge_finished(later, 10).await.unwrap(), 0);
}

/// A run enqueued with a worker to claim it is running at once when nothing else of its
/// thread is pending or running; otherwise it waits its turn as any run.
pub async fn runs_claim_at_enqueue_when_the_thread_is_free(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    let done = q.enqueue(run("a", "t").claimed_by("me")).await.unwrap();
    let claimed = done.claimed.expect("claimed at enqueue");
    assert_eq!((claimed.run_id.as_str(), claimed.attempt), ("a", 1));
    let row = q.get("a").await.unwrap().unwrap();
    assert_eq!(
        (row.status, row.worker.as_deref()),
        (RunStatus::Running, Some("me"))
    );
    assert_eq!(f.other().claim("w").await.unwrap(), None);
    assert!(q.heartbeat("a", "me").await.unwrap().held);
    // The thread is busy: the next one waits.
    let done = f
        .other()
        .enqueue(run("b", "t").claimed_by("you"))
        .await
        .unwrap();
    assert_eq!(done.claimed, None);
    assert_eq!(status(q, "b").await, Some(RunStatus::Pending));
    assert!(q.finish("a", "me", RunStatus::Success, None).await.unwrap());
    assert_eq!(q.claim("w").await.unwrap().unwrap().run_id, "b");
    // With `reject` on a free thread it is claimed too.
    let done = q
        .enqueue(
            NewRun::new("c", "free", json!({}))
                .multitask(Multitask::Reject)
                .claimed_by("me"),
        )
        .await
        .unwrap();
    assert_eq!(done.claimed.map(|c| c.run_id), Some("c".to_owned()));
}

/// A given run is claimed only when it is pending and next on its thread.
pub async fn runs_claim_a_given_run_in_its_turn(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    q.enqueue(run("a", "t")).await.unwrap();
    q.enqueue(run("b", "t")).await.unwrap();
    assert_eq!(q.claim_run("b", "w").await.unwrap(), None, "a is older");
    assert_eq!(q.claim_run("nope", "w").await.unwrap(), None);
    let a = f.other().claim_run("a", "w1").await.unwrap().unwrap();
    assert_eq!((a.run_id.as_str(), a.attempt), ("a", 1));
    assert_eq!(
        q.claim_run("a", "w2").await.unwrap(),
        None,
        "already running"
    );
    assert_eq!(q.claim_run("b", "w2").await.unwrap(), None, "a is running");
    assert!(q.finish("a", "w1", RunStatus::Success, None).await.unwrap());
    assert_eq!(q.claim_run("a", "w2").await.unwrap(), None, "finished");
    let b = q.claim_run("b", "w2").await.unwrap().unwrap();
    assert_eq!(b.thread_id, "t");
    assert_eq!(
        q.get("b").await.unwrap().unwrap().worker.as_deref(),
        Some("w2")
    );
}

/// The busy threads are those with a pending or running run.
pub async fn runs_busy_threads(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    assert!(q.busy_threads().await.unwrap().is_empty());
    q.enqueue(run("a", "t1")).await.unwrap();
    q.enqueue(run("b", "t2")).await.unwrap();
    q.enqueue(run("c", "t2")).await.unwrap();
    let both: BTreeSet<String> = ["t1".to_owned(), "t2".to_owned()].into();
    assert_eq!(f.other().busy_threads().await.unwrap(), both);
    let first = q.claim("w").await.unwrap().unwrap();
    assert_eq!(q.busy_threads().await.unwrap(), both);
    assert!(
        q.finish(&first.run_id, "w", RunStatus::Success, None)
            .await
            .unwrap()
    );
    assert_eq!(q.busy_threads().await.unwrap(), ["t2".to_owned()].into(),);
}

/// `stats` counts the pending and running runs, through either handle, and dates the
/// oldest pending one.
pub async fn runs_stats_count_pending_and_running(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    assert_eq!(q.stats().await.unwrap(), QueueStats::default());
    let before = std::time::SystemTime::now() - Duration::from_secs(5);
    q.enqueue(run("a", "t1")).await.unwrap();
    q.enqueue(run("b", "t1")).await.unwrap();
    q.enqueue(run("c", "t2")).await.unwrap();
    let stats = f.other().stats().await.unwrap();
    assert_eq!((stats.pending, stats.running), (3, 0));
    let oldest = stats.oldest_pending.expect("an oldest pending run");
    assert!(oldest >= before && oldest <= std::time::SystemTime::now() + Duration::from_secs(5));
    let first = q.claim("w").await.unwrap().unwrap();
    let stats = q.stats().await.unwrap();
    assert_eq!((stats.pending, stats.running), (2, 1));
    assert!(
        q.finish(&first.run_id, "w", RunStatus::Success, None)
            .await
            .unwrap()
    );
    let stats = q.stats().await.unwrap();
    assert_eq!((stats.pending, stats.running), (2, 0));
}

/// Subscribers hear enqueues, cancels, events and ends, made through either handle.
pub async fn runs_notifications_announce_changes(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let mut notes = f.queue().subscribe().await.unwrap();
    let other = f.other().as_ref();
    other.enqueue(run("r1", "t1")).await.unwrap();
    let n = wait_for(&mut notes, "enqueued", |n| {
        matches!(n, Notification::Enqueued { .. })
    })
    .await;
    assert_eq!(
        n,
        Notification::Enqueued {
            run_id: "r1".into(),
            thread_id: "t1".into(),
            claimable: true
        }
    );
    // Behind r1 on its thread: announced, but not claimable until r1 ends.
    other.enqueue(run("r1b", "t1")).await.unwrap();
    let n = wait_for(&mut notes, "enqueued behind", |n| {
        matches!(n, Notification::Enqueued { .. })
    })
    .await;
    assert_eq!(
        n,
        Notification::Enqueued {
            run_id: "r1b".into(),
            thread_id: "t1".into(),
            claimable: false
        }
    );
    // Claimed as it was enqueued: announced for its thread's followers, claimable by nobody.
    let done = other
        .enqueue(run("r3", "t3").claimed_by("caller"))
        .await
        .unwrap();
    assert!(done.claimed.is_some());
    let n = wait_for(&mut notes, "enqueued and claimed", |n| {
        matches!(n, Notification::Enqueued { .. })
    })
    .await;
    assert_eq!(
        n,
        Notification::Enqueued {
            run_id: "r3".into(),
            thread_id: "t3".into(),
            claimable: false
        }
    );
    other.claim("w").await.unwrap().unwrap();
    event(other, "r1", "w", json!(1)).await.unwrap();
    let n = wait_for(&mut notes, "event", |n| {
        matches!(n, Notification::Event { .. })
    })
    .await;
    assert_eq!(
        n,
        Notification::Event {
            run_id: "r1".into(),
            seq: 1
        }
    );
    other
        .request_cancel("r1", CancelAction::Rollback, "")
        .await
        .unwrap();
    wait_for(&mut notes, "cancel", |n| {
        matches!(n, Notification::Cancel { .. })
    })
    .await;
    other
        .finish("r1", "w", RunStatus::Interrupted, None)
        .await
        .unwrap();
    let n = wait_for(&mut notes, "finished", |n| {
        matches!(n, Notification::Finished { .. })
    })
    .await;
    assert_eq!(
        n,
        Notification::Finished {
            run_id: "r1".into(),
            status: Some(RunStatus::Interrupted)
        }
    );
    other.enqueue(run("r2", "t2")).await.unwrap();
    other
        .request_cancel("r2", CancelAction::Rollback, "")
        .await
        .unwrap();
    let n = wait_for(
        &mut notes,
        "deleted",
        |n| matches!(n, Notification::Finished { run_id, .. } if run_id == "r2"),
    )
    .await;
    assert_eq!(
        n,
        Notification::Finished {
            run_id: "r2".into(),
            status: None
        }
    );
    assert_eq!(n.run_id(), "r2");
}

/// Concurrent `reject` enqueues of one thread through two handles take turns: exactly one
/// is accepted.
pub async fn runs_concurrent_rejecting_enqueues_take_turns(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let tries: Vec<_> = (0..12)
        .map(|i| {
            let q = Arc::clone(if i % 2 == 0 { f.queue() } else { f.other() });
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
    assert_eq!(f.queue().runs_of_thread("t").await.unwrap().len(), 1);
}

/// `claim_once` gives a key to its first caller only, through either handle, and to exactly
/// one of many concurrent callers; bad keys are refused.
pub async fn runs_claim_once_gives_a_key_to_one_caller(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    assert!(q.claim_once("cron:1:2026-01-01T00:00:00Z").await.unwrap());
    assert!(!q.claim_once("cron:1:2026-01-01T00:00:00Z").await.unwrap());
    assert!(
        !f.other()
            .claim_once("cron:1:2026-01-01T00:00:00Z")
            .await
            .unwrap()
    );
    assert!(
        f.other()
            .claim_once("cron:1:2026-01-01T00:00:01Z")
            .await
            .unwrap()
    );
    assert!(matches!(
        q.claim_once("").await,
        Err(Error::InvalidInput { .. })
    ));
    assert!(matches!(
        q.claim_once(&"k".repeat(MAX_ID_LEN + 1)).await,
        Err(Error::InvalidInput { .. })
    ));
    // Many callers racing on each of several keys, from both handles: one winner a key.
    for key in 0..5 {
        let key = format!("race-{key}");
        let mut tasks = Vec::new();
        for i in 0..8 {
            let queue = if i % 2 == 0 { f.queue() } else { f.other() };
            let (queue, key) = (Arc::clone(queue), key.clone());
            tasks.push(tokio::spawn(async move {
                queue.claim_once(&key).await.unwrap()
            }));
        }
        let mut won = 0;
        for t in tasks {
            won += usize::from(t.await.unwrap());
        }
        assert_eq!(won, 1, "one caller takes {key}");
    }
}
