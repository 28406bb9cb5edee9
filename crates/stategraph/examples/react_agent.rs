//! Run with `cargo run -p stategraph --example react_agent --features agent -- [--base-url
//! URL] [--model NAME] [--db URL] [--thread ID] [--mcp NAME=SERVER]... QUESTION`.
//!
//! A ReAct agent (LangGraph's prebuilt `create_react_agent`) with one tool, `add`, and the
//! tools of the MCP servers given with `--mcp` (built with `--features mcp`): `NAME=URL` for a
//! streamable HTTP server, `NAME=COMMAND ARGS…` for one started over stdio, e.g.
//! `--mcp 'time=uvx mcp-server-time'`. It runs on any
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
    /// `--mcp NAME=SERVER`, in order.
    mcp: Vec<(String, String)>,
    question: String,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        base_url: None,
        model: "gpt-4o-mini".to_owned(),
        db: "sqlite:react_agent.sqlite".to_owned(),
        thread: "1".to_owned(),
        mcp: Vec::new(),
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
            "--mcp" => {
                let spec = value()?;
                let (name, server) = spec
                    .split_once('=')
                    .filter(|(n, s)| !n.is_empty() && !s.trim().is_empty())
                    .ok_or_else(|| format!("--mcp needs NAME=URL or NAME=COMMAND, not `{spec}`"))?;
                args.mcp.push((name.to_owned(), server.trim().to_owned()));
            }
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
    let mut tools = vec![Arc::new(add) as Arc<dyn Tool>];
    tools.extend(mcp_tools(&args.mcp).await?);
    let agent = create_react_agent(model.temperature(0.0).build()?, tools)
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

/// The tools of the `--mcp` servers (names prefixed with the server's where two offer one).
#[cfg(feature = "mcp")]
async fn mcp_tools(servers: &[(String, String)]) -> Result<Vec<Arc<dyn Tool>>, stategraph::Error> {
    use stategraph::agent::mcp::{McpServer, MultiServerMcpClient, ToolNames};
    if servers.is_empty() {
        return Ok(Vec::new());
    }
    let mut builder = MultiServerMcpClient::builder().tool_names(ToolNames::PrefixOnClash);
    for (name, spec) in servers {
        let server = if spec.starts_with("http://") || spec.starts_with("https://") {
            McpServer::http(spec)
        } else {
            let mut words = spec.split_whitespace();
            let program = words.next().unwrap_or_default();
            McpServer::stdio(program, words)
        };
        builder = builder.server(name, server);
    }
    let clients = builder.connect().await?;
    let tools = clients.tools().await?;
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    println!("[mcp] tools: {}", names.join(", "));
    Ok(tools)
}

/// Without the `mcp` feature, `--mcp` is refused.
#[cfg(not(feature = "mcp"))]
async fn mcp_tools(servers: &[(String, String)]) -> Result<Vec<Arc<dyn Tool>>, stategraph::Error> {
    if servers.is_empty() {
        Ok(Vec::new())
    } else {
        Err(stategraph::agent::Error::InvalidRequest(
            "--mcp needs the example built with `--features mcp`".into(),
        )
        .into())
    }
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
