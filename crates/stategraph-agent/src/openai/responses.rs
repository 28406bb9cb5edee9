//! OpenAI's Responses API requests (`ChatOpenAI(use_responses_api=True)`): messages as
//! `input` items, tools, tool choice and structured output as langchain-openai sends them.

use serde_json::{Value as Json, json};
use stategraph_checkpoint::Value;
use stategraph_graph::stream::value_json;
use stategraph_messages::{Message, ToolCall};

use super::OpenAiConfig;
use crate::error::{Error, Result};
use crate::model::{ChatRequest, ToolChoice};

/// The JSON body of a request. `stop` and `seed` have no Responses form and are left out
/// (langchain-openai drops `stop`, and OpenAI's SDK refuses `seed`); a server that takes a
/// seed gets it with [`OpenAiConfig::extra_body`].
pub(super) fn request_body(config: &OpenAiConfig, r: &ChatRequest, stream: bool) -> Result<Json> {
    if r.messages.is_empty() {
        return Err(Error::InvalidRequest(
            "a chat request needs at least one message".into(),
        ));
    }
    let mut input = Vec::new();
    for (i, m) in r.messages.iter().enumerate() {
        push_items(&mut input, m)
            .map_err(|e| Error::InvalidRequest(format!("messages[{i}]: {e}")))?;
    }
    let mut body = serde_json::Map::new();
    body.insert("model".into(), json!(config.model));
    body.insert("input".into(), Json::Array(input));
    if stream {
        body.insert("stream".into(), json!(true));
    }
    if let Some(t) = config.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(n) = config.max_tokens {
        body.insert("max_output_tokens".into(), json!(n));
    }
    if !r.tools.is_empty() {
        let tools = r.tools.iter().map(|t| {
            json!({
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
            })
        });
        body.insert("tools".into(), Json::Array(tools.collect()));
    }
    if let Some(choice) = &r.tool_choice {
        let v = match choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Tool(name) => json!({ "type": "function", "name": name }),
        };
        body.insert("tool_choice".into(), v);
    }
    if let Some(p) = r.parallel_tool_calls {
        body.insert("parallel_tool_calls".into(), json!(p));
    }
    if let Some(f) = &r.response_format {
        let mut format = serde_json::Map::new();
        format.insert("type".into(), json!("json_schema"));
        format.insert("name".into(), json!(f.name));
        if !f.description.is_empty() {
            format.insert("description".into(), json!(f.description));
        }
        if let Some(strict) = f.strict {
            format.insert("strict".into(), json!(strict));
        }
        format.insert("schema".into(), f.schema.clone());
        body.insert("text".into(), json!({ "format": format }));
    }
    for (k, v) in &config.extra_body {
        body.insert(k.clone(), v.clone());
    }
    Ok(Json::Object(body))
}

/// The input items of one message, as langchain-openai makes them.
fn push_items(input: &mut Vec<Json>, m: &Message) -> Result<(), String> {
    let f = m.fields();
    let content = match &f.content {
        Value::Null => json!(""),
        other => value_json(other),
    };
    match m {
        Message::Human(_) | Message::System(_) => {
            let role = match m {
                Message::Human(_) => "user",
                _ if f
                    .additional_kwargs
                    .get("__openai_role__")
                    .and_then(Value::as_str)
                    == Some("developer") =>
                {
                    "developer"
                }
                _ => "system",
            };
            let content = match content {
                Json::Array(blocks) => {
                    let blocks: Vec<Json> = blocks.into_iter().filter_map(input_block).collect();
                    if blocks.is_empty() {
                        return Ok(());
                    }
                    Json::Array(blocks)
                }
                other => other,
            };
            input.push(json!({ "content": content, "role": role, "type": "message" }));
        }
        Message::Ai {
            tool_calls,
            invalid_tool_calls,
            ..
        } => push_ai(input, content, tool_calls, invalid_tool_calls),
        Message::AiChunk(c) => return push_items(input, &c.clone().into_message()),
        Message::Tool { tool_call_id, .. } => {
            let output = match content {
                Json::String(s) => Json::String(s),
                Json::Array(blocks) if blocks.iter().all(is_tool_output_block) => {
                    Json::Array(blocks.into_iter().filter_map(input_block).collect())
                }
                other => Json::String(other.to_string()),
            };
            input.push(json!({ "type": "function_call_output", "output": output, "call_id": tool_call_id }));
        }
        other => return Err(format!("cannot send a {other:?} to the Responses API")),
    }
    Ok(())
}

/// An AI message's items: its text as `output_text` of assistant message items (blocks of
/// one stored message item id together again), its stored reasoning and function call items,
/// then a `function_call` item for each tool call not among them.
fn push_ai(input: &mut Vec<Json>, content: Json, calls: &[ToolCall], invalid: &[Value]) {
    let has_calls = !(calls.is_empty() && invalid.is_empty());
    match content {
        Json::String(s) if has_calls && s.is_empty() => {}
        Json::String(s) => input.push(json!({
            "type": "message",
            "role": "assistant",
            "content": [{ "type": "output_text", "text": s, "annotations": [] }],
        })),
        Json::Array(blocks) => {
            for block in blocks {
                let Json::Object(mut b) = block else { continue };
                let kind = b.get("type").and_then(Json::as_str).unwrap_or_default();
                match kind {
                    "text" | "output_text" | "refusal" => {
                        let new = if kind == "refusal" {
                            json!({ "type": "refusal", "refusal": b.get("refusal").cloned().unwrap_or(Json::Null) })
                        } else {
                            let Some(text) = b.get("text").filter(|t| !t.is_null()) else {
                                continue;
                            };
                            let annotations: Vec<Json> = b
                                .get("annotations")
                                .and_then(Json::as_array)
                                .map(|a| a.iter().map(annotation_from_lc).collect())
                                .unwrap_or_default();
                            json!({ "type": "output_text", "text": text, "annotations": annotations })
                        };
                        let id = b.get("id").and_then(Json::as_str);
                        let phase = b.get("phase").filter(|p| !p.is_null()).cloned();
                        let same = id.and_then(|id| {
                            input
                                .iter_mut()
                                .find(|item| item.get("id").and_then(Json::as_str) == Some(id))
                        });
                        if let Some(Json::Object(item)) = same {
                            let list = item.entry("content").or_insert_with(|| json!([]));
                            if let Some(list) = list.as_array_mut() {
                                list.push(new);
                            }
                            if let Some(p) = phase {
                                item.insert("phase".into(), p);
                            }
                            continue;
                        }
                        let mut item = serde_json::Map::new();
                        item.insert("type".into(), json!("message"));
                        item.insert("content".into(), json!([new]));
                        item.insert("role".into(), json!("assistant"));
                        // LangChain's own ids (`lc_…`) are not the API's.
                        if let Some(id) = id.filter(|id| !id.starts_with("lc_")) {
                            item.insert("id".into(), json!(id));
                        }
                        if let Some(p) = phase {
                            item.insert("phase".into(), p);
                        }
                        input.push(Json::Object(item));
                    }
                    "reasoning"
                    | "compaction"
                    | "function_call"
                    | "custom_tool_call"
                    | "web_search_call"
                    | "file_search_call"
                    | "computer_call"
                    | "code_interpreter_call"
                    | "mcp_call"
                    | "mcp_list_tools"
                    | "mcp_approval_request"
                    | "tool_search_call"
                    | "tool_search_output"
                    | "apply_patch_call"
                    | "apply_patch_call_output" => {
                        b.remove("index");
                        if let Some(Json::Array(summary)) = b.get_mut("summary") {
                            for part in summary {
                                if let Some(part) = part.as_object_mut() {
                                    part.remove("index");
                                }
                            }
                        }
                        input.push(Json::Object(b));
                    }
                    "image_generation_call" => {
                        input.push(json!({ "type": "image_generation_call", "id": b.get("id") }));
                    }
                    // Other providers' blocks (Anthropic's `tool_use`, …) have no item here.
                    _ => {}
                }
            }
        }
        _ => {}
    }
    let present: Vec<String> = input
        .iter()
        .filter(|i| {
            matches!(
                i.get("type").and_then(Json::as_str),
                Some("function_call" | "custom_tool_call")
            )
        })
        .filter_map(|i| i.get("call_id").and_then(Json::as_str).map(str::to_owned))
        .collect();
    let good = calls
        .iter()
        .map(|c| (c.id.clone(), c.name.clone(), py_dumps(&c.args.to_json())));
    let bad = invalid.iter().map(|v| {
        let text = |k| v.as_map().and_then(|m| m.get(k)).and_then(Value::as_str);
        let args = text("args").unwrap_or_default().to_owned();
        (
            text("id").map(str::to_owned),
            text("name").unwrap_or_default().to_owned(),
            args,
        )
    });
    for (id, name, arguments) in good.chain(bad) {
        if id.as_ref().is_some_and(|id| present.contains(id)) {
            continue;
        }
        input.push(
            json!({ "type": "function_call", "name": name, "arguments": arguments, "call_id": id }),
        );
    }
}

/// A user or system content block as an input block (`text` → `input_text`, `image_url` →
/// `input_image`, `file` → `input_file`; `input_*` as they are); others have none.
fn input_block(block: Json) -> Option<Json> {
    let Json::Object(mut b) = block else {
        return match block {
            Json::String(s) => Some(json!({ "type": "input_text", "text": s })),
            _ => None,
        };
    };
    let cache = b.remove("prompt_cache_breakpoint");
    let mut out = match b.get("type").and_then(Json::as_str)? {
        "text" => json!({ "type": "input_text", "text": b.get("text")? }),
        "image_url" => {
            let image = b.get("image_url")?;
            let url = image.get("url").unwrap_or(image);
            let mut o = json!({ "type": "input_image", "image_url": url });
            if let (Some(o), Some(d)) = (o.as_object_mut(), image.get("detail")) {
                o.insert("detail".into(), d.clone());
            }
            o
        }
        "file" => {
            let mut o = serde_json::Map::new();
            o.insert("type".into(), json!("input_file"));
            if let Some(Json::Object(file)) = b.get("file") {
                o.extend(file.clone());
            }
            Json::Object(o)
        }
        "input_text" | "input_image" | "input_file" => Json::Object(b),
        _ => return None,
    };
    if let (Some(o), Some(c)) = (out.as_object_mut(), cache) {
        o.insert("prompt_cache_breakpoint".into(), c);
    }
    Some(out)
}

fn is_tool_output_block(b: &Json) -> bool {
    matches!(
        b.get("type").and_then(Json::as_str),
        Some("input_text" | "input_image" | "input_file" | "text" | "image_url" | "file")
    )
}

/// LangChain reserves `index` in blocks: a file citation's is stored as `file_index`.
fn annotation_from_lc(a: &Json) -> Json {
    rename_key(a, "file_index", "index")
}

pub(super) fn rename_key(a: &Json, from: &str, to: &str) -> Json {
    match a.as_object() {
        Some(o)
            if o.get("type").and_then(Json::as_str) == Some("file_citation")
                && o.contains_key(from) =>
        {
            Json::Object(
                o.iter()
                    .map(|(k, v)| (if k == from { to.to_owned() } else { k.clone() }, v.clone()))
                    .collect(),
            )
        }
        _ => a.clone(),
    }
}

/// JSON as Python's `json.dumps` writes it (`", "` and `": "` between items), as
/// langchain-openai writes tool call arguments.
pub(super) fn py_dumps(v: &Json) -> String {
    match v {
        Json::Array(a) => {
            let items: Vec<String> = a.iter().map(py_dumps).collect();
            format!("[{}]", items.join(", "))
        }
        Json::Object(o) => {
            let items: Vec<String> = o
                .iter()
                .map(|(k, v)| format!("{}: {}", Json::String(k.clone()), py_dumps(v)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
#[path = "responses_tests.rs"]
mod tests;
