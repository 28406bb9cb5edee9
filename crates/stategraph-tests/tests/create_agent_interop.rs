//! `create_agent` with the human-in-the-loop and summarization middlewares, shared with
//! Python LangChain 1.x (`langchain.agents.create_agent`, LangGraph 1.2) on SQLite and
//! Postgres (LangGraph's own savers), with scripted models that answer alike (`scripts/interop/create_agent.py`).
//!
//! The same three turns — a call approved, a call edited, then (after the conversation was
//! summarized) a call rejected — run on both sides. Python reads stategraph's thread and
//! its own, and their histories are equal checkpoint by checkpoint (ids aside): steps,
//! sources, next nodes, messages, interrupts, channel names and pending writes. Then each
//! side continues the other's thread with a fourth turn.
//!
//! Needs the pinned Python environment (`scripts/python-env.sh`); fails, never skips,
//! without it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value as Json, json};
use stategraph::Message;
use stategraph::agent::agent::{AgentState, AgentUpdate, create_agent};
use stategraph::agent::middleware::{
    ContextSize, Decision, HumanInTheLoopMiddleware, SummarizationMiddleware,
};
use stategraph::agent::{ChatOpenAi, OpenAiConfig, Tool, tool};
use stategraph::prelude::*;
use stategraph_testkit::chat::{Answer, Call, ChatServer, last_role};
use stategraph_testkit::python::interop_script;

#[derive(Deserialize, JsonSchema)]
struct City {
    city: String,
}

fn weather() -> Arc<dyn Tool> {
    Arc::new(tool(
        "get_weather",
        "Today's weather in a city.",
        |c: City, _ctx| async move { Ok::<_, std::convert::Infallible>(format!("Sunny in {}", c.city)) },
    ))
}

/// The scripted model of `create_agent.py`, over the OpenAI wire.
async fn model() -> (ChatServer, ChatOpenAi) {
    let server = ChatServer::start(|r| {
        let messages = r["messages"].as_array().unwrap();
        let last = messages.last().unwrap()["content"]
            .as_str()
            .unwrap_or_default();
        if last.starts_with("SUMMARIZE:") {
            Answer::text("They asked about the weather.")
        } else if last_role(r) == "tool" {
            Answer::text(&format!("answer: {}", last.rsplit('\n').next().unwrap()))
        } else {
            let city = last.trim_end_matches('?').rsplit(' ').next().unwrap();
            Answer::calls(vec![Call::new(
                &format!("call_{}", messages.len()),
                "get_weather",
                json!({"city": city}),
            )])
        }
    })
    .await;
    let model = OpenAiConfig::new("scripted")
        .base_url(server.base_url())
        .build()
        .unwrap();
    (server, model)
}

async fn build_agent(url: &str) -> (ChatServer, CompiledGraph<AgentState>) {
    let (server, model) = model().await;
    let agent = create_agent(model.clone(), [weather()])
        .middleware(HumanInTheLoopMiddleware::new().interrupt_on("get_weather", true))
        .middleware(
            SummarizationMiddleware::new(model)
                .trigger(ContextSize::Messages(8))
                .keep(ContextSize::Messages(3))
                .prompt("SUMMARIZE:\n{messages}"),
        )
        .checkpointer(stategraph::open_saver(url).await.unwrap())
        .build()
        .unwrap();
    (server, agent)
}

fn python(db: &str, thread: &str, actions: &[&str]) -> Json {
    interop_script("create_agent.py", db, thread, actions)
}

async fn act(agent: &CompiledGraph<AgentState>, thread: &str, action: &str) {
    let config = RunConfig::thread(thread);
    let (kind, arg) = action.split_once(':').unwrap_or((action, ""));
    let resume = |d: Decision| RunCommand::resume(Resume::Value(Decision::answer(&[d])));
    match kind {
        "ask" => {
            let input = AgentUpdate::new().messages([Message::human(arg)]);
            agent.invoke(input, config).await.unwrap();
        }
        "approve" => {
            agent
                .invoke_command(resume(Decision::Approve), config)
                .await
                .unwrap();
        }
        "edit" => {
            let d = Decision::Edit {
                name: "get_weather".into(),
                args: stategraph::value!({ "city": arg }),
            };
            agent.invoke_command(resume(d), config).await.unwrap();
        }
        "reject" => {
            let d = Decision::Reject((!arg.is_empty()).then(|| arg.to_owned()));
            agent.invoke_command(resume(d), config).await.unwrap();
        }
        other => panic!("unknown action {other}"),
    }
}

const TURNS: [&str; 6] = [
    "ask:Weather in Paris?",
    "approve",
    "ask:Weather in Rome?",
    "edit:Oslo",
    "ask:Weather in Lima?",
    "reject",
];

/// `rust_db` / `python_db`: the databases as Python opens them (a SQLite path or a
/// postgres URL); `url` makes stategraph's URL of one.
async fn shared_with_python(
    (rust_db, rt): (&str, &str),
    (python_db, pt): (&str, &str),
    url: fn(&str) -> String,
) {
    let (_server, agent) = build_agent(&url(rust_db)).await;
    for action in TURNS {
        act(&agent, rt, action).await;
    }
    let mut actions: Vec<&str> = TURNS.to_vec();
    actions.push("dump");
    let theirs = python(python_db, pt, &actions);
    let ours = python(rust_db, rt, &["dump"]);
    let (ours, theirs) = (&ours["history"], &theirs["history"]);
    assert_eq!(
        ours.as_array().unwrap().len(),
        theirs.as_array().unwrap().len()
    );
    for (i, (a, b)) in ours
        .as_array()
        .unwrap()
        .iter()
        .zip(theirs.as_array().unwrap())
        .enumerate()
    {
        assert_eq!(a, b, "checkpoint {i} differs");
    }
    let last = &theirs[theirs.as_array().unwrap().len() - 1]["messages"];
    assert_eq!(
        last[0]["content"],
        "Here is a summary of the conversation to date:\n\nThey asked about the weather."
    );
    assert!(
        last[2]["content"]
            .as_str()
            .unwrap()
            .ends_with("Tool response:\nSunny in Oslo")
    );

    // Each side continues the other's thread: a call approved on the other's interrupt.
    python(rust_db, rt, &["ask:Weather in Kyiv?", "approve"]);
    let (_server2, on_python) = build_agent(&url(python_db)).await;
    act(&on_python, pt, "ask:Weather in Kyiv?").await;
    act(&on_python, pt, "approve").await;
    let ours = python(rust_db, rt, &["dump"]);
    let theirs = python(python_db, pt, &["dump"]);
    let tail = |h: &Json| {
        let h = h["history"].as_array().unwrap();
        h[h.len() - 1]["messages"].clone()
    };
    assert_eq!(tail(&ours), tail(&theirs));
    let end = tail(&ours);
    assert_eq!(
        end[end.as_array().unwrap().len() - 1]["content"],
        "answer: Sunny in Kyiv"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_agent_thread_is_shared_with_python_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let rust_db = dir.path().join("rust.sqlite").display().to_string();
    let python_db = dir.path().join("python.sqlite").display().to_string();
    // Python opens the file first: its saver creates the tables.
    python(&python_db, "t", &["dump"]);
    shared_with_python((&rust_db, "t"), (&python_db, "t"), |p| {
        format!("sqlite:{p}")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_agent_thread_is_shared_with_python_on_postgres() {
    // One database, two threads: stategraph's and Python's.
    let url = stategraph_testkit::services::postgres_url();
    let rust_thread = stategraph_testkit::services::scratch_name("agent-rs");
    let python_thread = stategraph_testkit::services::scratch_name("agent-py");
    python(&url, &python_thread, &["dump"]);
    shared_with_python((&url, &rust_thread), (&url, &python_thread), str::to_owned).await;
}
