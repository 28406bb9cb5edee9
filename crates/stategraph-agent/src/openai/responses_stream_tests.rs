//! The pieces of llama-server's Responses event streams (which carry no `output_index`),
//! against langchain-openai's for the same events with their indices.

use super::*;
use stategraph_checkpoint::value;

/// llama-server's events for a text and a function call (the `done` events come last).
const EVENTS: &[&str] = &[
    r#"{"type":"response.created","response":{"id":"resp_abc","object":"response","status":"in_progress"}}"#,
    r#"{"type":"response.in_progress","response":{"id":"resp_abc","object":"response","status":"in_progress"}}"#,
    r#"{"type":"response.output_item.added","item":{"content":[],"id":"msg_1","role":"assistant","status":"in_progress","type":"message"}}"#,
    r#"{"type":"response.content_part.added","item_id":"msg_1","part":{"type":"output_text","text":""}}"#,
    r#"{"type":"response.output_text.delta","item_id":"msg_1","delta":"Par"}"#,
    r#"{"type":"response.output_text.delta","item_id":"msg_1","delta":"is."}"#,
    r#"{"type":"response.output_item.added","item":{"arguments":"","call_id":"call_x","id":"fc_x","name":"get_weather","status":"in_progress","type":"function_call"}}"#,
    r#"{"type":"response.function_call_arguments.delta","item_id":"fc_x","delta":"{\"city\":"}"#,
    r#"{"type":"response.function_call_arguments.delta","item_id":"fc_x","delta":"\"Paris\"}"}"#,
    r#"{"type":"response.output_text.done","item_id":"msg_1","text":"Paris."}"#,
    r#"{"type":"response.output_item.done","item":{"id":"fc_x","type":"function_call","status":"completed","arguments":"{\"city\":\"Paris\"}","call_id":"call_x","name":"get_weather"}}"#,
    r#"{"type":"response.completed","response":{"id":"resp_abc","object":"response","created_at":1,"status":"completed","model":"smollm2","output":[],"usage":{"input_tokens":30,"input_tokens_details":{"cached_tokens":0},"output_tokens":5,"total_tokens":35}}}"#,
];

fn pieces(events: &[&str]) -> (Parser, Vec<AiMessageChunk>) {
    let mut p = Parser::new(false);
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        out.extend(p.parse("u", i + 1, "", e).unwrap());
    }
    (p, out)
}

#[test]
fn events_become_indexed_blocks() {
    let (parser, pieces) = pieces(EVENTS);
    assert!(parser.finished());
    let contents: Vec<Value> = pieces.iter().map(|p| p.fields.content.clone()).collect();
    assert_eq!(
        contents,
        vec![
            value!([]),
            value!([]),
            value!([{"type": "text", "text": "Par", "index": 0}]),
            value!([{"type": "text", "text": "is.", "index": 0}]),
            value!([{"type": "function_call", "name": "get_weather", "arguments": "", "call_id": "call_x",
                     "id": "fc_x", "index": 1}]),
            value!([{"type": "function_call", "arguments": "{\"city\":", "index": 1}]),
            value!([{"type": "function_call", "arguments": "\"Paris\"}", "index": 1}]),
            // The text item's `done` after the call: a block of its own, as in Python.
            value!([{"type": "text", "text": "", "id": "msg_1", "index": 2}]),
            value!([]),
        ]
    );
    // Every piece carries the response's id.
    assert!(
        pieces
            .iter()
            .all(|p| p.fields.id.as_deref() == Some("resp_abc"))
    );
    assert_eq!(
        Value::Map(pieces[0].fields.response_metadata.clone()),
        value!({"model_provider": "openai", "id": "resp_abc"})
    );
    let last = pieces.last().unwrap();
    assert_eq!(last.chunk_position.as_deref(), Some("last"));
    assert_eq!(
        Value::Map(last.fields.response_metadata.clone()),
        value!({"created_at": 1.0, "model": "smollm2", "object": "response", "status": "completed",
                "model_provider": "openai", "model_name": "smollm2"})
    );
    assert_eq!(
        last.usage_metadata,
        value!({"input_tokens": 30, "output_tokens": 5, "total_tokens": 35,
                "input_token_details": {"cache_read": 0}, "output_token_details": {}})
    );
    let mut whole = pieces[0].clone();
    for p in &pieces[1..] {
        whole.merge(p.clone()).unwrap();
    }
    let (calls, invalid) = whole.tool_calls();
    assert!(invalid.is_empty());
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].args, value!({"city": "Paris"}));
    assert_eq!(calls[0].id.as_deref(), Some("call_x"));
    let text: String = pieces.iter().map(AiMessageChunk::text).collect();
    assert_eq!(text, "Paris.");
}

#[test]
fn openai_indices_are_used_when_sent() {
    let events = [
        r#"{"type":"response.output_item.added","output_index":3,"item":{"id":"fc_1","type":"function_call","name":"f","arguments":"","call_id":"c"}}"#,
        r#"{"type":"response.function_call_arguments.delta","output_index":3,"item_id":"fc_1","delta":"{}"}"#,
        r#"{"type":"response.output_text.delta","output_index":4,"content_index":0,"item_id":"m","delta":"x"}"#,
    ];
    let (_, pieces) = pieces(&events);
    assert_eq!(pieces[1].tool_call_chunks[0].index, Some(0));
    assert_eq!(
        pieces[2].fields.content,
        value!([{"type": "text", "text": "x", "index": 1}])
    );
}

#[test]
fn failures_are_errors_naming_the_event() {
    let mut p = Parser::new(false);
    let err = p
        .parse(
            "http://h/v1/responses",
            2,
            "error",
            r#"{"type":"error","code":"server_error","message":"boom"}"#,
        )
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("event 2") && text.contains("server_error: boom"),
        "{text}"
    );
    assert!(text.contains("http://h/v1/responses"), "{text}");
    let err = p
        .parse("u", 3, "", r#"{"type":"response.failed","response":{"id":"r","error":{"code":"x","message":"bad"}}}"#)
        .unwrap_err();
    assert!(err.to_string().contains("bad"), "{err}");
    let err = p.parse("u", 4, "", "nope").unwrap_err();
    assert!(err.to_string().contains("event 4, byte 1"), "{err}");
    let err = p
        .parse("u", 5, "", r#"{"type":"response.completed"}"#)
        .unwrap_err();
    assert!(err.to_string().contains("event 5.response"), "{err}");
}
