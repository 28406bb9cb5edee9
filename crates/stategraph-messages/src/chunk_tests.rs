//! The tests of `chunk.rs`.
use super::*;
use stategraph_value::value;

fn piece(text: &str, calls: Vec<ToolCallChunk>) -> AiMessageChunk {
    AiMessageChunk {
        tool_call_chunks: calls,
        ..AiMessageChunk::text_piece(text)
    }
}

#[test]
fn partial_json_reads_as_far_as_it_goes() {
    let p = |s| parse_partial_json(s);
    assert_eq!(
        p(r#"{"city": "Par"#),
        Some(serde_json::json!({"city": "Par"}))
    );
    assert_eq!(p(r#"{"ci"#), Some(serde_json::json!({})));
    assert_eq!(p(r#"{"a": [1, 2"#), Some(serde_json::json!({"a": [1, 2]})));
    assert_eq!(p("{bad"), Some(serde_json::json!({})));
    assert_eq!(p(r#"{"a": "x\"#), Some(serde_json::json!({"a": "x"})));
    assert_eq!(p("]"), None);
    assert_eq!(p(r#"{"a": 1}"#), Some(serde_json::json!({"a": 1})));
}

#[test]
fn pieces_add_up_as_langchain_adds_them() {
    // The same pieces in Python (langchain-core 1.7.2) add up to content "Hello", one
    // tool call `get` with args {"city": 1}, finish_reason tool_calls, chunk_position last.
    let mut sum = piece(
        "Hel",
        vec![ToolCallChunk {
            name: Some("get".into()),
            args: Some(r#"{"ci"#.into()),
            id: Some("c1".into()),
            index: Some(0),
        }],
    )
    .with_id("x");
    let (calls, _) = sum.tool_calls();
    assert_eq!(calls[0].args, value!({}));
    let mut last = piece(
        "lo",
        vec![ToolCallChunk {
            args: Some(r#"ty": 1}"#.into()),
            index: Some(0),
            ..ToolCallChunk::default()
        }],
    );
    last.chunk_position = Some("last".into());
    last.fields
        .response_metadata
        .insert("finish_reason", "tool_calls");
    sum.merge(last).unwrap();
    assert_eq!(sum.text(), "Hello");
    assert_eq!(sum.chunk_position.as_deref(), Some("last"));
    let message = sum.clone().into_message();
    let Message::Ai {
        fields, tool_calls, ..
    } = &message
    else {
        panic!("not an AI message: {message:?}");
    };
    assert_eq!(fields.id.as_deref(), Some("x"));
    assert_eq!(tool_calls[0].name, "get");
    assert_eq!(tool_calls[0].args, value!({"city": 1}));
    assert_eq!(
        fields.response_metadata.get("finish_reason"),
        Some(&value!("tool_calls"))
    );
    // Round trip through the stored form.
    let back = Message::from_value(&sum.to_value()).unwrap();
    assert_eq!(back, Message::AiChunk(sum));
}

#[test]
fn ids_usage_and_metadata_merge() {
    let mut a = AiMessageChunk::text_piece("a").with_id("lc_run--1");
    a.usage_metadata = value!({"input_tokens": 3, "output_tokens": 1, "total_tokens": 4});
    a.fields
        .response_metadata
        .insert("model_provider", "openai");
    let mut b = AiMessageChunk::text_piece("b").with_id("chatcmpl-9");
    b.usage_metadata = value!({"input_tokens": 0, "output_tokens": 2, "total_tokens": 2});
    b.fields
        .response_metadata
        .insert("model_provider", "openai");
    a.merge(b).unwrap();
    assert_eq!(a.fields.id.as_deref(), Some("chatcmpl-9"));
    assert_eq!(
        a.usage_metadata,
        value!({"input_tokens": 3, "output_tokens": 3, "total_tokens": 6})
    );
    assert_eq!(
        a.fields.response_metadata.get("model_provider"),
        Some(&value!("openai"))
    );
    let mut c = AiMessageChunk::text_piece("");
    c.fields.response_metadata.insert("model_provider", 7);
    assert!(a.merge(c).is_err());
}

#[test]
fn indexed_blocks_keep_their_type() {
    let mut a = AiMessageChunk::text_piece("");
    let mut b = a.clone();
    a.fields.content = value!([{"type": "text", "text": "Par", "index": 0}]);
    b.fields.content = value!([{"type": "text", "text": "is", "index": 0}]);
    a.merge(b).unwrap();
    assert_eq!(
        a.fields.content,
        value!([{"type": "text", "text": "Paris", "index": 0}])
    );
    assert_eq!(a.text(), "Paris");
}
