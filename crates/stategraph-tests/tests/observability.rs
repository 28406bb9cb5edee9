//! Traces exported to a real OpenTelemetry backend: the ReAct agent (a scripted chat server
//! and a `get_weather` tool) runs with OTLP export to Arize Phoenix (`scripts/phoenix.sh
//! start`, or `STATEGRAPH_TEST_PHOENIX_URL`), and the trace is read back from Phoenix's REST
//! API: one trace, the graph's span at its root, a span per super-step, the `agent` and
//! `tools` tasks under their steps, the model call (OpenInference kind `LLM`, the model's
//! name and token counts) under `agent`, the tool call (`TOOL`, its name) under `tools`, and
//! the checkpointer's calls under the steps and the run.
//!
//! One test per binary: it installs the process's `tracing` subscriber.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value as Json;
use stategraph::agent::{MessagesUpdate, create_react_agent};
use stategraph::server::telemetry::{self, TelemetryOptions};
use stategraph::store::{InMemoryStore, SearchOptions};
use stategraph::{
    Durability, DynState, END, Map, Message, NodeError, RunConfig, START, Schema, StateGraph,
};

mod common;
use common::weather_agent::{weather_model, weather_tool};

/// A span as Phoenix's REST API lists it.
#[derive(Debug, Clone)]
struct Span {
    id: String,
    parent: Option<String>,
    trace: String,
    name: String,
    kind: String,
    attributes: Json,
}

/// The spans of project `project` (Phoenix lists them newest first, a page at a time).
fn spans(phoenix: &str, project: &str) -> Vec<Span> {
    let url = format!("{phoenix}/v1/projects/{project}/spans?limit=1000");
    let body: Json = match ureq::get(&url).call() {
        Ok(mut r) => r.body_mut().read_json().unwrap(),
        Err(ureq::Error::StatusCode(404)) => return Vec::new(),
        Err(e) => panic!(
            "Phoenix at {phoenix} does not answer ({e}): start it with `scripts/phoenix.sh \
             start`, or set STATEGRAPH_TEST_PHOENIX_URL"
        ),
    };
    body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| Span {
            id: s["context"]["span_id"].as_str().unwrap().to_owned(),
            parent: s["parent_id"].as_str().map(str::to_owned),
            trace: s["context"]["trace_id"].as_str().unwrap().to_owned(),
            name: s["name"].as_str().unwrap().to_owned(),
            kind: s["span_kind"].as_str().unwrap_or_default().to_owned(),
            attributes: s["attributes"].clone(),
        })
        .collect()
}

/// An attribute of a span, whether Phoenix nests dotted keys or keeps them flat.
fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a Json> {
    if let Some(v) = span.attributes.get(key) {
        return Some(v);
    }
    key.split('.')
        .try_fold(&span.attributes, |at, part| at.get(part))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_react_agent_run_is_one_trace_in_phoenix() {
    let phoenix = stategraph_testkit::services::phoenix_url();
    let project = stategraph_testkit::services::scratch_name("stategraph-trace");
    // Fails here, not later, when Phoenix is not running.
    spans(&phoenix, "default");
    let telemetry = telemetry::init(
        TelemetryOptions::new()
            .level("warn")
            .otlp_endpoint(&phoenix)
            .service_name("stategraph-tests")
            .resource_attribute("openinference.project.name", &project),
    )
    .unwrap();
    assert_eq!(telemetry.otlp_endpoint(), Some(phoenix.as_str()));

    let (_server, model) = weather_model("Answer: ", "call_").await;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("trace.sqlite").display());
    let saver = stategraph::open_saver(&url).await.unwrap();
    let agent = create_react_agent(model, [weather_tool()])
        .checkpointer(saver)
        .build()
        .unwrap();
    let out = agent
        .invoke(
            MessagesUpdate::messages([Message::human("Weather in Paris?")]),
            // `sync`: each step's checkpoint is written inside its step. (With the default
            // `async`, a background writer groups the saves that queue up while it writes,
            // under the step that handed the first over, so where they land is timing.)
            RunConfig::thread("traced").with_durability(Durability::Sync),
        )
        .await
        .unwrap();
    assert_eq!(out.messages.len(), 4);
    // A second run, of a graph whose node writes to the store and searches it.
    let mut memory = StateGraph::<DynState>::with_schema(Schema::new().last_value("found"));
    memory.add_node("remember", |_s, ctx| async move {
        let store = ctx.store().ok_or_else(|| NodeError::new("no store"))?;
        let fact = serde_json::json!({"data": "pizza"});
        store
            .put(&["u1", "memories"], "m1", fact)
            .await
            .map_err(|e| NodeError::new(e.to_string()))?;
        let hits = store
            .search(&["u1"], SearchOptions::new().limit(5))
            .await
            .map_err(|e| NodeError::new(e.to_string()))?;
        let n = i64::try_from(hits.len()).unwrap_or_default();
        Ok(Map::from_iter([("found", stategraph::Value::from(n))]))
    });
    memory.add_edge(START, "remember").add_edge("remember", END);
    let memory = memory
        .compile()
        .unwrap()
        .with_store(Arc::new(InMemoryStore::new()));
    let found = memory
        .invoke_values(Map::new(), RunConfig::default())
        .await
        .unwrap();
    assert_eq!(found.get("found"), Some(&stategraph::Value::from(1_i64)));
    telemetry.shutdown();

    // Phoenix ingests asynchronously: wait for both runs.
    let mut everything = Vec::new();
    for _ in 0..100 {
        everything = spans(&phoenix, &project);
        if everything.iter().any(|s| s.kind == "TOOL")
            && everything.iter().any(|s| s.name == "store.search")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The store's calls: the second run's trace, under the node that made them.
    let store_trace = everything
        .iter()
        .find(|s| s.name == "store.search")
        .map(|s| s.trace.clone())
        .expect("a store.search span");
    let (found, memory_run): (Vec<Span>, Vec<Span>) =
        everything.into_iter().partition(|s| s.trace != store_trace);
    let parent_name = |s: &Span| {
        let parent = s.parent.as_deref()?;
        memory_run
            .iter()
            .find(|p| p.id == parent)
            .map(|p| p.name.clone())
    };
    let search = memory_run
        .iter()
        .find(|s| s.name == "store.search")
        .unwrap();
    assert_eq!(search.kind, "RETRIEVER");
    assert_eq!(attr(search, "store.namespace"), Some(&Json::from("u1")));
    assert_eq!(attr(search, "results"), Some(&Json::from(1)));
    assert_eq!(parent_name(search).as_deref(), Some("remember"));
    let put = memory_run.iter().find(|s| s.name == "store.put").unwrap();
    assert_eq!(
        attr(put, "store.namespace"),
        Some(&Json::from("u1.memories"))
    );
    assert_eq!(parent_name(put).as_deref(), Some("remember"));

    let by_id: HashMap<&str, &Span> = found.iter().map(|s| (s.id.as_str(), s)).collect();
    let parent_of = |s: &Span| s.parent.as_deref().and_then(|p| by_id.get(p).copied());
    let named = |name: &str| -> Vec<&Span> { found.iter().filter(|s| s.name == name).collect() };

    let traces: std::collections::BTreeSet<&str> = found.iter().map(|s| s.trace.as_str()).collect();
    assert_eq!(traces.len(), 1, "one trace: {found:#?}");
    let root: Vec<&Span> = found.iter().filter(|s| s.parent.is_none()).collect();
    assert_eq!(root.len(), 1, "{found:#?}");
    let root = root[0];
    assert_eq!(
        (root.name.as_str(), root.kind.as_str()),
        ("LangGraph", "CHAIN")
    );
    assert_eq!(attr(root, "session.id"), Some(&Json::from("traced")));

    // Steps under the run: the input's (step 0), the agent's two turns and the tool's
    // between them.
    let steps: Vec<&Span> = found
        .iter()
        .filter(|s| s.name.starts_with("step "))
        .collect();
    assert_eq!(steps.len(), 4, "{found:#?}");
    assert!(
        steps
            .iter()
            .all(|s| parent_of(s).map(|p| &p.id) == Some(&root.id))
    );
    let tasks = |node: &str| -> Vec<&Span> {
        named(node)
            .into_iter()
            .filter(|t| parent_of(t).is_some_and(|p| p.name.starts_with("step ")))
            .collect()
    };
    assert_eq!(tasks("agent").len(), 2, "{found:#?}");
    assert_eq!(tasks("tools").len(), 1, "{found:#?}");
    assert!(tasks("agent").iter().all(|t| t.kind == "CHAIN"));

    // The model calls under the agent's tasks: their model and token counts.
    let llm: Vec<&Span> = found.iter().filter(|s| s.kind == "LLM").collect();
    assert_eq!(llm.len(), 2, "{found:#?}");
    for call in &llm {
        assert_eq!(parent_of(call).map(|p| p.name.as_str()), Some("agent"));
        assert_eq!(call.name, "replay");
        assert_eq!(attr(call, "llm.model_name"), Some(&Json::from("replay")));
        for count in ["llm.token_count.prompt", "llm.token_count.completion"] {
            assert!(
                attr(call, count)
                    .and_then(Json::as_i64)
                    .is_some_and(|n| n > 0),
                "{count}: {call:#?}"
            );
        }
    }
    // The tool call under the tools task.
    let tool: Vec<&Span> = found.iter().filter(|s| s.kind == "TOOL").collect();
    assert_eq!(tool.len(), 1, "{found:#?}");
    assert_eq!(tool[0].name, "get_weather");
    assert_eq!(attr(tool[0], "tool.name"), Some(&Json::from("get_weather")));
    assert_eq!(parent_of(tool[0]).map(|p| p.name.as_str()), Some("tools"));

    // Checkpointer calls, each naming its backend, under a step or the run.
    let mut saves = named("checkpoint.put");
    saves.extend(named("checkpoint.put_writes"));
    assert!(!saves.is_empty(), "{found:#?}");
    for save in &saves {
        assert_eq!(attr(save, "db.system"), Some(&Json::from("sqlite")));
        let parent = parent_of(save).unwrap();
        assert!(
            parent.name.starts_with("step ") || parent.id == root.id,
            "{save:#?} under {parent:#?}"
        );
    }
    // Every step saved its checkpoint inside its own span.
    for step in &steps {
        assert!(
            named("checkpoint.put")
                .iter()
                .any(|s| parent_of(s).map(|p| &p.id) == Some(&step.id)),
            "a save under {}: {found:#?}",
            step.name
        );
    }
}
