//! Runs through a durable [`RunQueue`] (feature `postgres`): background runs on threads are
//! recorded and enqueued, and worker loops in every server process on the database claim them
//! (with a lease kept by heartbeats) and execute them with the in-process executor. A run
//! whose worker died is taken over by another worker, which carries on from the thread's last
//! checkpoint of that run (its pending writes keep the tasks that finished from running
//! again).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::{Map as JsonMap, Value as Json_, json};
use stategraph_checkpoint::{Error, now_iso};
use stategraph_graph::{RunConfig, StreamMode};
use stategraph_postgres::{
    CancelAction as QueueCancel, CancelOutcome, ClaimedRun, Multitask, NewRun, Notification,
    RunQueue, RunStatus,
};
use tokio::sync::{Notify, mpsc, oneshot, watch};

use crate::app::{AppState, Cancel, CancelAction};
use crate::error::ApiError;
use crate::exec::{
    Exec, Outcome, RunBody, Started, engine_config, execute, run_start, stream_modes,
};
use crate::graph::{RunStart, ServedGraph};
use crate::hub::{HubCloser, StreamEvent};
use crate::records::{Kind, field_str};

/// Worker loops per process unless [`ServerBuilder::workers`](crate::ServerBuilder::workers)
/// says otherwise.
pub(crate) const DEFAULT_WORKERS: usize = 2;

/// How long an idle worker waits for a notification before it looks at the queue again.
const POLL: Duration = Duration::from_millis(250);

/// A server's queue and its workers.
pub(crate) struct QueueSetup {
    queue: RunQueue,
    workers: usize,
    /// This process's worker names: `{prefix}-{index}`.
    prefix: String,
    started: AtomicBool,
}

impl QueueSetup {
    /// `workers` worker loops on `queue`, named after the host, the process and a random id.
    pub(crate) fn new(queue: RunQueue, workers: usize) -> Self {
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
        }
    }
}

/// The queue's error as an API error: a conflict is 409 as a busy thread is without a queue.
fn api_error(e: Error) -> ApiError {
    match e {
        Error::Conflict { .. } => ApiError::conflict(
            "Thread is already running a task. Wait for it to finish or choose a different \
             multitask strategy.",
        ),
        e => ApiError::from(e),
    }
}

fn queue_of(state: &AppState) -> Result<&RunQueue, ApiError> {
    state
        .queue
        .as_ref()
        .map(|q| &q.queue)
        .ok_or_else(|| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "no run queue"))
}

/// Records the background run `run` (`pending`) and enqueues it with `body` under its
/// multitask `strategy`; the runs the strategy ended are recorded `interrupted` (or deleted,
/// for `rollback`).
pub(crate) async fn enqueue(
    state: &AppState,
    run: Json_,
    thread_id: String,
    body: RunBody,
    strategy: crate::run_options::Multitask,
    follow: Option<Arc<dyn ServedGraph>>,
) -> Result<Started, ApiError> {
    use crate::run_options::Multitask as Strategy;
    let queue = queue_of(state)?;
    let multitask = match strategy {
        Strategy::Reject => Multitask::Reject,
        Strategy::Enqueue => Multitask::Enqueue,
        Strategy::Interrupt => Multitask::Interrupt,
        Strategy::Rollback => Multitask::Rollback,
    };
    let run_id = field_str(&run, "run_id").to_owned();
    let resumable = body.resumable();
    state.records.put(Kind::Run, &run_id, run.clone()).await?;
    let payload = json!({ "body": body, "run": run });
    let enqueued = match queue
        .enqueue(NewRun::new(&run_id, &thread_id, payload).multitask(multitask))
        .await
    {
        Ok(e) => e,
        Err(e) => {
            let _ = state.records.delete(Kind::Run, &run_id).await;
            return Err(api_error(e));
        }
    };
    for ended in &enqueued.ended {
        if multitask == Multitask::Rollback {
            let _ = state.records.delete(Kind::Run, ended).await;
        } else {
            set_run_status(state, ended, RunStatus::Interrupted).await;
        }
    }
    let (tx, events) = mpsc::channel(64);
    let (done_tx, done) = oneshot::channel();
    if let Some(graph) = follow {
        tokio::spawn(follow_run(
            queue.clone(),
            run_id,
            thread_id.clone(),
            graph,
            tx,
            done_tx,
        ));
    }
    Ok(Started {
        run,
        thread_id,
        stateful: true,
        events,
        resumable,
        done,
    })
}

/// How often a follower looks for a queued run's new events.
const FOLLOW_POLL: Duration = Duration::from_millis(50);

/// What [`follow_events`] saw: the last `values`, an `error` event, and the run's row once
/// it was over (`None` inside: deleted).
struct FollowEnd {
    values: Json_,
    error: Option<Json_>,
    over: Option<Option<stategraph_postgres::RunRow>>,
}

/// Sends a queued run's events after sequence `after` from the queue's log to `tx`, in
/// order, until the run is over and its last event was sent (a receiver that went away does
/// not stop the reading; the run goes on regardless).
async fn follow_events(
    queue: &RunQueue,
    run_id: &str,
    mut after: i64,
    tx: &mpsc::Sender<StreamEvent>,
) -> FollowEnd {
    const BATCH: u32 = 256;
    let mut values = Json_::Object(JsonMap::new());
    let mut error = None;
    // Set once the run is over (with its row, if it still has one): one more read, then stop.
    let mut over: Option<Option<stategraph_postgres::RunRow>> = None;
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
            let ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or_default();
            let _ = tx
                .send(StreamEvent {
                    seq: u64::try_from(e.seq).unwrap_or_default(),
                    id: Arc::from(format!("{ms}-{}", e.seq)),
                    name: Arc::from(e.event),
                    data: Arc::new(e.data),
                })
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
    let queue = queue_of(state)?.clone();
    let (tx, rx) = mpsc::channel(256);
    let Some(row) = queue.get(run_id).await.map_err(api_error)? else {
        return Ok((rx, false));
    };
    let with_id = row
        .payload
        .pointer("/body/stream_resumable")
        .and_then(Json_::as_bool)
        .unwrap_or(false);
    let after = match last_event_id {
        Some("-1") => 0,
        // Ids are `{ms}-{seq}`; one that does not parse replays nothing already sent.
        Some(id) => id
            .rsplit_once('-')
            .and_then(|(_, seq)| seq.parse().ok())
            .unwrap_or(row.events),
        None if row.status.is_final() => return Ok((rx, with_id)),
        None => row.events,
    };
    let run_id = run_id.to_owned();
    tokio::spawn(async move {
        follow_events(&queue, &run_id, after, &tx).await;
    });
    Ok((rx, with_id))
}

/// Follows a queued run (wherever it runs) for the caller of `runs/wait` or `runs/stream`:
/// its events from the queue's log, in order, then its outcome once it is over.
async fn follow_run(
    queue: RunQueue,
    run_id: String,
    thread_id: String,
    graph: Arc<dyn ServedGraph>,
    tx: mpsc::Sender<StreamEvent>,
    done_tx: oneshot::Sender<Outcome>,
) {
    let end = follow_events(&queue, &run_id, 0, &tx).await;
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
                .map(crate::convert::interrupt_output)
                .collect()
        })
        .unwrap_or_default();
    drop(tx);
    let _ = done_tx.send(Outcome {
        values,
        interrupts,
        error,
    });
}

/// How many runs of `thread_id` wait in the queue (none if the queue cannot say).
pub(crate) async fn pending_on(state: &AppState, thread_id: &str) -> usize {
    let Ok(queue) = queue_of(state) else { return 0 };
    queue
        .runs_of_thread(thread_id)
        .await
        .map(|runs| {
            runs.iter()
                .filter(|r| r.status == RunStatus::Pending)
                .count()
        })
        .unwrap_or(0)
}

/// Rewrites the status of run `run_id`'s record, if it has one.
async fn set_run_status(state: &AppState, run_id: &str, status: RunStatus) {
    if let Ok(Some(mut run)) = state.records.get(Kind::Run, run_id).await {
        if let Some(obj) = run.as_object_mut() {
            obj.insert("status".into(), json!(status.as_str()));
            obj.insert("updated_at".into(), json!(now_iso()));
        }
        let _ = state.records.put(Kind::Run, run_id, run).await;
    }
}

/// The queue's cancel action as the server's.
fn cancel_of(action: QueueCancel, reason: String) -> Cancel {
    Cancel {
        action: match action {
            QueueCancel::Interrupt => CancelAction::Interrupt,
            QueueCancel::Rollback => CancelAction::Rollback,
        },
        reason,
    }
}

/// What a cancel request through the queue did.
pub(crate) enum Cancelled {
    /// The queue does not have the run (an in-process run): cancel it locally.
    NotQueued,
    /// It was pending and ended at once.
    Ended,
    /// It is running; its worker stops it.
    Signalled,
    /// It had already finished.
    Finished,
}

/// Asks the queued run `run_id` to stop, wherever it runs; a pending run's record is
/// final at once.
pub(crate) async fn request_cancel(
    state: &AppState,
    run_id: &str,
    action: CancelAction,
) -> Result<Cancelled, ApiError> {
    let queue = queue_of(state)?;
    let action = match action {
        CancelAction::Interrupt => QueueCancel::Interrupt,
        CancelAction::Rollback => QueueCancel::Rollback,
    };
    Ok(
        match queue
            .request_cancel(run_id, action)
            .await
            .map_err(api_error)?
        {
            CancelOutcome::Ended => {
                if action == QueueCancel::Rollback {
                    let _ = state.records.delete(Kind::Run, run_id).await;
                } else {
                    set_run_status(state, run_id, RunStatus::Interrupted).await;
                }
                Cancelled::Ended
            }
            CancelOutcome::Signalled => Cancelled::Signalled,
            CancelOutcome::AlreadyFinished(_) => Cancelled::Finished,
            _ => Cancelled::NotQueued,
        },
    )
}

/// Waits up to `limit` (forever with `None`) for the queued run `run_id` to finish.
pub(crate) async fn settle(state: &AppState, run_id: &str, limit: Option<Duration>) {
    let Ok(queue) = queue_of(state) else { return };
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
    let Some(setup) = &state.queue else { return };
    if setup.started.swap(true, Ordering::SeqCst) {
        return;
    }
    let wake = Arc::new(Notify::new());
    tokio::spawn(listen_loop(Arc::clone(state), Arc::clone(&wake)));
    tokio::spawn(requeue_loop(Arc::clone(state)));
    for i in 0..setup.workers {
        let worker = format!("{}-{i}", setup.prefix);
        tokio::spawn(worker_loop(Arc::clone(state), Arc::clone(&wake), worker));
    }
}

/// Turns the queue's notifications into wake-ups of idle workers and cancels of local runs;
/// reconnects when the listener's connection drops.
async fn listen_loop(state: Arc<AppState>, wake: Arc<Notify>) {
    let Ok(queue) = queue_of(&state).cloned() else {
        return;
    };
    loop {
        if let Ok(mut listener) = queue.listen().await {
            // What happened while no listener was connected: look again.
            wake.notify_waiters();
            while let Some(n) = listener.recv().await {
                match n {
                    Notification::Cancel { run_id, action } => {
                        let reason = format!("{} requested", action.as_str());
                        let _ = state.cancel_run(&run_id, &cancel_of(action, reason));
                    }
                    Notification::Enqueued { .. }
                    | Notification::Requeued { .. }
                    | Notification::Finished { .. } => wake.notify_waiters(),
                    _ => {}
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Takes back runs whose lease ran out, every half lease; those it ends get final records.
async fn requeue_loop(state: Arc<AppState>) {
    let Ok(queue) = queue_of(&state).cloned() else {
        return;
    };
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

/// Claims and executes runs, one at a time, as `worker`.
async fn worker_loop(state: Arc<AppState>, wake: Arc<Notify>, worker: String) {
    let Ok(queue) = queue_of(&state).cloned() else {
        return;
    };
    loop {
        // Registered before the claim, so that a notification during it is not missed.
        let woken = wake.notified();
        match queue.claim(&worker).await {
            Ok(Some(claimed)) => run_claimed(&state, &queue, &worker, claimed).await,
            Ok(None) => {
                let _ = tokio::time::timeout(POLL, woken).await;
            }
            Err(_) => tokio::time::sleep(POLL).await,
        }
    }
}

/// Resolves once `lost` is raised (never if its sender is gone).
async fn lease_lost(lost: &mut watch::Receiver<bool>) {
    loop {
        if *lost.borrow_and_update() {
            return;
        }
        if lost.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}

/// A claimed run, as the executor takes it.
struct Prepared {
    body: RunBody,
    run: Json_,
    graph: Arc<dyn ServedGraph>,
    config: RunConfig,
    started_metadata: JsonMap<String, Json_>,
    modes: Vec<StreamMode>,
    /// The stream modes as the run's body named them.
    mode_names: Vec<String>,
    start: RunStart,
}

/// Rebuilds a claimed run from its payload; a takeover (`attempt > 1`) of a run that
/// checkpointed carries on from its last checkpoint without input.
async fn prepare(state: &AppState, claimed: &ClaimedRun) -> Result<Prepared, ApiError> {
    let bad = |what: &str| ApiError::invalid(format!("queued run payload: {what}"));
    let body: RunBody =
        serde_json::from_value(claimed.payload.get("body").cloned().unwrap_or_default())
            .map_err(|e| bad(&e.to_string()))?;
    let run = claimed
        .payload
        .get("run")
        .cloned()
        .ok_or_else(|| bad("no run"))?;
    let object = |v: Option<&Json_>| v.and_then(Json_::as_object).cloned().unwrap_or_default();
    let configurable = object(run.pointer("/kwargs/config/configurable"));
    let metadata = object(run.get("metadata"));
    let graph_id = configurable
        .get("graph_id")
        .and_then(Json_::as_str)
        .unwrap_or_default();
    let graph = state
        .graphs
        .get(graph_id)
        .cloned()
        .ok_or_else(|| ApiError::not_found(format!("Graph \"{graph_id}\" not found")))?;
    let (mut config, started_metadata) = engine_config(
        &claimed.thread_id,
        &body,
        &configurable,
        &metadata,
        claimed.attempt,
    )?;
    config
        .checkpoint_metadata
        .insert("run_id".into(), json!(claimed.run_id));
    let (modes, mode_names) = stream_modes(body.stream_mode.as_ref())?;
    let mut start = run_start(&body)?;
    if claimed.attempt > 1 {
        let latest = graph
            .get_state(&RunConfig::thread(&claimed.thread_id), false)
            .await?;
        let ours = latest
            .metadata
            .as_ref()
            .and_then(|m| m.run_id())
            .is_some_and(|id| id == claimed.run_id);
        if ours {
            // LangGraph's `invoke(None)`: on from the run's last checkpoint.
            start = RunStart::Continue;
            config.checkpoint_id = None;
        }
    }
    Ok(Prepared {
        body,
        run,
        graph,
        config,
        started_metadata,
        modes,
        mode_names,
        start,
    })
}

/// Executes a claimed run while `worker` holds its lease: heartbeats every third of the
/// lease, copies its events to the queue, and finishes it with its final status. A lost lease
/// stops it without writing anything more.
async fn run_claimed(state: &Arc<AppState>, queue: &RunQueue, worker: &str, claimed: ClaimedRun) {
    let run_id = claimed.run_id.clone();
    let thread_id = claimed.thread_id.clone();
    let prepared = match prepare(state, &claimed).await {
        Ok(p) => p,
        Err(e) => {
            let error = json!({ "error": "ValueError", "message": e.detail });
            if let Ok(true) = queue
                .finish(&run_id, worker, RunStatus::Error, Some(&error))
                .await
            {
                set_run_status(state, &run_id, RunStatus::Error).await;
            }
            return;
        }
    };
    let (lost_tx, mut lost) = watch::channel(false);

    // Events go to the queue in order; a refused append means the lease is gone.
    let (sink, mut events) = mpsc::unbounded_channel::<(String, Json_)>();
    let appender = tokio::spawn({
        let (queue, run_id, worker, lost_tx) = (
            queue.clone(),
            run_id.clone(),
            worker.to_owned(),
            lost_tx.clone(),
        );
        async move {
            while let Some((name, data)) = events.recv().await {
                if let Ok(None) = queue.append_event(&run_id, &worker, &name, &data).await {
                    lost_tx.send_replace(true);
                    return;
                }
            }
        }
    });
    let heartbeat = tokio::spawn({
        let (state, queue, run_id, worker) = (
            Arc::clone(state),
            queue.clone(),
            run_id.clone(),
            worker.to_owned(),
        );
        async move {
            let lease = queue.lease();
            let mut held_at = Instant::now();
            loop {
                tokio::time::sleep(lease / 3).await;
                match queue.heartbeat(&run_id, &worker).await {
                    Ok(l) if !l.held => break,
                    Ok(l) => {
                        held_at = Instant::now();
                        if let Some(action) = l.cancel {
                            let reason = format!("{} requested", action.as_str());
                            let _ = state.cancel_run(&run_id, &cancel_of(action, reason));
                        }
                    }
                    Err(_) if held_at.elapsed() >= lease => break,
                    Err(_) => {}
                }
            }
            lost_tx.send_replace(true);
        }
    });

    let Prepared {
        body,
        run,
        graph,
        config,
        started_metadata,
        modes,
        mode_names,
        start,
    } = prepared;
    let hub = state.hubs.open(&run_id, body.resumable());
    let metadata = json!({ "run_id": run_id, "attempt": claimed.attempt });
    let _ = sink.send(("metadata".into(), metadata.clone()));
    hub.publish("metadata", metadata);
    let hub = HubCloser::new(&state.hubs, &run_id, hub);
    let control = state.register_run(&run_id, &thread_id);
    let engine_modes = crate::exec::engine_modes(&modes, &mode_names);
    // Nobody reads the caller's channel of a queued run: joiners read the hub or the queue.
    let (tx, _) = mpsc::channel(1);
    let (done_tx, _) = oneshot::channel();
    let exec = Exec {
        state: Arc::clone(state),
        graph,
        start,
        config,
        engine_modes,
        wanted: crate::exec::Wanted::new(&modes, &mode_names),
        run,
        thread_id,
        stateful: true,
        hub,
        tx,
        done_tx,
        control: Some(control),
        turn: None,
        started_metadata,
        sink: Some(sink),
    };
    let ended = tokio::select! {
        ended = execute(exec) => Some(ended),
        () = lease_lost(&mut lost) => None,
    };
    heartbeat.abort();
    let Some(ended) = ended else {
        // Another worker has the run (or will): stop here, writing nothing more.
        appender.abort();
        state.unregister_run(&run_id);
        return;
    };
    // The executor dropped its sink: the appender ends once it copied every event.
    let _ = appender.await;
    let (status, error, rollback) = match &ended {
        Some((_, Some(cancel))) => (
            RunStatus::Interrupted,
            None,
            cancel.action == CancelAction::Rollback,
        ),
        Some((outcome, None)) => match &outcome.error {
            Some(e) => (RunStatus::Error, Some(e.clone()), false),
            None => (RunStatus::Success, None, false),
        },
        None => (RunStatus::Interrupted, None, false),
    };
    if let Ok(true) = queue.finish(&run_id, worker, status, error.as_ref()).await
        && rollback
    {
        let _ = queue.delete(&run_id).await;
    }
}
