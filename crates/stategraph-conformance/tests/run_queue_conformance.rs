//! The in-memory run queue passes the shared run queue conformance suite.

use std::sync::Arc;

use stategraph_conformance::runs::{QueueOptions, RunQueueFixture};
use stategraph_runs::{InMemoryRunQueue, RunQueue};

async fn make(options: QueueOptions) -> RunQueueFixture {
    let queue = InMemoryRunQueue::new()
        .lease(options.lease)
        .max_attempts(options.max_attempts);
    // Clones share the queue, as other handles would.
    let again = queue.clone();
    RunQueueFixture::new(queue.clone(), queue, move || {
        let again = again.clone();
        async move { Arc::new(again) as Arc<dyn RunQueue> }
    })
}

stategraph_conformance::run_queue_conformance!(make);
