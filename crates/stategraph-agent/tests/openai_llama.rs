//! The OpenAI-compatible client against a real model server: llama.cpp's `llama-server`
//! running SmolLM2-135M-Instruct on loopback (`scripts/llm-server.sh start`; the URL is
//! `STATEGRAPH_TEST_LLM_URL`, default `http://127.0.0.1:18080/v1`). Answers are sampled at
//! temperature 0 with a fixed seed and no prompt cache, on a server that serves one request
//! at a time, so the whole and the streamed answer agree. Fails, never skips, when the
//! server is not there.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::sync::Arc;

use futures_util::StreamExt;
use stategraph_agent::{
    ChatModel, ChatOpenAi, ChatRequest, Error, MessagesState, MessagesUpdate, OpenAiConfig,
    ToolSpec, create_react_agent, schema_of,
};
use stategraph_checkpoint::{InMemorySaver, Value};
use stategraph_graph::stream::StreamEvent;
use stategraph_graph::{RunConfig, StreamMode};
use stategraph_messages::{AiMessageChunk, Message};

fn model(max_tokens: u32) -> ChatOpenAi {
    let url = stategraph_testkit::services::llm_url();
    OpenAiConfig::new("smollm2")
        .base_url(&url)
        .temperature(0.0)
        .seed(7)
        .max_tokens(max_tokens)
        // llama.cpp's own option: evaluate every prompt afresh (a cached prefix is computed
        // in other batches, which can change the last digits and so a greedy answer).
        .extra_body("cache_prompt", serde_json::json!(false))
        .build()
        .unwrap_or_else(|e| panic!("the model server at {url}: {e}"))
}

fn question() -> ChatRequest {
    ChatRequest::new([
        Message::system("You are a helpful assistant. Answer in one short sentence."),
        Message::human("What is the capital of France?"),
    ])
}

async fn whole(m: &ChatOpenAi, r: &ChatRequest) -> Message {
    m.invoke(r).await.unwrap_or_else(|e| {
        panic!(
            "the model server at {} must answer (scripts/llm-server.sh start): {e}",
            stategraph_testkit::services::llm_url()
        )
    })
}

#[tokio::test]
async fn a_whole_answer_is_an_ai_message_with_metadata_and_usage() {
    let m = model(24);
    let answer = whole(&m, &question()).await;
    let Message::Ai {
        fields,
        tool_calls,
        usage_metadata,
        ..
    } = &answer
    else {
        panic!("not an AI message: {answer:?}")
    };
    assert!(!answer.text().unwrap().trim().is_empty(), "{answer:?}");
    assert!(tool_calls.is_empty());
    assert!(fields.id.as_deref().unwrap().starts_with("lc_run--"));
    let meta = &fields.response_metadata;
    assert_eq!(meta.get("model_provider"), Some(&Value::from("openai")));
    assert!(matches!(
        meta.get("finish_reason").and_then(Value::as_str),
        Some("stop" | "length")
    ));
    assert!(
        meta.get("id")
            .and_then(Value::as_str)
            .unwrap()
            .starts_with("chatcmpl-")
    );
    let usage = usage_metadata.as_map().unwrap();
    let n = |k| usage.get(k).and_then(Value::as_i64).unwrap();
    assert!(n("input_tokens") > 10);
    assert!(n("output_tokens") > 0 && n("output_tokens") <= 24);
    assert_eq!(n("total_tokens"), n("input_tokens") + n("output_tokens"));
}

#[tokio::test]
async fn the_streamed_pieces_add_up_to_the_whole_answer() {
    let m = model(24);
    let r = question();
    let expected = whole(&m, &r).await;
    let pieces: Vec<AiMessageChunk> = m
        .stream(&r)
        .await
        .unwrap()
        .map(|p| p.unwrap())
        .collect()
        .await;
    assert!(pieces.len() > 3, "token by token: {}", pieces.len());
    let id = pieces[0].fields.id.clone().unwrap();
    assert!(id.starts_with("lc_run--"));
    assert!(
        pieces
            .iter()
            .all(|p| p.fields.id.as_deref() == Some(id.as_str()))
    );
    assert_eq!(
        pieces.last().unwrap().chunk_position.as_deref(),
        Some("last")
    );
    let mut sum = pieces[0].clone();
    for p in &pieces[1..] {
        sum.merge(p.clone()).unwrap();
    }
    let streamed = sum.into_message();
    assert_eq!(streamed.text(), expected.text());
    let Message::Ai {
        fields,
        usage_metadata,
        ..
    } = &streamed
    else {
        panic!("{streamed:?}")
    };
    // Usage is reported at the end of the stream (`stream_options.include_usage`).
    assert!(
        usage_metadata
            .as_map()
            .unwrap()
            .get("output_tokens")
            .is_some()
    );
    assert!(fields.response_metadata.get("finish_reason").is_some());
}

#[tokio::test]
async fn tools_are_offered_in_the_request() {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct City {
        /// A city name.
        city: String,
    }
    let m = model(8);
    let plain = whole(&m, &question()).await;
    let tool = ToolSpec {
        name: "get_weather".into(),
        description: "Today's weather in a city.".into(),
        parameters: schema_of::<City>(),
    };
    let offered = whole(&m, &question().tools([tool])).await;
    // The server rendered the tool's signature into the prompt: more input tokens.
    let input = |m: &Message| match m {
        Message::Ai { usage_metadata, .. } => usage_metadata
            .as_map()
            .and_then(|u| u.get("input_tokens"))
            .and_then(Value::as_i64)
            .unwrap(),
        _ => panic!("{m:?}"),
    };
    assert!(
        input(&offered) > input(&plain) + 20,
        "{} vs {}",
        input(&offered),
        input(&plain)
    );
}

#[tokio::test]
async fn the_servers_refusal_is_a_typed_error_with_its_message() {
    let m = model(8);
    // Longer than the server's context window (2048 tokens).
    let long = "word ".repeat(6000);
    let err = m
        .invoke(&ChatRequest::new([Message::human(long)]))
        .await
        .unwrap_err();
    let Error::Http {
        status,
        attempts,
        message,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(
        (*status, *attempts),
        (400, 1),
        "a client error is not retried"
    );
    assert!(message.contains("context"), "{message}");
}

#[tokio::test]
async fn an_agent_streams_the_models_tokens_into_the_messages_mode() {
    let agent = create_react_agent(model(24), [])
        .prompt("You are a helpful assistant. Answer in one short sentence.")
        .checkpointer(Arc::new(InMemorySaver::new()))
        .build()
        .unwrap();
    let config = RunConfig::thread("llama");
    let mut stream = agent.stream(
        MessagesUpdate::messages([Message::human("What is the capital of France?")]),
        config.clone(),
        &[StreamMode::Messages, StreamMode::Updates],
    );
    let mut pieces = Vec::new();
    let mut updates = 0;
    while let Some(e) = stream.next().await {
        match e.unwrap() {
            StreamEvent::Messages(m) => {
                let Message::AiChunk(c) = m.message else {
                    panic!("the answer streams in pieces: {:?}", m.message)
                };
                assert_eq!(
                    m.metadata.get("langgraph_node"),
                    Some(&Value::from("agent"))
                );
                assert_eq!(
                    m.metadata.get("ls_model_name"),
                    Some(&Value::from("smollm2"))
                );
                assert_eq!(m.metadata.get("ls_temperature"), Some(&Value::from(0.0)));
                pieces.push(c);
            }
            StreamEvent::Updates(_) => updates += 1,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(updates, 1);
    assert!(pieces.len() > 3);
    let text: String = pieces.iter().map(AiMessageChunk::text).collect();
    let state: MessagesState = agent.get_state(&config).await.unwrap().state().unwrap();
    assert_eq!(state.messages.len(), 2);
    assert_eq!(state.messages[1].text(), Some(text.as_str()));
    assert_eq!(state.messages[1].fields().id, pieces[0].fields.id);
}
