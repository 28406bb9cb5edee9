//! A ReAct agent's thread shared with Python LangGraph's own `create_react_agent` on one
//! SQLite file, both stopping before their tools: stategraph's agent asks for a tool call
//! and stops; Python approves it (runs its tool on stategraph's pending call) and answers;
//! stategraph reads that, asks again and finishes the turn; Python reads the whole
//! conversation, and asks and answers once more; stategraph reads that too.
//!
//! Needs the pinned Python environment (`scripts/python-env.sh`); fails, never skips,
//! without it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use common::weather_agent::{weather_model, weather_tool};
use serde_json::json;
use stategraph::agent::{AgentVersion, MessagesState, MessagesUpdate, create_react_agent};
use stategraph::prelude::*;
use stategraph::{Message, ToolCall};
use stategraph_testkit::python::seed_graph_py;

async fn rust_agent(
    db: &str,
    version: AgentVersion,
) -> (
    stategraph_testkit::chat::ChatServer,
    CompiledGraph<MessagesState>,
) {
    let (server, model) = weather_model("rust: ", "rs_call_").await;
    let agent = create_react_agent(model, [weather_tool()])
        .interrupt_before(["tools"])
        .version(version)
        .checkpointer(
            stategraph::open_saver(&format!("sqlite:{db}"))
                .await
                .unwrap(),
        )
        .build()
        .unwrap();
    (server, agent)
}

fn ask(text: &str) -> MessagesUpdate {
    MessagesUpdate::messages([Message::human(text)])
}

fn calls(m: &Message) -> Vec<ToolCall> {
    match m {
        Message::Ai { tool_calls, .. } => tool_calls.clone(),
        _ => Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_react_thread_is_shared_with_pythons_prebuilt_agent() {
    for version in [AgentVersion::V2, AgentVersion::V1] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("agent.sqlite").display().to_string();
        let (_server, agent) = rust_agent(&db, version).await;
        let config = RunConfig::thread("shared");

        // stategraph asks for a tool call and stops before its tools.
        agent
            .invoke(ask("Weather in Paris?"), config.clone())
            .await
            .unwrap();
        assert_eq!(agent.get_state(&config).await.unwrap().next, ["tools"]);

        // Python sees the pending call, approves it: its tool runs on it, its model answers.
        let py = seed_graph_py(
            None,
            &db,
            "react",
            "shared",
            &["agent_messages", "resume", "agent_messages"],
        );
        let m = py["agent_messages"].as_array().unwrap();
        assert_eq!(m.len(), 4, "{version:?}: {m:#?}");
        assert_eq!(
            m[1]["tool_calls"],
            json!([["get_weather", {"city": "Paris"}, "rs_call_1"]])
        );
        assert_eq!(
            (
                m[2]["type"].clone(),
                m[2]["content"].clone(),
                m[2]["tool_call_id"].clone()
            ),
            (json!("tool"), json!("Sunny in Paris"), json!("rs_call_1"))
        );
        assert_eq!(m[3]["content"], "python: Sunny in Paris");
        assert_eq!(py["next"], json!([]));

        // stategraph reads Python's answer and goes on: another question, approved here.
        let state: MessagesState = agent.get_state(&config).await.unwrap().state().unwrap();
        assert_eq!(state.messages[3].text(), Some("python: Sunny in Paris"));
        agent
            .invoke(ask("Weather in Rome?"), config.clone())
            .await
            .unwrap();
        let out = agent.continue_run(config.clone()).await.unwrap();
        assert_eq!(out.messages.len(), 8);
        assert_eq!(out.messages[7].text(), Some("rust: Sunny in Rome"));

        // Python reads the whole conversation, asks once more, approves, answers.
        let py = seed_graph_py(
            None,
            &db,
            "react",
            "shared",
            &["ask:Weather in Oslo?", "resume", "agent_messages"],
        );
        let m = py["agent_messages"].as_array().unwrap();
        let kinds: Vec<&str> = m.iter().map(|x| x["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "human", "ai", "tool", "ai", "human", "ai", "tool", "ai", "human", "ai", "tool",
                "ai"
            ]
        );
        assert_eq!(m[7]["content"], "rust: Sunny in Rome");
        assert_eq!(m[11]["content"], "python: Sunny in Oslo");

        // And stategraph reads Python's turn, tool call included.
        let state: MessagesState = agent.get_state(&config).await.unwrap().state().unwrap();
        assert_eq!(state.messages.len(), 12);
        assert_eq!(
            calls(&state.messages[9])[0].args,
            stategraph::value!({"city": "Oslo"})
        );
        assert_eq!(state.messages[11].text(), Some("python: Sunny in Oslo"));
    }
}

/// The agent loop built by hand, as LangGraph's docs build it: a model node `agent`,
/// [`ToolNode`] as `tools`, and [`tools_condition`] routing between them.
async fn manual_agent(
    db: &str,
) -> (
    stategraph_testkit::chat::ChatServer,
    CompiledGraph<MessagesState>,
) {
    use stategraph::agent::{ChatModel, ChatRequest, ToolNode, tools_condition};
    use stategraph::graph::Goto;
    use std::sync::Arc;

    let (server, model) = weather_model("python: ", "py_call_").await;
    let tools = ToolNode::new([weather_tool()]);
    let specs: Vec<_> = tools.tools().map(|t| t.spec()).collect();
    let model = Arc::new(model);
    let mut g = StateGraph::<MessagesState>::new();
    g.add_node("agent", move |s: Arc<MessagesState>, _ctx| {
        let (model, specs) = (Arc::clone(&model), specs.clone());
        async move {
            let request = ChatRequest::new(s.messages.clone()).tools(specs);
            let reply = model.invoke(&request).await?;
            Ok::<_, NodeError>(MessagesUpdate::messages([reply]))
        }
    })
    .add_node("tools", tools.node::<MessagesState>())
    .add_edge(START, "agent")
    .add_edge("tools", "agent");
    g.add_conditional_edges("agent", |s: &MessagesState| {
        Ok(vec![Goto::from(tools_condition(&s.messages))])
    })
    .name("tools_condition")
    .path_map(["tools", END]);
    let graph = g
        .compile()
        .unwrap()
        .with_interrupt_before(["tools"])
        .with_checkpointer(
            stategraph::open_saver(&format!("sqlite:{db}"))
                .await
                .unwrap(),
        );
    (server, graph)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_built_loop_with_tools_condition_matches_python() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("manual.sqlite").display().to_string();
    let (_server, graph) = manual_agent(&db).await;

    // Each side runs two turns on its own thread, approving each tool call.
    let config = RunConfig::thread("rust");
    for question in ["Weather in Paris?", "Thanks, and in Rome?"] {
        graph.invoke(ask(question), config.clone()).await.unwrap();
        assert_eq!(graph.get_state(&config).await.unwrap().next, ["tools"]);
        graph.continue_run(config.clone()).await.unwrap();
    }
    let ended: MessagesState = graph.get_state(&config).await.unwrap().state().unwrap();
    assert_eq!(ended.messages.len(), 8);
    assert_eq!(ended.messages[7].text(), Some("python: Sunny in Rome"));
    let ours = seed_graph_py(
        None,
        &db,
        "react_manual",
        "rust",
        &["outline", "agent_messages"],
    );
    let theirs = seed_graph_py(
        None,
        &db,
        "react_manual",
        "python",
        &[
            "ask:Weather in Paris?",
            "resume",
            "ask:Thanks, and in Rome?",
            "resume",
            "outline",
            "agent_messages",
        ],
    );
    assert_eq!(ours["agent_messages"], theirs["agent_messages"]);
    assert_eq!(ours["outline"], theirs["outline"]);

    // A third question on Python's thread, from stategraph; the answer routes to the end.
    let config = RunConfig::thread("python");
    graph
        .invoke(ask("And in Oslo?"), config.clone())
        .await
        .unwrap();
    let out = graph.continue_run(config.clone()).await.unwrap();
    assert_eq!(out.messages[11].text(), Some("python: Sunny in Oslo"));
    assert!(graph.get_state(&config).await.unwrap().next.is_empty());
}
