//! [`SqliteRunQueue`]: the run queue of every process on one SQLite file, in the file that
//! holds their checkpoints. Each file holds what its name says: `config.rs` (opening),
//! `schema.rs` (tables and migrations), `records.rs` (rows: decoding, listing, counting),
//! `enqueue.rs` (strategies, stop requests), `claim.rs` (claims, leases, keys taken once),
//! `finish.rs` (ends), `events.rs`, `threads.rs`, `notify.rs` (notifications across
//! processes).

mod claim;
mod config;
mod enqueue;
mod events;
mod finish;
mod notify;
mod records;
mod schema;
mod threads;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use rusqlite::Connection;
use serde_json::Value as Json;
use stategraph_checkpoint::{Error, Result};
use stategraph_runs::{
    CancelAction, CancelOutcome, Deletion, Enqueued, Expired, Finished, Lease, NewRun,
    Notification, Notifications, OnceKeys, QueueStats, RunEnd, RunEvent, RunEvents, RunFence,
    RunQuery, RunQueue, RunRow, ThreadRow, ThreadState, check_id,
};

use crate::error::join;
use crate::pool::Pool;

pub use config::SqliteRunQueueConfig;

/// The queue's table of runs, as SQL names it (what a [`RunFence`] names).
pub(crate) const RUNS_TABLE: &str = "stategraph_runs";

/// How many `claim_once` calls of a handle pass between two sweeps of the keys older than
/// [`CLAIM_RETENTION`](stategraph_runs::CLAIM_RETENTION) (the first call sweeps).
const CLAIM_SWEEP: u64 = 256;

/// A [`RunQueue`] in a SQLite file, shared by every process that opens the file: its runs,
/// their events and what they leave their threads with, in the file that holds the
/// checkpoints, with the semantics of
/// [`InMemoryRunQueue`](stategraph_runs::InMemoryRunQueue) (the shared run queue
/// conformance suite checks them). Open one with [`SqliteRunQueue::connect`] or, for every
/// setting, [`SqliteRunQueueConfig`]. Cheap to clone: clones share the handle (its
/// connections and its notification socket).
///
/// - **Storage.** Tables of its own next to LangGraph's (never touching those):
///   `stategraph_runs` (a row a run; JSON as text; times in microseconds since the Unix
///   epoch, the processes sharing the host's clock), `stategraph_run_events`,
///   `stategraph_run_threads` (the state each thread's last run left), `stategraph_run_claims`
///   (keys taken once) and `stategraph_run_listeners` (who hears notifications), created by
///   versioned migrations recorded in `stategraph_run_migrations`.
/// - **Transactions.** Every change is one write on the file's writer connection, which the
///   process's saver and store on the file share: a savepoint in a `BEGIN IMMEDIATE` group
///   transaction, committed before the call returns. SQLite's file lock makes the processes
///   on the file take turns, so a claim, an enqueue with its multitask strategy, or an end
///   with its events, output, thread state and next claim is atomic across them. Idle
///   workers' claims and periodic upkeep look on a read connection first, and take the
///   write lock only when there is something to do.
/// - **Notifications** cross processes without polling: a handle announces its own changes
///   to its own subscribers directly, and to the other handles with subscribers (in this
///   process or others) by Unix datagrams — on Linux in the abstract socket namespace, on
///   other Unix systems through socket files under the temporary directory; elsewhere a
///   handle's subscribers hear its own changes only. They are a wake-up, not the truth: a
///   lost datagram is tolerated.
/// - **Fencing.** [`RunQueue::fence`] names the file and `stategraph_runs`; a
///   [`SqliteSaver`](crate::SqliteSaver) on the same file then checks, in each checkpoint
///   write's own transaction, that the worker still holds the run
///   ([`FencingSaver::fenced`](stategraph_runs::FencingSaver::fenced)).
///
/// ```
/// use stategraph_runs::{NewRun, RunEnd, RunQueue, RunStatus};
/// use stategraph_sqlite::SqliteRunQueue;
///
/// # tokio::runtime::Builder::new_multi_thread().build().unwrap().block_on(async {
/// # let dir = tempfile::tempdir().unwrap();
/// # let url = format!("sqlite:{}", dir.path().join("runs.sqlite").display());
/// let queue = SqliteRunQueue::connect(&url).await?; // e.g. "sqlite:threads.sqlite"
/// queue.enqueue(NewRun::new("run-1", "thread-1")).await?;
/// let run = queue.claim("worker-1", None).await?.expect("a pending run");
/// queue.finish(RunEnd::new(&run.run_id, "worker-1", RunStatus::Success)).await?;
/// assert_eq!(queue.get("run-1").await?.map(|r| r.status), Some(RunStatus::Success));
/// # Ok::<(), stategraph_checkpoint::Error>(()) }).unwrap();
/// ```
#[derive(Clone)]
pub struct SqliteRunQueue {
    shared: Arc<Shared>,
}

/// What the clones of a handle share.
struct Shared {
    pool: Arc<Pool>,
    lease: Duration,
    max_attempts: u32,
    hub: notify::Hub,
    /// `claim_once` calls made (for the sweeps of old keys).
    claims: AtomicU64,
}

impl fmt::Debug for SqliteRunQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteRunQueue")
            .field("location", &self.shared.pool.config().location)
            .field("lease", &self.shared.lease)
            .field("max_attempts", &self.shared.max_attempts)
            .finish_non_exhaustive()
    }
}

/// A change in progress, inside a write transaction: its connection, its time, the lease it
/// grants, and the notifications it makes once committed.
pub(super) struct Change<'c> {
    conn: &'c Connection,
    /// The time of the change, in microseconds since the Unix epoch.
    now: i64,
    /// The lease, in microseconds.
    lease: i64,
    notes: Vec<Notification>,
}

impl Change<'_> {
    fn note(&mut self, note: Notification) {
        self.notes.push(note);
    }
}

/// `t` in microseconds since the Unix epoch (0 before it, saturating far after it).
pub(crate) fn micros(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).map_or(0, micros_of)
}

/// `d` in microseconds (saturating).
fn micros_of(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// The time `us` microseconds after the Unix epoch.
fn time(us: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_micros(u64::try_from(us).unwrap_or(0))
}

fn no_preparation(_: &Connection) -> std::result::Result<(), crate::pool::OpenError> {
    Ok(())
}

impl SqliteRunQueue {
    /// Opens the queue in the database a `sqlite:` URL names, creating the file and the
    /// queue's tables as needed: shorthand for
    /// [`SqliteRunQueueConfig::from_url`]`(url)?.`[`connect`](SqliteRunQueueConfig::connect)`()`.
    pub async fn connect(url: &str) -> Result<Self> {
        SqliteRunQueueConfig::from_url(url)?.connect().await
    }

    /// Runs the change `f` in a write transaction (on the blocking pool), then announces the
    /// notifications it made, once committed, to this handle's subscribers and to the
    /// listeners registered when it was made.
    async fn change<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Change<'_>) -> Result<T> + Send + 'static,
    {
        let shared = Arc::clone(&self.shared);
        let arrival = shared.pool.arrival();
        tokio::task::spawn_blocking(move || {
            let lease = micros_of(shared.lease);
            let (out, notes, listeners) = shared.pool.write_arrived(arrival, |conn| {
                let mut change = Change {
                    conn,
                    now: micros(SystemTime::now()),
                    lease,
                    notes: Vec::new(),
                };
                let out = f(&mut change)?;
                let listeners = match change.notes.is_empty() {
                    true => Vec::new(),
                    false => notify::listeners(conn)?,
                };
                Ok::<_, Error>((out, change.notes, listeners))
            })?;
            shared.hub.announce(&shared.pool, &notes, &listeners);
            Ok(out)
        })
        .await
        .map_err(join)?
    }

    /// Runs the read `f` on a reader connection, on the blocking pool.
    async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let shared = Arc::clone(&self.shared);
        tokio::task::spawn_blocking(move || shared.pool.read(|conn| f(conn)))
            .await
            .map_err(join)?
    }
}

#[async_trait]
impl RunEvents for SqliteRunQueue {
    async fn append_events(
        &self,
        run_id: &str,
        worker: &str,
        events: &[(String, Json)],
    ) -> Result<Option<i64>> {
        let (run_id, worker, events) =
            (run_id.to_owned(), worker.to_owned(), events::encode(events));
        self.change(move |c| c.append(&run_id, &worker, &events))
            .await
    }

    async fn events_after(
        &self,
        run_id: &str,
        after_seq: i64,
        limit: u32,
    ) -> Result<Vec<RunEvent>> {
        let run_id = run_id.to_owned();
        self.read(move |conn| events::after(conn, &run_id, after_seq, limit))
            .await
    }
}

#[async_trait]
impl OnceKeys for SqliteRunQueue {
    async fn claim_once(&self, key: &str) -> Result<bool> {
        check_id("claim key", key)?;
        let sweep = self
            .shared
            .claims
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(CLAIM_SWEEP);
        let key = key.to_owned();
        self.change(move |c| c.claim_once(&key, sweep)).await
    }
}

#[async_trait]
impl RunQueue for SqliteRunQueue {
    fn lease(&self) -> Duration {
        self.shared.lease
    }

    async fn enqueue(&self, run: NewRun) -> Result<Enqueued> {
        run.check()?;
        let max_attempts = self.shared.max_attempts;
        let encoded = enqueue::Encoded::new(&run)?;
        self.change(move |c| c.enqueue(&run, &encoded, max_attempts))
            .await
    }

    async fn claim(&self, worker: &str, run_id: Option<&str>) -> Result<Option<RunRow>> {
        let (worker, run_id) = (worker.to_owned(), run_id.map(str::to_owned));
        // Idle workers poll: look before taking the file's write lock.
        let only = run_id.clone();
        if !self
            .read(move |conn| claim::any_claimable(conn, only.as_deref()))
            .await?
        {
            return Ok(None);
        }
        self.change(move |c| c.claim(&worker, run_id.as_deref()))
            .await
    }

    async fn heartbeat(&self, run_id: &str, worker: &str) -> Result<Lease> {
        let (run_id, worker) = (run_id.to_owned(), worker.to_owned());
        self.change(move |c| c.heartbeat(&run_id, &worker)).await
    }

    async fn finish(&self, end: RunEnd<'_>) -> Result<Finished> {
        end.check()?;
        let end = finish::Ending::new(&end)?;
        self.change(move |c| c.finish(&end)).await
    }

    async fn requeue_expired(&self) -> Result<Vec<Expired>> {
        // Every process calls it periodically: look before taking the write lock.
        if !self.read(claim::any_expired).await? {
            return Ok(Vec::new());
        }
        self.change(|c| c.requeue_expired()).await
    }

    async fn request_cancel(
        &self,
        run_id: &str,
        action: CancelAction,
        reason: &str,
    ) -> Result<CancelOutcome> {
        let (run_id, reason) = (run_id.to_owned(), reason.to_owned());
        self.change(move |c| c.request_cancel(&run_id, action, &reason))
            .await
    }

    async fn list(&self, query: &RunQuery) -> Result<Vec<RunRow>> {
        let query = query.clone();
        self.read(move |conn| records::list(conn, &query)).await
    }

    async fn get(&self, run_id: &str) -> Result<Option<RunRow>> {
        let run_id = run_id.to_owned();
        self.read(move |conn| records::get(conn, &run_id)).await
    }

    async fn delete(&self, what: Deletion<'_>) -> Result<u64> {
        match what {
            Deletion::Run(id) => {
                let id = id.to_owned();
                self.change(move |c| c.delete_run(&id)).await
            }
            Deletion::Thread(id) => {
                let id = id.to_owned();
                self.change(move |c| c.delete_thread(&id)).await
            }
            Deletion::EventsEndedBefore {
                ended_before,
                limit,
            } => {
                let before = micros(ended_before);
                self.change(move |c| c.purge(before, limit)).await
            }
            _ => Err(Error::Unsupported {
                operation: "this deletion",
                backend: crate::error::BACKEND,
            }),
        }
    }

    async fn threads(&self, thread_ids: &[String]) -> Result<Vec<ThreadRow>> {
        let ids = serde_json::to_string(thread_ids)
            .map_err(|e| Error::invalid("thread ids", e.to_string()))?;
        self.read(move |conn| threads::read(conn, &ids)).await
    }

    async fn set_thread(
        &self,
        thread_id: &str,
        state: &ThreadState,
        if_idle: bool,
    ) -> Result<bool> {
        check_id("thread id", thread_id)?;
        let (thread_id, state) = (thread_id.to_owned(), threads::Encoded::new(state));
        self.change(move |c| c.set_thread(&thread_id, &state, if_idle))
            .await
    }

    async fn stats(&self) -> Result<QueueStats> {
        self.read(records::stats).await
    }

    async fn subscribe(&self) -> Result<Notifications> {
        notify::subscribe(&self.shared).await
    }

    /// The fence of the run's row in this database's `stategraph_runs`, for a
    /// [`SqliteSaver`](crate::SqliteSaver) built from the same
    /// [`SqliteDatabase`](crate::SqliteDatabase).
    fn fence(&self, run_id: &str, worker: &str) -> Option<RunFence> {
        Some(RunFence::new(
            self.shared.pool.id(),
            RUNS_TABLE,
            run_id,
            worker,
        ))
    }
}
