//! Responses API answers, against the AI messages langchain-openai 1.7.3 builds of them.

use super::*;
use stategraph_checkpoint::value;

fn call(id: &str) -> ToolCall {
    ToolCall {
        name: "get_weather".into(),
        args: value!({"city": "Paris"}),
        id: Some(id.into()),
    }
}

/// llama-server's answer (its keys sorted, as it writes them).
fn llama_answer() -> Json {
    json!({
        "completed_at": 1, "created_at": 1, "id": "resp_abc", "model": "smollm2", "object": "response",
        "output": [
            {"content": [{"annotations": [], "logprobs": [], "text": "Paris.", "type": "output_text"}],
             "id": "msg_1", "role": "assistant", "status": "completed", "type": "message"},
            {"arguments": "{\"city\":\"Paris\"}", "call_id": "call_x", "id": "fc_x", "name": "get_weather",
             "status": "completed", "type": "function_call"},
            {"arguments": "{oops", "call_id": "call_y", "id": "fc_y", "name": "f", "status": "completed",
             "type": "function_call"}
        ],
        "status": "completed",
        "usage": {"input_tokens": 30, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5, "total_tokens": 35}
    })
}

#[test]
fn answers_are_built_as_langchain_openai_builds_them() {
    let m = parse_response("u", &llama_answer(), false).unwrap();
    let Message::Ai {
        fields,
        tool_calls,
        invalid_tool_calls,
        usage_metadata,
    } = m
    else {
        panic!()
    };
    assert_eq!(fields.id.as_deref(), Some("resp_abc"));
    assert_eq!(
        fields.content,
        value!([
            {"type": "text", "text": "Paris.", "annotations": [], "id": "msg_1"},
            {"arguments": "{\"city\":\"Paris\"}", "call_id": "call_x", "name": "get_weather",
             "type": "function_call", "id": "fc_x", "status": "completed"},
            {"arguments": "{oops", "call_id": "call_y", "name": "f",
             "type": "function_call", "id": "fc_y", "status": "completed"},
        ])
    );
    assert_eq!(
        Value::Map(fields.response_metadata),
        value!({"id": "resp_abc", "created_at": 1.0, "model": "smollm2", "object": "response",
                "status": "completed", "model_provider": "openai", "model_name": "smollm2"})
    );
    assert_eq!(
        tool_calls,
        vec![ToolCall {
            id: Some("call_x".into()),
            ..call("")
        }]
    );
    assert_eq!(invalid_tool_calls.len(), 1);
    assert_eq!(
        usage_metadata,
        value!({"input_tokens": 30, "output_tokens": 5, "total_tokens": 35,
                "input_token_details": {"cache_read": 0}, "output_token_details": {}})
    );
}

#[test]
fn structured_answers_are_parsed_and_errors_named() {
    let body = json!({"id": "resp_1", "output": [{"type": "message", "id": "msg_1", "content": [
        {"type": "output_text", "text": "{\"name\": \"Paris\"}", "annotations": []}]}],
        "text": {"format": {"type": "json_schema", "name": "City"}}});
    let m = parse_response("u", &body, true).unwrap();
    assert_eq!(
        m.fields().additional_kwargs.get("parsed"),
        Some(&value!({"name": "Paris"}))
    );
    let err = parse_response(
        "http://h/v1/responses",
        &json!({"error": {"message": "no"}}),
        false,
    )
    .unwrap_err();
    assert!(err.to_string().contains("http://h/v1/responses"), "{err}");
    let err = parse_response("u", &json!({"output": [{"id": 1}]}), false).unwrap_err();
    assert!(err.to_string().contains("output[0].type"), "{err}");
    let tiered = usage_metadata(
        &json!({"input_tokens": 10, "output_tokens": 4, "input_tokens_details": {"cached_tokens": 2},
                "output_tokens_details": {"reasoning_tokens": 1}}),
        Some("flex"),
    );
    assert_eq!(
        tiered,
        value!({"input_tokens": 10, "output_tokens": 4, "total_tokens": 14,
                "input_token_details": {"flex_cache_read": 2, "flex": 8},
                "output_token_details": {"flex_reasoning": 1, "flex": 3}})
    );
}
