//! The in-memory run queue passes the shared run queue conformance suite.

use stategraph_checkpoint::conformance::runs::{QueueOptions, RunQueueFixture};
use stategraph_checkpoint::runs::InMemoryRunQueue;

async fn make(options: QueueOptions) -> RunQueueFixture {
    let queue = InMemoryRunQueue::new()
        .lease(options.lease)
        .max_attempts(options.max_attempts);
    // A clone shares the queue, as a second handle would.
    RunQueueFixture::new(queue.clone(), queue)
}

stategraph_checkpoint::run_queue_conformance!(make);

/// A long-lived process does not keep every run: beyond the number kept, the oldest finished
/// runs are forgotten with their events; pending and running ones never are.
#[tokio::test]
async fn the_oldest_finished_runs_are_forgotten() {
    use serde_json::json;
    use stategraph_checkpoint::runs::{Multitask, NewRun, RunQueue, RunStatus};
    let q = InMemoryRunQueue::new().keep_finished(2);
    q.enqueue(NewRun::new("waiting", "busy", json!({})).multitask(Multitask::Enqueue))
        .await
        .unwrap();
    for i in 0..4 {
        let id = format!("r{i}");
        q.enqueue(NewRun::new(&id, format!("t{i}"), json!({})))
            .await
            .unwrap();
        let run = q.claim_run(&id, "w").await.unwrap().unwrap();
        let event = ("values".to_owned(), json!(i));
        q.append_events(&run.run_id, "w", &[event]).await.unwrap();
        assert!(q.finish(&id, "w", RunStatus::Success, None).await.unwrap());
    }
    for (id, kept) in [("r0", false), ("r1", false), ("r2", true), ("r3", true)] {
        assert_eq!(q.get(id).await.unwrap().is_some(), kept, "{id}");
        assert_eq!(
            q.events_after(id, 0, 10).await.unwrap().len(),
            usize::from(kept),
            "{id}"
        );
        let thread = format!("t{}", &id[1..]);
        assert_eq!(
            q.runs_of_thread(&thread).await.unwrap().len(),
            usize::from(kept)
        );
    }
    assert_eq!(
        q.get("waiting").await.unwrap().unwrap().status,
        RunStatus::Pending
    );
}
