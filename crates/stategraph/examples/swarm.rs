//! Run with `cargo run -p stategraph --example swarm --features agent -- [--base-url URL]
//! [--model NAME] [--db URL] [--thread ID] QUESTION`.
//!
//! A swarm of two agents (`create_swarm`): Alice does arithmetic, Bob writes; each can hand
//! the conversation to the other with a handoff tool, and the swarm remembers who spoke
//! last, so the next question on the same `--thread` goes straight to that agent. Every step
//! is checkpointed (default: `swarm.sqlite` in the working directory). The model is any
//! OpenAI-compatible server (default: `OPENAI_BASE_URL` / `OPENAI_API_KEY`, else OpenAI;
//! `scripts/llm-server.sh start` runs a small local one on `http://127.0.0.1:18080/v1`).
//!
//! ```text
//! $ cargo run -p stategraph --example swarm --features agent -- "I'd like to talk to Bob"
//! $ cargo run -p stategraph --example swarm --features agent -- "Write me a haiku"   # Bob answers
//! ```

use std::process::ExitCode;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use stategraph::Message;
use stategraph::agent::agent::create_agent;
use stategraph::agent::handoff::create_swarm_handoff_tool;
use stategraph::agent::swarm::{SwarmUpdate, create_swarm};
use stategraph::agent::{OpenAiConfig, Tool, tool};
use stategraph::prelude::*;

/// Two numbers.
#[derive(Deserialize, JsonSchema)]
struct Pair {
    /// The first.
    a: f64,
    /// The second.
    b: f64,
}

async fn run(args: Vec<String>) -> Result<(), stategraph::Error> {
    let mut base_url = None;
    let mut model = "gpt-4o-mini".to_owned();
    let mut db = "sqlite:swarm.sqlite".to_owned();
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

    let add = tool("add", "Adds two numbers.", |p: Pair, _ctx| async move {
        Ok::<_, std::convert::Infallible>((p.a + p.b).to_string())
    });
    let alice = create_agent(
        model.clone(),
        [
            Arc::new(add) as Arc<dyn Tool>,
            create_swarm_handoff_tool("Bob", Some("Transfer to Bob, who writes texts")).into(),
        ],
    )
    .system_prompt("You are Alice, an addition expert.")
    .name("Alice");
    let bob = create_agent(
        model,
        [
            create_swarm_handoff_tool("Alice", Some("Transfer to Alice, who can add numbers"))
                .into(),
        ],
    )
    .system_prompt("You are Bob, a writer who speaks like a pirate.")
    .name("Bob");
    let swarm = create_swarm([alice.into(), bob.into()], "Alice")?
        .compile()?
        .with_checkpointer(stategraph::open_saver(&db).await?);

    let input = SwarmUpdate::messages([Message::human(question.join(" "))]);
    let state = swarm.invoke(input, RunConfig::thread(&thread)).await?;
    for m in &state.messages {
        let who = m.fields().name.as_deref().unwrap_or("");
        println!("{who:>16} | {}", m.fields().content);
    }
    println!(
        "next turn starts with {}",
        state.active_agent.as_deref().unwrap_or("Alice")
    );
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
