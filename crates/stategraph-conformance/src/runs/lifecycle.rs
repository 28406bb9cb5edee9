//! A run's life: enqueue, claim (FIFO per thread, one running run per thread, at enqueue, a
//! given run, a delayed run), heartbeat, finish.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::json;

use super::*;
use stategraph_checkpoint::Error;

/// Claims, heartbeats and finishes; FIFO per thread; one running run per thread; only the
/// lease holder counts.
pub async fn runs_lifecycle_and_fifo_per_thread(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    for (id, thread) in [("r1", "t1"), ("r2", "t1"), ("r3", "t2")] {
        let done = q.enqueue(run(id, thread)).await.unwrap();
        assert_eq!(done.claimed, None);
        assert_eq!(done.first, id != "r2", "{id} starts its thread's work");
    }
    let pending = q.get("r1").await.unwrap().unwrap();
    assert_eq!(pending.status, RunStatus::Pending);
    assert_eq!(pending.attempt, 0);
    assert_eq!(pending.kwargs["input"], json!("r1"));
    assert!(pending.seq < q.get("r2").await.unwrap().unwrap().seq);

    let first = q.claim("w1", None).await.unwrap().unwrap();
    assert_eq!(
        (
            first.run_id.as_str(),
            first.thread_id.as_str(),
            first.attempt
        ),
        ("r1", "t1", 1)
    );
    assert_eq!(first.status, RunStatus::Running);
    assert_eq!(first.kwargs["input"], json!("r1"));
    // r2 waits behind r1 (same thread); r3's thread is free.
    assert_eq!(claim(q, "w2", None).await.as_deref(), Some("r3"));
    assert_eq!(claim(q, "w3", None).await, None);

    let running = q.get("r1").await.unwrap().unwrap();
    assert_eq!(running.status, RunStatus::Running);
    assert_eq!(running.worker.as_deref(), Some("w1"));
    assert!(running.lease_until.is_some());

    assert_eq!(q.heartbeat("r1", "w1").await.unwrap(), Lease::held(None));
    assert!(!q.heartbeat("r1", "w2").await.unwrap().held);
    assert!(!end(q, "r1", "w2", RunStatus::Success).await);
    assert!(end(q, "r1", "w1", RunStatus::Success).await);
    assert!(!end(q, "r1", "w1", RunStatus::Success).await);
    assert!(!q.heartbeat("r1", "w1").await.unwrap().held);
    assert_eq!(status(q, "r1").await, Some(RunStatus::Success));

    assert_eq!(claim(q, "w3", None).await.as_deref(), Some("r2"));
    let failure = json!({ "error": "ValueError", "message": "boom" });
    let output = json!({ "__error__": failure });
    let ran_with = json!({ "input": "r2", "config": { "metadata": { "run_attempt": 1 } } });
    let finished = q
        .finish(
            RunEnd::new("r2", "w3", RunStatus::Error)
                .error(Some(&failure))
                .output(Some(&output))
                .kwargs(ran_with.as_object()),
        )
        .await
        .unwrap();
    assert_eq!(finished, Finished::new(true, None));
    let failed = q.get("r2").await.unwrap().unwrap();
    assert_eq!(
        (failed.status, failed.error, failed.output),
        (RunStatus::Error, Some(failure), Some(output))
    );
    assert_eq!(json!(failed.kwargs), ran_with, "the arguments it ran with");
    // Ending without arguments keeps those it was enqueued with.
    assert_eq!(
        q.get("r1").await.unwrap().unwrap().kwargs["input"],
        json!("r1")
    );

    let order = q
        .list(&RunQuery::thread("t1").oldest_first())
        .await
        .unwrap();
    assert_eq!(ids(&order), ["r1", "r2"]);
    assert!(
        q.list(&RunQuery::thread("nobody"))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(q.get("nothing").await.unwrap(), None);
    // The second handle sees the same queue.
    assert_eq!(
        status(f.other().as_ref(), "r2").await,
        Some(RunStatus::Error)
    );
    assert!(end(q, "r3", "w2", RunStatus::Success).await);
}

/// Empty and over-long ids, a duplicate run id and a status that neither ends a run nor
/// gives it back are refused with typed errors, before anything changes.
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
    claim(q, "w", None).await.unwrap();
    let err = q
        .finish(RunEnd::new("r1", "w", RunStatus::Running))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    assert_eq!(status(q, "r1").await, Some(RunStatus::Running));
    let err = q
        .set_thread(
            "",
            &ThreadState::new(ThreadStatus::Idle, json!({}), json!({})),
            false,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
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
                let Some(claimed) = q.claim(&worker, None).await.unwrap() else {
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
                let held = end(q.as_ref(), &claimed.run_id, &worker, RunStatus::Success).await;
                assert!(held, "{worker} lost the lease of {}", claimed.run_id);
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

/// A run enqueued with a worker to claim it is running at once when nothing else of its
/// thread is pending or running; otherwise it waits its turn as any run.
pub async fn runs_claim_at_enqueue_when_the_thread_is_free(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    let done = q.enqueue(run("a", "t").claimed_by("me")).await.unwrap();
    let claimed = done.claimed.expect("claimed at enqueue");
    assert_eq!((claimed.run_id.as_str(), claimed.attempt), ("a", 1));
    assert_eq!(claimed.kwargs["input"], json!("a"));
    assert!(done.first);
    let row = q.get("a").await.unwrap().unwrap();
    assert_eq!(
        (row.status, row.worker.as_deref()),
        (RunStatus::Running, Some("me"))
    );
    assert_eq!(claim(f.other().as_ref(), "w", None).await, None);
    assert!(q.heartbeat("a", "me").await.unwrap().held);
    // The thread is busy: the next one waits.
    let done = f
        .other()
        .enqueue(run("b", "t").claimed_by("you"))
        .await
        .unwrap();
    assert_eq!(done.claimed, None);
    assert!(!done.first);
    assert_eq!(status(q, "b").await, Some(RunStatus::Pending));
    assert!(end(q, "a", "me", RunStatus::Success).await);
    assert_eq!(claim(q, "w", None).await.as_deref(), Some("b"));
    // With `reject` on a free thread it is claimed too.
    let done = q
        .enqueue(
            NewRun::new("c", "free")
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
    assert_eq!(claim(q, "w", Some("b")).await, None, "a is older");
    assert_eq!(claim(q, "w", Some("nope")).await, None);
    let a = f.other().claim("w1", Some("a")).await.unwrap().unwrap();
    assert_eq!((a.run_id.as_str(), a.attempt), ("a", 1));
    assert_eq!(claim(q, "w2", Some("a")).await, None, "already running");
    assert_eq!(claim(q, "w2", Some("b")).await, None, "a is running");
    assert!(end(q, "a", "w1", RunStatus::Success).await);
    assert_eq!(claim(q, "w2", Some("a")).await, None, "finished");
    assert_eq!(claim(q, "w2", Some("b")).await.as_deref(), Some("b"));
    assert_eq!(
        q.get("b").await.unwrap().unwrap().worker.as_deref(),
        Some("w2")
    );
}

/// A run enqueued with a delay is created that much later and claimable only from then, by
/// any claim (not at enqueue); it does not hold up the runs of its thread that are due
/// before it.
pub async fn runs_delayed_run_waits_for_its_time(make: MakeQueue<'_>) {
    let delay = Duration::from_millis(700);
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    let before = SystemTime::now();
    let done = q
        .enqueue(run("later", "t").delay(delay).claimed_by("me"))
        .await
        .unwrap();
    assert_eq!(done.claimed, None, "not due yet");
    let row = q.get("later").await.unwrap().unwrap();
    assert_eq!(row.status, RunStatus::Pending);
    // Database clocks may differ from this process's a little.
    let slack = Duration::from_millis(500);
    assert!(
        row.created_at + slack >= before + delay,
        "created_at is the time it may start"
    );
    assert_eq!(thread_status(q, "t").await, Some(ThreadStatus::Busy));
    assert_eq!(claim(q, "w", None).await, None);
    assert_eq!(claim(q, "w", Some("later")).await, None);
    // A run due now goes first, at enqueue.
    let done = f
        .other()
        .enqueue(run("now", "t").claimed_by("me"))
        .await
        .unwrap();
    assert_eq!(done.claimed.map(|r| r.run_id).as_deref(), Some("now"));
    assert!(end(q, "now", "me", RunStatus::Success).await);
    assert_eq!(claim(q, "w", None).await, None, "still not due");
    tokio::time::sleep(delay + Duration::from_millis(100)).await;
    let claimed = f.other().claim("w", None).await.unwrap().unwrap();
    assert_eq!((claimed.run_id.as_str(), claimed.attempt), ("later", 1));
}

/// A worker ends its run and claims its next in one step: the oldest run that may be claimed
/// (the ended run's thread's next once it is the oldest); one that no longer holds its run
/// changes nothing of it but still claims.
pub async fn runs_finish_claims_the_next_run(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    for (id, thread) in [("a1", "ta"), ("b1", "tb"), ("a2", "ta"), ("c1", "tc")] {
        q.enqueue(run(id, thread)).await.unwrap();
    }
    assert_eq!(claim(q, "w1", None).await.as_deref(), Some("a1"));
    // b1 is older than a2: it comes next, with a1's end and its last events.
    let last = [("values".to_owned(), json!({ "last": true }))];
    let done = q
        .finish(
            RunEnd::new("a1", "w1", RunStatus::Success)
                .events(&last)
                .claim_next(),
        )
        .await
        .unwrap();
    assert!(done.ended);
    let next = done.next.expect("the next run");
    assert_eq!((next.run_id.as_str(), next.attempt), ("b1", 1));
    let a1 = f.other().get("a1").await.unwrap().unwrap();
    assert_eq!((a1.status, a1.events), (RunStatus::Success, 1));
    let b1 = f.other().get("b1").await.unwrap().unwrap();
    assert_eq!(
        (b1.status, b1.worker.as_deref()),
        (RunStatus::Running, Some("w1"))
    );
    // Then a2, now next on its thread.
    let done = q
        .finish(RunEnd::new("b1", "w1", RunStatus::Success).claim_next())
        .await
        .unwrap();
    assert_eq!(done.next.map(|r| r.run_id).as_deref(), Some("a2"));
    // Not the holder: a2 stays as it is, and w2 still gets c1.
    let done = q
        .finish(RunEnd::new("a2", "w2", RunStatus::Success).claim_next())
        .await
        .unwrap();
    assert!(!done.ended, "not the holder");
    assert_eq!(done.next.map(|r| r.run_id).as_deref(), Some("c1"));
    assert_eq!(status(q, "a2").await, Some(RunStatus::Running));
    // Nothing left to claim.
    for (id, worker) in [("a2", "w1"), ("c1", "w2")] {
        let done = q
            .finish(RunEnd::new(id, worker, RunStatus::Success).claim_next())
            .await
            .unwrap();
        assert_eq!(done, Finished::new(true, None), "{id}");
    }
}
