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
