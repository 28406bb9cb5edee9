//! What the queue keeps of threads: `busy` while a run of the thread is pending or running,
//! else the state its last run (or state update) left, written with that run's end.

use std::time::Duration;

use serde_json::json;

use super::*;

fn state(status: ThreadStatus, n: i64) -> ThreadState {
    ThreadState::new(status, json!({ "n": n, "text": "ünï" }), json!({}))
}

/// A thread is busy from its first run's enqueue to its last run's end; each end settles
/// its state in the same step (or keeps it, or deletes it), and the thread then reads as
/// that state; a worker that no longer holds its run settles nothing.
pub async fn runs_finish_settles_the_thread(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    assert_eq!(thread_status(q, "t").await, None, "unknown");
    q.enqueue(run("r1", "t")).await.unwrap();
    let rows = f
        .other()
        .threads(&["t".to_owned(), "nope".to_owned()])
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0].thread_id.as_str(), rows[0].status),
        ("t", ThreadStatus::Busy)
    );
    assert_eq!(rows[0].state, None);
    claim(q, "w", None).await.unwrap();
    let interrupted = ThreadState::new(
        ThreadStatus::Interrupted,
        json!({ "messages": ["hi"] }),
        json!({ "task-1": [{ "value": "approve?", "id": "i-1" }] }),
    );
    let wrong = state(ThreadStatus::Error, 0);
    let lost = q
        .finish(RunEnd::new("r1", "other", RunStatus::Success).thread(ThreadEnd::Settle(&wrong)))
        .await
        .unwrap();
    assert!(!lost.ended);
    assert_eq!(thread_status(q, "t").await, Some(ThreadStatus::Busy));
    let done = q
        .finish(RunEnd::new("r1", "w", RunStatus::Success).thread(ThreadEnd::Settle(&interrupted)))
        .await
        .unwrap();
    assert!(done.ended);
    let row = &f.other().threads(&["t".to_owned()]).await.unwrap()[0];
    assert_eq!(row.status, ThreadStatus::Interrupted);
    assert_eq!(row.state.as_ref(), Some(&interrupted));
    let first_write = row.updated_at.expect("when the state was written");

    // The next run: busy again until it ends; ending it keeping the state leaves it as is.
    q.enqueue(run("r2", "t")).await.unwrap();
    assert_eq!(thread_status(q, "t").await, Some(ThreadStatus::Busy));
    claim(q, "w", None).await.unwrap();
    assert!(end(q, "r2", "w", RunStatus::Interrupted).await);
    let row = &q.threads(&["t".to_owned()]).await.unwrap()[0];
    assert_eq!(
        (row.status, row.state.as_ref()),
        (ThreadStatus::Interrupted, Some(&interrupted))
    );

    // A failed run: `error`, with its error.
    tokio::time::sleep(Duration::from_millis(20)).await;
    q.enqueue(run("r3", "t")).await.unwrap();
    claim(q, "w", None).await.unwrap();
    let error = json!({ "error": "ValueError", "message": "boom" });
    let failed = state(ThreadStatus::Error, 3).error(error.clone());
    q.finish(
        RunEnd::new("r3", "w", RunStatus::Error)
            .error(Some(&error))
            .thread(ThreadEnd::Settle(&failed)),
    )
    .await
    .unwrap();
    let row = &q.threads(&["t".to_owned()]).await.unwrap()[0];
    assert_eq!(
        (row.status, row.state.as_ref()),
        (ThreadStatus::Error, Some(&failed))
    );
    assert!(row.updated_at.unwrap() > first_write);

    // A temporary thread's state goes with its run.
    q.enqueue(run("s1", "tmp").temporary()).await.unwrap();
    claim(q, "w", None).await.unwrap();
    q.finish(RunEnd::new("s1", "w", RunStatus::Success).thread(ThreadEnd::Settle(&failed)))
        .await
        .unwrap();
    q.enqueue(run("s2", "tmp").temporary()).await.unwrap();
    claim(q, "w", None).await.unwrap();
    q.finish(RunEnd::new("s2", "w", RunStatus::Success).thread(ThreadEnd::Delete))
        .await
        .unwrap();
    let row = &q.threads(&["tmp".to_owned()]).await.unwrap()[0];
    assert_eq!((row.status, row.state.as_ref()), (ThreadStatus::Idle, None));
}

/// A thread's state is set outside runs (a state update, a copy): only while no run of it
/// is pending or running when asked so, always otherwise; the status a reader sees is still
/// `busy` while a run is in flight.
pub async fn runs_thread_state_is_set_only_when_idle(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    let idle = state(ThreadStatus::Idle, 1);
    assert!(q.set_thread("t", &idle, true).await.unwrap());
    let row = &f.other().threads(&["t".to_owned()]).await.unwrap()[0];
    assert_eq!(
        (row.status, row.state.as_ref()),
        (ThreadStatus::Idle, Some(&idle))
    );
    q.enqueue(run("r1", "t")).await.unwrap();
    let later = state(ThreadStatus::Interrupted, 2);
    assert!(!q.set_thread("t", &later, true).await.unwrap(), "busy");
    assert_eq!(
        q.threads(&["t".to_owned()]).await.unwrap()[0]
            .state
            .as_ref(),
        Some(&idle)
    );
    assert!(f.other().set_thread("t", &later, false).await.unwrap());
    let row = &q.threads(&["t".to_owned()]).await.unwrap()[0];
    assert_eq!(
        (row.status, row.state.as_ref()),
        (ThreadStatus::Busy, Some(&later))
    );
    claim(q, "w", None).await.unwrap();
    assert!(end(q, "r1", "w", RunStatus::Success).await);
    assert_eq!(thread_status(q, "t").await, Some(ThreadStatus::Interrupted));
}

/// Deleting a thread deletes its runs that are not running, their events, and its state;
/// other threads keep theirs.
pub async fn runs_delete_a_thread(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    for (id, thread) in [("a", "t"), ("b", "t"), ("c", "u")] {
        q.enqueue(run(id, thread)).await.unwrap();
    }
    claim(q, "w", Some("a")).await.unwrap();
    event(q, "a", "w", json!(1)).await.unwrap();
    let settled = state(ThreadStatus::Idle, 1);
    q.finish(RunEnd::new("a", "w", RunStatus::Success).thread(ThreadEnd::Settle(&settled)))
        .await
        .unwrap();
    assert!(q.set_thread("u", &settled, false).await.unwrap());
    assert_eq!(f.other().delete(Deletion::Thread("t")).await.unwrap(), 2);
    assert!(q.list(&RunQuery::thread("t")).await.unwrap().is_empty());
    assert!(q.events_after("a", 0, 10).await.unwrap().is_empty());
    assert_eq!(thread_status(q, "t").await, None);
    assert_eq!(thread_status(q, "u").await, Some(ThreadStatus::Busy));
    assert_eq!(ids(&q.list(&RunQuery::thread("u")).await.unwrap()), ["c"]);
    assert_eq!(q.delete(Deletion::Thread("t")).await.unwrap(), 0);
}

/// A run whose last attempt's lease runs out leaves its thread in `error`, with the run's
/// error and the values the thread had.
pub async fn runs_a_last_attempt_that_expires_fails_its_thread(make: MakeQueue<'_>) {
    let lease = Duration::from_millis(300);
    let f = leased(make, lease, 1).await;
    let q = f.queue().as_ref();
    let before = state(ThreadStatus::Idle, 7);
    assert!(q.set_thread("t", &before, false).await.unwrap());
    q.enqueue(run("r1", "t")).await.unwrap();
    claim(q, "w", None).await.unwrap();
    tokio::time::sleep(lease + Duration::from_millis(200)).await;
    let expired = f.other().requeue_expired().await.unwrap();
    assert_eq!(expired, [Expired::new("r1", "t", RunStatus::Error)]);
    let row = &q.threads(&["t".to_owned()]).await.unwrap()[0];
    assert_eq!(row.status, ThreadStatus::Error);
    let state = row.state.as_ref().unwrap();
    assert_eq!(state.values, before.values);
    assert_eq!(state.error.get("error"), Some(&json!("LeaseExpired")));
}
