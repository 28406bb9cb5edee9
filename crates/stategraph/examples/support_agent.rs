//! Run with `cargo run -p stategraph --example support_agent --features server,agent --
//! [--base-url URL] [--model NAME] [--db URL] [--port PORT]`.
//!
//! A customer-support agent (LangChain's `create_agent`) served over LangGraph's Agent
//! Server API on `127.0.0.1:PORT` (default 2024) as graph and assistant `support`, for
//! LangChain's Agent Chat UI (point it at the URL, assistant `support`). The agent looks
//! orders up freely, but a refund waits for a person: `HumanInTheLoopMiddleware` stops the
//! run with LangChain's review request, which Agent Chat UI shows with approve, edit, reject
//! and respond buttons (or the Python SDK answers: `client.runs.wait(thread_id, "support",
//! command={"resume": {"decisions": [{"type": "approve"}]}})`). Long conversations are
//! summarized, and the model is called at most 20 times a run. The model is any
//! OpenAI-compatible server (default: `OPENAI_BASE_URL` / `OPENAI_API_KEY`, else OpenAI;
//! `scripts/llm-server.sh start` runs a small local one on `http://127.0.0.1:18080/v1`).

use std::process::ExitCode;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use stategraph::agent::agent::create_agent;
use stategraph::agent::middleware::{
    ContextSize, HumanInTheLoopMiddleware, ModelCallLimitMiddleware, SummarizationMiddleware,
};
use stategraph::agent::{OpenAiConfig, Tool, tool};
use stategraph::server::{Database, Server};

/// An order to look up or refund.
#[derive(Deserialize, JsonSchema)]
struct Order {
    /// The order number, e.g. "A-1001".
    order_id: String,
}

struct Args {
    base_url: Option<String>,
    model: String,
    db: String,
    port: u16,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        base_url: None,
        model: "gpt-4o-mini".to_owned(),
        db: "sqlite:support_agent.sqlite".to_owned(),
        port: 2024,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--base-url" => args.base_url = Some(value),
            "--model" => args.model = value,
            "--db" => args.db = value,
            "--port" => {
                args.port = value
                    .parse()
                    .map_err(|_| format!("--port needs a port number, got `{value}`"))?;
            }
            other => {
                return Err(format!(
                    "unknown argument `{other}` (expected --base-url, --model, --db, --port)"
                ));
            }
        }
    }
    Ok(args)
}

async fn run(args: Args) -> Result<(), stategraph::Error> {
    let mut config = OpenAiConfig::from_env(&args.model);
    if let Some(url) = &args.base_url {
        config = config.base_url(url);
    }
    let model = config.build()?;
    let lookup = tool(
        "lookup_order",
        "Looks an order up.",
        |o: Order, _ctx| async move {
            Ok::<_, std::convert::Infallible>(format!(
                "Order {} shipped on 2026-11-02, 49.90 EUR.",
                o.order_id
            ))
        },
    );
    let refund = tool(
        "refund_order",
        "Refunds an order in full.",
        |o: Order, _ctx| async move {
            Ok::<_, std::convert::Infallible>(format!("Order {} refunded.", o.order_id))
        },
    );
    let agent = create_agent(
        model.clone(),
        [
            Arc::new(lookup) as Arc<dyn Tool>,
            Arc::new(refund) as Arc<dyn Tool>,
        ],
    )
    .system_prompt("You are a support agent for an online shop. Be brief.")
    .middleware(HumanInTheLoopMiddleware::new().interrupt_on("refund_order", true))
    .middleware(
        SummarizationMiddleware::new(model)
            .trigger(ContextSize::Messages(40))
            .keep(ContextSize::Messages(10)),
    )
    .middleware(ModelCallLimitMiddleware::new().run_limit(20))
    .build()?;
    let server = Server::builder()
        .graph("support", agent)
        .database(&args.db)
        .await?
        .build()?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port)).await?;
    eprintln!("serving `support` on http://{}", listener.local_addr()?);
    server.serve(listener).await?;
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
