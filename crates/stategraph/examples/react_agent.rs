//! Run with `cargo run -p stategraph --example react_agent --features agent -- [--base-url
//! URL] [--model NAME] [--db URL] [--thread ID] QUESTION`.
//!
//! A ReAct agent (LangGraph's prebuilt `create_react_agent`) with one tool, `add`, on any
//! OpenAI-compatible chat server (default: `OPENAI_BASE_URL` / `OPENAI_API_KEY`, else OpenAI;
//! `scripts/llm-server.sh start` runs a small local one on `http://127.0.0.1:18080/v1`). The
//! agent stops before each tool call and asks on the terminal whether to run it; the model's
//! answer is printed token by token as it streams. The conversation is checkpointed (default:
//! `react_agent.sqlite` in the working directory), so a second run on the same `--thread`
//! remembers the first.

use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::Arc;

use futures_util::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use stategraph::RunStream;
use stategraph::agent::{
    MessagesState, MessagesUpdate, OpenAiConfig, Tool, create_react_agent, tool,
};
use stategraph::prelude::*;
use stategraph::stream::StreamEvent;
use stategraph::{Message, ToolCall};

/// Two numbers to add.
#[derive(Deserialize, JsonSchema)]
struct Add {
    /// The first number.
    a: f64,
    /// The second number.
    b: f64,
}

/// Streams a run, printing the model's tokens as they come.
async fn print_tokens(mut run: RunStream<MessagesState>) -> Result<(), stategraph::Error> {
    while let Some(event) = run.next().await {
        if let StreamEvent::Messages(m) = event? {
            match &m.message {
                Message::AiChunk(piece) => print!("{}", piece.text()),
                Message::Tool { fields, .. } => println!("\n[tool] {}", fields.content),
                _ => {}
            }
            std::io::stdout().flush().ok();
        }
    }
    println!();
    Ok(())
}

/// The command line, checked before anything runs.
struct Args {
    base_url: Option<String>,
    model: String,
    db: String,
    thread: String,
    question: String,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        base_url: None,
        model: "gpt-4o-mini".to_owned(),
        db: "sqlite:react_agent.sqlite".to_owned(),
        thread: "1".to_owned(),
        question: String::new(),
    };
    let mut question = Vec::new();
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--base-url" => args.base_url = Some(value()?),
            "--model" => args.model = value()?,
            "--db" => args.db = value()?,
            "--thread" => args.thread = value()?,
            _ => question.push(a),
        }
    }
    if question.is_empty() {
        return Err("ask a question, e.g. `what is 2.5 plus 4?`".into());
    }
    args.question = question.join(" ");
    Ok(args)
}

async fn run(args: Args) -> Result<(), stategraph::Error> {
    let mut model = OpenAiConfig::from_env(args.model);
    if let Some(url) = args.base_url {
        model = model.base_url(url);
    }
    let add = tool("add", "Adds two numbers.", |x: Add, _ctx| async move {
        Ok::<_, std::convert::Infallible>((x.a + x.b).to_string())
    });
    let agent = create_react_agent(
        model.temperature(0.0).build()?,
        [Arc::new(add) as Arc<dyn Tool>],
    )
    .prompt("You are a careful calculator: use the add tool for sums.")
    .interrupt_before(["tools"])
    .checkpointer(stategraph::open_saver(&args.db).await?)
    .build()?;
    let config = RunConfig::thread(args.thread);
    let ask = MessagesUpdate::messages([Message::human(args.question)]);
    print_tokens(agent.stream(ask, config.clone(), &[StreamMode::Messages])).await?;
    // Each stop before the tools waits for a person.
    while !agent.get_state(&config).await?.next.is_empty() {
        let state: MessagesState = agent.get_state(&config).await?.state()?;
        let calls: Vec<ToolCall> = match state.messages.last() {
            Some(Message::Ai { tool_calls, .. }) => tool_calls.clone(),
            _ => Vec::new(),
        };
        for c in &calls {
            println!("the model asks to run {}({})", c.name, c.args);
        }
        print!("run it? [y/N] ");
        std::io::stdout().flush()?;
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if !answer.trim().eq_ignore_ascii_case("y") {
            // Answer for the tool, so the model knows.
            let declined: Vec<Message> = calls
                .iter()
                .map(|c| Message::tool("the user declined", c.id.clone().unwrap_or_default()))
                .collect();
            agent
                .update_state(&config, MessagesUpdate::messages(declined), "tools")
                .await?;
        }
        print_tokens(agent.stream_continue(config.clone(), &[StreamMode::Messages])).await?;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
