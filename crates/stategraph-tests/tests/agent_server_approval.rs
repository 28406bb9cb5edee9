//! The approval agent — `create_agent` with `HumanInTheLoopMiddleware` gating a tool —
//! served over the Agent Server API by stategraph and by the reference server (`langgraph
//! dev` serving Python LangChain's `create_agent` with the same middleware and a scripted
//! model that answers as stategraph's loopback model does). LangGraph's Python SDK answers
//! the review request with each decision kind (approve, edit, reject, respond); the two
//! transcripts — run outputs, interrupts, thread states — are equal.
//!
//! Needs the pinned Python environment and the reference server (`scripts/python-env.sh`,
//! `scripts/reference-server.sh install`); fails, never skips, without them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::sync::Arc;

use common::reference::Reference;
use common::seed_server::{run_sdk_script, serve};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value as Json, json};
use stategraph::agent::agent::create_agent;
use stategraph::agent::middleware::HumanInTheLoopMiddleware;
use stategraph::agent::{OpenAiConfig, Tool, tool};
use stategraph_testkit::chat::{Answer, Call, ChatServer, last_role};

#[derive(Deserialize, JsonSchema)]
struct City {
    city: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_approval_agent_answers_as_the_reference_server() {
    // The reference's scripted model, over the OpenAI wire.
    let model_server = ChatServer::start(|r| {
        let messages = r["messages"].as_array().unwrap();
        let last = messages.last().unwrap()["content"]
            .as_str()
            .unwrap_or_default();
        if last_role(r) == "tool" {
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
        .base_url(model_server.base_url())
        .build()
        .unwrap();
    let weather: Arc<dyn Tool> = Arc::new(tool(
        "get_weather",
        "Today's weather in a city.",
        |c: City, _ctx| async move { Ok::<_, std::convert::Infallible>(format!("Sunny in {}", c.city)) },
    ));
    let agent = create_agent(model, [weather])
        .middleware(HumanInTheLoopMiddleware::new().interrupt_on("get_weather", true))
        .build()
        .unwrap();
    let (base, serving, _dir) = serve(|b| b.graph("approval", agent)).await;
    let reference = Reference::start(&[]);

    let ours: Json = run_sdk_script("approval_flow.py", vec![base]).await;
    let theirs: Json = run_sdk_script("approval_flow.py", vec![reference.url()]).await;
    serving.abort();

    for kind in ["approve", "edit", "reject", "respond"] {
        assert_eq!(ours[kind], theirs[kind], "the `{kind}` transcript differs");
    }
    // What the transcripts show.
    let request = &ours["approve"]["stopped"]["interrupts"][0];
    assert_eq!(request["action_requests"][0]["name"], "get_weather");
    assert_eq!(
        request["action_requests"][0]["description"],
        "Tool execution requires approval\n\nTool: get_weather\nArgs: {'city': 'Paris'}"
    );
    let last = |kind: &str| {
        let m = ours[kind]["end"]["messages"].as_array().unwrap().clone();
        m[m.len() - 1]["content"].clone()
    };
    assert_eq!(last("approve"), "answer: Sunny in Paris");
    assert_eq!(last("edit"), "answer: Sunny in Oslo");
    assert_eq!(
        last("reject"),
        "answer: User rejected the tool call for `get_weather` with reason: not today"
    );
    assert_eq!(last("respond"), "answer: It is raining.");
}
