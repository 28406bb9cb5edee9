//! The one executor: runs a claimed run to its end — the graph's events to the run's hub,
//! its caller and the queue's log, a stop request honoured at the next await, the records
//! written, the queue told — for every run, whichever queue it came from and whoever claimed
//! it (a worker loop, or the task that received a waited or streamed run). While a run is
//! the queue's, a heartbeat keeps its lease; a lost lease stops it without writing anything
//! more.

use std::sync::Arc;
use std::time::Instant;

use futures_util::StreamExt;
use serde_json::{Map as JsonMap, Value as Json_, json};
use stategraph_checkpoint::runs::{
    CancelAction, ClaimedRun, RecordWrite, RunEnd, RunQueue, RunStatus, ThreadStatus,
};
use stategraph_graph::{RunConfig, StateSnapshot, StreamMode, Values};
use tokio::sync::{mpsc, oneshot, watch};

use crate::app::{AppState, Cancel};
use crate::error::{ApiError, error_name};
use crate::exec::Outcome;
use crate::graph::{RunStart, ServedGraph};
use crate::hub::{HubCloser, StreamEvent};
use crate::records::{Records, RunRecord, ThreadRecord};
use crate::request::{RunBody, engine_config, run_start, stream_modes};
use crate::wanted::{Wanted, engine_modes};
use crate::wire::{thread_interrupts, values_json};
use crate::worker::{queue_of, set_run_status};

/// Who follows a run as it executes: the task answering `runs/wait` or `runs/stream`.
pub(crate) struct Caller {
    /// The run's events (a receiver that went away does not stop the run).
    pub(crate) events: mpsc::Sender<StreamEvent>,
    /// The run's outcome, once its records are final and the queue knows it ended.
    pub(crate) done: oneshot::Sender<Outcome>,
}

/// The most events sent to the queue's log in one append.
const APPEND_BATCH: usize = 256;

/// How long the appender gathers a run's events before it appends them (followers in other
/// processes see events this much later at most); what is still gathered when the run ends
/// is appended by the statement that ends it, so a short run's events cost no commit of
/// their own.
const APPEND_DELAY: std::time::Duration = std::time::Duration::from_millis(20);

/// Executes `claimed`: as `worker`, the holder of its lease in the queue (heartbeats, events
/// copied to the queue's log, the queue told how it ended), or, without one, a stateless run
/// of this process on a temporary thread. Its events go to its hub (for joiners) and to
/// `caller`, if any. A worker loop's execution (a `worker`, no `caller`) claims the loop's
/// next run with the end of this one ([`RunQueue::finish_and_claim`]) and returns it.
pub(crate) async fn execute(
    state: &Arc<AppState>,
    claimed: ClaimedRun,
    worker: Option<&str>,
    caller: Option<Caller>,
) -> Option<ClaimedRun> {
    use tracing::Instrument;
    let span = tracing::info_span!(
        "run",
        otel.name = "run",
        openinference.span.kind = "CHAIN",
        session.id = claimed.thread_id.as_str(),
        thread_id = claimed.thread_id.as_str(),
        run_id = claimed.run_id.as_str(),
        attempt = claimed.attempt,
        worker,
        status = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
        error = tracing::field::Empty,
    );
    execute_traced(state, claimed, worker, caller)
        .instrument(span)
        .await
}

/// Counts a run of the server that ended (`stategraph_server_runs_total` by status and
/// `stategraph_server_run_duration_seconds`), records it on its span, and logs a failed
/// run's error once, with its thread and run ids (the span's fields).
fn run_ended(status: RunStatus, error: Option<&Json_>, started: std::time::Instant) {
    metrics::counter!("stategraph_server_runs_total", "status" => status.as_str()).increment(1);
    metrics::histogram!("stategraph_server_run_duration_seconds")
        .record(started.elapsed().as_secs_f64());
    let span = tracing::Span::current();
    span.record("status", status.as_str());
    if let Some(e) = error {
        let name = e.get("error").and_then(Json_::as_str).unwrap_or("Error");
        let message = e.get("message").and_then(Json_::as_str).unwrap_or_default();
        span.record("otel.status_code", "ERROR");
        span.record("error", message);
        metrics::counter!("stategraph_server_errors_total", "kind" => "run").increment(1);
        tracing::warn!(error.type = name, error.message = message, "the run failed");
    }
}

/// [`execute`], inside the run's span.
async fn execute_traced(
    state: &Arc<AppState>,
    claimed: ClaimedRun,
    worker: Option<&str>,
    caller: Option<Caller>,
) -> Option<ClaimedRun> {
    let started = std::time::Instant::now();
    let queue = Arc::clone(queue_of(state));
    let run_id = claimed.run_id.clone();
    let prepared = match prepare(state, &claimed).await {
        Ok(p) => p,
        Err(e) => {
            let error = json!({ "error": "ValueError", "message": e.detail });
            run_ended(RunStatus::Error, Some(&error), started);
            if let Some(worker) = worker
                && let Ok(true) = queue
                    .finish(&run_id, worker, RunStatus::Error, Some(&error))
                    .await
            {
                set_run_status(state, &run_id, RunStatus::Error).await;
            }
            if let Some(caller) = caller {
                let _ = caller.done.send(Outcome {
                    values: Json_::Object(JsonMap::new()),
                    interrupts: Vec::new(),
                    error: Some(error),
                });
            }
            return None;
        }
    };
    let mut prepared = prepared;
    if let Some(w) = worker
        && !prepared.run.temporary()
        && let Some(fence) = queue.fence(&run_id, w)
    {
        // Each checkpoint write of the run commits only while this worker holds its lease.
        match state.saver.fenced(&fence) {
            Some(saver) => prepared.graph = prepared.graph.with_saver(saver),
            None => unfenced_once(),
        }
    }
    let replay = match worker {
        Some(_) if claimed.attempt > 1 => Replay::of(queue.as_ref(), &run_id).await,
        _ => Replay::default(),
    };
    let lease = worker.map(|w| Leased::start(state, &queue, &run_id, w));
    let (cancel_rx, ended_tx) = state.register_run(&run_id);
    let run = Execution {
        state: Arc::clone(state),
        prepared,
        run_id: run_id.clone(),
        thread_id: claimed.thread_id.clone(),
        attempt: claimed.attempt,
        stateful: worker.is_some(),
        sink: lease.as_ref().map(|l| l.sink.clone()),
        caller: caller.as_ref().map(|c| c.events.clone()),
        cancel: cancel_rx,
        replay,
    };
    let ended = match &lease {
        Some(l) => {
            let mut lost = l.lost.clone();
            tokio::select! {
                ended = run.go() => ended,
                () = lease_lost(&mut lost) => None,
            }
        }
        None => run.go().await,
    };
    let Some(Ended {
        outcome,
        cancel,
        records,
        webhook,
        hub,
    }) = ended
    else {
        // Another worker has the run (or will): stop here, writing nothing more.
        if let Some(l) = lease {
            l.abort();
        }
        state.unregister_run(&run_id);
        return None;
    };
    let status = run_status(&outcome, cancel.as_ref());
    let mut next = None;
    if let (Some(lease), Some(worker)) = (lease, worker) {
        // Every event is in the log once the queue hears the run ended (the last ones go with
        // the statement that ends it).
        let last = lease.close().await;
        let error = outcome.error.as_ref().filter(|_| cancel.is_none());
        // The run's and its thread's final records go with the statement that ends the run
        // where the queue can write them; otherwise they are written first, here.
        let records = state.records.with_queue(records).await.unwrap_or_else(|e| {
            tracing::warn!(error = %e.detail, "the run's final records could not be written");
            None
        });
        let end = RunEnd::new(&run_id, worker, status)
            .error(error)
            .events(&last)
            .records(records.as_ref());
        let finished = if caller.is_none() {
            // A worker loop: its next run comes with this one's end.
            queue.finish_and_claim(end).await.map(|(ended, claimed)| {
                next = claimed;
                ended
            })
        } else {
            queue.finish_run(end).await
        };
        if let Ok(true) = finished
            && cancel
                .as_ref()
                .is_some_and(|c| c.action == CancelAction::Rollback)
        {
            let _ = queue.delete(&run_id).await;
        }
    }
    drop(hub);
    if let Some((url, payload)) = webhook {
        state.webhooks.send(url, run_id.clone(), payload);
    }
    state.unregister_run(&run_id);
    run_ended(status, outcome.error.as_ref(), started);
    if let Some(caller) = caller {
        let _ = caller.done.send(outcome);
    }
    ended_tx.send_replace(true);
    next
}

/// A run's lease while it executes: the heartbeat that keeps it (and hears stop requests),
/// the appender that copies its events to the queue's log, and the flag raised when the
/// lease is lost.
struct Leased {
    sink: mpsc::UnboundedSender<(String, Json_)>,
    lost: watch::Receiver<bool>,
    heartbeat: tokio::task::JoinHandle<()>,
    /// Ends with the events it gathered but did not append (the run ended meanwhile).
    appender: tokio::task::JoinHandle<Vec<(String, Json_)>>,
}

impl Leased {
    fn start(state: &Arc<AppState>, queue: &Arc<dyn RunQueue>, run_id: &str, worker: &str) -> Self {
        let (lost_tx, lost) = watch::channel(false);
        // Events go to the log in order, in batches; a refused append means the lease is gone.
        let (sink, mut events) = mpsc::unbounded_channel::<(String, Json_)>();
        let appender = tokio::spawn({
            let (queue, run_id, worker, lost_tx) = (
                Arc::clone(queue),
                run_id.to_owned(),
                worker.to_owned(),
                lost_tx.clone(),
            );
            async move {
                let mut batch = Vec::new();
                while events.recv_many(&mut batch, APPEND_BATCH).await > 0 {
                    let until = tokio::time::Instant::now() + APPEND_DELAY;
                    while batch.len() < APPEND_BATCH {
                        let room = APPEND_BATCH - batch.len();
                        match tokio::time::timeout_at(until, events.recv_many(&mut batch, room))
                            .await
                        {
                            // The run ended: its end appends what is gathered.
                            Ok(0) => return batch,
                            Ok(_) => {}
                            Err(_) => break,
                        }
                    }
                    if let Ok(None) = queue.append_events(&run_id, &worker, &batch).await {
                        lost_tx.send_replace(true);
                        return Vec::new();
                    }
                    batch.clear();
                }
                batch
            }
        });
        let heartbeat = tokio::spawn({
            let (state, queue, run_id, worker) = (
                Arc::clone(state),
                Arc::clone(queue),
                run_id.to_owned(),
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
                                let cancel = crate::worker::cancel_of(action, &l.reason);
                                let _ = state.cancel_run(&run_id, &cancel);
                            }
                        }
                        Err(_) if held_at.elapsed() >= lease => break,
                        Err(_) => {}
                    }
                }
                lost_tx.send_replace(true);
            }
        });
        Self {
            sink,
            lost,
            heartbeat,
            appender,
        }
    }

    /// Stops the heartbeat and waits until the appender is done: the events it did not
    /// append, for the statement that ends the run.
    async fn close(self) -> Vec<(String, Json_)> {
        self.heartbeat.abort();
        drop(self.sink);
        self.appender.await.unwrap_or_default()
    }

    /// Stops both at once (the lease is lost).
    fn abort(self) {
        self.heartbeat.abort();
        self.appender.abort();
    }
}

/// Says once per process that queued runs' checkpoint writes are not fenced (the saver
/// cannot check the queue's lease).
fn unfenced_once() {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        tracing::warn!(
            "the run queue's lease cannot fence this checkpointer's writes (another backend \
             or another database than the queue's): a worker that stalls past its lease may \
             still write a checkpoint after another worker took its run over"
        );
    });
}

/// Why this attempt of a queued run must stop without recording an end, if `e` says so: a
/// write refused because the run's lease is lost (another worker has the run), or a write
/// whose database connection was lost (the queue retries the run from its last stored
/// checkpoint once its lease runs out, instead of failing it for the database's hiccup).
fn abandons(e: &stategraph_graph::GraphError) -> Option<&'static str> {
    use stategraph_checkpoint::Error;
    let why = |e: &Error| match e {
        Error::LeaseLost { .. } => Some("the run's lease is lost"),
        Error::ConnectionLost { .. } => Some("a checkpoint write lost its database connection"),
        _ => None,
    };
    // The checkpointer's error is the graph error's own variant (a transparent one: its
    // `source()` skips it), or further down a node's chain.
    if let stategraph_graph::GraphError::Checkpoint(inner) = e {
        return why(inner);
    }
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if let Some(found) = c.downcast_ref::<Error>().and_then(why) {
            return Some(found);
        }
        cause = c.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::abandons;
    use stategraph_checkpoint::Error;
    use stategraph_graph::GraphError;

    #[test]
    fn a_lost_lease_or_connection_abandons_the_attempt() {
        let lost = GraphError::from(Error::LeaseLost {
            run_id: "r".into(),
            worker: "w".into(),
        });
        assert_eq!(abandons(&lost), Some("the run's lease is lost"));
        let cut = GraphError::from(Error::ConnectionLost {
            backend: "postgres",
            operation: "committing a checkpoint".into(),
            source: None,
        });
        assert!(abandons(&cut).is_some());
        let other = GraphError::from(Error::invalid("x", "y"));
        assert_eq!(abandons(&other), None);
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

/// A run being executed.
struct Execution {
    state: Arc<AppState>,
    prepared: Prepared,
    run_id: String,
    thread_id: String,
    attempt: u32,
    /// Whether its thread outlives it (its records are kept).
    stateful: bool,
    /// The queue's log, while the run is the queue's.
    sink: Option<mpsc::UnboundedSender<(String, Json_)>>,
    /// The caller's events.
    caller: Option<mpsc::Sender<StreamEvent>>,
    cancel: watch::Receiver<Option<Cancel>>,
    /// What an earlier attempt of the run already published of the step this one resumes.
    replay: Replay,
}

/// The events earlier attempts of a run published, which the resumed attempt publishes
/// again as it replays what they did since its last checkpoint (the state it resumes from,
/// the updates of the tasks that had finished — and, since checkpoints are saved in the
/// background, what an earlier attempt streamed before its checkpoint was stored): they are
/// not published twice, so that followers see each event once. Events are matched by name
/// and data, in any order, while the resumed attempt repeats them; the first event that is
/// new ends the replay.
#[derive(Default)]
struct Replay(Vec<(String, Json_)>);

impl Replay {
    /// The replay of run `run_id` as the queue's log has it.
    async fn of(queue: &dyn RunQueue, run_id: &str) -> Self {
        const PAGE: u32 = 256;
        let mut logged = Vec::new();
        let mut after = 0;
        while let Ok(page) = queue.events_after(run_id, after, PAGE).await {
            let Some(last) = page.last() else { break };
            after = last.seq;
            let full = page.len() >= PAGE as usize;
            logged.extend(page.into_iter().map(|e| (e.event, e.data)));
            if !full {
                break;
            }
        }
        logged.retain(|(name, _)| name != "metadata" && name != "error");
        Self(logged)
    }

    /// Whether the event repeats one of the replay (then it is used up); a new event ends
    /// the replay.
    fn repeats(&mut self, name: &str, data: &Json_) -> bool {
        match self.0.iter().position(|(n, d)| n == name && d == data) {
            Some(i) => {
                self.0.swap_remove(i);
                true
            }
            None => {
                self.0.clear();
                false
            }
        }
    }
}

impl Execution {
    /// Streams the graph to the end (or a stop request); how it ended, with the run's final
    /// records to write. `None` when a checkpoint write says this attempt must stop
    /// ([`abandons`]): nothing more is written here; another attempt (another worker's, after
    /// a takeover) carries the run on.
    async fn go(self) -> Option<Ended> {
        let Execution {
            state,
            prepared,
            run_id,
            thread_id,
            attempt,
            stateful,
            sink,
            caller,
            mut cancel,
            mut replay,
        } = self;
        let Prepared {
            body,
            mut run,
            graph,
            config,
            started_metadata,
            modes,
            mode_names,
            start,
        } = prepared;
        let hub = state.hubs.open(&run_id, body.resumable());
        let hub = HubCloser::new(&state.hubs, &run_id, hub);
        let publish = |name: &str, data: Json_| -> StreamEvent {
            if let Some(sink) = &sink {
                let _ = sink.send((name.to_owned(), data.clone()));
            }
            hub.hub().publish(name.to_owned(), data)
        };
        let send = |event: StreamEvent| {
            let caller = caller.clone();
            async move {
                if let Some(tx) = caller {
                    let _ = tx.send(event).await;
                }
            }
        };
        send(publish(
            "metadata",
            json!({ "run_id": run_id, "attempt": attempt }),
        ))
        .await;
        // Its record stays as stored until the run ends: while the run is the queue's, its
        // status is read from the queue.
        run.started(started_metadata);
        // When it started, for its webhook.
        let started_at = run.updated_at.clone();
        let mut wanted = Wanted::new(&modes, &mode_names);
        for (name, data) in wanted.begin(&run) {
            send(publish(&name, data)).await;
        }
        let engine_modes = engine_modes(&modes, &mode_names);
        let mut stream = graph.stream(start, config, &engine_modes);
        let mut values = Json_::Object(JsonMap::new());
        let mut error = None;
        let mut stop = None;
        'run: loop {
            let item = tokio::select! {
                item = stream.next() => item,
                c = cancelled(&mut cancel) => {
                    stop = Some(c);
                    break;
                }
            };
            match item {
                None => break,
                Some(Ok((name, data))) => {
                    if name == "values" {
                        values = data.clone();
                    }
                    for (name, data) in wanted.render(name, data) {
                        if replay.repeats(&name, &data) {
                            continue;
                        }
                        let event = publish(&name, data);
                        // A caller that went away does not stop the run; a cancel does,
                        // even while a slow reader holds the event back.
                        tokio::select! {
                            () = send(event) => {}
                            c = cancelled(&mut cancel) => {
                                stop = Some(c);
                                break 'run;
                            }
                        }
                    }
                }
                Some(Err(e)) if stateful && let Some(why) = abandons(&e) => {
                    tracing::warn!(error = %e, "{why}: this attempt stops, writing nothing more; the queue gives the run another");
                    return None;
                }
                Some(Err(e)) => {
                    error = Some(json!({ "error": error_name(&e), "message": e.to_string() }));
                    break;
                }
            }
        }
        // A run that completed left its thread with its final values and nothing to do:
        // what it would be read back as.
        let completed = if error.is_none() && stop.is_none() {
            stream.completed().map(Left::completed)
        } else {
            None
        };
        // Dropping the stream stops a cancelled run; what it checkpointed stays, unless the
        // cancel rolls it back.
        drop(stream);
        if error.is_none() && stop.is_none() {
            for (name, data) in wanted.end(&values) {
                send(publish(&name, data)).await;
            }
        }
        if stop
            .as_ref()
            .is_some_and(|c| c.action == CancelAction::Rollback)
        {
            // The stopped run's background writer may still be committing what it queued:
            // delete after it, or its last checkpoints outlive the rollback.
            graph.wait_for_saves(&thread_id).await;
            let _ = state
                .saver
                .delete_for_runs(std::slice::from_ref(&run_id))
                .await;
        }
        let left = match completed {
            Some(left) => Some(left),
            None => graph
                .get_state(&RunConfig::thread(&thread_id), false)
                .await
                .ok()
                .map(|s| Left::of(&s)),
        };
        let outcome = Outcome {
            values,
            interrupts: left
                .as_ref()
                .map(|l| l.interrupts.clone())
                .unwrap_or_default(),
            error,
        };
        let webhook = body
            .webhook
            .as_ref()
            .and_then(Json_::as_str)
            .map(str::to_owned);
        run.mark(run_status(&outcome, stop.as_ref()));
        let webhook = webhook.map(|url| {
            let payload = crate::wire::webhook_payload(
                &run,
                &started_at,
                left.as_ref().map(|l| l.values.clone()),
                outcome.error.as_ref().filter(|_| stop.is_none()),
            );
            (url, payload)
        });
        let records = if stateful {
            final_records(&thread_id, &run, left, &outcome, stop.as_ref())
        } else {
            Vec::new()
        };
        if let Some(e) = &outcome.error {
            // Deliberately kept in a resumable run's log too (the reference publishes the
            // error live only), so that a client that reconnects learns how the run ended.
            send(publish("error", e.clone())).await;
        }
        Some(Ended {
            outcome,
            cancel: stop,
            records,
            webhook,
            hub,
        })
    }
}

/// How an execution ended: what it did, the cancel that stopped it (if any), the records
/// that settle the run and its thread (written as the queue hears the run ended), and its
/// webhook's address and payload (sent once it has).
struct Ended {
    outcome: Outcome,
    cancel: Option<Cancel>,
    records: Vec<RecordWrite>,
    webhook: Option<(String, Json_)>,
    /// The run's hub, closed once the run's end is recorded (joiners then read it as ended).
    hub: HubCloser,
}

/// How a run left its thread: what the thread's record and the run's outcome say of it.
struct Left {
    /// The thread's latest values.
    values: Json_,
    /// Its pending interrupts by task id, as the thread's record keeps them.
    thread_interrupts: Json_,
    /// Its pending interrupts, as a run's outcome lists them.
    interrupts: Vec<Json_>,
    /// The thread waits: nodes are next, or interrupts wait for answers.
    waiting: bool,
}

impl Left {
    /// The thread as its latest state says.
    fn of(s: &StateSnapshot) -> Self {
        Self {
            values: values_json(&s.values),
            thread_interrupts: thread_interrupts(s),
            interrupts: s
                .interrupts
                .iter()
                .map(crate::wire::interrupt_output)
                .collect(),
            waiting: !s.next.is_empty() || !s.interrupts.is_empty(),
        }
    }

    /// The thread a completed run left: its final values, nothing next, no interrupts (the
    /// state it would be read back as, without the read).
    fn completed(values: &Values) -> Self {
        Self {
            values: values_json(values),
            thread_interrupts: Json_::Object(JsonMap::new()),
            interrupts: Vec::new(),
            waiting: false,
        }
    }
}

/// A claimed run, as the executor takes it.
struct Prepared {
    body: RunBody,
    run: RunRecord,
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
    let run: RunRecord =
        serde_json::from_value(claimed.payload.get("run").cloned().unwrap_or_default())
            .map_err(|e| bad(&e.to_string()))?;
    let configurable = run.kwargs_object("/config/configurable");
    let metadata = run.metadata.clone();
    let graph_id = configurable
        .get("graph_id")
        .and_then(Json_::as_str)
        .unwrap_or_default();
    let graph = state
        .graphs
        .get(graph_id)
        .cloned()
        .ok_or_else(|| ApiError::not_found(format!("Graph \"{graph_id}\" not found")))?;
    let graph = if run.temporary() {
        // A temporary thread lives and dies with its run, unseen by any other request: its
        // checkpoints are kept in memory, so a stateless run writes nothing to the database
        // (and a process killed mid-run leaves nothing behind). The store is still the
        // server's.
        graph.with_saver(Arc::new(stategraph_checkpoint::InMemorySaver::new()))
    } else {
        graph
    };
    let (mut config, started_metadata) = engine_config(
        &claimed.thread_id,
        &body,
        &configurable,
        &metadata,
        claimed.attempt,
    )?;
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

/// The writes that settle a run that ended: its thread idle, interrupted or in error, with
/// the state the run left (a thread with more runs waiting still reads `busy`: while it has
/// runs in the queue, its status is the queue's), and `run`'s final record (deleted after a
/// rollback). A temporary thread's records are deleted instead. Only the fields the run
/// changes are set on the thread, so a change made to it meanwhile (its metadata) stays.
fn final_records(
    thread_id: &str,
    run: &RunRecord,
    left: Option<Left>,
    outcome: &Outcome,
    cancel: Option<&Cancel>,
) -> Vec<RecordWrite> {
    if run.temporary() {
        // A stateless run's thread (and with it the run) is gone once the run ended.
        return vec![
            Records::delete_write::<ThreadRecord>(thread_id),
            Records::delete_write::<RunRecord>(&run.run_id),
        ];
    }
    let interrupted = left.as_ref().is_some_and(|l| l.waiting);
    let thread_status = match run.status {
        RunStatus::Error => ThreadStatus::Error,
        // A cancelled run's thread waits at the checkpoint the run got to (or started from);
        // as LangGraph's server, a run that stopped on an interrupt succeeded, and its thread
        // waits, `interrupted`.
        _ if interrupted => ThreadStatus::Interrupted,
        _ => ThreadStatus::Idle,
    };
    let error = match cancel {
        Some(c) => cancel_error(c),
        None => outcome.error.clone().unwrap_or(Json_::Null),
    };
    let left = left.map(|l| (l.values, l.thread_interrupts));
    let thread = Records::merge_write::<ThreadRecord>(
        thread_id,
        ThreadRecord::settled(thread_status, left, error),
    );
    let rolled_back = cancel.is_some_and(|c| c.action == CancelAction::Rollback);
    let run_write = if rolled_back {
        Records::delete_write::<RunRecord>(&run.run_id)
    } else {
        match Records::put_write(run) {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(error = %e.detail, "the run's final record cannot be written");
                return vec![thread];
            }
        }
    };
    vec![thread, run_write]
}

/// How a run ended, as its record says: `interrupted` when cancelled (or deleted by a
/// rollback), `error` when it failed, else `success` (a run that stopped on an interrupt
/// succeeded: its run status `interrupted` means cancelled, as LangGraph's server says).
fn run_status(outcome: &Outcome, cancel: Option<&Cancel>) -> RunStatus {
    match (&outcome.error, cancel) {
        (_, Some(_)) => RunStatus::Interrupted,
        (Some(_), None) => RunStatus::Error,
        (None, None) => RunStatus::Success,
    }
}

/// The error a cancel leaves on the run's thread, as LangGraph's server records the
/// `UserInterrupt` / `UserRollback` it raises in the run.
fn cancel_error(cancel: &Cancel) -> Json_ {
    let name = match cancel.action {
        CancelAction::Interrupt => "UserInterrupt",
        CancelAction::Rollback => "UserRollback",
    };
    json!({ "error": name, "message": cancel.reason })
}

/// Resolves when the run is asked to stop; never for a run whose cancel signal is gone.
async fn cancelled(rx: &mut watch::Receiver<Option<Cancel>>) -> Cancel {
    loop {
        if let Some(c) = rx.borrow_and_update().clone() {
            return c;
        }
        if rx.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}
