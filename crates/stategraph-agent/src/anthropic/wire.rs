//! The Messages API's requests, from LangChain messages as `ChatAnthropic` sends them: the
//! system messages as the top-level `system`, tool messages as `tool_result` blocks of a
//! user turn (runs of user turns merged into one), an AI message's tool calls as `tool_use`
//! blocks.

use serde_json::{Value as Json, json};
use stategraph_checkpoint::Value;
use stategraph_graph::stream::value_json;
use stategraph_messages::{Message, ToolCall};

use super::AnthropicConfig;
use crate::error::{Error, Result};
use crate::model::{ChatRequest, ToolChoice};

/// The JSON body of a request.
pub(super) fn request_body(
    config: &AnthropicConfig,
    r: &ChatRequest,
    stream: bool,
) -> Result<Json> {
    if r.messages.is_empty() {
        return Err(Error::InvalidRequest(
            "a chat request needs at least one message".into(),
        ));
    }
    let (system, messages) = format_messages(&r.messages)?;
    if messages.is_empty() {
        return Err(Error::InvalidRequest(
            "the Messages API needs a message besides the system prompt".into(),
        ));
    }
    let mut body = serde_json::Map::new();
    body.insert("model".into(), json!(config.model));
    body.insert("max_tokens".into(), json!(config.max_tokens));
    if let Some(system) = system {
        body.insert("system".into(), system);
    }
    body.insert("messages".into(), Json::Array(messages));
    if !r.tools.is_empty() {
        let tools = r.tools.iter().map(|t| {
            let mut tool = serde_json::Map::new();
            tool.insert("name".into(), json!(t.name));
            tool.insert("input_schema".into(), t.parameters.clone());
            if !t.description.is_empty() {
                tool.insert("description".into(), json!(t.description));
            }
            Json::Object(tool)
        });
        body.insert("tools".into(), Json::Array(tools.collect()));
    }
    let mut choice = r.tool_choice.as_ref().map(|c| match c {
        ToolChoice::Auto => json!({ "type": "auto" }),
        ToolChoice::None => json!({ "type": "none" }),
        ToolChoice::Required => json!({ "type": "any" }),
        ToolChoice::Tool(name) => json!({ "type": "tool", "name": name }),
    });
    if let Some(parallel) = r.parallel_tool_calls {
        let c = choice.get_or_insert_with(|| json!({ "type": "auto" }));
        if let Some(c) = c.as_object_mut() {
            c.insert("disable_parallel_tool_use".into(), json!(!parallel));
        }
    }
    if let Some(c) = choice {
        body.insert("tool_choice".into(), c);
    }
    if let Some(t) = config.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if !r.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(r.stop));
    }
    if stream {
        body.insert("stream".into(), json!(true));
    }
    if let Some(f) = &r.response_format {
        // Structured outputs as the API has them since they left beta (and as
        // langchain-anthropic sends them): `output_config.format`.
        body.insert(
            "output_config".into(),
            json!({ "format": { "type": "json_schema", "schema": f.schema } }),
        );
    }
    for (k, v) in &config.extra_body {
        body.insert(k.clone(), v.clone());
    }
    Ok(Json::Object(body))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    System,
    User,
    Assistant,
}

/// A turn before formatting: merged user and system turns, or one AI message.
struct Turn {
    role: Role,
    content: Json,
    tool_calls: Vec<ToolCall>,
    invalid_tool_calls: Vec<Value>,
    /// An AI message that came from Anthropic (its provider-specific blocks go back).
    anthropic: bool,
}

/// The top-level `system` and the `messages` of a conversation.
fn format_messages(messages: &[Message]) -> Result<(Option<Json>, Vec<Json>)> {
    let turns = merge(messages)?;
    let last_non_system = turns.iter().rposition(|t| t.role != Role::System);
    let mut system = None;
    let mut out = Vec::new();
    for (i, turn) in turns.into_iter().enumerate() {
        let invalid = |e: String| Error::InvalidRequest(format!("turn {i}: {e}"));
        if turn.role == Role::System {
            if system.is_some() {
                return Err(invalid(
                    "received multiple non-consecutive system messages".into(),
                ));
            }
            // A later system message applies to the whole conversation (hoisted, as
            // `ChatAnthropic` does for models without mid-conversation system turns).
            system = Some(format_system(turn.content));
            continue;
        }
        let ai = turn.role == Role::Assistant;
        let mut content = match turn.content {
            Json::String(s) => Json::String(s),
            Json::Array(blocks) => {
                let calls = ai.then_some(turn.tool_calls.as_slice());
                Json::Array(format_blocks(blocks, calls, turn.anthropic).map_err(invalid)?)
            }
            other => return Err(invalid(format!("content must be text or a list: {other}"))),
        };
        if ai && !(turn.tool_calls.is_empty() && turn.invalid_tool_calls.is_empty()) {
            content = with_tool_uses(content, &turn.tool_calls, &turn.invalid_tool_calls);
        }
        let last = Some(i) == last_non_system;
        if ai && last {
            rstrip_last_text(&mut content);
        }
        let empty = match &content {
            Json::String(s) => s.is_empty(),
            Json::Array(a) => a.is_empty(),
            _ => false,
        };
        if ai && empty && !last {
            // The API refuses empty turns except a final assistant one.
            continue;
        }
        let role = if ai { "assistant" } else { "user" };
        out.push(json!({ "role": role, "content": content }));
    }
    Ok((system, out))
}

/// The messages as turns: tool messages become `tool_result` blocks of a user turn, and runs
/// of user (or system) turns merge into one turn of blocks.
fn merge(messages: &[Message]) -> Result<Vec<Turn>> {
    let mut turns: Vec<Turn> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let turn = turn(m).map_err(|e| Error::InvalidRequest(format!("messages[{i}]: {e}")))?;
        match turns.last_mut() {
            Some(last) if last.role == turn.role && turn.role != Role::Assistant => {
                let mut blocks = text_blocks(std::mem::take(&mut last.content));
                blocks.extend(text_blocks(turn.content));
                last.content = Json::Array(blocks);
            }
            _ => turns.push(turn),
        }
    }
    Ok(turns)
}

fn turn(m: &Message) -> Result<Turn, String> {
    let f = m.fields();
    let content = match &f.content {
        Value::Null => json!(""),
        other => value_json(other),
    };
    let plain = |role| Turn {
        role,
        content: content.clone(),
        tool_calls: Vec::new(),
        invalid_tool_calls: Vec::new(),
        anthropic: false,
    };
    Ok(match m {
        Message::Human(_) => plain(Role::User),
        Message::System(_) => plain(Role::System),
        Message::Ai {
            tool_calls,
            invalid_tool_calls,
            ..
        } => Turn {
            tool_calls: tool_calls.clone(),
            invalid_tool_calls: invalid_tool_calls.clone(),
            anthropic: f
                .response_metadata
                .get("model_provider")
                .and_then(Value::as_str)
                == Some("anthropic"),
            ..plain(Role::Assistant)
        },
        Message::AiChunk(c) => return turn(&c.clone().into_message()),
        Message::Tool {
            tool_call_id,
            status,
            ..
        } => {
            let all_results = content.as_array().is_some_and(|blocks| {
                !blocks.is_empty()
                    && blocks
                        .iter()
                        .all(|b| b.get("type").and_then(Json::as_str) == Some("tool_result"))
            });
            if all_results {
                return Ok(plain(Role::User));
            }
            let mut cache_control = None;
            let content = match content {
                Json::Array(blocks) => Json::Array(
                    blocks
                        .into_iter()
                        .map(|mut b| {
                            if let Some(c) =
                                b.as_object_mut().and_then(|o| o.remove("cache_control"))
                            {
                                cache_control = Some(c);
                            }
                            b
                        })
                        .collect(),
                ),
                other => other,
            };
            let mut result = serde_json::Map::new();
            result.insert("type".into(), json!("tool_result"));
            result.insert("content".into(), content);
            result.insert("tool_use_id".into(), json!(normalize_id(tool_call_id)));
            result.insert("is_error".into(), json!(status == "error"));
            if let Some(c) = cache_control {
                result.insert("cache_control".into(), c);
            }
            Turn {
                role: Role::User,
                content: json!([result]),
                tool_calls: Vec::new(),
                invalid_tool_calls: Vec::new(),
                anthropic: false,
            }
        }
        other => return Err(format!("cannot send a {other:?} to the Messages API")),
    })
}

/// A content as a list of blocks (text as one text block).
fn text_blocks(content: Json) -> Vec<Json> {
    match content {
        Json::Array(blocks) => blocks,
        Json::String(s) => vec![json!({ "type": "text", "text": s })],
        other => vec![other],
    }
}

/// A system content narrowed to what the API accepts there: text (other blocks are dropped).
fn format_system(content: Json) -> Json {
    match content {
        Json::Array(blocks) => Json::Array(
            blocks
                .into_iter()
                .filter_map(|b| match b {
                    Json::Object(o) if o.get("type").and_then(Json::as_str) == Some("text") => {
                        Some(text_block(&o))
                    }
                    Json::Object(_) => None,
                    Json::String(s) => Some(json!({ "type": "text", "text": s })),
                    other => Some(json!({ "type": "text", "text": other.to_string() })),
                })
                .collect(),
        ),
        other => other,
    }
}

/// A text block without LangChain's own fields (`id`, `index`, `annotations`).
fn text_block(block: &serde_json::Map<String, Json>) -> Json {
    let mut out = serde_json::Map::new();
    for (k, v) in block {
        if matches!(k.as_str(), "type" | "text" | "cache_control" | "citations") {
            out.insert(k.clone(), v.clone());
        }
    }
    Json::Object(out)
}

/// A message's content blocks as the API takes them. `calls` are an AI message's tool
/// calls (they replace its `tool_use` blocks of the same id).
fn format_blocks(
    blocks: Vec<Json>,
    calls: Option<&[ToolCall]>,
    anthropic: bool,
) -> Result<Vec<Json>, String> {
    let mut out = Vec::new();
    for block in blocks {
        let o = match block {
            Json::String(s) => {
                out.push(json!({ "type": "text", "text": s }));
                continue;
            }
            Json::Object(o) => o,
            other => return Err(format!("content blocks must be text or objects: {other}")),
        };
        let kind = o
            .get("type")
            .and_then(Json::as_str)
            .ok_or("a content block needs a `type`")?;
        let pick = |keys: &[&str]| {
            let picked = o.iter().filter(|(k, _)| keys.contains(&k.as_str()));
            Json::Object(picked.map(|(k, v)| (k.clone(), v.clone())).collect())
        };
        match kind {
            // Another provider's reasoning and calls, and refusals, have no Anthropic form.
            "reasoning" | "function_call" if !(calls.is_some() && anthropic) => {}
            "refusal" => {}
            "image_url" => {
                let url = o
                    .get("image_url")
                    .and_then(|i| i.get("url").or(Some(i)))
                    .and_then(Json::as_str)
                    .unwrap_or_default();
                out.push(json!({ "type": "image", "source": image_source(url)? }));
            }
            "tool_use" => {
                let id = o.get("id").and_then(Json::as_str).unwrap_or_default();
                let same: Vec<&ToolCall> = calls
                    .unwrap_or_default()
                    .iter()
                    .filter(|c| c.id.as_deref() == Some(id))
                    .collect();
                if !same.is_empty() && o.get("caller").is_none_or(Json::is_null) {
                    out.extend(same.into_iter().map(tool_use));
                    continue;
                }
                let input = match o.get("input") {
                    Some(i @ Json::Object(m)) if !m.is_empty() => i.clone(),
                    _ => o
                        .get("partial_json")
                        .and_then(Json::as_str)
                        .map(|p| if p.is_empty() { "{}" } else { p })
                        .and_then(|p| serde_json::from_str(p).ok())
                        .unwrap_or_else(|| json!({})),
                };
                let name = o.get("name").cloned().unwrap_or(Json::Null);
                let mut b = json!({ "type": "tool_use", "name": name, "input": input, "id": normalize_id(id) });
                if let Some(b) = b.as_object_mut()
                    && let Some(caller) = o.get("caller").filter(|c| !c.is_null())
                {
                    b.insert("caller".into(), caller.clone());
                }
                out.push(b);
            }
            "server_tool_use" | "mcp_tool_use" => out.push(pick(&[
                "type",
                "id",
                "input",
                "name",
                "server_name",
                "cache_control",
            ])),
            "text" => {
                // The API refuses empty text blocks.
                let text = o.get("text").and_then(Json::as_str).unwrap_or_default();
                if !text.trim().is_empty() {
                    out.push(text_block(&o));
                }
            }
            "thinking" => {
                let mut b = pick(&["type", "thinking", "cache_control", "signature"]);
                if let Some(b) = b.as_object_mut()
                    && b.contains_key("signature")
                    && !b.contains_key("thinking")
                {
                    b.insert("thinking".into(), json!(""));
                }
                out.push(b);
            }
            "redacted_thinking" => out.push(pick(&["type", "cache_control", "data"])),
            "tool_result" => {
                let mut b = o.clone();
                let inner = b.get("content").cloned().unwrap_or(Json::Null);
                if let Json::Array(blocks) = inner {
                    b.insert(
                        "content".into(),
                        Json::Array(format_blocks(blocks, None, false)?),
                    );
                }
                if let Some(id) = b.get("tool_use_id").and_then(Json::as_str) {
                    let id = normalize_id(id);
                    b.insert("tool_use_id".into(), json!(id));
                }
                out.push(Json::Object(b));
            }
            _ => out.push(Json::Object(o)),
        }
    }
    Ok(out)
}

/// An AI message's content with a `tool_use` block for each tool call (and each invalid one
/// with an id and a name) it does not hold yet.
fn with_tool_uses(content: Json, calls: &[ToolCall], invalid: &[Value]) -> Json {
    let mut blocks = match content {
        Json::String(s) if s.is_empty() => Vec::new(),
        Json::String(s) => vec![json!({ "type": "text", "text": s })],
        Json::Array(a) => a,
        other => vec![other],
    };
    let mut ids: Vec<String> = blocks
        .iter()
        .filter(|b| b.get("type").and_then(Json::as_str) == Some("tool_use"))
        .filter_map(|b| b.get("id").and_then(Json::as_str).map(str::to_owned))
        .collect();
    for c in calls {
        let id = normalize_id(c.id.as_deref().unwrap_or_default());
        if !ids.contains(&id) {
            blocks.push(tool_use(c));
            ids.push(id);
        }
    }
    for bad in invalid {
        let text = |k| bad.as_map().and_then(|m| m.get(k)).and_then(Value::as_str);
        let (Some(id), Some(name)) = (text("id"), text("name")) else {
            continue;
        };
        let id = normalize_id(id);
        if id.is_empty() || name.is_empty() || ids.contains(&id) {
            continue;
        }
        let args =
            serde_json::from_str::<Json>(text("args").filter(|a| !a.is_empty()).unwrap_or("{}"))
                .ok()
                .filter(Json::is_object)
                .unwrap_or_else(|| json!({}));
        blocks.push(json!({ "type": "tool_use", "name": name, "input": args, "id": id }));
        ids.push(id);
    }
    Json::Array(blocks)
}

fn tool_use(c: &ToolCall) -> Json {
    json!({
        "type": "tool_use",
        "name": c.name,
        "input": c.args.to_json(),
        "id": normalize_id(c.id.as_deref().unwrap_or_default()),
    })
}

/// The final assistant turn may not end in white space.
fn rstrip_last_text(content: &mut Json) {
    match content {
        Json::String(s) => s.truncate(s.trim_end().len()),
        Json::Array(blocks) => {
            if let Some(Json::Object(last)) = blocks.last_mut()
                && last.get("type").and_then(Json::as_str) == Some("text")
                && let Some(Json::String(s)) = last.get_mut("text")
            {
                s.truncate(s.trim_end().len());
            }
        }
        _ => {}
    }
}

/// An image URL (`data:image/…;base64,…` or `http(s)://…`) as Anthropic's image source.
fn image_source(url: &str) -> Result<Json, String> {
    if let Some(rest) = url.strip_prefix("data:")
        && let Some((media_type, data)) = rest.split_once(";base64,")
        && media_type.starts_with("image/")
        && !data.is_empty()
    {
        return Ok(json!({ "type": "base64", "media_type": media_type, "data": data }));
    }
    if url.starts_with("http://") || url.starts_with("https://") {
        return Ok(json!({ "type": "url", "url": url }));
    }
    Err("an image URL must be http(s):// or a base64 data:image/… URL".into())
}

/// A tool call id as the API accepts it (`^[a-zA-Z0-9_-]+$`): others (minted by other
/// providers, e.g. `functions.f:0`) become `toolu_` and 24 hex digits of their SHA-256, the
/// same on every turn, as `ChatAnthropic` rewrites them.
pub(super) fn normalize_id(id: &str) -> String {
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if id.is_empty() || id.chars().all(valid) {
        return id.to_owned();
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, id.as_bytes());
    let hex: String = digest
        .as_ref()
        .iter()
        .take(12)
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("toolu_{hex}")
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
