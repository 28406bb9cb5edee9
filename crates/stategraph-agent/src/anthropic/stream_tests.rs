//! The pieces of llama-server's and Anthropic's event streams, against `ChatAnthropic`'s.

use super::*;
use stategraph_checkpoint::value;
use stategraph_messages::Message;

/// The events llama-server sends for an answer with text and a tool call.
const EVENTS: &[&str] = &[
    r#"{"type":"message_start","message":{"id":"chatcmpl-1","type":"message","role":"assistant","content":[],"model":"smollm2","stop_reason":null,"stop_sequence":null,"usage":{"cache_read_input_tokens":0,"input_tokens":30,"output_tokens":0}}}"#,
    r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
    r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Par"}}"#,
    r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"is."}}"#,
    r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"call_1","name":"get_weather"}}"#,
    r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\": "}}"#,
    r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}}"#,
    r#"{"type":"content_block_stop","index":0}"#,
    r#"{"type":"content_block_stop","index":1}"#,
    r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":5}}"#,
    r#"{"type":"message_stop"}"#,
];

fn pieces(text_only: bool, events: &[&str]) -> (Parser, Vec<AiMessageChunk>) {
    let mut p = Parser::new(text_only);
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        out.extend(p.parse("u", i + 1, "", e).unwrap());
    }
    (p, out)
}

fn sum(pieces: &[AiMessageChunk]) -> AiMessageChunk {
    let mut all = pieces[0].clone();
    for p in &pieces[1..] {
        all.merge(p.clone()).unwrap();
    }
    all
}

#[test]
fn text_streams_as_strings_without_tools() {
    let events: Vec<&str> = EVENTS[..4].iter().chain(&EVENTS[9..]).copied().collect();
    let (parser, pieces) = pieces(true, &events);
    assert!(parser.finished());
    let texts: Vec<String> = pieces.iter().map(AiMessageChunk::text).collect();
    assert_eq!(texts, ["", "Par", "is.", ""]);
    assert_eq!(
        pieces[0].fields.response_metadata,
        stategraph_checkpoint::Map::from_iter([
            ("model_name", "smollm2"),
            ("model_provider", "anthropic")
        ])
    );
    let last = pieces.last().unwrap();
    assert_eq!(last.chunk_position.as_deref(), Some("last"));
    let whole = sum(&pieces);
    assert!(pieces.iter().all(|p| p.fields.id == whole.fields.id));
    assert_eq!(whole.fields.content, Value::from("Paris."));
    assert_eq!(
        whole.fields.response_metadata.get("stop_reason"),
        Some(&Value::from("tool_use"))
    );
    // llama-server's `message_delta` has no input count: the `message_start` one is used.
    assert_eq!(
        whole.usage_metadata,
        value!({"input_tokens": 30, "output_tokens": 5, "total_tokens": 35,
                "input_token_details": {"cache_read": 0}})
    );
}

#[test]
fn tool_calls_stream_by_block_index() {
    let (_, pieces) = pieces(false, EVENTS);
    // message_start, two text deltas, the tool_use start, two argument deltas, message_delta.
    assert_eq!(pieces.len(), 7);
    assert_eq!(
        pieces[1].fields.content,
        value!([{"text": "Par", "type": "text", "index": 0}])
    );
    assert_eq!(
        pieces[3].fields.content,
        value!([{"id": "call_1", "name": "get_weather", "type": "tool_use", "index": 1}])
    );
    assert_eq!(pieces[3].tool_call_chunks[0].args.as_deref(), Some(""));
    assert_eq!(
        pieces[4].fields.content,
        value!([{"partial_json": "{\"city\": ", "type": "input_json_delta", "index": 1}])
    );
    let whole = sum(&pieces).into_message();
    let Message::Ai { tool_calls, .. } = &whole else {
        panic!("{whole:?}")
    };
    assert_eq!(tool_calls.len(), 1);
    assert_eq!(tool_calls[0].args, value!({"city": "Paris"}));
    assert_eq!(tool_calls[0].id.as_deref(), Some("call_1"));
    let text: String = pieces.iter().map(AiMessageChunk::text).collect();
    assert_eq!(text, "Paris.");
    // The blocks of one index add up (LangChain's `merge_lists` keeps the first piece's
    // `type`): `[{"text": "Paris.", "type": "text", "index": 0}, {"id": "call_1", "name":
    // "get_weather", "type": "tool_use", "index": 1, "partial_json": "{\"city\": \"Paris\"}"}]`.
    assert_eq!(
        whole.fields().content.as_list().map(<[Value]>::len),
        Some(2)
    );
}

#[test]
fn errors_name_the_event() {
    let mut p = Parser::new(true);
    let err = p
        .parse(
            "http://h/v1/messages",
            4,
            "error",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        )
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("event 4") && text.contains("Overloaded"),
        "{text}"
    );
    assert!(text.contains("http://h/v1/messages"), "{text}");
    let err = p.parse("u", 5, "", "{oops").unwrap_err();
    assert!(err.to_string().contains("event 5, byte 1"), "{err}");
    let err = p
        .parse("u", 6, "", r#"{"type":"content_block_delta","delta":{}}"#)
        .unwrap_err();
    assert!(err.to_string().contains("event 6.index"), "{err}");
    // Pings and unknown events give nothing.
    assert!(
        p.parse("u", 7, "ping", r#"{"type":"ping"}"#)
            .unwrap()
            .is_empty()
    );
}
