//! Run with `cargo run -p stategraph --example structured_extraction --features agent --
//! [--base-url URL] [--model NAME] TEXT`.
//!
//! Structured extraction: an agent (LangChain's `create_agent`) whose answer is a Rust type,
//! `Contact`, asked of the model through the provider's constrained decoding
//! (`ProviderStrategy`: OpenAI's `response_format` `json_schema`, which llama.cpp's
//! llama-server turns into a grammar), parsed into the type and printed. The model is any
//! OpenAI-compatible server (default: `OPENAI_BASE_URL` / `OPENAI_API_KEY`, else OpenAI;
//! `scripts/llm-server.sh start` runs a small local one on `http://127.0.0.1:18080/v1`).

use std::process::ExitCode;

use schemars::JsonSchema;
use serde::Deserialize;
use stategraph::Message;
use stategraph::agent::OpenAiConfig;
use stategraph::agent::agent::{AgentState, AgentUpdate, ProviderStrategy, create_agent};
use stategraph::prelude::*;

/// A person to get back to.
#[derive(Debug, Deserialize, JsonSchema)]
struct Contact {
    /// Their full name.
    name: String,
    /// Their email address, if given.
    email: Option<String>,
    /// Their phone number, if given.
    phone: Option<String>,
}

async fn run(
    base_url: Option<String>,
    model: String,
    text: String,
) -> Result<(), stategraph::Error> {
    let mut config = OpenAiConfig::from_env(&model).temperature(0.0);
    if let Some(url) = &base_url {
        config = config.base_url(url);
    }
    let agent = create_agent(config.build()?, [])
        .system_prompt("Extract the contact the user's message gives.")
        .response_format(ProviderStrategy::of::<Contact>())
        .build()?;
    let input = AgentUpdate::new().messages([Message::human(text)]);
    let state: std::sync::Arc<AgentState> = agent.invoke(input, RunConfig::default()).await?;
    match state.structured::<Contact>()? {
        Some(contact) => {
            println!("name:  {}", contact.name);
            println!("email: {}", contact.email.as_deref().unwrap_or("-"));
            println!("phone: {}", contact.phone.as_deref().unwrap_or("-"));
        }
        None => println!("the model gave no structured answer"),
    }
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let mut base_url = None;
    let mut model = "gpt-4o-mini".to_owned();
    let mut text = Vec::new();
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--base-url" | "--model" => {
                let Some(v) = it.next() else {
                    eprintln!("error: {a} needs a value");
                    return ExitCode::from(2);
                };
                if a == "--base-url" {
                    base_url = Some(v);
                } else {
                    model = v;
                }
            }
            _ => text.push(a),
        }
    }
    if text.is_empty() {
        eprintln!("error: give the text to extract from");
        return ExitCode::from(2);
    }
    match run(base_url, model, text.join(" ")).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
