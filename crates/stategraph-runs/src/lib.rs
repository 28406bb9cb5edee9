//! The run queue of an Agent Server: the one owner of its runs and of what they leave their
//! threads with — which run of a thread goes next, who executes it (a lease kept alive by
//! heartbeats), how it is asked to stop, what it streamed, how it ended — behind
//! [`RunQueue`] (with [`RunEvents`] and [`OnceKeys`]) and several implementations:
//! [`InMemoryRunQueue`] (one process), `stategraph_sqlite::SqliteRunQueue` (every process on
//! one SQLite file) and `stategraph_postgres::PostgresRunQueue` (every process on one
//! database). Each passes the shared conformance suite (`run_queue_conformance!` of
//! `stategraph-conformance`).
//!
//! The rules every implementation keeps:
//! - **Runs are rows of the queue.** A run's record (LangGraph's `run_id`, `thread_id`,
//!   `assistant_id`, `status`, `metadata`, `kwargs`, `multitask_strategy`, `created_at`,
//!   `updated_at`) is a [`RunRow`], listed and read through the queue ([`RunQueue::list`]),
//!   kept until it is deleted (with its thread, say).
//! - **FIFO per thread, one running run per thread.** A worker claims the oldest claimable
//!   pending run whose thread has no running run and no older claimable pending run; a run
//!   enqueued with a [`delay`](NewRun::delay) is claimable from its `created_at` on.
//! - **Multitask strategies** ([`Multitask`]) are applied at enqueue, atomically with it:
//!   `reject` refuses a run on a busy thread, `enqueue` queues it, `interrupt` / `rollback`
//!   end the thread's pending runs and ask its running run to stop.
//! - **Threads' states change with their runs.** A thread is `busy` while one of its runs is
//!   pending or running; otherwise it reads as the [`ThreadState`] its last run left, written
//!   in the same step as that run's end ([`RunEnd::thread`]).
//! - **Leases.** A claim holds the run until it finishes, its worker stops heartbeating (the
//!   run goes back to pending for another worker, or to `error` after its last attempt), or
//!   it is given back ([`RunEnd::released`]); only the lease holder appends events or ends
//!   the run.
//! - **Events** are numbered per run from 1 and readable from any number (joiners,
//!   `Last-Event-ID`) until they are purged ([`Deletion::EventsEndedBefore`]).
//! - **Fencing** (where a saver can check it): [`RunQueue::fence`] gives the lease as a
//!   condition on the run's checkpoint writes, so a worker that stalled past its lease cannot
//!   write once another took the run over.
//! - **Notifications** ([`Notification`]) announce changes after they happened; they are a
//!   wake-up, not the truth: after a lost subscription, read the queue again.
//!
//! ```
//! use stategraph_runs::{
//!     InMemoryRunQueue, Multitask, NewRun, RunEnd, RunEvents, RunQueue, RunStatus,
//! };
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> stategraph_checkpoint::Result<()> {
//! let queue = InMemoryRunQueue::new();
//! queue
//!     .enqueue(NewRun::new("run-1", "thread-1").multitask(Multitask::Enqueue))
//!     .await?;
//! let run = queue.claim("worker-1", None).await?.expect("a pending run");
//! queue.append_events(&run.run_id, "worker-1", &[("values".into(), json!({"n": 1}))]).await?;
//! assert!(queue.heartbeat(&run.run_id, "worker-1").await?.held);
//! queue.finish(RunEnd::new(&run.run_id, "worker-1", RunStatus::Success)).await?;
//! assert_eq!(queue.events_after("run-1", 0, 10).await?[0].seq, 1);
//! assert_eq!(queue.get("run-1").await?.map(|r| r.status), Some(RunStatus::Success));
//! # Ok(()) }
//! ```

mod end;
mod fence;
mod memory;
mod notify;
mod queue;
mod run;
mod status;

use std::time::Duration;

use serde_json::Value as Json;

use stategraph_checkpoint::{Error, Result};

pub use end::{Finished, RunEnd, ThreadEnd, ThreadRow, ThreadState};
pub use fence::{DatabaseId, FencingSaver, RunFence};
pub use memory::InMemoryRunQueue;
pub use notify::{Notification, Notifications};
pub use queue::{Deletion, OnceKeys, QueueStats, RunEvent, RunEvents, RunQueue};
pub use run::{CancelOutcome, Enqueued, Expired, Lease, NewRun, Object, RunQuery, RunRow};
pub use status::{CancelAction, Multitask, RunStatus, ThreadStatus};

/// The lease a claim or heartbeat grants unless a queue is configured otherwise.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// How many claims a run gets unless a queue is configured otherwise.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;

/// How long a key taken by [`OnceKeys::claim_once`] is remembered at least; a key claimed
/// again after that may be new again.
pub const CLAIM_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// The longest run or thread id a queue accepts, in bytes.
pub const MAX_ID_LEN: usize = 1024;

/// Refuses an empty or over-long id (`what` names it in the error).
pub fn check_id(what: &str, id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(Error::invalid(what, "is empty"));
    }
    if id.len() > MAX_ID_LEN {
        return Err(Error::invalid(
            what,
            format!(
                "is {} bytes long, at most {MAX_ID_LEN} are allowed",
                id.len()
            ),
        ));
    }
    Ok(())
}

/// The error of enqueueing run `run_id` with [`Multitask::Reject`] on `thread_id`, busy with
/// `busy` (`status`): the same words from every implementation.
pub fn rejected(thread_id: &str, run_id: &str, busy: &str, status: RunStatus) -> Error {
    Error::Conflict {
        message: format!(
            "thread `{thread_id}` is busy with run `{busy}` ({status}); run `{run_id}` was \
             rejected (multitask strategy `reject`)"
        ),
    }
}

/// The error of enqueueing a run whose id is already in the queue.
pub fn duplicate(run_id: &str) -> Error {
    Error::Conflict {
        message: format!("run `{run_id}` is already in the queue"),
    }
}

/// The error of finishing a run with a status that neither ends it nor gives it back.
pub fn not_final(status: RunStatus) -> Error {
    Error::invalid(
        "run status",
        format!(
            "a run finishes with a final status (or `pending`, to give it back), not `{status}`"
        ),
    )
}

/// The error a run that expired on its last attempt is left with.
pub fn lease_expired_error(attempt: u32, max_attempts: u32) -> Json {
    serde_json::json!({
        "error": "LeaseExpired",
        "message": format!("the lease of attempt {attempt} of {max_attempts} ran out"),
    })
}
