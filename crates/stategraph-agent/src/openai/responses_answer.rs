//! A Responses API answer as the AI message langchain-openai builds with its default output
//! version (`responses/v1`): content blocks (`text` with the message item's id,
//! `function_call` items as they came), tool calls from the function calls, the response's id
//! as the message id.

use serde_json::{Value as Json, json};
use stategraph_checkpoint::{Map, Value};
use stategraph_messages::{Message, MessageFields, ToolCall};

use super::responses::rename_key;
use super::wire::decode;
use crate::error::Result;

/// LangChain reserves `index` in blocks: a file citation's is stored as `file_index`.
pub(super) fn annotation_to_lc(a: &Json) -> Json {
    rename_key(a, "index", "file_index")
}

/// A whole Responses API answer as an AI message. `structured`: the request asked for a
/// JSON schema (its JSON answer then also goes to `additional_kwargs.parsed`).
pub(super) fn parse_response(url: &str, body: &Json, structured: bool) -> Result<Message> {
    if let Some(e) = body.get("error").filter(|e| !e.is_null()) {
        return Err(decode(
            url,
            "error",
            format!("the server answered an error: {e}"),
        ));
    }
    let output = body
        .get("output")
        .and_then(Json::as_array)
        .ok_or_else(|| decode(url, "output", "missing or not a list"))?;
    let mut response_metadata = Map::new();
    for k in [
        "id",
        "created_at",
        "incomplete_details",
        "metadata",
        "model",
        "object",
        "service_tier",
        "status",
        "user",
    ] {
        let Some(v) = body.get(k).filter(|v| !v.is_null()) else {
            continue;
        };
        // The SDK's `created_at` is a float.
        let v = match v.as_f64() {
            Some(t) if k == "created_at" => json!(t),
            _ => v.clone(),
        };
        response_metadata.insert(k, Value::from(v));
    }
    response_metadata.insert("model_provider", "openai");
    let model = response_metadata
        .get("model")
        .cloned()
        .unwrap_or(Value::Null);
    response_metadata.insert("model_name", model);
    let mut blocks = Vec::new();
    let mut tool_calls = Vec::new();
    let mut invalid_tool_calls = Vec::new();
    let mut output_text = String::new();
    for (i, item) in output.iter().enumerate() {
        let path = format!("output[{i}]");
        let kind = item
            .get("type")
            .and_then(Json::as_str)
            .ok_or_else(|| decode(url, format!("{path}.type"), "missing"))?;
        match kind {
            "message" => {
                let parts = item.get("content").and_then(Json::as_array);
                for part in parts.into_iter().flatten() {
                    let mut block = serde_json::Map::new();
                    match part.get("type").and_then(Json::as_str) {
                        Some("output_text") => {
                            let text = part.get("text").and_then(Json::as_str).unwrap_or_default();
                            output_text.push_str(text);
                            let annotations: Vec<Json> = part
                                .get("annotations")
                                .and_then(Json::as_array)
                                .map(|a| a.iter().map(annotation_to_lc).collect())
                                .unwrap_or_default();
                            block.insert("type".into(), json!("text"));
                            block.insert("text".into(), json!(text));
                            block.insert("annotations".into(), Json::Array(annotations));
                        }
                        Some("refusal") => {
                            block.insert("type".into(), json!("refusal"));
                            block.insert(
                                "refusal".into(),
                                part.get("refusal").cloned().unwrap_or(Json::Null),
                            );
                        }
                        _ => continue,
                    }
                    block.insert("id".into(), item.get("id").cloned().unwrap_or(Json::Null));
                    if let Some(p) = item.get("phase").filter(|p| !p.is_null()) {
                        block.insert("phase".into(), p.clone());
                    }
                    blocks.push(Json::Object(block));
                }
            }
            "function_call" => {
                blocks.push(function_call_block(item));
                let text = |k: &str| item.get(k).and_then(Json::as_str);
                let name =
                    text("name").ok_or_else(|| decode(url, format!("{path}.name"), "missing"))?;
                let raw = text("arguments").unwrap_or_default();
                let id = text("call_id").map(str::to_owned);
                match serde_json::from_str::<Json>(raw) {
                    Ok(args @ Json::Object(_)) => tool_calls.push(ToolCall {
                        name: name.to_owned(),
                        args: Value::from(args),
                        id,
                    }),
                    other => {
                        let error = match other {
                            Err(e) => e.to_string(),
                            Ok(v) => format!("the arguments {v} are not an object"),
                        };
                        let mut m = Map::new();
                        m.insert("type", "invalid_tool_call");
                        m.insert("name", name);
                        m.insert("args", raw);
                        m.insert("id", id);
                        m.insert("error", error);
                        invalid_tool_calls.push(Value::Map(m));
                    }
                }
            }
            "custom_tool_call" => {
                blocks.push(non_null(item));
                let text = |k: &str| item.get(k).and_then(Json::as_str).map(str::to_owned);
                tool_calls.push(ToolCall {
                    name: text("name").unwrap_or_default(),
                    args: Value::from(json!({ "__arg1": text("input").unwrap_or_default() })),
                    id: text("call_id"),
                });
            }
            "reasoning"
            | "compaction"
            | "web_search_call"
            | "file_search_call"
            | "computer_call"
            | "code_interpreter_call"
            | "mcp_call"
            | "mcp_list_tools"
            | "mcp_approval_request"
            | "image_generation_call"
            | "tool_search_call"
            | "tool_search_output"
            | "apply_patch_call"
            | "apply_patch_call_output" => {
                blocks.push(non_null(item));
            }
            _ => {}
        }
    }
    let mut additional_kwargs = Map::new();
    let json_format = body
        .get("text")
        .and_then(|t| t.get("format"))
        .and_then(|f| f.get("type"))
        .and_then(Json::as_str)
        == Some("json_schema");
    if structured
        && json_format
        && !output_text.is_empty()
        && let Ok(parsed) = serde_json::from_str::<Json>(&output_text)
    {
        additional_kwargs.insert("parsed", Value::from(parsed));
    }
    let usage = body.get("usage").filter(|u| u.is_object());
    let tier = body.get("service_tier").and_then(Json::as_str);
    let message = Message::Ai {
        fields: MessageFields {
            content: Value::from(Json::Array(blocks)),
            additional_kwargs,
            response_metadata,
            id: body.get("id").and_then(Json::as_str).map(str::to_owned),
            ..MessageFields::default()
        },
        tool_calls,
        invalid_tool_calls,
        usage_metadata: usage.map_or(Value::Null, |u| usage_metadata(u, tier)),
    };
    Ok(message)
}

/// An item without its null fields.
fn non_null(item: &Json) -> Json {
    match item.as_object() {
        Some(o) => Json::Object(
            o.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        None => item.clone(),
    }
}

/// A `function_call` item as the content block langchain-openai keeps: the SDK's field order
/// (`arguments`, `call_id`, `name`, `type`, `id`, …), no null fields.
fn function_call_block(item: &Json) -> Json {
    let item = non_null(item);
    let Some(o) = item.as_object() else {
        return item;
    };
    let order = [
        "arguments",
        "call_id",
        "name",
        "type",
        "id",
        "async",
        "caller",
        "namespace",
        "status",
    ];
    let mut out = serde_json::Map::new();
    for k in order {
        if let Some(v) = o.get(k) {
            out.insert(k.into(), v.clone());
        }
    }
    for (k, v) in o {
        if !out.contains_key(k) {
            out.insert(k.clone(), v.clone());
        }
    }
    Json::Object(out)
}

/// The Responses API's `usage` as LangChain's `usage_metadata` (with the `priority_`/`flex_`
/// detail keys of those service tiers).
pub(super) fn usage_metadata(usage: &Json, service_tier: Option<&str>) -> Value {
    let n = |v: Option<&Json>| v.and_then(Json::as_i64);
    let input = n(usage.get("input_tokens")).unwrap_or(0);
    let output = n(usage.get("output_tokens")).unwrap_or(0);
    let total = n(usage.get("total_tokens")).unwrap_or(input + output);
    let tier = service_tier.filter(|t| matches!(*t, "priority" | "flex"));
    let prefix = tier.map_or(String::new(), |t| format!("{t}_"));
    let reasoning = n(usage
        .get("output_tokens_details")
        .and_then(|d| d.get("reasoning_tokens")));
    let details = usage.get("input_tokens_details");
    let cache_read = n(details.and_then(|d| d.get("cached_tokens")));
    let cache_creation = n(details.and_then(|d| d.get("cache_write_tokens")));
    let mut output_details = Map::new();
    if let Some(r) = reasoning {
        output_details.insert(format!("{prefix}reasoning"), r);
    }
    let mut input_details = Map::new();
    if let Some(c) = cache_read {
        input_details.insert(format!("{prefix}cache_read"), c);
    }
    if let Some(c) = cache_creation {
        input_details.insert(format!("{prefix}cache_creation"), c);
    }
    if let Some(t) = tier {
        output_details.insert(t, output - reasoning.unwrap_or(0));
        input_details.insert(t, input - cache_read.unwrap_or(0));
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
#[path = "responses_answer_tests.rs"]
mod tests;
