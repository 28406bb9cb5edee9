//! The shared conformance suite of [`RunQueue`] implementations: one `pub async fn` per
//! behaviour, run by every implementation with
//! [`run_queue_conformance!`](crate::run_queue_conformance).
//!
//! ```text
//! async fn make(options: QueueOptions) -> RunQueueFixture {
//!     let url = /* a fresh, empty database, schema or file */;
//!     let open = move || MyRunQueue::connect(url).lease(options.lease).max_attempts(options.max_attempts);
//!     RunQueueFixture::new(open().await, open().await, move || Box::pin(async move { Arc::new(open().await) as _ }))
//! }
//! stategraph_conformance::run_queue_conformance!(make);
//! ```
//!
//! Each case asks for a fresh, empty queue, with two handles on it (as two processes have)
//! and a way to open a third later (as a process that starts while the others work).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod events;
mod leases;
mod lifecycle;
mod notify;
mod records;
mod strategies;
mod threads;

pub use events::*;
pub use leases::*;
pub use lifecycle::*;
pub use notify::*;
pub use records::*;
pub use strategies::*;
pub use threads::*;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value as Json, json};

use stategraph_runs::*;

/// What a case needs of its queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueOptions {
    /// The lease a claim or heartbeat grants.
    pub lease: Duration,
    /// How many claims a run gets.
    pub max_attempts: u32,
}

impl Default for QueueOptions {
    fn default() -> Self {
        Self {
            lease: DEFAULT_LEASE,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
        }
    }
}

/// Opens another handle on a fixture's queue.
type Reopen =
    Box<dyn Fn() -> Pin<Box<dyn Future<Output = Arc<dyn RunQueue>> + Send>> + Send + Sync>;

/// A queue under test: two handles on it (as two processes have), a way to open another
/// (as a process that starts later), plus anything that must live as long as they do.
pub struct RunQueueFixture {
    queue: Arc<dyn RunQueue>,
    other: Arc<dyn RunQueue>,
    reopen: Reopen,
    _guard: Option<Box<dyn std::any::Any + Send>>,
}

impl RunQueueFixture {
    /// A fixture around `queue`, `other` (a second handle on the same queue, with its own
    /// connections where the implementation has any), and `reopen`, which opens one more as
    /// a process that starts now would (setup included).
    pub fn new<F, Fut>(
        queue: impl RunQueue + 'static,
        other: impl RunQueue + 'static,
        reopen: F,
    ) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Arc<dyn RunQueue>> + Send + 'static,
    {
        Self {
            queue: Arc::new(queue),
            other: Arc::new(other),
            reopen: Box::new(move || Box::pin(reopen())),
            _guard: None,
        }
    }

    /// Keeps `guard` alive until the fixture is dropped.
    pub fn with_guard(mut self, guard: impl std::any::Any + Send) -> Self {
        self._guard = Some(Box::new(guard));
        self
    }

    /// The queue.
    pub fn queue(&self) -> &Arc<dyn RunQueue> {
        &self.queue
    }

    /// The second handle on it.
    pub fn other(&self) -> &Arc<dyn RunQueue> {
        &self.other
    }

    /// A new handle on it, opened now.
    pub async fn reopen(&self) -> Arc<dyn RunQueue> {
        (self.reopen)().await
    }
}

/// How cases get queues: the implementation's factory, boxed.
pub type MakeQueue<'a> =
    &'a (dyn Fn(QueueOptions) -> Pin<Box<dyn Future<Output = RunQueueFixture> + Send>> + Sync);

/// Expands to one `#[tokio::test]` per run queue conformance case, each calling
/// `$factory(options).await` for a fresh [`RunQueueFixture`].
#[macro_export]
macro_rules! run_queue_conformance {
    ($factory:path) => {
        $crate::__run_queue_conformance_cases!($factory;
            // lifecycle
            runs_lifecycle_and_fifo_per_thread, runs_refuse_bad_ids_and_statuses,
            runs_racing_workers_claim_each_run_once_in_order,
            runs_claim_at_enqueue_when_the_thread_is_free, runs_claim_a_given_run_in_its_turn,
            runs_delayed_run_waits_for_its_time, runs_finish_claims_the_next_run,
            // leases
            runs_expired_lease_is_taken_over, runs_heartbeats_keep_a_lease,
            runs_cancelled_run_whose_worker_died_is_interrupted,
            runs_released_run_waits_for_another_claim,
            runs_a_new_handle_leaves_runs_in_flight_alone,
            // strategies
            runs_reject_refuses_a_busy_thread, runs_interrupt_and_rollback_strategies,
            runs_request_cancel_outcomes, runs_concurrent_rejecting_enqueues_take_turns,
            // events
            runs_events_are_numbered_and_resumable, runs_finish_appends_the_last_events,
            runs_events_of_ended_runs_are_purged,
            // records
            runs_records_round_trip, runs_list_filters_orders_and_pages, runs_delete_a_run,
            runs_stats_count_pending_and_running,
            // threads
            runs_finish_settles_the_thread, runs_thread_state_is_set_only_when_idle,
            runs_delete_a_thread, runs_a_last_attempt_that_expires_fails_its_thread,
            // notifications and once-keys
            runs_notifications_announce_changes, runs_claim_once_gives_a_key_to_one_caller,
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __run_queue_conformance_cases {
    ($factory:path; $($case:ident),* $(,)?) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let make = |o| -> ::std::pin::Pin<Box<dyn ::std::future::Future<
                    Output = $crate::runs::RunQueueFixture> + Send>> {
                    Box::pin($factory(o))
                };
                $crate::runs::$case(&make).await;
            }
        )*
    };
}

/// The bound on any single wait for a notification.
const WAIT: Duration = Duration::from_secs(5);

/// Run `id` of `thread`, queued behind the thread's others, its input its id.
fn run(id: &str, thread: &str) -> NewRun {
    let mut kwargs = Object::new();
    kwargs.insert("input".into(), json!(id));
    NewRun::new(id, thread)
        .multitask(Multitask::Enqueue)
        .kwargs(kwargs)
}

/// A fresh queue with the default options.
async fn fresh(make: MakeQueue<'_>) -> RunQueueFixture {
    make(QueueOptions::default()).await
}

/// A fresh queue with a short lease.
async fn leased(make: MakeQueue<'_>, lease: Duration, max_attempts: u32) -> RunQueueFixture {
    make(QueueOptions {
        lease,
        max_attempts,
    })
    .await
}

async fn status(q: &dyn RunQueue, id: &str) -> Option<RunStatus> {
    q.get(id).await.unwrap().map(|r| r.status)
}

/// Claims the next run (or `id`) for `worker`: its id.
async fn claim(q: &dyn RunQueue, worker: &str, id: Option<&str>) -> Option<String> {
    q.claim(worker, id).await.unwrap().map(|r| r.run_id)
}

/// Ends `id` as `worker` with `status`: whether the worker held it.
async fn end(q: &dyn RunQueue, id: &str, worker: &str, status: RunStatus) -> bool {
    q.finish(RunEnd::new(id, worker, status))
        .await
        .unwrap()
        .ended
}

async fn event(q: &dyn RunQueue, id: &str, worker: &str, data: Json) -> Option<i64> {
    q.append_events(id, worker, &[("values".to_owned(), data)])
        .await
        .unwrap()
}

/// The live status of `thread`, as the queue knows it (`None`: it does not).
async fn thread_status(q: &dyn RunQueue, thread: &str) -> Option<ThreadStatus> {
    q.threads(&[thread.to_owned()])
        .await
        .unwrap()
        .into_iter()
        .next()
        .map(|t| t.status)
}

/// The ids of `runs`.
fn ids(runs: &[RunRow]) -> Vec<&str> {
    runs.iter().map(|r| r.run_id.as_str()).collect()
}

/// The next notification satisfying `wanted`, skipping others, within [`WAIT`].
async fn wait_for(
    n: &mut Notifications,
    what: &str,
    wanted: impl Fn(&Notification) -> bool,
) -> Notification {
    tokio::time::timeout(WAIT, async {
        loop {
            let got = n.recv().await.expect("the subscription ended");
            if wanted(&got) {
                return got;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {what} notification within {WAIT:?}"))
}
