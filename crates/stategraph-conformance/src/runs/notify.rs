//! Notifications, and keys taken once.

use std::sync::Arc;

use serde_json::json;

use super::*;
use stategraph_checkpoint::Error;

/// Subscribers hear enqueues, cancels, events and ends, made through either handle.
pub async fn runs_notifications_announce_changes(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let mut notes = f.queue().subscribe().await.unwrap();
    let other = f.other().as_ref();
    let enqueued = |n: &Notification| matches!(n, Notification::Enqueued { .. });
    other.enqueue(run("r1", "t1")).await.unwrap();
    let n = wait_for(&mut notes, "enqueued", enqueued).await;
    assert_eq!(
        n,
        Notification::Enqueued {
            run_id: "r1".into(),
            thread_id: "t1".into(),
            claimable: true
        }
    );
    assert_eq!(n.thread_id(), Some("t1"));
    // Behind r1 on its thread: announced, but not claimable until r1 ends.
    other.enqueue(run("r1b", "t1")).await.unwrap();
    let n = wait_for(&mut notes, "enqueued behind", enqueued).await;
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
    let n = wait_for(&mut notes, "enqueued and claimed", enqueued).await;
    assert_eq!(
        n,
        Notification::Enqueued {
            run_id: "r3".into(),
            thread_id: "t3".into(),
            claimable: false
        }
    );
    claim(other, "w", None).await.unwrap();
    let batch = [
        ("values".to_owned(), json!(1)),
        ("values".to_owned(), json!(2)),
    ];
    other.append_events("r1", "w", &batch).await.unwrap();
    // One notification a batch, with its last number.
    let n = wait_for(&mut notes, "event", |n| {
        matches!(n, Notification::Event { .. })
    })
    .await;
    assert_eq!(
        n,
        Notification::Event {
            run_id: "r1".into(),
            seq: 2
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
    end(other, "r1", "w", RunStatus::Interrupted).await;
    let n = wait_for(&mut notes, "finished", |n| {
        matches!(n, Notification::Finished { .. })
    })
    .await;
    assert_eq!(
        n,
        Notification::Finished {
            run_id: "r1".into(),
            thread_id: "t1".into(),
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
            thread_id: "t2".into(),
            status: None
        }
    );
    assert_eq!(n.run_id(), "r2");
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
    // A handle opened later knows the keys taken before it.
    assert!(
        !f.reopen()
            .await
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
