//! The OpenAI client in Responses API mode (`OpenAiConfig::use_responses_api`) against a real
//! model server: llama.cpp's `llama-server` serving SmolLM2-135M-Instruct on loopback, whose
//! `/v1/responses` route speaks the Responses wire format (`scripts/llm-server.sh start`; the
//! URL is `STATEGRAPH_TEST_LLM_URL`, default `http://127.0.0.1:18080/v1`). Answers are
//! sampled at temperature 0 with a fixed seed and no prompt cache (the route passes the body's
//! other fields on), on a server that serves one request at a time, so the whole and the
//! streamed answer agree. Fails, never skips, when the server is not there.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use futures_util::StreamExt;
use stategraph_agent::{
    ChatModel, ChatOpenAi, ChatRequest, Error, OpenAiConfig, ToolChoice, ToolSpec, schema_of,
};
use stategraph_checkpoint::Value;
use stategraph_messages::{AiMessageChunk, Message, ToolCall};

fn config(max_tokens: u32) -> OpenAiConfig {
    OpenAiConfig::new("smollm2")
        .base_url(stategraph_testkit::services::llm_url())
        .use_responses_api(true)
        .temperature(0.0)
        .max_tokens(max_tokens)
        // The Responses API has no seed; llama.cpp takes one, and its own `cache_prompt`
        // (a cached prefix is computed in other batches, which can change a greedy answer).
        .extra_body("seed", serde_json::json!(7))
        .extra_body("cache_prompt", serde_json::json!(false))
        .max_retries(0)
}

fn model(max_tokens: u32) -> ChatOpenAi {
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
/// does not force calls: with this model's template, `required` still lets it answer in prose,
/// and it reads a named tool choice, an object, as `auto`.)
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

async fn whole(m: &ChatOpenAi, r: &ChatRequest) -> Message {
    m.invoke(r).await.unwrap_or_else(|e| {
        panic!(
            "the model server at {} must answer (scripts/llm-server.sh start): {e}",
            stategraph_testkit::services::llm_url()
        )
    })
}

async fn pieces(m: &ChatOpenAi, r: &ChatRequest) -> Vec<AiMessageChunk> {
    let stream = m
        .stream(r)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", m.url()));
    stream.map(|p| p.unwrap()).collect().await
}

/// The text of an answer's `text` blocks.
fn text_of(m: &Message) -> String {
    let blocks = m.fields().content.as_list().unwrap_or_default();
    blocks
        .iter()
        .filter_map(Value::as_map)
        .filter(|b| b.get("type") == Some(&Value::from("text")))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect()
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
async fn a_whole_answer_is_an_ai_message_as_langchain_openai_builds_it() {
    let m = model(24);
    assert!(m.url().ends_with("/responses"), "{}", m.url());
    let answer = whole(&m, &question()).await;
    let Message::Ai {
        fields, tool_calls, ..
    } = &answer
    else {
        panic!("not an AI message: {answer:?}")
    };
    assert!(tool_calls.is_empty());
    // Content blocks: the message item's text with its id.
    let blocks = fields.content.as_list().unwrap();
    assert_eq!(blocks.len(), 1, "{answer:?}");
    let block = blocks[0].as_map().unwrap();
    assert_eq!(block.get("type"), Some(&Value::from("text")));
    assert!(
        block
            .get("id")
            .and_then(Value::as_str)
            .unwrap()
            .starts_with("msg_")
    );
    assert!(!text_of(&answer).trim().is_empty());
    // The response's id is the message's.
    let id = fields.id.as_deref().unwrap();
    assert!(id.starts_with("resp_"), "{id}");
    let meta = &fields.response_metadata;
    assert_eq!(meta.get("id").and_then(Value::as_str), Some(id));
    assert_eq!(meta.get("model_provider"), Some(&Value::from("openai")));
    assert_eq!(meta.get("status"), Some(&Value::from("completed")));
    assert_eq!(meta.get("object"), Some(&Value::from("response")));
    assert!(meta.get("model_name").and_then(Value::as_str).is_some());
    let (input, output, total) = usage(&answer);
    assert!(input > 10, "{input}");
    assert!(output > 0 && output <= 24, "{output}");
    assert_eq!(total, input + output);
}

#[tokio::test]
async fn the_streamed_pieces_add_up_to_the_whole_answer() {
    let m = model(24);
    let r = question();
    let expected = whole(&m, &r).await;
    let pieces = pieces(&m, &r).await;
    assert!(pieces.len() > 3, "token by token: {}", pieces.len());
    // Every piece carries the response's id (`response.created` comes first).
    let id = pieces[0].fields.id.clone().unwrap();
    assert!(id.starts_with("resp_"), "{id}");
    assert!(
        pieces
            .iter()
            .all(|p| p.fields.id.as_deref() == Some(id.as_str()))
    );
    let last = pieces.last().unwrap();
    assert_eq!(last.chunk_position.as_deref(), Some("last"));
    assert_eq!(
        last.fields.response_metadata.get("status"),
        Some(&Value::from("completed"))
    );
    let text: String = pieces.iter().map(AiMessageChunk::text).collect();
    assert_eq!(text, text_of(&expected));
    let mut sum = pieces[0].clone();
    for p in &pieces[1..] {
        sum.merge(p.clone()).unwrap();
    }
    let streamed = sum.into_message();
    assert_eq!(streamed.fields().id.as_deref(), Some(id.as_str()));
    // `response.completed` reports the usage.
    assert_eq!(usage(&streamed), usage(&expected));
}

#[tokio::test]
async fn a_tool_call_is_parsed_whole_and_streamed() {
    let m = model(48);
    let r = asks_for_a_call().tool_choice(ToolChoice::Required);
    let answer = whole(&m, &r).await;
    let Message::Ai {
        fields, tool_calls, ..
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
    let call_id = tool_calls[0].id.clone().unwrap();
    // The function call item is kept as a content block.
    let blocks = fields.content.as_list().unwrap();
    let call = blocks
        .iter()
        .filter_map(Value::as_map)
        .find(|b| b.get("type") == Some(&Value::from("function_call")))
        .unwrap();
    assert_eq!(call.get("call_id"), Some(&Value::from(call_id.as_str())));
    assert!(
        call.get("id")
            .and_then(Value::as_str)
            .unwrap()
            .starts_with("fc_")
    );

    let pieces = pieces(&m, &r).await;
    let mut sum = pieces[0].clone();
    for p in &pieces[1..] {
        sum.merge(p.clone()).unwrap();
    }
    let (calls, invalid) = sum.tool_calls();
    assert!(invalid.is_empty(), "{invalid:?}");
    assert_eq!(calls.len(), 1, "{sum:?}");
    assert_eq!(calls[0].name, "get_weather");
    assert_eq!(calls[0].args, tool_calls[0].args);
}

#[tokio::test]
async fn a_tool_result_is_sent_back_and_answered() {
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
    // The server rendered the `function_call_output` item into the prompt.
    assert!(
        usage(&long).0 > usage(&short).0 + 10,
        "{:?} vs {:?}",
        usage(&long),
        usage(&short)
    );
    // The whole answer goes back as the next turn's input (its items keep their ids).
    let mut next = conversation("Sunny.");
    next.messages.push(short);
    next.messages.push(Message::human("Thanks!"));
    whole(&m, &next).await;
}

#[tokio::test]
async fn bad_requests_are_typed_errors_naming_the_url() {
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
    assert_eq!(url, &format!("{wrong}/responses"));
    // A field llama-server refuses: its own words.
    let m = config(8)
        .extra_body("previous_response_id", serde_json::json!("resp_1"))
        .build()
        .unwrap();
    let err = m.invoke(&question()).await.unwrap_err();
    let Error::Http {
        status, message, ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(*status, 400, "{err}");
    assert!(message.contains("previous_response_id"), "{message}");
    let err = m.stream(&question()).await.err().unwrap();
    assert!(matches!(err, Error::Http { status: 400, .. }), "{err:?}");
}

#[tokio::test]
async fn structured_output_goes_as_text_format() {
    let format = stategraph_agent::ResponseFormat {
        name: "City".into(),
        description: String::new(),
        schema: schema_of::<City>(),
        strict: Some(true),
    };
    let r = ChatRequest::new([Message::human("What is the capital of France?")])
        .response_format(format);
    // llama-server's `/v1/responses` does not read `text.format` (the answer is prose), …
    let answer = whole(&model(40), &r).await;
    assert!(!text_of(&answer).is_empty(), "{answer:?}");
    // … but passes the rest of the body on to its chat completions, where its own
    // `response_format` holds the answer to the schema.
    let json_mode = config(40)
        .extra_body(
            "response_format",
            serde_json::json!({"type": "json_schema", "json_schema": {"name": "City", "schema": schema_of::<City>()}}),
        )
        .build()
        .unwrap();
    let answer = whole(&json_mode, &r).await;
    let parsed: serde_json::Value = serde_json::from_str(&text_of(&answer)).unwrap();
    assert!(parsed["city"].is_string(), "{parsed}");
}
