//! A handoff between two `create_agent`s running as nodes of one graph, shared with Python
//! LangChain 1.x + LangGraph 1.2 (`scripts/interop/handoff.py`) on SQLite and Postgres: the
//! triage agent calls `transfer_to_billing` (stategraph's `create_handoff_tool`, Python's
//! `Command(goto="billing", graph=Command.PARENT)`), the billing agent answers. Both sides
//! run two turns; Python reads both threads and their histories are equal checkpoint by
//! checkpoint (ids aside); then each side continues the other's thread.
//!
//! Needs the pinned Python environment (`scripts/python-env.sh`); fails, never skips,
//! without it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use serde_json::Value as Json;
use stategraph::Message;
use stategraph::agent::agent::create_agent;
use stategraph::agent::handoff::create_handoff_tool;
use stategraph::agent::{ChatOpenAi, MessagesState, MessagesUpdate, OpenAiConfig, Tool};
use stategraph::prelude::*;
use stategraph_testkit::chat::{Answer, Call, ChatServer};
use stategraph_testkit::python::interop_script;

/// The scripted model of `handoff.py`, over the OpenAI wire.
async fn model() -> (ChatServer, ChatOpenAi) {
    let server = ChatServer::start(|r| {
        let messages = r["messages"].as_array().unwrap();
        let system = messages[0]["content"].as_str().unwrap_or_default();
        let last_user = messages
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default();
        if system == "You are billing." {
            Answer::text(&format!("billing: {last_user}"))
        } else if messages.last().unwrap()["role"] == "user" {
            Answer::calls(vec![Call::new(
                &format!("call_{}", messages.len()),
                "transfer_to_billing",
                serde_json::json!({}),
            )])
        } else {
            Answer::text("triage: done")
        }
    })
    .await;
    let model = OpenAiConfig::new("scripted")
        .base_url(server.base_url())
        .build()
        .unwrap();
    (server, model)
}

async fn graph(url: &str) -> (ChatServer, CompiledGraph<MessagesState>) {
    let (server, model) = model().await;
    let handoff: std::sync::Arc<dyn Tool> = create_handoff_tool("billing", None).into();
    let triage = create_agent(model.clone(), [handoff])
        .system_prompt("You are triage.")
        .build()
        .unwrap();
    let billing = create_agent(model, [])
        .system_prompt("You are billing.")
        .build()
        .unwrap();
    let mut g = StateGraph::<MessagesState>::new();
    g.add_subgraph("triage", triage)
        .add_destinations("triage", ["billing"])
        .add_subgraph("billing", billing)
        .add_edge(START, "triage")
        .add_edge("triage", END)
        .add_edge("billing", END);
    let compiled = g
        .compile()
        .unwrap()
        .with_checkpointer(stategraph::open_saver(url).await.unwrap());
    (server, compiled)
}

fn python(db: &str, thread: &str, actions: &[&str]) -> Json {
    interop_script("handoff.py", db, thread, actions)
}

async fn ask(graph: &CompiledGraph<MessagesState>, thread: &str, text: &str) {
    let input = MessagesUpdate::messages([Message::human(text)]);
    graph
        .invoke(input, RunConfig::thread(thread))
        .await
        .unwrap();
}

fn last_messages(dump: &Json) -> Json {
    let h = dump["history"].as_array().unwrap();
    h[h.len() - 1]["messages"].clone()
}

async fn shared_with_python(
    (rust_db, rt): (&str, &str),
    (python_db, pt): (&str, &str),
    url: fn(&str) -> String,
) {
    let (_server, ours) = graph(&url(rust_db)).await;
    ask(&ours, rt, "I want a refund").await;
    ask(&ours, rt, "Thanks").await;
    let theirs = python(
        python_db,
        pt,
        &["ask:I want a refund", "ask:Thanks", "dump"],
    );
    let mine = python(rust_db, rt, &["dump"]);
    let (a, b) = (
        mine["history"].as_array().unwrap(),
        theirs["history"].as_array().unwrap(),
    );
    assert_eq!(a.len(), b.len(), "{mine:#}\n{theirs:#}");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert_eq!(x, y, "checkpoint {i} differs");
    }
    let end = last_messages(&theirs);
    assert_eq!(
        end[2]["response_metadata"]["__handoff_destination"],
        "billing"
    );
    assert_eq!(end[7]["content"], "billing: Thanks");

    // Each side continues the other's thread.
    python(rust_db, rt, &["ask:One more"]);
    let (_server2, on_python) = graph(&url(python_db)).await;
    ask(&on_python, pt, "One more").await;
    let (mine, theirs) = (
        last_messages(&python(rust_db, rt, &["dump"])),
        last_messages(&python(python_db, pt, &["dump"])),
    );
    assert_eq!(mine, theirs);
    assert_eq!(mine[11]["content"], "billing: One more");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handoff_thread_is_shared_with_python_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let rust_db = dir.path().join("rust.sqlite").display().to_string();
    let python_db = dir.path().join("python.sqlite").display().to_string();
    python(&python_db, "t", &["dump"]);
    shared_with_python((&rust_db, "t"), (&python_db, "t"), |p| {
        format!("sqlite:{p}")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handoff_thread_is_shared_with_python_on_postgres() {
    let url = stategraph_testkit::services::postgres_url();
    let rust_thread = stategraph_testkit::services::scratch_name("handoff-rs");
    let python_thread = stategraph_testkit::services::scratch_name("handoff-py");
    python(&url, &python_thread, &["dump"]);
    shared_with_python((&url, &rust_thread), (&url, &python_thread), str::to_owned).await;
}
