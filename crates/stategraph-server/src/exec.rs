//! Starting a run: the run request resolved against its assistant and thread, its records,
//! and its place in the run queue (claimed at once by this task when a caller follows it and
//! its thread is free).

use std::sync::Arc;

use serde_json::{Map as JsonMap, Value as Json_, json};
use stategraph_checkpoint::runs::{ClaimedRun, Multitask, NewRun, RunStatus, ThreadStatus};
use stategraph_checkpoint::{now_iso, uuid6};
use stategraph_graph::Durability;
use tokio::sync::{mpsc, oneshot};

use crate::app::AppState;
use crate::assistants;
use crate::error::ApiError;
use crate::events::EVENTS;
use crate::executor::{Caller, execute};
use crate::graph::ServedGraph;
use crate::hub::StreamEvent;
use crate::records::{AssistantRecord, Records, RunRecord, ThreadRecord};
use crate::request::{RunBody, engine_config, merge_objects, run_start, stream_modes};
use crate::run_options::{IfNotExists, OnCompletion};
use crate::threads::live;
use crate::wire::checkpoint_id_of;
use crate::worker::{api_error, queue_of, set_run_status, spawn_workers, wait_turn};

/// How a run ended.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    /// The last state values streamed.
    pub(crate) values: Json_,
    /// Interrupts the run stopped on.
    pub(crate) interrupts: Vec<Json_>,
    /// `{"error", "message"}` when it failed.
    pub(crate) error: Option<Json_>,
}

impl Outcome {
    /// What `runs/wait` answers: the values, with `__interrupt__` if the run stopped on
    /// interrupts, or `{"__error__": …}`.
    pub(crate) fn to_wait_json(&self) -> Json_ {
        if let Some(e) = &self.error {
            return json!({ "__error__": e });
        }
        let mut values = self.values.clone();
        if !self.interrupts.is_empty()
            && let Some(o) = values.as_object_mut()
        {
            o.insert(
                "__interrupt__".into(),
                Json_::Array(self.interrupts.clone()),
            );
        }
        values
    }
}

/// A started run.
pub(crate) struct Started {
    pub(crate) run: RunRecord,
    pub(crate) thread_id: String,
    /// Whether the run's thread outlives it (a thread run, or a stateless run with
    /// `on_completion: "keep"`).
    pub(crate) stateful: bool,
    /// `metadata`, the events of the stream modes asked for, then `error` if the run failed,
    /// as the run's hub numbered them; closed once the run's records are final.
    pub(crate) events: mpsc::Receiver<StreamEvent>,
    /// Whether the run was created with `stream_resumable: true` (its events carry ids).
    pub(crate) resumable: bool,
    pub(crate) done: oneshot::Receiver<Outcome>,
}

impl Started {
    /// The run's id.
    pub(crate) fn run_id(&self) -> &str {
        &self.run.run_id
    }
}

/// Starts a run of `body` on `thread_id` (`None`: a stateless run on a temporary thread).
///
/// A run on a thread is recorded `pending` and waits for the thread's earlier runs (the
/// `enqueue` strategy, the default; `reject` fails instead while the thread is busy;
/// `interrupt` and `rollback` cancel the thread's runs in flight with that action), then
/// becomes `running`.
pub(crate) async fn start(
    state: Arc<AppState>,
    thread_id: Option<String>,
    body: RunBody,
) -> Result<Started, ApiError> {
    start_with(state, thread_id, body, false).await
}

/// Starts a background run of `body` on `thread_id` (`None`: a stateless run on a temporary
/// thread, deleted with its run when it ends unless `on_completion` is `"keep"`), as [`start`]
/// but through the run queue, without following its events: a worker of whichever process
/// claims it.
pub(crate) async fn start_background(
    state: Arc<AppState>,
    thread_id: Option<String>,
    body: RunBody,
) -> Result<Started, ApiError> {
    start_with(state, thread_id, body, true).await
}

/// [`start`]: a run on a thread is recorded `pending` and enqueued; unless `background`, this
/// task claims it at once when its thread is free and executes it here, or waits its turn
/// (or follows whichever worker claimed it). A waited or streamed stateless run on a
/// temporary thread executes here without the queue; a background one is queued on its
/// temporary thread, recorded until it ends.
async fn start_with(
    state: Arc<AppState>,
    thread_id: Option<String>,
    body: RunBody,
    background: bool,
) -> Result<Started, ApiError> {
    if body
        .config
        .as_ref()
        .is_some_and(|c| !c.is_null() && !c.is_object())
    {
        return Err(ApiError::invalid("config must be an object"));
    }
    let assistant_ref = body
        .assistant_id
        .clone()
        .ok_or_else(|| ApiError::invalid("assistant_id is required"))?;
    // The assistant and the thread, read together.
    let assistant_key = assistants::key_of(&state, &assistant_ref).await?;
    let (assistant, stored_thread) = match &thread_id {
        Some(t) => {
            state
                .records
                .get_both::<AssistantRecord, ThreadRecord>(&assistant_key, t)
                .await?
        }
        None => (state.records.get(&assistant_key).await?, None),
    };
    let assistant = assistants::found(assistant)?;
    let graph_id = assistant.graph_id.clone();
    let assistant_id = assistant.assistant_id.clone();
    let graph: Arc<dyn ServedGraph> = state
        .graphs
        .get(&graph_id)
        .cloned()
        .ok_or_else(|| ApiError::not_found(format!("Graph \"{graph_id}\" not found")))?;
    let (modes, mode_names) = stream_modes(body.stream_mode.as_ref())?;
    run_start(&body)?;
    state.webhooks.check(body.webhook.as_ref()).await?;
    // A stateless run deletes its thread when it ends (`on_completion: "delete"`, the
    // default); with `"keep"` the thread is created as any thread is and stays.
    let mut body = body;
    let thread_id = match body.on_completion.unwrap_or_default() {
        OnCompletion::Delete => thread_id,
        OnCompletion::Keep => {
            if thread_id.is_none() {
                body.if_not_exists = Some(IfNotExists::Create);
            }
            Some(thread_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string()))
        }
    };
    let stateful = thread_id.is_some();
    // A background stateless run is the queue's too, on a temporary thread recorded as any
    // thread is until the run ends.
    let queued = stateful || background;
    let queue = Arc::clone(queue_of(&state));
    let thread_id = thread_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let run_id = uuid6(None);
    let strategy = body.multitask_strategy.unwrap_or_default();

    // The run's `configurable` and `context` as the reference builds them.
    let given_config = body.config.clone().filter(Json_::is_object);
    let given_configurable = given_config
        .as_ref()
        .and_then(|c| c.get("configurable"))
        .filter(|c| c.is_object())
        .cloned();
    let given_context = body
        .context
        .clone()
        .filter(|c| c.as_object().is_some_and(|o| !o.is_empty()));
    if given_context.is_some()
        && given_configurable
            .as_ref()
            .and_then(Json_::as_object)
            .is_some_and(|c| !c.is_empty())
    {
        return Err(ApiError::new(
            axum::http::StatusCode::BAD_REQUEST,
            "Cannot specify both configurable and context. Prefer setting context alone. \
             Context was introduced in LangGraph 0.6.0 and is the long term planned \
             replacement for configurable.",
        ));
    }
    let context = match &given_context {
        Some(c) => c.clone(),
        None => given_configurable
            .clone()
            .unwrap_or_else(|| Json_::Object(JsonMap::new())),
    };
    let mut configurable = match &given_context {
        Some(c) => merge_objects([Some(c)]),
        None => merge_objects([given_configurable.as_ref()]),
    };
    if let Some(id) = body
        .checkpoint_id
        .clone()
        .or_else(|| checkpoint_id_of(body.checkpoint.as_ref()))
    {
        configurable.insert("checkpoint_id".into(), json!(id));
    }
    if let Some(Json_::Object(c)) = &body.checkpoint {
        configurable.extend(c.clone());
    }
    configurable.insert("langgraph_auth_user".into(), Json_::Null);
    configurable.insert("langgraph_auth_user_id".into(), json!(""));
    configurable.insert("langgraph_auth_permissions".into(), json!([]));
    if configurable
        .get("langgraph_request_id")
        .is_none_or(Json_::is_null)
    {
        configurable.insert(
            "langgraph_request_id".into(),
            json!(uuid::Uuid::new_v4().to_string()),
        );
    }
    let user_id = configurable
        .get("user_id")
        .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
        .cloned()
        .unwrap_or_else(|| json!(""));
    configurable.insert("run_id".into(), json!(run_id));
    configurable.insert("thread_id".into(), json!(thread_id));
    configurable.insert("graph_id".into(), json!(graph_id));
    configurable.insert("assistant_id".into(), json!(assistant_id));
    configurable.insert("user_id".into(), user_id);

    if !stateful
        && body
            .command
            .as_ref()
            .is_some_and(|c| c.get("resume").is_some_and(|r| !r.is_null()))
    {
        return Err(ApiError::new(
            axum::http::StatusCode::BAD_REQUEST,
            "You must provide a thread_id when resuming.",
        ));
    }
    let mut thread_metadata = None;
    let mut thread_started = None;
    if queued && !stateful {
        // The temporary thread: created with the run's record, with its graph and assistant.
        let mut thread = ThreadRecord::new(&thread_id, JsonMap::new());
        thread.start_run(&graph_id, &assistant, given_config.as_ref());
        thread_started = Some(thread);
    }
    // Where the queue writes the records, it decides in the enqueue's own transaction whether
    // this run starts the thread's work (no other run pending or running), so the thread's
    // status is not read first; a `reject` is the queue's too.
    let queue_decides = state.records.colocated();
    let mut start_if_idle = None;
    if stateful {
        let created = stored_thread.is_none();
        let mut thread = match stored_thread {
            Some(t) if queue_decides => t,
            // Its status read from the queue (busy whichever process runs its runs).
            Some(t) => live(&state, &thread_id, Some(t)).await?,
            None if body.if_not_exists == Some(IfNotExists::Create) => {
                ThreadRecord::new(&thread_id, JsonMap::new())
            }
            None => return Err(ApiError::not_found("Thread or assistant not found.")),
        };
        let busy = !queue_decides && thread.status == ThreadStatus::Busy;
        // The queue still has the last word on `reject` when it enqueues.
        if busy && strategy == Multitask::Reject {
            return Err(ApiError::conflict(
                "Thread is already running a task. Wait for it to finish or choose a \
                 different multitask strategy.",
            ));
        }
        // No lock, in this process or across processes: the queue orders the writers. A
        // thread the queue calls idle has no run that could settle it meanwhile (a run's
        // final records are written before or with the queue's end of it), and a busy
        // thread's record stays as it is here: its runs settle it.
        if !busy {
            // Stored with the run's record, below.
            thread.start_run(&graph_id, &assistant, given_config.as_ref());
        }
        thread_metadata = Some(Json_::Object(thread.metadata.clone()));
        if queue_decides && !created {
            start_if_idle = Some(thread);
        } else if !busy {
            // A thread created by this request has no runs.
            thread_started = Some(thread);
        }
    }
    let assistant_metadata = Json_::Object(assistant.metadata.clone());
    let assistant_config = Json_::Object(assistant.config.clone());
    let mut metadata = merge_objects([
        Some(&assistant_metadata),
        thread_metadata.as_ref(),
        given_config.as_ref().and_then(|c| c.get("metadata")),
    ]);
    if let Some(m) = &body.metadata {
        metadata.extend(m.clone());
    }
    metadata.insert("assistant_id".into(), json!(assistant_id));

    let mut kwargs_config = merge_objects([Some(&assistant_config), given_config.as_ref()]);
    kwargs_config.insert("configurable".into(), Json_::Object(configurable.clone()));
    kwargs_config.insert("metadata".into(), Json_::Object(metadata.clone()));
    let checkpoint_during = body.checkpoint_during.unwrap_or(true);
    let durability = body.durability.map_or(
        if checkpoint_during { "async" } else { "exit" },
        Durability::as_str,
    );
    let temporary = !stateful && body.on_completion.unwrap_or_default() == OnCompletion::Delete;
    let assistant_context = Json_::Object(assistant.context.clone());
    let kwargs = json!({
            "input": body.input,
            "command": body.command,
            "config": kwargs_config,
            "context": merge_objects([Some(&assistant_context), Some(&context)]),
            "stream_mode": modes
                .iter()
                .map(|m| m.as_str())
                .chain(mode_names.iter().any(|n| n == EVENTS).then_some(EVENTS))
                .collect::<Vec<_>>(),
            "interrupt_before": body.interrupt_before,
            "interrupt_after": body.interrupt_after,
            "webhook": body.webhook,
            "feedback_keys": body.feedback_keys,
            "temporary": temporary,
            "subgraphs": body.stream_subgraphs.unwrap_or(false),
            "resumable": body.stream_resumable.unwrap_or(false),
            "checkpoint_during": checkpoint_during,
            "durability": durability,
    });
    let now = now_iso();
    let run = RunRecord {
        run_id: run_id.clone(),
        thread_id: thread_id.clone(),
        assistant_id,
        created_at: now.clone(),
        updated_at: now,
        status: RunStatus::Pending,
        metadata: metadata.clone(),
        kwargs: match kwargs {
            Json_::Object(k) => k,
            _ => JsonMap::new(),
        },
        multitask_strategy: strategy,
        extra: JsonMap::from_iter([("langsmith_session_name".to_owned(), Json_::Null)]),
    };
    // What the executor will ask of the engine, checked now: a bad request is refused here.
    engine_config(&thread_id, &body, &configurable, &metadata, 1)?;
    let resumable = body.resumable();
    let (tx, events) = mpsc::channel(64);
    let (done_tx, done) = oneshot::channel();
    let caller = Caller {
        events: tx,
        done: done_tx,
    };
    spawn_workers(&state);
    if !queued {
        // Not the queue's: a stateless run executes here, at once.
        let payload = json!({ "body": body, "run": run });
        let claimed = ClaimedRun::new(run_id, thread_id.clone(), payload, 1);
        let task_state = Arc::clone(&state);
        tokio::spawn(async move { execute(&task_state, claimed, None, Some(caller)).await });
        return Ok(Started {
            run,
            thread_id,
            stateful,
            events,
            resumable,
            done,
        });
    }
    // The thread's record (when this run starts it) and the run's, together: in the
    // enqueue's transaction where the queue can write them, else first, through the store.
    let mut writes = Vec::with_capacity(2);
    if let Some(thread) = &thread_started {
        writes.push(Records::put_write(thread)?);
    }
    writes.push(Records::put_write(&run)?);
    let records = match state.records.with_queue(writes).await? {
        Some(records) => Some(match &start_if_idle {
            Some(thread) => records.if_idle(vec![Records::put_write(thread)?]),
            None => records,
        }),
        None => None,
    };
    let written_first = records.is_none();
    let worker = (!background).then(|| state.queue.caller_name());
    let payload = json!({ "body": body, "run": run });
    let mut new_run = NewRun::new(&run_id, &thread_id, payload).multitask(strategy);
    if let Some(w) = &worker {
        new_run = new_run.claimed_by(w.clone());
    }
    if let Some(records) = records {
        new_run = new_run.records(records);
    }
    let enqueued = match queue.enqueue(new_run).await {
        Ok(e) => e,
        Err(e) => {
            if written_first {
                let _ = state.records.delete::<RunRecord>(&run_id).await;
                if !stateful {
                    let _ = state.records.delete::<ThreadRecord>(&thread_id).await;
                }
            }
            return Err(api_error(e));
        }
    };
    for ended in &enqueued.ended {
        if strategy == Multitask::Rollback {
            let _ = state.records.delete::<RunRecord>(ended).await;
        } else {
            set_run_status(&state, ended, RunStatus::Interrupted).await;
        }
    }
    if let Some(worker) = worker {
        let task_state = Arc::clone(&state);
        match enqueued.claimed {
            Some(claimed) => {
                tokio::spawn(async move {
                    execute(&task_state, claimed, Some(&worker), Some(caller)).await;
                    task_state.queue.ran();
                });
            }
            None => {
                // The thread is busy: the caller hears of its run at once, then waits.
                let metadata = StreamEvent::new(
                    &run_id,
                    1,
                    "metadata",
                    json!({ "run_id": run_id, "attempt": 1 }),
                );
                let _ = caller.events.try_send(metadata);
                tokio::spawn(wait_turn(
                    task_state,
                    run_id,
                    thread_id.clone(),
                    graph,
                    worker,
                    caller,
                ));
            }
        }
    }
    Ok(Started {
        run,
        thread_id,
        stateful,
        events,
        resumable,
        done,
    })
}
