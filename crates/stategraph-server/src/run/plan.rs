//! The front door of a run, without side effects: a request resolved against its assistant
//! and its thread into what the run queue stores of the run (its metadata, its typed
//! arguments, its strategy and delay) and what the run does to its thread's document, as
//! LangGraph's server resolves it.

use std::time::Duration;

use serde_json::{Value as Json, json};
use stategraph_runs::Multitask;

use super::kwargs::RunKwargs;
use crate::error::ApiError;
use crate::records::{AssistantRecord, Object, ThreadDoc};
use crate::request::{RunBody, merge_objects};
use crate::run_options::{IfNotExists, OnCompletion};
use crate::wire::checkpoint_id_of;

/// Where a run executes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// On a thread (`/threads/{thread_id}/runs…`).
    Thread(String),
    /// Stateless (`/runs…`): on a thread of its own.
    Stateless,
}

/// The ids a run gets: its own, the thread a stateless run makes, the request's.
#[derive(Clone, Debug)]
pub(crate) struct Ids {
    pub(crate) run_id: String,
    pub(crate) new_thread_id: String,
    pub(crate) request_id: String,
}

impl Ids {
    /// New ids.
    pub(crate) fn new() -> Self {
        Self {
            run_id: stategraph_checkpoint::uuid6(None),
            new_thread_id: uuid::Uuid::new_v4().to_string(),
            request_id: uuid::Uuid::new_v4().to_string(),
        }
    }
}

/// What a run does to its thread's document.
#[derive(Clone, Debug)]
pub(crate) enum ThreadPlan {
    /// None: a stateless run's thread lives and dies with the run, in the queue only.
    Temporary,
    /// A new thread: stored before the run is enqueued.
    Create(ThreadDoc),
    /// The document as the run leaves it if it starts the thread's work, and whether that
    /// changes it.
    Existing { doc: ThreadDoc, changed: bool },
}

/// A run request, resolved.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub(crate) run_id: String,
    pub(crate) thread_id: String,
    pub(crate) assistant_id: String,
    pub(crate) metadata: Object,
    pub(crate) kwargs: RunKwargs,
    pub(crate) multitask: Multitask,
    /// How long after its creation it may start (`after_seconds`).
    pub(crate) delay: Duration,
    pub(crate) thread: ThreadPlan,
}

impl Plan {
    /// Whether the run's thread lives only as long as the run.
    pub(crate) fn temporary(&self) -> bool {
        matches!(self.thread, ThreadPlan::Temporary)
    }

    /// Whether its thread outlives it.
    pub(crate) fn stateful(&self) -> bool {
        !self.temporary()
    }
}

/// Resolves `body` for `assistant` on `target` (whose document, if it has one, is
/// `stored`): 4xx naming what does not fit, as LangGraph's server answers.
pub(crate) fn plan(
    assistant: &AssistantRecord,
    target: Target,
    stored: Option<ThreadDoc>,
    body: &RunBody,
    ids: Ids,
) -> Result<Plan, ApiError> {
    if body
        .config
        .as_ref()
        .is_some_and(|c| !c.is_null() && !c.is_object())
    {
        return Err(ApiError::invalid("config must be an object"));
    }
    let given_config = body.config.clone().filter(Json::is_object);
    let (thread_id, thread) = thread_plan(assistant, target, stored, body, &ids)?;
    let metadata = metadata(assistant, &thread, given_config.as_ref(), body);
    let (mut configurable, context) = configurable_and_context(body, given_config.as_ref(), &ids)?;
    for (key, value) in [
        ("run_id", &ids.run_id),
        ("thread_id", &thread_id),
        ("graph_id", &assistant.graph_id),
        ("assistant_id", &assistant.assistant_id),
    ] {
        configurable.insert(key.into(), json!(value));
    }
    let assistant_config = Json::Object(assistant.config.clone());
    let mut config = merge_objects([Some(&assistant_config), given_config.as_ref()]);
    config.insert("configurable".into(), Json::Object(configurable));
    config.insert("metadata".into(), Json::Object(metadata.clone()));
    let assistant_context = Json::Object(assistant.context.clone());
    let context = merge_objects([Some(&assistant_context), Some(&context)]);
    let kwargs = kwargs(
        body,
        config,
        context,
        matches!(thread, ThreadPlan::Temporary),
    )?;
    // What the executor will ask of the engine, checked now: a bad request is refused here.
    kwargs.start()?;
    kwargs.engine_config(&thread_id)?;
    Ok(Plan {
        run_id: ids.run_id,
        thread_id,
        assistant_id: assistant.assistant_id.clone(),
        metadata,
        kwargs,
        multitask: body.multitask_strategy.unwrap_or_default(),
        delay: after_seconds(body.after_seconds),
        thread,
    })
}

/// The run's thread — a thread of the request's, or a stateless run's own — and what the
/// run does to its document.
fn thread_plan(
    assistant: &AssistantRecord,
    target: Target,
    stored: Option<ThreadDoc>,
    body: &RunBody,
    ids: &Ids,
) -> Result<(String, ThreadPlan), ApiError> {
    // A stateless run deletes its thread when it ends (`on_completion: "delete"`, the
    // default); with `"keep"` the thread is created as any thread is and stays.
    let (thread_id, create) = match (target, body.on_completion.unwrap_or_default()) {
        (Target::Thread(id), _) => (id, body.if_not_exists == Some(IfNotExists::Create)),
        (Target::Stateless, OnCompletion::Keep) => (ids.new_thread_id.clone(), true),
        (Target::Stateless, OnCompletion::Delete) => {
            let resumes = body
                .command
                .as_ref()
                .is_some_and(|c| c.get("resume").is_some_and(|r| !r.is_null()));
            if resumes {
                return Err(ApiError::new(
                    axum::http::StatusCode::BAD_REQUEST,
                    "You must provide a thread_id when resuming.",
                ));
            }
            return Ok((ids.new_thread_id.clone(), ThreadPlan::Temporary));
        }
    };
    let given_config = body.config.as_ref().filter(|c| c.is_object());
    let graph_id = &assistant.graph_id;
    let plan = match stored {
        Some(mut doc) => {
            let changed = doc.start_run(graph_id, assistant, given_config);
            ThreadPlan::Existing { doc, changed }
        }
        None if create => {
            let mut doc = ThreadDoc::new(&thread_id, Object::new());
            doc.start_run(graph_id, assistant, given_config);
            ThreadPlan::Create(doc)
        }
        None => return Err(ApiError::not_found("Thread or assistant not found.")),
    };
    Ok((thread_id, plan))
}

/// The run's metadata: the assistant's, the thread's (as the run leaves it), the request's
/// config's and its own, then the assistant's id (which cannot be given).
fn metadata(
    assistant: &AssistantRecord,
    thread: &ThreadPlan,
    given_config: Option<&Json>,
    body: &RunBody,
) -> Object {
    let thread_metadata = match thread {
        ThreadPlan::Temporary => None,
        ThreadPlan::Create(doc) | ThreadPlan::Existing { doc, .. } => {
            Some(Json::Object(doc.metadata.clone()))
        }
    };
    let assistant_metadata = Json::Object(assistant.metadata.clone());
    let mut metadata = merge_objects([
        Some(&assistant_metadata),
        thread_metadata.as_ref(),
        given_config.and_then(|c| c.get("metadata")),
    ]);
    if let Some(m) = &body.metadata {
        metadata.extend(m.clone());
    }
    metadata.insert("assistant_id".into(), json!(assistant.assistant_id));
    metadata
}

/// The run's arguments, as LangGraph's server records them.
fn kwargs(
    body: &RunBody,
    config: Object,
    context: Object,
    temporary: bool,
) -> Result<RunKwargs, ApiError> {
    let checkpoint_during = body.checkpoint_during.unwrap_or(true);
    let durability = body.durability.map_or(
        if checkpoint_during { "async" } else { "exit" },
        stategraph_graph::Durability::as_str,
    );
    let (_, mode_names) = crate::request::stream_modes(body.stream_mode.as_ref())?;
    let given = |v: &Option<Json>| v.clone().unwrap_or(Json::Null);
    Ok(RunKwargs {
        input: given(&body.input),
        command: given(&body.command),
        config,
        context,
        stream_mode: mode_names,
        interrupt_before: given(&body.interrupt_before),
        interrupt_after: given(&body.interrupt_after),
        webhook: given(&body.webhook),
        feedback_keys: given(&body.feedback_keys),
        temporary,
        subgraphs: body.stream_subgraphs.unwrap_or(false),
        resumable: body.stream_resumable.unwrap_or(false),
        checkpoint_during,
        durability: durability.to_owned(),
    })
}

/// The run's `configurable` (before the ids the server adds) and `context`, as the
/// reference builds them from the request's `config.configurable`, `context`, `checkpoint`
/// and `checkpoint_id`.
fn configurable_and_context(
    body: &RunBody,
    given_config: Option<&Json>,
    ids: &Ids,
) -> Result<(Object, Json), ApiError> {
    let given_configurable = given_config
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
            .and_then(Json::as_object)
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
            .unwrap_or_else(|| Json::Object(Object::new())),
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
    if let Some(Json::Object(c)) = &body.checkpoint {
        configurable.extend(c.clone());
    }
    configurable.insert("langgraph_auth_user".into(), Json::Null);
    configurable.insert("langgraph_auth_user_id".into(), json!(""));
    configurable.insert("langgraph_auth_permissions".into(), json!([]));
    if configurable
        .get("langgraph_request_id")
        .is_none_or(Json::is_null)
    {
        configurable.insert("langgraph_request_id".into(), json!(ids.request_id));
    }
    let user_id = configurable
        .get("user_id")
        .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
        .cloned()
        .unwrap_or_else(|| json!(""));
    configurable.insert("user_id".into(), user_id);
    Ok((configurable, context))
}

/// `after_seconds` as a delay: none for a number that is not positive (as the reference
/// starts such a run at once), at most a century.
fn after_seconds(given: Option<f64>) -> Duration {
    const CENTURY: f64 = 100.0 * 365.25 * 24.0 * 3600.0;
    match given {
        Some(s) if s > 0.0 => Duration::from_secs_f64(s.min(CENTURY)),
        _ => Duration::ZERO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::AssistantRecord;

    fn assistant() -> AssistantRecord {
        let mut a = AssistantRecord::new("a-1".into(), "seed".into(), "seed".into());
        a.metadata.insert("created_by".into(), json!("system"));
        a.config.insert("recursion_limit".into(), json!(30));
        a.config
            .insert("configurable".into(), json!({"model": "small"}));
        a.context.insert("tone".into(), json!("dry"));
        a
    }

    fn ids() -> Ids {
        Ids {
            run_id: "run-1".into(),
            new_thread_id: "tmp-1".into(),
            request_id: "req-1".into(),
        }
    }

    fn body(v: Json) -> RunBody {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_run_on_a_new_thread_creates_it_with_its_graph_and_config() {
        let b = body(json!({
            "input": {"foo": ""}, "if_not_exists": "create",
            "config": {"configurable": {"user_id": "u-1"}, "tags": ["x"]},
            "metadata": {"kind": "test"}, "stream_mode": ["values", "updates"],
        }));
        let p = plan(&assistant(), Target::Thread("t-1".into()), None, &b, ids()).unwrap();
        assert_eq!((p.run_id.as_str(), p.thread_id.as_str()), ("run-1", "t-1"));
        let ThreadPlan::Create(doc) = &p.thread else {
            panic!("{:?}", p.thread)
        };
        assert_eq!(doc.metadata["graph_id"], "seed");
        assert_eq!(doc.config["configurable"], json!({"model": "small"}));
        assert_eq!(doc.config["tags"], json!(["x"]));
        assert_eq!(
            json!(p.metadata),
            json!({"created_by": "system", "graph_id": "seed", "assistant_id": "a-1", "kind": "test"})
        );
        let configurable = p.kwargs.configurable();
        for (k, v) in [
            ("run_id", "run-1"),
            ("thread_id", "t-1"),
            ("graph_id", "seed"),
            ("assistant_id", "a-1"),
            ("user_id", "u-1"),
            ("langgraph_request_id", "req-1"),
        ] {
            assert_eq!(configurable[k], json!(v), "{k}");
        }
        assert_eq!(p.kwargs.config["recursion_limit"], json!(30));
        assert_eq!(p.kwargs.metadata(), p.metadata);
        // No context given: the configurable stands for it, after the assistant's.
        assert_eq!(
            json!(p.kwargs.context),
            json!({"tone": "dry", "user_id": "u-1"})
        );
        assert_eq!(p.kwargs.stream_mode, ["values", "updates"]);
        assert_eq!(p.kwargs.durability, "async");
        assert!(!p.kwargs.temporary && p.stateful());
        assert_eq!(p.multitask, Multitask::Enqueue);
        assert_eq!(p.delay, Duration::ZERO);
    }

    #[test]
    fn an_existing_thread_changes_only_if_the_run_brings_something_new() {
        let a = assistant();
        let mut doc = ThreadDoc::new("t-1", Object::new());
        doc.start_run("seed", &a, None);
        let b = body(json!({"input": null}));
        let p = plan(
            &a,
            Target::Thread("t-1".into()),
            Some(doc.clone()),
            &b,
            ids(),
        )
        .unwrap();
        assert!(matches!(
            p.thread,
            ThreadPlan::Existing { changed: false, .. }
        ));
        let b = body(json!({"config": {"tags": ["new"]}}));
        let p = plan(&a, Target::Thread("t-1".into()), Some(doc), &b, ids()).unwrap();
        assert!(matches!(
            p.thread,
            ThreadPlan::Existing { changed: true, .. }
        ));
    }

    #[test]
    fn stateless_runs_live_on_a_thread_of_their_own() {
        let b = body(json!({"input": {}, "after_seconds": 1.5, "multitask_strategy": "reject"}));
        let p = plan(&assistant(), Target::Stateless, None, &b, ids()).unwrap();
        assert_eq!(p.thread_id, "tmp-1");
        assert!(p.temporary() && p.kwargs.temporary);
        assert_eq!(p.delay, Duration::from_millis(1500));
        assert_eq!(p.multitask, Multitask::Reject);
        assert!(!p.metadata.contains_key("graph_id"), "no thread metadata");
        let early = body(json!({"input": {}, "after_seconds": -1}));
        let at_once = plan(&assistant(), Target::Stateless, None, &early, ids()).unwrap();
        assert_eq!(at_once.delay, Duration::ZERO, "not positive: at once");
        let keep = body(json!({"input": {}, "on_completion": "keep"}));
        let p = plan(&assistant(), Target::Stateless, None, &keep, ids()).unwrap();
        assert!(matches!(p.thread, ThreadPlan::Create(_)));
        assert!(!p.kwargs.temporary);
    }

    #[test]
    fn requests_that_do_not_fit_are_refused() {
        let a = assistant();
        let t = || Target::Thread("t-1".into());
        let err = |v: Json, target: Target| plan(&a, target, None, &body(v), ids()).unwrap_err();
        assert_eq!(err(json!({"input": {}}), t()).status.as_u16(), 404);
        assert_eq!(
            err(json!({"config": [1]}), t()).detail,
            "config must be an object"
        );
        let both = json!({"if_not_exists": "create", "context": {"a": 1},
            "config": {"configurable": {"b": 2}}});
        assert_eq!(err(both, t()).status.as_u16(), 400);
        let resume = json!({"command": {"resume": "yes"}});
        assert_eq!(err(resume, Target::Stateless).status.as_u16(), 400);
        let limit = json!({"if_not_exists": "create", "config": {"recursion_limit": 0}});
        assert_eq!(err(limit, t()).status.as_u16(), 422);
        let mode = json!({"stream_mode": "nope"});
        assert_eq!(err(mode, Target::Stateless).status.as_u16(), 422);
    }

    #[test]
    fn a_checkpoint_given_goes_into_the_configurable() {
        let b = body(json!({"if_not_exists": "create", "checkpoint_id": "c-1",
            "checkpoint": {"checkpoint_ns": "sub"}}));
        let p = plan(&assistant(), Target::Thread("t".into()), None, &b, ids()).unwrap();
        let c = p.kwargs.configurable();
        assert_eq!(
            (c["checkpoint_id"].clone(), c["checkpoint_ns"].clone()),
            (json!("c-1"), json!("sub"))
        );
        let config = p.kwargs.engine_config("t").unwrap();
        assert_eq!(config.checkpoint_id.as_deref(), Some("c-1"));
        assert_eq!(config.checkpoint_ns, "sub");
    }
}
