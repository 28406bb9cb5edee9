//! Each run's stream events: numbered, appended by the lease holder, readable from any
//! number, purged after the run ended.

use std::time::{Duration, SystemTime};

use serde_json::{Value as Json, json};

use super::*;

/// Events are numbered from 1 per run, appended only by the lease holder (in batches, in
/// order), readable after any number, and deleted with their run.
pub async fn runs_events_are_numbered_and_resumable(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    q.enqueue(run("r1", "t1")).await.unwrap();
    assert_eq!(event(q, "r1", "w1", json!(0)).await, None, "pending");
    claim(q, "w1", None).await.unwrap();
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
    assert!(end(q, "r1", "w1", RunStatus::Success).await);
    assert_eq!(event(q, "r1", "w1", json!(0)).await, None, "finished");
    assert_eq!(q.events_after("r1", 0, 100).await.unwrap().len(), 4);
    assert_eq!(q.delete(Deletion::Run("r1")).await.unwrap(), 1);
    assert!(q.events_after("r1", 0, 100).await.unwrap().is_empty());
}

/// Finishing with the run's last events appends them after the earlier ones and ends the
/// run, together; a worker that does not hold the run changes nothing, and a status that is
/// not final is refused before anything is written.
pub async fn runs_finish_appends_the_last_events(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    q.enqueue(run("r1", "t1")).await.unwrap();
    claim(q, "w1", None).await.unwrap();
    assert_eq!(event(q, "r1", "w1", json!({ "i": 0 })).await, Some(1));
    let last: Vec<(String, Json)> = (1..3)
        .map(|i| ("values".to_owned(), json!({ "i": i })))
        .collect();
    let refused = q
        .finish(RunEnd::new("r1", "w1", RunStatus::Running).events(&last))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, stategraph_checkpoint::Error::InvalidInput { .. }),
        "{refused}"
    );
    let other = q
        .finish(RunEnd::new("r1", "w2", RunStatus::Success).events(&last))
        .await
        .unwrap();
    assert!(!other.ended, "not the holder");
    assert_eq!(q.get("r1").await.unwrap().unwrap().events, 1);
    let done = q
        .finish(RunEnd::new("r1", "w1", RunStatus::Success).events(&last))
        .await
        .unwrap();
    assert!(done.ended);
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
    let again = q
        .finish(RunEnd::new("r1", "w1", RunStatus::Error).events(&last))
        .await
        .unwrap();
    assert!(!again.ended, "already finished");
    assert_eq!(q.events_after("r1", 0, 100).await.unwrap().len(), 3);
}

/// The events of runs that ended before a time are purged, oldest first, at most the limit
/// given per call; the runs stay (they are the thread's records) but for temporary ones,
/// which go with their events. Runs that ended after the time, and runs in flight, keep
/// theirs.
pub async fn runs_events_of_ended_runs_are_purged(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    let pause = || tokio::time::sleep(Duration::from_millis(30));
    for (id, thread, end_as, temporary) in [
        ("a", "t1", RunStatus::Success, false),
        ("b", "t2", RunStatus::Error, true),
        ("c", "t3", RunStatus::Interrupted, false),
    ] {
        let new = if temporary {
            run(id, thread).temporary()
        } else {
            run(id, thread)
        };
        q.enqueue(new).await.unwrap();
        claim(q, "w", Some(id)).await.unwrap();
        assert_eq!(event(q, id, "w", json!(1)).await, Some(1));
        assert!(end(q, id, "w", end_as).await);
        pause().await;
    }
    pause().await;
    let cut = SystemTime::now();
    pause().await;
    q.enqueue(run("late", "t4")).await.unwrap();
    claim(q, "w", Some("late")).await.unwrap();
    event(q, "late", "w", json!(1)).await.unwrap();
    assert!(end(q, "late", "w", RunStatus::Success).await);
    q.enqueue(run("waiting", "t5")).await.unwrap();
    q.enqueue(run("busy", "t6")).await.unwrap();
    claim(q, "w", Some("busy")).await.unwrap();
    event(q, "busy", "w", json!(1)).await.unwrap();

    let purge = |before, limit| {
        q.delete(Deletion::EventsEndedBefore {
            ended_before: before,
            limit,
        })
    };
    assert_eq!(purge(cut, 2).await.unwrap(), 2, "the limit");
    assert!(q.events_after("a", 0, 10).await.unwrap().is_empty());
    assert_eq!(
        status(q, "a").await,
        Some(RunStatus::Success),
        "the run stays"
    );
    assert_eq!(status(q, "b").await, None, "a temporary run goes");
    assert_eq!(q.events_after("c", 0, 10).await.unwrap().len(), 1);
    assert_eq!(purge(cut, 10).await.unwrap(), 1);
    assert!(f.other().events_after("c", 0, 10).await.unwrap().is_empty());
    assert_eq!(status(q, "c").await, Some(RunStatus::Interrupted));
    assert_eq!(purge(cut, 10).await.unwrap(), 0);
    assert_eq!(q.events_after("late", 0, 10).await.unwrap().len(), 1);
    // Whenever the cut, runs in flight keep their events.
    let later = SystemTime::now() + Duration::from_secs(3600);
    assert_eq!(purge(later, 10).await.unwrap(), 1);
    assert!(q.events_after("late", 0, 10).await.unwrap().is_empty());
    assert_eq!(q.events_after("busy", 0, 10).await.unwrap().len(), 1);
    assert_eq!(status(q, "waiting").await, Some(RunStatus::Pending));
    assert_eq!(purge(later, 10).await.unwrap(), 0);
}
