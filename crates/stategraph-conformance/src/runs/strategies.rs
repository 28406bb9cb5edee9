//! Multitask strategies and cancels.

use std::sync::Arc;

use super::*;
use stategraph_checkpoint::Error;

/// `reject` refuses a run while its thread has a pending or running run, naming both.
pub async fn runs_reject_refuses_a_busy_thread(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    q.enqueue(NewRun::new("a", "t")).await.unwrap();
    let err = q
        .enqueue(NewRun::new("b", "t").multitask(Multitask::Reject))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Conflict { message } if message.contains("`t`") && message.contains("`a`")),
        "{err:?}"
    );
    assert_eq!(q.get("b").await.unwrap(), None);
    assert_eq!(claim(q, "w1", None).await.as_deref(), Some("a"));
    let err = f.other().enqueue(NewRun::new("b", "t")).await.unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
    assert!(end(q, "a", "w1", RunStatus::Success).await);
    q.enqueue(NewRun::new("b", "t")).await.unwrap();
}

/// `interrupt` ends the thread's pending runs and signals its running one; `rollback`
/// deletes the pending ones and signals with a rollback; on an idle thread both just enqueue.
pub async fn runs_interrupt_and_rollback_strategies(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    let mut notes = f.other().subscribe().await.unwrap();
    q.enqueue(run("a", "t")).await.unwrap();
    claim(q, "w1", None).await.unwrap();
    q.enqueue(run("b", "t")).await.unwrap();
    q.enqueue(run("c", "t")).await.unwrap();
    assert_eq!(claim(q, "w2", None).await, None);

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
    assert_eq!(claim(q, "w2", None).await, None);
    assert!(end(q, "a", "w1", RunStatus::Interrupted).await);
    assert_eq!(claim(q, "w2", None).await.as_deref(), Some("d"));

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
    // A rolled-back run is deleted as it ends.
    let done = q
        .finish(RunEnd::new("d", "w2", RunStatus::Interrupted).deleted())
        .await
        .unwrap();
    assert!(done.ended);
    assert_eq!(q.get("d").await.unwrap(), None);
    assert_eq!(claim(q, "w2", None).await.as_deref(), Some("f"));
    // On an idle thread they just enqueue.
    let done = f
        .other()
        .enqueue(run("g", "idle").multitask(Multitask::Rollback))
        .await
        .unwrap();
    assert_eq!((done.ended.len(), done.signalled.len()), (0, 0));
    assert!(done.first);
}

/// Cancelling directly: a pending run ends at once (or is deleted by a rollback), a running
/// one is signalled (its reason reaching the worker by notification and heartbeat), a
/// finished one says so, an unknown one is not found.
pub async fn runs_request_cancel_outcomes(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    q.enqueue(run("d", "t")).await.unwrap();
    q.enqueue(run("f", "t")).await.unwrap();
    q.enqueue(run("g", "u")).await.unwrap();
    claim(q, "w2", None).await.unwrap();
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
    assert!(end(q, "d", "w2", RunStatus::Success).await);
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

/// Concurrent `reject` enqueues of one thread through two handles take turns: exactly one
/// is accepted.
pub async fn runs_concurrent_rejecting_enqueues_take_turns(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let tries: Vec<_> = (0..12)
        .map(|i| {
            let q = Arc::clone(if i % 2 == 0 { f.queue() } else { f.other() });
            tokio::spawn(async move { q.enqueue(NewRun::new(format!("r{i}"), "t")).await })
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
    assert_eq!(
        f.queue().list(&RunQuery::thread("t")).await.unwrap().len(),
        1
    );
}
