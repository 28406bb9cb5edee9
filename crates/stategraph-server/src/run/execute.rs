//! The one executor: runs a claimed run to its end — the graph's events appended to the
//! queue's log, a stop request honoured at the next await, its end (status, answer, the
//! state it left its thread with, its last events) told to the queue in one step — for every
//! run, whoever claimed it (a worker loop, or the task that received a waited or streamed
//! run). A heartbeat keeps its lease; a lost lease stops it without writing anything more; a
//! panic in its task ends it in `error`, its thread settled.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use futures_util::{FutureExt, StreamExt};
use serde_json::{Map as JsonMap, Value as Json, json};
use stategraph_graph::{RunConfig, StreamMode};
use stategraph_runs::{
    CancelAction, Finished, RunEnd, RunQueue, RunRow, RunStatus, ThreadEnd, ThreadState,
};
use tokio::sync::{mpsc, watch};

use super::lease::{self, Leased};
use super::settle::{Left, run_status, thread_state};
use super::{Outcome, RunKwargs, Stop};
use crate::app::AppState;
use crate::error::{ApiError, error_name};
use crate::graph::{RunStart, ServedGraph};
use crate::records::RunRecord;
use crate::wanted::{Wanted, engine_modes};

mod prepared;
use prepared::*;

/// What an execution did: the run's row as its end left it, when this execution ended it
/// (`None`: the run was given back, its lease was lost, or its end could not be recorded),
/// and the worker's next run.
#[derive(Default)]
pub(crate) struct Executed {
    /// The ended run: its status, error, answer and arguments as recorded with its end.
    pub(crate) ended: Option<RunRow>,
    /// The worker's next run, claimed with this one's end (`claim_next`).
    pub(crate) next: Option<RunRow>,
}

/// Executes `claimed`, held by `worker`; with `claim_next` (a worker loop), the worker's next
/// run is claimed with this one's end and returned.
pub(crate) async fn execute(
    state: &Arc<AppState>,
    claimed: RunRow,
    worker: &str,
    claim_next: bool,
) -> Executed {
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
    execute_traced(state, claimed, worker, claim_next)
        .instrument(span)
        .await
}

/// Counts a run of the server that ended (`stategraph_server_runs_total` by status and
/// `stategraph_server_run_duration_seconds`), records it on its span, and logs a failed
/// run's error once, with its thread and run ids (the span's fields).
fn run_ended(status: RunStatus, error: Option<&Json>, started: Instant) {
    metrics::counter!("stategraph_server_runs_total", "status" => status.as_str()).increment(1);
    metrics::histogram!("stategraph_server_run_duration_seconds")
        .record(started.elapsed().as_secs_f64());
    let span = tracing::Span::current();
    span.record("status", status.as_str());
    if let Some(e) = error {
        let name = e.get("error").and_then(Json::as_str).unwrap_or("Error");
        let message = e.get("message").and_then(Json::as_str).unwrap_or_default();
        span.record("otel.status_code", "ERROR");
        span.record("error", message);
        metrics::counter!("stategraph_server_errors_total", "kind" => "run").increment(1);
        tracing::warn!(error.type = name, error.message = message, "the run failed");
    }
}

/// [`execute`], inside the run's span.
async fn execute_traced(
    state: &Arc<AppState>,
    claimed: RunRow,
    worker: &str,
    claim_next: bool,
) -> Executed {
    let started = Instant::now();
    let queue = Arc::clone(&state.runs.queue);
    let run_id = claimed.run_id.clone();
    // Registered first: a stop request made from now on reaches the run.
    let control = state.runs.dispatch.register(&run_id);
    let prepared = match prepare(state, &claimed).await {
        Ok(p) => p,
        Err(e) => {
            let error = json!({ "error": "ValueError", "message": e.detail });
            return fail(state, &claimed, worker, &error, claim_next, started).await;
        }
    };
    let mut prepared = prepared;
    if !claimed.temporary
        && let Some(fence) = queue.fence(&run_id, worker)
    {
        // Each checkpoint write of the run commits only while this worker holds its lease.
        match state.fencing.as_deref().and_then(|f| f.fenced(&fence)) {
            Some(saver) => prepared.graph = prepared.graph.with_saver(saver),
            None => lease::unfenced_once(queue.as_ref()),
        }
    }
    let replay = match claimed.attempt {
        1 => Replay::default(),
        _ => Replay::of(queue.as_ref(), &run_id).await,
    };
    let leased = Leased::start(state, &run_id, worker);
    let run = Execution {
        state: Arc::clone(state),
        prepared,
        claimed: &claimed,
        sink: leased.sink.clone(),
        stop: control.stop.clone(),
        replay,
    };
    let mut lost = leased.lost.clone();
    let ended = tokio::select! {
        ended = AssertUnwindSafe(run.go()).catch_unwind() => match ended {
            Ok(ended) => ended,
            Err(panic) => Some(Ended::panicked(&panic)),
        },
        () = lease::lost(&mut lost) => None,
    };
    let Some(ended) = ended else {
        // Another worker has the run (or will): stop here, writing nothing more.
        leased.abort();
        return Executed::default();
    };
    let last = leased.close().await;
    if matches!(ended.stop, Some(Stop::Release)) {
        // This process shuts down: the run goes back to the queue with what it streamed.
        if !last.is_empty() {
            let _ = queue.append_events(&run_id, worker, &last).await;
        }
        let _ = queue.finish(RunEnd::released(&run_id, worker)).await;
        return Executed::default();
    }
    let cancel = match &ended.stop {
        Some(Stop::Cancel(c)) => Some(c),
        _ => None,
    };
    let status = run_status(&ended.outcome, cancel);
    let rolled_back = cancel.is_some_and(|c| c.action == CancelAction::Rollback);
    let before = match ended.left {
        Some(_) => None,
        None => thread_before(queue.as_ref(), &claimed.thread_id).await,
    };
    let settled = thread_state(
        status,
        ended.left.as_ref(),
        before.as_ref(),
        &ended.outcome,
        cancel,
    );
    let error = ended.outcome.error.as_ref().filter(|_| cancel.is_none());
    let output = ended.outcome.to_wait_json();
    let kwargs = ended.kwargs.as_ref().and_then(|k| k.to_object().ok());
    let mut end = RunEnd::new(&run_id, worker, status)
        .error(error)
        .output(Some(&output))
        .kwargs(kwargs.as_ref())
        .events(&last);
    if rolled_back {
        end = end.deleted();
    }
    let executed = match record_end(state, &claimed, end, &settled, claim_next).await {
        Some(done) => Executed {
            ended: done
                .ended
                .then(|| ended_row(&claimed, status, error, output, kwargs)),
            next: done.next,
        },
        None => Executed::default(),
    };
    if let (Some(webhook), Some(kwargs)) = (ended.webhook, &ended.kwargs) {
        let (url, payload) = webhook.payload(&claimed, status, kwargs);
        state.webhooks.send(url, run_id.clone(), payload);
    }
    run_ended(status, ended.outcome.error.as_ref(), started);
    drop(control);
    executed
}

/// Run `claimed`'s row as its end (`status`, `error`, `output`, `kwargs`) left it.
fn ended_row(
    claimed: &RunRow,
    status: RunStatus,
    error: Option<&Json>,
    output: Json,
    kwargs: Option<JsonMap<String, Json>>,
) -> RunRow {
    let mut row = claimed.clone();
    row.status = status;
    row.error = error.cloned();
    row.output = Some(output);
    if let Some(k) = kwargs {
        row.kwargs = k;
    }
    row.updated_at = std::time::SystemTime::now();
    row.lease_until = None;
    row
}

/// Ends a run that could not start (its arguments do not fit, its graph is gone) in
/// `error`, its thread settled with it.
async fn fail(
    state: &AppState,
    claimed: &RunRow,
    worker: &str,
    error: &Json,
    claim_next: bool,
    started: Instant,
) -> Executed {
    let queue = state.runs.queue.as_ref();
    let outcome = Outcome {
        values: json!({}),
        interrupts: Vec::new(),
        error: Some(error.clone()),
    };
    let before = thread_before(queue, &claimed.thread_id).await;
    let settled = thread_state(RunStatus::Error, None, before.as_ref(), &outcome, None);
    let output = outcome.to_wait_json();
    let end = RunEnd::new(&claimed.run_id, worker, RunStatus::Error)
        .error(Some(error))
        .output(Some(&output));
    run_ended(RunStatus::Error, Some(error), started);
    match record_end(state, claimed, end, &settled, claim_next).await {
        Some(done) => Executed {
            ended: done
                .ended
                .then(|| ended_row(claimed, RunStatus::Error, Some(error), output, None)),
            next: done.next,
        },
        None => Executed::default(),
    }
}

/// Records the end of `claimed` with the queue, its thread settled as `settled` (deleted for
/// a temporary run's thread), and the worker's next claim asked for unless the process
/// drains: whether it ended the run, and the worker's next run. `None` (logged) when the end
/// cannot be recorded: the run is left to its lease, which runs out.
async fn record_end<'a>(
    state: &AppState,
    claimed: &'a RunRow,
    end: RunEnd<'a>,
    settled: &'a ThreadState,
    claim_next: bool,
) -> Option<Finished> {
    let mut end = end.thread(if claimed.temporary {
        ThreadEnd::Delete
    } else {
        ThreadEnd::Settle(settled)
    });
    if claim_next && !state.runs.is_draining() {
        end = end.claim_next();
    }
    match state.runs.queue.finish(end).await {
        Ok(done) => Some(done),
        Err(e) => {
            tracing::warn!(error = %e, "the run's end could not be recorded; its lease will run out");
            None
        }
    }
}

/// The state thread `thread_id` had before the run, as the queue keeps it.
async fn thread_before(queue: &dyn RunQueue, thread_id: &str) -> Option<ThreadState> {
    queue
        .threads(&[thread_id.to_owned()])
        .await
        .ok()?
        .into_iter()
        .next()?
        .state
}

/// Why this attempt of a run must stop without recording an end, if `e` says so: a write
/// refused because the run's lease is lost (another worker has the run), or a write whose
/// database connection was lost (the queue retries the run from its last stored checkpoint
/// once its lease runs out, instead of failing it for the database's hiccup).
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

/// A run being executed.
struct Execution<'a> {
    state: Arc<AppState>,
    prepared: Prepared,
    claimed: &'a RunRow,
    /// The queue's log.
    sink: mpsc::UnboundedSender<(String, Json)>,
    stop: watch::Receiver<Option<Stop>>,
    /// What an earlier attempt of the run already published of the step this one resumes.
    replay: Replay,
}

/// The events earlier attempts of a run published, which the resumed attempt publishes
/// again as it replays what they did since its last checkpoint (the state it resumes from,
/// the updates of the tasks that had finished — and, since checkpoints are saved in the
/// background, what an earlier attempt streamed before its checkpoint was stored): they are
/// not published twice, so that readers see each event once. Events are matched by name and
/// data, in any order, while the resumed attempt repeats them; the first event that is new
/// ends the replay.
#[derive(Default)]
struct Replay(Vec<(String, Json)>);

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
    fn repeats(&mut self, name: &str, data: &Json) -> bool {
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

/// How an execution ended: what it did, what stopped it (if anything), the state it left
/// its thread with (when known), the arguments it ran with, and its webhook.
struct Ended {
    outcome: Outcome,
    stop: Option<Stop>,
    left: Option<Left>,
    /// `None` when the task panicked: the run keeps the arguments it was enqueued with.
    kwargs: Option<RunKwargs>,
    webhook: Option<Webhook>,
}

impl Ended {
    /// The end of a run whose task panicked.
    fn panicked(panic: &Box<dyn std::any::Any + Send>) -> Self {
        let what = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("(no message)");
        tracing::error!(panic = what, "a run's task panicked");
        Self {
            outcome: Outcome {
                values: json!({}),
                interrupts: Vec::new(),
                error: Some(json!({
                    "error": "RuntimeError",
                    "message": format!("the run's task panicked: {what}"),
                })),
            },
            stop: None,
            left: None,
            kwargs: None,
            webhook: None,
        }
    }
}

/// A run's webhook: its address and when the run started.
struct Webhook {
    url: String,
    started_at: String,
    values: Option<Json>,
    error: Option<Json>,
}

impl Webhook {
    /// Its address and what is sent there, for a run that ended `status`.
    fn payload(self, claimed: &RunRow, status: RunStatus, kwargs: &RunKwargs) -> (String, Json) {
        let mut run = RunRecord::of(claimed);
        run.status = status;
        run.updated_at = stategraph_checkpoint::now_iso();
        if let Ok(k) = kwargs.to_object() {
            run.kwargs = k;
        }
        let payload =
            crate::wire::webhook_payload(&run, &self.started_at, self.values, self.error.as_ref());
        (self.url, payload)
    }
}

impl Execution<'_> {
    /// Streams the graph to the end (or a stop request): how it ended. `None` when a
    /// checkpoint write says this attempt must stop ([`abandons`]): nothing more is written
    /// here; another attempt (another worker's, after a takeover) carries the run on.
    async fn go(self) -> Option<Ended> {
        let Execution {
            state,
            prepared,
            claimed,
            sink,
            mut stop,
            mut replay,
        } = self;
        let Prepared {
            kwargs,
            graph,
            config,
            modes,
            mode_names,
            start,
        } = prepared;
        let run_id = claimed.run_id.as_str();
        let publish = |name: &str, data: Json| {
            let _ = sink.send((name.to_owned(), data));
        };
        publish(
            "metadata",
            json!({ "run_id": run_id, "attempt": claimed.attempt }),
        );
        let started_at = stategraph_checkpoint::now_iso();
        let mut run = RunRecord::of(claimed);
        if let Ok(k) = kwargs.to_object() {
            run.kwargs = k;
        }
        let mut wanted = Wanted::new(&modes, &mode_names);
        let engine_modes = engine_modes(&modes);
        let mut stream = graph.stream(start, config, &engine_modes);
        let mut values = Json::Object(JsonMap::new());
        let mut error = None;
        let mut stopped = None;
        loop {
            let item = tokio::select! {
                item = stream.next() => item,
                s = stopped_by(&mut stop) => {
                    stopped = Some(s);
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
                        if !replay.repeats(&name, &data) {
                            publish(&name, data);
                        }
                    }
                }
                Some(Err(e)) if let Some(why) = abandons(&e) => {
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
        let completed = if error.is_none() && stopped.is_none() {
            stream
                .completed()
                .map(|values| Left::completed(values, graph.output_channel()))
        } else {
            None
        };
        // Dropping the stream stops a cancelled run; what it checkpointed stays, unless the
        // cancel rolls it back.
        drop(stream);
        if matches!(stopped, Some(Stop::Release)) {
            graph.wait_for_saves(&claimed.thread_id).await;
            return Some(Ended {
                outcome: Outcome::default(),
                stop: stopped,
                left: None,
                kwargs: Some(kwargs),
                webhook: None,
            });
        }
        if let Some(Stop::Cancel(c)) = &stopped
            && c.action == CancelAction::Rollback
        {
            // The stopped run's background writer may still be committing what it queued:
            // delete after it, or its last checkpoints outlive the rollback.
            graph.wait_for_saves(&claimed.thread_id).await;
            let _ = state
                .saver
                .delete_for_runs(std::slice::from_ref(&claimed.run_id))
                .await;
        }
        let left = match completed {
            Some(left) => Some(left),
            None => graph
                .get_state(&RunConfig::thread(&claimed.thread_id), false)
                .await
                .ok()
                .map(|s| Left::of(&s, graph.output_channel())),
        };
        let outcome = Outcome {
            values,
            interrupts: left
                .as_ref()
                .map(|l| l.interrupts.clone())
                .unwrap_or_default(),
            error,
        };
        let cancelled = matches!(stopped, Some(Stop::Cancel(_)));
        let webhook = kwargs.webhook.as_str().map(|url| Webhook {
            url: url.to_owned(),
            started_at,
            values: left.as_ref().map(|l| l.values.clone()),
            error: outcome.error.clone().filter(|_| !cancelled),
        });
        if let Some(e) = &outcome.error {
            // Deliberately kept in a resumable run's log too (the reference publishes the
            // error live only), so that a client that reconnects learns how the run ended.
            publish("error", e.clone());
        }
        Some(Ended {
            outcome,
            stop: stopped,
            left,
            kwargs: Some(kwargs),
            webhook,
        })
    }
}

#[cfg(test)]
mod tests;
