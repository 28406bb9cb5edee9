//! Leases: runs whose worker stopped heartbeating are taken over, runs given back wait for
//! another claim, and nothing a handle opened later does touches the runs in flight.

use std::time::Duration;

use serde_json::json;

use super::*;

/// A run whose lease ran out goes back to pending and is taken over (attempt 2); the first
/// worker's lease is gone; on its last attempt it ends in `error`.
pub async fn runs_expired_lease_is_taken_over(make: MakeQueue<'_>) {
    let lease = Duration::from_millis(300);
    let f = leased(make, lease, 2).await;
    let q = f.queue().as_ref();
    assert_eq!(q.lease(), lease);
    q.enqueue(run("r1", "t1")).await.unwrap();
    assert_eq!(q.claim("w1", None).await.unwrap().unwrap().attempt, 1);
    assert!(q.requeue_expired().await.unwrap().is_empty(), "not yet");

    tokio::time::sleep(lease + Duration::from_millis(200)).await;
    let expired = q.requeue_expired().await.unwrap();
    assert_eq!(expired, [Expired::new("r1", "t1", RunStatus::Pending)]);
    assert_eq!(status(q, "r1").await, Some(RunStatus::Pending));

    let takeover = f.other().claim("w2", None).await.unwrap().unwrap();
    assert_eq!((takeover.run_id.as_str(), takeover.attempt), ("r1", 2));
    // The first worker's lease is gone: nothing it does counts.
    assert!(!q.heartbeat("r1", "w1").await.unwrap().held);
    assert_eq!(event(q, "r1", "w1", json!(1)).await, None);
    assert!(!end(q, "r1", "w1", RunStatus::Success).await);
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
    assert_eq!(claim(q, "w3", None).await, None);
    assert!(!end(q, "r1", "w2", RunStatus::Success).await);
}

/// Heartbeats keep a lease alive past its length.
pub async fn runs_heartbeats_keep_a_lease(make: MakeQueue<'_>) {
    let lease = Duration::from_millis(300);
    let f = leased(make, lease, 2).await;
    let q = f.queue().as_ref();
    q.enqueue(run("r2", "t2")).await.unwrap();
    claim(q, "w4", None).await.unwrap();
    for _ in 0..6 {
        tokio::time::sleep(lease / 3).await;
        assert!(q.heartbeat("r2", "w4").await.unwrap().held);
    }
    assert!(q.requeue_expired().await.unwrap().is_empty());
    assert!(end(q, "r2", "w4", RunStatus::Success).await);
}

/// A run asked to stop whose worker then dies ends `interrupted`, not requeued.
pub async fn runs_cancelled_run_whose_worker_died_is_interrupted(make: MakeQueue<'_>) {
    let lease = Duration::from_millis(300);
    let f = leased(make, lease, 3).await;
    let q = f.queue().as_ref();
    q.enqueue(run("r3", "t3")).await.unwrap();
    claim(q, "w5", None).await.unwrap();
    assert_eq!(
        q.request_cancel("r3", CancelAction::Interrupt, "")
            .await
            .unwrap(),
        CancelOutcome::Signalled
    );
    tokio::time::sleep(lease + Duration::from_millis(200)).await;
    let expired = q.requeue_expired().await.unwrap();
    assert_eq!(expired, [Expired::new("r3", "t3", RunStatus::Interrupted)]);
    assert_eq!(claim(q, "w6", None).await, None);
}

/// A worker that gives its run back (its process shuts down) leaves it pending, in its place
/// in its thread's queue, for another worker at once; the attempt given back does not count
/// against the run's attempts; the worker holds it no more.
pub async fn runs_released_run_waits_for_another_claim(make: MakeQueue<'_>) {
    let lease = Duration::from_millis(300);
    let f = leased(make, lease, 2).await;
    let q = f.queue().as_ref();
    let mut notes = f.other().subscribe().await.unwrap();
    q.enqueue(run("r1", "t")).await.unwrap();
    q.enqueue(run("r2", "t")).await.unwrap();
    assert_eq!(claim(q, "w1", None).await.as_deref(), Some("r1"));
    assert!(
        !q.finish(RunEnd::released("r1", "w2")).await.unwrap().ended,
        "not the holder"
    );
    assert!(q.finish(RunEnd::released("r1", "w1")).await.unwrap().ended);
    assert_eq!(status(q, "r1").await, Some(RunStatus::Pending));
    assert!(!q.heartbeat("r1", "w1").await.unwrap().held);
    wait_for(
        &mut notes,
        "requeued",
        |n| matches!(n, Notification::Requeued { run_id, .. } if run_id == "r1"),
    )
    .await;
    // r1 is still first on its thread.
    let again = f.other().claim("w2", None).await.unwrap().unwrap();
    assert_eq!((again.run_id.as_str(), again.attempt), ("r1", 2));
    // Its lease runs out once: with two attempts, one of them given back, it is tried again.
    tokio::time::sleep(lease + Duration::from_millis(200)).await;
    let expired = q.requeue_expired().await.unwrap();
    assert_eq!(expired, [Expired::new("r1", "t", RunStatus::Pending)]);
    let third = q.claim("w3", None).await.unwrap().unwrap();
    assert_eq!((third.run_id.as_str(), third.attempt), ("r1", 3));
    assert!(end(q, "r1", "w3", RunStatus::Success).await);
    assert_eq!(claim(q, "w3", None).await.as_deref(), Some("r2"));
}

/// A handle opened while others work (a process that starts: its setup, its first reads and
/// upkeep) leaves their runs as they are: a running run stays running with its worker's
/// lease, its events and its thread's busy status; the queue goes on as before.
pub async fn runs_a_new_handle_leaves_runs_in_flight_alone(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    q.enqueue(run("r1", "t")).await.unwrap();
    q.enqueue(run("r2", "t")).await.unwrap();
    q.enqueue(run("r3", "u")).await.unwrap();
    assert_eq!(claim(q, "w1", Some("r1")).await.as_deref(), Some("r1"));
    assert_eq!(event(q, "r1", "w1", json!(1)).await, Some(1));

    let started = f.reopen().await;
    assert!(started.requeue_expired().await.unwrap().is_empty());
    assert_eq!(
        started.get("r1").await.unwrap().unwrap().worker.as_deref(),
        Some("w1")
    );
    assert_eq!(
        thread_status(started.as_ref(), "t").await,
        Some(ThreadStatus::Busy)
    );
    // It claims what is free, and nothing of a busy thread.
    assert_eq!(
        claim(started.as_ref(), "new", None).await.as_deref(),
        Some("r3")
    );
    assert_eq!(claim(started.as_ref(), "new", None).await, None);

    assert!(q.heartbeat("r1", "w1").await.unwrap().held);
    assert_eq!(event(q, "r1", "w1", json!(2)).await, Some(2));
    assert!(end(q, "r1", "w1", RunStatus::Success).await);
    assert_eq!(started.events_after("r1", 0, 10).await.unwrap().len(), 2);
    assert_eq!(
        claim(started.as_ref(), "new", None).await.as_deref(),
        Some("r2")
    );
}
