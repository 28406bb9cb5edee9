//! The request bodies, against what `ChatAnthropic` (langchain-anthropic 1.7) sends.

use super::*;
use crate::model::{ResponseFormat, ToolSpec};
use stategraph_checkpoint::{Map, value};
use stategraph_messages::MessageFields;

fn weather() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "Weather.".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    }
}

fn call(id: &str) -> ToolCall {
    ToolCall {
        name: "get_weather".into(),
        args: value!({"city": "Paris"}),
        id: Some(id.into()),
    }
}

#[test]
fn a_conversation_goes_out_as_chat_anthropic_sends_it() {
    let config = AnthropicConfig::new("m").temperature(0.0);
    let r = ChatRequest::new([
        Message::system("be brief"),
        Message::human("hi"),
        Message::ai("", vec![call("c1")]),
        Message::tool("sunny", "c1"),
        Message::tool("rainy", "c2"),
        Message::human("and?"),
    ])
    .tools([weather()])
    .tool_choice(ToolChoice::Tool("get_weather".into()));
    let body = request_body(&config, &r, false).unwrap();
    assert_eq!(body["system"], json!("be brief"));
    assert_eq!(body["max_tokens"], json!(1024));
    assert_eq!(body["temperature"], json!(0.0));
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "name": "get_weather", "input": {"city": "Paris"}, "id": "c1"}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "content": "sunny", "tool_use_id": "c1", "is_error": false},
                {"type": "tool_result", "content": "rainy", "tool_use_id": "c2", "is_error": false},
                {"type": "text", "text": "and?"}
            ]}
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{"name": "get_weather", "input_schema": weather().parameters, "description": "Weather."}])
    );
    assert_eq!(
        body["tool_choice"],
        json!({"type": "tool", "name": "get_weather"})
    );
    assert!(body.get("stream").is_none());
    assert_eq!(
        request_body(&config, &r, true).unwrap()["stream"],
        json!(true)
    );
}

#[test]
fn tool_choices_stops_and_structured_output() {
    let config = AnthropicConfig::new("m").extra_body("top_k", json!(1));
    let mut r = ChatRequest::new([Message::human("hi")]).tools([weather()]);
    for (choice, wire) in [
        (ToolChoice::Auto, json!({"type": "auto"})),
        (ToolChoice::None, json!({"type": "none"})),
        (ToolChoice::Required, json!({"type": "any"})),
    ] {
        r.tool_choice = Some(choice);
        assert_eq!(
            request_body(&config, &r, false).unwrap()["tool_choice"],
            wire
        );
    }
    r.tool_choice = None;
    r.parallel_tool_calls = Some(false);
    r.stop = vec!["\n".into()];
    r.response_format = Some(ResponseFormat {
        name: "City".into(),
        description: String::new(),
        schema: json!({"type": "object"}),
        strict: Some(true),
    });
    let body = request_body(&config, &r, false).unwrap();
    assert_eq!(
        body["tool_choice"],
        json!({"type": "auto", "disable_parallel_tool_use": true})
    );
    assert_eq!(body["stop_sequences"], json!(["\n"]));
    assert_eq!(
        body["output_config"],
        json!({"format": {"type": "json_schema", "schema": {"type": "object"}}})
    );
    assert_eq!(body["top_k"], json!(1));
    assert!(body.get("temperature").is_none());
}

#[test]
fn system_messages_and_empty_turns() {
    let config = AnthropicConfig::new("m");
    // Consecutive system messages merge into blocks; an empty AI turn in the middle goes
    // (after merging, so the user turns around it stay two, as in `ChatAnthropic`).
    let r = ChatRequest::new([
        Message::system("a"),
        Message::system("b"),
        Message::human("hi"),
        Message::ai("", vec![]),
        Message::human("again"),
        Message::ai("Sure.  \n", vec![]),
    ]);
    let body = request_body(&config, &r, false).unwrap();
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": "hi"},
            {"role": "user", "content": "again"},
            {"role": "assistant", "content": "Sure."}
        ])
    );
    let two = ChatRequest::new([
        Message::system("a"),
        Message::human("hi"),
        Message::system("b"),
    ]);
    let err = request_body(&config, &two, false).unwrap_err();
    assert!(err.to_string().contains("non-consecutive system"), "{err}");
    assert!(request_body(&config, &ChatRequest::new([Message::system("a")]), false).is_err());
    assert!(request_body(&config, &ChatRequest::default(), false).is_err());
}

#[test]
fn stored_anthropic_blocks_go_back_as_the_api_takes_them() {
    // An answer streamed from Anthropic and stored: indexed text and a tool_use block whose
    // input streamed as `partial_json`.
    let content = value!([
        {"text": "Let me check. ", "type": "text", "index": 0},
        {"id": "toolu_1", "name": "get_weather", "type": "tool_use", "index": 1,
         "partial_json": "{\"city\": \"Paris\"}"},
        {"type": "reasoning", "summary": []},
    ]);
    let mut meta = Map::new();
    meta.insert("model_provider", "openai");
    let ai = Message::Ai {
        fields: MessageFields {
            content,
            response_metadata: meta,
            ..MessageFields::default()
        },
        tool_calls: vec![call("toolu_1")],
        invalid_tool_calls: vec![value!({"name": "f", "args": "{oops", "id": "functions.f:0",
                                         "error": null, "type": "invalid_tool_call"})],
        usage_metadata: Value::Null,
    };
    let mut failed = Message::tool("boom", "functions.f:0");
    if let Message::Tool { status, .. } = &mut failed {
        *status = "error".into();
    }
    let r = ChatRequest::new([Message::human("hi"), ai, failed]);
    let body = request_body(&AnthropicConfig::new("m"), &r, false).unwrap();
    let hashed = normalize_id("functions.f:0");
    assert!(
        hashed.starts_with("toolu_") && hashed.len() == 30,
        "{hashed}"
    );
    assert_eq!(
        body["messages"][1]["content"],
        json!([
            {"text": "Let me check. ", "type": "text"},
            {"type": "tool_use", "name": "get_weather", "input": {"city": "Paris"}, "id": "toolu_1"},
            {"type": "tool_use", "name": "f", "input": {}, "id": hashed},
        ])
    );
    assert_eq!(
        body["messages"][2]["content"],
        json!([{"type": "tool_result", "content": "boom", "tool_use_id": hashed, "is_error": true}])
    );
}

#[test]
fn images_and_bad_blocks() {
    let content = value!([
        {"type": "text", "text": "What is it?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
    ]);
    let human = Message::Human(MessageFields {
        content,
        ..MessageFields::default()
    });
    let body = request_body(
        &AnthropicConfig::new("m"),
        &ChatRequest::new([human]),
        false,
    )
    .unwrap();
    assert_eq!(
        body["messages"][0]["content"][1],
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}})
    );
    assert_eq!(
        body["messages"][0]["content"][2]["source"],
        json!({"type": "url", "url": "https://x/y.png"})
    );
    let bad = Message::Human(MessageFields {
        content: value!([{"text": "no type"}]),
        ..MessageFields::default()
    });
    let err =
        request_body(&AnthropicConfig::new("m"), &ChatRequest::new([bad]), false).unwrap_err();
    assert!(err.to_string().contains("type"), "{err}");
}
