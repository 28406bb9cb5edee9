//! A Messages API answer as the AI message `ChatAnthropic` makes of it.

use serde_json::Value as Json;
use stategraph_checkpoint::{Map, Value, uuid4};
use stategraph_messages::{Message, MessageFields, ToolCall};

use crate::error::{Error, Result};

/// A decode error at `path` of the answer from `url`.
pub(super) fn decode(url: &str, path: impl Into<String>, message: impl Into<String>) -> Error {
    Error::Decode {
        url: url.to_owned(),
        path: path.into(),
        message: message.into(),
    }
}

/// A non-streamed answer (`{"type": "message", "content": [...], …}`) as an AI message:
/// the content a string when it is one plain text block, else the blocks; the `tool_use`
/// blocks as tool calls; every other field of the answer in `response_metadata` (with
/// `model_name` and `model_provider`), and the usage as LangChain's `usage_metadata`.
pub(super) fn parse_message(url: &str, body: &Json) -> Result<Message> {
    if let Some(message) = crate::sse::error_message(body) {
        return Err(decode(
            url,
            "error",
            format!("the server answered an error: {message}"),
        ));
    }
    let object = body
        .as_object()
        .ok_or_else(|| decode(url, "$", "the answer is not an object"))?;
    let blocks = object
        .get("content")
        .and_then(Json::as_array)
        .ok_or_else(|| decode(url, "content", "missing or not a list"))?;
    let mut content = Vec::with_capacity(blocks.len());
    for (i, block) in blocks.iter().enumerate() {
        let Some(block) = block.as_object() else {
            return Err(decode(url, format!("content[{i}]"), "not an object"));
        };
        if block.get("type").and_then(Json::as_str).is_none() {
            return Err(decode(url, format!("content[{i}].type"), "missing"));
        }
        content.push(clean_block(block));
    }
    let mut tool_calls = Vec::new();
    let mut invalid_tool_calls = Vec::new();
    for (i, block) in content.iter().enumerate() {
        if block.get("type").and_then(Json::as_str) != Some("tool_use") {
            continue;
        }
        let name = block
            .get("name")
            .and_then(Json::as_str)
            .ok_or_else(|| decode(url, format!("content[{i}].name"), "missing"))?;
        let id = block.get("id").and_then(Json::as_str).map(str::to_owned);
        match block.get("input") {
            Some(args @ Json::Object(_)) => tool_calls.push(ToolCall {
                name: name.to_owned(),
                args: Value::from(args.clone()),
                id,
            }),
            other => {
                let mut m = Map::new();
                m.insert("name", name);
                m.insert("args", other.map(Json::to_string));
                m.insert("id", id);
                m.insert("error", "the tool input is not an object");
                m.insert("type", "invalid_tool_call");
                invalid_tool_calls.push(Value::Map(m));
            }
        }
    }
    let plain_text = match content.as_slice() {
        [only] if only.get("type").and_then(Json::as_str) == Some("text") => {
            let cited = only
                .get("citations")
                .is_some_and(|c| c.as_array().is_none_or(|a| !a.is_empty()));
            (!cited).then(|| only.get("text").and_then(Json::as_str).unwrap_or_default())
        }
        _ => None,
    };
    let content = match plain_text {
        Some(text) => Value::from(text),
        None => Value::from(Json::Array(content.into_iter().map(Json::Object).collect())),
    };
    let mut response_metadata = Map::new();
    let fields = object
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "content" | "role" | "type"));
    for (k, v) in sdk_order(fields) {
        let v = match v {
            Json::Object(usage) if k == "usage" => Json::Object(sdk_order(usage.iter())),
            other => other,
        };
        response_metadata.insert(k, Value::from(v));
    }
    if let Some(model) = object.get("model")
        && response_metadata.get("model_name").is_none()
    {
        response_metadata.insert("model_name", Value::from(model.clone()));
    }
    response_metadata.insert("model_provider", "anthropic");
    let usage = object.get("usage").filter(|u| u.is_object());
    let message = Message::Ai {
        fields: MessageFields {
            content,
            response_metadata,
            ..MessageFields::default()
        },
        tool_calls,
        invalid_tool_calls,
        usage_metadata: usage.map_or(Value::Null, |u| usage_metadata(u, None)),
    };
    // LangChain names an answer after the run that made it (Anthropic's id stays in
    // `response_metadata`).
    Ok(message.with_id(format!("lc_run--{}-0", uuid4())))
}

/// A content block without the null fields SDKs leave on it (`citations`, `caller`,
/// `encrypted_content`, a thinking block's `text`), its keys in the order Anthropic's Python
/// SDK dumps them (`id` first, then alphabetical), as `ChatAnthropic` stores them.
pub(super) fn clean_block(block: &serde_json::Map<String, Json>) -> serde_json::Map<String, Json> {
    let thinking = block.get("type").and_then(Json::as_str) == Some("thinking");
    sdk_order(block.iter().filter(|(k, v)| {
        !(v.is_null()
            && (matches!(k.as_str(), "citations" | "caller" | "encrypted_content")
                || (thinking && k.as_str() == "text")))
    }))
}

/// Fields in the order of the Python SDK's models: `id` first, the others alphabetical.
pub(super) fn sdk_order<'a>(
    fields: impl Iterator<Item = (&'a String, &'a Json)>,
) -> serde_json::Map<String, Json> {
    let mut fields: Vec<_> = fields.collect();
    fields.sort_by_key(|(k, _)| (k.as_str() != "id", k.as_str()));
    fields
        .into_iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Anthropic's `usage` as LangChain's `usage_metadata`: input counts the cached tokens read
/// and written (Anthropic's `input_tokens` leaves them out), with their details.
/// `start` is a stream's `message_start` usage, whose input counts stand in for those a
/// `message_delta` leaves out.
pub(super) fn usage_metadata(usage: &Json, start: Option<&Json>) -> Value {
    let n = |k: &str| {
        usage
            .get(k)
            .filter(|v| !v.is_null())
            .or_else(|| start?.get(k).filter(|v| !v.is_null()))
            .and_then(Json::as_i64)
    };
    let cache_read = n("cache_read_input_tokens");
    let mut cache_creation = n("cache_creation_input_tokens");
    let mut details = Map::new();
    let mut specific = 0;
    let creation = usage
        .get("cache_creation")
        .filter(|c| c.is_object())
        .or_else(|| start?.get("cache_creation").filter(|c| c.is_object()));
    let mut ttl = Vec::new();
    if let Some(c) = creation {
        for k in ["ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens"] {
            let v = c.get(k).and_then(Json::as_i64);
            specific += v.unwrap_or(0);
            ttl.push((k, v));
        }
        if specific > 0 {
            // Counted by TTL instead.
            cache_creation = Some(0);
        }
    }
    if let Some(v) = cache_read {
        details.insert("cache_read", v);
    }
    if let Some(v) = cache_creation {
        details.insert("cache_creation", v);
    }
    for (k, v) in ttl {
        if let Some(v) = v {
            details.insert(k, v);
        }
    }
    let created = if specific > 0 {
        specific
    } else {
        cache_creation.unwrap_or(0)
    };
    let input = n("input_tokens").unwrap_or(0) + cache_read.unwrap_or(0) + created;
    let output = n("output_tokens").unwrap_or(0);
    let mut m = Map::new();
    m.insert("input_tokens", input);
    m.insert("output_tokens", output);
    m.insert("total_tokens", input + output);
    m.insert("input_token_details", Value::Map(details));
    let reasoning = usage
        .get("output_tokens_details")
        .and_then(|d| d.get("thinking_tokens"))
        .and_then(Json::as_i64);
    if let Some(r) = reasoning {
        m.insert(
            "output_token_details",
            Value::Map(Map::from_iter([("reasoning", r)])),
        );
    }
    Value::Map(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use stategraph_checkpoint::value;

    #[test]
    fn a_text_answer_is_a_string_with_anthropics_metadata() {
        let body = json!({
            "id": "msg_1", "type": "message", "role": "assistant",
            "content": [{"type": "text", "text": "Paris.", "citations": null}],
            "model": "claude", "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"cache_read_input_tokens": 3, "input_tokens": 30, "output_tokens": 5}
        });
        let m = parse_message("u", &body).unwrap();
        assert_eq!(m.text(), Some("Paris."));
        let Message::Ai {
            fields,
            usage_metadata,
            ..
        } = &m
        else {
            panic!("{m:?}")
        };
        assert!(fields.id.as_deref().unwrap().starts_with("lc_run--"));
        let keys: Vec<_> = fields
            .response_metadata
            .iter()
            .map(|(k, _)| k.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            keys,
            [
                "id",
                "model",
                "stop_reason",
                "stop_sequence",
                "usage",
                "model_name",
                "model_provider"
            ]
        );
        assert_eq!(
            *usage_metadata,
            value!({"input_tokens": 33, "output_tokens": 5, "total_tokens": 38,
                    "input_token_details": {"cache_read": 3}})
        );
    }

    #[test]
    fn tool_use_keeps_the_blocks_and_makes_tool_calls() {
        let body = json!({
            "id": "msg_2", "type": "message", "role": "assistant", "model": "m",
            "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "toolu_2", "name": "bad", "input": "oops"}
            ],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 4}
        });
        let Message::Ai {
            fields,
            tool_calls,
            invalid_tool_calls,
            ..
        } = parse_message("u", &body).unwrap()
        else {
            panic!()
        };
        assert_eq!(fields.content.as_list().unwrap().len(), 3);
        assert_eq!(tool_calls.len(), 1);
        assert_eq!(tool_calls[0].args, value!({"city": "Paris"}));
        assert_eq!(tool_calls[0].id.as_deref(), Some("toolu_1"));
        assert_eq!(invalid_tool_calls.len(), 1);
        // No block at all is an empty list, as in Python.
        let empty = json!({"type": "message", "content": [], "model": "m"});
        let m = parse_message("u", &empty).unwrap();
        assert_eq!(m.fields().content, Value::List(Vec::new().into()));
    }

    #[test]
    fn bad_answers_name_where() {
        let err = parse_message("http://x/v1/messages", &json!({"content": [1]})).unwrap_err();
        assert!(err.to_string().contains("content[0]"), "{err}");
        assert!(err.to_string().contains("http://x/v1/messages"), "{err}");
        let err = parse_message(
            "u",
            &json!({"type": "error", "error": {"type": "api_error", "message": "boom"}}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("api_error: boom"), "{err}");
    }

    #[test]
    fn cache_writes_count_as_input() {
        let u = json!({"input_tokens": 1, "output_tokens": 2, "cache_creation_input_tokens": 10,
                       "cache_creation": {"ephemeral_5m_input_tokens": 4, "ephemeral_1h_input_tokens": 6},
                       "output_tokens_details": {"thinking_tokens": 1}});
        assert_eq!(
            usage_metadata(&u, None),
            value!({"input_tokens": 11, "output_tokens": 2, "total_tokens": 13,
                    "input_token_details": {"cache_creation": 0, "ephemeral_5m_input_tokens": 4,
                                            "ephemeral_1h_input_tokens": 6},
                    "output_token_details": {"reasoning": 1}})
        );
        // A stream's last usage without input counts takes them from its start.
        let start = json!({"input_tokens": 30, "cache_read_input_tokens": 0, "output_tokens": 0});
        assert_eq!(
            usage_metadata(&json!({"output_tokens": 5}), Some(&start)),
            value!({"input_tokens": 30, "output_tokens": 5, "total_tokens": 35,
                    "input_token_details": {"cache_read": 0}})
        );
    }
}
