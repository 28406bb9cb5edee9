//! The chat-completions wire format: requests from LangChain messages (as `ChatOpenAI`
//! sends them), answers back into messages.

use serde_json::{Value as Json, json};
use stategraph_checkpoint::{Map, Value, uuid4};
use stategraph_graph::stream::value_json;
use stategraph_messages::{Message, ToolCall};

use super::OpenAiConfig;
use crate::error::{Error, Result};
use crate::model::{ChatRequest, ToolChoice};

/// The JSON body of a request.
pub(super) fn request_body(config: &OpenAiConfig, r: &ChatRequest, stream: bool) -> Result<Json> {
    if r.messages.is_empty() {
        return Err(Error::InvalidRequest(
            "a chat request needs at least one message".into(),
        ));
    }
    let mut body = serde_json::Map::new();
    body.insert("model".into(), json!(config.model));
    let messages = r
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            message_json(m).map_err(|e| Error::InvalidRequest(format!("messages[{i}]: {e}")))
        })
        .collect::<Result<Vec<_>>>()?;
    body.insert("messages".into(), Json::Array(messages));
    if stream {
        body.insert("stream".into(), json!(true));
        if config.stream_usage {
            body.insert("stream_options".into(), json!({ "include_usage": true }));
        }
    }
    if let Some(t) = config.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(n) = config.max_tokens {
        body.insert("max_tokens".into(), json!(n));
    }
    if let Some(s) = config.seed {
        body.insert("seed".into(), json!(s));
    }
    if !r.stop.is_empty() {
        body.insert("stop".into(), json!(r.stop));
    }
    if !r.tools.is_empty() {
        let tools: Vec<Json> = r
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    }
                })
            })
            .collect();
        body.insert("tools".into(), Json::Array(tools));
    }
    if let Some(choice) = &r.tool_choice {
        let v = match choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Tool(name) => json!({ "type": "function", "function": { "name": name } }),
        };
        body.insert("tool_choice".into(), v);
    }
    if let Some(p) = r.parallel_tool_calls {
        body.insert("parallel_tool_calls".into(), json!(p));
    }
    if let Some(f) = &r.response_format {
        let mut schema = serde_json::Map::new();
        schema.insert("name".into(), json!(f.name));
        if !f.description.is_empty() {
            schema.insert("description".into(), json!(f.description));
        }
        schema.insert("schema".into(), f.schema.clone());
        if let Some(strict) = f.strict {
            schema.insert("strict".into(), json!(strict));
        }
        body.insert(
            "response_format".into(),
            json!({ "type": "json_schema", "json_schema": schema }),
        );
    }
    for (k, v) in &config.extra_body {
        body.insert(k.clone(), v.clone());
    }
    Ok(Json::Object(body))
}

/// A message as `ChatOpenAI` sends it.
fn message_json(m: &Message) -> Result<Json, String> {
    let f = m.fields();
    let content = content_json(&f.content);
    let mut out = serde_json::Map::new();
    match m {
        Message::Human(_) => {
            out.insert("role".into(), json!("user"));
            out.insert("content".into(), content);
        }
        Message::System(_) => {
            let developer = f
                .additional_kwargs
                .get("__openai_role__")
                .and_then(Value::as_str)
                == Some("developer");
            out.insert(
                "role".into(),
                json!(if developer { "developer" } else { "system" }),
            );
            out.insert("content".into(), content);
        }
        Message::Ai {
            tool_calls,
            invalid_tool_calls,
            ..
        } => {
            out.insert("role".into(), json!("assistant"));
            let mut calls: Vec<Json> = tool_calls.iter().map(tool_call_json).collect();
            for bad in invalid_tool_calls {
                let get = |k| bad.as_map().and_then(|m| m.get(k)).map(Value::to_json);
                calls.push(json!({
                    "type": "function",
                    "id": get("id").unwrap_or(Json::Null),
                    "function": {
                        "name": get("name").unwrap_or(Json::Null),
                        "arguments": get("args").unwrap_or(Json::Null),
                    }
                }));
            }
            let empty = content.as_str() == Some("") || content.is_null();
            if calls.is_empty() {
                out.insert("content".into(), content);
            } else {
                // As `ChatOpenAI`: no text next to tool calls is `null`.
                out.insert("content".into(), if empty { Json::Null } else { content });
                out.insert("tool_calls".into(), Json::Array(calls));
            }
        }
        Message::AiChunk(c) => return message_json(&c.clone().into_message()),
        Message::Tool { tool_call_id, .. } => {
            out.insert("role".into(), json!("tool"));
            out.insert("content".into(), content);
            out.insert("tool_call_id".into(), json!(tool_call_id));
        }
        other => {
            return Err(format!(
                "cannot send a {other:?} to an OpenAI-compatible API"
            ));
        }
    }
    if let Some(name) = &f.name {
        out.insert("name".into(), json!(name));
    }
    Ok(Json::Object(out))
}

fn content_json(content: &Value) -> Json {
    match content {
        Value::Null => json!(""),
        other => value_json(other),
    }
}

fn tool_call_json(c: &ToolCall) -> Json {
    json!({
        "type": "function",
        "id": c.id,
        "function": { "name": c.name, "arguments": c.args.to_json().to_string() },
    })
}

/// A decode error at `path` of the answer from `url`.
pub(super) fn decode(url: &str, path: impl Into<String>, message: impl Into<String>) -> Error {
    Error::Decode {
        url: url.to_owned(),
        path: path.into(),
        message: message.into(),
    }
}

/// A non-streamed answer as an AI message (`ChatOpenAI`'s fields and metadata).
pub(super) fn parse_completion(url: &str, body: &Json) -> Result<Message> {
    if let Some(e) = body.get("error") {
        return Err(decode(
            url,
            "error",
            format!("the server answered an error: {e}"),
        ));
    }
    let choice = body
        .get("choices")
        .and_then(|c| c.get(0))
        .ok_or_else(|| decode(url, "choices", "no choice in the answer"))?;
    let message = choice
        .get("message")
        .filter(|m| m.is_object())
        .ok_or_else(|| decode(url, "choices[0].message", "missing or not an object"))?;
    let content = match message.get("content") {
        None | Some(Json::Null) => Value::from(""),
        Some(Json::String(s)) => Value::from(s.as_str()),
        Some(other @ Json::Array(_)) => Value::from(other.clone()),
        Some(other) => {
            return Err(decode(
                url,
                "choices[0].message.content",
                format!("expected text or content blocks, found {other}"),
            ));
        }
    };
    let (tool_calls, invalid_tool_calls) = parse_tool_calls(url, message.get("tool_calls"))?;
    let mut response_metadata = Map::new();
    response_metadata.insert(
        "token_usage",
        Value::from(body.get("usage").cloned().unwrap_or(Json::Null)),
    );
    response_metadata.insert("model_provider", "openai");
    response_metadata.insert("model_name", json_str(body.get("model")));
    response_metadata.insert(
        "system_fingerprint",
        json_str(body.get("system_fingerprint")),
    );
    if let Some(id) = body.get("id").and_then(Json::as_str) {
        response_metadata.insert("id", id);
    }
    response_metadata.insert(
        "finish_reason",
        Value::from(choice.get("finish_reason").cloned().unwrap_or(Json::Null)),
    );
    response_metadata.insert(
        "logprobs",
        Value::from(choice.get("logprobs").cloned().unwrap_or(Json::Null)),
    );
    let mut ai = Message::Ai {
        fields: stategraph_messages::MessageFields {
            content,
            response_metadata,
            ..Default::default()
        },
        tool_calls,
        invalid_tool_calls,
        usage_metadata: body.get("usage").map_or(Value::Null, usage_metadata),
    };
    // LangChain names an answer after the run that made it when the server gives no id.
    let id = message
        .get("id")
        .and_then(Json::as_str)
        .map_or_else(|| format!("lc_run--{}-0", uuid4()), str::to_owned);
    ai = ai.with_id(id);
    Ok(ai)
}

fn json_str(v: Option<&Json>) -> Value {
    Value::from(v.and_then(Json::as_str).unwrap_or_default())
}

/// An answer's `tool_calls`: those whose arguments are a JSON object, and the others as
/// LangChain's invalid tool calls (with the parse error).
fn parse_tool_calls(url: &str, calls: Option<&Json>) -> Result<(Vec<ToolCall>, Vec<Value>)> {
    let mut good = Vec::new();
    let mut bad = Vec::new();
    let Some(calls) = calls.filter(|c| !c.is_null()) else {
        return Ok((good, bad));
    };
    let calls = calls
        .as_array()
        .ok_or_else(|| decode(url, "choices[0].message.tool_calls", "not a list"))?;
    for (i, call) in calls.iter().enumerate() {
        let path = format!("choices[0].message.tool_calls[{i}]");
        let function = call
            .get("function")
            .ok_or_else(|| decode(url, &path, "no `function`"))?;
        let name = function
            .get("name")
            .and_then(Json::as_str)
            .ok_or_else(|| decode(url, format!("{path}.function.name"), "missing"))?;
        let id = call.get("id").and_then(Json::as_str).map(str::to_owned);
        let raw = function
            .get("arguments")
            .and_then(Json::as_str)
            .unwrap_or_default();
        let parsed: std::result::Result<Json, String> = if raw.trim().is_empty() {
            Ok(json!({}))
        } else {
            serde_json::from_str(raw).map_err(|e| e.to_string())
        };
        match parsed {
            Ok(args @ Json::Object(_)) => good.push(ToolCall {
                name: name.to_owned(),
                args: Value::from(args),
                id,
            }),
            other => {
                let why = match other {
                    Err(e) => format!("Received JSONDecodeError {e}"),
                    Ok(v) => format!("Received {v}, not an object"),
                };
                let mut m = Map::new();
                m.insert("name", name);
                m.insert("args", raw);
                m.insert("id", id);
                m.insert(
                    "error",
                    format!("Function {name} arguments:\n\n{raw}\n\nare not valid JSON. {why}"),
                );
                m.insert("type", "invalid_tool_call");
                bad.push(Value::Map(m));
            }
        }
    }
    Ok((good, bad))
}

/// OpenAI's `usage` as LangChain's `usage_metadata`.
pub(super) fn usage_metadata(usage: &Json) -> Value {
    let n = |v: Option<&Json>| v.and_then(Json::as_i64);
    let input = n(usage.get("prompt_tokens")).unwrap_or(0);
    let output = n(usage.get("completion_tokens")).unwrap_or(0);
    let total = n(usage.get("total_tokens")).unwrap_or(input + output);
    let detail = |outer: &str, inner: &str| n(usage.get(outer).and_then(|d| d.get(inner)));
    let mut input_details = Map::new();
    for (k, v) in [
        ("audio", detail("prompt_tokens_details", "audio_tokens")),
        (
            "cache_read",
            detail("prompt_tokens_details", "cached_tokens"),
        ),
        (
            "cache_creation",
            detail("prompt_tokens_details", "cache_write_tokens"),
        ),
    ] {
        if let Some(v) = v {
            input_details.insert(k, v);
        }
    }
    let mut output_details = Map::new();
    for (k, v) in [
        ("audio", detail("completion_tokens_details", "audio_tokens")),
        (
            "reasoning",
            detail("completion_tokens_details", "reasoning_tokens"),
        ),
    ] {
        if let Some(v) = v {
            output_details.insert(k, v);
        }
    }
    let mut m = Map::new();
    m.insert("input_tokens", input);
    m.insert("output_tokens", output);
    m.insert("total_tokens", total);
    m.insert("input_token_details", Value::Map(input_details));
    m.insert("output_token_details", Value::Map(output_details));
    Value::Map(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use stategraph_checkpoint::value;

    #[test]
    fn messages_go_out_as_chat_openai_sends_them() {
        let call = ToolCall {
            name: "weather".into(),
            args: value!({"city": "Paris"}),
            id: Some("c1".into()),
        };
        let config = OpenAiConfig::new("m").temperature(0.0);
        let r = ChatRequest::new([
            Message::system("be brief"),
            Message::human("hi"),
            Message::ai("", vec![call]),
            Message::tool("sunny", "c1"),
        ]);
        let body = request_body(&config, &r, true).unwrap();
        assert_eq!(
            body["messages"],
            json!([
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"type": "function", "id": "c1", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}}
                ]},
                {"role": "tool", "content": "sunny", "tool_call_id": "c1"},
            ])
        );
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        assert_eq!(body["temperature"], json!(0.0));
        assert!(request_body(&config, &ChatRequest::default(), false).is_err());
    }

    #[test]
    fn answers_come_back_as_ai_messages() {
        let body = json!({
            "id": "chatcmpl-1", "model": "m", "system_fingerprint": "fp",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}},
                    {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{oops"}}
                ]}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
        });
        let m = parse_completion("u", &body).unwrap();
        let Message::Ai {
            fields,
            tool_calls,
            invalid_tool_calls,
            usage_metadata,
        } = m
        else {
            panic!("not an AI message")
        };
        assert_eq!(tool_calls.len(), 1);
        assert_eq!(tool_calls[0].args, value!({"x": 1}));
        assert_eq!(invalid_tool_calls.len(), 1);
        assert_eq!(
            usage_metadata.as_map().unwrap().get("total_tokens"),
            Some(&value!(7))
        );
        assert_eq!(
            fields.response_metadata.get("finish_reason"),
            Some(&value!("tool_calls"))
        );
        assert!(fields.id.unwrap().starts_with("lc_run--"));
        let err = parse_completion("u", &json!({"choices": []})).unwrap_err();
        assert!(err.to_string().contains("no choice"), "{err}");
    }
}
