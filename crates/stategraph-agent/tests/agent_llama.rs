//! `create_agent` on a real model server: llama.cpp's `llama-server` running
//! SmolLM2-135M-Instruct (`scripts/llm-server.sh start`; `STATEGRAPH_TEST_LLM_URL`, default
//! `http://127.0.0.1:18080/v1`). A structured answer through the server's constrained
//! decoding that parses into the Rust type, and a tool call put to a reviewer by
//! `HumanInTheLoopMiddleware` and approved, edited and rejected through interrupts. Fails,
//! never skips, when the server is not there.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use stategraph_agent::agent::{AgentState, AgentUpdate, ProviderStrategy, create_agent};
use stategraph_agent::middleware::{Decision, HumanInTheLoopMiddleware};
use stategraph_agent::{ChatOpenAi, OpenAiConfig, Tool, tool};
use stategraph_checkpoint::{InMemorySaver, Value, value};
use stategraph_graph::{Resume, RunCommand, RunConfig};
use stategraph_messages::{Message, ToolCall};

fn model(max_tokens: u32) -> ChatOpenAi {
    let url = stategraph_testkit::services::llm_url();
    OpenAiConfig::new("smollm2")
        .base_url(&url)
        .temperature(0.0)
        .seed(7)
        .max_tokens(max_tokens)
        .extra_body("cache_prompt", serde_json::json!(false))
        .build()
        .unwrap_or_else(|e| panic!("the model server at {url}: {e}"))
}

/// A contact card.
#[derive(Debug, Deserialize, JsonSchema)]
struct Contact {
    /// The person's name.
    name: String,
    /// Their email address.
    email: String,
}

#[tokio::test]
async fn a_structured_answer_parses_into_the_rust_type() {
    let agent = create_agent(model(96), [])
        .system_prompt("Extract the contact from the user's message as JSON.")
        .response_format(ProviderStrategy::of::<Contact>())
        .build()
        .unwrap();
    let input = AgentUpdate::new().messages([Message::human(
        "Please add John Smith, his email is john@example.com.",
    )]);
    let state = agent.invoke(input, RunConfig::default()).await.unwrap();
    let contact: Contact = state
        .structured()
        .unwrap()
        .expect("a structured answer (the server constrains it to the schema)");
    assert!(
        !contact.name.is_empty() || !contact.email.is_empty(),
        "{contact:?}"
    );
    // The answer is also the model's message, as LangChain keeps it.
    assert!(matches!(state.messages.last(), Some(Message::Ai { .. })));
}

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

fn call(id: &str, city: &str) -> ToolCall {
    ToolCall {
        name: "get_weather".into(),
        args: value!({ "city": city }),
        id: Some(id.into()),
    }
}

/// A conversation the small model answers with a call of `get_weather` for Berlin: two
/// earlier questions answered with calls (without results, which llama-server does not
/// require), then a third: the model copies the pattern.
fn asks_for_a_call() -> AgentUpdate {
    AgentUpdate::new().messages([
        Message::human("Weather in Paris?"),
        Message::ai("", vec![call("call_1", "Paris")]),
        Message::human("Weather in Rome?"),
        Message::ai("", vec![call("call_2", "Rome")]),
        Message::human("Weather in Berlin?"),
    ])
}

/// Runs the agent to its review, answers it with `decision`, and returns the tool message
/// answering the model's call.
async fn reviewed(decision: Decision) -> (Value, Message) {
    let agent = create_agent(model(48), [weather()])
        .middleware(HumanInTheLoopMiddleware::new().interrupt_on("get_weather", true))
        .checkpointer(Arc::new(InMemorySaver::new()))
        .build()
        .unwrap();
    let config = RunConfig::thread("review");
    agent
        .invoke(asks_for_a_call(), config.clone())
        .await
        .unwrap();
    let snapshot = agent.get_state(&config).await.unwrap();
    assert_eq!(
        snapshot.next,
        ["HumanInTheLoopMiddleware.after_model"],
        "the model's call waits for review"
    );
    let request = snapshot.interrupts[0].value.clone();
    let call_id = {
        let state: AgentState = snapshot.state().unwrap();
        match state.last_ai() {
            Some(Message::Ai { tool_calls, .. }) => tool_calls[0].id.clone().unwrap(),
            other => panic!("{other:?}"),
        }
    };
    let answer = Decision::answer(&[decision]);
    let resume = RunCommand::resume(Resume::Value(answer));
    agent.invoke_command(resume, config.clone()).await.unwrap();
    let state: AgentState = agent.get_state(&config).await.unwrap().state().unwrap();
    let reply = state
        .messages
        .iter()
        .find(|m| matches!(m, Message::Tool { tool_call_id, .. } if *tool_call_id == call_id))
        .cloned()
        .expect("the call is answered");
    (request, reply)
}

#[tokio::test]
async fn a_tool_call_is_approved_edited_and_rejected() {
    let (request, reply) = reviewed(Decision::Approve).await;
    let request = request.to_json();
    assert_eq!(request["action_requests"][0]["name"], "get_weather");
    assert_eq!(
        request["review_configs"][0]["allowed_decisions"],
        serde_json::json!(["approve", "edit", "reject", "respond"])
    );
    assert!(reply.text().unwrap().starts_with("Sunny in "), "{reply:?}");

    let (_, reply) = reviewed(Decision::Edit {
        name: "get_weather".into(),
        args: value!({"city": "Oslo"}),
    })
    .await;
    let text = reply.text().unwrap();
    assert!(
        text.starts_with("Note: a human reviewer replaced this tool call"),
        "{text}"
    );
    assert!(text.ends_with("Tool response:\nSunny in Oslo"), "{text}");

    let (_, reply) = reviewed(Decision::Reject(Some("not now".into()))).await;
    assert_eq!(
        reply.text(),
        Some("User rejected the tool call for `get_weather` with reason: not now")
    );
    assert!(matches!(&reply, Message::Tool { status, .. } if status == "error"));
}
