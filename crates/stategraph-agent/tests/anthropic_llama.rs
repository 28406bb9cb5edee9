//! The Anthropic Messages API client against a real model server: llama.cpp's
//! `llama-server` serving SmolLM2-135M-Instruct on loopback, whose `/v1/messages` route
//! speaks Anthropic's wire format (`scripts/llm-server.sh start`; the URL is
//! `STATEGRAPH_TEST_LLM_URL`, default `http://127.0.0.1:18080/v1`). Answers are sampled at
//! temperature 0 on a server that serves one request at a time. Fails, never skips, when the
//! server is not there.
//!
//! The route passes only `temperature`, `top_p`, `top_k`, `stream`, `max_tokens`,
//! `stop_sequences`, tools and tool choice on to the model: a seed and `cache_prompt: false`
//! are dropped, so the prompt cache stays on. Two requests that must agree are made to meet
//! the same cache: each is preceded by the same other request, and the tests of this file
//! take turns at the server.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::sync::Arc;

use futures_util::StreamExt;
use stategraph_agent::{
    AnthropicConfig, ChatAnthropic, ChatModel, ChatRequest, Error, MessagesState, MessagesUpdate,
    ToolChoice, ToolSpec, create_react_agent, schema_of,
};
use stategraph_checkpoint::{InMemorySaver, Value};
use stategraph_graph::stream::StreamEvent;
use stategraph_graph::{RunConfig, StreamMode};
use stategraph_messages::{AiMessageChunk, Message, ToolCall};

/// The server's one slot, used by one test of this file at a time (so that no other request
/// comes between a request and the one it prepares the cache for).
static SERVER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn config(max_tokens: u32) -> AnthropicConfig {
    AnthropicConfig::new("smollm2")
        .base_url(stategraph_testkit::services::llm_url())
        .temperature(0.0)
        .max_tokens(max_tokens)
        // llama.cpp's own option (this route drops it; see the module's docs).
        .extra_body("cache_prompt", serde_json::json!(false))
        .max_retries(0)
}

fn model(max_tokens: u32) -> ChatAnthropic {
    config(max_tokens).build().unwrap_or_else(|e| {
        panic!(
            "the model at {}: {e}",
            stategraph_testkit::services::llm_url()
        )
    })
}

fn question() -> ChatRequest {
    ChatRequest::new([
        Message::system("You are a helpful assistant. Answer in one short sentence."),
        Message::human("What is the capital of France?"),
    ])
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
struct City {
    /// A city name.
    city: String,
}

fn weather() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "Today's weather in a city.".into(),
        parameters: schema_of::<City>(),
    }
}

fn call(id: &str, city: &str) -> ToolCall {
    ToolCall {
        name: "get_weather".into(),
        args: stategraph_checkpoint::value!({ "city": city }),
        id: Some(id.into()),
    }
}

/// A conversation the small model answers with a tool call: two earlier questions answered
/// with calls (without results, which llama-server does not require), then a third. The model
/// copies the pattern, and the server's parser reads its `<tool_call>` as a call. (The server
/// does not force calls: with this model's template, `tool_choice` `any` or `tool` still lets
/// it answer in prose.)
fn asks_for_a_call() -> ChatRequest {
    ChatRequest::new([
        Message::human("Weather in Paris?"),
        Message::ai("", vec![call("call_1", "Paris")]),
        Message::human("Weather in Rome?"),
        Message::ai("", vec![call("call_2", "Rome")]),
        Message::human("Weather in Berlin?"),
    ])
    .tools([weather()])
}

async fn whole(m: &ChatAnthropic, r: &ChatRequest) -> Message {
    m.invoke(r).await.unwrap_or_else(|e| {
        panic!(
            "the model server at {} must answer (scripts/llm-server.sh start): {e}",
            stategraph_testkit::services::llm_url()
        )
    })
}

async fn pieces(m: &ChatAnthropic, r: &ChatRequest) -> Vec<AiMessageChunk> {
    let stream = m
        .stream(r)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", m.url()));
    stream.map(|p| p.unwrap()).collect().await
}

/// A request that leaves the server's one slot with the same cache before each request it
/// precedes.
async fn reset(m: &ChatAnthropic) {
    whole(m, &ChatRequest::new([Message::human("Say hello.")])).await;
}

fn usage(m: &Message) -> (i64, i64, i64) {
    let Message::Ai { usage_metadata, .. } = m else {
        panic!("not an AI message: {m:?}")
    };
    let u = usage_metadata.as_map().unwrap();
    let n = |k| u.get(k).and_then(Value::as_i64).unwrap();
    (n("input_tokens"), n("output_tokens"), n("total_tokens"))
}

#[tokio::test]
async fn a_whole_answer_is_an_ai_message_as_chat_anthropic_builds_it() {
    let _turn = SERVER.lock().await;
    let m = model(24);
    let answer = whole(&m, &question()).await;
    let Message::Ai {
        fields, tool_calls, ..
    } = &answer
    else {
        panic!("not an AI message: {answer:?}")
    };
    // One text block: the content is its text.
    assert!(!answer.text().unwrap().trim().is_empty(), "{answer:?}");
    assert!(tool_calls.is_empty());
    assert!(fields.id.as_deref().unwrap().starts_with("lc_run--"));
    let meta = &fields.response_metadata;
    let text = |k| meta.get(k).and_then(Value::as_str);
    assert_eq!(text("model_provider"), Some("anthropic"));
    assert_eq!(text("model_name"), text("model"));
    assert!(
        matches!(text("stop_reason"), Some("end_turn" | "max_tokens")),
        "{meta:?}"
    );
    assert!(meta.get("id").and_then(Value::as_str).is_some(), "{meta:?}");
    assert!(
        meta.get("usage").and_then(Value::as_map).is_some(),
        "{meta:?}"
    );
    let (input, output, total) = usage(&answer);
    assert!(input > 10, "{input}");
    assert!(output > 0 && output <= 24, "{output}");
    assert_eq!(total, input + output);
}

#[tokio::test]
async fn the_streamed_pieces_add_up_to_the_whole_answer() {
    let _turn = SERVER.lock().await;
    let m = model(24);
    let r = question();
    reset(&m).await;
    let expected = whole(&m, &r).await;
    reset(&m).await;
    let pieces = pieces(&m, &r).await;
    assert!(pieces.len() > 3, "token by token: {}", pieces.len());
    let id = pieces[0].fields.id.clone().unwrap();
    assert!(id.starts_with("lc_run--"));
    assert!(
        pieces
            .iter()
            .all(|p| p.fields.id.as_deref() == Some(id.as_str()))
    );
    // The `message_start` piece names the model; the `message_delta` one ends the answer.
    assert!(
        pieces[0]
            .fields
            .response_metadata
            .get("model_name")
            .is_some()
    );
    let last = pieces.last().unwrap();
    assert_eq!(last.chunk_position.as_deref(), Some("last"));
    let mut sum = pieces[0].clone();
    for p in &pieces[1..] {
        sum.merge(p.clone()).unwrap();
    }
    let streamed = sum.into_message();
    assert_eq!(streamed.text(), expected.text());
    assert!(
        streamed
            .fields()
            .response_metadata
            .get("stop_reason")
            .is_some()
    );
    let (input, output, total) = usage(&streamed);
    assert_eq!((input, output, total), usage(&expected));
}

#[tokio::test]
async fn a_tool_call_is_parsed_whole_and_streamed() {
    let _turn = SERVER.lock().await;
    let m = model(48);
    let r = asks_for_a_call().tool_choice(ToolChoice::Required);
    let answer = whole(&m, &r).await;
    let Message::Ai {
        fields,
        tool_calls,
        usage_metadata,
        ..
    } = &answer
    else {
        panic!("{answer:?}")
    };
    assert_eq!(tool_calls.len(), 1, "{answer:?}");
    assert_eq!(tool_calls[0].name, "get_weather");
    assert_eq!(
        tool_calls[0].args,
        stategraph_checkpoint::value!({"city": "Berlin"})
    );
    let id = tool_calls[0].id.clone().unwrap();
    assert!(!id.is_empty());
    // With tool use, the content keeps Anthropic's blocks.
    let blocks = fields.content.as_list().unwrap();
    let tool_use = blocks
        .iter()
        .filter_map(Value::as_map)
        .find(|b| b.get("type") == Some(&Value::from("tool_use")))
        .unwrap();
    assert_eq!(tool_use.get("id"), Some(&Value::from(id.as_str())));
    assert_eq!(
        fields.response_metadata.get("stop_reason"),
        Some(&Value::from("tool_use"))
    );
    assert!(!usage_metadata.is_null());

    let pieces = pieces(&m, &r).await;
    assert!(pieces.iter().any(|p| !p.tool_call_chunks.is_empty()));
    let mut sum = pieces[0].clone();
    for p in &pieces[1..] {
        sum.merge(p.clone()).unwrap();
    }
    let (calls, invalid) = sum.tool_calls();
    assert!(invalid.is_empty(), "{invalid:?}");
    assert_eq!(calls.len(), 1, "{sum:?}");
    assert_eq!(calls[0].name, "get_weather");
    assert_eq!(calls[0].args, tool_calls[0].args);
    assert_eq!(
        sum.fields.response_metadata.get("stop_reason"),
        Some(&Value::from("tool_use"))
    );
}

#[tokio::test]
async fn a_tool_result_is_sent_back_and_answered() {
    let _turn = SERVER.lock().await;
    let m = model(24);
    let conversation = |result: &str| {
        ChatRequest::new([
            Message::system("You are a helpful assistant. Answer in one short sentence."),
            Message::human("What is the weather in Paris?"),
            Message::ai("", vec![call("call_1", "Paris")]),
            Message::tool(result, "call_1"),
        ])
        .tools([weather()])
    };
    let short = whole(&m, &conversation("Sunny.")).await;
    let long = whole(
        &m,
        &conversation("Sunny, 24 degrees, a light wind from the west, no rain until tonight."),
    )
    .await;
    // The server rendered the `tool_result` block into the prompt.
    assert!(
        usage(&long).0 > usage(&short).0 + 10,
        "{:?} vs {:?}",
        usage(&long),
        usage(&short)
    );
    // The answer goes back as the next turn (with a second result merged into one user turn).
    let mut next = conversation("Sunny.");
    next.messages.push(short);
    next.messages.push(Message::human("Thanks!"));
    whole(&m, &next).await;
}

#[tokio::test]
async fn a_response_format_is_sent_and_the_route_still_answers() {
    let _turn = SERVER.lock().await;
    // `output_config.format`: llama-server's `/v1/messages` does not pass it on (nor the
    // older `output_format`), so the answer is not held to the schema; the request is valid.
    let m = model(24);
    let r = question().response_format(stategraph_agent::ResponseFormat {
        name: "City".into(),
        description: String::new(),
        schema: schema_of::<City>(),
        strict: Some(true),
    });
    let answer = whole(&m, &r).await;
    assert!(!answer.text().unwrap_or_default().is_empty(), "{answer:?}");
}

#[tokio::test]
async fn bad_requests_are_typed_errors_naming_the_url() {
    let _turn = SERVER.lock().await;
    // A route the server does not have.
    let url = stategraph_testkit::services::llm_url();
    let wrong = format!("{}/nowhere", url.trim_end_matches('/'));
    let m = config(8).base_url(&wrong).build().unwrap();
    let err = m.invoke(&question()).await.unwrap_err();
    let Error::Http {
        url,
        status,
        attempts,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!((*status, *attempts), (404, 1), "{err}");
    assert_eq!(url, &format!("{wrong}/messages"));
    assert!(
        err.to_string().contains(&format!("{wrong}/messages")),
        "{err}"
    );
    // Longer than the server's context window (2048 tokens): its own words, not retried.
    let long = "word ".repeat(6000);
    let err = model(8)
        .invoke(&ChatRequest::new([Message::human(long)]))
        .await
        .unwrap_err();
    let Error::Http {
        status,
        message,
        attempts,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!((*status, *attempts), (400, 1), "{err}");
    assert!(message.contains("context"), "{message}");
    // Streams fail the same way, before any piece.
    let err = m.stream(&question()).await.err().unwrap();
    assert!(matches!(err, Error::Http { status: 404, .. }), "{err:?}");
}

#[tokio::test]
async fn an_agent_streams_the_models_tokens_into_the_messages_mode() {
    let _turn = SERVER.lock().await;
    let agent = create_react_agent(model(24), [])
        .prompt("You are a helpful assistant. Answer in one short sentence.")
        .checkpointer(Arc::new(InMemorySaver::new()))
        .build()
        .unwrap();
    let config = RunConfig::thread("anthropic");
    let mut stream = agent.stream(
        MessagesUpdate::messages([Message::human("What is the capital of France?")]),
        config.clone(),
        &[StreamMode::Messages],
    );
    let mut pieces = Vec::new();
    while let Some(e) = stream.next().await {
        if let StreamEvent::Messages(m) = e.unwrap() {
            let Message::AiChunk(c) = m.message else {
                panic!("the answer streams in pieces: {:?}", m.message)
            };
            assert_eq!(
                m.metadata.get("ls_provider"),
                Some(&Value::from("anthropic"))
            );
            assert_eq!(m.metadata.get("ls_max_tokens"), Some(&Value::from(24)));
            pieces.push(c);
        }
    }
    assert!(pieces.len() > 3);
    let text: String = pieces.iter().map(AiMessageChunk::text).collect();
    let state: MessagesState = agent.get_state(&config).await.unwrap().state().unwrap();
    assert_eq!(state.messages.len(), 2);
    assert_eq!(state.messages[1].text(), Some(text.as_str()));
    assert_eq!(state.messages[1].fields().id, pieces[0].fields.id);
}
