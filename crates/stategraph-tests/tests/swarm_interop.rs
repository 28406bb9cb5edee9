//! A swarm of two `create_agent`s (`create_swarm`), shared with Python's `langgraph_swarm`
//! 0.1 + LangChain 1.x + LangGraph 1.2 (`scripts/interop/swarm.py`) on SQLite and Postgres:
//! Alice hands the conversation to Bob, the next turn starts with Bob (the active agent),
//! and a later turn hands it back. Both sides run the same turns; Python reads both threads
//! and their histories are equal checkpoint by checkpoint (ids aside, `active_agent`
//! included); then each side continues the other's thread.
//!
//! Needs the pinned Python environment (`scripts/python-env.sh`); fails, never skips,
//! without it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::sync::Arc;

use serde_json::Value as Json;
use stategraph::Message;
use stategraph::agent::agent::create_agent;
use stategraph::agent::handoff::create_swarm_handoff_tool;
use stategraph::agent::swarm::{SwarmState, SwarmUpdate, create_swarm};
use stategraph::agent::{ChatOpenAi, OpenAiConfig, Tool};
use stategraph::prelude::*;
use stategraph_testkit::chat::{Answer, Call, ChatServer};
use stategraph_testkit::python::interop_script;

/// The scripted model of `swarm.py`, over the OpenAI wire.
async fn model() -> (ChatServer, ChatOpenAi) {
    let server = ChatServer::start(|r| {
        let messages = r["messages"].as_array().unwrap();
        let me = if messages[0]["content"] == "You are Alice." {
            "Alice"
        } else {
            "Bob"
        };
        let other = if me == "Alice" { "Bob" } else { "Alice" };
        let last_user = messages
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default();
        if messages.last().unwrap()["role"] == "user" && last_user.contains(other) {
            Answer::calls(vec![Call::new(
                &format!("call_{}", messages.len()),
                &format!("transfer_to_{}", other.to_lowercase()),
                serde_json::json!({}),
            )])
        } else {
            Answer::text(&format!("{}: {last_user}", me.to_lowercase()))
        }
    })
    .await;
    let model = OpenAiConfig::new("scripted")
        .base_url(server.base_url())
        .build()
        .unwrap();
    (server, model)
}

async fn swarm(url: &str) -> (ChatServer, CompiledGraph<SwarmState>) {
    let (server, model) = model().await;
    let to_bob: Arc<dyn Tool> = create_swarm_handoff_tool("Bob", None).into();
    let to_alice: Arc<dyn Tool> = create_swarm_handoff_tool("Alice", None).into();
    let alice = create_agent(model.clone(), [to_bob])
        .system_prompt("You are Alice.")
        .name("Alice");
    let bob = create_agent(model, [to_alice])
        .system_prompt("You are Bob.")
        .name("Bob");
    let compiled = create_swarm([alice.into(), bob.into()], "Alice")
        .unwrap()
        .compile()
        .unwrap()
        .with_checkpointer(stategraph::open_saver(url).await.unwrap());
    (server, compiled)
}

fn python(db: &str, thread: &str, actions: &[&str]) -> Json {
    interop_script("swarm.py", db, thread, actions)
}

async fn ask(graph: &CompiledGraph<SwarmState>, thread: &str, text: &str) -> Arc<SwarmState> {
    let input = SwarmUpdate::messages([Message::human(text)]);
    graph
        .invoke(input, RunConfig::thread(thread))
        .await
        .unwrap()
}

fn last(dump: &Json) -> &Json {
    let h = dump["history"].as_array().unwrap();
    &h[h.len() - 1]
}

async fn shared_with_python(
    (rust_db, rt): (&str, &str),
    (python_db, pt): (&str, &str),
    url: fn(&str) -> String,
) {
    let (_server, ours) = swarm(&url(rust_db)).await;
    let state = ask(&ours, rt, "I'd like to speak to Bob").await;
    assert_eq!(state.active_agent.as_deref(), Some("Bob"));
    let state = ask(&ours, rt, "What is 5 + 7?").await;
    assert_eq!(
        state.messages.last().unwrap().fields().content,
        stategraph::Value::from("bob: What is 5 + 7?")
    );
    let theirs = python(
        python_db,
        pt,
        &["ask:I'd like to speak to Bob", "ask:What is 5 + 7?", "dump"],
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
    let end = last(&theirs);
    assert_eq!(end["active_agent"], "Bob");
    assert_eq!(
        end["messages"][2]["content"],
        "Successfully transferred to Bob"
    );
    assert_eq!(
        end["messages"][3]["content"],
        "bob: I'd like to speak to Bob"
    );
    assert_eq!(end["messages"][5]["content"], "bob: What is 5 + 7?");

    // Each side continues the other's thread: Bob hands back to Alice.
    python(rust_db, rt, &["ask:Back to Alice, please"]);
    let (_server2, on_python) = swarm(&url(python_db)).await;
    let state = ask(&on_python, pt, "Back to Alice, please").await;
    assert_eq!(state.active_agent.as_deref(), Some("Alice"));
    let (mine, theirs) = (
        python(rust_db, rt, &["dump"]),
        python(python_db, pt, &["dump"]),
    );
    assert_eq!(last(&mine), last(&theirs));
    assert_eq!(last(&mine)["active_agent"], "Alice");
    assert_eq!(
        last(&mine)["messages"][9]["content"],
        "alice: Back to Alice, please"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swarm_thread_is_shared_with_python_on_sqlite() {
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
async fn a_swarm_thread_is_shared_with_python_on_postgres() {
    let url = stategraph_testkit::services::postgres_url();
    let rust_thread = stategraph_testkit::services::scratch_name("swarm-rs");
    let python_thread = stategraph_testkit::services::scratch_name("swarm-py");
    python(&url, &python_thread, &["dump"]);
    shared_with_python((&url, &rust_thread), (&url, &python_thread), str::to_owned).await;
}

#[test]
fn a_swarm_refuses_unnamed_duplicate_or_unknown_agents() {
    let model = OpenAiConfig::new("m")
        .base_url("http://127.0.0.1:9/v1")
        .build()
        .unwrap();
    let named = |n: &str| create_agent(model.clone(), []).name(n);
    let err = |r: Result<StateGraph<SwarmState>, GraphError>| r.err().unwrap().to_string();
    assert!(err(create_swarm([], "A")).contains("at least one agent"));
    assert!(
        err(create_swarm([create_agent(model.clone(), []).into()], "A")).contains("need names")
    );
    assert!(err(create_swarm([named("A").into(), named("A").into()], "A")).contains("two of"));
    assert!(err(create_swarm([named("A").into()], "B")).contains("\"B\" is none of"));
    let g = create_swarm(
        [
            create_agent(
                model.clone(),
                [Arc::new(create_swarm_handoff_tool("B", None)) as Arc<dyn Tool>],
            )
            .name("A")
            .into(),
            named("B").into(),
        ],
        "A",
    )
    .unwrap()
    .compile()
    .unwrap();
    let edges: Vec<_> = g
        .topology()
        .edges
        .iter()
        .map(|e| (e.source.clone(), e.target.clone()))
        .collect();
    assert!(
        edges.contains(&("A".to_owned(), "B".to_owned())),
        "{edges:?}"
    );
}
