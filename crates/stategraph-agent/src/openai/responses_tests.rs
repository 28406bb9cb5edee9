//! The Responses API's request bodies and answers, against langchain-openai 1.7.3's.

use super::*;
use crate::model::{ResponseFormat, ToolSpec};
use stategraph_checkpoint::value;
use stategraph_messages::MessageFields;

fn call(id: &str) -> ToolCall {
    ToolCall {
        name: "get_weather".into(),
        args: value!({"city": "Paris"}),
        id: Some(id.into()),
    }
}

#[test]
fn messages_go_out_as_input_items() {
    // An answer from an earlier response, stored as langchain-openai stores it.
    let earlier = Message::Ai {
        fields: MessageFields {
            content: value!([
                {"type": "text", "text": "Hm.", "annotations": [], "id": "msg_0"},
                {"type": "function_call", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}",
                 "call_id": "c0", "id": "fc_0", "status": "completed", "index": 1},
            ]),
            ..MessageFields::default()
        },
        tool_calls: vec![call("c0")],
        invalid_tool_calls: Vec::new(),
        usage_metadata: Value::Null,
    };
    let tool = ToolSpec {
        name: "get_weather".into(),
        description: "Weather.".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
    };
    let r = ChatRequest::new([
        Message::system("be brief"),
        Message::human("hi"),
        Message::ai("", vec![call("c1")]),
        Message::tool("sunny", "c1"),
        Message::ai("ok", vec![]),
        earlier,
        Message::tool("rainy", "c0"),
        Message::human("and?"),
    ])
    .tools([tool.clone()])
    .tool_choice(ToolChoice::Tool("get_weather".into()));
    let config = OpenAiConfig::new("m")
        .temperature(0.0)
        .max_tokens(24)
        .seed(7)
        .extra_body("cache_prompt", json!(false));
    let mut r = r;
    r.stop = vec!["\n".into()];
    let body = request_body(&config, &r, true).unwrap();
    // As langchain-openai sends them (captured from `ChatOpenAI(use_responses_api=True)`).
    assert_eq!(
        body["input"],
        json!([
            {"content": "be brief", "role": "system", "type": "message"},
            {"content": "hi", "role": "user", "type": "message"},
            {"type": "function_call", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}", "call_id": "c1"},
            {"type": "function_call_output", "output": "sunny", "call_id": "c1"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok", "annotations": []}]},
            {"type": "message", "content": [{"type": "output_text", "text": "Hm.", "annotations": []}], "role": "assistant", "id": "msg_0"},
            {"type": "function_call", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}", "call_id": "c0", "id": "fc_0", "status": "completed"},
            {"type": "function_call_output", "output": "rainy", "call_id": "c0"},
            {"content": "and?", "role": "user", "type": "message"}
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "name": "get_weather", "description": "Weather.", "parameters": tool.parameters}])
    );
    assert_eq!(
        body["tool_choice"],
        json!({"type": "function", "name": "get_weather"})
    );
    assert_eq!(body["max_output_tokens"], json!(24));
    assert_eq!(body["stream"], json!(true));
    assert_eq!(body["cache_prompt"], json!(false));
    for absent in ["stop", "seed", "max_tokens", "stream_options", "messages"] {
        assert!(body.get(absent).is_none(), "{absent}");
    }
}

#[test]
fn structured_output_is_text_format() {
    let mut r = ChatRequest::new([Message::human("x")]);
    r.response_format = Some(ResponseFormat {
        name: "City".into(),
        description: "A city.".into(),
        schema: json!({"type": "object"}),
        strict: Some(false),
    });
    r.tool_choice = Some(ToolChoice::Required);
    let body = request_body(&OpenAiConfig::new("m"), &r, false).unwrap();
    let format = &body["text"]["format"];
    assert_eq!(
        *format,
        json!({"type": "json_schema", "name": "City", "description": "A city.", "strict": false, "schema": {"type": "object"}})
    );
    let keys: Vec<&str> = format
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["type", "name", "description", "strict", "schema"]);
    assert_eq!(body["tool_choice"], json!("required"));
    assert!(request_body(&OpenAiConfig::new("m"), &ChatRequest::default(), false).is_err());
}

#[test]
fn the_client_switches_endpoints() {
    let m = OpenAiConfig::new("m")
        .base_url("http://127.0.0.1:1/v1")
        .use_responses_api(true)
        .build()
        .unwrap();
    assert_eq!(m.url(), "http://127.0.0.1:1/v1/responses");
    assert_eq!(
        py_dumps(&json!({"a": [1, {"b": "c"}]})),
        r#"{"a": [1, {"b": "c"}]}"#
    );
}
