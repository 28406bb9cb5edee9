//! Runs as records: what is stored of them, how they are listed, deleted and counted.

use std::time::{Duration, SystemTime};

use serde_json::json;

use super::*;

/// A run's record comes back as it was enqueued (assistant, metadata, arguments with nested
/// JSON and text of any kind, strategy), with its times, through either handle.
pub async fn runs_records_round_trip(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    let metadata = json!({ "assistant_id": "a-1", "user": "ünï €", "n": 3, "nested": { "x": [1, null, 2.5] } });
    let kwargs = json!({
        "input": { "messages": [{ "role": "user", "content": "hi \u{0} there" }] },
        "config": { "configurable": { "thread_id": "t", "user_id": "" } },
        "stream_mode": ["values", "updates"],
        "webhook": null,
        "temporary": false,
    });
    let before = SystemTime::now() - Duration::from_secs(5);
    q.enqueue(
        NewRun::new("r1", "t")
            .assistant("a-1")
            .metadata(metadata.as_object().unwrap().clone())
            .kwargs(kwargs.as_object().unwrap().clone())
            .multitask(Multitask::Interrupt),
    )
    .await
    .unwrap();
    let row = f.other().get("r1").await.unwrap().unwrap();
    assert_eq!(
        (
            row.run_id.as_str(),
            row.thread_id.as_str(),
            row.assistant_id.as_str()
        ),
        ("r1", "t", "a-1")
    );
    assert_eq!(json!(row.metadata), metadata);
    assert_eq!(json!(row.kwargs), kwargs);
    assert_eq!(row.multitask, Multitask::Interrupt);
    assert!(!row.temporary);
    let soon = SystemTime::now() + Duration::from_secs(5);
    assert!(
        row.created_at > before && row.created_at < soon,
        "{:?}",
        row.created_at
    );
    assert!(row.updated_at > before && row.updated_at < soon);
    assert_eq!((row.output, row.error, row.events), (None, None, 0));
    q.enqueue(run("r2", "u").temporary()).await.unwrap();
    assert!(q.get("r2").await.unwrap().unwrap().temporary);
}

/// Runs are listed newest first (oldest first when asked), by thread, by id and by status,
/// a page at a time.
pub async fn runs_list_filters_orders_and_pages(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    for (id, thread) in [("a", "t"), ("b", "u"), ("c", "t"), ("d", "t")] {
        q.enqueue(run(id, thread)).await.unwrap();
        // Distinct creation times, whatever the clock's resolution.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    claim(q, "w", Some("a")).await.unwrap();
    assert!(end(q, "a", "w", RunStatus::Success).await);
    claim(q, "w", Some("c")).await.unwrap();
    let o = f.other().as_ref();
    assert_eq!(
        ids(&o.list(&RunQuery::new()).await.unwrap()),
        ["d", "c", "b", "a"]
    );
    assert_eq!(
        ids(&o.list(&RunQuery::new().oldest_first()).await.unwrap()),
        ["a", "b", "c", "d"]
    );
    assert_eq!(
        ids(&o.list(&RunQuery::thread("t")).await.unwrap()),
        ["d", "c", "a"]
    );
    assert_eq!(
        ids(&o.list(&RunQuery::thread("t").page(1, 1)).await.unwrap()),
        ["c"]
    );
    assert_eq!(
        ids(&o.list(&RunQuery::thread("t").page(10, 3)).await.unwrap()),
        Vec::<&str>::new()
    );
    assert_eq!(
        ids(&o
            .list(&RunQuery::new().statuses([RunStatus::Pending]))
            .await
            .unwrap()),
        ["d", "b"]
    );
    assert_eq!(
        ids(&o
            .list(&RunQuery::thread("t").statuses([RunStatus::Running, RunStatus::Success]))
            .await
            .unwrap()),
        ["c", "a"]
    );
    assert_eq!(
        ids(&o.list(&RunQuery::runs(["b", "a", "nope"])).await.unwrap()),
        ["b", "a"]
    );
    assert!(
        o.list(&RunQuery::runs(Vec::<String>::new()))
            .await
            .unwrap()
            .is_empty()
    );
}

/// A run that is not running can be deleted with its events; a running one cannot.
pub async fn runs_delete_a_run(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    q.enqueue(run("a", "t")).await.unwrap();
    q.enqueue(run("b", "t")).await.unwrap();
    claim(q, "w", None).await.unwrap();
    event(q, "a", "w", json!(1)).await.unwrap();
    assert_eq!(q.delete(Deletion::Run("a")).await.unwrap(), 0, "running");
    assert_eq!(q.delete(Deletion::Run("b")).await.unwrap(), 1, "pending");
    assert_eq!(q.get("b").await.unwrap(), None);
    assert!(end(q, "a", "w", RunStatus::Success).await);
    assert_eq!(f.other().delete(Deletion::Run("a")).await.unwrap(), 1);
    assert_eq!(q.get("a").await.unwrap(), None);
    assert!(q.events_after("a", 0, 10).await.unwrap().is_empty());
    assert_eq!(q.delete(Deletion::Run("a")).await.unwrap(), 0);
}

/// `stats` counts the pending and running runs, through either handle, and dates the
/// oldest pending one.
pub async fn runs_stats_count_pending_and_running(make: MakeQueue<'_>) {
    let f = fresh(make).await;
    let q = f.queue().as_ref();
    assert_eq!(q.stats().await.unwrap(), QueueStats::default());
    let before = SystemTime::now() - Duration::from_secs(5);
    q.enqueue(run("a", "t1")).await.unwrap();
    q.enqueue(run("b", "t1")).await.unwrap();
    q.enqueue(run("c", "t2")).await.unwrap();
    let stats = f.other().stats().await.unwrap();
    assert_eq!((stats.pending, stats.running), (3, 0));
    let oldest = stats.oldest_pending.expect("an oldest pending run");
    assert!(oldest >= before && oldest <= SystemTime::now() + Duration::from_secs(5));
    let first = claim(q, "w", None).await.unwrap();
    let stats = q.stats().await.unwrap();
    assert_eq!((stats.pending, stats.running), (2, 1));
    assert!(end(q, &first, "w", RunStatus::Success).await);
    let stats = q.stats().await.unwrap();
    assert_eq!((stats.pending, stats.running), (2, 0));
}
