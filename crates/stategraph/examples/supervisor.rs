//! Run with `cargo run -p stategraph --example supervisor --features agent -- [--base-url
//! URL] [--model NAME] [--db URL] [--thread ID] QUESTION`.
//!
//! A supervisor of two agents: three `create_agent`s as nodes of one graph over the
//! conversation. The supervisor hands the question over with a handoff tool
//! (`transfer_to_math` or `transfer_to_writer`: a `Command` to the parent graph); the
//! agent it picked answers with its own tools, and control returns to the supervisor, which
//! answers the user. Every step is checkpointed (default: `supervisor.sqlite` in the working
//! directory); the same `--thread` continues the conversation. The model is any
//! OpenAI-compatible server (default: `OPENAI_BASE_URL` / `OPENAI_API_KEY`, else OpenAI;
//! `scripts/llm-server.sh start` runs a small local one on `http://127.0.0.1:18080/v1`).

use std::process::ExitCode;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use stategraph::Message;
use stategraph::agent::agent::create_agent;
use stategraph::agent::handoff::create_handoff_tool;
use stategraph::agent::{MessagesState, MessagesUpdate, OpenAiConfig, Tool, tool};
use stategraph::prelude::*;

/// Two numbers.
#[derive(Deserialize, JsonSchema)]
struct Pair {
    /// The first.
    a: f64,
    /// The second.
    b: f64,
}

/// A text.
#[derive(Deserialize, JsonSchema)]
struct Text {
    /// The text.
    text: String,
}

async fn run(args: Vec<String>) -> Result<(), stategraph::Error> {
    let mut base_url = None;
    let mut model = "gpt-4o-mini".to_owned();
    let mut db = "sqlite:supervisor.sqlite".to_owned();
    let mut thread = "1".to_owned();
    let mut question = Vec::new();
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let mut value = || {
            it.next().ok_or_else(|| {
                stategraph::Error::from(GraphError::InvalidConfig(format!("{a} needs a value")))
            })
        };
        match a.as_str() {
            "--base-url" => base_url = Some(value()?),
            "--model" => model = value()?,
            "--db" => db = value()?,
            "--thread" => thread = value()?,
            _ => question.push(a),
        }
    }
    let mut config = OpenAiConfig::from_env(&model);
    if let Some(url) = &base_url {
        config = config.base_url(url);
    }
    let model = config.build()?;

    let multiply = tool(
        "multiply",
        "Multiplies two numbers.",
        |p: Pair, _ctx| async move { Ok::<_, std::convert::Infallible>((p.a * p.b).to_string()) },
    );
    let shout = tool(
        "shout",
        "Writes a text in capitals.",
        |t: Text, _ctx| async move { Ok::<_, std::convert::Infallible>(t.text.to_uppercase()) },
    );
    let supervisor = create_agent(
        model.clone(),
        [
            Arc::new(create_handoff_tool("math", Some("Hand arithmetic over to the math agent"))) as Arc<dyn Tool>,
            Arc::new(create_handoff_tool("writer", Some("Hand writing over to the writer agent"))),
        ],
    )
    .system_prompt("You are a supervisor: hand arithmetic to `math`, writing to `writer`, then answer the user.")
    .name("supervisor")
    .build()?;
    let math = create_agent(model.clone(), [Arc::new(multiply) as Arc<dyn Tool>])
        .system_prompt("You do arithmetic with your tools.")
        .name("math")
        .build()?;
    let writer = create_agent(model, [Arc::new(shout) as Arc<dyn Tool>])
        .system_prompt("You write texts with your tools.")
        .name("writer")
        .build()?;

    let mut graph = StateGraph::<MessagesState>::new();
    graph
        .add_subgraph("supervisor", supervisor)
        .add_destinations("supervisor", ["math", "writer"])
        .add_subgraph("math", math)
        .add_subgraph("writer", writer)
        .add_edge(START, "supervisor")
        .add_edge("supervisor", END)
        .add_edge("math", "supervisor")
        .add_edge("writer", "supervisor");
    let graph = graph
        .compile()?
        .with_checkpointer(stategraph::open_saver(&db).await?);
    let input = MessagesUpdate::messages([Message::human(question.join(" "))]);
    let state = graph.invoke(input, RunConfig::thread(&thread)).await?;
    for m in &state.messages {
        let who = m.fields().name.as_deref().unwrap_or("");
        println!("{who:>10} | {}", m.fields().content);
    }
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
