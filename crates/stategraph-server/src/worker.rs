//! This process's side of the [`RunQueue`]: worker loops that claim runs and execute them
//! with the one executor, the subscription that wakes them and delivers stop requests, the
//! requeuer that takes back runs whose lease ran out, and the readers that follow a run's
//! events from the queue's log wherever the run executes. Every backend goes through here:
//! the in-memory queue of one process as the Postgres queue of many.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Map as JsonMap, Value as Json_, json};
use stategraph_checkpoint::Error;
use stategraph_checkpoint::runs::{
    CancelAction, CancelOutcome, Notification, RunQueue, RunRow, RunStatus, ThreadStatus,
};
use stategraph_graph::RunConfig;
use tokio::sync::{Notify, mpsc};

use crate::app::{AppState, Cancel};
use crate::error::ApiError;
use crate::exec::Outcome;
use crate::executor::{Caller, execute};
use crate::graph::ServedGraph;
use crate::hub::StreamEvent;
use crate::records::{RunRecord, ThreadRecord, filter};

/// Worker loops per process unless [`ServerBuilder::workers`](crate::ServerBuilder::workers)
/// says otherwise: the reference server's `N_JOBS_PER_WORKER` default. A run spends most of
/// its time waiting on the database (and on models), so one process keeps several in flight.
pub const DEFAULT_WORKERS: usize = 10;

/// How long an idle worker waits for a notification before it looks at the queue again.
const POLL: Duration = Duration::from_millis(250);

/// A server's queue and its workers.
pub(crate) struct QueueSetup {
    pub(crate) queue: Arc<dyn RunQueue>,
    workers: usize,
    /// This process's worker names: `{prefix}-{index}`.
    prefix: String,
    started: AtomicBool,
    /// Counts the names handed out by [`caller_name`](Self::caller_name).
    names: std::sync::atomic::AtomicU64,
    /// Wakes one idle worker loop per notification of a run that may be claimed now (enqueued
    /// on an idle thread, requeued): one run, one claim per process, rather than every idle
    /// worker claiming at once (each claim that finds nothing is a statement and a commit of
    /// the queue's database). A run's end wakes nobody elsewhere: the worker loop that ended
    /// it claims again by itself, and a caller that executed one wakes a loop of its own
    /// process ([`QueueSetup::ran`]). Idle loops also look at the queue every [`POLL`],
    /// one loop per process at a time.
    pub(crate) wake: Arc<Notify>,
    /// Rung for every task waiting for its run's turn on a thread, when a run finished (or
    /// the subscription was renewed).
    pub(crate) turns: Arc<Notify>,
    /// How many of the worker loops execute a run now.
    active: AtomicUsize,
}

impl QueueSetup {
    /// `workers` worker loops on `queue`, named after the host, the process and a random id.
    pub(crate) fn new(queue: Arc<dyn RunQueue>, workers: usize) -> Self {
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "host".into());
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        let prefix = format!(
            "{host}-{}-{}",
            std::process::id(),
            nonce.get(..8).unwrap_or(&nonce)
        );
        Self {
            queue,
            workers,
            prefix,
            started: AtomicBool::new(false),
            names: std::sync::atomic::AtomicU64::new(0),
            wake: Arc::new(Notify::new()),
            turns: Arc::new(Notify::new()),
            active: AtomicUsize::new(0),
        }
    }

    /// This process's worker loops, and how many of them execute a run now.
    pub(crate) fn workers_in_use(&self) -> (usize, usize) {
        (self.workers, self.active.load(Ordering::Relaxed))
    }

    /// A run this process executed outside its worker loops (for a caller) ended: its thread's
    /// next run may be claimable now, and no loop claims after it by itself, so one idle loop
    /// looks.
    pub(crate) fn ran(&self) {
        self.wake.notify_one();
    }

    /// A worker name of this process no other task has: for a run a caller follows, claimed
    /// by the task that received it.
    pub(crate) fn caller_name(&self) -> String {
        let n = self.names.fetch_add(1, Ordering::Relaxed);
        format!("{}-caller-{n}", self.prefix)
    }
}

/// The queue's error as an API error: a conflict is LangGraph's 409 of a busy thread.
pub(crate) fn api_error(e: Error) -> ApiError {
    match e {
        Error::Conflict { .. } => ApiError::conflict(
            "Thread is already running a task. Wait for it to finish or choose a different \
             multitask strategy.",
        ),
        e => ApiError::from(e),
    }
}

/// The server's run queue.
pub(crate) fn queue_of(state: &AppState) -> &Arc<dyn RunQueue> {
    &state.queue.queue
}

/// How often a follower looks for a queued run's new events.
const FOLLOW_POLL: Duration = Duration::from_millis(50);

/// What [`follow_events`] saw: the last `values`, an `error` event, and the run's row once
/// it was over (`None` inside: deleted).
pub(crate) struct FollowEnd {
    values: Json_,
    error: Option<Json_>,
    over: Option<Option<RunRow>>,
}

/// Sends a queued run's events after sequence `after` from the queue's log to `tx`, in
/// order, until the run is over and its last event was sent (a receiver that went away does
/// not stop the reading; the run goes on regardless).
pub(crate) async fn follow_events(
    queue: &dyn RunQueue,
    run_id: &str,
    mut after: i64,
    tx: &mpsc::Sender<StreamEvent>,
) -> FollowEnd {
    const BATCH: u32 = 256;
    let mut values = Json_::Object(JsonMap::new());
    let mut error = None;
    // Set once the run is over (with its row, if it still has one): one more read, then stop.
    let mut over: Option<Option<RunRow>> = None;
    loop {
        let batch = match queue.events_after(run_id, after, BATCH).await {
            Ok(b) => b,
            Err(_) => {
                tokio::time::sleep(FOLLOW_POLL).await;
                continue;
            }
        };
        let full = u32::try_from(batch.len()).unwrap_or(u32::MAX) >= BATCH;
        for e in batch {
            after = e.seq;
            match e.event.as_str() {
                "values" => values = e.data.clone(),
                "error" => error = Some(e.data.clone()),
                _ => {}
            }
            let seq = u64::try_from(e.seq).unwrap_or_default();
            let _ = tx
                .send(StreamEvent::new(run_id, seq, e.event, e.data))
                .await;
        }
        if full {
            continue;
        }
        if over.is_some() {
            break;
        }
        match queue.get(run_id).await {
            // Over: read the events once more (the last may have come since), then stop.
            Ok(Some(row)) if row.status.is_final() => over = Some(Some(row)),
            Ok(None) => over = Some(None),
            _ => tokio::time::sleep(FOLLOW_POLL).await,
        }
    }
    FollowEnd {
        values,
        error,
        over,
    }
}

/// A joiner of a queued run (`GET …/runs/{run_id}/stream`), in whichever process it runs:
/// its events after `Last-Event-ID`'s sequence (`-1`: all of them), or from now on without
/// one (nothing for a run that is over), and whether they carry ids (the run was created with
/// `stream_resumable: true`). The ids are the queue's sequence numbers, the same on every
/// process, so a client may reconnect to any of them.
pub(crate) async fn join(
    state: &AppState,
    run_id: &str,
    last_event_id: Option<&str>,
) -> Result<(mpsc::Receiver<StreamEvent>, bool), ApiError> {
    let queue = Arc::clone(queue_of(state));
    let (tx, rx) = mpsc::channel(256);
    let Some(row) = queue.get(run_id).await.map_err(api_error)? else {
        return Ok((rx, false));
    };
    let with_id = row
        .payload
        .pointer("/body/stream_resumable")
        .and_then(Json_::as_bool)
        .unwrap_or(false);
    // As a hub, the log of a run that is not resumable ignores `Last-Event-ID`.
    let last_event_id = last_event_id.filter(|_| with_id);
    let after = match last_event_id {
        Some("-1") => 0,
        // Ids are `{run_ms}-{seq}`; one that does not parse replays nothing already sent.
        Some(id) => id
            .rsplit_once('-')
            .and_then(|(_, seq)| seq.parse().ok())
            .unwrap_or(row.events),
        None if row.status.is_final() => return Ok((rx, with_id)),
        None => row.events,
    };
    let run_id = run_id.to_owned();
    tokio::spawn(async move {
        follow_events(queue.as_ref(), &run_id, after, &tx).await;
    });
    Ok((rx, with_id))
}

/// Follows a run executed by another task (wherever it runs) for the caller of `runs/wait`
/// or `runs/stream`: its events after number `after` from the queue's log, in order, then
/// its outcome once it is over.
pub(crate) async fn follow_run(
    queue: Arc<dyn RunQueue>,
    run_id: String,
    thread_id: String,
    graph: Arc<dyn ServedGraph>,
    after: i64,
    caller: Caller,
) {
    let end = follow_events(queue.as_ref(), &run_id, after, &caller.events).await;
    let (values, mut error, over) = (end.values, end.error, end.over);
    if error.is_none()
        && let Some(Some(row)) = &over
        && row.status == RunStatus::Error
    {
        error = Some(row.error.clone().unwrap_or_else(
            || json!({ "error": "RuntimeError", "message": "the run's workers were lost" }),
        ));
    }
    let interrupts = graph
        .get_state(&RunConfig::thread(&thread_id), false)
        .await
        .map(|s| {
            s.interrupts
                .iter()
                .map(crate::wire::interrupt_output)
                .collect()
        })
        .unwrap_or_default();
    let Caller { events, done } = caller;
    drop(events);
    let _ = done.send(Outcome {
        values,
        interrupts,
        error,
    });
}

/// Gives run records their live status: a run's record is written when the run is created
/// (`pending`) and when it ends, so while it is in flight its status is the queue's
/// (`running` once a worker has it). One read of the queue per thread with runs in flight.
pub(crate) async fn live_runs(state: &AppState, runs: &mut [RunRecord]) -> Result<(), ApiError> {
    let threads: std::collections::BTreeSet<String> = runs
        .iter()
        .filter(|r| r.in_flight())
        .map(|r| r.thread_id.clone())
        .collect();
    for thread_id in threads {
        let rows = queue_of(state)
            .runs_of_thread(&thread_id)
            .await
            .map_err(api_error)?;
        let of_thread = runs
            .iter_mut()
            .filter(|r| r.in_flight() && r.thread_id == thread_id);
        for run in of_thread {
            if let Some(row) = rows.iter().find(|row| row.run_id == run.run_id) {
                run.status = row.status;
            }
        }
    }
    Ok(())
}

/// Rewrites the status of run `run_id`'s record, if it has one.
pub(crate) async fn set_run_status(state: &AppState, run_id: &str, status: RunStatus) {
    if let Ok(Some(mut run)) = state.records.get::<RunRecord>(run_id).await {
        run.mark(status);
        let _ = state.records.put(&run).await;
    }
}

/// A stop request from the queue, with the reason its maker gave (or, without one, the
/// action's name).
pub(crate) fn cancel_of(action: CancelAction, reason: &str) -> Cancel {
    Cancel {
        action,
        reason: if reason.is_empty() {
            format!("{} requested", action.as_str())
        } else {
            reason.to_owned()
        },
    }
}

/// What a cancel request through the queue did.
pub(crate) enum Cancelled {
    /// The queue does not have the run (a stateless run of this process): cancel it here.
    NotQueued,
    /// It was pending and ended at once.
    Ended,
    /// It is running; its worker stops it.
    Signalled,
    /// It had already finished.
    Finished,
}

/// Asks the queued run `run_id` to stop as `cancel` says (its reason goes with it to the
/// run's worker, wherever it runs); a pending run's record is final at once.
pub(crate) async fn request_cancel(
    state: &AppState,
    run_id: &str,
    cancel: &Cancel,
) -> Result<Cancelled, ApiError> {
    let queue = queue_of(state);
    let action = cancel.action;
    Ok(
        match queue
            .request_cancel(run_id, action, &cancel.reason)
            .await
            .map_err(api_error)?
        {
            CancelOutcome::Ended => {
                if action == CancelAction::Rollback {
                    let _ = state.records.delete::<RunRecord>(run_id).await;
                } else {
                    set_run_status(state, run_id, RunStatus::Interrupted).await;
                }
                Cancelled::Ended
            }
            CancelOutcome::Signalled => {
                // A run of this process stops at once, whether or not its notification comes
                // (this process's subscription may not be up yet, or may be renewing).
                let _ = state.cancel_run(run_id, cancel);
                Cancelled::Signalled
            }
            CancelOutcome::AlreadyFinished(_) => Cancelled::Finished,
            _ => Cancelled::NotQueued,
        },
    )
}

/// Waits up to `limit` (forever with `None`) for the queued run `run_id` to finish.
pub(crate) async fn settle(state: &AppState, run_id: &str, limit: Option<Duration>) {
    let queue = queue_of(state);
    let deadline = limit.map(|l| Instant::now() + l);
    loop {
        match queue.get(run_id).await {
            Ok(Some(row)) if !row.status.is_final() => {}
            _ => return,
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts the server's worker loops, its listener and its requeuer (once; nothing without a
/// queue).
pub(crate) fn spawn_workers(state: &Arc<AppState>) {
    let setup = &state.queue;
    if setup.started.swap(true, Ordering::SeqCst) {
        return;
    }
    crate::prometheus::spawn_upkeep();
    tokio::spawn(listen_loop(Arc::clone(state)));
    tokio::spawn(requeue_loop(Arc::clone(state)));
    tokio::spawn(poll_loop(Arc::clone(state)));
    for i in 0..setup.workers {
        let worker = format!("{}-{i}", setup.prefix);
        tokio::spawn(worker_loop(Arc::clone(state), worker));
    }
}

/// Turns the queue's notifications into wake-ups of idle workers and cancels of local runs;
/// reconnects when the listener's connection drops.
async fn listen_loop(state: Arc<AppState>) {
    let queue = Arc::clone(queue_of(&state));
    let (wake, turns) = (&state.queue.wake, &state.queue.turns);
    loop {
        if let Ok(mut listener) = queue.subscribe().await {
            // What happened while no listener was connected: look again, everyone, and
            // stop the runs of this process that were asked to stop meanwhile.
            wake.notify_waiters();
            turns.notify_waiters();
            cancels_missed(&state, queue.as_ref()).await;
            while let Some(n) = listener.recv().await {
                match n {
                    Notification::Cancel {
                        run_id,
                        action,
                        reason,
                    } => {
                        let _ = state.cancel_run(&run_id, &cancel_of(action, &reason));
                    }
                    Notification::Enqueued {
                        claimable: true, ..
                    }
                    | Notification::Requeued { .. } => {
                        wake.notify_one();
                    }
                    // The run's worker claims again by itself (a caller that executed a run
                    // wakes a worker loop of its own process): only tasks waiting for their
                    // run's turn look now.
                    Notification::Finished { .. } => {
                        turns.notify_waiters();
                    }
                    _ => {}
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Stops the runs executing in this process whose stop request the queue holds: a request
/// made while this process had no listener reached it by no notification (without this, the
/// run would see it only at its next heartbeat).
async fn cancels_missed(state: &AppState, queue: &dyn RunQueue) {
    for run_id in state.running_here() {
        if let Ok(Some(row)) = queue.get(&run_id).await
            && row.status == RunStatus::Running
            && let Some(action) = row.cancel
        {
            let _ = state.cancel_run(&run_id, &cancel_of(action, &row.cancel_reason));
        }
    }
}

/// Every [`POLL`], wakes one idle worker loop, if any, to look at the queue: what a lost
/// notification (or one that found every loop busy) left claimable is claimed within a poll,
/// at the cost of one claim per process, not one per idle loop.
async fn poll_loop(state: Arc<AppState>) {
    let mut every = tokio::time::interval(POLL);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let (workers, active) = state.queue.workers_in_use();
        if active < workers {
            state.queue.wake.notify_one();
        }
    }
}

/// Takes back runs whose lease ran out, every half lease; those it ends get final records.
async fn requeue_loop(state: Arc<AppState>) {
    let queue = Arc::clone(queue_of(&state));
    let every = (queue.lease() / 2).max(Duration::from_millis(20));
    loop {
        tokio::time::sleep(every).await;
        if let Ok(expired) = queue.requeue_expired().await {
            for run in expired.iter().filter(|r| r.status.is_final()) {
                set_run_status(&state, &run.run_id, run.status).await;
            }
        }
    }
}

/// Claims and executes runs, one at a time, as `worker`: the next run comes with the end of
/// the last one while there are runs to claim; then the loop waits to be woken.
async fn worker_loop(state: Arc<AppState>, worker: String) {
    let queue = Arc::clone(queue_of(&state));
    loop {
        // Registered before the claim, so that a notification during it is not missed.
        let woken = state.queue.wake.notified();
        match queue.claim(&worker).await {
            Ok(Some(claimed)) => {
                state.queue.active.fetch_add(1, Ordering::Relaxed);
                let mut next = Some(claimed);
                while let Some(claimed) = next {
                    next = execute(&state, claimed, Some(&worker), None).await;
                }
                state.queue.active.fetch_sub(1, Ordering::Relaxed);
            }
            Ok(None) => woken.await,
            Err(_) => tokio::time::sleep(POLL).await,
        }
    }
}

/// What a process that ended left behind: runs recorded `pending` or `running` that the queue
/// no longer has (an in-memory queue ends with its process) are recorded failed, those it has
/// finished get their final status, and threads recorded `busy` without a run in the queue
/// are idle again. Runs the queue still has are left to its workers (a shared queue hands
/// them to another process once their lease ran out).
pub(crate) async fn recover(state: &AppState) -> Result<(), ApiError> {
    let queue = queue_of(state);
    for status in [RunStatus::Running, RunStatus::Pending] {
        let left = state
            .records
            .search::<RunRecord>(filter("status", status.as_str()))
            .await?;
        for mut run in left {
            let new_status = match queue.get(&run.run_id).await.map_err(api_error)? {
                None => RunStatus::Error,
                Some(row) if row.status.is_final() => row.status,
                Some(_) => continue,
            };
            run.mark(new_status);
            state.records.put(&run).await?;
        }
    }
    let busy = queue.busy_threads().await.map_err(api_error)?;
    let stale = state
        .records
        .search::<ThreadRecord>(filter("status", ThreadStatus::Busy.as_str()))
        .await?;
    for mut thread in stale {
        if !busy.contains(&thread.thread_id) {
            thread.settle_idle();
            state.records.put(&thread).await?;
        }
    }
    Ok(())
}

/// Waits for a run that is waiting its turn on its thread (a waited or streamed run whose
/// thread was busy), for its caller: claims it as `worker` once it is next and executes it
/// here, or, if a worker (of any process) claimed it first, follows it from the queue's log.
pub(crate) async fn wait_turn(
    state: Arc<AppState>,
    run_id: String,
    thread_id: String,
    graph: Arc<dyn ServedGraph>,
    worker: String,
    caller: Caller,
) {
    let queue = Arc::clone(queue_of(&state));
    loop {
        let woken = state.queue.turns.notified();
        match queue.claim_run(&run_id, &worker).await {
            Ok(Some(claimed)) => {
                execute(&state, claimed, Some(&worker), Some(caller)).await;
                state.queue.ran();
                return;
            }
            Ok(None) => match queue.get(&run_id).await {
                // Another worker has it, or it is over (ended by a cancel, say): follow its
                // log (the caller already has its `metadata`).
                Ok(Some(row)) if row.status != RunStatus::Pending => break,
                Ok(None) => break,
                _ => {}
            },
            Err(_) => {}
        }
        let _ = tokio::time::timeout(POLL, woken).await;
    }
    follow_run(queue, run_id, thread_id, graph, 1, caller).await;
}
