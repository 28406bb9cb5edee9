//! The front door of a run: the request resolved ([`plan`](super::plan)), a new thread's
//! document stored, the run enqueued — and claimed at once by this process when its caller
//! follows it and it may start now — and the caller handed what it follows the run by.

use std::sync::Arc;
use std::time::SystemTime;

use stategraph_runs::{Deletion, Enqueued, NewRun, RunEnd, RunRow, RunStatus, ThreadEnd};
use tokio::sync::{mpsc, oneshot};

use super::plan::{Ids, Plan, Target, ThreadPlan, plan};
use super::{Outcome, api_error, execute::execute, follow, workers};
use crate::app::AppState;
use crate::assistants;
use crate::error::ApiError;
use crate::records::{AssistantRecord, RunRecord, ThreadDoc};
use crate::request::RunBody;
use crate::stream_event::StreamEvent;

/// How the caller follows a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Follow {
    /// It does not: a worker of whichever process claims the run (`POST …/runs`, crons).
    Background,
    /// It waits for the run's outcome (`runs/wait`).
    Wait,
    /// It reads the run's events, then its outcome (`runs/stream`).
    Stream,
}

/// A started run, and what its caller follows it by.
pub(crate) struct Started {
    /// The run as enqueued.
    pub(crate) run: RunRecord,
    pub(crate) thread_id: String,
    /// Whether the run's thread outlives it (a thread run, or a stateless run with
    /// `on_completion: "keep"`).
    pub(crate) stateful: bool,
    /// Whether the run was created with `stream_resumable: true` (its events carry ids).
    pub(crate) resumable: bool,
    /// The run's events, from its `metadata` on, closed once it is over ([`Follow::Stream`]
    /// only).
    pub(crate) events: mpsc::Receiver<StreamEvent>,
    /// The run's outcome once it is over ([`Follow::Wait`] and [`Follow::Stream`]).
    pub(crate) done: oneshot::Receiver<Outcome>,
}

impl Started {
    /// The run's id.
    pub(crate) fn run_id(&self) -> &str {
        &self.run.run_id
    }
}

/// Starts a run of `body` on `target`, followed as `follow` says.
///
/// A run on a thread waits for the thread's earlier runs (the `enqueue` strategy, the
/// default; `reject` fails instead while the thread is busy; `interrupt` and `rollback`
/// cancel the thread's runs in flight with that action).
pub(crate) async fn start(
    state: Arc<AppState>,
    target: Target,
    body: RunBody,
    follow: Follow,
) -> Result<Started, ApiError> {
    let assistant_ref = body
        .assistant_id
        .clone()
        .ok_or_else(|| ApiError::invalid("assistant_id is required"))?;
    // The assistant and the thread, read together.
    let assistant_key = assistants::key_of(&state, &assistant_ref).await?;
    let (assistant, stored) = match &target {
        Target::Thread(t) => {
            state
                .records
                .get_both::<AssistantRecord, ThreadDoc>(&assistant_key, t)
                .await?
        }
        Target::Stateless => (state.records.get(&assistant_key).await?, None),
    };
    let assistant = assistants::found(assistant)?;
    let Some(graph) = state.graphs.get(&assistant.graph_id) else {
        return Err(ApiError::not_found(format!(
            "Graph \"{}\" not found",
            assistant.graph_id
        )));
    };
    state.webhooks.check(body.webhook.as_ref()).await?;
    let plan = plan(&assistant, target, stored, &body, Ids::new())?;
    // An entrypoint takes any argument; a graph, a map of state keys.
    if let (Some(input), None) = (plan.kwargs.new_input(), graph.output_channel())
        && !input.is_object()
    {
        return Err(ApiError::invalid(format!(
            "input must be an object of state keys, got {input}"
        )));
    }
    workers::spawn(&state);
    // Taken before the run exists: nothing it does is missed.
    let bell = (follow != Follow::Background).then(|| state.runs.dispatch.watch_run(&plan.run_id));
    let (claimed, here) = enqueue(&state, &plan, follow).await?;
    let (tx, events) = mpsc::channel(256);
    let (done_tx, done) = oneshot::channel();
    if let Some(bell) = bell {
        let (state, run_id) = (Arc::clone(&state), plan.run_id.clone());
        let stream = follow == Follow::Stream;
        let early = Some(follow::Early { bell, here });
        tokio::spawn(async move {
            let row = if stream {
                follow::events(&state, &run_id, 0, &tx, early).await
            } else {
                follow::done(&state, &run_id, early).await
            };
            let _ = done_tx.send(follow::outcome(&state, row).await);
            drop(tx);
        });
    }
    let run = RunRecord::of(&claimed);
    Ok(Started {
        run,
        thread_id: plan.thread_id.clone(),
        stateful: plan.stateful(),
        resumable: plan.kwargs.resumable,
        events,
        done,
    })
}

/// Stores a new thread's document and enqueues the run (claimed for this process when its
/// caller follows it and it may start now, then executed here at once), and records what
/// the run changes of an existing thread's document if it starts the thread's work. The
/// run's row as enqueued (or claimed), and, when it executes here, where its executor says
/// how it ended.
async fn enqueue(
    state: &Arc<AppState>,
    plan: &Plan,
    follow: Follow,
) -> Result<(RunRow, Option<oneshot::Receiver<RunRow>>), ApiError> {
    // A process that shuts down claims nothing: another one executes the run.
    let worker = (follow != Follow::Background && !state.runs.is_draining())
        .then(|| state.runs.caller_name());
    let mut new = NewRun::new(&plan.run_id, &plan.thread_id)
        .assistant(&plan.assistant_id)
        .metadata(plan.metadata.clone())
        .kwargs(plan.kwargs.to_object()?)
        .multitask(plan.multitask)
        .delay(plan.delay);
    if plan.temporary() {
        new = new.temporary();
    }
    if let Some(w) = &worker {
        new = new.claimed_by(w.clone());
    }
    let pending = RunRow::pending(&new, 0, 0, SystemTime::now());
    // A new thread's document and the run are written together: one commit where the
    // database groups concurrent writes (a file's one writer connection does).
    let create = async {
        match &plan.thread {
            ThreadPlan::Create(doc) => state.records.put(doc).await.map(|()| true),
            _ => Ok(false),
        }
    };
    let (created, enqueued) = tokio::join!(create, state.runs.queue.enqueue(new));
    let created = match created {
        Ok(c) => c,
        Err(e) => {
            // The new thread's document was not written: the run must not stay without it.
            if let Ok(enqueued) = &enqueued {
                withdraw(state, &plan.run_id, enqueued, worker.as_deref()).await;
            }
            return Err(e);
        }
    };
    let enqueued = match enqueued {
        Ok(e) => e,
        Err(e) => {
            if created {
                let _ = state.records.delete::<ThreadDoc>(&plan.thread_id).await;
            }
            return Err(api_error(e));
        }
    };
    if enqueued.first
        && let ThreadPlan::Existing { doc, changed: true } = &plan.thread
    {
        // The run starts the thread's work: its graph, assistant and config are the run's.
        state.records.put(doc).await?;
    }
    if !plan.delay.is_zero() {
        // Due later: a worker of this process looks for it then (those of other processes
        // within their idle look).
        let (state, delay) = (Arc::clone(state), plan.delay);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            state.runs.dispatch.wake.notify_one();
        });
    }
    let Some(claimed) = enqueued.claimed else {
        return Ok((pending, None));
    };
    let Some(worker) = worker else {
        return Ok((claimed, None));
    };
    let (state, row) = (Arc::clone(state), claimed.clone());
    let (told, here) = oneshot::channel();
    tokio::spawn(async move {
        if let Some(ended) = execute(&state, row, &worker, false).await.ended {
            let _ = told.send(ended);
        }
        // No worker loop claims after this run by itself: one of this process looks.
        state.runs.dispatch.wake.notify_one();
    });
    Ok((claimed, Some(here)))
}

/// Removes run `run_id`, just enqueued (`enqueued`) on a new thread whose document could not
/// be written: a run claimed for `worker` ends deleted with its thread's state, a pending one
/// is deleted.
async fn withdraw(state: &AppState, run_id: &str, enqueued: &Enqueued, worker: Option<&str>) {
    let queue = state.runs.queue.as_ref();
    let done = match (&enqueued.claimed, worker) {
        (Some(_), Some(worker)) => queue
            .finish(
                RunEnd::new(run_id, worker, RunStatus::Error)
                    .thread(ThreadEnd::Delete)
                    .deleted(),
            )
            .await
            .map(|_| ()),
        _ => queue.delete(Deletion::Run(run_id)).await.map(|_| ()),
    };
    if let Err(e) = done {
        tracing::warn!(run_id, error = %e, "a run whose thread could not be stored was not removed");
    }
}
